package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "default"} }

func inlineSource(name, title, content string) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{Title: title, Content: content},
		Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingMarkdownSections, MaxChunkTokens: 512},
	}}
}

func routeTo(name, when string, srcs ...string) v1alpha1.ContextRoute {
	r := v1alpha1.ContextRoute{ObjectMeta: meta(name), Spec: v1alpha1.ContextRouteSpec{When: when}}
	for _, s := range srcs {
		r.Spec.Sources = append(r.Spec.Sources, v1alpha1.LocalObjectReference{Name: s})
	}
	return r
}

func router(mut func(*v1alpha1.ContextRouterSpec)) v1alpha1.ContextRouter {
	r := v1alpha1.ContextRouter{ObjectMeta: meta("test"), Spec: v1alpha1.ContextRouterSpec{
		DefaultAccess: v1alpha1.AccessAllow,
		Budget:        v1alpha1.BudgetSpec{MaxTokens: 8000, Truncation: v1alpha1.TruncationDrop, Estimator: v1alpha1.EstimatorCharsDiv4},
		Ranking:       v1alpha1.RankingSpec{Strategy: v1alpha1.RankingRelevance, Scorer: v1alpha1.ScorerBM25, DedupThreshold: "0.85"},
	}}
	if mut != nil {
		mut(&r.Spec)
	}
	return r
}

func compile(t testing.TB, cfg *Config) *Snapshot {
	t.Helper()
	s, err := Compile(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func query(t testing.TB, s *Snapshot, req Request) *Response {
	t.Helper()
	resp, err := s.Query(context.Background(), req)
	if err != nil {
		t.Fatalf("Query(%q): %v", req.Text, err)
	}
	checkInvariants(t, s, req, resp)
	return resp
}

func checkInvariants(t testing.TB, s *Snapshot, req Request, resp *Response) {
	t.Helper()
	d := resp.Stats.Dropped
	if resp.Stats.Included+d.Budget+d.PathDenied+d.Sensitivity+d.Duplicate+d.Stale != resp.Stats.Candidates {
		t.Errorf("stats do not add up: %+v", resp.Stats)
	}
	if resp.Stats.PinnedDropped > d.Budget {
		t.Errorf("pinned_dropped %d is more than dropped.budget %d", resp.Stats.PinnedDropped, d.Budget)
	}
	if resp.Stats.Included != len(resp.Chunks) {
		t.Errorf("included = %d, chunks = %d", resp.Stats.Included, len(resp.Chunks))
	}
	limit := s.maxTokens
	if req.MaxTokens > 0 && req.MaxTokens < limit {
		limit = req.MaxTokens
	}
	limit = max(0, limit-s.reserveTokens)
	sum := 0
	for _, c := range resp.Chunks {
		if got := s.est.Count(c.Content); got != c.TokenCount {
			t.Errorf("chunk %s/%s token_count %d, estimator says %d", c.Source, c.Path, c.TokenCount, got)
		}
		sum += c.TokenCount
		if c.Metadata.Redacted && c.Content != RedactedContent(c.Source, s.sources[c.Source].sensitivity) {
			t.Errorf("redacted chunk %s/%s is not the whole placeholder: %q", c.Source, c.Path, c.Content)
		}
		if c.RelevanceScore < 0 || c.RelevanceScore > 1 {
			t.Errorf("relevance_score %v out of 0..1", c.RelevanceScore)
		}
	}
	if sum != resp.TotalTokens || resp.TotalTokens > limit {
		t.Errorf("total_tokens %d (sum %d) exceeds budget %d", resp.TotalTokens, sum, limit)
	}
}

func sourcesOf(resp *Response) []string {
	var out []string
	for _, c := range resp.Chunks {
		out = append(out, c.Source+":"+c.Title)
	}
	return out
}

// knowledgeBase writes a small knowledge base to disk: an inline prompt and
// three directory sources.
func knowledgeBase(t testing.TB) []v1alpha1.ContextSource {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"hr/handbook.md":    "# HR\n\n## Vacation\n\nEmployees get 25 vacation days per year.\n\n## Remote work\n\nRemote work is allowed three days a week.\n",
		"eng/runbook.md":    "# Engineering\n\n## Deploys\n\nDeploys run through the pipeline with a canary stage.\n\n## Incidents\n\nPage the on-call engineer for incidents.\n",
		"finance/budget.md": "# Finance\n\n## Budget\n\nThe Q3 budget for vacation travel is 40k.\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name, path string) v1alpha1.ContextSource {
		return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: filepath.Join(root, path)},
			Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingMarkdownSections, MaxChunkTokens: 512},
		}}
	}
	return []v1alpha1.ContextSource{
		inlineSource("prompt", "System prompt", "You are Acme's assistant. Answer briefly."),
		dir("hr", "hr"), dir("eng", "eng"), dir("finance", "finance"),
	}
}

