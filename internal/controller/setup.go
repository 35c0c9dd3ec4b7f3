// Package controller holds the operator's reconcilers: ContextRouter (the
// bundle and the router workload) and the status of ContextRoute,
// ContextSource and AgentPermission. Reconcilers stay thin: they read objects,
// call internal/bundle and internal/engine, and write children and status.
package controller

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure the reconcilers.
type Options struct {
	// RouterImage runs routers whose spec.deployment.image is empty.
	RouterImage string
	// Namespaces limits the document ConfigMap cache as CacheOptions limits
	// the manager's (none: every namespace).
	Namespaces []string
}

// Setup registers every reconciler of the operator with mgr. The manager's
// cache should be built with CacheOptions.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.RouterImage == "" {
		return fmt.Errorf("controller setup: no router image given")
	}
	reconcilers := []struct {
		name  string
		setup func(ctrl.Manager) error
	}{
		{"ContextRouter", (&RouterReconciler{Client: mgr.GetClient(), RouterImage: opts.RouterImage, namespaces: opts.Namespaces}).SetupWithManager},
		{"ContextRoute", (&RouteReconciler{Client: mgr.GetClient()}).SetupWithManager},
		{"ContextSource", (&SourceReconciler{Client: mgr.GetClient(), namespaces: opts.Namespaces}).SetupWithManager},
		{"AgentPermission", (&PermissionReconciler{Client: mgr.GetClient()}).SetupWithManager},
		{"ContextClassifier", (&ClassifierReconciler{Client: mgr.GetClient()}).SetupWithManager},
	}
	for _, r := range reconcilers {
		if err := r.setup(mgr); err != nil {
			return fmt.Errorf("set up the %s reconciler: %w", r.name, err)
		}
	}
	return nil
}

// CacheOptions are the manager cache options the reconcilers expect.
// namespaces limits the cache (and so the operator) to those namespaces;
// none means every namespace. Deployments, Services, ServiceAccounts and
// ConfigMaps are only cached when the operator made them (LabelManagedBy),
// so a large cluster's workloads and configuration do not fill the
// operator's memory; the users' document ConfigMaps are watched as bare
// names through a cache of their own (see configmaps.go).
func CacheOptions(namespaces []string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:     {Label: managed},
			&corev1.Service{}:        {Label: managed},
			&corev1.ServiceAccount{}: {Label: managed},
			&corev1.ConfigMap{}:      {Label: managed},
			&rbacv1.Role{}:           {Label: managed},
			&rbacv1.RoleBinding{}:    {Label: managed},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
