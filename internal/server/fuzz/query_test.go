// Package fuzz fuzzes the query API of the server. It is a package of its
// own so that fuzzing instruments only what the server is built from, not
// the control-plane dependencies of the server's own tests (half the build).
package fuzz

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/server"
)

const (
	quickstart = "../../../examples/quickstart"
	// hrQuery is the quickstart's demo question.
	hrQuery = `{"text": "How many vacation days do I get, and can I carry them over?", "agent": "hr-assistant"}`
)

// fuzzHangGuard is how long FuzzQuery waits for an answer before calling
// it a hang: far above the servers' QueryTimeout, so that only a query
// that ignores its deadline trips it.
const fuzzHangGuard = 30 * time.Second

// tinyBudgetManifests is a router whose budget is smaller than most of its
// chunks, cut in the middle, with a redacted and a denied source and a
// condition that fails on most queries: the paths where a budget could be
// overshot or a list left null.
const tinyBudgetManifests = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: tiny}
spec:
  defaultAccess: Allow
  budget: {maxTokens: 60, reserveTokens: 10, truncation: TruncateMiddle, estimator: Words}
  ranking: {strategy: Recency, dedupThreshold: "0.5"}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: handbook}
spec:
  type: Inline
  chunking: {maxChunkTokens: 16}
  inline:
    title: Handbook
    content: |
      # Handbook
      ## Vacation
      Employees get 25 vacation days per year; up to five days carry over into the next year if approved.
      ## Deploys
      Deploys run through the pipeline with a canary stage, and a rollback takes one command.
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: secrets}
spec:
  type: Inline
  sensitivity: Restricted
  inline: {title: Secrets, content: "The vault is behind the painting in the lobby, code 1234."}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: handbook}, {name: secrets}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: flaky}
spec:
  when: metadata["team"] == "ops"
  sources: [{name: handbook}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: everyone}
spec:
  parentRefs: [{name: tiny}]
  agents: ["*"]
  default: Allow
  maxSensitivity: Internal
  sensitivityAction: Redact
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: guest}
spec:
  parentRefs: [{name: tiny}]
  agents: [guest]
  denySources: [handbook]
