package controller

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// SourceReconciler writes ContextSource status: Ready says whether the spec is
// valid (the check every bundle makes), whether the Secrets (and their keys),
// ConfigMaps and PersistentVolumeClaims it references exist, and whether a
// router leaves it out of its bundle (status.excludedBy, which each router
// writes). It never loads the source: reading files or repositories is the
// router's job and shows in its status.
type SourceReconciler struct {
	Client client.Client

	// secretReader reads Secrets straight from the API server. Secrets are
	// watched as metadata only, so the operator never caches every Secret's
	// data; set by SetupWithManager (Client when nil).
	secretReader client.Reader
	// configMaps answers whether a ConfigMap exists (the document ConfigMap
	// cache); set by SetupWithManager (Client when nil).
	configMaps client.Reader
	// live reads a source again after a write conflict; set by SetupWithManager.
	live client.Reader
	// namespaces limits the document ConfigMap cache (Options.Namespaces).
	namespaces []string
}

// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextsources,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextsources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch

// Reconcile recomputes the status of one source.
func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	src := &v1alpha1.ContextSource{}
	if err := r.Client.Get(ctx, req.NamespacedName, src); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !src.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	own, err := r.problems(ctx, src)
	if err != nil {
		return ctrl.Result{}, err
	}
	routers, err := routerNames(ctx, r.Client, src.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	gen, now := src.Generation, metav1.Now().Rfc3339Copy()
	return ctrl.Result{}, patchStatusLocked(ctx, r.Client, r.reader(), src, func(s *v1alpha1.ContextSource) bool {
		// A newer spec is reconciled on its own event.
		return s.Generation == gen && sourceStatus(s, own, routers, now)
	})
}

func (r *SourceReconciler) reader() client.Reader {
	if r.live != nil {
		return r.live
	}
	return r.Client
}

// problems are the source's own problems: its spec, else the objects it
// references.
func (r *SourceReconciler) problems(ctx context.Context, src *v1alpha1.ContextSource) (problem.List, error) {
	if ps := sourceSpecProblems(src); len(ps) > 0 {
		return ps, nil
	}
	lookup, err := r.lookup(ctx, src)
	if err != nil {
		return nil, err
	}
	return sourceRefProblems(src, lookup), nil
}

// lookup fetches exactly the objects the source references.
func (r *SourceReconciler) lookup(ctx context.Context, src *v1alpha1.ContextSource) (sourceLookup, error) {
	l := sourceLookup{secrets: map[string][]string{}, configMaps: map[string]bool{}, pvcs: map[string]bool{}}
	secrets, configMaps := r.secretReader, r.configMaps
	if secrets == nil {
		secrets = r.Client
	}
	if configMaps == nil {
		configMaps = r.Client
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
		ok, err := configMapExists(ctx, configMaps, src.Namespace, name)
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

// specOrExclusionsChanged passes source updates that change the spec or
// status.excludedBy (a router's verdict, which Ready summarises).
var specOrExclusionsChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.ContextSource)
		n, ok2 := e.ObjectNew.(*v1alpha1.ContextSource)
		return ok1 && ok2 && !slices.Equal(o.Status.ExcludedBy, n.Status.ExcludedBy)
	},
})

// SetupWithManager registers the reconciler. A Secret event of any kind
// re-reconciles the sources that name it (its keys may have changed); a
// ConfigMap or claim only matters when it appears or goes, a router when it
// goes (its status.excludedBy entries go with it).
func (r *SourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := RegisterSharedIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if r.secretReader == nil {
		r.secretReader = mgr.GetAPIReader()
	}
	if r.live == nil {
		r.live = mgr.GetAPIReader()
	}
	docs, err := documentConfigMaps(mgr, r.namespaces)
	if err != nil {
		return err
	}
	if r.configMaps == nil {
		r.configMaps = docs
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("contextsource").
		For(&v1alpha1.ContextSource{}, builder.WithPredicates(specOrExclusionsChanged)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourceSecrets)),
			builder.OnlyMetadata).
		WatchesRawSource(watchDocumentConfigMaps(docs, r.sourcesBy(IndexSourceConfigMaps), createOrDeleteOnlyMetadata)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourcePVCs)),
			builder.OnlyMetadata, builder.WithPredicates(createOrDeleteOnly)).
		Watches(&v1alpha1.ContextRouter{}, handler.EnqueueRequestsFromMapFunc(r.sourcesBy(IndexSourceExcludedBy)),
			builder.WithPredicates(createOrDeleteOnly)).
		Complete(r)
}

// createOrDeleteOnlyMetadata is createOrDeleteOnly for metadata watches.
var createOrDeleteOnlyMetadata = predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
	UpdateFunc:  func(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool { return false },
	GenericFunc: func(event.TypedGenericEvent[*metav1.PartialObjectMetadata]) bool { return false },
}

// sourcesBy maps an object to the sources whose index key holds its name.
func (r *SourceReconciler) sourcesBy(key string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		return indexedRequests(ctx, r.Client, &v1alpha1.ContextSourceList{}, obj.GetNamespace(), key, obj.GetName())
	}
}