func TestRoutesAndPermissions(t *testing.T) {
	kb := knowledgeBase(t)
	cfg := &Config{
		Router: router(func(s *v1alpha1.ContextRouterSpec) {
			s.DefaultAccess = v1alpha1.AccessDeny
			s.Variables = map[string]apiextensionsv1.JSON{"region": {Raw: []byte(`"eu"`)}, "tier": {Raw: []byte(`2`)}}
		}),
		Routes: []v1alpha1.ContextRoute{
			routeTo("always", "", "prompt"),
			routeTo("hr", `containsAnyWord(text, ["vacation", "remote work"]) || "hr" in tags`, "hr", "prompt"),
			routeTo("eng", `containsAllWords(text, ["deploy", "canary"]) || metadata[?"department"].orValue("") == "engineering"`, "eng"),
			routeTo("finance", `vars.region == "eu" && vars.tier > 1 && text.lowerAscii().contains("budget")`, "finance"),
			routeTo("broken", `metadata["missing"] == "x"`, "finance"),
		},
		Sources: kb,
		Permissions: []v1alpha1.AgentPermission{
			perm("hr", v1alpha1.AgentPermissionSpec{Agents: []string{"hr-bot"}, AllowSources: []string{"prompt", "hr"}, Default: v1alpha1.AccessDeny}),
			perm("eng", v1alpha1.AgentPermissionSpec{Agents: []string{"eng-bot"}, AllowSources: []string{"prompt", "eng", "hr"}, Default: v1alpha1.AccessDeny}),
		},
	}
	s := compile(t, cfg)
	tests := []struct {
		name        string
		req         Request
		wantRoutes  []string
		wantDenied  []string
		wantSources []string
		wantErrors  int
	}{
		{
			name:        "hr question by hr agent, stemmed whole word",
			req:         Request{Text: "How many vacations do I get?", Agent: "hr-bot"},
			wantRoutes:  []string{"always", "hr"},
			wantDenied:  []string{},
			wantSources: []string{"prompt:System prompt", "hr:HR - Vacation"},
			wantErrors:  1,
		},
		{
			name:        "phrase match and deny of another team's source",
			req:         Request{Text: "remote work and the budget", Agent: "hr-bot"},
			wantRoutes:  []string{"always", "hr", "finance"},
			wantDenied:  []string{"finance"},
			wantSources: []string{"prompt:System prompt", "hr:HR - Remote work"},
			wantErrors:  1,
		},
		{
			name:        "metadata with optional access",
			req:         Request{Text: "what is new", Agent: "eng-bot", Metadata: map[string]string{"department": "engineering", "missing": "x"}},
			wantRoutes:  []string{"always", "eng", "broken"},
			wantDenied:  []string{"finance"},
			wantSources: []string{"prompt:System prompt"},
		},
		{
			name:        "all words required",
			req:         Request{Text: "deploy with a canary", Agent: "eng-bot"},
			wantRoutes:  []string{"always", "eng"},
			wantDenied:  []string{},
			wantSources: []string{"prompt:System prompt", "eng:Engineering - Deploys"},
			wantErrors:  1,
		},
		{
			name:        "unknown agent gets the router default (Deny)",
			req:         Request{Text: "vacation", Agent: "stranger"},
			wantRoutes:  []string{"always", "hr"},
			wantDenied:  []string{"prompt", "hr"},
			wantSources: nil,
			wantErrors:  1,
		},
		{
			name:        "tags",
			req:         Request{Text: "anything", Agent: "hr-bot", Tags: []string{"hr"}},
			wantRoutes:  []string{"always", "hr"},
			wantDenied:  []string{},
			wantSources: []string{"prompt:System prompt"},
			wantErrors:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := query(t, s, tt.req)
			if !reflect.DeepEqual(resp.MatchedRoutes, tt.wantRoutes) {
				t.Errorf("matched_routes = %v, want %v", resp.MatchedRoutes, tt.wantRoutes)
			}
			if !reflect.DeepEqual(resp.DeniedSources, tt.wantDenied) {
				t.Errorf("denied_sources = %v, want %v", resp.DeniedSources, tt.wantDenied)
			}
			if got := sourcesOf(resp); !reflect.DeepEqual(got, tt.wantSources) {
				t.Errorf("chunks = %v, want %v", got, tt.wantSources)
			}
			if len(resp.RouteErrors) != tt.wantErrors {
				t.Errorf("route_errors = %+v, want %d", resp.RouteErrors, tt.wantErrors)
			}
			for _, e := range resp.RouteErrors {
				if e.Route != "broken" || !strings.Contains(e.Error, "missing") {
					t.Errorf("route error %+v does not name the route and key", e)
				}
			}
		})
	}
}

