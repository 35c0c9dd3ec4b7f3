package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// statusTimeout bounds how long a status may take to follow a change. The
// reconcilers react to watch events within milliseconds; the margin is for a
// loaded machine.
const statusTimeout = 30 * time.Second

// TestStatusControllers runs the operator in-process against a real API
// server (webhooks off, so objects the webhook would refuse still get in) and
// checks the status of routes, sources and permissions: what the router's
// bundle verdict and the status reconcilers write.
func TestStatusControllers(t *testing.T) {
	env := testenv.Start(t)
	startOperator(t, env, testr.New(t))
	c := env.Client
	ctx := t.Context()

	t.Run("invalid CEL is Accepted=False InvalidCondition, fixed by an update", func(t *testing.T) {
		ns := env.Namespace(t)
		create(t, c, newRouter(ns, "acme"), newInline(ns, "docs"))
		route := newRoute(ns, "hr", "text ==", "docs")
		create(t, c, route)
		_, celErr := engine.CompileCondition("text ==")

		got := waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r, "acme"); err != nil {
				return err
			}
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "Accepted", condFalse, v1alpha1.ReasonInvalidCondition, 1),
				wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 1),
				wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidCondition, 1))
		})
		wantMsg := `spec.when: Invalid value: "text ==": ` + problem.OneLine(celErr.Error())
		if msg := findCondition(got.Status.Parents[0].Conditions, "Accepted").Message; msg != wantMsg {
			t.Errorf("Accepted message %q, want the CEL error %q", msg, wantMsg)
		}
		if got.Status.ObservedGeneration != 1 {
			t.Errorf("status.observedGeneration %d, want 1", got.Status.ObservedGeneration)
		}

		update(t, c, got, func(r *v1alpha1.ContextRoute) { r.Spec.When = `"hr" in tags` })
		got = waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
			if r.Status.ObservedGeneration != 2 {
				return fmt.Errorf("status.observedGeneration %d, want 2", r.Status.ObservedGeneration)
			}
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "Accepted", condTrue, v1alpha1.ReasonAccepted, 2),
				wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 2),
				wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 2))
		})
		assertStatusSettles(t, c, got)
	})

	t.Run("missing source is ResolvedRefs=False until it is created", func(t *testing.T) {
		ns := env.Namespace(t)
		create(t, c, newRouter(ns, "acme"), newInline(ns, "docs"))
		route := newRoute(ns, "hr", "", "docs", "later")
		create(t, c, route)
		got := waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r, "acme"); err != nil {
				return err
			}
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "Accepted", condTrue, v1alpha1.ReasonAccepted, 1),
				wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condFalse, v1alpha1.ReasonSourceNotFound, 1),
				wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonSourceNotFound, 1))
		})
		if msg := findCondition(got.Status.Parents[0].Conditions, "ResolvedRefs").Message; msg != `spec.sources[1].name: ContextSource "later" not found` {
			t.Errorf("ResolvedRefs message %q", msg)
		}

		create(t, c, newInline(ns, "later"))
		waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 1),
				wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1))
		})
	})

	t.Run("parents follow the routers of the namespace", func(t *testing.T) {
		ns := env.Namespace(t)
		create(t, c, newInline(ns, "docs"))
		all := newRoute(ns, "all", "", "docs")
		named := newRoute(ns, "named", "", "docs")
		named.Spec.ParentRefs = []v1alpha1.ParentReference{{Name: "beta"}, {Name: "ghost"}}
		create(t, c, all, named)

		waitRoute(t, c, all, func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r); err != nil {
				return err
			}
			return wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonNoMatchingParent, 1)
		})

		alpha, beta := newRouter(ns, "alpha"), newRouter(ns, "beta")
		create(t, c, alpha, beta)
		waitRoute(t, c, all, func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r, "alpha", "beta"); err != nil {
				return err
			}
			return wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1)
		})
		got := waitRoute(t, c, named, func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r, "beta", "ghost"); err != nil {
				return err
			}
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "Accepted", condTrue, v1alpha1.ReasonAccepted, 1),
				wantCond(r.Status.Parents[1].Conditions, "Accepted", condFalse, v1alpha1.ReasonNoMatchingParent, 1),
				wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonNoMatchingParent, 1))
		})
		if msg := findCondition(got.Status.Conditions, "Ready").Message; !strings.Contains(msg, `ContextRouter "ghost" not found`) {
			t.Errorf("Ready message %q does not name the missing router", msg)
		}

		if err := c.Delete(ctx, alpha); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, c, all, func(r *v1alpha1.ContextRoute) error { return wantParents(r, "beta") })
	})

	t.Run("secret missing is Ready=False SecretNotFound until the key exists", func(t *testing.T) {
		ns := env.Namespace(t)
		src := &v1alpha1.ContextSource{
			ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: ns},
			Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
				URL: "https://search.example.com/?q={{query}}", TextField: "text",
				Headers: []v1alpha1.HTTPHeader{secretHeader("Authorization", "search-api", "token")},
			}},
		}
		create(t, c, src)
		got := waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonSecretNotFound, 1)
		})
		if msg := got.Status.Conditions[0].Message; msg != `spec.httpAPI.headers[0].valueFrom.secretKeyRef: Secret "search-api" not found` {
			t.Errorf("message %q", msg)
		}

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "search-api", Namespace: ns},
			Data: map[string][]byte{"other": []byte("x")}}
		create(t, c, secret)
		waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			if err := wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonSecretNotFound, 1); err != nil {
				return err
			}
			if msg := s.Status.Conditions[0].Message; !strings.Contains(msg, `has no key "token"`) {
				return fmt.Errorf("message %q does not name the missing key", msg)
			}
			return nil
		})

		// A Secret update (not a create) must be noticed too.
		secret.Data["token"] = []byte("s3cr3t")
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		got = waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			return wantCond(s.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 1)
		})
		if got.Status.ObservedGeneration != 1 {
			t.Errorf("status.observedGeneration %d, want 1", got.Status.ObservedGeneration)
		}
		assertStatusSettles(t, c, got)
	})

	t.Run("directory volumes: ConfigMap and PersistentVolumeClaim", func(t *testing.T) {
		ns := env.Namespace(t)
		cmSrc := dirSource("", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-docs"}})
		cmSrc.Namespace, cmSrc.Name = ns, "hr"
		pvcSrc := dirSource("/srv/wiki", &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki"}})
		pvcSrc.Namespace, pvcSrc.Name = ns, "wiki"
		create(t, c, cmSrc, pvcSrc)
		waitSource(t, c, cmSrc, func(s *v1alpha1.ContextSource) error {
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonConfigMapNotFound, 1)
		})
		waitSource(t, c, pvcSrc, func(s *v1alpha1.ContextSource) error {
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonPersistentVolumeClaimNotFound, 1)
		})

		create(t, c,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hr-docs", Namespace: ns}, Data: map[string]string{"pto.md": "# PTO"}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "wiki", Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}})
		for _, s := range []*v1alpha1.ContextSource{cmSrc, pvcSrc} {
			waitSource(t, c, s, func(s *v1alpha1.ContextSource) error {
				return wantCond(s.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 1)
			})
		}
	})

	t.Run("a spec the source factory refuses is InvalidSpec", func(t *testing.T) {
		ns := env.Namespace(t)
		src := &v1alpha1.ContextSource{
			ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: ns},
			Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
				URL: "https://search.example.com/", TextField: "text", Body: `{"q": {{query}}}`,
			}},
		}
		create(t, c, src)
		got := waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidSpec, 1)
		})
		if msg := got.Status.Conditions[0].Message; !strings.Contains(msg, "spec.httpAPI.body") {
			t.Errorf("message %q does not name spec.httpAPI.body", msg)
		}
		update(t, c, got, func(s *v1alpha1.ContextSource) { s.Spec.HTTPAPI.Method = v1alpha1.HTTPMethodPost })
		waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			if s.Status.ObservedGeneration != 2 {
				return fmt.Errorf("status.observedGeneration %d, want 2", s.Status.ObservedGeneration)
			}
			return wantCond(s.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 2)
		})
	})

	t.Run("a Directory source no router pod can mount is not Ready, and its route is not accepted with all references resolved", func(t *testing.T) {
		ns := env.Namespace(t)
		src := dirSource("/etc/contextrouter/secrets", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-files"}})
		src.Namespace, src.Name = ns, "hr-docs"
		create(t, c,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hr-files", Namespace: ns}, Data: map[string]string{"pto.md": "# PTO"}},
			newRouter(ns, "acme"), src, newInline(ns, "prompt"),
			newRoute(ns, "hr", "", "hr-docs"), newRoute(ns, "always", "", "prompt"))

		// The router serves what it can and names what it leaves out.
		router := waitRouter(t, c, ns, "acme", func(r *v1alpha1.ContextRouter) error {
			if err := programmed(r); err != nil {
				return err
			}
			if r.Status.AttachedRoutes != 1 || r.Status.Sources != 1 {
				return fmt.Errorf("attachedRoutes %d sources %d, want 1 and 1", r.Status.AttachedRoutes, r.Status.Sources)
			}
			return nil
		})
		msg := findCondition(router.Status.Conditions, v1alpha1.ConditionProgrammed).Message
		for _, left := range []string{`ContextRoute "hr": `, `ContextSource "hr-docs": `} {
			if !strings.Contains(msg, left) {
				t.Errorf("Programmed message %q does not list %s as left out", msg, left)
			}
		}
		data, _ := readBundle(t, c, ns, "acme")
		cfg := compileBundle(t, data)
		if got := routeNames(cfg); !slices.Equal(got, []string{"always"}) {
			t.Errorf("bundle routes %v, want [always]", got)
		}

		// What the route and the source report agrees with the bundle.
		got := waitRoute(t, c, newRoute(ns, "hr", ""), func(r *v1alpha1.ContextRoute) error {
			if err := wantParents(r, "acme"); err != nil {
				return err
			}
			return errors.Join(
				wantCond(r.Status.Parents[0].Conditions, "Accepted", condTrue, v1alpha1.ReasonAccepted, 1),
				wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condFalse, v1alpha1.ReasonInvalidSource, 1),
				wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidSource, 1))
		})
		ready := findCondition(got.Status.Conditions, "Ready").Message
		if strings.Contains(ready, "all references resolved") || !strings.Contains(ready, `ContextSource "hr-docs" is left out: spec.directory.path: "/etc/contextrouter/secrets" collides with`) {
			t.Errorf("route Ready message %q", ready)
		}
		waitRoute(t, c, newRoute(ns, "always", ""), func(r *v1alpha1.ContextRoute) error {
			return wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1)
		})
		gotSrc := waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			if len(s.Status.ExcludedBy) != 1 || s.Status.ExcludedBy[0].Router != "acme" || s.Status.ExcludedBy[0].Reason != v1alpha1.ReasonInvalidMount {
				return fmt.Errorf("excludedBy %+v, want acme InvalidMount", s.Status.ExcludedBy)
			}
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidMount, 1)
		})
		if m := findCondition(gotSrc.Status.Conditions, "Ready").Message; strings.Contains(m, "valid") {
			t.Errorf("source Ready message %q", m)
		}

		// Fixed, everything follows.
		update(t, c, gotSrc, func(s *v1alpha1.ContextSource) { s.Spec.Directory.Path = "/srv/hr" })
		waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
			if len(s.Status.ExcludedBy) != 0 {
				return fmt.Errorf("excludedBy %+v, want none", s.Status.ExcludedBy)
			}
			return wantCond(s.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 2)
		})
		waitRoute(t, c, newRoute(ns, "hr", ""), func(r *v1alpha1.ContextRoute) error {
			return wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1)
		})
	})

	t.Run("each router writes its own verdict: a source one router leaves out", func(t *testing.T) {
		ns := env.Namespace(t)
		s1 := dirSource("/srv/docs", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "one"}})
		s1.Namespace, s1.Name = ns, "s1"
		s2 := dirSource("/srv/docs", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "two"}})
		s2.Namespace, s2.Name = ns, "s2"
		only := newRoute(ns, "only-alpha", "", "s1")
		only.Spec.ParentRefs = []v1alpha1.ParentReference{{Name: "alpha"}}
		var shared []*v1alpha1.ContextRoute
		for i := range 6 {
			shared = append(shared, newRoute(ns, fmt.Sprintf("shared-%d", i), "", "s2"))
		}
		create(t, c,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: ns}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: ns}},
			newRouter(ns, "alpha"), newRouter(ns, "beta"), s1, s2, only)
		for _, r := range shared {
			create(t, c, r)
		}
		// In alpha, s2 would mount another volume where s1 is: alpha leaves
		// s2 and its routes out; beta serves them. Both entries stay.
		for _, r := range shared {
			waitRoute(t, c, r, func(r *v1alpha1.ContextRoute) error {
				if err := wantParents(r, "alpha", "beta"); err != nil {
					return err
				}
				return errors.Join(
					wantCond(r.Status.Parents[0].Conditions, "ResolvedRefs", condFalse, v1alpha1.ReasonInvalidSource, 1),
					wantCond(r.Status.Parents[1].Conditions, "Accepted", condTrue, v1alpha1.ReasonAccepted, 1),
					wantCond(r.Status.Parents[1].Conditions, "ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 1),
					wantCond(r.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidSource, 1))
			})
		}
		waitSource(t, c, s2, func(s *v1alpha1.ContextSource) error {
			if len(s.Status.ExcludedBy) != 1 || s.Status.ExcludedBy[0].Router != "alpha" ||
				!strings.Contains(s.Status.ExcludedBy[0].Message, `ContextSource "s1" of the same router mounts another volume at "/srv/docs"`) {
				return fmt.Errorf("excludedBy %+v, want alpha only", s.Status.ExcludedBy)
			}
			return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonInvalidMount, 1)
		})

		// Without the route that brings s1 into alpha, alpha takes s2 back
		// and removes its entry from the source.
		if err := c.Delete(ctx, only); err != nil {
			t.Fatal(err)
		}
		waitSource(t, c, s2, func(s *v1alpha1.ContextSource) error {
			if len(s.Status.ExcludedBy) != 0 {
				return fmt.Errorf("excludedBy %+v, want none", s.Status.ExcludedBy)
			}
			return wantCond(s.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 1)
		})
		for _, r := range shared {
			waitRoute(t, c, r, func(r *v1alpha1.ContextRoute) error {
				return wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1)
			})
		}
	})

	t.Run("permission naming a missing source stays Ready", func(t *testing.T) {
		ns := env.Namespace(t)
		create(t, c, newInline(ns, "faq"))
		perm := &v1alpha1.AgentPermission{
			ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: ns},
			Spec: v1alpha1.AgentPermissionSpec{
				Agents: []string{"support-bot"}, AllowSources: []string{"faq", "later"}, DenySources: []string{"payroll"},
			},
		}
		create(t, c, perm)
		got := waitPermission(t, c, perm, func(p *v1alpha1.AgentPermission) error {
			return errors.Join(
				wantCond(p.Status.Conditions, "ResolvedRefs", condFalse, v1alpha1.ReasonSourceNotFound, 1),
				wantCond(p.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 1))
		})
		if msg := findCondition(got.Status.Conditions, "ResolvedRefs").Message; msg != `ContextSources "later" and "payroll" not found` {
			t.Errorf("ResolvedRefs message %q", msg)
		}
		create(t, c, newInline(ns, "later"), newInline(ns, "payroll"))
		got = waitPermission(t, c, perm, func(p *v1alpha1.AgentPermission) error {
			return errors.Join(
				wantCond(p.Status.Conditions, "ResolvedRefs", condTrue, v1alpha1.ReasonResolvedRefs, 1),
				wantCond(p.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonValid, 1))
		})
		assertStatusSettles(t, c, got)
	})
}

