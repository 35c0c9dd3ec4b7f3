package bundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

const ns = "team-a"

func router(name string, mut ...func(*v1alpha1.ContextRouter)) *v1alpha1.ContextRouter {
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	r.Spec.DefaultAccess = v1alpha1.AccessAllow
	for _, m := range mut {
		m(r)
	}
	return r
}

func route(name, when string, srcs ...string) v1alpha1.ContextRoute {
	r := v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	r.Spec.When = when
	for _, s := range srcs {
		r.Spec.Sources = append(r.Spec.Sources, v1alpha1.LocalObjectReference{Name: s})
	}
	return r
}

func inline(name, content string) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline,
			Inline: &v1alpha1.InlineSource{Title: name, Content: content}},
	}
}

func directory(name, dirPath string, vol *v1alpha1.DirectoryVolume) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory,
			Directory: &v1alpha1.DirectorySource{Path: dirPath, Volume: vol}},
	}
}

func configMapVolume(name string) *v1alpha1.DirectoryVolume {
	return &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: name}}
}

func httpSource(name string, secrets ...string) v1alpha1.ContextSource {
	s := v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
			URL: "https://search.example.com/q?text={{query}}", TextField: "text",
		}},
	}
	for i, sec := range secrets {
		s.Spec.HTTPAPI.Headers = append(s.Spec.HTTPAPI.Headers, v1alpha1.HTTPHeader{
			Name:      fmt.Sprintf("X-Key-%d", i),
			ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.SecretKeySelector{Name: sec, Key: "token"}},
		})
	}
	return s
}

func gitSource(name, secret string) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{
			URL: "https://git.example.com/docs.git", Auth: &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: secret}},
		}},
	}
}

func permission(name string, agents []string, allow ...string) v1alpha1.AgentPermission {
	return v1alpha1.AgentPermission{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.AgentPermissionSpec{Agents: agents, AllowSources: allow, Default: v1alpha1.AccessDeny},
	}
}

