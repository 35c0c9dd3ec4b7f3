package controller

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
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

// SourceReconciler writes ContextSource status: Ready says whether the spec is
// valid and whether the Secrets (and their keys), ConfigMaps and
// PersistentVolumeClaims it references exist. It never loads the source:
// reading files or repositories is the router's job and shows in its status.
type SourceReconciler struct {
	Client client.Client

	// secretReader reads Secrets straight from the API server. Secrets are
	// watched as metadata only, so the operator never caches every Secret's
	// data; set by SetupWithManager (Client when nil).
	secretReader client.Reader
}

// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextsources,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextsources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// Reconcile recomputes the status of one source.
func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	src := &v1alpha1.ContextSource{}
	if err := r.Client.Get(ctx, req.NamespacedName, src); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !src.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := src.DeepCopy()
	defer func() {
		if reterr == nil {
			reterr = patchStatusIfChanged(ctx, r.Client, before, src,
				equality.Semantic.DeepEqual(before.Status, src.Status))
		}
	}()

	lookup, err := r.lookup(ctx, src)
	if err != nil {
		return ctrl.Result{}, err
	}
	src.Status = sourceStatus(src, sourceSpecError(src), sourceRefProblems(src, lookup), metav1.Now().Rfc3339Copy())
	return ctrl.Result{}, nil
}

// lookup fetches exactly the objects the source references.
func (r *SourceReconciler) lookup(ctx context.Context, src *v1alpha1.ContextSource) (sourceLookup, error) {
	l := sourceLookup{secrets: map[string][]string{}, configMaps: map[string]bool{}, pvcs: map[string]bool{}}
	secrets := r.secretReader
	if secrets == nil {
		secrets = r.Client
	}
	for _, name := range SourceSecretNames(src) {
		s := &corev1.Secret{}
		ok, err := objectExists(ctx, secrets, s, src.Namespace, name)
		if err != nil {
			return l, err
		}
		if ok {
			keys := make([]string, 0, len(s.Data))
			for k := range s.Data {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			l.secrets[name] = keys
		}
	}
	for _, name := range SourceConfigMapNames(src) {
		ok, err := objectExists(ctx, r.Client, &corev1.ConfigMap{}, src.Namespace, name)
		if err != nil {
			return l, err
		}
		l.configMaps[name] = ok
	}
	for _, name := range SourcePVCNames(src) {
		ok, err := objectExists(ctx, r.Client, pvcMetadata(), src.Namespace, name)
		if err != nil {
			return l, err
		}
		l.pvcs[name] = ok
	}
	return l, nil
}

// pvcMetadata is a PersistentVolumeClaim read from the metadata-only cache:
// only its existence matters here.
func pvcMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"))
	return m
}

// SetupWithManager registers the reconciler. A Secret event of any kind
// re-reconciles the sources that name it (its keys may have changed); a
// ConfigMap or claim only matters when it appears or goes.
func (r *SourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := RegisterSharedIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if r.secretReader == nil {
		r.secretReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("contextsource").
		For(&v1alpha1.ContextSource{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourceSecrets)),
			builder.OnlyMetadata).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourceConfigMaps)),
			builder.WithPredicates(createOrDeleteOnly)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourcePVCs)),
			builder.OnlyMetadata, builder.WithPredicates(createOrDeleteOnly)).
		Complete(r)
}

// sourcesBy maps an object to the sources whose index key holds its name.
func (r *SourceReconciler) sourcesBy(key string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		return indexedRequests(ctx, r.Client, &v1alpha1.ContextSourceList{}, obj.GetNamespace(), key, obj.GetName())
	}
}