func newRouter(ns, name string) *v1alpha1.ContextRouter {
	return &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

func newInline(ns, name string) *v1alpha1.ContextSource {
	s := inlineSource()
	s.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns}
	return s
}

func newRoute(ns, name, when string, sources ...string) *v1alpha1.ContextRoute {
	r := &v1alpha1.ContextRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.ContextRouteSpec{When: when},
	}
	for _, s := range sources {
		r.Spec.Sources = append(r.Spec.Sources, v1alpha1.LocalObjectReference{Name: s})
	}
	return r
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// update applies change to the latest version of obj, retrying on conflicts
// with the status writes of the reconcilers.
func update[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) {
	t.Helper()
	deadline := time.Now().Add(statusTimeout)
	for {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		change(obj)
		err := c.Update(t.Context(), obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			t.Fatalf("update %T %s: %v", obj, obj.GetName(), err)
		}
	}
}

// wait polls obj until check passes and returns the passing version.
func wait[T client.Object](t *testing.T, c client.Client, obj T, check func(T) error) T {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	got := obj.DeepCopyObject().(T)
	var last error
	for deadline := time.Now().Add(statusTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := c.Get(t.Context(), key, got); err != nil {
			last = err
			continue
		}
		if last = check(got); last == nil {
			return got
		}
	}
	t.Fatalf("%T %s: status did not converge within %s: %v", obj, key, statusTimeout, last)
	return got
}