func mustBuild(t *testing.T, in Input) *Bundle {
	t.Helper()
	b, err := Build(context.Background(), in)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

// load decodes a bundle the way a router pod does and compiles it, reading
// the sources for real.
func load(t *testing.T, b *Bundle) (*manifest.Set, *engine.Snapshot) {
	t.Helper()
	set, err := manifest.Parse(FileName, b.Data)
	if err != nil {
		t.Fatalf("manifest.Parse of the bundle: %v\n%s", err, b.Data)
	}
	if errs := set.Check().Errors(); len(errs) > 0 {
		t.Fatalf("bundle does not pass manifest checks: %v", errs)
	}
	cfg, err := set.Config("")
	if err != nil {
		t.Fatalf("Config: %v", err)
	}
	snap, err := engine.Compile(context.Background(), cfg, engine.Options{})
	if err != nil {
		t.Fatalf("engine.Compile of the bundle: %v", err)
	}
	return set, snap
}

func TestBuildRoundTrip(t *testing.T) {
	in := Input{
		Router: router("acme", func(r *v1alpha1.ContextRouter) {
			r.Spec.Variables = map[string]apiextensionsv1.JSON{"region": {Raw: []byte(`"eu"`)}}
		}),
		Routes: []v1alpha1.ContextRoute{
			route("hr", `containsAnyWord(text, ["vacation", "pto"]) && vars.region == "eu"`, "hr-docs"),
			route("always", "", "system-prompt"),
		},
		Sources: []v1alpha1.ContextSource{
			inline("system-prompt", "You are the acme assistant."),
			inline("hr-docs", "Every employee gets 25 vacation days a year."),
		},
		Permissions: []v1alpha1.AgentPermission{
			permission("hr", []string{"hr-assistant"}, "hr-docs", "system-prompt"),
			permission("everyone", []string{"*"}, "system-prompt"),
		},
	}
	b := mustBuild(t, in)

	sum := sha256.Sum256(b.Data)
	if want := "sha256:" + hex.EncodeToString(sum[:]); b.Hash != want {
		t.Errorf("Hash = %s, want sha256 of Data %s", b.Hash, want)
	}
	if got, want := b.Routes, []string{"always", "hr"}; !slices.Equal(got, want) {
		t.Errorf("Routes = %v, want %v", got, want)
	}
	if got, want := b.Sources, []string{"hr-docs", "system-prompt"}; !slices.Equal(got, want) {
		t.Errorf("Sources = %v, want %v", got, want)
	}
	if got, want := b.Permissions, []string{"everyone", "hr"}; !slices.Equal(got, want) {
		t.Errorf("Permissions = %v, want %v", got, want)
	}
	if len(b.Excluded()) != 0 {
		t.Errorf("Excluded = %v, want none", b.Excluded())
	}

	// Documents: kinds in order, names sorted, only apiVersion/kind/metadata/spec.
	var heads []string
	for _, doc := range strings.Split(string(b.Data), "\n---\n") {
		var kind, name string
		for _, line := range strings.Split(doc, "\n") {
			switch {
			case strings.HasPrefix(line, "kind: "):
				kind = strings.TrimPrefix(line, "kind: ")
			case strings.HasPrefix(line, "  name: "):
				name = strings.TrimPrefix(line, "  name: ")
			case line != "" && line[0] != ' ' && line[0] != '-':
				key, _, _ := strings.Cut(line, ":")
				if !slices.Contains([]string{"apiVersion", "kind", "metadata", "spec"}, key) {
					t.Errorf("document %s/%s has top-level field %q", kind, name, key)
				}
			}
		}
		heads = append(heads, kind+"/"+name)
	}
	wantHeads := []string{
		"ContextRouter/acme", "ContextRoute/always", "ContextRoute/hr",
		"ContextSource/hr-docs", "ContextSource/system-prompt",
		"AgentPermission/everyone", "AgentPermission/hr",
	}
	if !slices.Equal(heads, wantHeads) {
		t.Errorf("documents = %v, want %v", heads, wantHeads)
	}
	for _, forbidden := range []string{"status:", "uid:", "resourceVersion:", "managedFields:", "deployment:"} {
		if strings.Contains(string(b.Data), forbidden) {
			t.Errorf("bundle holds %q:\n%s", forbidden, b.Data)
		}
	}

	set, snap := load(t, b)
	if set.Namespace != ns {
		t.Errorf("namespace = %q, want %q", set.Namespace, ns)
	}
	if snap.Router() != "acme" {
		t.Errorf("compiled router = %q, want acme", snap.Router())
	}
	resp, err := snap.Query(context.Background(), engine.Request{Text: "how many vacation days?", Agent: "hr-assistant"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.MatchedRoutes, []string{"always", "hr"}) {
		t.Errorf("matched routes = %v, want [always hr]", resp.MatchedRoutes)
	}
	var got []string
	for _, c := range resp.Chunks {
		got = append(got, c.Source)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"hr-docs", "system-prompt"}) {
		t.Errorf("answer sources = %v, want [hr-docs system-prompt]", got)
	}
	// The permission from the bundle applies: "everyone" only reads the system prompt.
	resp, err = snap.Query(context.Background(), engine.Request{Text: "how many vacation days?", Agent: "guest"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.DeniedSources, []string{"hr-docs"}) {
		t.Errorf("guest denied sources = %v, want [hr-docs]", resp.DeniedSources)
	}
}

// TestBundleBytesDecodeToTheCompiledObjects checks what lets Build skip
// decoding its own output: the bytes decode to exactly the objects Build
// checked and compiled, so a pod compiles the same configuration.
func TestBundleBytesDecodeToTheCompiledObjects(t *testing.T) {
	withVars := router("acme", func(r *v1alpha1.ContextRouter) {
		r.Spec.Variables = map[string]apiextensionsv1.JSON{"tier": {Raw: []byte(`{"level": 2, "names": ["a", "b"]}`)}}
		r.Spec.Deployment.Replicas = ptr.To[int32](5)
	})
	git := gitSource("wiki", "git-creds")
	git.Spec.GitRepo.Exclude = []string{"drafts/**"}
	inputs := []Input{
		scaleInput(),
		{
			Router:  withVars,
			Routes:  []v1alpha1.ContextRoute{route("a", `"x" in tags`, "docs", "kb", "wiki")},
			Sources: []v1alpha1.ContextSource{directory("docs", "docs", configMapVolume("files")), httpSource("kb", "t"), git},
			Permissions: []v1alpha1.AgentPermission{func() v1alpha1.AgentPermission {
				p := permission("p", []string{"*"}, "docs")
				p.Spec.DenyPaths = []string{"secret/**"}
				p.Spec.SensitivityAction = v1alpha1.SensitivityActionRedact
				return p
			}()},
		},
	}
	for i, in := range inputs {
		b := mustBuild(t, in)
		if len(b.Excluded()) > 0 {
			t.Fatalf("input %d: unexpected exclusions %v", i, b.Excluded())
		}
		compiled := newBuilder(in).objects()
		set, err := manifest.Parse(FileName, b.Data)
		if err != nil {
			t.Fatal(err)
		}
		decoded := &objects{router: set.Routers[0], routes: set.Routes, sources: set.Sources, permissions: set.Permissions}
		for j, pair := range [][2]any{
			{compiled.router, decoded.router}, {compiled.routes, decoded.routes},
			{compiled.sources, decoded.sources}, {compiled.permissions, decoded.permissions},
		} {
			// JSON, not DeepEqual: variables are raw JSON, which a round
			// trip may re-space without changing a value.
			want, _ := json.MarshalIndent(pair[0], "", " ")
			got, _ := json.MarshalIndent(pair[1], "", " ")
			if string(want) != string(got) {
				t.Errorf("input %d, kind %d: decoded bundle differs from the compiled objects:\ncompiled %s\ndecoded  %s", i, j, want, got)
			}
		}
	}
}

func TestBuildDeterministic(t *testing.T) {
	in := Input{
		Router:      router("acme"),
		Routes:      []v1alpha1.ContextRoute{route("b", "", "s1"), route("a", `"x" in tags`, "s2", "s1"), route("c", "", "s3")},
		Sources:     []v1alpha1.ContextSource{inline("s3", "three"), inline("s1", "one"), inline("s2", "two")},
		Permissions: []v1alpha1.AgentPermission{permission("p2", []string{"*"}), permission("p1", []string{"x"}, "s1")},
	}
	first := mustBuild(t, in)
	rev := Input{Router: in.Router}
	for i := len(in.Routes) - 1; i >= 0; i-- {
		rev.Routes = append(rev.Routes, in.Routes[i])
	}
	for i := len(in.Sources) - 1; i >= 0; i-- {
		rev.Sources = append(rev.Sources, in.Sources[i])
	}
	for i := len(in.Permissions) - 1; i >= 0; i-- {
		rev.Permissions = append(rev.Permissions, in.Permissions[i])
	}
	second := mustBuild(t, rev)
	if first.Hash != second.Hash || string(first.Data) != string(second.Data) {
		t.Errorf("input order changed the bundle:\n%s\n---- vs ----\n%s", first.Data, second.Data)
	}

	// How the router runs is not part of the bundle.
	scaled := in
	scaled.Router = router("acme", func(r *v1alpha1.ContextRouter) {
		r.Spec.Deployment = v1alpha1.DeploymentSpec{Replicas: ptr.To[int32](7), Image: "example.com/router:v2"}
	})
	if b := mustBuild(t, scaled); b.Hash != first.Hash {
		t.Errorf("spec.deployment changed the bundle hash")
	}
	// A route change is.
	changed := in
	changed.Routes = slices.Clone(in.Routes)
	changed.Routes[0] = route("b", `"y" in tags`, "s1")
	if b := mustBuild(t, changed); b.Hash == first.Hash {
		t.Errorf("a changed route kept the bundle hash")
	}
}

func TestBuildLeavesOutBrokenRoutesAndSources(t *testing.T) {
	badGlob := directory("bad-dir", "/srv/docs", nil)
	badGlob.Spec.Directory.Include = []string{"docs/[a"}
	in := Input{
		Router: router("acme"),
		Routes: []v1alpha1.ContextRoute{
			route("good", `"hr" in tags`, "hr-docs"),
			route("bad-cel", `text.frobnicate()`, "hr-docs"),
			route("not-bool", `"text"`, "hr-docs"),
			route("missing", "", "hr-docs", "nowhere", "gone"),
			route("uses-bad-source", "", "bad-dir"),
			route("uses-only-orphan", "broken(", "orphan"),
		},
		Sources: []v1alpha1.ContextSource{inline("hr-docs", "HR"), badGlob, inline("orphan", "unused")},
	}
	b := mustBuild(t, in)
	if !slices.Equal(b.Routes, []string{"good"}) {
		t.Errorf("Routes = %v, want [good]", b.Routes)
	}
	if !slices.Equal(b.Sources, []string{"hr-docs"}) {
		t.Errorf("Sources = %v, want [hr-docs] (sources of left-out routes are not shipped)", b.Sources)
	}
	want := map[string]string{
		"ContextRoute/bad-cel":          "spec.when: ",
		"ContextRoute/not-bool":         "spec.when: ",
		"ContextRoute/missing":          `spec.sources[1].name: ContextSource "nowhere" not found; spec.sources[2].name: ContextSource "gone" not found`,
		"ContextRoute/uses-bad-source":  `ContextSource "bad-dir" is left out: `,
		"ContextRoute/uses-only-orphan": "spec.when: ",
		"ContextSource/bad-dir":         "docs/[a",
	}
	got := make(map[string]string)
	for _, e := range b.Excluded() {
		got[e.Kind+"/"+e.Name] = e.Problems.Details()
	}
	for key, frag := range want {
		reason, ok := got[key]
		if !ok {
			t.Errorf("%s was not left out (excluded: %v)", key, b.Excluded())
			continue
		}
		if !strings.Contains(reason, frag) {
			t.Errorf("%s reason = %q, want it to contain %q", key, reason, frag)
		}
	}
	if len(got) != len(want) {
		t.Errorf("excluded %v, want exactly %d objects", b.Excluded(), len(want))
	}
	// Order: routes before sources, names sorted.
	var keys []string
	for _, e := range b.Excluded() {
		keys = append(keys, e.Kind+"/"+e.Name)
	}
	if !slices.IsSorted(keys[:len(keys)-1]) || keys[len(keys)-1] != "ContextSource/bad-dir" {
		t.Errorf("Excluded order = %v", keys)
	}
	load(t, b)
}

func TestBuildRefusesInvalidRouterAndPermissions(t *testing.T) {
	tests := []struct {
		name       string
		in         Input
		kind       string
		wantSubstr string
	}{
		{
			name: "router budget",
			in: Input{Router: router("acme", func(r *v1alpha1.ContextRouter) {
				r.Spec.Budget.MaxTokens, r.Spec.Budget.ReserveTokens = 100, 100
			}), Routes: []v1alpha1.ContextRoute{route("r", "", "s")}, Sources: []v1alpha1.ContextSource{inline("s", "x")}},
			kind:       v1alpha1.KindContextRouter,
			wantSubstr: "spec.budget.reserveTokens",
		},
		{
			name: "router rerank under Manual",
			in: Input{Router: router("acme", func(r *v1alpha1.ContextRouter) {
				r.Spec.Ranking.Strategy = v1alpha1.RankingManual
				r.Spec.Ranking.Rerank = &v1alpha1.RerankSpec{Endpoint: "http://rr:8080/rerank", Format: v1alpha1.RerankTEI}
			})},
			kind:       v1alpha1.KindContextRouter,
			wantSubstr: "spec.ranking.rerank",
		},
		{
			name: "permission glob",
			in: Input{Router: router("acme"), Permissions: []v1alpha1.AgentPermission{func() v1alpha1.AgentPermission {
				p := permission("deny-salaries", []string{"*"})
				p.Spec.DenyPaths = []string{"salaries/[x"}
				return p
			}()}},
			kind:       v1alpha1.KindAgentPermission,
			wantSubstr: "AgentPermission/deny-salaries: spec.denyPaths[0]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Build(context.Background(), tt.in)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if b.Data != nil || b.Hash != "" || len(b.Routes)+len(b.Sources)+len(b.Permissions) != 0 {
				t.Errorf("a refused build holds data: hash %q, routes %v, sources %v, permissions %v", b.Hash, b.Routes, b.Sources, b.Permissions)
			}
			if !strings.Contains(b.Refused.Error(), tt.wantSubstr) {
				t.Errorf("Refused = %q, want it to contain %q", b.Refused.Error(), tt.wantSubstr)
			}
			if of := b.Refused.OfKind(tt.kind); len(of) == 0 || len(of) != len(b.Refused) {
				t.Errorf("problems %v, want all of kind %s", b.Refused, tt.kind)
			}
			for _, p := range b.Refused {
				if p.Reason != v1alpha1.ReasonInvalidSpec {
					t.Errorf("%v: reason %q, want InvalidSpec", p, p.Reason)
				}
			}
		})
	}
}

