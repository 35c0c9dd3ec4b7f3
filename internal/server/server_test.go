package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/contextrouter/contextrouter/internal/engine"
)

const quickstart = "../../examples/quickstart"

// Answers over HTTP are the engine's answers, byte for byte apart from timing.
func TestQueryOverHTTPEqualsEngine(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{quickstart}})
	ts.waitReady()
	snap := compileFiles(t, quickstart)
	if got, want := ts.srv.Snapshot().Hash(), snap.Hash(); got != want {
		t.Fatalf("served snapshot hash %s, compiled %s", got, want)
	}
	for _, req := range []engine.Request{
		{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"},
		{Text: "How do I roll back a deploy?", Agent: "eng-assistant", Metadata: map[string]string{"department": "engineering"}},
		{Text: "What are the salary bands?", Agent: "finance-analyst"},
		{Text: "What is the quarterly budget?", Agent: "hr-assistant", Tags: []string{"hr"}, MaxTokens: 300},
		{Text: "Tell me something", Agent: "stranger"},
	} {
		t.Run(req.Text, func(t *testing.T) {
			got := ts.query(req)
			want, err := snap.Query(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got.EvaluationTimeMS, want.EvaluationTimeMS = 0, 0
			if !reflect.DeepEqual(&got, want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(want, "", " ")
				t.Fatalf("HTTP answer differs from the engine's:\n got %s\nwant %s", g, w)
			}
			if len(got.MatchedRoutes) == 0 {
				t.Fatal("no route matched: the comparison proves little")
			}
		})
	}
}

func TestAPIErrors(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{quickstart}, MaxBodyBytes: 512})
	ts.waitReady()
	json := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		code                     int
		want                     string
		allow                    string
	}{
		{"GET on query", http.MethodGet, "/v1/query", "", nil, 405, "method GET is not allowed on /v1/query: use POST", "POST"},
		{"POST on status", http.MethodPost, "/v1/status", "{}", nil, 405, "use GET", "GET"},
		{"DELETE on healthz", http.MethodDelete, "/healthz", "", nil, 405, "use GET", "GET"},
		{"unknown path", http.MethodGet, "/v2/query", "", nil, 404, "no endpoint /v2/query", ""},
		{"unknown field", http.MethodPost, "/v1/query", `{"text": "vacation", "bogus": 1}`, json, 400, `unknown field "bogus"`, ""},
		{"invalid JSON", http.MethodPost, "/v1/query", `{"text": "vacation"`, json, 400, "invalid request body: unexpected EOF", ""},
		{"empty body", http.MethodPost, "/v1/query", ``, json, 400, "request body is empty", ""},
		{"empty text", http.MethodPost, "/v1/query", `{"text": "  "}`, json, 400, "text must not be empty", ""},
		{"missing text", http.MethodPost, "/v1/query", `{"agent": "hr-assistant"}`, json, 400, "text must not be empty", ""},
		{"wrong type", http.MethodPost, "/v1/query", `{"text": 42}`, json, 400, "cannot unmarshal number into Go struct field Request.text of type string", ""},
		{"negative max_tokens", http.MethodPost, "/v1/query", `{"text": "vacation", "max_tokens": -1}`, json, 400, "max_tokens and max_chunks must not be negative", ""},
		{"two objects", http.MethodPost, "/v1/query", `{"text": "a"} {"text": "b"}`, json, 400, "invalid request body", ""},
		{"array", http.MethodPost, "/v1/query", `[{"text": "a"}]`, json, 400, "cannot unmarshal array", ""},
		{"over the limit", http.MethodPost, "/v1/query", `{"text": "` + strings.Repeat("vacation ", 100) + `"}`, json, 413, "request body is larger than 512 bytes", ""},
		{"over the limit, unknown type", http.MethodPost, "/v1/query", strings.Repeat(" ", 600) + `{"text": "a"}`, nil, 413, "larger than 512 bytes", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.url+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			raw := new(bytes.Buffer)
			raw.ReadFrom(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if err := jsonUnmarshal(raw.Bytes(), &body); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, raw)
			}
			msg, _ := body["error"].(string)
			if len(body) != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("body %s, want only an error containing %q", raw, tc.want)
			}
			if strings.Contains(msg, "goroutine") || strings.Contains(msg, ".go:") {
				t.Errorf("error leaks internals: %s", msg)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
	// A well-formed query still works after all that, with any Content-Type
	// (`curl -d` sends a form type).
	code, b := ts.do(http.MethodPost, "/v1/query", strings.NewReader(`{"text": "vacation days", "agent": "hr-assistant"}`),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if code != 200 || !strings.Contains(string(b), `"matched_routes":["always","hr-policies"]`) {
		t.Fatalf("query: %d %s", code, b)
	}
	if code, _ := ts.do(http.MethodHead, "/healthz", nil, nil); code != 200 {
		t.Fatalf("HEAD /healthz: %d", code)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// A server whose configuration never loaded is alive but not ready, says
// why, and becomes ready once the file is fixed.
func TestNotReadyUntilConfigLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes")+"kind: Unknown\n")
	ts := startServer(t, Options{Paths: []string{file}})
	eventually(t, 10*time.Second, "a failed first load", func() bool { return ts.status().LastReloadError != "" })

	if code, b := ts.get("/healthz"); code != 200 || string(b) != "ok\n" {
		t.Errorf("/healthz: %d %q", code, b)
	}
	code, b := ts.get("/readyz")
	if code != 503 || !strings.Contains(string(b), "no configuration is serving") || !strings.Contains(string(b), "Unknown") {
		t.Errorf("/readyz: %d %s", code, b)
	}
	code, b = ts.do(http.MethodPost, "/v1/query", strings.NewReader(`{"text": "deploy"}`), nil)
	if code != 503 || !strings.Contains(string(b), `"error":"no configuration is serving: `) {
		t.Errorf("query: %d %s", code, b)
	}
	if st := ts.status(); st.Ready || st.SnapshotHash != "" || st.Router != "" {
		t.Errorf("status of an unloaded server: %+v", st)
	}
	if v, _ := ts.metric("contextrouter_ready"); v != 0 {
		t.Errorf("contextrouter_ready = %v before a load", v)
	}

	writeAtomic(t, file, inlineManifests("v1", "notes"))
	ts.waitReady()
	resp := ts.query(engine.Request{Text: "deploy checklist"})
	if len(resp.Chunks) != 1 || !strings.Contains(resp.Chunks[0].Content, "edition v1") {
		t.Fatalf("answer after the fix: %+v", resp)
	}
	if st := ts.status(); !st.Ready || st.LastReloadError != "" || st.Router != "default" {
		t.Errorf("status after the fix: %+v", st)
	}
}

func TestStatus(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{quickstart}})
	ts.waitReady()
	st := ts.status()
	if st.Router != "acme" || !st.Ready || !strings.HasPrefix(st.SnapshotHash, "sha256:") || st.BuiltAt == nil ||
		st.LastReloadAt == nil || st.LastSuccessAt == nil || st.LastReloadError != "" || st.Auth != "none" {
		t.Errorf("status: %+v", st)
	}
	if want := []string{"always", "hr-policies", "engineering", "finance", "incident-help", "handbook"}; !slices.Equal(st.Routes, want) {
		t.Errorf("routes %v, want %v", st.Routes, want)
	}
	if len(st.Classifiers) != 1 || st.Classifiers[0].Name != "intent" || !st.Classifiers[0].Trained ||
		st.Classifiers[0].Labels["incident"] != 8 || st.Classifiers[0].Extractors != 2 {
		t.Errorf("classifiers %+v, want the quickstart's intent (8 incident examples, 2 extractors)", st.Classifiers)
	}
	var names []string
	total := 0
	for _, s := range st.Sources {
		names = append(names, s.Name+"/"+s.Type)
		total += s.Chunks
		// A tool source has tools, not chunks.
		if (s.Chunks == 0) == (s.Type != "Tools") || (s.Tools > 0) != (s.Type == "Tools") || s.Error != "" {
			t.Errorf("source %+v", s)
		}
	}
	if want := []string{"eng-tools/Tools", "engineering-docs/Directory", "finance-docs/Directory", "hr-docs/Directory", "system-prompt/Inline"}; !slices.Equal(names, want) {
		t.Errorf("sources %v, want %v", names, want)
	}
	if total != st.Chunks {
		t.Errorf("source chunks add up to %d, snapshot has %d", total, st.Chunks)
	}
}