func waitRoute(t *testing.T, c client.Client, r *v1alpha1.ContextRoute, check func(*v1alpha1.ContextRoute) error) *v1alpha1.ContextRoute {
	t.Helper()
	return wait(t, c, r, check)
}

func waitSource(t *testing.T, c client.Client, s *v1alpha1.ContextSource, check func(*v1alpha1.ContextSource) error) *v1alpha1.ContextSource {
	t.Helper()
	return wait(t, c, s, check)
}

func waitPermission(t *testing.T, c client.Client, p *v1alpha1.AgentPermission, check func(*v1alpha1.AgentPermission) error) *v1alpha1.AgentPermission {
	t.Helper()
	return wait(t, c, p, check)
}

// wantParents checks the router names of status.parents, in order.
func wantParents(r *v1alpha1.ContextRoute, names ...string) error {
	got := make([]string, len(r.Status.Parents))
	for i, p := range r.Status.Parents {
		got[i] = p.ParentRef.Name
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		return fmt.Errorf("status.parents %q, want %q", got, names)
	}
	return nil
}

// wantCond checks one condition, including its observedGeneration and that
// it has a transition time.
func wantCond(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason v1alpha1.ConditionReason, gen int64) error {
	c := findCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition in %+v", typ, conds)
	case c.Status != status || c.Reason != string(reason):
		return fmt.Errorf("%s=%s reason %s (%q), want %s reason %s", typ, c.Status, c.Reason, c.Message, status, reason)
	case c.ObservedGeneration != gen:
		return fmt.Errorf("%s observedGeneration %d, want %d", typ, c.ObservedGeneration, gen)
	case c.LastTransitionTime.IsZero():
		return fmt.Errorf("%s has no lastTransitionTime", typ)
	}
	return nil
}

// assertStatusSettles checks that a converged object is not written again:
// the reconcilers patch status only when it changes, so its resourceVersion
// stays put.
func assertStatusSettles(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	rv := obj.GetResourceVersion()
	time.Sleep(1500 * time.Millisecond)
	latest := obj.DeepCopyObject().(client.Object)
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, latest); err != nil {
		t.Fatal(err)
	}
	if latest.GetResourceVersion() != rv {
		t.Errorf("%T %s was written again after converging (resourceVersion %s -> %s)", obj, obj.GetName(), rv, latest.GetResourceVersion())
	}
}
