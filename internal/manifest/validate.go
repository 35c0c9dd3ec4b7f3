package manifest

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Validate is `contextrouter validate`: it loads the files, checks every
// object and reference (Check), compiles the routers (every one, or the one
// named) and reads every source, and returns every problem found, each
// once, located, sorted by file and line.
//
// Every independent problem is reported in one run. Only consequences are
// left out:
//   - an object that does not decode is not checked further, and references
//     to it are not "not found" (Load, Check);
//   - an object with errors is left out of the compile, and so is a route
//     whose sources are left out or missing; the engine's own findings on a
//     field already reported (the same rule, or its consequence) are dropped;
//   - a router with errors is compiled with the default settings, so that its
//     sources are still read;
//   - a source that cannot be read is reported once, however many routers
//     read it.
//
// The set holds the objects that decoded (nil only if no path was given).
func Validate(ctx context.Context, paths []string, router string, opts engine.Options) (*Set, problem.List) {
	set, err := Load(paths...)
	var problems problem.List
	if err != nil && !errors.As(err, &problems) {
		problems = problem.List{{Message: err.Error()}}
	}
	problems = append(problems, set.Check()...)

	usable := set.usable(problems)
	for _, name := range set.routersToCompile(router) {
		cfg, err := usable.Config(name)
		if err != nil {
			problems = append(problems, problem.Problem{Kind: v1alpha1.KindContextRouter, Name: name, Message: err.Error()})
			continue
		}
		snap, err := engine.Compile(ctx, cfg, opts)
		var found problem.List
		switch {
		case errors.As(err, &found):
			set.Locate(found)
			for _, p := range found {
				if !covered(problems, p) {
					problems = append(problems, p)
				}
			}
			continue
		case err != nil:
			problems = append(problems, problem.Problem{Kind: v1alpha1.KindContextRouter, Name: cfg.Router.Name, Message: err.Error()})
			continue
		}
		for _, cs := range snap.Classifiers() {
			if !slices.ContainsFunc(set.trained, func(t engine.ClassifierStatus) bool { return t.Name == cs.Name }) {
				set.trained = append(set.trained, cs)
			}
		}
		warnings := snap.Warnings()
		set.Locate(warnings)
		problems = append(problems, warnings...)
		for _, st := range snap.Sources() {
			if st.Error != "" {
				at := cfg.Origin(v1alpha1.KindContextSource, st.Name)
				if pl, ok := set.placementOf(v1alpha1.KindContextSource, st.Name, 0); ok {
					at = pl.locate(readField[st.Type], "")
				}
				problems = append(problems, problem.Problem{Location: at,
					Kind: v1alpha1.KindContextSource, Name: st.Name, Message: problem.OneLine(st.Error)})
			}
			if st.Skipped != nil {
				// Files left out are content the author may expect to be served.
				problems = append(problems, problem.Problem{Location: cfg.Origin(v1alpha1.KindContextSource, st.Name),
					Kind: v1alpha1.KindContextSource, Name: st.Name, Severity: problem.Warning,
					Message: st.Skipped.Summary() + "; run with --log-level info to see each file"})
			}
		}
	}
	problems = problems.Dedup()
	problems.Sort(set.fileRank)
	slices.SortFunc(set.trained, func(a, b engine.ClassifierStatus) int { return strings.Compare(a.Name, b.Name) })
	return set, problems
}

// readField is where a source of each type says what it reads: a source
// that cannot be read is reported at that line (at its block when the
// field is left out), not at the object's first line.
var readField = map[v1alpha1.SourceType]string{
	v1alpha1.SourceInline:    "spec.inline",
	v1alpha1.SourceDirectory: "spec.directory.path",
	v1alpha1.SourceGitRepo:   "spec.gitRepo.url",
	v1alpha1.SourceHTTPAPI:   "spec.httpAPI.url",
	v1alpha1.SourceTools:     "spec.tools",
	v1alpha1.SourceMCP:       "spec.mcp.url",
}

// covered reports whether a problem already in ps says what p says.
func covered(ps problem.List, p problem.Problem) bool {
	for _, q := range ps {
		if q.Covers(p) {
			return true
		}
	}
	return false
}

// routersToCompile names the routers validate compiles: the one asked for,
// or every declared router, or the implied one ("").
func (s *Set) routersToCompile(router string) []string {
	if router != "" {
		return []string{router}
	}
	if len(s.Routers) == 0 {
		return []string{""}
	}
	names := make([]string, 0, len(s.Routers))
	seen := make(map[string]bool)
	for _, r := range s.Routers {
		if !seen[r.Name] {
			seen[r.Name] = true
			names = append(names, r.Name)
		}
	}
	return names
}

// usable returns the set without the objects that have errors, and without
// the routes that name a source it does not hold: what can still be
// compiled and read once the problems are reported. A router with errors
// keeps its name and gets the default settings.
func (s *Set) usable(problems problem.List) *Set {
	bad := make(map[string]bool)
	for _, p := range problems.Errors() {
		if p.Kind != "" && p.Name != "" {
			bad[p.Kind+"/"+p.Name] = true
		}
	}
	keep := func(kind, name string) bool { return !bad[kind+"/"+name] }

	u := *s
	u.Routers = nil
	seen := make(map[string]bool)
	for i := range s.Routers {
		r := s.Routers[i].DeepCopy()
		if seen[r.Name] {
			continue // "defined more than once" is reported; compile the first
		}
		seen[r.Name] = true
		if !keep(v1alpha1.KindContextRouter, r.Name) {
			r.Spec = v1alpha1.ContextRouterSpec{}
			r.Default()
		}
		u.Routers = append(u.Routers, *r)
	}
	u.Sources = nil
	held := make(map[string]bool)
	for _, src := range s.Sources {
		if keep(v1alpha1.KindContextSource, src.Name) {
			u.Sources = append(u.Sources, src)
			held[src.Name] = true
		}
	}
	u.Routes = nil
	for _, rt := range s.Routes {
		ok := keep(v1alpha1.KindContextRoute, rt.Name)
		for _, ref := range rt.Spec.Sources {
			ok = ok && held[ref.Name]
		}
		if ok {
			u.Routes = append(u.Routes, rt)
		}
	}
	u.Classifiers = nil
	dropped := map[string]bool{}
	for _, c := range s.Classifiers {
		if keep(v1alpha1.KindContextClassifier, c.Name) && !slices.ContainsFunc(c.SourceNames(), func(n string) bool { return !held[n] }) {
			u.Classifiers = append(u.Classifiers, c)
		} else {
			dropped[c.Name] = true
		}
	}
	// A route reading a classifier left out would only repeat its problem.
	if len(dropped) > 0 {
		routes := u.Routes[:0:0]
		for _, rt := range u.Routes {
			if !slices.ContainsFunc(engine.ConditionClassifiers(rt.Spec.When), func(n string) bool { return dropped[n] }) {
				routes = append(routes, rt)
			}
		}
		u.Routes = routes
	}
	u.Permissions = nil
	for _, p := range s.Permissions {
		if keep(v1alpha1.KindAgentPermission, p.Name) {
			u.Permissions = append(u.Permissions, p)
		}
	}
	return &u
}
