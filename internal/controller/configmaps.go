package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ConfigMaps. The operator needs two kinds:
//
//   - the bundle ConfigMaps it writes, which carry LabelManagedBy: the
//     manager's cache holds those, in full, and nothing else (CacheOptions);
//   - the users' document ConfigMaps that Directory sources mount. They carry
//     no label of ours (asking for one would break existing manifests), and
//     their content matters only when a router's pods are rolled. So they are
//     watched through a second cache that holds, for every ConfigMap, only
//     its namespace, name, UID and resourceVersion — never data, labels or
//     annotations (kubectl's last-applied-configuration annotation repeats
//     the whole data). The operator learns that a document ConfigMap appeared,
//     changed or went, and reads the content of the few a bundle mounts from
//     the API server when it needs it (RouterReconciler.inputsHash).

// documentCaches holds the document ConfigMap cache of each manager: the
// router and source reconcilers share one.
var documentCaches sync.Map // ctrl.Manager -> *documentCache

type documentCache struct {
	once  sync.Once
	cache cache.Cache
	err   error
}

// documentConfigMaps returns mgr's document ConfigMap cache, creating it (and
// adding it to mgr, which starts it) on first use. namespaces limits it as
// the manager's cache is limited; the first caller's namespaces win.
func documentConfigMaps(mgr ctrl.Manager, namespaces []string) (cache.Cache, error) {
	v, _ := documentCaches.LoadOrStore(mgr, &documentCache{})
	dc := v.(*documentCache)
	dc.once.Do(func() {
		opts := cache.Options{
			Scheme:           mgr.GetScheme(),
			Mapper:           mgr.GetRESTMapper(),
			HTTPClient:       mgr.GetHTTPClient(),
			DefaultTransform: configMapIdentity,
			// Only ConfigMap metadata is ever read from this cache.
			ReaderFailOnMissingInformer: true,
		}
		if len(namespaces) > 0 {
			opts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
			for _, ns := range namespaces {
				opts.DefaultNamespaces[ns] = cache.Config{}
			}
		}
		c, err := cache.New(mgr.GetConfig(), opts)
		if err != nil {
			dc.err = fmt.Errorf("create the document ConfigMap cache: %w", err)
			return
		}
		// Register the informer now: reads fail on types without one.
		if _, err := c.GetInformer(context.Background(), configMapMetadata(), cache.BlockUntilSynced(false)); err != nil {
			dc.err = fmt.Errorf("watch ConfigMap metadata: %w", err)
			return
		}
		if err := mgr.Add(c); err != nil {
			dc.err = fmt.Errorf("add the document ConfigMap cache: %w", err)
			return
		}
		dc.cache = c
	})
	return dc.cache, dc.err
}

// configMapMetadata is a ConfigMap as the document cache holds it.
func configMapMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// configMapIdentity keeps what tells a ConfigMap exists and whether it
// changed, and drops the rest before the cache stores it.
func configMapIdentity(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         m.Namespace,
			Name:              m.Name,
			UID:               m.UID,
			ResourceVersion:   m.ResourceVersion,
			DeletionTimestamp: m.DeletionTimestamp,
		},
	}, nil
}

// watchDocumentConfigMaps is a watch source of document ConfigMap events
// mapped by fn; preds filter them.
func watchDocumentConfigMaps(c cache.Cache, fn handler.MapFunc, preds ...predicate.TypedPredicate[*metav1.PartialObjectMetadata]) source.SyncingSource {
	return source.Kind(c, configMapMetadata(),
		handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, m *metav1.PartialObjectMetadata) []reconcile.Request {
			return fn(ctx, m)
		}), preds...)
}

// configMapExists reports whether the ConfigMap namespace/name exists,
// according to the document cache.
func configMapExists(ctx context.Context, c client.Reader, namespace, name string) (bool, error) {
	return objectExists(ctx, c, configMapMetadata(), namespace, name)
}
