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

// TestGatePolicy: the routing policy's decisions (api.md §1.2) on their own.
func TestGatePolicy(t *testing.T) {
	always := func(r string) RouteMatch { return RouteMatch{Route: r, MatchedBy: MatchedByAlways} }
	cond := func(r string) RouteMatch { return RouteMatch{Route: r, MatchedBy: MatchedByCondition} }
	t.Run("fallbacksServe", func(t *testing.T) {
		for _, tt := range []struct {
			name    string
			matches []RouteMatch
			want    bool
		}{
			{"nothing matched", nil, true},
			{"only routes that always apply", []RouteMatch{always("system"), always("style")}, true},
			{"a match by condition", []RouteMatch{cond("hr")}, false},
			{"an always-route and a match by condition", []RouteMatch{always("system"), cond("hr")}, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				if got := fallbacksServe(tt.matches); got != tt.want {
					t.Errorf("fallbacksServe(%v) = %v, want %v", tt.matches, got, tt.want)
				}
			})
		}
	})
	t.Run("routeFailed", func(t *testing.T) {
		for _, tt := range []struct {
			name     string
			outcomes []uint8
			want     bool
		}{
			{"every source failed", []uint8{outcomeFailed, outcomeFailed}, true},
			{"an Inline source beside a failed one", []uint8{outcomeFixed, outcomeFailed}, true},
			{"one source answered", []uint8{outcomeFailed, outcomeAnswered}, false},
			{"a fetch not finished counts as no failure", []uint8{outcomeFailed, outcomeNone}, false},
			{"only sources that cannot fail", []uint8{outcomeFixed, outcomeFixed}, false},
			{"denied and fixed: nothing failed", []uint8{outcomeDenied, outcomeFixed}, false},
			{"denied beside a failed one", []uint8{outcomeDenied, outcomeFailed}, true},
			{"no sources", nil, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				if got := routeFailed(slices.Values(tt.outcomes)); got != tt.want {
					t.Errorf("routeFailed(%v) = %v, want %v", tt.outcomes, got, tt.want)
				}
			})
		}
	})
	t.Run("sourceCanFail", func(t *testing.T) {
		dir := &v1alpha1.DirectorySource{Path: "x"}
		for _, tt := range []struct {
			spec v1alpha1.ContextSourceSpec
			want bool
		}{
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline}, false},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Catalog: billingCatalog}}, false},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Directory: dir}}, true},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory, Directory: dir}, true},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo}, true},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI}, true},
			{v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP}, true},
		} {
			if got := sourceCanFail(&tt.spec); got != tt.want {
				t.Errorf("sourceCanFail(%s, tools %+v) = %v, want %v", tt.spec.Type, tt.spec.Tools, got, tt.want)
			}
		}
	})
}

