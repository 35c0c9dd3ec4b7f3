package manifest

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Check validates every object (defaults applied first) and the references
// between them:
//   - a route's sources must exist (error);
//   - route and permission parentRefs should name a router here (warning),
//     except "default" when no router is declared, which names the implied one;
//   - permission allowSources/denySources should exist (warning);
//   - Kind/name must be unique (error);
//   - a file should hold objects, and a route should attach to every router (warning).
//
// Problems point at the line of the offending field when the manifest shows
// it, else at the object, and come sorted by file and line. CEL conditions are
// not compiled here; the engine does that.
func (s *Set) Check() []Problem {
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
	routerNames := sortedKeys(routers)

	// parentRef warns about a router reference that attaches to nothing.
	parentRef := func(o object, refs []v1alpha1.ParentReference, what string) {
		for i, ref := range refs {
			if ref.Name == "" || routers[ref.Name] || (len(routers) == 0 && ref.Name == v1alpha1.DefaultRouterName) {
				continue
			}
			msg := fmt.Sprintf("%s not found", describe(v1alpha1.KindContextRouter, ref.Name))
			if len(routers) == 0 {
				msg += fmt.Sprintf(" (no ContextRouter is declared; the implied one is named %q)", v1alpha1.DefaultRouterName)
			} else {
				msg += " (declared: " + quoteList(routerNames) + ")"
			}
			c.add(o, fmt.Sprintf("spec.parentRefs[%d].name", i), msg+"; "+what, true)
		}
	}
	// sourceRef reports a reference to a source that does not exist.
	sourceRef := func(o object, path, name string, warning bool) {
		if name == "" || sources[name] {
			return
		}
		msg := fmt.Sprintf("%s not found", describe(v1alpha1.KindContextSource, name))
		if sug := closest(name, sourceNames); sug != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		c.add(o, path, msg, warning)
	}

	for i := range s.Routers {
		r := s.Routers[i].DeepCopy()
		r.Default()
		o := c.object(v1alpha1.KindContextRouter, r.Name)
		c.addAll(o, r.Validate())
	}
	for i := range s.Routes {
		r := s.Routes[i].DeepCopy()
		r.Default()
		o := c.object(v1alpha1.KindContextRoute, r.Name)
		c.addAll(o, r.Validate())
		for j, src := range r.Spec.Sources {
			sourceRef(o, fmt.Sprintf("spec.sources[%d].name", j), src.Name, false)
		}
		parentRef(o, r.Spec.ParentRefs, "the route does not attach to it")
	}
	for i := range s.Sources {
		src := s.Sources[i].DeepCopy()
		src.Default()
		o := c.object(v1alpha1.KindContextSource, src.Name)
		c.addAll(o, src.Validate())
	}
	for i := range s.Permissions {
		p := s.Permissions[i].DeepCopy()
		p.Default()
		o := c.object(v1alpha1.KindAgentPermission, p.Name)
		c.addAll(o, p.Validate())
		parentRef(o, p.Spec.ParentRefs, "the permission does not apply to it")
		for j, n := range p.Spec.AllowSources {
			sourceRef(o, fmt.Sprintf("spec.allowSources[%d]", j), n, true)
		}
		for j, n := range p.Spec.DenySources {
			sourceRef(o, fmt.Sprintf("spec.denySources[%d]", j), n, true)
		}
	}

	c.checkEmpty()

	fileIndex := make(map[string]int, len(s.files))
	for i, f := range s.files {
		if _, ok := fileIndex[f]; !ok {
			fileIndex[f] = i
		}
	}
	rank := func(f string) int {
		if i, ok := fileIndex[f]; ok {
			return i
		}
		return len(s.files) // objects not read from a file last
	}
	sort.SliceStable(c.problems, func(i, j int) bool {
		a, b := c.problems[i].Origin, c.problems[j].Origin
		if fa, fb := rank(a.File), rank(b.File); fa != fb {
			return fa < fb
		}
		return a.Line < b.Line
	})
	return c.problems
}

type checker struct {
	set      *Set
	seen     map[string]int
	problems []Problem
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
		c.add(o, "metadata.name", msg, false)
	}
	return o
}

func (c *checker) add(o object, path, msg string, warning bool) {
	origin := o.pl.origin
	if line := lineOf(o.pl.node, path, false); line > 0 {
		origin.Line = line
	}
	c.problems = append(c.problems, Problem{Origin: origin, Kind: o.kind, Name: o.name,
		Field: path, Message: msg, Warning: warning})
}

func (c *checker) addAll(o object, errs field.ErrorList) {
	for _, e := range errs {
		c.add(o, e.Field, e.ErrorBody(), false)
	}
}
