package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
)

// slowManifests is an inline source and n routes whose conditions take
// milliseconds each on a question at the text bound, within the cost limit,
// plus the two conditions of the CEL cost bypass (issue 7).
func slowManifests(n int) string {
	var b strings.Builder
	b.WriteString(inlineManifests("v1", "notes"))
	for i := range n {
		fmt.Fprintf(&b, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: slow-%d}
spec:
  when: 'text.split(" ").exists(w, w == "zz") || text.split(" ").exists(w, w == "yy")'
  sources: [{name: notes}]
---
`, i)
	}
	b.WriteString(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: words-in-tags}
spec:
  when: 'containsAnyWord(text, tags)'
  sources: [{name: notes}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: agent-search}
spec:
  when: '"x" in metadata && agent.indexOf(metadata["x"]) >= 0'
  sources: [{name: notes}]
`)
	return b.String()
}

// slowQuestion is a question at the text bound: 32,768 one-letter words.
var slowQuestion = strings.Repeat("a ", engine.MaxTextBytes/2)

func postQuery(t *testing.T, ts *testServer, req engine.Request) (int, string) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	code, b := ts.do(http.MethodPost, "/v1/query", bytes.NewReader(body), nil)
	var e errorBody
	if code != http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("status %d with a body that is not a JSON error: %v: %s", code, err, b)
		}
	}
	return code, e.Error
}

var timeoutMessage = regexp.MustCompile(`^query exceeded the 20ms timeout while evaluating the condition of route "slow-\d+"$`)

// A condition that is slow at the request bounds is stopped by
// --query-timeout: 504 with a clear error, one log line, one count.
func TestQueryTimeoutStopsConditions(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), slowManifests(20))
	ts := startServer(t, Options{Paths: []string{dir}, QueryTimeout: 20 * time.Millisecond})
	ts.waitReady()

	code, msg := postQuery(t, ts, engine.Request{Text: slowQuestion})
	if code != http.StatusGatewayTimeout || !timeoutMessage.MatchString(msg) {
		t.Fatalf("status %d, error %q; want 504 and %s", code, msg, timeoutMessage)
	}
	if v, _ := ts.metric("contextrouter_query_timeouts_total"); v != 1 {
		t.Errorf("contextrouter_query_timeouts_total = %v, want 1", v)
	}
	if v, _ := ts.metric("contextrouter_http_requests_total", "handler", "query", "code", "504"); v != 1 {
		t.Errorf(`contextrouter_http_requests_total{code="504"} = %v, want 1`, v)
	}
	if n := strings.Count(ts.logs.String(), `msg="query timed out"`); n != 1 {
		t.Errorf("%d log lines for the timeout, want 1:\n%s", n, grepLines(ts.logs.String(), "timed out"))
	}
	if !strings.Contains(ts.logs.String(), "timeout=20ms") {
		t.Errorf("the log line lacks the timeout:\n%s", grepLines(ts.logs.String(), "timed out"))
	}
	// A short question is still answered: the timeout is not the problem.
	if resp := ts.query(engine.Request{Text: "deploy checklist"}); len(resp.MatchedRoutes) == 0 {
		t.Errorf("short question: no route matched")
	}
}

// Four slow queries at once each get an answer; before, the connections
// were closed without one.
func TestParallelSlowQueriesAllAnswered(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), slowManifests(20))
	ts := startServer(t, Options{Paths: []string{dir}, QueryTimeout: 20 * time.Millisecond})
	ts.waitReady()

	const n = 4
	codes := make([]int, n)
	msgs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], msgs[i] = postQuery(t, ts, engine.Request{Text: slowQuestion})
		}()
	}
	wg.Wait()
	for i := range n {
		if codes[i] != http.StatusGatewayTimeout || !timeoutMessage.MatchString(msgs[i]) {
			t.Errorf("query %d: status %d, error %q; want 504 and %s", i, codes[i], msgs[i], timeoutMessage)
		}
	}
	if v, _ := ts.metric("contextrouter_query_timeouts_total"); v != n {
		t.Errorf("contextrouter_query_timeouts_total = %v, want %d", v, n)
	}
}

