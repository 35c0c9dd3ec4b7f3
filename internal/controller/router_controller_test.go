package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

const (
	routerTestImage = "example.com/contextrouter:test"
	// routerTimeout bounds how long the operator may take to follow a change;
	// it reacts within milliseconds, the margin is for a loaded machine.
	routerTimeout = 30 * time.Second
)

// startOperator runs a manager with every reconcile (webhooks off, so the
// tests can create objects the webhook would refuse) until the test ends.
func startOperator(t testing.TB, env *testenv.Env, log logr.Logger) ctrl.Manager {
	t.Helper()
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  CacheOptions(nil),
		// Other tests of this package run the same controllers in their own
		// manager; controller names are only unique per manager here.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, Options{RouterImage: routerTestImage}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return mgr
}

// eventually polls check until it returns nil or routerTimeout passes.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(routerTimeout); ; time.Sleep(50 * time.Millisecond) {
		if last = check(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, routerTimeout, last)
		}
	}
}

func mustCreate(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// mustChange applies change to the latest version of obj, retrying on conflicts.
func mustChange[T client.Object](t testing.TB, c client.Client, obj T, change func(T)) {
	t.Helper()
	eventually(t, fmt.Sprintf("update %T %s", obj, obj.GetName()), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(context.Background(), obj)
	})
}

// waitRouter polls the router until check passes and returns it.
func waitRouter(t testing.TB, c client.Client, ns, name string, check func(*v1alpha1.ContextRouter) error) *v1alpha1.ContextRouter {
	t.Helper()
	r := &v1alpha1.ContextRouter{}
	eventually(t, "ContextRouter "+ns+"/"+name, func() error {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, r); err != nil {
			return err
		}
		return check(r)
	})
	return r
}

// routerCond checks a router condition and that it describes the current generation.
func routerCond(r *v1alpha1.ContextRouter, typ string, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) error {
	c := meta.FindStatusCondition(r.Status.Conditions, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition in %+v", typ, r.Status.Conditions)
	case c.Status != status || c.Reason != string(reason):
		return fmt.Errorf("%s=%s reason %s (%q), want %s reason %s", typ, c.Status, c.Reason, c.Message, status, reason)
	case c.ObservedGeneration != r.Generation || r.Status.ObservedGeneration != r.Generation:
		return fmt.Errorf("%s observedGeneration %d, status.observedGeneration %d, generation %d", typ, c.ObservedGeneration, r.Status.ObservedGeneration, r.Generation)
	}
	return nil
}

func programmed(r *v1alpha1.ContextRouter) error {
	return errors.Join(
		routerCond(r, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonAccepted),
		routerCond(r, v1alpha1.ConditionProgrammed, metav1.ConditionTrue, v1alpha1.ReasonProgrammed))
}

// readBundle returns the bundle ConfigMap's content, checking its hash.
func readBundle(t testing.TB, c client.Client, ns, router string) (data, hash string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: router + "-bundle"}, cm); err != nil {
		t.Fatal(err)
	}
	data, hash = cm.Data[bundle.DataKey], cm.Data[bundle.HashKey]
	sum := sha256.Sum256([]byte(data))
	if want := "sha256:" + hex.EncodeToString(sum[:]); hash != want {
		t.Errorf("ConfigMap %s hash %s, want sha256 of bundle.yaml %s", cm.Name, hash, want)
	}
	return data, hash
}

// compileBundle decodes bundle.yaml like a router pod and compiles it.
func compileBundle(t testing.TB, data string) *engine.Config {
	t.Helper()
	set, err := manifest.Parse(bundle.FileName, []byte(data))
	if err != nil {
		t.Fatalf("the bundle does not decode: %v\n%s", err, data)
	}
	for _, p := range set.Check() {
		if !p.IsWarning() {
			t.Errorf("the bundle fails a manifest check: %v", p)
		}
	}
	cfg, err := set.Config("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Compile(context.Background(), cfg, engine.Options{SkipLoad: true}); err != nil {
		t.Fatalf("the bundle does not compile: %v", err)
	}
	return cfg
}

func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = name(&items[i])
	}
	slices.Sort(out)
	return out
}

