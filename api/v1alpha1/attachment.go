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
