package engine

import (
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Access is what one agent may read under one router: the merge of every
// AgentPermission that names the agent or "*".
type Access struct {
	// Permissions are the names of the permissions that applied, sorted; empty
	// when none did and the router's defaultAccess decided.
	Permissions []string
	Allow       map[string]bool
	Deny        map[string]bool
	// Default applies to sources in neither list.
	Default v1alpha1.AccessPolicy
	// MaxSensitivity is the highest source sensitivity the agent may read.
	MaxSensitivity v1alpha1.Sensitivity
	// SensitivityAction applies to chunks above MaxSensitivity.
	SensitivityAction v1alpha1.SensitivityAction
	// DenyPaths are doublestar globs over chunk paths, sorted and distinct.
	DenyPaths []string
	// DenyPathsIgnoreCase are the globs of permissions with pathMatching
	// CaseInsensitive, lower-cased, sorted and distinct; they are matched
	// against the lower-cased path (what doublestar's own case-insensitive
	// mode does, rune by rune).
	DenyPathsIgnoreCase []string
}

// ResolveAccess merges the permissions that apply to agent. The rule (API.md):
// allow and deny lists are unioned; deny beats allow; any Deny default makes
// the default Deny; maxSensitivity is the minimum; Drop beats Redact; denyPaths
// are unioned, each glob keeping its own permission's pathMatching. An agent
// no permission matches is treated as if one permission applied with
// default = defaultAccess and every other field at its default (so it may read
// up to Internal, and drops the rest).
func ResolveAccess(perms []v1alpha1.AgentPermission, agent string, defaultAccess v1alpha1.AccessPolicy) Access {
	a := Access{
		Allow:             map[string]bool{},
		Deny:              map[string]bool{},
		Default:           v1alpha1.AccessAllow,
		MaxSensitivity:    v1alpha1.SensitivityRestricted,
		SensitivityAction: v1alpha1.SensitivityActionRedact,
	}
	for i := range perms {
		p := &perms[i].Spec
		if !appliesTo(p.Agents, agent) {
			continue
		}
		a.Permissions = append(a.Permissions, perms[i].Name)
		for _, s := range p.AllowSources {
			a.Allow[s] = true
		}
		for _, s := range p.DenySources {
			a.Deny[s] = true
		}
		if p.PathMatching == v1alpha1.PathMatchingCaseInsensitive {
			for _, g := range p.DenyPaths {
				a.DenyPathsIgnoreCase = append(a.DenyPathsIgnoreCase, strings.ToLower(g))
			}
		} else {
			a.DenyPaths = append(a.DenyPaths, p.DenyPaths...)
		}
		if orDefault(p.Default, v1alpha1.AccessDeny) == v1alpha1.AccessDeny {
			a.Default = v1alpha1.AccessDeny
		}
		if s := orDefault(p.MaxSensitivity, v1alpha1.SensitivityInternal); s.Level() < a.MaxSensitivity.Level() {
			a.MaxSensitivity = s
		}
		if orDefault(p.SensitivityAction, v1alpha1.SensitivityActionDrop) == v1alpha1.SensitivityActionDrop {
			a.SensitivityAction = v1alpha1.SensitivityActionDrop
		}
	}
	if len(a.Permissions) == 0 {
		a.Default = orDefault(defaultAccess, v1alpha1.AccessDeny)
		a.MaxSensitivity = v1alpha1.SensitivityInternal
		a.SensitivityAction = v1alpha1.SensitivityActionDrop
	}
	slices.Sort(a.Permissions)
	slices.Sort(a.DenyPaths)
	a.DenyPaths = slices.Compact(a.DenyPaths)
	slices.Sort(a.DenyPathsIgnoreCase)
	a.DenyPathsIgnoreCase = slices.Compact(a.DenyPathsIgnoreCase)
	return a
}

func appliesTo(agents []string, agent string) bool {
	for _, x := range agents {
		if x == "*" || (x == agent && agent != "") {
			return true
		}
	}
	return false
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// SourceAllowed reports whether the agent may read a source.
func (a *Access) SourceAllowed(name string) bool {
	if a.Deny[name] {
		return false
	}
	if a.Allow[name] {
		return true
	}
	return a.Default == v1alpha1.AccessAllow
}

// PathDenied reports whether a chunk path matches a denyPaths glob. Chunks
// without a path (inline text, API results without pathField) never match.
func (a *Access) PathDenied(path string) bool {
	if path == "" {
		return false
	}
	for _, p := range a.DenyPaths {
		if ok, _ := doublestar.Match(p, path); ok {
			return true
		}
	}
	if len(a.DenyPathsIgnoreCase) > 0 {
		path = strings.ToLower(path)
		for _, p := range a.DenyPathsIgnoreCase {
			if ok, _ := doublestar.Match(p, path); ok {
				return true
			}
		}
	}
	return false
}

// Cleared reports whether the agent may read a source of this sensitivity.
func (a *Access) Cleared(s v1alpha1.Sensitivity) bool {
	return orDefault(s, v1alpha1.SensitivityInternal).Level() <= a.MaxSensitivity.Level()
}