func routeNames(cfg *engine.Config) []string {
	return names(cfg.Routes, func(r *v1alpha1.ContextRoute) string { return r.Name })
}
func sourceNames(cfg *engine.Config) []string {
	return names(cfg.Sources, func(s *v1alpha1.ContextSource) string { return s.Name })
}
func permissionNames(cfg *engine.Config) []string {
	return names(cfg.Permissions, func(p *v1alpha1.AgentPermission) string { return p.Name })
}

// Object builders. The API server applies the CRD defaults.

func tRouter(ns, name string, mut ...func(*v1alpha1.ContextRouter)) *v1alpha1.ContextRouter {
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, m := range mut {
		m(r)
	}
	return r
}

func tRoute(ns, name, when string, parents []string, srcs ...string) *v1alpha1.ContextRoute {
	r := &v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ContextRouteSpec{When: when}}
	for _, p := range parents {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, v1alpha1.ParentReference{Name: p})
	}
	for _, s := range srcs {
		r.Spec.Sources = append(r.Spec.Sources, v1alpha1.LocalObjectReference{Name: s})
	}
	return r
}

func tInline(ns, name, content string) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{Title: name, Content: content}}}
}

func tPermission(ns, name string, parents []string, agents []string, allow ...string) *v1alpha1.AgentPermission {
	p := &v1alpha1.AgentPermission{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.AgentPermissionSpec{Agents: agents, AllowSources: allow}}
	for _, r := range parents {
		p.Spec.ParentRefs = append(p.Spec.ParentRefs, v1alpha1.ParentReference{Name: r})
	}
	return p
}

// wantOwned checks that the router controls obj and blocks its own deletion
// until obj is gone: the garbage collector deletes obj with the router.
func wantOwned(obj client.Object, router *v1alpha1.ContextRouter) error {
	refs := obj.GetOwnerReferences()
	if len(refs) != 1 {
		return fmt.Errorf("%T %s: ownerReferences %+v, want one", obj, obj.GetName(), refs)
	}
	ref := refs[0]
	if ref.UID != router.UID || ref.Kind != "ContextRouter" || ref.APIVersion != v1alpha1.GroupVersion.String() ||
		!ptr.Deref(ref.Controller, false) || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		return fmt.Errorf("%T %s: ownerReference %+v, want the router %s as controller blocking deletion", obj, obj.GetName(), ref, router.UID)
	}
	return nil
}

