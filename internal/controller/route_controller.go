package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// RouteReconciler writes the part of a ContextRoute's status that does not
// depend on what a router makes of the route: the status.parents entries of
// routers named in parentRefs that do not exist (Accepted=False
// NoMatchingParent), no entries for routers the route does not attach to,
// and Ready. Each existing router writes its own entry from its bundle's
// verdict (RouterReconciler), so what a route reports is what its routers
// serve.
type RouteReconciler struct {
	Client client.Client

	// live reads a route again after a write conflict; set by
	// SetupWithManager (Client when nil).
	live client.Reader
}

// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextroutes,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters,verbs=get;list;watch

// Reconcile recomputes the router-independent status of one route.
func (r *RouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	route := &v1alpha1.ContextRoute{}
	if err := r.Client.Get(ctx, req.NamespacedName, route); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !route.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	routers, err := routerNames(ctx, r.Client, route.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := metav1.Now().Rfc3339Copy()
	return ctrl.Result{}, patchStatusLocked(ctx, r.Client, r.reader(), route, func(rt *v1alpha1.ContextRoute) bool {
		return routeStatus(rt, routers, now)
	})
}

func (r *RouteReconciler) reader() client.Reader {
	if r.live != nil {
		return r.live
	}
	return r.Client
}

// routerNames lists the ContextRouters of a namespace.
func routerNames(ctx context.Context, c client.Reader, namespace string) ([]string, error) {
	var routers v1alpha1.ContextRouterList
	if err := c.List(ctx, &routers, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list ContextRouters in %s: %w", namespace, err)
	}
	names := make([]string, len(routers.Items))
	for i, rt := range routers.Items {
		names[i] = rt.Name
	}
	return names, nil
}

// SetupWithManager registers the reconciler. Routes are re-reconciled when
// their spec changes and when a router appears or goes (their parents
// change).
func (r *RouteReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := RegisterSharedIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if r.live == nil {
		r.live = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("contextroute").
		For(&v1alpha1.ContextRoute{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ContextRouter{}, handler.EnqueueRequestsFromMapFunc(r.routesForRouter),
			builder.WithPredicates(createOrDeleteOnly)).
		Complete(r)
}

// routesForRouter maps a router to the routes that name it or attach to every router.
func (r *RouteReconciler) routesForRouter(ctx context.Context, obj client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range []string{obj.GetName(), AllParents} {
		reqs = append(reqs, indexedRequests(ctx, r.Client, &v1alpha1.ContextRouteList{}, obj.GetNamespace(), IndexRouteParents, key)...)
	}
	return reqs
}

// createOrDeleteOnly passes the events that change whether an object exists.
var createOrDeleteOnly = predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// updateOnly passes updates only.
var updateOnly = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// indexedRequests lists the objects of list's kind in namespace whose field
// index key holds value and returns a request for each. A failed list is
// logged: a map function cannot return an error, and the objects are
// reconciled again on their own next event or resync.
func indexedRequests(ctx context.Context, c client.Client, list client.ObjectList, namespace, key, value string) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{key: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list objects by field index", "index", key, "value", value, "namespace", namespace)
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range listObjects(list) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
	}
	return reqs
}

// listObjects returns the items of the lists this file's reconcilers use.
func listObjects(list client.ObjectList) []client.Object {
	var out []client.Object
	switch l := list.(type) {
	case *v1alpha1.ContextRouteList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *v1alpha1.ContextSourceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *v1alpha1.AgentPermissionList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

// objectExists reports whether namespace/name of obj's kind exists in the
// client's view; obj receives it.
func objectExists(ctx context.Context, c client.Reader, obj client.Object, namespace, name string) (bool, error) {
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %T %s/%s: %w", obj, namespace, name, err)
	}
	return true, nil
}

// patchStatusIfChanged writes after's status with a merge patch against
// before, unless unchanged. Skipping identical writes keeps a reconcile that
// finds nothing new from triggering watches (and itself) again.
func patchStatusIfChanged(ctx context.Context, c client.Client, before, after client.Object, unchanged bool) error {
	if unchanged {
		return nil
	}
	err := c.Status().Patch(ctx, after, client.MergeFrom(before))
	if apierrors.IsNotFound(err) {
		// Deleted while we computed; nothing left to describe.
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch status of %T %s/%s: %w", after, after.GetNamespace(), after.GetName(), err)
	}
	return nil
}
