package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// TestStatusWriters checks, against the API server and without the
// operator running, how the shared status lists are written and bounded.
func TestStatusWriters(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	now := metav1.Now().Rfc3339Copy()
	entryOf := func(router string) func(*v1alpha1.ContextRoute) bool {
		return func(r *v1alpha1.ContextRoute) bool {
			return setParent(&r.Status.Parents, routeEntry(r, router, bundle.Verdict{Included: true}), now)
		}
	}

	t.Run("two routers writing their entries do not clobber each other", func(t *testing.T) {
		ns := env.Namespace(t)
		route := newRoute(ns, "hr", "", "docs")
		create(t, c, route)
		// Both writers start from the same version of the route, as two
		// reconciles reading the cache at the same time do.
		alpha, beta := route.DeepCopy(), route.DeepCopy()
		if err := patchStatusLocked(ctx, c, c, alpha, entryOf("alpha")); err != nil {
			t.Fatal(err)
		}
		if err := patchStatusLocked(ctx, c, c, beta, entryOf("beta")); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.ContextRoute{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(route), got); err != nil {
			t.Fatal(err)
		}
		if err := wantParents(got, "alpha", "beta"); err != nil {
			t.Error(err)
		}
		// Writing an entry again that has not changed is no write at all.
		rv := got.ResourceVersion
		if err := patchStatusLocked(ctx, c, c, got, entryOf("alpha")); err != nil || got.ResourceVersion != rv {
			t.Errorf("an unchanged entry was written: %v, resourceVersion %s -> %s", err, rv, got.ResourceVersion)
		}
	})

	t.Run("the API server bounds status.parents and status.excludedBy", func(t *testing.T) {
		ns := env.Namespace(t)
		route := newRoute(ns, "hr", "", "docs")
		src := newInline(ns, "docs")
		create(t, c, route, src)
		for _, n := range []int{v1alpha1.MaxStatusParents, v1alpha1.MaxStatusParents + 1} {
			route.Status.Parents = nil
			for i := range n {
				route.Status.Parents = append(route.Status.Parents, missingParentEntry(route, fmt.Sprintf("r%02d", i)))
				route.Status.Parents[i].Conditions = mergeConditions(nil, route.Status.Parents[i].Conditions, now)
			}
			err := c.Status().Update(ctx, route)
			if n <= v1alpha1.MaxStatusParents && err != nil {
				t.Errorf("%d parents refused: %v", n, err)
			}
			if n > v1alpha1.MaxStatusParents && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.parents: Too many")) {
				t.Errorf("%d parents: err = %v, want Invalid: Too many", n, err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
				t.Fatal(err)
			}

			src.Status.ExcludedBy = nil
			for i := range n {
				src.Status.ExcludedBy = append(src.Status.ExcludedBy, v1alpha1.SourceExclusion{
					Router: fmt.Sprintf("r%02d", i), Reason: v1alpha1.ReasonInvalidMount, Message: "m"})
			}
			err = c.Status().Update(ctx, src)
			if n <= v1alpha1.MaxStatusParents && err != nil {
				t.Errorf("%d exclusions refused: %v", n, err)
			}
			if n > v1alpha1.MaxStatusParents && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.excludedBy: Too many")) {
				t.Errorf("%d exclusions: err = %v, want Invalid: Too many", n, err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
				t.Fatal(err)
			}
		}
		// The writer keeps within the bound: a full list takes no good news.
		if len(route.Status.Parents) != v1alpha1.MaxStatusParents {
			t.Fatalf("%d parents stored", len(route.Status.Parents))
		}
		if err := patchStatusLocked(ctx, c, c, route, entryOf("zz")); err != nil {
			t.Errorf("writing to a full list: %v", err)
		}
	})

	// A verdict write still in flight when its router is deleted can land
	// after the route reconciler dropped the router's entry; the reconcile
	// the deletion queues, which comes after it, removes it for good.
	t.Run("the reconcile of a deleted router removes its late entries", func(t *testing.T) {
		ns := env.Namespace(t)
		route := newRoute(ns, "hr", "", "docs")
		src := newInline(ns, "docs")
		create(t, c, route, src, newRouter(ns, "beta"))
		for _, router := range []string{"alpha", "beta"} {
			if err := patchStatusLocked(ctx, c, c, route, entryOf(router)); err != nil {
				t.Fatal(err)
			}
			if err := patchStatusLocked(ctx, c, c, src, func(s *v1alpha1.ContextSource) bool {
				return setExclusion(&s.Status.ExcludedBy, router, &v1alpha1.SourceExclusion{
					Router: router, Reason: v1alpha1.ReasonInvalidMount, Message: "m"})
			}); err != nil {
				t.Fatal(err)
			}
		}
		r := &RouterReconciler{Client: c}
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "alpha"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(route), route); err != nil {
			t.Fatal(err)
		}
		if err := wantParents(route, "beta"); err != nil {
			t.Error(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
			t.Fatal(err)
		}
		if got := src.Status.ExcludedBy; len(got) != 1 || got[0].Router != "beta" {
			t.Errorf("excludedBy = %+v, want only beta's entry", got)
		}
	})
}

// TestConfigMapCache: the operator caches no ConfigMap it did not make, and
// holds no data, labels or annotations of the users' ConfigMaps, while it
// still follows the document ConfigMaps its routers mount.
func TestConfigMapCache(t *testing.T) {
	env := testenv.Start(t)
	mgr := startOperator(t, env, testr.New(t))
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)

	secretish := strings.Repeat("unrelated-data ", 100)
	unrelated := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns, Labels: map[string]string{"team": "x"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": secretish}},
		Data: map[string]string{"big": secretish},
	}
	docs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hr-files", Namespace: ns}, Data: map[string]string{"pto.md": "# PTO\n25 days."}}
	src := dirSource("", &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr-files"}})
	src.Namespace, src.Name = ns, "hr-docs"
	mustCreate(t, c, unrelated, docs, tRouter(ns, "acme"), src, tRoute(ns, "hr", "", nil, "hr-docs"))
	waitRouter(t, c, ns, "acme", programmed)

	// The manager's cache: the bundle ConfigMap, nothing else.
	var cached corev1.ConfigMapList
	if err := mgr.GetCache().List(ctx, &cached, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range cached.Items {
		names = append(names, cm.Name)
	}
	if strings.Join(names, ",") != bundle.ConfigMapName("acme") {
		t.Errorf("cached ConfigMaps %v, want only %s", names, bundle.ConfigMapName("acme"))
	}

	// The document cache: names only.
	docCache, err := documentConfigMaps(mgr, nil)
	if err != nil {
		t.Fatal(err)
	}
	meta := &metav1.PartialObjectMetadataList{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := docCache.List(ctx, meta, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range meta.Items {
		seen[m.Name] = true
		if len(m.Labels)+len(m.Annotations)+len(m.ManagedFields)+len(m.OwnerReferences) > 0 || m.UID == "" || m.ResourceVersion == "" {
			t.Errorf("document cache holds more than the identity of %s: %+v", m.Name, m.ObjectMeta)
		}
	}
	if !seen["hr-files"] || !seen["unrelated"] {
		t.Errorf("document cache %v, want hr-files and unrelated", seen)
	}

	// A document ConfigMap going away is still noticed.
	if err := c.Delete(ctx, docs); err != nil {
		t.Fatal(err)
	}
	waitSource(t, c, src, func(s *v1alpha1.ContextSource) error {
		return wantCond(s.Status.Conditions, "Ready", condFalse, v1alpha1.ReasonConfigMapNotFound, 1)
	})
}
