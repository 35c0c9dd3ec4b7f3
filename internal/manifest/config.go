package manifest

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Config selects a router and returns what the engine needs for it: the
// router, the routes attached to it (parentRefs empty or naming it), every
// source, and the permissions that apply to it (same rule), all defaulted
// copies in file order. router "" selects the only ContextRouter, or the
// implied default router when there is none; so does "default" when none is
// declared.
//
// Config does not validate: call Check first and refuse errors.
func (s *Set) Config(router string) (*engine.Config, error) {
	if err := s.checkUnique(); err != nil {
		return nil, err
	}
	r, err := s.selectRouter(router)
	if err != nil {
		return nil, err
	}
	r.Default()

	cfg := &engine.Config{
		Router:   *r,
		BaseDirs: make(map[string]string),
		Origins:  make(map[string]problem.Location),
	}
	s.addOrigin(cfg, v1alpha1.KindContextRouter, r.Name)

	for i := range s.Routes {
		rt := s.Routes[i].DeepCopy()
		if rt.AttachesTo(r.Name) {
			rt.Default()
			cfg.Routes = append(cfg.Routes, *rt)
			s.addOrigin(cfg, v1alpha1.KindContextRoute, rt.Name)
		}
	}
	for i := range s.Sources {
		src := s.Sources[i].DeepCopy()
		src.Default()
		cfg.Sources = append(cfg.Sources, *src)
		if o, ok := s.Origin(v1alpha1.KindContextSource, src.Name); ok && o.File != "" {
			dir, err := filepath.Abs(filepath.Dir(o.File))
			if err != nil {
				return nil, fmt.Errorf("%s: resolving the folder of %s: %w", describe(v1alpha1.KindContextSource, src.Name), o.File, err)
			}
			cfg.BaseDirs[src.Name] = dir
		}
		s.addOrigin(cfg, v1alpha1.KindContextSource, src.Name)
	}
	for i := range s.Permissions {
		p := s.Permissions[i].DeepCopy()
		if p.AppliesTo(r.Name) {
			p.Default()
			cfg.Permissions = append(cfg.Permissions, *p)
			s.addOrigin(cfg, v1alpha1.KindAgentPermission, p.Name)
		}
	}
	for i := range s.Classifiers {
		c := s.Classifiers[i].DeepCopy()
		if c.AttachesTo(r.Name) {
			c.Default()
			cfg.Classifiers = append(cfg.Classifiers, *c)
			s.addOrigin(cfg, v1alpha1.KindContextClassifier, c.Name)
		}
	}
	return cfg, nil
}

func (s *Set) selectRouter(name string) (*v1alpha1.ContextRouter, error) {
	names := namesOf(s.Routers, func(r *v1alpha1.ContextRouter) string { return r.Name })
	if name == "" {
		switch len(s.Routers) {
		case 0:
			return v1alpha1.DefaultRouter(s.Namespace), nil
		case 1:
			return s.Routers[0].DeepCopy(), nil
		}
		// Every caller that can get here takes the name from --router (query, validate, serve, tools).
		return nil, fmt.Errorf("the manifests define %d ContextRouters (%s): choose one with --router, such as --router %s", len(names), quoteList(names), names[0])
	}
	if i := slices.Index(names, name); i >= 0 {
		return s.Routers[i].DeepCopy(), nil
	}
	switch {
	case len(s.Routers) == 0 && name == v1alpha1.DefaultRouterName:
		return v1alpha1.DefaultRouter(s.Namespace), nil
	case len(s.Routers) == 0:
		return nil, fmt.Errorf("%s not found: the manifests define no ContextRouter (the implied one is named %q)", describe(v1alpha1.KindContextRouter, name), v1alpha1.DefaultRouterName)
	}
	return nil, fmt.Errorf("%s not found: the manifests define %s", describe(v1alpha1.KindContextRouter, name), quoteList(names))
}

// checkUnique refuses two objects of one kind with one name, which would make
// references ambiguous.
func (s *Set) checkUnique() error {
	lists := []struct {
		kind  string
		names []string
	}{
		{v1alpha1.KindContextRouter, namesOf(s.Routers, func(r *v1alpha1.ContextRouter) string { return r.Name })},
		{v1alpha1.KindContextRoute, namesOf(s.Routes, func(r *v1alpha1.ContextRoute) string { return r.Name })},
		{v1alpha1.KindContextSource, namesOf(s.Sources, func(r *v1alpha1.ContextSource) string { return r.Name })},
		{v1alpha1.KindAgentPermission, namesOf(s.Permissions, func(r *v1alpha1.AgentPermission) string { return r.Name })},
		{v1alpha1.KindContextClassifier, namesOf(s.Classifiers, func(r *v1alpha1.ContextClassifier) string { return r.Name })},
	}
	for _, l := range lists {
		seen := make(map[string]bool, len(l.names))
		for _, n := range l.names {
			if seen[n] {
				return fmt.Errorf("%s is defined more than once", describe(l.kind, n))
			}
			seen[n] = true
		}
	}
	return nil
}

func namesOf[T any](objs []T, name func(*T) string) []string {
	out := make([]string, len(objs))
	for i := range objs {
		out[i] = name(&objs[i])
	}
	return out
}

func (s *Set) addOrigin(cfg *engine.Config, kind, name string) {
	if o, ok := s.Origin(kind, name); ok {
		cfg.Origins[kind+"/"+name] = loc(o)
	}
}
