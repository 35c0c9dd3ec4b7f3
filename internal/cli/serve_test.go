package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/memlimit"
)

// lockedBuffer is written by the server's goroutines while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type serving struct {
	url    string
	stderr *lockedBuffer
	stop   func() error
}

// servingAddr finds the address in a text or a JSON log.
var servingAddr = regexp.MustCompile(`msg=serving address=(127\.0\.0\.1:\d+)|"msg":"serving","address":"(127\.0\.0\.1:\d+)"`)

// startServe runs `contextrouter serve ARGS --listen 127.0.0.1:0` and waits
// until it is ready; the address comes from its log.
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &lockedBuffer{}
	cmd := NewRootCommand()
	cmd.SetArgs(append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "text", "--cache-dir", t.TempDir()}, args...))
	cmd.SetOut(io.Discard)
	cmd.SetErr(stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var once sync.Once
	var runErr error
	s := &serving{stderr: stderr, stop: func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = fmt.Errorf("serve did not stop within 30s")
			}
		})
		return runErr
	}}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := servingAddr.FindStringSubmatch(stderr.String()); m != nil && s.url == "" {
			s.url = "http://" + m[1] + m[2]
		}
		if s.url != "" {
			if resp, err := http.Get(s.url + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s
				}
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready within 30s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *serving) post(t *testing.T, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(s.url+"/v1/query", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (s *serving) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// serve answers like `query -o json`, reports its status and stops cleanly.
func TestServeQuickstart(t *testing.T) {
	s := startServe(t, "-f", quickstart)
	code, b := s.post(t, `{"text": "How do I roll back a deploy?", "agent": "eng-assistant", "metadata": {"department": "engineering"}}`)
	if code != http.StatusOK {
		t.Fatalf("query: %d %s", code, b)
	}
	var got engine.Response
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := queryJSON(t, "-a", "eng-assistant", "-m", "department=engineering", "How do I roll back a deploy?")
	got.EvaluationTimeMS, want.EvaluationTimeMS = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("serve and query -o json differ:\nserve %+v\nquery %+v", got, want)
	}

	var st struct {
		Router  string `json:"router"`
		Ready   bool   `json:"ready"`
		Sources []struct {
			Name string `json:"name"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(s.get(t, "/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Router != "acme" || !st.Ready || len(st.Sources) != 5 {
		t.Fatalf("status %+v", st)
	}
	if m := s.get(t, "/metrics"); !strings.Contains(m, `contextrouter_route_matches_total{route="engineering"} 1`) {
		t.Fatalf("metrics lack the route match:\n%s", m)
	}

	if err := s.stop(); err != nil {
		t.Fatalf("serve returned %v on shutdown", err)
	}
	if _, err := http.Get(s.url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
	for _, want := range []string{"msg=serving", `msg="snapshot serving"`, "router=acme", `msg="shutting down"`} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// httpAPI results are cached per the router's spec.cache and kept on disk
// under --cache-dir, where `contextrouter cache stats` finds them.
func TestServeCachesHTTPResults(t *testing.T) {
	var calls atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"title": "Runbook", "text": "Roll back a deploy with the previous release."}]`)
	}))
	defer api.Close()
	dir := t.TempDir()
	manifests := fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: cached}
spec:
  defaultAccess: Allow
  cache: {ttl: 1h, maxEntries: 10}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: kb}
spec:
  type: HTTPAPI
  httpAPI: {url: "%s/search?q={{query}}", textField: text, titleField: title}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: kb}]
`, api.URL)
	if err := os.WriteFile(filepath.Join(dir, "router.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	s := startServe(t, "-f", dir, "--cache-dir", cacheDir)
	for range 3 {
		if code, b := s.post(t, `{"text": "roll back"}`); code != 200 || !strings.Contains(string(b), "previous release") {
			t.Fatalf("query: %d %s", code, b)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the API was called %d times for one question", n)
	}
	m := s.get(t, "/metrics")
	for _, want := range []string{"contextrouter_cache_hits_total 2", "contextrouter_cache_misses_total 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, "cache", "stats", "-f", dir, "--cache-dir", cacheDir, "-o", "json")
	if code != 0 || !strings.Contains(out, `"entries": 1`) {
		t.Fatalf("cache stats after serve (exit %d): %s %s", code, out, stderr)
	}
}

// serve sets the Go runtime's soft memory limit: --memory-limit, else 90%
// of the container's limit the operator passes through the Downward API.
func TestServeMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "") // it would take precedence
	for _, tc := range []struct {
		name      string
		args      []string
		container string
		want      int64
		log       string
	}{
		{"flag", []string{"--memory-limit", "300Mi"}, "", 300 << 20, "from=--memory-limit"},
		{"flag beats the container", []string{"--memory-limit", "300Mi"}, "1073741824", 300 << 20, "from=--memory-limit"},
		{"container", nil, "1073741824", 1073741824 / 100 * 90, "from=$CONTEXTROUTER_CONTAINER_MEMORY_LIMIT container_bytes=1073741824"},
		{"flag 0 removes a limit", []string{"--memory-limit", "0"}, "1073741824", math.MaxInt64, `msg="no memory limit" from=--memory-limit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(memlimit.ContainerLimitEnv, tc.container)
			debug.SetMemoryLimit(math.MaxInt64)
			s := startServe(t, append([]string{"-f", quickstart}, tc.args...)...)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("runtime memory limit %d, want %d", got, tc.want)
			}
			if !strings.Contains(s.stderr.String(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, s.stderr.String())
			}
		})
	}
}

func TestServeFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, `required flag(s) "filename" not set`},
		{[]string{"serve", "-f", quickstart, "--log-format", "xml"}, `--log-format: "xml" is not json or text`},
		{[]string{"serve", "-f", quickstart, "--max-body-size", "lots"}, `--max-body-size: "lots" is not a positive size`},
		{[]string{"serve", "-f", quickstart, "--max-body-size", "0"}, `--max-body-size: "0" is not a positive size`},
		{[]string{"serve", "-f", quickstart, "--gc-headroom", "-1Mi"}, `--gc-headroom: "-1Mi" is not a size`},
		{[]string{"serve", "-f", quickstart, "--gc-headroom", "8Ei"}, `--gc-headroom: "8Ei" is more than 64Gi, the largest accepted`},
		{[]string{"serve", "-f", quickstart, "--gc-headroom", "65Gi"}, `--gc-headroom: "65Gi" is more than 64Gi, the largest accepted`},
		{[]string{"serve", "-f", quickstart, "--gc-headroom", "1e30"}, `--gc-headroom: "1e30" is more than 64Gi, the largest accepted`},
		{[]string{"serve", "-f", quickstart, "--memory-limit", "lots"}, `--memory-limit: "lots" is not a size such as 900Mi`},
		{[]string{"serve", "-f", quickstart, "--memory-limit", "-1Mi"}, `--memory-limit: "-1Mi" is not a size such as 900Mi`},
		{[]string{"serve", "-f", quickstart, "--query-timeout", "0s"}, "--query-timeout: 0s must be positive"},
		{[]string{"serve", "-f", quickstart, "--shutdown-delay", "-1s"}, "--shutdown-delay: -1s must not be negative"},
		{[]string{"serve", "-f", quickstart, "--listen", "127.0.0.1:99999"}, "--listen: listen tcp: address 99999: invalid port"},
		{[]string{"serve", "-f", quickstart, "extra"}, `unknown command "extra"`},
		{[]string{"serve", "-f", quickstart, "--session-dir", "serve_test.go"}, "session directory: mkdir serve_test.go: not a directory"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			_, stderr, code := run(t, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
		})
	}
}

// --gc-headroom takes sizes up to memlimit.MaxGCHeadroom (past it: TestServeFlagErrors).
func TestServeGCHeadroomBound(t *testing.T) {
	startServe(t, "-f", quickstart, "--gc-headroom", "64Gi")
}

// --allow-empty serves a manifest file that holds nothing: ready, with no route.
func TestServeAllowEmpty(t *testing.T) {
	file := filepath.Join(t.TempDir(), "router.yaml")
	write(t, file, "# nothing yet\n")
	s := startServe(t, "-f", file, "--allow-empty")
	var st struct {
		Ready           bool     `json:"ready"`
		Routes          []string `json:"routes"`
		LastReloadError string   `json:"last_reload_error"`
	}
	if err := json.Unmarshal([]byte(s.get(t, "/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || len(st.Routes) != 0 || st.LastReloadError != "" {
		t.Fatalf("status %+v: want ready with no route", st)
	}
}

// --session-dir keeps sessions across a restart of serve.
func TestServeSessions(t *testing.T) {
	dir := t.TempDir()
	call := func(s *serving, method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	s := startServe(t, "-f", quickstart, "--session-dir", dir)
	if code, out := call(s, "POST", "/v1/sessions/s1/items", `{"agent": "hr-assistant", "items": [{"id": "u1", "kind": "user_turn", "text": "How many vacation days do I have?"}]}`); code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	const pack = `{"agent": "hr-assistant", "phase": "answer"}`
	_, before := call(s, "POST", "/v1/sessions/s1/context", pack)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, "-f", quickstart, "--session-dir", dir)
	if code, after := call(s, "POST", "/v1/sessions/s1/context", pack); code != 200 || after != before || !strings.Contains(after, "user: How many vacation days do I have?") {
		t.Fatalf("after a restart: %d %s\nbefore: %s", code, after, before)
	}
}
