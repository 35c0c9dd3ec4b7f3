package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Check validates every object (defaults applied first) with the engine's
// per-object checks — the API rules, CEL conditions, source specs, router
// settings: the same checks the webhook runs — and the references between
// them:
//   - a route's sources must exist (error);
//   - route and permission parentRefs should name a router here (warning),
//     except "default" when no router is declared, which names the implied one;
//   - permission allowSources/denySources should exist (warning);
//   - Kind/name must be unique (error);
//   - a file should hold objects, and a route should attach to every router (warning);
//   - a condition should not read a metadata key without has() (warning).
//
// A reference to an object that is in the files but did not decode (see
// Broken) is not reported: its own problems say what is wrong.
//
// Problems point at the line of the offending field when the manifest shows
// it, else at the object, and come sorted by file and line.
func (s *Set) Check() problem.List {
	c := &checker{set: s, seen: make(map[string]int)}
	routers := make(map[string]bool)
	for i := range s.Routers {
		routers[s.Routers[i].Name] = true
	}
	sources := make(map[string]bool)
	var sourceNames []string
	for i := range s.Sources {
		if n := s.Sources[i].Name; !sources[n] {
			sources[n] = true
			sourceNames = append(sourceNames, n)
		}
	}
	sort.Strings(sourceNames)
	routerNames := slices.Sorted(maps.Keys(routers))

	// parentRef warns about a router reference that attaches to nothing.
	parentRef := func(o object, refs []v1alpha1.ParentReference, what string) {
		for i, ref := range refs {
			if ref.Name == "" || routers[ref.Name] || s.Broken(v1alpha1.KindContextRouter, ref.Name) ||
				(len(routers) == 0 && ref.Name == v1alpha1.DefaultRouterName) {
				continue
			}
			msg := fmt.Sprintf("%s not found", describe(v1alpha1.KindContextRouter, ref.Name))
			if len(routers) == 0 {
				msg += fmt.Sprintf(" (no ContextRouter is declared; the implied one is named %q)", v1alpha1.DefaultRouterName)
			} else {
				msg += " (declared: " + quoteList(routerNames) + ")"
			}
			c.add(o, fmt.Sprintf("spec.parentRefs[%d].name", i), msg+"; "+what, problem.Warning, v1alpha1.ReasonNoMatchingParent)
		}
	}
	// sourceRef reports a reference to a source that does not exist.
	sourceRef := func(o object, path, name string, sev problem.Severity) {
		if name == "" || sources[name] || s.Broken(v1alpha1.KindContextSource, name) {
			return
		}
		msg := fmt.Sprintf("%s not found", describe(v1alpha1.KindContextSource, name))
		if sug := located.Closest(name, sourceNames); sug != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		c.add(o, path, msg, sev, v1alpha1.ReasonSourceNotFound)
	}

	for i := range s.Routers {
		r := s.Routers[i].DeepCopy()
		r.Default()
		o := c.object(v1alpha1.KindContextRouter, r.Name)
		c.addAll(o, engine.CheckRouter(r), func(string) v1alpha1.ConditionReason { return v1alpha1.ReasonInvalidSpec })
	}
	for i := range s.Routes {
		r := s.Routes[i].DeepCopy()
		r.Default()
		o := c.object(v1alpha1.KindContextRoute, r.Name)
		errs := engine.CheckRoute(r)
		c.addAll(o, errs, engine.RouteReason)
		if !slices.ContainsFunc(errs, func(e *field.Error) bool { return e.Field == "spec.when" }) {
			for _, k := range engine.UnguardedMetadataKeys(r.Spec.When) {
				c.add(o, "spec.when", engine.UnguardedMetadataMessage(k), problem.Warning, v1alpha1.ReasonInvalidCondition)
			}
		}
		for j, src := range r.Spec.Sources {
			sourceRef(o, fmt.Sprintf("spec.sources[%d].name", j), src.Name, problem.Error)
		}
		parentRef(o, r.Spec.ParentRefs, "the route does not attach to it")
	}
	for i := range s.Sources {
		src := s.Sources[i].DeepCopy()
		src.Default()
		o := c.object(v1alpha1.KindContextSource, src.Name)
		c.addAll(o, engine.CheckSource(src), func(string) v1alpha1.ConditionReason { return v1alpha1.ReasonInvalidSpec })
	}
	for i := range s.Permissions {
		p := s.Permissions[i].DeepCopy()
		p.Default()
		o := c.object(v1alpha1.KindAgentPermission, p.Name)
		c.addAll(o, engine.CheckPermission(p), func(string) v1alpha1.ConditionReason { return v1alpha1.ReasonInvalidSpec })
		parentRef(o, p.Spec.ParentRefs, "the permission does not apply to it")
		for j, n := range p.Spec.AllowSources {
			sourceRef(o, fmt.Sprintf("spec.allowSources[%d]", j), n, problem.Warning)
		}
		for j, n := range p.Spec.DenySources {
			sourceRef(o, fmt.Sprintf("spec.denySources[%d]", j), n, problem.Warning)
		}
		for j, e := range p.Spec.SourceDenyPaths {
			sourceRef(o, fmt.Sprintf("spec.sourceDenyPaths[%d].source", j), e.Source, problem.Warning)
		}
	}
	for i := range s.Classifiers {
		cl := s.Classifiers[i].DeepCopy()
		cl.Default()
		o := c.object(v1alpha1.KindContextClassifier, cl.Name)
		c.addAll(o, engine.CheckClassifier(cl), func(string) v1alpha1.ConditionReason { return v1alpha1.ReasonInvalidSpec })
		for _, f := range cl.Files() {
			sourceRef(o, f.Field, f.File.Source, problem.Error)
		}
		parentRef(o, cl.Spec.ParentRefs, "the classifier does not attach to it")
	}
	c.checkEmpty()
	c.problems.Sort(s.fileRank)
	return c.problems
}

