package engine

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// setGates resolves the routes' alternates and records which gates the
// router uses. An alternate must name a route of this router; alternates
// that lead back to their route form a cycle, which is refused although only
// one hop is ever followed: it is almost certainly a mistake.
func (s *Snapshot) setGates(routes []v1alpha1.ContextRoute, addReason func(reason v1alpha1.ConditionReason, kind, name, field, msg string)) {
	byName := make(map[string]int, len(s.routes))
	for i := range s.routes {
		byName[s.routes[i].name] = i
	}
	for i := range s.routes {
		rt := &s.routes[i]
		s.hasFallback = s.hasFallback || rt.fallback
		s.hasTimeouts = s.hasTimeouts || rt.timeout > 0
		alt := routes[i].Spec.Alternate
		if alt == "" {
			continue
		}
		j, ok := byName[alt]
		if !ok {
			addReason(v1alpha1.ReasonAlternateNotFound, v1alpha1.KindContextRoute, rt.name, "spec.alternate",
				fmt.Sprintf("ContextRoute %q not found among the routes of the router (missing, attached elsewhere, or left out)", alt))
			continue
		}
		rt.alternate = j
		s.hasAlternates = true
	}
	for _, cycle := range alternateCycles(s.routes) {
		// Each route of the cycle is named, the cycle written from it.
		for k, i := range cycle {
			names := make([]string, 0, len(cycle)+1)
			for j := range len(cycle) + 1 {
				names = append(names, s.routes[cycle[(k+j)%len(cycle)]].name)
			}
			addReason(v1alpha1.ReasonInvalidSpec, v1alpha1.KindContextRoute, s.routes[i].name, "spec.alternate",
				"alternates form a cycle: "+strings.Join(names, " → "))
		}
	}
}

// alternateCycles returns the cycles of alternates, each as route indices in
// alternate order starting at its lowest index, ordered by that index. Each
// route has at most one alternate, so one walk per route, marking what it
// has seen, finds them all in linear time.
func alternateCycles(routes []route) [][]int {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(routes))
	var cycles [][]int
	for start := range routes {
		var path []int
		j := start
		for j >= 0 && state[j] == unseen {
			state[j] = onPath
			path = append(path, j)
			j = routes[j].alternate
		}
		if j >= 0 && state[j] == onPath {
			// The walk came back into itself: the cycle is the path from j on.
			cycle := path[slices.Index(path, j):]
			lo := slices.Index(cycle, slices.Min(cycle))
			cycles = append(cycles, append(slices.Clone(cycle[lo:]), cycle[:lo]...))
		}
		for _, k := range path {
			state[k] = done
		}
	}
	slices.SortFunc(cycles, func(a, b []int) int { return a[0] - b[0] })
	return cycles
}

// Ways a route serves a query (RouteMatch.MatchedBy).
const (
	// MatchedByAlways: the route's when is empty; it applies to every query.
	MatchedByAlways    = "always"
	MatchedByCondition = "condition"
	MatchedByFallback  = "fallback"
	MatchedByAlternate = "alternate"
)

// The routing policy of api.md §1.2, as pure functions: fallbacksServe
// decides whether the fallback routes are evaluated, routeFailed whether a
// route's alternate serves. Pinned context and routing are independent: a
// route that always applies is no match for the first, and a source that
// cannot fail no answer for the second, so a system prompt (an always-route,
// or an Inline source on the route) never disables a fallback or an
// alternate. The warnings of fallbacks and alternates that can never serve
// (gateWarnings) are derived from the same rules.

// fallbacksServe reports whether the fallback routes are evaluated after
// the non-fallback routes served matches: only when none matched by its
// condition. Routes that always apply (matched_by "always") do not count.
func fallbacksServe(matches []RouteMatch) bool {
	for _, m := range matches {
		if m.MatchedBy == MatchedByCondition {
			return false
		}
	}
	return true
}

