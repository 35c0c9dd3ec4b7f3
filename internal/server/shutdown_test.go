package server

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// slowSearch is an HTTP search API that answers after delay and reports
// each request it receives on started.
func slowSearch(t *testing.T, delay time.Duration) (url string, started chan struct{}) {
	started = make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"title": "Slow hit", "text": "Deploy checklist from the slow index."}]`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, started
}

func slowConfig(t *testing.T, url string) string {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: slow}
spec:
  type: HTTPAPI
  httpAPI: {url: "%s/search?q={{query}}", textField: text, titleField: title, timeout: 10s}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: slow}]
`, url))
	return dir
}

type result struct {
	code int
	body string
	err  error
}

func postAsync(url string) chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := http.Post(url+"/v1/query", "application/json", strings.NewReader(`{"text": "deploy"}`))
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- result{code: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

// Shutdown stops accepting connections and lets in-flight queries finish.
func TestShutdownFinishesInFlightQueries(t *testing.T) {
	url, started := slowSearch(t, 700*time.Millisecond)
	ts := startServer(t, Options{Paths: []string{slowConfig(t, url)}})
	ts.waitReady()

	inflight := postAsync(ts.url)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop() }()

	eventually(t, 5*time.Second, "the listener to close", func() bool {
		_, err := http.Get(ts.url + "/healthz")
		return err != nil
	})
	r := <-inflight
	if r.err != nil || r.code != 200 || !strings.Contains(r.body, "slow index") {
		t.Fatalf("in-flight query: %+v", r)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// A query that outlives ShutdownTimeout is cut off and Run says so.
func TestShutdownTimeout(t *testing.T) {
	url, started := slowSearch(t, 5*time.Second)
	ts := startServer(t, Options{Paths: []string{slowConfig(t, url)}, ShutdownTimeout: 200 * time.Millisecond})
	ts.waitReady()
	inflight := postAsync(ts.url)
	<-started
	begin := time.Now()
	err := ts.stop()
	if err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Fatalf("Run: %v, want the cut-off error", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("shutdown took %s with a 200ms timeout", took)
	}
	if r := <-inflight; r.err == nil && r.code == 200 {
		t.Fatalf("the cut-off query answered: %+v", r)
	}
}

// During ShutdownDelay the server still answers queries but fails /readyz,
// so load balancers stop sending before the listener closes.
func TestShutdownDelay(t *testing.T) {
	file := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes"))
	ts := startServer(t, Options{Paths: []string{file}, ShutdownDelay: 2 * time.Second})
	ts.waitReady()
	go ts.stop()
	eventually(t, 5*time.Second, "/readyz to fail", func() bool {
		code, _ := ts.get("/readyz")
		return code == http.StatusServiceUnavailable
	})
	code, b := ts.get("/readyz")
	if code != 503 || !strings.Contains(string(b), "shutting down") {
		t.Fatalf("/readyz while draining: %d %s", code, b)
	}
	if e := edition(ts.query(engine.Request{Text: "deploy checklist"})); e != "v1" {
		t.Fatalf("query while draining answered edition %q", e)
	}
	// The answer closes the connection, so that the client's next request
	// is not sent on it as the listener closes.
	resp, _ := ts.request(http.MethodPost, "/v1/query", strings.NewReader(`{"text": "deploy checklist"}`), nil)
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("query while draining: status %d, Connection %q; want 200 and the connection closed", resp.StatusCode, resp.Header.Get("Connection"))
	}
	if resp, _ := ts.request(http.MethodPost, "/v1/query", strings.NewReader(`{"text": "deploy checklist"}`), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("query on a new connection while draining: status %d", resp.StatusCode)
	}
	if err := ts.stop(); err != nil {
		t.Fatal(err)
	}
}