func TestRouterController(t *testing.T) {
	env := testenv.Start(t)
	startOperator(t, env, testr.New(t))
	c := env.Client
	ctx := context.Background()

	t.Run("programs a router: bundle, Deployment, Service, ServiceAccount, status", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kb-token"}, StringData: map[string]string{"token": "s3cr3t-value"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hr-files"}, Data: map[string]string{"pto.md": "## PTO\n25 days."}},
			tRouter(ns, "acme", func(r *v1alpha1.ContextRouter) { r.Spec.DefaultAccess = v1alpha1.AccessDeny }),
			tInline(ns, "system-prompt", "You are the acme assistant."),
			&v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hr-docs"}, Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: "docs/hr",
					Volume: &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-files"}}}}},
			&v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kb"}, Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/search?q={{query}}", TextField: "text",
					Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{
						SecretKeyRef: v1alpha1.SecretKeySelector{Name: "kb-token", Key: "token"}}}}}}},
			&v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wiki"}, Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{URL: "https://git.example.com/wiki.git",
					Auth: &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: "git-creds"}}}}},
			tInline(ns, "unreferenced", "no route names me"),
			tRoute(ns, "always", "", nil, "system-prompt"),
			tRoute(ns, "hr", `containsAnyWord(text, ["pto", "vacation"])`, []string{"acme"}, "hr-docs"),
			tRoute(ns, "search", `"search" in tags`, []string{"acme"}, "kb", "wiki"),
			tPermission(ns, "everyone", nil, []string{"*"}, "system-prompt"),
			tPermission(ns, "hr", []string{"acme"}, []string{"hr-assistant"}, "hr-docs"),
		)

		// Programmed with everything: the router may be programmed before
		// every object has reached the operator's cache.
		router := waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if err := programmed(r); err != nil {
				return err
			}
			if r.Status.AttachedRoutes != 3 || r.Status.Sources != 4 {
				return fmt.Errorf("attachedRoutes %d sources %d, want 3 and 4", r.Status.AttachedRoutes, r.Status.Sources)
			}
			if msg := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgrammed).Message; !strings.Contains(msg, "2 permissions") {
				return fmt.Errorf("Programmed %q, want 2 permissions", msg)
			}
			return nil
		})
		if b := router.Status.Bundle; b == nil || b.ConfigMapName != "acme-bundle" || !strings.HasPrefix(b.Hash, "sha256:") {
			t.Fatalf("status.bundle = %+v", b)
		}
		if err := routerCond(router, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentPending); err != nil {
			t.Errorf("before the Deployment controller reports: %v", err)
		}

		// The bundle: what the status says, decodable and compilable like a pod does.
		data, hash := readBundle(t, c, ns, "acme")
		if hash != router.Status.Bundle.Hash {
			t.Errorf("ConfigMap hash %s, status.bundle.hash %s", hash, router.Status.Bundle.Hash)
		}
		cfg := compileBundle(t, data)
		if got, want := routeNames(cfg), []string{"always", "hr", "search"}; !slices.Equal(got, want) {
			t.Errorf("bundle routes %v, want %v", got, want)
		}
		if got, want := sourceNames(cfg), []string{"hr-docs", "kb", "system-prompt", "wiki"}; !slices.Equal(got, want) {
			t.Errorf("bundle sources %v, want %v", got, want)
		}
		if got, want := permissionNames(cfg), []string{"everyone", "hr"}; !slices.Equal(got, want) {
			t.Errorf("bundle permissions %v, want %v", got, want)
		}
		if cfg.Router.Spec.DefaultAccess != v1alpha1.AccessDeny {
			t.Errorf("bundle router defaultAccess %s, want Deny", cfg.Router.Spec.DefaultAccess)
		}
		for _, s := range cfg.Sources {
			if s.Name == "hr-docs" && s.Spec.Directory.Path != sources.DirectoryMountRoot+"/hr-docs" {
				t.Errorf("hr-docs path in the bundle %q, want the mount path", s.Spec.Directory.Path)
			}
		}
		if strings.Contains(data, "s3cr3t-value") {
			t.Error("a Secret value leaked into the bundle")
		}

		// The Deployment as the API server stored it.
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, dep); err != nil {
			t.Fatal(err)
		}
		if err := wantOwned(dep, router); err != nil {
			t.Error(err)
		}
		if got := dep.Annotations[AnnotationBundleHash]; got != hash || dep.Spec.Template.Annotations[AnnotationBundleHash] != "" {
			t.Errorf("pod template bundle hash %q, want %q", got, hash)
		}
		pod := dep.Spec.Template.Spec
		if *dep.Spec.Replicas != 2 || pod.ServiceAccountName != "acme" || *pod.AutomountServiceAccountToken {
			t.Errorf("replicas %d serviceAccountName %q automount %v", *dep.Spec.Replicas, pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
		}
		if psc := pod.SecurityContext; psc == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod security context %+v", psc)
		}
		ctr := pod.Containers[0]
		// Router pods drain before they stop, so that a rollout behind the
		// Service fails no query.
		if ctr.Image != routerTestImage || !slices.Equal(ctr.Args, append(bundle.ServeArgs(), "--shutdown-delay", "5s")) {
			t.Errorf("container image %q args %v", ctr.Image, ctr.Args)
		}
		if sc := ctr.SecurityContext; sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container security context %+v", sc)
		}
		if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe == nil || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("probes %+v / %+v", ctr.ReadinessProbe, ctr.LivenessProbe)
		}
		vols := make(map[string]corev1.Volume)
		for _, v := range pod.Volumes {
			vols[v.Name] = v
		}
		mounted := make(map[string]corev1.VolumeSource)
		for _, m := range ctr.VolumeMounts {
			mounted[m.MountPath] = vols[m.Name].VolumeSource
		}
		for path, ok := range map[string]func(corev1.VolumeSource) bool{
			bundle.MountDir: func(v corev1.VolumeSource) bool { return v.ConfigMap != nil && v.ConfigMap.Name == "acme-bundle" },
			sources.DirectoryMountRoot + "/hr-docs": func(v corev1.VolumeSource) bool {
				return v.ConfigMap != nil && v.ConfigMap.Name == "hr-files"
			},
			bundle.SecretsDir + "/kb-token":  func(v corev1.VolumeSource) bool { return v.Secret != nil && v.Secret.SecretName == "kb-token" },
			bundle.SecretsDir + "/git-creds": func(v corev1.VolumeSource) bool { return v.Secret != nil && v.Secret.SecretName == "git-creds" },
		} {
			if v, found := mounted[path]; !found || !ok(v) {
				t.Errorf("volume at %s = %+v", path, v)
			}
		}

		svc := &corev1.Service{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, svc); err != nil {
			t.Fatal(err)
		}
		if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort.StrVal != "http" {
			t.Errorf("service ports %+v", p)
		}
		sa := &corev1.ServiceAccount{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, sa); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme-bundle"}, cm); err != nil {
			t.Fatal(err)
		}
		// envtest runs no garbage collector: owner references are what
		// deletes the children with the router in a cluster.
		for _, obj := range []client.Object{svc, sa, cm} {
			if err := wantOwned(obj, router); err != nil {
				t.Error(err)
			}
		}

		// The Deployment controller reports the rollout: Ready follows.
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
		if err := c.Status().Update(ctx, dep); err != nil {
			t.Fatal(err)
		}
		router = waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if r.Status.ReadyReplicas != 2 || r.Status.Replicas != 2 {
				return fmt.Errorf("replicas %d ready %d", r.Status.Replicas, r.Status.ReadyReplicas)
			}
			return routerCond(r, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
		})
		settles(t, c, router)

		// A route update changes the bundle and rolls the pods; the route's
		// own status follows its generation.
		route := &v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hr"}}
		mustChange(t, c, route, func(r *v1alpha1.ContextRoute) { r.Spec.When = `"hr" in tags` })
		router = waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if r.Status.Bundle == nil || r.Status.Bundle.Hash == hash {
				return errors.New("bundle hash unchanged")
			}
			return nil
		})
		newData, newHash := readBundle(t, c, ns, "acme")
		if newHash != router.Status.Bundle.Hash || !strings.Contains(newData, `'"hr" in tags'`) {
			t.Errorf("new bundle %s does not hold the updated route:\n%s", newHash, newData)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			t.Fatal(err)
		}
		if got := dep.Annotations[AnnotationBundleHash]; got != newHash || dep.Spec.Template.Annotations[AnnotationBundleHash] != "" {
			t.Errorf("pod template bundle hash %q, want %q", got, newHash)
		}
		if err := routerCond(router, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeploymentPending); err != nil {
			t.Errorf("while the new pods roll out: %v", err)
		}
		eventually(t, "route status follows its generation", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
				return err
			}
			if route.Generation != 2 || route.Status.ObservedGeneration != route.Generation {
				return fmt.Errorf("generation %d, status.observedGeneration %d", route.Generation, route.Status.ObservedGeneration)
			}
			return nil
		})

		// Inputs the pods do not pick up alone roll them: a Secret that
		// appears, a document that changes.
		inputs := dep.Spec.Template.Annotations[AnnotationInputsHash]
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-creds"}, StringData: map[string]string{"token": "t"}})
		inputs = waitInputsHashChange(t, c, dep, inputs)
		docs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hr-files"}}
		mustChange(t, c, docs, func(cm *corev1.ConfigMap) { cm.Data["pto.md"] = "## PTO\n30 days." })
		waitInputsHashChange(t, c, dep, inputs)
		if _, h := readBundle(t, c, ns, "acme"); h != newHash {
			t.Errorf("a document change changed the bundle (%s -> %s); only the pods should roll", newHash, h)
		}
	})

	t.Run("routes with invalid CEL or missing sources are left out", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c,
			tRouter(ns, "acme"),
			tInline(ns, "docs", "Docs."),
			tRoute(ns, "good", "", nil, "docs"),
			tRoute(ns, "bad-cel", "text ==", nil, "docs"),
			tRoute(ns, "waits", "", nil, "docs", "later"),
		)
		router := waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if err := programmed(r); err != nil {
				return err
			}
			if msg := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionProgrammed).Message; !strings.Contains(msg, "2 left out") {
				return fmt.Errorf("Programmed %q, want 2 routes left out", msg)
			}
			if r.Status.AttachedRoutes != 1 {
				return fmt.Errorf("attachedRoutes %d, want 1", r.Status.AttachedRoutes)
			}
			return nil
		})
		msg := meta.FindStatusCondition(router.Status.Conditions, v1alpha1.ConditionProgrammed).Message
		for _, want := range []string{"2 left out", `ContextRoute "bad-cel": spec.when: `, `ContextRoute "waits": spec.sources[1].name: ContextSource "later" not found`} {
			if !strings.Contains(msg, want) {
				t.Errorf("Programmed message %q lacks %q", msg, want)
			}
		}
		data, _ := readBundle(t, c, ns, "acme")
		if got := routeNames(compileBundle(t, data)); !slices.Equal(got, []string{"good"}) {
			t.Errorf("bundle routes %v, want [good]", got)
		}

		mustCreate(t, c, tInline(ns, "later", "Later."))
		waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if r.Status.AttachedRoutes != 2 || r.Status.Sources != 2 {
				return fmt.Errorf("attachedRoutes %d sources %d, want 2 and 2", r.Status.AttachedRoutes, r.Status.Sources)
			}
			return programmed(r)
		})
		data, _ = readBundle(t, c, ns, "acme")
		if got := routeNames(compileBundle(t, data)); !slices.Equal(got, []string{"good", "waits"}) {
			t.Errorf("bundle routes %v, want [good waits]", got)
		}
	})

	t.Run("two routers get distinct bundles; parentRefs decide", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c,
			tRouter(ns, "alpha"), tRouter(ns, "beta"),
			tInline(ns, "a-docs", "A."), tInline(ns, "b-docs", "B."), tInline(ns, "shared", "S."),
			tRoute(ns, "only-alpha", "", []string{"alpha"}, "a-docs"),
			tRoute(ns, "only-beta", "", []string{"beta"}, "b-docs"),
			tRoute(ns, "both", "", nil, "shared"),
			tRoute(ns, "elsewhere", "", []string{"gamma"}, "shared"),
			tPermission(ns, "alpha-only", []string{"alpha"}, []string{"*"}, "a-docs"),
			tPermission(ns, "everywhere", nil, []string{"*"}, "shared"),
		)
		want := map[string][3][]string{ // routes, sources, permissions
			"alpha": {{"both", "only-alpha"}, {"a-docs", "shared"}, {"alpha-only", "everywhere"}},
			"beta":  {{"both", "only-beta"}, {"b-docs", "shared"}, {"everywhere"}},
		}
		hashes := make(map[string]string)
		for name, w := range want {
			// The router may be programmed before every object has reached
			// the cache; wait for the bundle to settle on the expected content.
			waitRouter(t, c, ns, name, programmed)
			eventually(t, name+" bundle content", func() error {
				data, hash := readBundle(t, c, ns, name)
				hashes[name] = hash
				cfg := compileBundle(t, data)
				return errors.Join(
					wantNames(name+" routes", routeNames(cfg), w[0]),
					wantNames(name+" sources", sourceNames(cfg), w[1]),
					wantNames(name+" permissions", permissionNames(cfg), w[2]))
			})
		}
		if hashes["alpha"] == hashes["beta"] {
			t.Errorf("both routers have bundle %s", hashes["alpha"])
		}

		// A permission moved to beta leaves alpha's bundle and enters beta's.
		perm := &v1alpha1.AgentPermission{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-only"}}
		mustChange(t, c, perm, func(p *v1alpha1.AgentPermission) { p.Spec.ParentRefs = []v1alpha1.ParentReference{{Name: "beta"}} })
		for name, perms := range map[string][]string{"alpha": {"everywhere"}, "beta": {"alpha-only", "everywhere"}} {
			eventually(t, name+" permissions follow the parentRefs", func() error {
				data, _ := readBundle(t, c, ns, name)
				return wantNames(name+" permissions", permissionNames(compileBundle(t, data)), perms)
			})
		}
	})

	t.Run("a tool approval, an annotation only, reaches the bundle", func(t *testing.T) {
		ns := env.Namespace(t)
		src := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ops"}, Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Approval: v1alpha1.ToolApprovalManual, Catalog: []v1alpha1.Tool{
				{Name: "restart_pod", Description: "Restart a pod of a service."},
				{Name: "page_oncall", Description: "Page the engineer on call."},
			}}}}
		mustCreate(t, c, tRouter(ns, "acme"), src, tRoute(ns, "all", "", nil, "ops"))
		router := waitRouter(t, c, ns, "acme", programmed)
		// What a router pod serving the bundle makes of the catalog.
		served := func() (string, error) {
			data, _ := readBundle(t, c, ns, "acme")
			snap, err := engine.Compile(context.Background(), compileBundle(t, data), engine.Options{})
			if err != nil {
				return "", err
			}
			for _, s := range snap.Sources() {
				if s.Name == "ops" {
					var pending []string
					for _, p := range s.Pending {
						pending = append(pending, p.ID)
					}
					return fmt.Sprintf("served %d, pending %v", s.Tools, pending), nil
				}
			}
			return "", errors.New("no source ops in the bundle")
		}
		wantServed := func(want string) func() error {
			return func() error {
				got, err := served()
				if err == nil && got != want {
					err = fmt.Errorf("%s, want %s", got, want)
				}
				return err
			}
		}
		eventually(t, "both tools held back", wantServed("served 0, pending [page_oncall restart_pod]"))
		// The Deployment follows the bundle (its pods report the source's
		// status); then nothing else is in flight that would rebuild the
		// bundle anyway.
		dep := &appsv1.Deployment{}
		eventually(t, "the router pods report tool status", func() error {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, dep); err != nil {
				return err
			}
			if pod := dep.Spec.Template.Spec; !slices.Contains(pod.Containers[0].Args, "--report-tools-status") || !ptr.Deref(pod.AutomountServiceAccountToken, false) {
				return fmt.Errorf("router pod args %v, automount %v", pod.Containers[0].Args, pod.AutomountServiceAccountToken)
			}
			return nil
		})
		settles(t, c, router)
		if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			t.Fatal(err)
		}
		gen := src.Generation
		digest := v1alpha1.ToolDigest(&src.Spec.Tools.Catalog[0])
		mustChange(t, c, src, func(s *v1alpha1.ContextSource) {
			s.Annotations = map[string]string{v1alpha1.AnnotationApprovedTools: "restart_pod=" + digest + "\n"}
		})
		if src.Generation != gen {
			t.Fatalf("the annotation moved the generation %d -> %d; the test needs it unchanged", gen, src.Generation)
		}
		eventually(t, "the approved tool served", wantServed("served 1, pending [page_oncall]"))

		// The pods' account may write the source's status.tools and
		// Events, and no more.
		role, binding := &rbacv1.Role{}, &rbacv1.RoleBinding{}
		eventually(t, "the router's Role and RoleBinding", func() error {
			return errors.Join(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, role),
				c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, binding))
		})
		if err := errors.Join(wantOwned(role, router), wantOwned(binding, router)); err != nil {
			t.Error(err)
		}
		for _, tc := range []struct {
			group, resource, sub, verb string
			allowed                    bool
		}{
			{"contextrouter.dev", "contextsources", "status", "patch", true},
			{"contextrouter.dev", "contextsources", "", "get", true},
			{"events.k8s.io", "events", "", "create", true},
			{"contextrouter.dev", "contextsources", "", "update", false},
			{"contextrouter.dev", "contextroutes", "status", "patch", false},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + ns + ":acme",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: tc.group,
					Resource: tc.resource, Subresource: tc.sub, Verb: tc.verb, Name: "ops"},
			}}
			if err := c.Create(ctx, sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != tc.allowed {
				t.Errorf("router account %s %s/%s %s: allowed %v, want %v (%s)", tc.verb, tc.resource, tc.sub, tc.group, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
			}
		}
	})

	t.Run("a bundle larger than a ConfigMap is refused with BundleTooLarge", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c, tRouter(ns, "acme"), tInline(ns, "small", "Small."), tRoute(ns, "small", "", nil, "small"))
		router := waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if r.Status.AttachedRoutes != 1 {
				return fmt.Errorf("attachedRoutes %d, want 1", r.Status.AttachedRoutes)
			}
			return programmed(r)
		})
		good := router.Status.Bundle.Hash
		big := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n", 7000) // ~400 KB
		// Sources no route names stay out of the bundle; one route then
		// brings all three in at once.
		for i := range 3 {
			mustCreate(t, c, tInline(ns, fmt.Sprintf("big-%d", i), big))
		}
		mustCreate(t, c, tRoute(ns, "big", "", nil, "big-0", "big-1", "big-2"))
		router = waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			return errors.Join(
				routerCond(r, v1alpha1.ConditionProgrammed, metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge),
				routerCond(r, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotProgrammed))
		})
		if msg := meta.FindStatusCondition(router.Status.Conditions, v1alpha1.ConditionProgrammed).Message; !strings.Contains(msg, "2 routes, 4 sources") {
			t.Errorf("message %q", msg)
		}
		if _, hash := readBundle(t, c, ns, "acme"); hash != good || router.Status.Bundle.Hash != good {
			t.Errorf("the last good bundle %s was replaced: ConfigMap %s, status %s", good, hash, router.Status.Bundle.Hash)
		}
		eventually(t, "a BundleTooLarge warning event", func() error {
			var events eventsv1.EventList
			if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range events.Items {
				if e.Reason == string(v1alpha1.ReasonBundleTooLarge) && e.Type == corev1.EventTypeWarning &&
					e.Regarding.Kind == "ContextRouter" && e.Regarding.Name == "acme" && strings.Contains(e.Note, "bytes") {
					return nil
				}
			}
			return fmt.Errorf("no such event among %d", len(events.Items))
		})
	})

	t.Run("a router the engine refuses is not accepted", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c,
			tRouter(ns, "embed", func(r *v1alpha1.ContextRouter) {
				// Past the bound the CEL cost check assumes: the API server takes it, the engine does not.
				r.Spec.Variables = map[string]apiextensionsv1.JSON{"team": {Raw: []byte(`"` + strings.Repeat("x", 1025) + `"`)}}
			}),
			tRouter(ns, "9lives"),
		)
		r := waitRouter(t, c, ns, "embed", func(r *v1alpha1.ContextRouter) error {
			return errors.Join(
				routerCond(r, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec),
				routerCond(r, v1alpha1.ConditionProgrammed, metav1.ConditionFalse, v1alpha1.ReasonInvalid))
		})
		if msg := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionAccepted).Message; !strings.Contains(msg, "spec.variables.team") {
			t.Errorf("Accepted message %q", msg)
		}
		waitRouter(t, c, ns, "9lives", func(r *v1alpha1.ContextRouter) error {
			return routerCond(r, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidName)
		})
		for _, name := range []string{"embed-bundle", "9lives-bundle"} {
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				t.Errorf("ConfigMap %s: %v, want it not to exist", name, err)
			}
		}
	})

	t.Run("ServiceAccountToken auth binds the account to TokenReview", func(t *testing.T) {
		ns := env.Namespace(t)
		mustCreate(t, c, tRouter(ns, "acme", func(r *v1alpha1.ContextRouter) { r.Spec.Auth.Mode = v1alpha1.AuthServiceAccountToken }))
		router := waitRouter(t, c, ns, "acme", programmed)
		if !slices.Contains(router.Finalizers, RouterFinalizer) {
			t.Errorf("finalizers %v, want %s", router.Finalizers, RouterFinalizer)
		}
		crbName := "contextrouter:" + ns + ":acme"
		crb := &rbacv1.ClusterRoleBinding{}
		if err := c.Get(ctx, types.NamespacedName{Name: crbName}, crb); err != nil {
			t.Fatal(err)
		}
		if crb.RoleRef.Name != "system:auth-delegator" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "acme" || crb.Subjects[0].Namespace != ns {
			t.Errorf("binding %+v %+v", crb.RoleRef, crb.Subjects)
		}
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, dep); err != nil {
			t.Fatal(err)
		}
		if !*dep.Spec.Template.Spec.AutomountServiceAccountToken {
			t.Error("TokenReview needs the pod's token mounted")
		}

		// Another account: the operator's own goes, the binding follows.
		mustChange(t, c, router, func(r *v1alpha1.ContextRouter) { r.Spec.Deployment.ServiceAccountName = "agents" })
		eventually(t, "binding names the new account and the old one is deleted", func() error {
			if err := c.Get(ctx, types.NamespacedName{Name: crbName}, crb); err != nil {
				return err
			}
			if crb.Subjects[0].Name != "agents" {
				return fmt.Errorf("subject %s", crb.Subjects[0].Name)
			}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "acme"}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ServiceAccount acme: %v", err)
			}
			return nil
		})

		// Back to no auth: binding and finalizer go.
		mustChange(t, c, router, func(r *v1alpha1.ContextRouter) { r.Spec.Auth.Mode = v1alpha1.AuthNone })
		eventually(t, "binding and finalizer removed", func() error {
			if err := c.Get(ctx, types.NamespacedName{Name: crbName}, crb); !apierrors.IsNotFound(err) {
				return fmt.Errorf("binding: %v", err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(router), router); err != nil {
				return err
			}
			if slices.Contains(router.Finalizers, RouterFinalizer) {
				return errors.New("finalizer still set")
			}
			return nil
		})

		// Deleting a router with a binding removes the binding, then the router.
		mustChange(t, c, router, func(r *v1alpha1.ContextRouter) { r.Spec.Auth.Mode = v1alpha1.AuthServiceAccountToken })
		eventually(t, "binding recreated", func() error { return c.Get(ctx, types.NamespacedName{Name: crbName}, crb) })
		if err := c.Delete(ctx, router); err != nil {
			t.Fatal(err)
		}
		eventually(t, "router and binding deleted", func() error {
			if err := c.Get(ctx, types.NamespacedName{Name: crbName}, crb); !apierrors.IsNotFound(err) {
				return fmt.Errorf("binding: %v", err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(router), router); !apierrors.IsNotFound(err) {
				return fmt.Errorf("router: %v", err)
			}
			return nil
		})
	})

	t.Run("the Redis password Secret is mounted, and its absence reported", func(t *testing.T) {
		ns := env.Namespace(t)
		const password = "pw-envtest-3141"
		mustCreate(t, c, tRouter(ns, "cache", func(r *v1alpha1.ContextRouter) {
			r.Spec.Sessions = v1alpha1.SessionsSpec{Store: v1alpha1.SessionStoreRedis, Redis: &v1alpha1.RedisSpec{Address: "valkey:6379",
				PasswordSecretRef: &v1alpha1.SecretKeySelector{Name: "sessions-redis", Key: "password"}}}
		}))
		r := waitRouter(t, c, ns, "cache", func(r *v1alpha1.ContextRouter) error {
			return errors.Join(programmed(r), routerCond(r, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound))
		})
		if msg := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, `spec.sessions.redis.passwordSecretRef: Secret "sessions-redis" not found`) {
			t.Errorf("Ready message %q", msg)
		}
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cache"}, dep); err != nil {
			t.Fatal(err)
		}
		mounted := false
		for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
			mounted = mounted || m.MountPath == "/etc/contextrouter/secrets/sessions-redis"
		}
		if !mounted {
			t.Errorf("the password's Secret is not mounted: %+v", dep.Spec.Template.Spec.Containers[0].VolumeMounts)
		}
		// A Secret without the key, then with it.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sessions-redis"}, StringData: map[string]string{"pass": password}}
		mustCreate(t, c, secret)
		waitRouter(t, c, ns, "cache", func(r *v1alpha1.ContextRouter) error {
			if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, `has no key "password"`) {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		mustChange(t, c, secret, func(s *corev1.Secret) { s.StringData = map[string]string{"password": password} })
		r = waitRouter(t, c, ns, "cache", func(r *v1alpha1.ContextRouter) error {
			if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason == string(v1alpha1.ReasonSecretNotFound) {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		})
		if raw, _ := json.Marshal(r); strings.Contains(string(raw), password) {
			t.Error("the password reached the router object")
		}
	})
}