// The requests of the CEL cost bypass are refused with 400 naming the field
// and its limit, before any condition runs.
func TestOversizeRequestFieldsRefused(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), slowManifests(0))
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()

	huge := strings.Repeat("a ", 450000)
	for _, tt := range []struct {
		name string
		req  engine.Request
		want string
	}{
		{"huge tag", engine.Request{Text: "q", Tags: []string{huge[:576<<10]}}, "bad request: tags[0] is 589824 bytes; tags are limited to 256 bytes"},
		{"huge metadata value", engine.Request{Text: "q", Agent: "a", Metadata: map[string]string{"x": huge}}, `bad request: metadata["x"] is 900000 bytes; values are limited to 1024 bytes`},
		{"huge agent", engine.Request{Text: "q", Agent: huge[:576<<10], Metadata: map[string]string{"x": "a"}}, "bad request: agent is 589824 bytes; it is limited to 253 bytes"},
		{"huge metadata key", engine.Request{Text: "q", Metadata: map[string]string{huge[:1000]: "v"}}, `bad request: metadata key "a a a a a a a a a a a a a a a a "… is 1000 bytes; keys are limited to 256 bytes`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := postQuery(t, ts, tt.req)
			if code != http.StatusBadRequest || msg != tt.want {
				t.Fatalf("status %d, error %q; want 400 and %q", code, msg, tt.want)
			}
		})
	}
	// At the bounds, both conditions answer.
	resp := ts.query(engine.Request{Text: "vacation days", Agent: strings.Repeat("a", engine.MaxAgentBytes),
		Tags: []string{"days"}, Metadata: map[string]string{"x": strings.Repeat("a", engine.MaxMetadataValueBytes)}})
	if strings.Join(resp.MatchedRoutes, ",") != "notes-v1,words-in-tags" || len(resp.RouteErrors) != 0 {
		t.Errorf("matched %v, errors %v; want notes-v1,words-in-tags", resp.MatchedRoutes, resp.RouteErrors)
	}
}

// entityManifests is an inline source, a classifier with n entity patterns
// (types t0, t1, ...) and a route whose condition reads the entities of a
// request with metadata x.
func entityManifests(n int, pattern string) string {
	var b strings.Builder
	b.WriteString(inlineManifests("v1", "notes"))
	b.WriteString(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextClassifier
metadata: {name: runs}
spec:
  labels: [{name: runs, examples: [a run of letters]}]
  entities:
`)
	for i := range n {
		fmt.Fprintf(&b, "  - {type: t%d, pattern: '%s'}\n", i, pattern)
	}
	b.WriteString(`---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: by-entity}
spec:
  when: '"x" in metadata && entities.exists(e, e.type == "t0" && e.value == "zzz")'
  sources: [{name: notes}]
`)
	return b.String()
}

// Entity patterns stop at --query-timeout (issue 22: four patterns like
// (?:a|aa){1,995}b answered a 64 KiB question after 13.7 s under a 2 s
// timeout, 32 did not answer in 104 s): 504, counted, for a request's
// detect and for a condition that reads entities; and the pattern,
// past the instruction limit now, is refused by a reload that names file,
// object and field, the old configuration serving on.
func TestEntityPatternsStopAtQueryTimeout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "router.yaml")
	// 32 patterns at the instruction limit (997 instructions), which must read
	// the question as far as they may: the b they need is at its end.
	writeAtomic(t, path, entityManifests(v1alpha1.MaxEntityExtractors, `(?:a|aa){1,199}b`))
	ts := startServer(t, Options{Paths: []string{dir}, QueryTimeout: 50 * time.Millisecond})
	ts.waitReady()
	question := strings.Repeat("a", engine.MaxTextBytes-1) + "b"

	for i, tc := range []struct {
		req  engine.Request
		want string
	}{
		{engine.Request{Text: question, Detect: []string{"*"}}, "query exceeded the 50ms timeout while extracting the entities of detect"},
		{engine.Request{Text: question, Metadata: map[string]string{"x": "1"}}, `query exceeded the 50ms timeout while evaluating the condition of route "by-entity"`},
	} {
		code, msg := postQuery(t, ts, tc.req)
		if code != http.StatusGatewayTimeout || msg != tc.want {
			t.Fatalf("status %d, error %q; want 504 and %q", code, msg, tc.want)
		}
		if v, _ := ts.metric("contextrouter_query_timeouts_total"); v != float64(i+1) {
			t.Errorf("contextrouter_query_timeouts_total = %v, want %d", v, i+1)
		}
	}
	// A short question is answered with its entities.
	resp := ts.query(engine.Request{Text: "ab then aab", Detect: []string{"runs"}})
	if resp.Detection == nil || len(resp.Detection.Entities) != 2*v1alpha1.MaxEntityExtractors {
		t.Errorf("detection %+v, want ab and aab of each of the %d types", resp.Detection, v1alpha1.MaxEntityExtractors)
	}

	hash := ts.status().SnapshotHash
	writeAtomic(t, path, entityManifests(4, `(?:a|aa){1,995}b`))
	eventually(t, 10*time.Second, "the reload to fail", func() bool { return ts.status().LastReloadError != "" })
	st := ts.status()
	for _, w := range []string{path + `:22: ContextClassifier/runs: spec.entities[0].pattern: Invalid value: "(?:a|aa){1,995}b": compiles to 4977 instructions; patterns are limited to 1000`} {
		if !strings.Contains(st.LastReloadError, w) {
			t.Errorf("reload error %q does not contain %q", st.LastReloadError, w)
		}
	}
	if st.SnapshotHash != hash {
		t.Errorf("a refused reload replaced the serving configuration")
	}
}