// routeFailed reports, from the outcomes of a route's sources in one query,
// whether its alternate serves: every source that can fail and that the
// agent may read failed, and at least one did. Sources that cannot fail
// (outcomeFixed) and denied ones do not count either way.
func routeFailed(outcomes iter.Seq[uint8]) bool {
	failed := false
	for o := range outcomes {
		switch o {
		case outcomeDenied, outcomeFixed:
		case outcomeFailed:
			failed = true
		default:
			return false
		}
	}
	return failed
}

// sourceCanFail reports whether a source can fail for a query: Inline text
// and an inline tool catalog are in the spec, checked at compile and held in
// memory; every other source reads files, a repository or a server.
func sourceCanFail(spec *v1alpha1.ContextSourceSpec) bool {
	switch spec.Type {
	case v1alpha1.SourceInline:
		return false
	case v1alpha1.SourceTools:
		return spec.Tools == nil || spec.Tools.Directory != nil || spec.Tools.GitRepo != nil
	}
	return true
}

// routing is what the routes decided for one query.
type routing struct {
	// srcNames are the sources of the serving routes, deduplicated, in route order.
	srcNames []string
	// served are the indices of the serving routes that have an alternate.
	served []int
	// caps are the fetch deadlines the routes set, by source group (nil when no route has a timeout).
	caps []fetchCap
}

// fetchCap is the deadline the serving routes put on a source's fetch: the
// most generous of their timeouts, none when one of them has none.
type fetchCap struct {
	set     bool
	timeout time.Duration // 0 = none
	route   string        // the route whose timeout it is
}

// serve records that route i serves the query and adds its sources.
func (s *Snapshot) serve(i int, matchedBy, alternateFor string, resp *Response, r *routing) {
	rt := &s.routes[i]
	resp.MatchedRoutes = append(resp.MatchedRoutes, rt.name)
	resp.RouteMatches = append(resp.RouteMatches, RouteMatch{Route: rt.name, MatchedBy: matchedBy, AlternateFor: alternateFor})
	if rt.alternate >= 0 && matchedBy != MatchedByAlternate {
		r.served = append(r.served, i)
	}
	if s.hasTimeouts && r.caps == nil {
		r.caps = make([]fetchCap, len(s.byGroup))
	}
	for _, n := range rt.sources {
		if r.caps != nil {
			c := &r.caps[s.sources[n].group]
			switch {
			case !c.set:
				*c = fetchCap{set: true, timeout: rt.timeout, route: rt.name}
			case c.timeout > 0 && (rt.timeout == 0 || rt.timeout > c.timeout):
				c.timeout, c.route = rt.timeout, rt.name
			}
		}
		if !slices.Contains(r.srcNames, n) {
			r.srcNames = append(r.srcNames, n)
		}
	}
}

// Outcomes of a source in one query, for the alternates (routeFailed).
const (
	outcomeNone uint8 = iota
	outcomeAnswered
	outcomeDenied
	outcomeFailed
	// outcomeFixed: the source answered and cannot fail (sourceCanFail).
	outcomeFixed
)

// outcomesOf yields the outcomes of route i's sources in this query.
func (s *Snapshot) outcomesOf(i int, outcome []uint8) iter.Seq[uint8] {
	return func(yield func(uint8) bool) {
		for _, n := range s.routes[i].sources {
			if !yield(outcome[s.sources[n].group]) {
				return
			}
		}
	}
}

// alternates calls the alternate of every serving route whose sources all
// failed, in the order the routes serve, and returns the sources they add.
// An alternate that already serves the query adds nothing and is not called.
func (s *Snapshot) alternates(r *routing, outcome []uint8, resp *Response) []string {
	before := len(r.srcNames)
	for _, i := range r.served { // the routes serving before any alternate
		a := s.routes[i].alternate
		if a < 0 || slices.Contains(resp.MatchedRoutes, s.routes[a].name) || !routeFailed(s.outcomesOf(i, outcome)) {
			continue
		}
		resp.Stats.Routes.Alternate++
		s.serve(a, MatchedByAlternate, s.routes[i].name, resp, r)
	}
	return r.srcNames[before:]
}

