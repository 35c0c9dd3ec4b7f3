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
	// SourceDenyPaths and SourceDenyPathsIgnoreCase are the same, for the
	// chunks of one source only (spec.sourceDenyPaths), by source name.
	SourceDenyPaths           map[string][]string
	SourceDenyPathsIgnoreCase map[string][]string
	// Tools are the merged tool rules.
	Tools ToolAccess
}

// ResolveAccess merges the permissions that apply to agent. The rule (API.md):
// allow and deny lists are unioned; deny beats allow; any Deny default makes
// the default Deny; maxSensitivity is the minimum; Drop beats Redact; denyPaths
// are unioned, each glob keeping its own permission's pathMatching; tool rules
// merge as ToolAccess says. An agent
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
		ignoreCase := p.PathMatching == v1alpha1.PathMatchingCaseInsensitive
		a.DenyPaths, a.DenyPathsIgnoreCase = addGlobs(a.DenyPaths, a.DenyPathsIgnoreCase, p.DenyPaths, ignoreCase)
		for _, e := range p.SourceDenyPaths {
			if a.SourceDenyPaths == nil {
				a.SourceDenyPaths, a.SourceDenyPathsIgnoreCase = map[string][]string{}, map[string][]string{}
			}
			a.SourceDenyPaths[e.Source], a.SourceDenyPathsIgnoreCase[e.Source] = addGlobs(a.SourceDenyPaths[e.Source], a.SourceDenyPathsIgnoreCase[e.Source], e.Paths, ignoreCase)
		}
		// Only the permissive values are tested for, so that anything else
		// (an undefaulted, hand-built permission) is the strict one.
		if p.Default != v1alpha1.AccessAllow {
			a.Default = v1alpha1.AccessDeny
		}
		if p.MaxSensitivity.Level() < a.MaxSensitivity.Level() {
			a.MaxSensitivity = p.MaxSensitivity
		}
		if p.SensitivityAction != v1alpha1.SensitivityActionRedact {
			a.SensitivityAction = v1alpha1.SensitivityActionDrop
		}
		a.Tools.merge(&p.Tools)
	}
	a.Tools.finish()
	if len(a.Permissions) == 0 {
		// One permission with default = defaultAccess, the rest defaulted.
		implied := v1alpha1.AgentPermission{Spec: v1alpha1.AgentPermissionSpec{Default: defaultAccess}}
		implied.Default()
		a.Default = implied.Spec.Default
		a.MaxSensitivity = implied.Spec.MaxSensitivity
		a.SensitivityAction = implied.Spec.SensitivityAction
	}
	slices.Sort(a.Permissions)
	a.DenyPaths = sortedSet(a.DenyPaths)
	a.DenyPathsIgnoreCase = sortedSet(a.DenyPathsIgnoreCase)
	for _, m := range []map[string][]string{a.SourceDenyPaths, a.SourceDenyPathsIgnoreCase} {
		for k, v := range m {
			if m[k] = sortedSet(v); len(m[k]) == 0 {
				delete(m, k)
			}
		}
	}
	return a
}

// addGlobs adds one permission's globs to the case-sensitive list, or
// lower-cased to the case-insensitive one.
func addGlobs(exact, folded, globs []string, ignoreCase bool) ([]string, []string) {
	if !ignoreCase {
		return append(exact, globs...), folded
	}
	for _, g := range globs {
		folded = append(folded, strings.ToLower(g))
	}
	return exact, folded
}

func sortedSet(l []string) []string {
	slices.Sort(l)
	return slices.Compact(l)
}

