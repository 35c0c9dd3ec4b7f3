package manifest

import (
	"slices"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// NoRoutesMessage describes a router that no ContextRoute attaches to: it answers every query
// with no context, which is rarely meant (an emptied manifest file, a parentRefs typo). validate
// warns with it; serve refuses such a configuration with it unless allowed.
const NoRoutesMessage = "no ContextRoute attaches to this router, so it answers every query with no context; " +
	"set spec.allowEmpty: true (or run serve --allow-empty) if that is intended"

// EmptyFileMessage describes a manifest file that holds no object.
const EmptyFileMessage = "the file holds no objects (it is empty or only comments)"

// EmptyFiles lists the files read that hold no object, in the order read:
// nothing but blank lines, comments and null documents. A file whose
// objects fail to decode is not empty; its problems say what is wrong.
func (s *Set) EmptyFiles() []string {
	var out []string
	for _, f := range s.files {
		if !s.filled[f] && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// checkEmpty warns about files without objects and about routers, the implied one included, that
// no route attaches to (unless spec.allowEmpty says that is intended).
func (c *checker) checkEmpty() {
	s := c.set
	for _, f := range s.EmptyFiles() {
		c.problems = append(c.problems, Problem{Location: problem.Location{File: f}, Message: EmptyFileMessage, Severity: problem.Warning})
	}
	routers := s.Routers
	if len(routers) == 0 {
		routers = []v1alpha1.ContextRouter{*v1alpha1.DefaultRouter(s.Namespace)}
	}
	warned := map[string]bool{}
	for i := range routers {
		r := &routers[i]
		if r.Spec.AllowEmpty || warned[r.Name] || slices.ContainsFunc(s.Routes, func(rt v1alpha1.ContextRoute) bool { return rt.AttachesTo(r.Name) }) {
			continue
		}
		warned[r.Name] = true
		pl, _ := s.placementOf(v1alpha1.KindContextRouter, r.Name, 0)
		c.add(object{kind: v1alpha1.KindContextRouter, name: r.Name, pl: pl}, "", NoRoutesMessage, problem.Warning, "")
	}
}
