package v1alpha1

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