func TestBuildDirectoryMounts(t *testing.T) {
	pvc := &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}}
	in := Input{
		Router: router("acme"),
		Routes: []v1alpha1.ContextRoute{route("all", "",
			"relative", "default-path", "absolute", "on-claim", "shares-path", "wiki-copy", "reserved", "hides-etc", "no-volume")},
		Sources: []v1alpha1.ContextSource{
			directory("relative", "docs", configMapVolume("hr-docs")),
			directory("default-path", "", configMapVolume("eng-docs")),
			directory("absolute", "/srv/docs/", configMapVolume("fin-docs")),
			directory("on-claim", "/srv/wiki", pvc),
			directory("shares-path", "/srv/docs", configMapVolume("fin-docs")),
			directory("wiki-copy", "/srv/wiki", configMapVolume("other")),
			directory("reserved", "/etc/contextrouter/secrets/x", configMapVolume("x")),
			directory("hides-etc", "/etc", configMapVolume("y")),
			directory("no-volume", "/opt/baked-in", nil),
		},
	}
	// One route with every source: left-out sources take the route with them.
	all := mustBuild(t, in)
	if len(all.Routes) != 0 || len(all.Sources) != 0 {
		t.Errorf("route with a broken source kept: routes %v, sources %v", all.Routes, all.Sources)
	}
	in.Routes = nil
	for _, s := range in.Sources {
		in.Routes = append(in.Routes, route("r-"+s.Name, "", s.Name))
	}
	b := mustBuild(t, in)

	root := sources.DirectoryMountRoot
	wantMounts := []DirectoryMount{
		{Source: "absolute", MountPath: "/srv/docs", ConfigMap: "fin-docs"},
		{Source: "default-path", MountPath: root + "/default-path", ConfigMap: "eng-docs"},
		{Source: "on-claim", MountPath: "/srv/wiki", ClaimName: "wiki"},
		{Source: "relative", MountPath: root + "/relative", ConfigMap: "hr-docs"},
		{Source: "shares-path", MountPath: "/srv/docs", ConfigMap: "fin-docs"},
	}
	if !slices.Equal(b.Directories, wantMounts) {
		t.Errorf("Directories =\n%v\nwant\n%v", b.Directories, wantMounts)
	}
	reasons := make(map[string]string)
	for _, e := range b.Excluded() {
		reasons[e.Kind+"/"+e.Name] = e.Problems.Details()
	}
	for key, frag := range map[string]string{
		"ContextSource/wiki-copy":  `ContextSource "on-claim" of the same router mounts another volume at "/srv/wiki"`,
		"ContextSource/reserved":   "collides with /etc/contextrouter/secrets",
		"ContextSource/hides-etc":  "collides with /etc/contextrouter/bundle",
		"ContextRoute/r-wiki-copy": `ContextSource "wiki-copy" is left out`,
		"ContextRoute/r-reserved":  `ContextSource "reserved" is left out`,
		"ContextRoute/r-hides-etc": `ContextSource "hides-etc" is left out`,
	} {
		if !strings.Contains(reasons[key], frag) {
			t.Errorf("%s: reason %q, want it to contain %q", key, reasons[key], frag)
		}
	}

	// The bundle tells the engine to read where the volume is mounted.
	set, err := manifest.Parse(FileName, b.Data)
	if err != nil {
		t.Fatal(err)
	}
	paths := make(map[string]string)
	for _, s := range set.Sources {
		paths[s.Name] = s.Spec.Directory.Path
	}
	for _, m := range wantMounts {
		if paths[m.Source] != m.MountPath {
			t.Errorf("bundle path of %s = %q, want the mount path %q", m.Source, paths[m.Source], m.MountPath)
		}
	}
	if paths["no-volume"] != "/opt/baked-in" {
		t.Errorf("a source without a volume keeps its path; got %q", paths["no-volume"])
	}

	vols, mounts := b.Volumes(ConfigMapName("acme"))
	byPath := make(map[string]corev1.Volume)
	names := make(map[string]bool)
	for _, v := range vols {
		if names[v.Name] {
			t.Errorf("volume name %q used twice", v.Name)
		}
		names[v.Name] = true
	}
	for _, m := range mounts {
		for _, v := range vols {
			if v.Name == m.Name {
				byPath[m.MountPath] = v
			}
		}
		if _, dup := byPath[m.MountPath]; !dup {
			t.Errorf("mount %s names no volume", m.Name)
		}
		if wantRO := m.MountPath != CacheDir && m.MountPath != TmpDir; m.ReadOnly != wantRO {
			t.Errorf("mount %s readOnly = %v, want %v", m.MountPath, m.ReadOnly, wantRO)
		}
	}
	if len(mounts) != len(byPath) {
		t.Errorf("%d mounts for %d paths: a path is mounted twice", len(mounts), len(byPath))
	}
	if v := byPath["/srv/docs"]; v.ConfigMap == nil || v.ConfigMap.Name != "fin-docs" || !*v.ConfigMap.Optional {
		t.Errorf("/srv/docs volume = %+v, want optional ConfigMap fin-docs", v.VolumeSource)
	}
	if v := byPath["/srv/wiki"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "wiki" || !v.PersistentVolumeClaim.ReadOnly {
		t.Errorf("/srv/wiki volume = %+v, want read-only claim wiki", v.VolumeSource)
	}
	if v := byPath[MountDir]; v.ConfigMap == nil || v.ConfigMap.Name != "acme-bundle" ||
		!slices.Equal(v.ConfigMap.Items, []corev1.KeyToPath{{Key: DataKey, Path: DataKey}}) {
		t.Errorf("bundle volume = %+v", v.VolumeSource)
	}
}