`

// fuzzTarget is one server FuzzQuery sends requests to.
type fuzzTarget struct {
	h http.Handler
	// budget of the serving router.
	maxTokens, reserveTokens int
}

func newFuzzTarget(f *testing.F, path string, opts server.Options) fuzzTarget {
	f.Helper()
	set, err := manifest.Load(path)
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := set.Config("")
	if err != nil {
		f.Fatal(err)
	}
	opts.Paths = []string{path}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Engine.CacheDir = f.TempDir()
	opts.QueryTimeout = 5 * time.Second
	srv, err := server.New(opts)
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Reload(context.Background()); err != nil {
		f.Fatal(err)
	}
	for _, st := range srv.Snapshot().Sources() {
		if st.Error != "" {
			f.Fatalf("source %s: %s", st.Name, st.Error)
		}
	}
	b := cfg.Router.Spec.Budget
	return fuzzTarget{h: srv.Handler(), maxTokens: int(b.MaxTokens), reserveTokens: int(b.ReserveTokens)}
}

// FuzzQuery posts arbitrary bodies to /v1/query of real servers: the
// quickstart, the quickstart pinned to one agent with a small body limit,
// and a router with a tiny budget. Whatever the body: never a 5xx and never
// a hang; a 4xx has a JSON {"error": "..."} body; a 2xx keeps the budget
// (max_tokens or the router's, minus reserveTokens), sums token counts into
// total_tokens, accounts for every candidate, respects max_chunks and has
// no null list.
func FuzzQuery(f *testing.F) {
	dir := f.TempDir()
	tiny := filepath.Join(dir, "tiny.yaml")
	if err := os.WriteFile(tiny, []byte(tinyBudgetManifests), 0o644); err != nil {
		f.Fatal(err)
	}
	targets := []fuzzTarget{
		newFuzzTarget(f, quickstart, server.Options{}),
		newFuzzTarget(f, quickstart, server.Options{Agent: "hr-assistant", MaxBodyBytes: 512}),
		newFuzzTarget(f, tiny, server.Options{}),
	}

	// Seeds: which picks the server (0 quickstart, 1 pinned, 2 tiny budget).
	for _, seed := range []struct {
		which uint8
		body  string
	}{
		{0, hrQuery},
		{0, `{"text": "deploy rollback incident", "agent": "eng-assistant", "tags": ["engineering"], "metadata": {"department": "engineering"}, "max_tokens": 300, "max_chunks": 2}`},
		{0, `{"text": "salary bands and the Q2 budget", "agent": "finance-analyst", "max_tokens": 1}`},
		{1, hrQuery},
		{1, `{"text": "vacation", "agent": "eng-assistant"}`},
		{1, `{"text": "` + strings.Repeat("vacation ", 64) + `"}`},
		{2, `{"text": "vacation days carry over", "metadata": {"team": "ops"}}`},
		{2, `{"text": "deploy canary rollback vault", "agent": "guest", "max_tokens": 30}`},
		{2, `{"text": "vault code", "Agent": "x", "max_tokens": -1}`},
		{0, `{"text": ""}`},
		{0, `{"text": "a", "extra": 1}`},
		{0, `{"text": "a"} {"text": "b"}`},
		{0, `[]`},
		{0, ``},
	} {
		f.Add([]byte(seed.body), seed.which)
	}

	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		target := targets[int(which)%len(targets)]
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			target.h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/query", bytes.NewReader(body)))
		}()
		select {
		case <-done:
		case <-time.After(fuzzHangGuard):
			t.Fatalf("no answer within %s to %q", fuzzHangGuard, body)
		}

		code, out := w.Code, w.Body.Bytes()
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("status %d with Content-Type %q", code, ct)
		}
		switch {
		case code >= 500:
			t.Fatalf("status %d for %q: %s", code, body, out)
		case code >= 400:
			var e map[string]any
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("status %d with a body that is not JSON (%v): %q", code, err, out)
			}
			if msg, ok := e["error"].(string); !ok || msg == "" || len(e) != 1 {
				t.Fatalf(`status %d: body %s is not {"error": "..."}`, code, out)
			}
		case code == http.StatusOK:
			checkQueryAnswer(t, target, body, out)
		default:
			t.Fatalf("status %d for %q: %s", code, body, out)
		}
	})
}

// checkQueryAnswer checks a 200 answer against the request it answers.
func checkQueryAnswer(t *testing.T, target fuzzTarget, body, out []byte) {
	t.Helper()
	// The server accepted the body, so it decodes; this reads it the same way.
	var req engine.Request
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("the server answered 200 to a body that does not decode (%v): %q", err, body)
	}
	var lists map[string]json.RawMessage
	if err := json.Unmarshal(out, &lists); err != nil {
		t.Fatalf("answer is not a JSON object (%v): %s", err, out)
	}
	for _, k := range []string{"chunks", "matched_routes", "denied_sources", "failed_sources", "route_errors"} {
		if v := lists[k]; len(v) == 0 || v[0] != '[' {
			t.Errorf("%s is %s, want a list", k, v)
		}
	}
	var resp engine.Response
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("answer does not decode as a response (%v): %s", err, out)
	}

	limit := target.maxTokens
	if req.MaxTokens > 0 && req.MaxTokens < limit {
		limit = req.MaxTokens
	}
	limit = max(0, limit-target.reserveTokens)
	sum := 0
	parts := make([]string, len(resp.Chunks))
	for i, c := range resp.Chunks {
		sum += c.TokenCount
		parts[i] = c.Content
	}
	if sum != resp.TotalTokens || resp.TotalTokens > limit {
		t.Errorf("total_tokens %d (chunks sum to %d) for a budget of %d: %s", resp.TotalTokens, sum, limit, body)
	}
	if resp.Text != strings.Join(parts, "\n\n") {
		t.Errorf("text is not the chunks joined: %q", resp.Text)
	}
	s, d := resp.Stats, resp.Stats.Dropped
	if s.Included != len(resp.Chunks) || s.Included+d.Budget+d.PathDenied+d.Sensitivity+d.Duplicate != s.Candidates {
		t.Errorf("stats do not account for every candidate: %+v with %d chunks", s, len(resp.Chunks))
	}
	if req.MaxChunks > 0 && len(resp.Chunks) > req.MaxChunks {
		t.Errorf("%d chunks, max_chunks is %d", len(resp.Chunks), req.MaxChunks)
	}
	redacted := 0
	for _, c := range resp.Chunks {
		if c.Metadata.Redacted {
			redacted++
			if !strings.HasPrefix(c.Content, "[redacted: ") {
				t.Errorf("redacted chunk shows content: %q", c.Content)
			}
		}
		if c.Source == "secrets" && !c.Metadata.Redacted {
			t.Errorf("the Restricted source reached an Internal agent: %+v", c)
		}
	}
	if redacted != s.Redacted {
		t.Errorf("stats.redacted %d, %d chunks are redacted", s.Redacted, redacted)
	}
}
