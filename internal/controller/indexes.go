package controller

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// IndexRouterSecrets indexes ContextRouters by the Secrets they read for
// themselves (ContextRouter.SecretNames: the embedding API key, the Redis
// password).
const IndexRouterSecrets = "spec.secretNames"

// RouterSecretNames is the IndexRouterSecrets extractor.
func RouterSecretNames(obj client.Object) []string {
	r, ok := obj.(*v1alpha1.ContextRouter)
	if !ok {
		return nil
	}
	return r.SecretNames()
}

// routerMapper maps events of the objects a router depends on to the routers
// they affect. Every step is a field-index lookup in the cache, within the
// object's namespace; only objects attached to every router (empty
// parentRefs) cost a list of the namespace's routers.
type routerMapper struct {
	c client.Reader
}

// routerSet collects router requests of one namespace, at most once each.
type routerSet struct {
	ns    string
	names map[string]bool
	all   bool
}

func newRouterSet(ns string) *routerSet { return &routerSet{ns: ns, names: make(map[string]bool)} }

func (s *routerSet) addParents(refs []v1alpha1.ParentReference) {
	if len(refs) == 0 {
		s.all = true
		return
	}
	for _, r := range refs {
		s.names[r.Name] = true
	}
}

func (s *routerSet) requests(ctx context.Context, c client.Reader) []reconcile.Request {
	if s.all {
		var routers v1alpha1.ContextRouterList
		if err := c.List(ctx, &routers, client.InNamespace(s.ns)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list ContextRouters", "namespace", s.ns)
		}
		for _, r := range routers.Items {
			s.names[r.Name] = true
		}
	}
	names := make([]string, 0, len(s.names))
	for n := range s.names {
		names = append(names, n)
	}
	slices.Sort(names)
	reqs := make([]reconcile.Request, len(names))
	for i, n := range names {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.ns, Name: n}}
	}
	return reqs
}

// forRoute maps a route to the routers it attaches to.
func (m routerMapper) forRoute(ctx context.Context, obj client.Object) []reconcile.Request {
	rt, ok := obj.(*v1alpha1.ContextRoute)
	if !ok {
		return nil
	}
	s := newRouterSet(rt.Namespace)
	s.addParents(rt.Spec.ParentRefs)
	return s.requests(ctx, m.c)
}

// forPermission maps a permission to the routers it applies to.
func (m routerMapper) forPermission(ctx context.Context, obj client.Object) []reconcile.Request {
	p, ok := obj.(*v1alpha1.AgentPermission)
	if !ok {
		return nil
	}
	s := newRouterSet(p.Namespace)
	s.addParents(p.Spec.ParentRefs)
	return s.requests(ctx, m.c)
}

// forSource maps a source to the routers of the routes that name it.
func (m routerMapper) forSource(ctx context.Context, obj client.Object) []reconcile.Request {
	s := newRouterSet(obj.GetNamespace())
	m.addSourceRouters(ctx, s, obj.GetName())
	m.addExampleSourceRouters(ctx, s, obj.GetName())
	return s.requests(ctx, m.c)
}

// forSecret maps a Secret to the routers that read it: through the sources
// that name it, and directly (forOwnSecret).
func (m routerMapper) forSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	s := newRouterSet(obj.GetNamespace())
	m.addSourcesBy(ctx, s, IndexSourceSecrets, obj.GetName())
	m.addOwnSecretRouters(ctx, s, obj.GetName())
	return s.requests(ctx, m.c)
}

// forOwnSecret maps a Secret to the routers that read it for themselves
// (an embedding API key, the Redis password), whose status says whether
// the keys they read exist: a change of its keys is seen too.
func (m routerMapper) forOwnSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	s := newRouterSet(obj.GetNamespace())
	m.addOwnSecretRouters(ctx, s, obj.GetName())
	return s.requests(ctx, m.c)
}

func (m routerMapper) addOwnSecretRouters(ctx context.Context, s *routerSet, secret string) {
	var routers v1alpha1.ContextRouterList
	if m.list(ctx, &routers, s.ns, IndexRouterSecrets, secret) {
		for _, r := range routers.Items {
			s.names[r.Name] = true
		}
	}
}

// forConfigMap maps a ConfigMap to the routers whose Directory sources mount it.
func (m routerMapper) forConfigMap(ctx context.Context, obj client.Object) []reconcile.Request {
	s := newRouterSet(obj.GetNamespace())
	m.addSourcesBy(ctx, s, IndexSourceConfigMaps, obj.GetName())
	return s.requests(ctx, m.c)
}

func (m routerMapper) addSourcesBy(ctx context.Context, s *routerSet, key, value string) {
	var srcs v1alpha1.ContextSourceList
	if !m.list(ctx, &srcs, s.ns, key, value) {
		return
	}
	for _, src := range srcs.Items {
		m.addSourceRouters(ctx, s, src.Name)
	}
}

func (m routerMapper) addSourceRouters(ctx context.Context, s *routerSet, source string) {
	var routes v1alpha1.ContextRouteList
	if !m.list(ctx, &routes, s.ns, IndexRouteSources, source) {
		return
	}
	for _, rt := range routes.Items {
		s.addParents(rt.Spec.ParentRefs)
	}
}

// list is an indexed list; a failure is logged, since a map function cannot
// return an error (the router is reconciled again on its next event).
func (m routerMapper) list(ctx context.Context, list client.ObjectList, ns, key, value string) bool {
	if err := m.c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{key: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list by field index", "index", key, "value", value, "namespace", ns)
		return false
	}
	return true
}