func TestCompileErrorsNameTheRoute(t *testing.T) {
	kb := knowledgeBase(t)
	cfg := &Config{
		Router: router(nil),
		Routes: []v1alpha1.ContextRoute{
			routeTo("typo", `containsAnyWord(txt, ["a"])`, "prompt"),
			routeTo("not-bool", `text + "x"`, "prompt"),
			routeTo("missing-source", ``, "nope"),
		},
		Sources: kb[:1],
		Origins: map[string]problem.Location{"ContextRoute/typo": {File: "routes.yaml", Line: 3}},
	}
	_, err := Compile(context.Background(), cfg, Options{})
	var ce problem.List
	if !errors.As(err, &ce) {
		t.Fatalf("Compile error = %v, want a problem.List", err)
	}
	msg := ce.Error()
	for _, want := range []string{
		"routes.yaml:3: ContextRoute/typo: spec.when: ERROR: <input>:1:17: undeclared reference to 'txt'",
		"ContextRoute/not-bool: spec.when: must evaluate to bool",
		`ContextRoute/missing-source: spec.sources[0].name: ContextSource "nope" not found`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
	if len(ce) != 3 {
		t.Errorf("got %d problems, want 3:\n%s", len(ce), msg)
	}
	// One line per problem: CEL's excerpt with the caret is left out.
	if lines := strings.Count(msg, "\n") + 1; lines != 3 {
		t.Errorf("got %d lines, want 3:\n%s", lines, msg)
	}
	wantReasons := map[string]v1alpha1.ConditionReason{
		"typo": v1alpha1.ReasonInvalidCondition, "not-bool": v1alpha1.ReasonInvalidCondition, "missing-source": v1alpha1.ReasonSourceNotFound,
	}
	for _, p := range ce {
		if p.Reason != wantReasons[p.Name] {
			t.Errorf("%s: reason %q, want %q", p.Name, p.Reason, wantReasons[p.Name])
		}
	}
}

func TestCELCostLimit(t *testing.T) {
	tests := []struct {
		name, when string
		wantErr    string
	}{
		{"nested comprehensions", `[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))`, "too expensive"},
		{"quadratic over tags", `tags.all(a, tags.all(b, tags.all(c, text.contains(a + b + c))))`, "too expensive"},
		{"ordinary condition", `containsAnyWord(text, ["pto", "leave"]) || text.lowerAscii().contains("vacation") || "hr" in tags`, ""},
		{"comprehension over tags", `tags.exists(t, t.startsWith("eng-"))`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileCondition(tt.when)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
	kb := knowledgeBase(t)
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("ok", "", "prompt")}, Sources: kb[:1]})
	if _, err := s.Query(context.Background(), Request{Text: strings.Repeat("x", MaxTextBytes+1)}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("oversized text: error = %v, want ErrBadRequest", err)
	}
}

