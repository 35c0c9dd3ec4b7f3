package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// PermissionReconciler writes AgentPermission status: ResolvedRefs (do the
// sources in allowSources and denySources exist) and Ready (is the spec
// valid). See permissionConditions for why a missing source leaves Ready True.
type PermissionReconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=contextrouter.dev,resources=agentpermissions,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=agentpermissions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextsources,verbs=get;list;watch

// Reconcile recomputes the status of one permission.
func (r *PermissionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	p := &v1alpha1.AgentPermission{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := p.DeepCopy()
	defer func() {
		if reterr == nil {
			reterr = patchStatusIfChanged(ctx, r.Client, before, p,
				equality.Semantic.DeepEqual(before.Status, p.Status))
		}
	}()

	exists := map[string]bool{}
	for _, name := range PermissionSourceNames(p) {
		ok, err := objectExists(ctx, r.Client, &v1alpha1.ContextSource{}, p.Namespace, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		exists[name] = ok
	}
	missing := permissionMissingSources(p, exists)
	p.Status = permissionStatus(p, missing, metav1.Now().Rfc3339Copy())
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler. A source appearing or going
// re-reconciles the permissions that name it.
func (r *PermissionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := RegisterSharedIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agentpermission").
		For(&v1alpha1.AgentPermission{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ContextSource{}, handler.EnqueueRequestsFromMapFunc(r.permissionsForSource),
			builder.WithPredicates(createOrDeleteOnly)).
		Complete(r)
}

// permissionsForSource maps a source to the permissions that name it.
func (r *PermissionReconciler) permissionsForSource(ctx context.Context, obj client.Object) []reconcile.Request {
	return indexedRequests(ctx, r.Client, &v1alpha1.AgentPermissionList{}, obj.GetNamespace(), IndexPermissionSources, obj.GetName())
}
