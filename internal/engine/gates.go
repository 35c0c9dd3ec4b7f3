package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
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
	MatchedByCondition = "condition"
	MatchedByFallback  = "fallback"
	MatchedByAlternate = "alternate"
)

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

// Outcomes of a source in one query, for the alternates (sourceOutcome).
const (
	outcomeNone uint8 = iota
	outcomeAnswered
	outcomeDenied
	outcomeFailed
)

// routeFailed says whether every source of route i that the agent may read
// failed in this query, and at least one did.
func (s *Snapshot) routeFailed(i int, outcome []uint8) bool {
	failed := false
	for _, n := range s.routes[i].sources {
		switch outcome[s.sources[n].group] {
		case outcomeDenied:
		case outcomeFailed:
			failed = true
		default:
			return false
		}
	}
	return failed
}

// alternates calls the alternate of every serving route whose sources all
// failed, in the order the routes serve, and returns the sources they add.
// An alternate that already serves the query adds nothing and is not called.
func (s *Snapshot) alternates(r *routing, outcome []uint8, resp *Response) []string {
	before := len(r.srcNames)
	for _, i := range r.served { // the routes serving before any alternate
		a := s.routes[i].alternate
		if a < 0 || slices.Contains(resp.MatchedRoutes, s.routes[a].name) || !s.routeFailed(i, outcome) {
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