func TestBuildSecrets(t *testing.T) {
	in := Input{
		Router: router("acme", func(r *v1alpha1.ContextRouter) {
			r.Spec.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: "http://emb:8080/v1/embeddings", Model: "m",
				APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "openai", Key: "api-key"}}
		}),
		Routes: []v1alpha1.ContextRoute{route("search", "", "kb", "wiki"), route("other", "", "kb2")},
		Sources: []v1alpha1.ContextSource{
			httpSource("kb", "kb-token", "shared"),
			gitSource("wiki", "git-creds"),
			httpSource("kb2", "shared"),
			httpSource("unused", "never-mounted"),
		},
	}
	b := mustBuild(t, in)
	if want := []string{"git-creds", "kb-token", "openai", "shared"}; !slices.Equal(b.Secrets, want) {
		t.Errorf("Secrets = %v, want %v", b.Secrets, want)
	}
	vols, mounts := b.Volumes("acme-bundle")
	for _, s := range b.Secrets {
		var found bool
		for _, m := range mounts {
			if m.MountPath == path.Join(SecretsDir, s) {
				found = true
				if !m.ReadOnly {
					t.Errorf("secret %s mounted writable", s)
				}
				for _, v := range vols {
					if v.Name == m.Name && (v.Secret == nil || v.Secret.SecretName != s || !*v.Secret.Optional) {
						t.Errorf("volume for %s = %+v, want optional Secret %s", s, v.VolumeSource, s)
					}
				}
			}
		}
		if !found {
			t.Errorf("secret %s is not mounted at %s", s, path.Join(SecretsDir, s))
		}
	}
	// The pod resolves <SecretsDir>/<name>/<key>, the layout these mounts give;
	// the bundle itself names Secrets but never holds a value.
	if !strings.Contains(string(b.Data), "kb-token") {
		t.Errorf("the bundle does not name the Secret kb-token")
	}
}