func wantNames(what string, got, want []string) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s %v, want %v", what, got, want)
	}
	return nil
}

// waitInputsHashChange waits for the Deployment's inputs hash to differ from old.
func waitInputsHashChange(t testing.TB, c client.Client, dep *appsv1.Deployment, old string) string {
	t.Helper()
	var now string
	eventually(t, "pod template inputs hash changes", func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		if now = dep.Spec.Template.Annotations[AnnotationInputsHash]; now == old || now == "" {
			return fmt.Errorf("inputs hash still %q", now)
		}
		return nil
	})
	return now
}

// settles checks that a converged router and its children are not written
// again: no reconcile loop feeds on its own writes.
func settles(t testing.TB, c client.Client, router *v1alpha1.ContextRouter) {
	t.Helper()
	objs := []client.Object{
		router.DeepCopy(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: router.Namespace, Name: router.Name + "-bundle"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: router.Namespace, Name: router.Name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: router.Namespace, Name: router.Name}},
	}
	versions := make([]string, len(objs))
	for i, o := range objs {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		versions[i] = o.GetResourceVersion()
	}
	time.Sleep(1500 * time.Millisecond)
	for i, o := range objs {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		if o.GetResourceVersion() != versions[i] {
			t.Errorf("%T %s written again after converging (resourceVersion %s -> %s)", o, o.GetName(), versions[i], o.GetResourceVersion())
		}
	}
}
