package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/engine"
)

// A ContextClassifier attaches to routers exactly like a route, and its
// status.parents, Ready and observedGeneration follow the route's rules. The
// functions of conditions.go compute them on a route view of the classifier
// (asRoute), so there is one rule for both kinds.

// asRoute is a route with the classifier's metadata, parentRefs and
// attachment status, for the route status functions.
func asRoute(c *v1alpha1.ContextClassifier) *v1alpha1.ContextRoute {
	return &v1alpha1.ContextRoute{
		ObjectMeta: c.ObjectMeta,
		Spec:       v1alpha1.ContextRouteSpec{ParentRefs: c.Spec.ParentRefs},
		Status: v1alpha1.ContextRouteStatus{
			ObservedGeneration: c.Status.ObservedGeneration,
			Parents:            c.Status.Parents,
			Conditions:         c.Status.Conditions,
		},
	}
}

// applyRouteStatus runs change on the route view of c and copies the
// attachment status back; it reports what change reports.
func applyRouteStatus(c *v1alpha1.ContextClassifier, change func(*v1alpha1.ContextRoute) bool) bool {
	rt := asRoute(c)
	changed := change(rt)
	c.Status.ObservedGeneration = rt.Status.ObservedGeneration
	c.Status.Parents = rt.Status.Parents
	c.Status.Conditions = rt.Status.Conditions
	return changed
}

// setTrained writes what the bundle's compile learned of a classifier:
// labels with their example counts and the training accuracy; nothing (and
// no change) when it was not trained there (its examples are in a file the
// router pod reads). It reports whether the status changed.
func setTrained(c *v1alpha1.ContextClassifier, trained []engine.ClassifierStatus) bool {
	i := slices.IndexFunc(trained, func(t engine.ClassifierStatus) bool { return t.Name == c.Name })
	var labels []v1alpha1.LabelStatus
	acc := ""
	if i >= 0 && trained[i].Trained {
		t := trained[i]
		for _, l := range slices.Sorted(maps.Keys(t.Labels)) {
			labels = append(labels, v1alpha1.LabelStatus{Name: l, Examples: int32(t.Labels[l])})
		}
		acc = strconv.FormatFloat(t.TrainingAccuracy, 'f', 3, 64)
	}
	st := &c.Status
	if slices.Equal(st.Labels, labels) && st.TrainingAccuracy == acc && st.LabelCount == int32(len(labels)) {
		return false
	}
	st.Labels, st.TrainingAccuracy, st.LabelCount = labels, acc, int32(len(labels))
	return true
}

// classifierVerdict is the router's write of its verdict on a classifier:
// its status.parents entry, Ready, and what training found.
func classifierVerdict(c *v1alpha1.ContextClassifier, router string, routers []string, v bundle.Verdict, b *bundle.Bundle, now metav1.Time) bool {
	entry := routeEntry(asRoute(c), router, v)
	changed := applyRouteStatus(c, func(rt *v1alpha1.ContextRoute) bool {
		before := rt.Status.DeepCopy()
		setParent(&rt.Status.Parents, entry, now)
		setReady(rt, routers, now)
		return !statusEqual(before, &rt.Status)
	})
	if v.Included {
		changed = setTrained(c, b.Trained) || changed
	}
	return changed
}

// ClassifierReconciler writes the router-independent part of a
// ContextClassifier's status, as RouteReconciler does for routes; each
// router writes its own entry from its bundle's verdict (RouterReconciler).
type ClassifierReconciler struct {
	Client client.Client
	live   client.Reader
}

// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextclassifiers,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextclassifiers/status,verbs=get;update;patch

// Reconcile recomputes the router-independent status of one classifier.
func (r *ClassifierReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &v1alpha1.ContextClassifier{}
	if err := r.Client.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	routers, err := routerNames(ctx, r.Client, c.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.Now().Rfc3339Copy()
	live := r.live
	if live == nil {
		live = r.Client
	}
	return ctrl.Result{}, patchStatusLocked(ctx, r.Client, live, c, func(cur *v1alpha1.ContextClassifier) bool {
		return applyRouteStatus(cur, func(rt *v1alpha1.ContextRoute) bool { return routeStatus(rt, routers, now) })
	})
}

// SetupWithManager registers the reconciler: classifiers are reconciled
// when their spec changes and when a router of their namespace appears or goes.
func (r *ClassifierReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.live == nil {
		r.live = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("contextclassifier").
		For(&v1alpha1.ContextClassifier{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ContextRouter{}, handler.EnqueueRequestsFromMapFunc(r.classifiersForRouter),
			builder.WithPredicates(createOrDeleteOnly)).
		Complete(r)
}

// classifiersForRouter maps a router to the classifiers of its namespace
// that attach to it (a namespace holds few classifiers: no index).
func (r *ClassifierReconciler) classifiersForRouter(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.ContextClassifierList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list ContextClassifiers", "namespace", obj.GetNamespace())
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range list.Items {
		if c.AttachesTo(obj.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
		}
	}
	return reqs
}

// attachedClassifiers lists the classifiers of a namespace that attach to router.
func attachedClassifiers(ctx context.Context, c client.Reader, ns, router string) ([]v1alpha1.ContextClassifier, error) {
	var list v1alpha1.ContextClassifierList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list ContextClassifiers of %s/%s: %w", ns, router, err)
	}
	return slices.DeleteFunc(list.Items, func(c v1alpha1.ContextClassifier) bool { return !c.AttachesTo(router) }), nil
}

// forClassifier maps a classifier to the routers it attaches to.
func (m routerMapper) forClassifier(ctx context.Context, obj client.Object) []reconcile.Request {
	c, ok := obj.(*v1alpha1.ContextClassifier)
	if !ok {
		return nil
	}
	s := newRouterSet(c.Namespace)
	s.addParents(c.Spec.ParentRefs)
	return s.requests(ctx, m.c)
}

// addExampleSourceRouters adds the routers of the classifiers that read a
// file of source (examples, dictionary values).
func (m routerMapper) addExampleSourceRouters(ctx context.Context, s *routerSet, source string) {
	var list v1alpha1.ContextClassifierList
	if err := m.c.List(ctx, &list, client.InNamespace(s.ns)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list ContextClassifiers", "namespace", s.ns)
		return
	}
	for _, c := range list.Items {
		if slices.Contains(c.SourceNames(), source) {
			s.addParents(c.Spec.ParentRefs)
		}
	}
}