type checker struct {
	set      *Set
	seen     map[string]int
	problems problem.List
}

// object is one object being checked and where it was read.
type object struct {
	kind, name string
	pl         placement
}

// object returns the next object with this Kind/name, reporting it when it is
// not the first.
func (c *checker) object(kind, name string) object {
	key := kind + "/" + name
	n := c.seen[key]
	c.seen[key]++
	pl, _ := c.set.placementOf(kind, name, n)
	o := object{kind: kind, name: name, pl: pl}
	if n > 0 && name != "" {
		msg := "defined more than once"
		if first, ok := c.set.placementOf(kind, name, 0); ok && first.origin.File != "" {
			msg += ": first at " + first.origin.String()
		}
		c.add(o, "metadata.name", msg, problem.Error, v1alpha1.ReasonInvalidSpec)
	}
	return o
}

func (c *checker) add(o object, path, msg string, sev problem.Severity, reason v1alpha1.ConditionReason) {
	c.problems = append(c.problems, Problem{Location: o.pl.locate(path, msg), Kind: o.kind, Name: o.name,
		Field: path, Message: msg, Severity: sev, Reason: reason})
}

// celPosition finds the position the CEL compiler names in its message
// ("ERROR: <input>:2:17: ..."), relative to the expression.
var celPosition = regexp.MustCompile(`<input>:(\d+):(\d+):`)

// locate returns where a problem of the field at path is: the line of the
// field when the manifest shows it, else the object's; for a CEL error,
// the line and column in the file of the character the compiler points
// at, through the YAML scalar's quoting and folding.
func (pl placement) locate(path, msg string) problem.Location {
	origin := pl.origin
	if line := located.LineOf(pl.node, path, false); line > 0 {
		origin.Line = line
	}
	l := loc(origin)
	if m := celPosition.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		if fl, fc, ok := located.ScalarPosition(pl.src, pl.lineOffset, located.Lookup(pl.node, path), line, col); ok {
			l.Line, l.Column = fl, fc
		}
	}
	return l
}

func (c *checker) addAll(o object, errs field.ErrorList, reason func(path string) v1alpha1.ConditionReason) {
	for _, e := range errs {
		if c.set.unexpanded[o.kind+"/"+o.name+"/"+e.Field] {
			continue // reported once, as the unset variable
		}
		c.add(o, e.Field, problem.OneLine(e.ErrorBody()), problem.Error, reason(e.Field))
	}
}

// Locate points problems found elsewhere (by the engine, which knows only
// the objects and where each starts) at the line of their field in the
// files, when the set holds the object.
func (s *Set) Locate(ps problem.List) {
	for i := range ps {
		p := &ps[i]
		if p.Kind == "" {
			continue
		}
		pl, ok := s.placementOf(p.Kind, p.Name, 0)
		if !ok {
			continue
		}
		p.Location = pl.locate(p.Field, p.Message)
	}
}
