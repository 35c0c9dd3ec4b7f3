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

// SourceNames lists the sources a permission allows, denies or scopes
// sourceDenyPaths to.
func (p *AgentPermission) SourceNames() []string {
	names := append(append([]string(nil), p.Spec.AllowSources...), p.Spec.DenySources...)
	for _, e := range p.Spec.SourceDenyPaths {
		names = append(names, e.Source)
	}
	return names
}

func refNames(refs []ParentReference) []string {
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = ref.Name
	}
	return names
}

// SecretNames lists, sorted and once each, the Secrets a router reads for
// itself (SecretRefs).
func (r *ContextRouter) SecretNames() []string {
	var names []string
	for _, ref := range r.SecretRefs() {
		names = append(names, ref.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// FieldSecretRef is a Secret key an object reads, with the field naming it.
// +kubebuilder:object:generate=false
type FieldSecretRef struct {
	Field string
	SecretKeySelector
}

// SecretRefs lists the Secret keys a router reads for itself, in spec
// order: the embedding and rerank API keys and, with the Redis session
// store, the Redis password.
func (r *ContextRouter) SecretRefs() []FieldSecretRef {
	var out []FieldSecretRef
	if e := r.Spec.Ranking.Embedding; e != nil && e.APIKeySecretRef != nil {
		out = append(out, FieldSecretRef{"spec.ranking.embedding.apiKeySecretRef", *e.APIKeySecretRef})
	}
	if rr := r.Spec.Ranking.Rerank; rr != nil && rr.APIKeySecretRef != nil {
		out = append(out, FieldSecretRef{"spec.ranking.rerank.apiKeySecretRef", *rr.APIKeySecretRef})
	}
	if s := &r.Spec.Sessions; s.Store == SessionStoreRedis && s.Redis != nil && s.Redis.PasswordSecretRef != nil {
		out = append(out, FieldSecretRef{"spec.sessions.redis.passwordSecretRef", *s.Redis.PasswordSecretRef})
	}
	return out
}

// SecretNames lists, sorted and once each, the Secrets a source reads:
// header values (httpAPI, MCP, a tool catalog over HTTP) and git
// credentials (of a GitRepo source or a tool catalog's repository).
func (s *ContextSource) SecretNames() []string {
	var names []string
	for _, b := range s.HeaderBlocks() {
		for _, hd := range b.Headers {
			if hd.ValueFrom != nil {
				names = append(names, hd.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	if g, _ := s.GitRepoBlock(); g != nil && g.Auth != nil {
		names = append(names, g.Auth.SecretRef.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// FieldHeaders are the request headers of a source's block at Path
// ("spec.httpAPI").
// +kubebuilder:object:generate=false
type FieldHeaders struct {
	Path    string
	Headers []HTTPHeader
}

// HeaderBlocks returns the blocks of a source that send request headers:
// spec.httpAPI, spec.mcp and spec.tools.http.
func (s *ContextSource) HeaderBlocks() []FieldHeaders {
	var out []FieldHeaders
	if h := s.Spec.HTTPAPI; h != nil {
		out = append(out, FieldHeaders{"spec.httpAPI", h.Headers})
	}
	if m := s.Spec.MCP; m != nil {
		out = append(out, FieldHeaders{"spec.mcp", m.Headers})
	}
	if t := s.Spec.Tools; t != nil && t.HTTP != nil {
		out = append(out, FieldHeaders{"spec.tools.http", t.HTTP.Headers})
	}
	return out
}

// DirectoryBlock returns the directory block a source reads files from —
// spec.directory, or spec.tools.directory for a tool catalog — with its
// field path, or nil.
func (s *ContextSource) DirectoryBlock() (*DirectorySource, string) {
	switch {
	case s.Spec.Directory != nil:
		return s.Spec.Directory, "spec.directory"
	case s.Spec.Tools != nil && s.Spec.Tools.Directory != nil:
		return s.Spec.Tools.Directory, "spec.tools.directory"
	}
	return nil, ""
}

// GitRepoBlock returns the repository a source reads files from —
// spec.gitRepo, or spec.tools.gitRepo for a tool catalog — with its field
// path, or nil.
func (s *ContextSource) GitRepoBlock() (*GitRepoSource, string) {
	switch {
	case s.Spec.GitRepo != nil:
		return s.Spec.GitRepo, "spec.gitRepo"
	case s.Spec.Tools != nil && s.Spec.Tools.GitRepo != nil:
		return s.Spec.Tools.GitRepo, "spec.tools.gitRepo"
	}
	return nil, ""
}
