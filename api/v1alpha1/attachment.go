package v1alpha1

import "slices"

// AttachesTo reports whether the route belongs to the named router: an empty
// parentRefs list attaches it to every router in its namespace.
func (r *ContextRoute) AttachesTo(router string) bool { return attached(r.Spec.ParentRefs, router) }

// AppliesTo reports whether the permission applies under the named router: an
// empty parentRefs list applies it to every router in its namespace.
func (p *AgentPermission) AppliesTo(router string) bool { return attached(p.Spec.ParentRefs, router) }

func attached(refs []ParentReference, router string) bool {
	if len(refs) == 0 {
		return true
	}
	for _, ref := range refs {
		if ref.Name == router {
			return true
		}
	}
	return false
}

// ParentNames lists the routers a route names in parentRefs (empty = all).
func (r *ContextRoute) ParentNames() []string { return refNames(r.Spec.ParentRefs) }

// SourceNames lists the sources a route contributes, in spec order.
func (r *ContextRoute) SourceNames() []string {
	names := make([]string, len(r.Spec.Sources))
	for i, s := range r.Spec.Sources {
		names[i] = s.Name
	}
	return names
}

// ParentNames lists the routers a permission names in parentRefs (empty = all).
func (p *AgentPermission) ParentNames() []string { return refNames(p.Spec.ParentRefs) }

// SourceNames lists the sources a permission allows or denies.
func (p *AgentPermission) SourceNames() []string {
	return append(append([]string(nil), p.Spec.AllowSources...), p.Spec.DenySources...)
}

func refNames(refs []ParentReference) []string {
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = ref.Name
	}
	return names
}

// SecretNames lists, sorted and once each, the Secrets a router reads for
// itself: the embedding API key.
func (r *ContextRouter) SecretNames() []string {
	if e := r.Spec.Ranking.Embedding; e != nil && e.APIKeySecretRef != nil {
		return []string{e.APIKeySecretRef.Name}
	}
	return nil
}

// SecretNames lists, sorted and once each, the Secrets a source reads:
// httpAPI header values and git credentials.
func (s *ContextSource) SecretNames() []string {
	var names []string
	if h := s.Spec.HTTPAPI; h != nil {
		for _, hd := range h.Headers {
			if hd.ValueFrom != nil {
				names = append(names, hd.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	if g := s.Spec.GitRepo; g != nil && g.Auth != nil {
		names = append(names, g.Auth.SecretRef.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