func TestTooLarge(t *testing.T) {
	big := strings.Repeat("All work and no play makes Jack a dull boy.\n", 4096) // ~180 KiB each
	in := Input{Router: router("acme")}
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		in.Sources = append(in.Sources, inline(name, big))
		in.Routes = append(in.Routes, route("r"+name, "", name))
	}
	b := mustBuild(t, in)
	if b.TooLarge() {
		t.Fatalf("%d bytes reported too large", b.Size())
	}
	for i := 5; i < 7; i++ {
		name := fmt.Sprintf("s%d", i)
		in.Sources = append(in.Sources, inline(name, big))
		in.Routes = append(in.Routes, route("r"+name, "", name))
	}
	b = mustBuild(t, in)
	if !b.TooLarge() || b.Size() <= MaxSize {
		t.Fatalf("size %d: TooLarge = %v, want true", b.Size(), b.TooLarge())
	}
	if got, want := b.Size(), len(DataKey)+len(b.Data)+len(HashKey)+len(b.Hash); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
}

func TestVolumeName(t *testing.T) {
	long := strings.Repeat("a", 80)
	tests := []struct {
		prefix, name string
		want         string // "" = only check validity and prefix
	}{
		{"secret-", "kb-token", "secret-kb-token"},
		{"source-", "docs", "source-docs"},
		{"secret-", "my.secret", ""},
		{"secret-", "my-secret", "secret-my-secret"},
		{"source-", long, ""},
		{"source-", long + "b", ""},
	}
	seen := make(map[string]string)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := VolumeName(tt.prefix, tt.name)
			if msgs := validation.IsDNS1123Label(got); len(msgs) > 0 {
				t.Errorf("VolumeName(%q) = %q: %v", tt.name, got, msgs)
			}
			if !strings.HasPrefix(got, tt.prefix) {
				t.Errorf("VolumeName(%q) = %q, want prefix %q", tt.name, got, tt.prefix)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("VolumeName(%q) = %q, want %q", tt.name, got, tt.want)
			}
			if other, ok := seen[got]; ok {
				t.Errorf("%q and %q share the volume name %q", other, tt.name, got)
			}
			seen[got] = tt.name
		})
	}
}