func TestMetricsAfterQueries(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes")+`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: by-team}
spec:
  when: 'metadata["team"] == "platform"'
  sources: [{name: notes}]
`)
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	ts.query(engine.Request{Text: "deploy checklist"})
	ts.query(engine.Request{Text: "vacation", Metadata: map[string]string{"team": "platform"}})
	ts.do(http.MethodPost, "/v1/query", strings.NewReader(`{"bogus": true}`), nil)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"contextrouter_route_matches_total", []string{"route", "notes-v1"}, 2},
		{"contextrouter_route_matches_total", []string{"route", "by-team"}, 1},
		// The first query has no "team" key: the condition errors (no match).
		{"contextrouter_route_errors_total", []string{"route", "by-team"}, 1},
		{"contextrouter_route_errors_total", []string{"route", "notes-v1"}, 0},
		{"contextrouter_query_duration_seconds", nil, 3},
		{"contextrouter_http_requests_total", []string{"handler", "query", "code", "200"}, 2},
		{"contextrouter_http_requests_total", []string{"handler", "query", "code", "400"}, 1},
		{"contextrouter_snapshot_reloads_total", []string{"result", "failure"}, 0},
		{"contextrouter_snapshot_info", []string{"router", "default", "hash", ts.srv.Snapshot().Hash()}, 1},
		{"contextrouter_snapshot_chunks", nil, 1},
		{"contextrouter_ready", nil, 1},
	} {
		got, ok := ts.metric(c.name, c.labels...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if v, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "success"); v < 1 {
		t.Errorf("successful reloads counted: %v", v)
	}
	if _, ok := ts.metric("contextrouter_cache_hits_total"); ok {
		t.Error("cache metrics without a cache")
	}
	// The exposition over HTTP carries the Go and process collectors too.
	code, b := ts.get("/metrics")
	for _, want := range []string{"contextrouter_query_duration_seconds_bucket{le=", "go_goroutines ", "process_resident_memory_bytes ", `contextrouter_snapshot_last_reload_timestamp_seconds{result="success"}`} {
		if code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	// Prometheus naming conventions: help on every series, counters end in _total.
	mfs, err := ts.srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "contextrouter_") {
			continue
		}
		if mf.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
		if (mf.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: type %s and name disagree", name, mf.GetType())
		}
	}
}

type fixedCache struct{ hits, misses uint64 }

func (c fixedCache) Stats() (uint64, uint64) { return c.hits, c.misses }

func TestCacheMetrics(t *testing.T) {
	srv, err := New(Options{Paths: []string{quickstart}, Cache: fixedCache{hits: 7, misses: 3}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"contextrouter_cache_hits_total": 7, "contextrouter_cache_misses_total": 3} {
		if got, ok := gatherValue(t, srv, name); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
}

// --agent pins the identity: no agent means the pinned one, another is refused.
func TestPinnedAgent(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{quickstart}, Agent: "hr-assistant"})
	ts.waitReady()
	q := `"text": "How many vacation days do I get?"`
	resp := ts.query(engine.Request{Text: "How many vacation days do I get?"})
	if !slices.Contains(resp.MatchedRoutes, "hr-policies") || len(resp.DeniedSources) != 0 || len(resp.Chunks) < 2 {
		t.Fatalf("answer as the pinned agent: routes %v, denied %v, %d chunks", resp.MatchedRoutes, resp.DeniedSources, len(resp.Chunks))
	}
	// The same question from an unknown agent would be denied hr-docs.
	anon, err := ts.srv.Snapshot().Query(context.Background(), engine.Request{Text: "How many vacation days do I get?"})
	if err != nil || !slices.Contains(anon.DeniedSources, "hr-docs") {
		t.Fatalf("without pinning hr-docs should be denied: %+v %v", anon.DeniedSources, err)
	}
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{` + q + `, "agent": "hr-assistant"}`, 200, `"matched_routes":["always","hr-policies"]`},
		{`{` + q + `, "agent": "finance-analyst"}`, 403, `{"error":"agent \"finance-analyst\" is not allowed: this router identifies the caller as agent \"hr-assistant\""}`},
	} {
		code, b := ts.do(http.MethodPost, "/v1/query", strings.NewReader(tc.body), nil)
		if code != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s, want %d with %s", tc.body, code, b, tc.code, tc.want)
		}
	}
	if st := ts.status(); st.Auth != "agent" || st.Agent != "hr-assistant" {
		t.Errorf("status auth %q agent %q", st.Auth, st.Agent)
	}
}

func TestNewRequiresPaths(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "no manifest files") {
		t.Fatalf("New without paths: %v", err)
	}
}
