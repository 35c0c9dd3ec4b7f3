package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

func resourcesRouter(mut ...func(*v1alpha1.ContextRouter)) *v1alpha1.ContextRouter {
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a", UID: "uid-1"}}
	r.Default()
	for _, m := range mut {
		m(r)
	}
	return r
}

// resourcesBundle has one Directory source on a ConfigMap and one HTTP source with a Secret.
func resourcesBundle(t *testing.T, router *v1alpha1.ContextRouter) *bundle.Bundle {
	t.Helper()
	ns := router.Namespace
	b, err := bundle.Build(context.Background(), bundle.Input{
		Router: router,
		Routes: []v1alpha1.ContextRoute{{
			ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			Spec:       v1alpha1.ContextRouteSpec{Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}, {Name: "kb"}}},
		}},
		Sources: []v1alpha1.ContextSource{
			{ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: ns}, Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{
					Volume: &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "docs-files"}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "kb", Namespace: ns}, Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/?q={{query}}", TextField: "text",
					Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{
						SecretKeyRef: v1alpha1.SecretKeySelector{Name: "kb-token", Key: "token"}}}}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDesiredDeployment(t *testing.T) {
	router := resourcesRouter(func(r *v1alpha1.ContextRouter) {
		r.Spec.Deployment.Replicas = ptr.To[int32](3)
		r.Spec.Deployment.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
	})
	b := resourcesBundle(t, router)
	d := desiredDeployment(router, b, "example.com/router:v1", "sha256:inputs")

	if d.Name != "acme" || d.Namespace != "team-a" || *d.Spec.Replicas != 3 {
		t.Errorf("deployment %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	if refs := d.OwnerReferences; len(refs) != 1 || refs[0].UID != "uid-1" || !*refs[0].Controller || !*refs[0].BlockOwnerDeletion || refs[0].Kind != "ContextRouter" {
		t.Errorf("ownerReferences = %+v", refs)
	}
	sel := d.Spec.Selector.MatchLabels
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod labels %v do not match the selector %v", d.Spec.Template.Labels, sel)
		}
	}
	if got := d.Spec.Template.Annotations; d.Annotations[AnnotationBundleHash] != b.Hash || got[AnnotationBundleHash] != "" || got[AnnotationInputsHash] != "sha256:inputs" {
		t.Errorf("pod annotations = %v", got)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v, want maxUnavailable 0", ru)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "acme" || *pod.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q automount %v, want acme and false (auth None)", pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
	}
	psc := pod.SecurityContext
	if !*psc.RunAsNonRoot || *psc.RunAsUser != RouterUID || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "example.com/router:v1" {
		t.Errorf("image %q", c.Image)
	}
	if want := []string{"serve", "-f", "/etc/contextrouter/bundle", "--secrets-dir", "/etc/contextrouter/secrets", "--cache-dir", "/var/cache/contextrouter", "--expand-env=false", "--shutdown-delay", "5s"}; !slices.Equal(c.Args, want) {
		t.Errorf("args %v, want %v", c.Args, want)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v", c.Ports)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("probe for %s = %+v", p.path, p.probe)
		}
	}
	sc := c.SecurityContext
	if !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !*sc.RunAsNonRoot {
		t.Errorf("container security context %+v", sc)
	}
	if c.Resources.Limits.Memory().String() != "256Mi" || c.Resources.Requests.Cpu().String() != "100m" {
		t.Errorf("resources %+v", c.Resources)
	}
	// serve derives its soft memory limit from the container's.
	wantEnv := []corev1.EnvVar{{Name: "CONTEXTROUTER_CONTAINER_MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{
		ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}}
	if !equality.Semantic.DeepEqual(c.Env, wantEnv) {
		t.Errorf("env %+v, want %+v", c.Env, wantEnv)
	}
	mounts := make(map[string]corev1.VolumeMount)
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	vols := make(map[string]corev1.Volume)
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for path, check := range map[string]func(corev1.Volume) bool{
		"/etc/contextrouter/bundle": func(v corev1.Volume) bool { return v.ConfigMap != nil && v.ConfigMap.Name == "acme-bundle" },
		"/etc/contextrouter/secrets/kb-token": func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == "kb-token" && *v.Secret.Optional
		},
		"/var/run/contextrouter/sources/docs": func(v corev1.Volume) bool {
			return v.ConfigMap != nil && v.ConfigMap.Name == "docs-files" && *v.ConfigMap.Optional
		},
		"/var/cache/contextrouter": func(v corev1.Volume) bool { return v.EmptyDir != nil },
		"/tmp":                     func(v corev1.Volume) bool { return v.EmptyDir != nil },
	} {
		m, ok := mounts[path]
		if !ok {
			t.Errorf("nothing mounted at %s", path)
			continue
		}
		if !check(vols[m.Name]) {
			t.Errorf("volume at %s = %+v", path, vols[m.Name].VolumeSource)
		}
	}

	// spec.deployment.image wins over the operator's image; TokenReview needs the token.
	router.Spec.Deployment.Image = "example.com/custom:v9"
	router.Spec.Deployment.ServiceAccountName = "agents"
	router.Spec.Auth.Mode = v1alpha1.AuthServiceAccountToken
	d = desiredDeployment(router, b, "example.com/router:v1", "")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "example.com/custom:v9" {
		t.Errorf("image %q, want the router's own", img)
	}
	if pod := d.Spec.Template.Spec; pod.ServiceAccountName != "agents" || !*pod.AutomountServiceAccountToken {
		t.Errorf("serviceAccountName %q automount %v, want agents and true", pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
	}
}