func TestServeArgs(t *testing.T) {
	want := []string{"serve", "-f", "/etc/contextrouter/bundle", "--secrets-dir", "/etc/contextrouter/secrets", "--cache-dir", "/var/cache/contextrouter", "--expand-env=false"}
	if got := ServeArgs(); !slices.Equal(got, want) {
		t.Errorf("ServeArgs = %v, want %v", got, want)
	}
}

// TestBuildVerdicts: Build judges every object it is given, with the reason
// the operator writes into that object's status, and still does when an
// invalid permission refuses the build.
func TestBuildVerdicts(t *testing.T) {
	badPerm := permission("broken", []string{"*"})
	badPerm.Spec.DenyPaths = []string{"salaries/[x"}
	in := Input{
		Router: router("acme"),
		Routes: []v1alpha1.ContextRoute{
			route("good", "", "docs"),
			route("bad-cel", "text ==", "docs"),
			route("missing", "", "nowhere"),
			route("unmountable", "", "secrets-dir"),
			route("via-bad-cel-only", "broken(", "orphan"),
		},
		Sources: []v1alpha1.ContextSource{
			inline("docs", "d"),
			directory("secrets-dir", "/etc/contextrouter/secrets", configMapVolume("x")),
			inline("orphan", "o"),
		},
		Permissions: []v1alpha1.AgentPermission{permission("ok", []string{"*"}, "docs")},
	}
	type want struct {
		included bool
		reasons  []v1alpha1.ConditionReason
	}
	wants := map[string]want{
		"ContextRouter/acme":            {true, nil},
		"ContextRoute/bad-cel":          {false, []v1alpha1.ConditionReason{v1alpha1.ReasonInvalidCondition}},
		"ContextRoute/good":             {true, nil},
		"ContextRoute/missing":          {false, []v1alpha1.ConditionReason{v1alpha1.ReasonSourceNotFound}},
		"ContextRoute/unmountable":      {false, []v1alpha1.ConditionReason{v1alpha1.ReasonInvalidSource}},
		"ContextRoute/via-bad-cel-only": {false, []v1alpha1.ConditionReason{v1alpha1.ReasonInvalidCondition}},
		"ContextSource/docs":            {true, nil},
		"ContextSource/orphan":          {false, nil}, // used by no included route: not a problem of its own
		"ContextSource/secrets-dir":     {false, []v1alpha1.ConditionReason{v1alpha1.ReasonInvalidMount}},
		"AgentPermission/ok":            {true, nil},
	}
	check := func(t *testing.T, b *Bundle, wants map[string]want) {
		t.Helper()
		var order []string
		for _, v := range b.Verdicts {
			k := v.Kind + "/" + v.Name
			order = append(order, k)
			w, ok := wants[k]
			if !ok {
				t.Errorf("unexpected verdict %s", k)
				continue
			}
			var reasons []v1alpha1.ConditionReason
			for _, p := range v.Problems {
				reasons = append(reasons, p.Reason)
				if p.Kind != v.Kind || p.Name != v.Name {
					t.Errorf("%s: problem of another object: %v", k, p)
				}
			}
			if v.Included != w.included || !slices.Equal(reasons, w.reasons) {
				t.Errorf("%s: included %v, reasons %v (%s); want %v, %v", k, v.Included, reasons, v.Problems.Details(), w.included, w.reasons)
			}
		}
		if len(order) != len(wants) {
			t.Errorf("verdicts %v, want one for each of %d objects", order, len(wants))
		}
	}
	b := mustBuild(t, in)
	check(t, b, wants)
	if v, _ := b.Verdict(v1alpha1.KindContextRoute, "unmountable"); !strings.Contains(v.Problems.Details(),
		`spec.sources[0].name: ContextSource "secrets-dir" is left out: spec.directory.path: "/etc/contextrouter/secrets" collides with`) {
		t.Errorf("unmountable: %q", v.Problems.Details())
	}
	if got := len(b.Excluded()); got != 5 {
		t.Errorf("Excluded() holds %d verdicts, want 5: %v", got, b.Excluded())
	}

	// An invalid permission refuses the build; routes and sources are still judged.
	in.Permissions = append(in.Permissions, badPerm)
	refused := mustBuild(t, in)
	if refused.Data != nil || len(refused.Refused) != 1 || refused.Refused[0].Name != "broken" {
		t.Fatalf("want a refused build naming the permission; data %d bytes, refused %v", len(refused.Data), refused.Refused)
	}
	refusedWants := map[string]want{}
	for k, w := range wants {
		refusedWants[k] = want{false, w.reasons}
	}
	refusedWants["AgentPermission/broken"] = want{false, []v1alpha1.ConditionReason{v1alpha1.ReasonInvalidSpec}}
	check(t, refused, refusedWants)
}

