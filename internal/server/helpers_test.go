package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// testServer is a Server running on a real loopback listener.
type testServer struct {
	t      *testing.T
	srv    *Server
	url    string
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// flushAudit waits until the audit lines of the answers so far are written
// (the writer is asynchronous).
func (ts *testServer) flushAudit() {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !ts.srv.auditLog.flush(ctx) {
		ts.t.Fatalf("audit lines still queued after 10s: %+v", ts.srv.auditLog.status(time.Now()))
	}
}

// startServer runs a server for opts until the test ends. Unless set, the
// debounce is short so reload tests run fast.
func startServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Debounce == 0 {
		opts.Debounce = 20 * time.Millisecond
	}
	if opts.Engine.CacheDir == "" {
		opts.Engine.CacheDir = t.TempDir()
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{t: t, srv: srv, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { ts.done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		ts.stop()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return ts
}

// stop shuts the server down and returns Run's error.
func (ts *testServer) stop() error {
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- err
		return err
	case <-time.After(30 * time.Second):
		ts.t.Fatal("server did not stop within 30s")
		return nil
	}
}

// waitReady waits until /readyz answers 200.
func (ts *testServer) waitReady() {
	ts.t.Helper()
	eventually(ts.t, 30*time.Second, "server ready", func() bool {
		code, _ := ts.get("/readyz")
		return code == http.StatusOK
	})
}

func (ts *testServer) get(path string) (int, []byte) {
	ts.t.Helper()
	return ts.do(http.MethodGet, path, nil, nil)
}

func (ts *testServer) do(method, path string, body io.Reader, header http.Header) (int, []byte) {
	ts.t.Helper()
	resp, b := ts.request(method, path, body, header)
	return resp.StatusCode, b
}

// request is do with the whole response (its body already read).
func (ts *testServer) request(method, path string, body io.Reader, header http.Header) (*http.Response, []byte) {
	ts.t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp, b
}

// query posts a request and decodes a 200 answer.
func (ts *testServer) query(req engine.Request) engine.Response {
	ts.t.Helper()
	body, _ := json.Marshal(req)
	code, b := ts.do(http.MethodPost, "/v1/query", bytes.NewReader(body), nil)
	if code != http.StatusOK {
		ts.t.Fatalf("query %q: status %d: %s", req.Text, code, b)
	}
	var resp engine.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		ts.t.Fatalf("query %q: %v: %s", req.Text, err, b)
	}
	return resp
}

func (ts *testServer) status() Status {
	ts.t.Helper()
	code, b := ts.get("/v1/status")
	if code != http.StatusOK {
		ts.t.Fatalf("status: %d: %s", code, b)
	}
	var st Status
	if err := json.Unmarshal(b, &st); err != nil {
		ts.t.Fatalf("status: %v: %s", err, b)
	}
	return st
}

// metric returns the value of a counter or gauge (a histogram's sample
// count) whose labels include the given ones, and whether it exists.
func (ts *testServer) metric(name string, labels ...string) (float64, bool) {
	ts.t.Helper()
	return gatherValue(ts.t, ts.srv, name, labels...)
}

func gatherValue(t *testing.T, srv *Server, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return metricValue(mf.GetType(), m), true
		}
	}
	return 0, false
}

func metricValue(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// eventually polls cond every 10 ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeAtomic replaces a file's content in one rename, as editors and
// config tools do, so that a reload never reads half a file.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp-write"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configMapVolume lays out files the way the kubelet mounts a ConfigMap:
// the files live in a timestamped hidden folder, `..data` links to it, and
// each visible name links to `..data/<name>`. An update writes a new folder
// and swaps `..data` with one rename.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMapVolume(t *testing.T, files map[string]string) *configMapVolume {
	t.Helper()
	v := &configMapVolume{t: t, dir: filepath.Join(t.TempDir(), "bundle")}
	if err := os.Mkdir(v.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v.update(files)
	return v
}

func (v *configMapVolume) update(files map[string]string) {
	v.t.Helper()
	v.gen++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.gen%60, v.gen)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		v.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o644); err != nil {
			v.t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			v.t.Fatal(err)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			v.t.Fatal(err)
		}
	}
}

// inlineManifests is a configuration of inline sources, one route each,
// under the implied default router (defaultAccess Allow). Every chunk and
// route name carries marker, so an answer shows which configuration it
// came from.
func inlineManifests(marker string, sources ...string) string {
	var b strings.Builder
	for _, s := range sources {
		fmt.Fprintf(&b, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: %[1]s}
spec:
  type: Inline
  inline:
    title: %[1]s %[2]s
    content: "The %[1]s handbook, edition %[2]s: deploy checklists and vacation policy."
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: %[1]s-%[2]s}
spec:
  sources: [{name: %[1]s}]
---
`, s, marker)
	}
	return b.String()
}

// compileFiles compiles manifests the way the CLI does, for comparisons.
func compileFiles(t testing.TB, paths ...string) *engine.Snapshot {
	t.Helper()
	srv, err := New(Options{Paths: paths, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := srv.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := engine.Compile(context.Background(), cfg, engine.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// directoryServer serves a Directory source reading root/docs (deploys.md, edition d1) through the
// manifest root/config/router.yaml, which names it ../docs; it returns the server once edition d1
// answers, with the folder and the manifest.
func directoryServer(t *testing.T, root string) (ts *testServer, docs, manifest string) {
	t.Helper()
	docs = filepath.Join(root, "docs")
	writeAtomic(t, filepath.Join(docs, "deploys.md"), "# Deploys\n\nRoll back a deploy with the previous release, edition d1.\n")
	manifest = filepath.Join(root, "config", "router.yaml")
	writeAtomic(t, manifest, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {path: ../docs}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: docs}]
`)
	ts = startServer(t, Options{Paths: []string{manifest}, PollInterval: -1})
	ts.waitReady()
	ts.waitEdition("d1")
	return ts, docs, manifest
}