func TestDesiredServiceAndBinding(t *testing.T) {
	router := resourcesRouter()
	svc := desiredService(router)
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort != intstr.FromString("http") || p[0].Name != "http" {
		t.Errorf("service ports %+v", p)
	}
	if !mapsEqual(svc.Spec.Selector, selectorLabels(router)) {
		t.Errorf("service selector %v", svc.Spec.Selector)
	}

	router.Spec.Deployment.ServiceAccountName = "agents"
	crb := desiredTokenReviewBinding(router)
	if crb.Name != "contextrouter:team-a:acme" || crb.RoleRef.Name != "system:auth-delegator" || crb.RoleRef.Kind != "ClusterRole" {
		t.Errorf("binding %s -> %+v", crb.Name, crb.RoleRef)
	}
	if s := crb.Subjects; len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Name != "agents" || s[0].Namespace != "team-a" {
		t.Errorf("subjects %+v", s)
	}
	if len(crb.OwnerReferences) != 0 || crb.Annotations[AnnotationRouter] != "team-a/acme" {
		t.Errorf("a cluster-scoped binding names its router by annotation, not owner reference: %+v", crb.ObjectMeta)
	}
	long := resourcesRouter(func(r *v1alpha1.ContextRouter) { r.Name = strings.Repeat("r", 250) })
	if n := tokenReviewBindingName(long); len(n) > 253 || !strings.HasPrefix(n, "contextrouter:") {
		t.Errorf("long binding name %q (%d)", n, len(n))
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestInputsHash(t *testing.T) {
	b := resourcesBundle(t, resourcesRouter())
	cm := &corev1.ConfigMap{Data: map[string]string{"pto.md": "25 days"}}
	base := inputsHash(b, map[string]*corev1.ConfigMap{"docs-files": cm}, map[string]types.UID{"kb-token": "u1"})
	tests := []struct {
		name    string
		cms     map[string]*corev1.ConfigMap
		secrets map[string]types.UID
		same    bool
	}{
		{"identical", map[string]*corev1.ConfigMap{"docs-files": cm.DeepCopy()}, map[string]types.UID{"kb-token": "u1"}, true},
		{"unrelated ConfigMap", map[string]*corev1.ConfigMap{"docs-files": cm, "other": {Data: map[string]string{"a": "b"}}}, map[string]types.UID{"kb-token": "u1"}, true},
		{"document changed", map[string]*corev1.ConfigMap{"docs-files": {Data: map[string]string{"pto.md": "30 days"}}}, map[string]types.UID{"kb-token": "u1"}, false},
		{"document moved to binaryData", map[string]*corev1.ConfigMap{"docs-files": {BinaryData: map[string][]byte{"pto.md": []byte("25 days")}}}, map[string]types.UID{"kb-token": "u1"}, false},
		{"ConfigMap missing", nil, map[string]types.UID{"kb-token": "u1"}, false},
		{"Secret missing", map[string]*corev1.ConfigMap{"docs-files": cm}, nil, false},
		{"Secret recreated", map[string]*corev1.ConfigMap{"docs-files": cm}, map[string]types.UID{"kb-token": "u2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inputsHash(b, tt.cms, tt.secrets)
			if (got == base) != tt.same {
				t.Errorf("hash %s vs base %s: same = %v, want %v", got, base, got == base, tt.same)
			}
		})
	}
}

func TestCacheOptions(t *testing.T) {
	all := CacheOptions(nil)
	if all.DefaultNamespaces != nil {
		t.Errorf("no namespaces should cache every namespace, got %v", all.DefaultNamespaces)
	}
	if len(all.ByObject) != 6 {
		t.Errorf("ByObject has %d entries, want Deployment, Service, ServiceAccount, ConfigMap, Role, RoleBinding", len(all.ByObject))
	}
	for obj, by := range all.ByObject {
		if by.Label == nil || by.Label.String() != LabelManagedBy+"="+ManagedByValue {
			t.Errorf("%T cached with selector %v", obj, by.Label)
		}
	}
	scoped := CacheOptions([]string{"a", "b"})
	if len(scoped.DefaultNamespaces) != 2 {
		t.Errorf("DefaultNamespaces = %v", scoped.DefaultNamespaces)
	}
}