func TestSensitivityAndPathDeny(t *testing.T) {
	secret := inlineSource("secret", "Salaries", "Salary bands for engineers are listed here.")
	secret.Spec.Sensitivity = v1alpha1.SensitivityConfidential
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"results":[{"text":"Salary review happens in March.","title":"Review","path":"hr/salaries/review.md"},{"text":"Salary questions go to HR.","title":"Contact","path":"hr/contact.md"}]}`)
	}))
	defer srv.Close()
	api := v1alpha1.ContextSource{ObjectMeta: meta("api"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI,
		HTTPAPI: &v1alpha1.HTTPAPISource{URL: srv.URL + "/search?q={{query}}", ResponsePath: "results", TextField: "text", TitleField: "title", PathField: "path"}}}
	cfg := &Config{
		Router:  router(nil),
		Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "secret", "api")},
		Sources: []v1alpha1.ContextSource{secret, api},
		Permissions: []v1alpha1.AgentPermission{
			perm("drop", v1alpha1.AgentPermissionSpec{Agents: []string{"a"}, Default: v1alpha1.AccessAllow, DenyPaths: []string{"**/salaries/**"}}),
			perm("redact", v1alpha1.AgentPermissionSpec{Agents: []string{"b"}, Default: v1alpha1.AccessAllow, SensitivityAction: v1alpha1.SensitivityActionRedact}),
			perm("cleared", v1alpha1.AgentPermissionSpec{Agents: []string{"c"}, Default: v1alpha1.AccessAllow, MaxSensitivity: v1alpha1.SensitivityRestricted}),
		},
	}
	s := compile(t, cfg)

	resp := query(t, s, Request{Text: "salary", Agent: "a"})
	if resp.Stats.Candidates != 3 || resp.Stats.Dropped.Sensitivity != 1 || resp.Stats.Dropped.PathDenied != 1 {
		t.Errorf("agent a stats = %+v, want 3 candidates, 1 sensitivity, 1 path_denied", resp.Stats)
	}
	if got := sourcesOf(resp); !reflect.DeepEqual(got, []string{"api:Contact"}) {
		t.Errorf("agent a chunks = %v", got)
	}

	resp = query(t, s, Request{Text: "salary", Agent: "b"})
	var redacted *Chunk
	for i := range resp.Chunks {
		if resp.Chunks[i].Source == "secret" {
			redacted = &resp.Chunks[i]
		}
	}
	if redacted == nil || strings.Contains(redacted.Content, "bands") || !strings.Contains(redacted.Content, "redacted") || resp.Stats.Redacted != 1 {
		t.Errorf("agent b: secret chunk not redacted: %+v (stats %+v)", redacted, resp.Stats)
	}
	if len(resp.Chunks) != 3 {
		t.Errorf("agent b: %d chunks, want 3", len(resp.Chunks))
	}

	resp = query(t, s, Request{Text: "salary bands", Agent: "c"})
	if len(resp.Chunks) != 3 || resp.Chunks[0].Source != "secret" || !strings.Contains(resp.Chunks[0].Content, "bands") || resp.Chunks[0].RelevanceScore != 1 {
		t.Errorf("agent c chunks = %+v", resp.Chunks)
	}
}

func TestFailedSourcesAreReported(t *testing.T) {
	kb := knowledgeBase(t)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	mk := func(name, url string) v1alpha1.ContextSource {
		return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI,
			HTTPAPI: &v1alpha1.HTTPAPISource{URL: url + "?q={{query}}", TextField: "text", Timeout: &metav1.Duration{Duration: 200 * time.Millisecond}}}}
	}
	dir := v1alpha1.ContextSource{ObjectMeta: meta("missing-dir"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory,
		Directory: &v1alpha1.DirectorySource{Path: t.TempDir() + "/does-not-exist"}}}
	cfg := &Config{
		Router:  router(nil),
		Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "slow", "broken", "missing-dir")},
		Sources: []v1alpha1.ContextSource{kb[0], mk("slow", slow.URL), mk("broken", broken.URL), dir},
	}
	s := compile(t, cfg)
	start := time.Now()
	resp := query(t, s, Request{Text: "hello"})
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("query took %v; the slow source should time out after 200ms", el)
	}
	got := map[string]string{}
	for _, f := range resp.FailedSources {
		got[f.Source] = f.Error
	}
	if !strings.Contains(got["slow"], "timeout after 200ms") || !strings.Contains(got["broken"], "500") || !strings.Contains(got["missing-dir"], "does-not-exist") {
		t.Errorf("failed_sources = %+v", resp.FailedSources)
	}
	if len(resp.Chunks) != 1 || resp.Chunks[0].Source != "prompt" {
		t.Errorf("the healthy source must still answer: %v", sourcesOf(resp))
	}
	var status []string
	for _, st := range s.Sources() {
		status = append(status, fmt.Sprintf("%s:%t", st.Name, st.Error != ""))
	}
	if want := []string{"broken:false", "missing-dir:true", "prompt:false", "slow:false"}; !reflect.DeepEqual(status, want) {
		t.Errorf("Sources() = %v, want %v", status, want)
	}
}

func TestDedupAndRanking(t *testing.T) {
	para := "To request an exception, email the policy owner with the reason, the dates and your manager's approval."
	a := inlineSource("a", "A", "# A\n\n## Exceptions\n\n"+para)
	b := inlineSource("b", "B", "# B\n\n## Exceptions\n\n"+para+" Thanks.")
	c := inlineSource("c", "C", "Exceptions to the travel policy are rare.")
	c.Spec.Priority = 10
	base := &Config{Routes: []v1alpha1.ContextRoute{routeTo("all", "", "a", "b", "c")}, Sources: []v1alpha1.ContextSource{a, b, c}}

	t.Run("near-duplicate dropped", func(t *testing.T) {
		cfg := *base
		cfg.Router = router(nil)
		resp := query(t, compile(t, &cfg), Request{Text: "request an exception"})
		if resp.Stats.Dropped.Duplicate != 1 || len(resp.Chunks) != 2 {
			t.Errorf("stats = %+v chunks = %v", resp.Stats, sourcesOf(resp))
		}
	})
	t.Run("dedup disabled", func(t *testing.T) {
		cfg := *base
		cfg.Router = router(func(s *v1alpha1.ContextRouterSpec) { s.Ranking.DedupThreshold = "0" })
		resp := query(t, compile(t, &cfg), Request{Text: "request an exception"})
		if resp.Stats.Dropped.Duplicate != 0 || len(resp.Chunks) != 3 {
			t.Errorf("stats = %+v", resp.Stats)
		}
	})
	t.Run("manual ranking puts priority first", func(t *testing.T) {
		cfg := *base
		cfg.Router = router(func(s *v1alpha1.ContextRouterSpec) { s.Ranking.Strategy = v1alpha1.RankingManual })
		resp := query(t, compile(t, &cfg), Request{Text: "request an exception"})
		if resp.Chunks[0].Source != "c" {
			t.Errorf("first = %s, want c", resp.Chunks[0].Source)
		}
	})
	t.Run("relevance ranking puts the best match first", func(t *testing.T) {
		cfg := *base
		cfg.Router = router(nil)
		resp := query(t, compile(t, &cfg), Request{Text: "request an exception with manager approval"})
		if resp.Chunks[0].Source != "a" || resp.Chunks[0].RelevanceScore != 1 {
			t.Errorf("first = %+v", resp.Chunks[0])
		}
	})
}

func TestBudgetModes(t *testing.T) {
	long := strings.Repeat("deploy pipeline canary rollback stage ", 40) // ~1,520 chars, 380 tokens
	srcs := []v1alpha1.ContextSource{
		inlineSource("big", "Big", long),
		inlineSource("small", "Small", "deploy canary"),
	}
	srcs[0].Spec.Priority = 1
	tests := []struct {
		name      string
		mode      v1alpha1.TruncationMode
		max       int32
		reserve   int32
		wantN     int
		wantTrunc bool
		marker    string
	}{
		{"fits", v1alpha1.TruncationDrop, 1000, 0, 2, false, ""},
		{"drop skips big keeps small", v1alpha1.TruncationDrop, 200, 0, 1, true, ""},
		{"reserve counts", v1alpha1.TruncationDrop, 400, 50, 1, true, ""},
		{"truncate end", v1alpha1.TruncationTruncateEnd, 200, 0, 1, true, "truncated"},
		{"truncate middle", v1alpha1.TruncationTruncateMiddle, 200, 0, 1, true, "omitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{
				Router: router(func(s *v1alpha1.ContextRouterSpec) {
					s.Budget.MaxTokens, s.Budget.ReserveTokens, s.Budget.Truncation = tt.max, tt.reserve, tt.mode
					s.Ranking.Strategy = v1alpha1.RankingManual
				}),
				Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "big", "small")},
				Sources: srcs,
			}
			s := compile(t, cfg)
			resp := query(t, s, Request{Text: "deploy canary"})
			if len(resp.Chunks) != tt.wantN || resp.WasTruncated != tt.wantTrunc {
				t.Fatalf("chunks = %v truncated = %v, want %d/%v (stats %+v)", sourcesOf(resp), resp.WasTruncated, tt.wantN, tt.wantTrunc, resp.Stats)
			}
			if tt.marker != "" && !strings.Contains(resp.Chunks[0].Content, tt.marker) {
				t.Errorf("first chunk has no %q marker: %q", tt.marker, resp.Chunks[0].Content)
			}
		})
	}
	// Two chunks bigger than what remains after the first: the second is cut
	// into the remaining room, not dropped.
	two := []v1alpha1.ContextSource{inlineSource("a", "A", long), inlineSource("b", "B", long+" extra words here")}
	s2 := compile(t, &Config{
		Router: router(func(s *v1alpha1.ContextRouterSpec) {
			s.Budget.MaxTokens, s.Budget.Truncation, s.Ranking.DedupThreshold = 500, v1alpha1.TruncationTruncateEnd, "0"
		}),
		Routes: []v1alpha1.ContextRoute{routeTo("all", "", "a", "b")}, Sources: two,
	})
	if resp := query(t, s2, Request{Text: "deploy"}); len(resp.Chunks) != 2 || !strings.Contains(resp.Chunks[1].Content, "truncated") || resp.TotalTokens < 490 {
		t.Errorf("second chunk not cut into the remaining budget: %v, %d tokens", sourcesOf(resp), resp.TotalTokens)
	}

	// The request can lower the budget but not raise it.
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "big", "small")}, Sources: srcs})
	if resp := query(t, s, Request{Text: "deploy", MaxTokens: 100}); len(resp.Chunks) != 1 || resp.Chunks[0].Source != "small" {
		t.Errorf("max_tokens 100: %v", sourcesOf(resp))
	}
	if resp := query(t, s, Request{Text: "deploy", MaxChunks: 1}); len(resp.Chunks) != 1 || resp.Stats.Dropped.Budget != 1 {
		t.Errorf("max_chunks 1: %v %+v", sourcesOf(resp), resp.Stats)
	}
}

// TestBudgetNeverExceeded is the property test: over many random corpora,
// budgets, truncation modes and estimators, total_tokens never exceeds the
// budget and the stats always add up (checked in query()).
func TestBudgetNeverExceeded(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	words := strings.Fields("deploy canary vacation policy remote work budget incident review on-call pipeline salary the of a é 日本 🚀 \n\n ## heading")
	modes := []v1alpha1.TruncationMode{v1alpha1.TruncationDrop, v1alpha1.TruncationTruncateEnd, v1alpha1.TruncationTruncateMiddle}
	ests := v1alpha1.TokenEstimators()
	text := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(words[rng.Intn(len(words))])
			if rng.Intn(5) == 0 {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		return b.String()
	}
	for iter := 0; iter < 150; iter++ {
		var srcs []v1alpha1.ContextSource
		var names []string
		for i := 0; i < 1+rng.Intn(6); i++ {
			name := fmt.Sprintf("s%d", i)
			src := inlineSource(name, "T", text(1+rng.Intn(400)))
			src.Spec.Chunking.MaxChunkTokens = int32(16 + rng.Intn(200))
			srcs = append(srcs, src)
			names = append(names, name)
		}
		max := int32(1 + rng.Intn(600))
		cfg := &Config{
			Router: router(func(s *v1alpha1.ContextRouterSpec) {
				s.Budget.MaxTokens = max
				s.Budget.ReserveTokens = int32(rng.Intn(int(max)))
				s.Budget.Truncation = modes[rng.Intn(3)]
				s.Budget.Estimator = ests[rng.Intn(len(ests))]
				s.Ranking.DedupThreshold = []string{"0", "0.5", "0.85", "1"}[rng.Intn(4)]
			}),
			Routes:  []v1alpha1.ContextRoute{routeTo("all", "", names...)},
			Sources: srcs,
		}
		s := compile(t, cfg)
		for j := 0; j < 5; j++ {
			query(t, s, Request{Text: text(1 + rng.Intn(6)), MaxTokens: rng.Intn(700)})
		}
	}
}

func TestDeterministicResponse(t *testing.T) {
	kb := knowledgeBase(t)
	cfg := &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "hr", "eng", "finance")}, Sources: kb}
	var first []byte
	for i := 0; i < 5; i++ {
		s := compile(t, cfg)
		resp := query(t, s, Request{Text: "vacation budget deploy"})
		resp.EvaluationTimeMS = 0
		b, _ := json.Marshal(resp)
		if i == 0 {
			first = b
			if s.Hash() == "" || !strings.HasPrefix(s.Hash(), "sha256:") {
				t.Errorf("hash = %q", s.Hash())
			}
			continue
		}
		if string(b) != string(first) {
			t.Fatalf("response differs between identical snapshots:\n%s\n%s", first, b)
		}
	}
}

func TestBadRequests(t *testing.T) {
	kb := knowledgeBase(t)
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "prompt")}, Sources: kb[:1]})
	for _, req := range []Request{{Text: ""}, {Text: "  \n"}, {Text: "x", MaxTokens: -1}} {
		if _, err := s.Query(context.Background(), req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Query(%+v) error = %v, want ErrBadRequest", req, err)
		}
	}
}

// TestUnsupportedRouterSettings: Compile refuses what this engine cannot
// serve, and trusts the API's rules to Validate (CheckRouter reports both).
func TestUnsupportedRouterSettings(t *testing.T) {
	kb := knowledgeBase(t)
	invalid := func(s *v1alpha1.ContextRouterSpec) {
		s.Ranking.DedupThreshold = "1.5"
		s.Budget.ReserveTokens = 9000
	}
	cfg := &Config{Router: router(func(s *v1alpha1.ContextRouterSpec) {
		invalid(s)
		s.Ranking.Hybrid = &v1alpha1.HybridSpec{DenseWeight: "heavy"}
	}), Sources: kb[:1]}
	_, err := Compile(context.Background(), cfg, Options{})
	var list problem.List
	if !errors.As(err, &list) || len(list) != 1 || !strings.Contains(list[0].Error(), `spec.ranking.hybrid.denseWeight: "heavy" is not a number from 0 to 1`) {
		t.Errorf("Compile error = %v, want only the weight it cannot use", err)
	}
	// A hand-built router ranked by embeddings without an endpoint.
	bare := &Config{Router: router(func(s *v1alpha1.ContextRouterSpec) { s.Ranking.Strategy = v1alpha1.RankingHybrid }), Sources: kb[:1]}
	if _, err := Compile(context.Background(), bare, Options{}); !errors.As(err, &list) || len(list) != 1 ||
		!strings.Contains(list[0].Error(), "spec.ranking.embedding: required for the Hybrid strategy") {
		t.Errorf("Compile error = %v, want the missing embedding", err)
	}
	r := cfg.Router.DeepCopy()
	r.Default() // as every loader does
	r.Spec.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: "http://emb/v1", Model: "m"}
	errs := CheckRouter(r)
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	if want := []string{"spec.budget.reserveTokens", "spec.ranking.dedupThreshold", "spec.ranking.hybrid.denseWeight"}; !slices.Equal(fields, want) {
		t.Errorf("CheckRouter reports %v, want %v", errs.ToAggregate(), want)
	}
}

func TestSkipLoadCompilesWithoutReading(t *testing.T) {
	dir := v1alpha1.ContextSource{ObjectMeta: meta("docs"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory,
		Directory: &v1alpha1.DirectorySource{Path: "/nonexistent/contextrouter/docs"}}}
	cfg := &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("r", `"x" in tags`, "docs")}, Sources: []v1alpha1.ContextSource{dir}}
	s, err := Compile(context.Background(), cfg, Options{SkipLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Sources()[0]; st.Error != "" || st.Chunks != 0 {
		t.Errorf("SkipLoad read the source: %+v", st)
	}
	cfg.Routes[0].Spec.When = "tags.bogus()"
	if _, err := Compile(context.Background(), cfg, Options{SkipLoad: true}); err == nil || !strings.Contains(err.Error(), "ContextRoute/r: spec.when") {
		t.Errorf("SkipLoad must still compile CEL: %v", err)
	}
}

func TestRecencyRanking(t *testing.T) {
	root := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"old.md", "new.md", "mid.md"} {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte("# "+name+"\n\nThe deploy checklist, version "+name+"."), 0o644); err != nil {
			t.Fatal(err)
		}
		mtime := base.Add(time.Duration([]int{0, 48, 24}[i]) * time.Hour)
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	src := v1alpha1.ContextSource{ObjectMeta: meta("docs"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory,
		Directory: &v1alpha1.DirectorySource{Path: root}}}
	cfg := &Config{
		Router: router(func(s *v1alpha1.ContextRouterSpec) {
			s.Ranking.Strategy = v1alpha1.RankingRecency
			s.Ranking.DedupThreshold = "0"
		}),
		Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "docs")},
		Sources: []v1alpha1.ContextSource{src},
	}
	resp := query(t, compile(t, cfg), Request{Text: "deploy checklist"})
	var got []string
	for _, c := range resp.Chunks {
		got = append(got, c.Path+"@"+c.Metadata.MTime)
	}
	want := []string{"new.md@2026-01-03T00:00:00Z", "mid.md@2026-01-02T00:00:00Z", "old.md@2026-01-01T00:00:00Z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recency order = %v, want %v", got, want)
	}
}

// TestRedactedPlaceholderNeverCut: under every truncation mode a redacted chunk's placeholder is
// either included whole or dropped for budget, and a smaller chunk after it still gets the room.
func TestRedactedPlaceholderNeverCut(t *testing.T) {
	secret := inlineSource("secret", "Salaries", "Salary bands for every engineering level, in detail.")
	secret.Spec.Sensitivity = v1alpha1.SensitivityConfidential
	secret.Spec.Priority = 10
	public := inlineSource("public", "Contact", "Ask HR.")
	placeholder := RedactedContent("secret", v1alpha1.SensitivityConfidential) // 51 runes = 13 tokens
	modes := []v1alpha1.TruncationMode{v1alpha1.TruncationDrop, v1alpha1.TruncationTruncateEnd, v1alpha1.TruncationTruncateMiddle}
	for _, mode := range modes {
		for _, tc := range []struct {
			maxTokens   int32
			wantSecret  bool
			wantDropped int
		}{
			{maxTokens: 10, wantSecret: false, wantDropped: 1}, // room to cut into, but a placeholder is never cut
			{maxTokens: 12, wantSecret: false, wantDropped: 1},
			{maxTokens: 20, wantSecret: true, wantDropped: 0}, // 13 + 2 tokens fit whole
		} {
			t.Run(fmt.Sprintf("%s/%d", mode, tc.maxTokens), func(t *testing.T) {
				s := compile(t, &Config{
					Router: router(func(s *v1alpha1.ContextRouterSpec) {
						s.Budget.MaxTokens, s.Budget.Truncation = tc.maxTokens, mode
						s.Ranking.Strategy = v1alpha1.RankingManual
					}),
					Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "secret", "public")},
					Sources: []v1alpha1.ContextSource{secret, public},
					Permissions: []v1alpha1.AgentPermission{perm("redact", v1alpha1.AgentPermissionSpec{
						Agents: []string{"*"}, Default: v1alpha1.AccessAllow, SensitivityAction: v1alpha1.SensitivityActionRedact})},
				})
				resp := query(t, s, Request{Text: "salary"})
				var gotSecret, gotPublic bool
				for _, c := range resp.Chunks {
					switch c.Source {
					case "secret":
						gotSecret = true
						if c.Content != placeholder || !c.Metadata.Redacted {
							t.Errorf("redacted chunk content = %q, want the whole placeholder %q", c.Content, placeholder)
						}
					case "public":
						gotPublic = c.Content == "Ask HR."
					}
				}
				if gotSecret != tc.wantSecret || resp.Stats.Dropped.Budget != tc.wantDropped {
					t.Errorf("secret included = %v, dropped.budget = %d; want %v, %d (chunks %q)",
						gotSecret, resp.Stats.Dropped.Budget, tc.wantSecret, tc.wantDropped, resp.Text)
				}
				if !gotPublic {
					t.Errorf("the small public chunk after the placeholder must still fit whole: %q", resp.Text)
				}
			})
		}
	}
}