// TestPinnedContextAndGates is issue 20's bar in the engine: a system prompt
// on a route that always applies keeps no fallback from serving, and an
// Inline source on a route keeps no alternate from serving.
func TestPinnedContextAndGates(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"results":[{"text":"Invoices are paid within 30 days."}]}`)
	}))
	defer ok.Close()
	cfg := &Config{
		Router: router(nil),
		Routes: []v1alpha1.ContextRoute{
			routeTo("system", "", "prompt"),
			gateRoute("billing", `containsAnyWord(text, ["invoice"])`, false, 0, "wiki-route", "prompt", "kb-broken"),
			gateRoute("orders", `containsAnyWord(text, ["order"])`, false, 0, "wiki-route", "prompt", "billing-tools", "kb-broken"),
			gateRoute("payments", `containsAnyWord(text, ["payment"])`, false, 0, "wiki-route", "prompt", "kb-ok"),
			routeTo("wiki-route", `"wiki" in tags`, "wiki"),
			gateRoute("everything", "", true, 0, "", "handbook"),
		},
		Sources: []v1alpha1.ContextSource{
			inlineSource("prompt", "System prompt", "You are the billing assistant."),
			httpSource("kb-broken", broken.URL), httpSource("kb-ok", ok.URL),
			toolsSource("billing-tools", billingCatalog...),
			inlineSource("wiki", "Wiki", "The wiki answers when the knowledge base cannot."),
			inlineSource("handbook", "Handbook", "The handbook covers everything else."),
		},
		Permissions: []v1alpha1.AgentPermission{
			perm("no-kb", v1alpha1.AgentPermissionSpec{Agents: []string{"restricted"}, Default: v1alpha1.AccessAllow,
				DenySources: []string{"kb-broken"}}),
		},
	}
	s := compile(t, cfg)
	always := RouteMatch{Route: "system", MatchedBy: MatchedByAlways}
	cond := func(r string) RouteMatch { return RouteMatch{Route: r, MatchedBy: MatchedByCondition} }
	alt := func(of string) RouteMatch {
		return RouteMatch{Route: "wiki-route", MatchedBy: MatchedByAlternate, AlternateFor: of}
	}
	for _, tt := range []struct {
		name    string
		req     Request
		matches []RouteMatch
		sources []string
		stats   RouteStats
	}{
		{"unmatched: the fallback serves, the system prompt kept", Request{Text: "what is for lunch"},
			[]RouteMatch{always, {Route: "everything", MatchedBy: MatchedByFallback}}, []string{"handbook", "prompt"}, RouteStats{Fallback: 1}},
		{"a match by condition: no fallback", Request{Text: "wiki", Tags: []string{"wiki"}},
			[]RouteMatch{always, cond("wiki-route")}, []string{"prompt", "wiki"}, RouteStats{}},
		{"Inline prompt and a failing HTTP source: the alternate serves", Request{Text: "where is my invoice"},
			[]RouteMatch{always, cond("billing"), alt("billing")}, []string{"prompt", "wiki"}, RouteStats{Alternate: 1}},
		{"an inline tool catalog cannot fail either", Request{Text: "where is my order"},
			[]RouteMatch{always, cond("orders"), alt("orders")}, []string{"prompt", "wiki"}, RouteStats{Alternate: 1}},
		{"the HTTP source answers: no alternate", Request{Text: "payment paid within days"},
			[]RouteMatch{always, cond("payments")}, []string{"kb-ok", "prompt"}, RouteStats{}},
		{"the failing source denied: nothing failed, no alternate", Request{Text: "where is my invoice", Agent: "restricted"},
			[]RouteMatch{always, cond("billing")}, []string{"prompt"}, RouteStats{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := query(t, s, tt.req)
			if !reflect.DeepEqual(resp.RouteMatches, tt.matches) {
				t.Errorf("route_matches = %+v, want %+v", resp.RouteMatches, tt.matches)
			}
			if got := sortedSources(resp); !reflect.DeepEqual(got, tt.sources) {
				t.Errorf("chunk sources = %v, want %v", got, tt.sources)
			}
			if resp.Stats.Routes != tt.stats {
				t.Errorf("stats.routes = %+v, want %+v", resp.Stats.Routes, tt.stats)
			}
		})
	}
	// MatchRoutes applies the same fallback rule.
	matches, _, err := s.MatchRoutes(context.Background(), Request{Text: "what is for lunch"})
	if err != nil || !reflect.DeepEqual(matches, []RouteMatch{always, {Route: "everything", MatchedBy: MatchedByFallback}}) {
		t.Errorf("MatchRoutes = %+v, %v", matches, err)
	}
}

// TestGateWarnings: fallbacks and alternates that can never serve are
// warnings naming the route and the field; the router still compiles.
func TestGateWarnings(t *testing.T) {
	srcs := []v1alpha1.ContextSource{
		inlineSource("prompt", "Prompt", "Be brief."), inlineSource("wiki", "Wiki", "The wiki."),
		toolsSource("billing-tools", billingCatalog...), httpSource("kb", "http://127.0.0.1:1"),
	}
	const blocked = `ContextRoute/everything: spec.fallback: this fallback can never serve: the condition of ContextRoute %q holds for every query (when: %q), ` +
		`and a fallback serves only when no route matched by its condition; leave that route's when empty to make it apply to every query without counting as a match`
	for _, tt := range []struct {
		name   string
		routes []v1alpha1.ContextRoute
		want   []string
	}{
		{"an always-route and a fallback: fine", []v1alpha1.ContextRoute{routeTo("system", "", "prompt"), gateRoute("everything", "", true, 0, "", "wiki")}, nil},
		{"a condition that is always true blocks the fallback", []v1alpha1.ContextRoute{routeTo("system", "true", "prompt"), gateRoute("everything", "", true, 0, "", "wiki")},
			[]string{fmt.Sprintf(blocked, "system", "true")}},
		{"folded to true", []v1alpha1.ContextRoute{routeTo("a", `"kb" in tags`, "kb"), routeTo("b", `"kb" in tags || 1 == 1`, "prompt"), gateRoute("everything", `"x" in tags`, true, 0, "", "wiki")},
			[]string{fmt.Sprintf(blocked, "b", `"kb" in tags || 1 == 1`)}},
		{"a fallback whose own condition never holds", []v1alpha1.ContextRoute{routeTo("a", `"kb" in tags`, "kb"), gateRoute("everything", `"x" in tags && false`, true, 0, "", "wiki")},
			[]string{`ContextRoute/everything: spec.fallback: this fallback can never serve: its own condition holds for no query (when: "\"x\" in tags && false")`}},
		{"a condition that depends on the query: fine", []v1alpha1.ContextRoute{routeTo("a", `size(text) >= 0`, "kb"), gateRoute("everything", "", true, 0, "", "wiki")}, nil},
		{"an alternate of a route with only Inline sources and an inline catalog", []v1alpha1.ContextRoute{
			gateRoute("a", `"a" in tags`, false, 0, "w", "prompt", "billing-tools"), routeTo("w", `"w" in tags`, "wiki")},
			[]string{"ContextRoute/a: spec.alternate: this alternate can never serve: every source of the route (prompt, billing-tools) is Inline or an inline tool catalog, " +
				"which cannot fail, and an alternate serves only when every source of the route that can fail failed"}},
		{"an alternate of a route with a source that can fail: fine", []v1alpha1.ContextRoute{
			gateRoute("a", `"a" in tags`, false, 0, "w", "prompt", "kb"), routeTo("w", `"w" in tags`, "wiki")}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, &Config{Router: router(nil), Routes: tt.routes, Sources: srcs})
			var got []string
			for _, w := range s.Warnings() {
				if !w.IsWarning() {
					t.Errorf("%v is not a warning", w)
				}
				got = append(got, w.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