// Alternates maps each route that has an alternate to it.
func (s *Snapshot) Alternates() map[string]string {
	out := map[string]string{}
	for _, r := range s.routes {
		if r.alternate >= 0 {
			out[r.name] = s.routes[r.alternate].name
		}
	}
	return out
}

// MatchRoutes evaluates the routes for a request as Query does (conditions,
// then the fallbacks when nothing matched) without reading any source, so
// alternates, which depend on sources failing, are not called. It returns
// the routes that serve and the conditions that failed.
func (s *Snapshot) MatchRoutes(ctx context.Context, req Request) ([]RouteMatch, []RouteError, error) {
	if err := validateRequest(&req); err != nil {
		return nil, nil, err
	}
	if err := s.checkDetect(req.Detect); err != nil {
		return nil, nil, err
	}
	resp := &Response{RouteMatches: []RouteMatch{}, RouteErrors: []RouteError{}}
	if _, err := s.route(ctx, &req, resp, s.queryDetector(ctx, &req)); err != nil {
		return nil, nil, err
	}
	return resp.RouteMatches, resp.RouteErrors, nil
}

// gateWarnings warns about fallbacks and alternates that can never serve,
// by asking the policy functions about the most favourable query: for a
// fallback, one that matches no route whose condition can fail to hold; for
// an alternate, one in which every source of its route that can fail fails.
func (c *compileScope) gateWarnings() {
	routes := c.s.routes
	warn := func(i int, field, msg string) {
		name := routes[i].name
		c.s.warnings = append(c.s.warnings, problem.Problem{Location: c.cfg.Origin(v1alpha1.KindContextRoute, name),
			Kind: v1alpha1.KindContextRoute, Name: name, Field: field, Severity: problem.Warning, Reason: v1alpha1.ReasonInvalidSpec, Message: msg})
	}
	// The matches every query makes, and the first route whose condition
	// holds for every query; only a router with fallbacks asks.
	var certain []RouteMatch
	blocker := -1
	for i, rt := range routes {
		if !c.s.hasFallback {
			break
		}
		switch {
		case rt.fallback:
		case rt.cond == nil:
			certain = append(certain, RouteMatch{Route: rt.name, MatchedBy: MatchedByAlways})
		case rt.cond.constantValue() == constTrue:
			certain = append(certain, RouteMatch{Route: rt.name, MatchedBy: MatchedByCondition})
			if blocker < 0 {
				blocker = i
			}
		}
	}
	for i, rt := range routes {
		if !rt.fallback {
			continue
		}
		switch {
		case rt.cond != nil && rt.cond.constantValue() == constFalse:
			warn(i, "spec.fallback", fmt.Sprintf("this fallback can never serve: its own condition holds for no query (when: %q)", c.cfg.Routes[i].Spec.When))
		case !fallbacksServe(certain):
			warn(i, "spec.fallback", fmt.Sprintf("this fallback can never serve: the condition of ContextRoute %q holds for every query (when: %q), "+
				"and a fallback serves only when no route matched by its condition; leave that route's when empty to make it apply "+
				"to every query without counting as a match", routes[blocker].name, c.cfg.Routes[blocker].Spec.When))
		}
	}
	for i, rt := range routes {
		if rt.alternate < 0 {
			continue
		}
		worst := func(yield func(uint8) bool) {
			for _, n := range rt.sources {
				o := outcomeFailed
				if !sourceCanFail(&c.known[n].Spec) {
					o = outcomeFixed
				}
				if !yield(o) {
					return
				}
			}
		}
		if !routeFailed(worst) {
			warn(i, "spec.alternate", fmt.Sprintf("this alternate can never serve: every source of the route (%s) is Inline or an inline tool "+
				"catalog, which cannot fail, and an alternate serves only when every source of the route that can fail failed", strings.Join(rt.sources, ", ")))
		}
	}
}