func appliesTo(agents []string, agent string) bool {
	for _, x := range agents {
		if x == "*" || (x == agent && agent != "") {
			return true
		}
	}
	return false
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

// hasPathDenies reports whether any path rule applies to the agent.
func (a *Access) hasPathDenies() bool {
	return len(a.DenyPaths)+len(a.DenyPathsIgnoreCase)+len(a.SourceDenyPaths)+len(a.SourceDenyPathsIgnoreCase) > 0
}

// PathDenied reports whether a chunk path of a source matches a denyPaths
// glob, or a sourceDenyPaths glob of that source. Chunks without a path
// (inline text, API results without pathField) never match.
func (a *Access) PathDenied(source, path string) bool {
	if path == "" {
		return false
	}
	return globsMatch(a.DenyPaths, a.DenyPathsIgnoreCase, path) ||
		(a.SourceDenyPaths != nil && globsMatch(a.SourceDenyPaths[source], a.SourceDenyPathsIgnoreCase[source], path))
}

func globsMatch(exact, folded []string, path string) bool {
	for _, p := range exact {
		if ok, _ := doublestar.Match(p, path); ok {
			return true
		}
	}
	if len(folded) > 0 {
		path = strings.ToLower(path)
		for _, p := range folded {
			if ok, _ := doublestar.Match(p, path); ok {
				return true
			}
		}
	}
	return false
}

// Cleared reports whether the agent may read a source of this sensitivity.
func (a *Access) Cleared(s v1alpha1.Sensitivity) bool {
	return s.Level() <= a.MaxSensitivity.Level()
}

// FloorVerdict is what the agent's sensitivity floor does with content of
// one sensitivity (Access.Floor).
type FloorVerdict uint8

const (
	// FloorClear: the agent is cleared; the content goes as it is.
	FloorClear FloorVerdict = iota
	// FloorRedact: above the agent's maxSensitivity under sensitivityAction:
	// Redact; a placeholder (RedactedContent) takes the content's place.
	FloorRedact
	// FloorDrop: above the agent's maxSensitivity under sensitivityAction:
	// Drop; the content is left out.
	FloorDrop
)

// Floor is the sensitivity floor: the one rule of what an agent gets of
// content of sensitivity s (api.md §3). Chunks (admitChunk) and session
// pack entries (internal/session) must both be decided by it, not by
// Cleared and SensitivityAction read again. An empty sensitivity is
// Internal, as Sensitivity.Level has it; only the permissive action is
// tested for, so an undefaulted Access drops.
func (a *Access) Floor(s v1alpha1.Sensitivity) FloorVerdict {
	switch {
	case a.Cleared(s):
		return FloorClear
	case a.SensitivityAction == v1alpha1.SensitivityActionRedact:
		return FloorRedact
	}
	return FloorDrop
}

// ToolAccess is the merge of the tool rules (spec.tools) of the applying
// permissions (api.md §10.4). The zero value restricts nothing.
type ToolAccess struct {
	// Allow are the allow globs of every applying permission, as path globs
	// (ToolGlob); a tool must match one when HasAllow.
	Allow    []string
	HasAllow bool
	// Deny are the deny globs of every applying permission, as path globs; deny beats allow.
	Deny []string
	// MaxSideEffects is the lowest maxSideEffects of the applying
	// permissions ("" = no limit).
	MaxSideEffects v1alpha1.SideEffects
	// DenySafetyTags is the union of denySafetyTags.
	DenySafetyTags []string
	// Teach: an applying permission sets tools.teach (api.md §10.8).
	Teach bool
}

// ToolGlob turns a glob over tool ids, whose levels "." separates, into the
// doublestar glob over a path that ToolPath makes of an id: "billing.*"
// matches "billing.refund" but not "billing.invoices.create", and
// "billing.**" everything under billing.
func ToolGlob(g string) string { return strings.ReplaceAll(g, ".", "/") }

// ToolPath is the path a tool id is matched as.
func ToolPath(id string) string { return strings.ReplaceAll(id, ".", "/") }

// merge adds one applying permission's rules: allow, deny and
// denySafetyTags are unioned; maxSideEffects is the lowest set.
func (t *ToolAccess) merge(r *v1alpha1.ToolRules) {
	for _, g := range r.Allow {
		t.Allow = append(t.Allow, ToolGlob(g))
	}
	t.HasAllow = t.HasAllow || len(r.Allow) > 0
	for _, g := range r.Deny {
		t.Deny = append(t.Deny, ToolGlob(g))
	}
	if r.MaxSideEffects != "" && (t.MaxSideEffects == "" || r.MaxSideEffects.Level() < t.MaxSideEffects.Level()) {
		t.MaxSideEffects = r.MaxSideEffects
	}
	t.DenySafetyTags = append(t.DenySafetyTags, r.DenySafetyTags...)
	t.Teach = t.Teach || r.Teach
}

// finish sorts and deduplicates the lists, so equal merges are equal values.
func (t *ToolAccess) finish() {
	for _, l := range []*[]string{&t.Allow, &t.Deny, &t.DenySafetyTags} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
}

// Restricts reports whether some rule can make a tool unusable.
func (t *ToolAccess) Restricts() bool {
	return t.HasAllow || len(t.Deny) > 0 || t.MaxSideEffects != "" || len(t.DenySafetyTags) > 0
}

// Usable reports whether the rules let the agent use a tool of a readable
// source: its id matches no deny glob; it matches an allow glob if any
// applying permission lists some; its side effects are at most
// MaxSideEffects; it carries no denied safety tag.
func (t *ToolAccess) Usable(tool *v1alpha1.Tool) bool {
	if !t.Restricts() {
		return true
	}
	if t.MaxSideEffects != "" && tool.SideEffects.Level() > t.MaxSideEffects.Level() {
		return false
	}
	for _, tag := range tool.SafetyTags {
		if _, found := slices.BinarySearch(t.DenySafetyTags, tag); found {
			return false
		}
	}
	p := ToolPath(tool.ID())
	for _, g := range t.Deny {
		if ok, _ := doublestar.Match(g, p); ok {
			return false
		}
	}
	if !t.HasAllow {
		return true
	}
	for _, g := range t.Allow {
		if ok, _ := doublestar.Match(g, p); ok {
			return true
		}
	}
	return false
}
