package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// httpSource is an HTTPAPI source on url with a generous timeout of its own,
// so that only a route's timeout can end its fetches early.
func httpSource(name, url string) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI,
		HTTPAPI: &v1alpha1.HTTPAPISource{URL: url + "?q={{query}}", ResponsePath: "results", TextField: "text",
			Timeout: &metav1.Duration{Duration: 10 * time.Second}}}}
}

// gateRoute is a route with the gates set.
func gateRoute(name, when string, fallback bool, timeout time.Duration, alternate string, srcs ...string) v1alpha1.ContextRoute {
	r := routeTo(name, when, srcs...)
	r.Spec.Fallback, r.Spec.Alternate = fallback, alternate
	if timeout > 0 {
		r.Spec.Timeout = &metav1.Duration{Duration: timeout}
	}
	return r
}

func TestRouteGates(t *testing.T) {
	answer := func(text string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"results":[{"text":%q}]}`, text)
		}
	}
	ok := httptest.NewServer(answer("Invoices are paid within 30 days."))
	defer ok.Close()
	// hung answers only when the client gives up (at most 10s, the source's timeout).
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer hung.Close()
	// slow answers after 300ms: past a 50ms route timeout, within the source's own.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
		answer("Slow but sure.")(w, r)
	}))
	defer slow.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()

	cfg := &Config{
		Router: router(nil),
		Routes: []v1alpha1.ContextRoute{
			gateRoute("billing", `containsAnyWord(text, ["invoice"])`, false, 50*time.Millisecond, "wiki-route", "kb-hung"),
			gateRoute("support", `"support" in tags`, false, 0, "wiki-route", "kb-broken"),
			gateRoute("healthy", `"healthy" in tags`, false, 0, "wiki-route", "kb-ok"),
			gateRoute("private", `"private" in tags`, false, 0, "wiki-route", "kb-private"),
			gateRoute("fast", `"fast" in tags`, false, 50*time.Millisecond, "", "kb-slow"),
			gateRoute("patient", `"patient" in tags`, false, 0, "", "kb-slow"),
			gateRoute("chain", `"chain" in tags`, false, 0, "hung-alt", "kb-broken"),
			gateRoute("hung-alt", `"never" in tags`, false, 50*time.Millisecond, "wiki-route", "kb-hung"),
			gateRoute("wiki-route", `"wiki" in tags`, false, 0, "", "wiki"),
			gateRoute("everything", "", true, 0, "", "handbook"),
			gateRoute("guarded", `"guard" in tags`, true, 0, "", "guard-notes"),
		},
		Sources: []v1alpha1.ContextSource{
			httpSource("kb-ok", ok.URL), httpSource("kb-hung", hung.URL), httpSource("kb-slow", slow.URL),
			httpSource("kb-broken", broken.URL), httpSource("kb-private", broken.URL),
			inlineSource("wiki", "Wiki", "The wiki answers when the knowledge base cannot."),
			inlineSource("handbook", "Handbook", "The handbook covers everything else."),
			inlineSource("guard-notes", "Guard", "Notes for guarded questions."),
		},
		Permissions: []v1alpha1.AgentPermission{
			perm("no-private", v1alpha1.AgentPermissionSpec{Agents: []string{"restricted"}, Default: v1alpha1.AccessAllow,
				DenySources: []string{"kb-private"}}),
		},
	}
	s := compile(t, cfg)

	cond := func(r string) RouteMatch { return RouteMatch{Route: r, MatchedBy: MatchedByCondition} }
	fb := func(r string) RouteMatch { return RouteMatch{Route: r, MatchedBy: MatchedByFallback} }
	alt := func(r, of string) RouteMatch {
		return RouteMatch{Route: r, MatchedBy: MatchedByAlternate, AlternateFor: of}
	}
	tests := []struct {
		name    string
		req     Request
		matches []RouteMatch
		failed  []SourceFailure
		sources []string // of the chunks, sorted
		stats   RouteStats
	}{
		{"route timeout calls the alternate", Request{Text: "where is my invoice"},
			[]RouteMatch{cond("billing"), alt("wiki-route", "billing")},
			[]SourceFailure{{Source: "kb-hung", Error: "timeout after 50ms", Reason: FailureTimeout, Route: "billing"}},
			[]string{"wiki"}, RouteStats{Alternate: 1}},
		{"failing source calls the alternate", Request{Text: "help", Tags: []string{"support"}},
			[]RouteMatch{cond("support"), alt("wiki-route", "support")},
			[]SourceFailure{{Source: "kb-broken", Error: "500"}},
			[]string{"wiki"}, RouteStats{Alternate: 1}},
		{"answering source: no alternate", Request{Text: "paid within days", Tags: []string{"healthy"}},
			[]RouteMatch{cond("healthy")}, nil, []string{"kb-ok"}, RouteStats{}},
		{"two failed routes call their shared alternate once", Request{Text: "invoice help", Tags: []string{"support"}},
			[]RouteMatch{cond("billing"), cond("support"), alt("wiki-route", "billing")},
			[]SourceFailure{{Source: "kb-hung", Error: "timeout after 50ms", Reason: FailureTimeout, Route: "billing"}, {Source: "kb-broken", Error: "500"}},
			[]string{"wiki"}, RouteStats{Alternate: 1}},
		{"alternate already serving is not called", Request{Text: "help", Tags: []string{"support", "wiki"}},
			[]RouteMatch{cond("support"), cond("wiki-route")},
			[]SourceFailure{{Source: "kb-broken", Error: "500"}}, []string{"wiki"}, RouteStats{}},
		{"denied sources do not call the alternate", Request{Text: "help", Agent: "restricted", Tags: []string{"private"}},
			[]RouteMatch{cond("private")}, nil, nil, RouteStats{}},
		{"the same route for an agent that may read the source", Request{Text: "help", Tags: []string{"private"}},
			[]RouteMatch{cond("private"), alt("wiki-route", "private")},
			[]SourceFailure{{Source: "kb-private", Error: "500"}}, []string{"wiki"}, RouteStats{Alternate: 1}},
		{"an alternate's own timeout applies, and its alternate is not followed", Request{Text: "help", Tags: []string{"chain"}},
			[]RouteMatch{cond("chain"), alt("hung-alt", "chain")},
			[]SourceFailure{{Source: "kb-broken", Error: "500"}, {Source: "kb-hung", Error: "timeout after 50ms", Reason: FailureTimeout, Route: "hung-alt"}},
			nil, RouteStats{Alternate: 1}},
		{"route timeout cuts a slow source", Request{Text: "slow", Tags: []string{"fast"}},
			[]RouteMatch{cond("fast")},
			[]SourceFailure{{Source: "kb-slow", Error: "timeout after 50ms", Reason: FailureTimeout, Route: "fast"}}, nil, RouteStats{}},
		{"a shared source waits for the most generous route", Request{Text: "slow", Tags: []string{"fast", "patient"}},
			[]RouteMatch{cond("fast"), cond("patient")}, nil, []string{"kb-slow"}, RouteStats{}},
		{"no match: the fallback serves", Request{Text: "what else"},
			[]RouteMatch{fb("everything")}, nil, []string{"handbook"}, RouteStats{Fallback: 1}},
		{"no match: fallbacks whose condition holds serve, in route order", Request{Text: "what else", Tags: []string{"guard"}},
			[]RouteMatch{fb("everything"), fb("guarded")}, nil, []string{"guard-notes", "handbook"}, RouteStats{Fallback: 2}},
		{"a match: no fallback", Request{Text: "wiki", Tags: []string{"wiki", "guard"}},
			[]RouteMatch{cond("wiki-route")}, nil, []string{"wiki"}, RouteStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := query(t, s, tt.req)
			if !reflect.DeepEqual(resp.RouteMatches, tt.matches) {
				t.Errorf("route_matches = %+v, want %+v", resp.RouteMatches, tt.matches)
			}
			var names []string
			for _, m := range tt.matches {
				names = append(names, m.Route)
			}
			if !reflect.DeepEqual(resp.MatchedRoutes, names) {
				t.Errorf("matched_routes = %v, want %v", resp.MatchedRoutes, names)
			}
			if len(resp.FailedSources) != len(tt.failed) {
				t.Fatalf("failed_sources = %+v, want %+v", resp.FailedSources, tt.failed)
			}
			for i, f := range resp.FailedSources {
				w := tt.failed[i]
				if f.Source != w.Source || !strings.Contains(f.Error, w.Error) || f.Reason != w.Reason || f.Route != w.Route {
					t.Errorf("failed_sources[%d] = %+v, want %+v", i, f, w)
				}
			}
			if got := sortedSources(resp); !reflect.DeepEqual(got, tt.sources) {
				t.Errorf("chunk sources = %v, want %v", got, tt.sources)
			}
			if resp.Stats.Routes != tt.stats {
				t.Errorf("stats.routes = %+v, want %+v", resp.Stats.Routes, tt.stats)
			}
		})
	}
}

func sortedSources(resp *Response) []string {
	var out []string
	for _, c := range resp.Chunks {
		if !slices.Contains(out, c.Source) {
			out = append(out, c.Source)
		}
	}
	slices.Sort(out)
	return out
}

// TestAlternateReferences: an alternate must name a route of the router, and
// alternates must not form a cycle; the problems name the route and the field.
func TestAlternateReferences(t *testing.T) {
	src := inlineSource("docs", "Docs", "Some docs.")
	tests := []struct {
		name   string
		routes []v1alpha1.ContextRoute
		want   []string // "Kind/name field reason: message", sorted as reported
	}{
		{"missing alternate", []v1alpha1.ContextRoute{gateRoute("a", "", false, 0, "nope", "docs")},
			[]string{`ContextRoute/a spec.alternate AlternateNotFound: ContextRoute "nope" not found among the routes of the router (missing, attached elsewhere, or left out)`}},
		{"two-route cycle", []v1alpha1.ContextRoute{gateRoute("a", "", false, 0, "b", "docs"), gateRoute("b", "", false, 0, "a", "docs")},
			[]string{"ContextRoute/a spec.alternate InvalidSpec: alternates form a cycle: a → b → a",
				"ContextRoute/b spec.alternate InvalidSpec: alternates form a cycle: b → a → b"}},
		{"three-route cycle", []v1alpha1.ContextRoute{gateRoute("a", "", false, 0, "b", "docs"),
			gateRoute("b", "", false, 0, "c", "docs"), gateRoute("c", "", false, 0, "a", "docs")},
			[]string{"ContextRoute/a spec.alternate InvalidSpec: alternates form a cycle: a → b → c → a",
				"ContextRoute/b spec.alternate InvalidSpec: alternates form a cycle: b → c → a → b",
				"ContextRoute/c spec.alternate InvalidSpec: alternates form a cycle: c → a → b → c"}},
		{"a chain is fine", []v1alpha1.ContextRoute{gateRoute("a", "", false, 0, "b", "docs"),
			gateRoute("b", "", false, 0, "c", "docs"), gateRoute("c", "", false, 0, "", "docs")}, nil},
		{"a route leading into a cycle is not part of it", []v1alpha1.ContextRoute{gateRoute("x", "", false, 0, "a", "docs"),
			gateRoute("a", "", false, 0, "b", "docs"), gateRoute("b", "", false, 0, "a", "docs")},
			[]string{"ContextRoute/a spec.alternate InvalidSpec: alternates form a cycle: a → b → a",
				"ContextRoute/b spec.alternate InvalidSpec: alternates form a cycle: b → a → b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(context.Background(), &Config{Router: router(nil), Routes: tt.routes,
				Sources: []v1alpha1.ContextSource{src}}, Options{})
			var got []string
			var list problem.List
			if errors.As(err, &list) {
				for _, p := range list {
					got = append(got, fmt.Sprintf("%s/%s %s %s: %s", p.Kind, p.Name, p.Field, p.Reason, p.Message))
				}
			} else if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
