package bundle

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Decode must tell a pod to mount exactly what Build tells the router
// Deployment to mount, for every kind of mount.
func TestDecodeMatchesBuild(t *testing.T) {
	pvc := &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}}
	tests := []struct {
		name string
		in   Input
	}{
		{"router only", Input{Router: router("acme")}},
		{"mounts, secrets and exclusions", Input{
			Router: router("acme", func(r *v1alpha1.ContextRouter) {
				r.Spec.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: "http://emb:8080/v1/embeddings", Model: "m",
					APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "openai", Key: "api-key"}}
			}),
			Routes: []v1alpha1.ContextRoute{
				route("docs", "", "relative", "absolute", "shares-path", "on-claim", "no-volume"),
				route("search", `"kb" in tags`, "kb", "wiki-git"),
				route("broken", "", "reserved"),
				route("missing", "", "nowhere"),
			},
			Sources: []v1alpha1.ContextSource{
				directory("relative", "docs", configMapVolume("hr-docs")),
				directory("absolute", "/srv/docs/", configMapVolume("fin-docs")),
				directory("shares-path", "/srv/docs", configMapVolume("fin-docs")),
				directory("on-claim", "/srv/wiki", pvc),
				directory("no-volume", "/opt/baked-in", nil),
				directory("reserved", "/etc/contextrouter/secrets/x", configMapVolume("x")),
				httpSource("kb", "kb-token", "shared"),
				gitSource("wiki-git", "git-creds"),
				httpSource("unused", "never-mounted"),
			},
			Permissions: []v1alpha1.AgentPermission{permission("hr", []string{"hr-*"}, "relative"), permission("all", []string{"*"})},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			built := mustBuild(t, tt.in)
			got, err := Decode(built.Data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.Namespace != built.Namespace || got.Router != built.Router || got.Hash != built.Hash || string(got.Data) != string(built.Data) {
				t.Errorf("Decode names %s/%s hash %s, Build %s/%s hash %s", got.Namespace, got.Router, got.Hash, built.Namespace, built.Router, built.Hash)
			}
			for _, f := range []struct {
				field     string
				got, want []string
			}{
				{"Routes", got.Routes, built.Routes},
				{"Sources", got.Sources, built.Sources},
				{"Permissions", got.Permissions, built.Permissions},
				{"Secrets", got.Secrets, built.Secrets},
			} {
				if !slices.Equal(f.got, f.want) {
					t.Errorf("%s: Decode %q, Build %q", f.field, f.got, f.want)
				}
			}
			if !slices.Equal(got.Directories, built.Directories) {
				t.Errorf("Directories: Decode %+v, Build %+v", got.Directories, built.Directories)
			}
			if got.Verdicts != nil || got.CompileTime != 0 {
				t.Errorf("Decode invented Verdicts %v, CompileTime %v", got.Verdicts, got.CompileTime)
			}
			gv, gm := got.Volumes("acme-bundle")
			bv, bm := built.Volumes("acme-bundle")
			if !reflect.DeepEqual(gv, bv) || !reflect.DeepEqual(gm, bm) {
				t.Errorf("volumes differ:\ndecoded %v\nbuilt   %v", mountPaths(gm), mountPaths(bm))
			}
		})
	}

	// The case above has something of each kind; make sure of it.
	b := mustBuild(t, tests[1].in)
	if len(b.Directories) != 4 || len(b.Secrets) != 4 || len(b.Excluded()) == 0 || len(b.Permissions) != 2 {
		t.Errorf("the fixture lost coverage: directories %v, secrets %v, excluded %v, permissions %v",
			b.Directories, b.Secrets, b.Excluded(), b.Permissions)
	}
}

func TestDecodeErrors(t *testing.T) {
	one := string(mustBuild(t, Input{Router: router("acme")}).Data)
	tests := []struct {
		name, data, want string
	}{
		{"empty", "", "bundle: decoding bundle.yaml: 0 ContextRouters, want exactly 1"},
		{"two routers", one + "---\n" + strings.Replace(one, "name: acme", "name: other", 1),
			"bundle: decoding bundle.yaml: 2 ContextRouters, want exactly 1"},
		{"not YAML", "kind: [", "bundle: decoding bundle.yaml: "},
		{"unknown field", strings.Replace(one, "spec:", "spec:\n  noSuchField: 1", 1), "noSuchField"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Decode([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, %v; want an error containing %q", b, err, tt.want)
			}
		})
	}
}

func TestContainerSecurityContext(t *testing.T) {
	a, b := ContainerSecurityContext(), ContainerSecurityContext()
	if !*a.RunAsNonRoot || !*a.ReadOnlyRootFilesystem || *a.AllowPrivilegeEscalation ||
		!reflect.DeepEqual(a.Capabilities.Drop, []corev1.Capability{"ALL"}) || a.Privileged != nil {
		t.Errorf("security context %+v", a)
	}
	// Callers extend their copy; the next caller must not see it.
	a.Capabilities.Drop[0] = "NET_RAW"
	*a.RunAsNonRoot = false
	if b.Capabilities.Drop[0] != "ALL" || !*b.RunAsNonRoot || !*ContainerSecurityContext().RunAsNonRoot {
		t.Error("ContainerSecurityContext values share memory")
	}
}

func mountPaths(mounts []corev1.VolumeMount) []string {
	out := make([]string, len(mounts))
	for i, m := range mounts {
		out[i] = m.Name + ":" + m.MountPath
	}
	return out
}