// TestToolCatalogVolume: a tool catalog read from a ConfigMap is mounted like
// a Directory source's volume, and the bundle reads it where it is mounted.
func TestToolCatalogVolume(t *testing.T) {
	src := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "billing-tools", Namespace: "ns"},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{
			Directory: &v1alpha1.DirectorySource{Volume: &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "tools"}}}}}}
	src.Default()
	m, ok := mountOf(src)
	if !ok || m.ConfigMap != "tools" || m.MountPath != sources.DirectoryMountRoot+"/billing-tools" {
		t.Fatalf("mountOf = %+v, %v; want the ConfigMap tools at the source's mount path", m, ok)
	}
	src.Spec.Tools.Directory.Path = SecretsDir + "/x"
	ps := MountProblems(src)
	if len(ps) != 1 || ps[0].Field != "spec.tools.directory.path" {
		t.Errorf("MountProblems = %v, want one problem at spec.tools.directory.path", ps)
	}
}

// TestBuildAlternates: a route whose alternate is missing, or left out, or
// part of a cycle is left out with its reason; the gates travel in the bundle.
func TestBuildAlternates(t *testing.T) {
	withGates := func(r v1alpha1.ContextRoute, alternate string, fallback bool) v1alpha1.ContextRoute {
		r.Spec.Alternate, r.Spec.Fallback = alternate, fallback
		r.Spec.Timeout = &metav1.Duration{Duration: 250 * time.Millisecond}
		return r
	}
	in := Input{
		Router: router("acme"),
		Routes: []v1alpha1.ContextRoute{
			withGates(route("good", `"hr" in tags`, "hr-docs"), "wiki", false),
			withGates(route("wiki", "", "hr-docs"), "", true),
			withGates(route("no-alternate", "", "hr-docs"), "nope", false),
			withGates(route("to-broken", "", "hr-docs"), "broken", false),
			withGates(route("broken", "broken(", "hr-docs"), "", false),
			withGates(route("cycle-a", "", "hr-docs"), "cycle-b", false),
			withGates(route("cycle-b", "", "hr-docs"), "cycle-a", false),
		},
		Sources: []v1alpha1.ContextSource{inline("hr-docs", "HR")},
	}
	b := mustBuild(t, in)
	if !slices.Equal(b.Routes, []string{"good", "wiki"}) {
		t.Errorf("Routes = %v, want [good wiki]", b.Routes)
	}
	want := map[string]string{
		"ContextRoute/no-alternate": `AlternateNotFound spec.alternate: ContextRoute "nope" not found`,
		"ContextRoute/to-broken":    `AlternateNotFound spec.alternate: ContextRoute "broken" not found`,
		"ContextRoute/broken":       "InvalidCondition spec.when: ",
		"ContextRoute/cycle-a":      "InvalidSpec spec.alternate: alternates form a cycle: cycle-a → cycle-b → cycle-a",
		"ContextRoute/cycle-b":      "InvalidSpec spec.alternate: alternates form a cycle: cycle-b → cycle-a → cycle-b",
	}
	got := map[string]string{}
	for _, e := range b.Excluded() {
		got[e.Kind+"/"+e.Name] = string(e.Problems[0].Reason) + " " + e.Problems.Details()
	}
	if len(got) != len(want) {
		t.Errorf("excluded %v, want %d objects", got, len(want))
	}
	for k, frag := range want {
		if !strings.Contains(got[k], frag) {
			t.Errorf("%s: %q, want it to contain %q", k, got[k], frag)
		}
	}
	set, snap := load(t, b)
	if alt := snap.Alternates(); !maps.Equal(alt, map[string]string{"good": "wiki"}) {
		t.Errorf("alternates of the loaded bundle = %v", alt)
	}
	for _, r := range set.Routes {
		if r.Spec.Timeout == nil || r.Spec.Timeout.Duration != 250*time.Millisecond || r.Spec.Fallback != (r.Name == "wiki") {
			t.Errorf("route %s lost its gates in the bundle: %+v", r.Name, r.Spec)
		}
	}
}

// TestBuildKeepsToolApprovals: a Tools source's approved-tools annotation is
// the one annotation a bundle keeps (it decides what the pod serves); other
// annotations stay out of the bytes and the hash.
func TestBuildKeepsToolApprovals(t *testing.T) {
	tools := func(ann map[string]string) v1alpha1.ContextSource {
		return v1alpha1.ContextSource{
			ObjectMeta: metav1.ObjectMeta{Name: "ops", Namespace: ns, Annotations: ann},
			Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{
				Approval: v1alpha1.ToolApprovalManual,
				Catalog: []v1alpha1.Tool{
					{Name: "restart_pod", Description: "Restart a pod of a service."},
					{Name: "page_oncall", Description: "Page the engineer on call."},
				},
			}},
		}
	}
	in := func(ann map[string]string) Input {
		return Input{Router: router("acme"), Routes: []v1alpha1.ContextRoute{route("all", "", "ops")},
			Sources: []v1alpha1.ContextSource{tools(ann)}}
	}
	served := func(b *Bundle) []string {
		_, snap := load(t, b)
		for _, s := range snap.Sources() {
			if s.Name == "ops" {
				var ids []string
				for _, p := range s.Pending {
					ids = append(ids, "pending "+p.ID)
				}
				return append(ids, fmt.Sprintf("served %d", s.Tools))
			}
		}
		t.Fatal("no source ops")
		return nil
	}
	none := mustBuild(t, in(map[string]string{"team": "ops"}))
	if strings.Contains(string(none.Data), "team: ops") || strings.Contains(string(none.Data), "annotations") {
		t.Errorf("a bundle kept an unrelated annotation:\n%s", none.Data)
	}
	if got := served(none); !slices.Equal(got, []string{"pending page_oncall", "pending restart_pod", "served 0"}) {
		t.Errorf("without approvals: %q", got)
	}
	digest := v1alpha1.ToolDigest(&tools(nil).Spec.Tools.Catalog[0])
	approved := mustBuild(t, in(map[string]string{"team": "ops", v1alpha1.AnnotationApprovedTools: "restart_pod=" + digest}))
	if approved.Hash == none.Hash || !strings.Contains(string(approved.Data), v1alpha1.AnnotationApprovedTools+": restart_pod="+digest) {
		t.Errorf("the approval is not in the bundle:\n%s", approved.Data)
	}
	if got := served(approved); !slices.Equal(got, []string{"pending page_oncall", "served 1"}) {
		t.Errorf("with restart_pod approved: %q", got)
	}
}
