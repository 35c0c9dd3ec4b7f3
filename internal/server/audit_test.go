package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/session"
)

// auditQuickstart copies the quickstart and gives its router the audit
// block (YAML under spec:, "" = none).
func auditQuickstart(t *testing.T, audit string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(quickstart)); err != nil {
		t.Fatal(err)
	}
	if audit != "" {
		f, err := os.OpenFile(filepath.Join(dir, "router.yaml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("  audit:\n" + audit); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	return dir
}

// auditRecord is an audit line as a log store reads it.
type auditRecord struct {
	Time        string  `json:"time"`
	Type        string  `json:"type"`
	RequestID   string  `json:"request_id"`
	Endpoint    string  `json:"endpoint"`
	Session     string  `json:"session"`
	Router      string  `json:"router"`
	Namespace   string  `json:"namespace"`
	Snapshot    string  `json:"snapshot"`
	Agent       string  `json:"agent"`
	Auth        string  `json:"auth"`
	Query       *string `json:"query"`
	QuerySHA256 *string `json:"query_sha256"`
	Routes      []string
	Sources     []string
	Chunks      []struct {
		Source, Path, SHA256 string
		Chunk                int
	}
	Tools         []string
	DeniedSources []string `json:"denied_sources"`
	FailedSources []string `json:"failed_sources"`
	Tokens        int
	LatencyMS     *float64 `json:"latency_ms"`
}

// readAudit parses every line of an audit file strictly: each must be one
// JSON object with exactly the documented keys.
func readAudit(t *testing.T, data []byte) []auditRecord {
	t.Helper()
	var out []auditRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var r auditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func readAuditFile(t *testing.T, path string) []auditRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readAudit(t, data)
}

// postAudited posts a query with headers and returns the decoded answer and the response header.
func postAudited(t *testing.T, ts *testServer, req engine.Request, header http.Header) (engine.Response, http.Header) {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, b := ts.request(http.MethodPost, "/v1/query", bytes.NewReader(body), header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query %q: status %d: %s", req.Text, resp.StatusCode, b)
	}
	var out engine.Response
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out, resp.Header
}

// TestAuditLog: every answered /v1/query, /v1/tools and MCP get_context is
// one line with the documented fields; chunk hashes are those of the
// delivered text; the question is hashed, never written; deliveries are
// counted per named agent and source, other agents as "other".
func TestAuditLog(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n    queryText: Hash\n")
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	ts := startServer(t, Options{Paths: []string{dir}, AuditLog: logPath})
	ts.waitReady()

	const question = "How many vacation days do I get? my password=hunter2"
	hr, hdr := postAudited(t, ts, engine.Request{Text: question, Agent: "hr-assistant"}, http.Header{RequestIDHeader: {"req-hr-1"}})
	if got := hdr.Get(RequestIDHeader); got != "req-hr-1" {
		t.Errorf("X-Request-Id answered %q, want the caller's req-hr-1", got)
	}
	stranger, hdr2 := postAudited(t, ts, engine.Request{Text: "What is the expense limit for travel?", Agent: "stranger"}, nil)
	genID := hdr2.Get(RequestIDHeader)
	if len(genID) < 16 {
		t.Errorf("a request without an id got X-Request-Id %q, want a generated one", genID)
	}
	// An id that could break a log line is replaced.
	_, hdr3 := postAudited(t, ts, engine.Request{Text: "vacation", Agent: "hr-assistant"}, http.Header{RequestIDHeader: {`bad"id`}})
	if got := hdr3.Get(RequestIDHeader); got == `bad"id` || got == "" {
		t.Errorf("X-Request-Id %q: a quote must be replaced by a generated id", got)
	}
	code, _ := ts.do(http.MethodPost, "/v1/tools", strings.NewReader(`{"text": "Why does the deploy fail?", "agent": "eng-assistant"}`), http.Header{RequestIDHeader: {"req-tools"}})
	if code != http.StatusOK {
		t.Fatalf("/v1/tools: %d", code)
	}
	cs, err := ts.mcpConnect(http.Header{RequestIDHeader: {"req-mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if res := getContext(t, cs, map[string]any{"text": "vacation days", "agent": "hr-assistant"}); res.IsError {
		t.Fatalf("get_context: %s", resultText(res))
	}
	// Refused and failed requests deliver nothing.
	if code, _ := ts.do(http.MethodPost, "/v1/query", strings.NewReader(`{"text": ""}`), nil); code != http.StatusBadRequest {
		t.Fatalf("empty question: %d", code)
	}

	ts.flushAudit()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("hunter2")) || bytes.Contains(data, []byte("vacation")) {
		t.Errorf("the audit log holds question text under queryText: Hash:\n%s", data)
	}
	recs := readAudit(t, data)
	var endpoints []string
	for _, r := range recs {
		endpoints = append(endpoints, r.Endpoint+"/"+r.RequestID)
	}
	want := []string{"query/req-hr-1", "query/" + genID, "query/" + hdr3.Get(RequestIDHeader), "tools/req-tools", "mcp:get_context/req-mcp"}
	if !slices.Equal(endpoints, want) {
		t.Fatalf("audit lines %v, want %v", endpoints, want)
	}

	r := recs[0]
	sum := sha256.Sum256([]byte(question))
	snap := ts.srv.Snapshot()
	if r.Type != AuditRecordType || r.Router != "acme" || r.Snapshot != snap.Hash() || r.Agent != "hr-assistant" || r.Auth != "none" ||
		r.Query != nil || r.QuerySHA256 == nil || *r.QuerySHA256 != hex.EncodeToString(sum[:]) || r.Time == "" || r.LatencyMS == nil || *r.LatencyMS < 0 {
		t.Errorf("record fields: %+v", r)
	}
	if !slices.Equal(r.Routes, hr.MatchedRoutes) || r.Tokens != hr.TotalTokens || !slices.Equal(r.DeniedSources, hr.DeniedSources) {
		t.Errorf("routes %v tokens %d denied %v; the answer had %v, %d, %v", r.Routes, r.Tokens, r.DeniedSources, hr.MatchedRoutes, hr.TotalTokens, hr.DeniedSources)
	}
	if len(r.Chunks) != len(hr.Chunks) || len(hr.Chunks) < 2 {
		t.Fatalf("%d chunk entries for %d delivered chunks", len(r.Chunks), len(hr.Chunks))
	}
	srcs := map[string]bool{}
	for i, c := range hr.Chunks {
		full := sha256.Sum256([]byte(c.Content))
		e := r.Chunks[i]
		if e.Source != c.Source || e.Path != c.Path || e.Chunk != c.Metadata.Chunk || e.SHA256 != hex.EncodeToString(full[:8]) || e.SHA256 != ChunkHash(c.Content) {
			t.Errorf("chunk %d: %+v, delivered %s %s #%d", i, e, c.Source, c.Path, c.Metadata.Chunk)
		}
		srcs[c.Source] = true
	}
	if want := slices.Sorted(maps.Keys(srcs)); !slices.Equal(r.Sources, want) {
		t.Errorf("sources %v, want %v", r.Sources, want)
	}
	if s := recs[1]; s.Agent != "stranger" || len(s.DeniedSources) == 0 || len(s.Chunks) != len(stranger.Chunks) {
		t.Errorf("stranger's record: %+v; answer denied %v", s, stranger.DeniedSources)
	}
	if tr := recs[3]; len(tr.Tools) == 0 || len(tr.Chunks) != 0 {
		t.Errorf("tools record: %+v, want tool ids and no chunks", tr)
	}

	// deliveries_total: hr-assistant is named by a permission; stranger is "other".
	for _, tc := range []struct {
		agent, source string
		want          float64
	}{
		{"hr-assistant", "hr-docs", 3}, // two queries and get_context
		{"hr-assistant", "system-prompt", 3},
		{"other", "system-prompt", 1},
	} {
		if got, _ := ts.metric("contextrouter_deliveries_total", "agent", tc.agent, "source", tc.source); got != tc.want {
			t.Errorf("deliveries_total{agent=%q,source=%q} = %v, want %v", tc.agent, tc.source, got, tc.want)
		}
	}
	if _, ok := ts.metric("contextrouter_deliveries_total", "agent", "stranger"); ok {
		t.Error("an agent no permission names has a series of its own")
	}
	if got, _ := ts.metric("contextrouter_audit_records_total"); got != 5 {
		t.Errorf("audit_records_total = %v, want 5", got)
	}
}

// TestAuditQueryText: Omit (the default) writes nothing of the question,
// Hash its SHA-256, Full the text with secrets masked.
func TestAuditQueryText(t *testing.T) {
	const question = "Why does https://ops:s3cretpw@git.example.com fail with token=ghp_0123456789abcdefghij on deploy?"
	for _, tc := range []struct {
		name, block string
		check       func(r auditRecord) string
	}{
		{"default is Omit", "    enabled: true\n", func(r auditRecord) string {
			if r.Query != nil || r.QuerySHA256 != nil {
				return "the question is recorded"
			}
			return ""
		}},
		{"Full masks secrets", "    enabled: true\n    queryText: Full\n", func(r auditRecord) string {
			if r.Query == nil || !strings.Contains(*r.Query, "deploy") || !strings.Contains(*r.Query, "https://***@git.example.com") || !strings.Contains(*r.Query, "token=***") {
				return fmt.Sprintf("query %v: want the text with its secrets masked", r.Query)
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := auditQuickstart(t, tc.block)
			var out syncBuffer
			ts := startServer(t, Options{Paths: []string{dir}, AuditOutput: &out})
			ts.waitReady()
			ts.query(engine.Request{Text: question, Agent: "eng-assistant"})
			ts.flushAudit()
			data := []byte(out.String())
			for _, secret := range []string{"s3cretpw", "ghp_0123456789abcdefghij", "ops:"} {
				if bytes.Contains(data, []byte(secret)) {
					t.Errorf("the audit line holds %q: %s", secret, data)
				}
			}
			recs := readAudit(t, data)
			if len(recs) != 1 {
				t.Fatalf("%d lines on standard output, want 1", len(recs))
			}
			if msg := tc.check(recs[0]); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// TestAuditSampling: with sampleRate 0.25 the deliveries recorded are
// exactly those whose request id's HMAC-SHA-256 under the server's key
// (first 8 bytes) falls in the first quarter. The ids are chosen so that a
// plain SHA-256 of the id never samples them, as a caller who knows the rule
// would pick them: they are still recorded at the rate. Every delivery is
// counted.
func TestAuditSampling(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n    sampleRate: \"0.25\"\n")
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	key := []byte("fixed test key of audit sampling")
	ts := startServer(t, Options{Paths: []string{dir}, AuditLog: logPath, auditSampleKey: key})
	ts.waitReady()
	const n = 200
	threshold := 0.25 * math.Exp2(64)
	var want []string
	sent := 0
	for i := 0; sent < n; i++ {
		id := fmt.Sprintf("sample-%04d", i)
		if sum := sha256.Sum256([]byte(id)); float64(binary.BigEndian.Uint64(sum[:8])) < threshold {
			continue // a caller who knew a plain hash decides would not send this id
		}
		sent++
		postAudited(t, ts, engine.Request{Text: "vacation days", Agent: "hr-assistant"}, http.Header{RequestIDHeader: {id}})
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id))
		if float64(binary.BigEndian.Uint64(m.Sum(nil)[:8])) < threshold {
			want = append(want, id)
		}
	}
	ts.flushAudit()
	var got []string
	for _, r := range readAuditFile(t, logPath) {
		got = append(got, r.RequestID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %d ids %v\nwant %d %v", len(got), got, len(want), want)
	}
	// 0.25 × 200 = 50, standard deviation ≈ 6: [25, 100] holds unless the
	// choice follows the id alone.
	if len(got) < n/8 || len(got) > n/2 {
		t.Errorf("%d of %d recorded at rate 0.25", len(got), n)
	}
	if v, _ := ts.metric("contextrouter_deliveries_total", "agent", "hr-assistant", "source", "hr-docs"); v != n {
		t.Errorf("deliveries_total = %v, want %d: sampling must not change the count", v, n)
	}
	if v, _ := ts.metric("contextrouter_audit_records_total"); int(v) != len(got) {
		t.Errorf("audit_records_total = %v, want %d", v, len(got))
	}
}

// TestAuditSampleKey: without an injected key each server draws its own, so
// a request id's fate in one process tells nothing about another.
func TestAuditSampleKey(t *testing.T) {
	newServer := func() *Server {
		s, err := New(Options{Paths: []string{"../../examples/quickstart"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.auditLog.close(context.Background())
			s.closeSessionStore()
		})
		return s
	}
	a, b := newServer(), newServer()
	if a.auditMACs.Sum("request-1") == b.auditMACs.Sum("request-1") {
		t.Fatal("two servers sample a request id under the same key")
	}
}

// TestAuditOff: without spec.audit and --audit-log nothing is written and no
// request id is answered, but deliveries are counted; --audit-log turns the
// log on for a router that does not enable it.
func TestAuditOff(t *testing.T) {
	dir := auditQuickstart(t, "")
	var out syncBuffer
	ts := startServer(t, Options{Paths: []string{dir}, AuditOutput: &out})
	ts.waitReady()
	_, hdr := postAudited(t, ts, engine.Request{Text: "vacation days", Agent: "hr-assistant"}, http.Header{RequestIDHeader: {"r1"}})
	ts.flushAudit()
	if out.String() != "" || hdr.Get(RequestIDHeader) != "" {
		t.Errorf("audit off: wrote %q, answered X-Request-Id %q", out.String(), hdr.Get(RequestIDHeader))
	}
	if v, _ := ts.metric("contextrouter_deliveries_total", "agent", "hr-assistant", "source", "hr-docs"); v != 1 {
		t.Errorf("deliveries_total = %v, want 1", v)
	}

	var out2 syncBuffer
	ts2 := startServer(t, Options{Paths: []string{dir}, AuditLog: "-", AuditOutput: &out2})
	ts2.waitReady()
	ts2.query(engine.Request{Text: "vacation days", Agent: "hr-assistant"})
	ts2.flushAudit()
	if recs := readAudit(t, []byte(out2.String())); len(recs) != 1 || recs[0].Agent != "hr-assistant" {
		t.Errorf("--audit-log -: %+v, want one line", recs)
	}
}

// TestAuditWriteFailure: a write that fails never fails the query; it is
// counted and logged once; reopening (SIGHUP after rotation) recovers, and a
// reopen that fails keeps the old file.
func TestAuditWriteFailure(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n")
	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "audit.jsonl")
	ts := startServer(t, Options{Paths: []string{dir}, AuditLog: logPath})
	ts.waitReady()
	ask := func() {
		t.Helper()
		if resp := ts.query(engine.Request{Text: "vacation days", Agent: "hr-assistant"}); len(resp.Chunks) == 0 {
			t.Fatal("no chunks: the query must answer whatever the audit log does")
		}
	}
	ask()
	// The first line must be written before the descriptor goes bad: the
	// writer is asynchronous.
	ts.flushAudit()
	// The file descriptor goes bad under the server.
	ts.srv.auditLog.mu.Lock()
	_ = ts.srv.auditLog.f.Close()
	ts.srv.auditLog.mu.Unlock()
	ask()
	ask()
	ts.flushAudit()
	if v, _ := ts.metric("contextrouter_audit_write_errors_total"); v != 2 {
		t.Errorf("audit_write_errors_total = %v, want 2", v)
	}
	if n := strings.Count(ts.logs.String(), "cannot write the audit log"); n != 1 {
		t.Errorf("the write failure was logged %d times, want once:\n%s", n, ts.logs.String())
	}

	// Rotation: the file is moved away, the server reopens a new one.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.ReopenAuditLog(); err != nil {
		t.Fatal(err)
	}
	ask()
	ts.flushAudit()
	if n := len(readAuditFile(t, logPath+".1")); n != 1 {
		t.Errorf("rotated file holds %d lines, want 1 (before the failure)", n)
	}
	if n := len(readAuditFile(t, logPath)); n != 1 {
		t.Errorf("new file holds %d lines, want 1", n)
	}

	// A reopen that cannot create the file keeps writing to the old one.
	if err := os.RemoveAll(logDir); err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.ReopenAuditLog(); err == nil || !strings.Contains(err.Error(), "--audit-log") {
		t.Errorf("reopen into a removed folder: %v, want an error naming --audit-log", err)
	}
	ask()
	ts.flushAudit()
	if v, _ := ts.metric("contextrouter_audit_write_errors_total"); v != 2 {
		t.Errorf("audit_write_errors_total = %v after the failed reopen, want still 2 (the open file takes the line)", v)
	}
}

// TestAuditLogOpenError: a file that cannot be opened stops the server from
// starting, with a message naming the flag and the path.
func TestAuditLogOpenError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "audit.jsonl")
	_, err := New(Options{Paths: []string{quickstart}, AuditLog: path})
	if err == nil || !strings.Contains(err.Error(), "--audit-log") || !strings.Contains(err.Error(), path) {
		t.Fatalf("New = %v, want an error naming --audit-log and %s", err, path)
	}
}

// TestAuditSessionPack: a session pack is a delivery too: one line naming the
// session, with the pack's knowledge chunks by hash and its query's routes.
func TestAuditSessionPack(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n")
	var out syncBuffer
	ts := startServer(t, Options{Paths: []string{dir}, AuditOutput: &out})
	ts.waitReady()
	const hr = "hr-assistant"
	ts.mustCall(200, "POST", "/v1/sessions/pto-9/items", sessionItems{Agent: hr, Items: []session.Item{
		{ID: "u1", Kind: session.KindUserTurn, Text: "How many vacation days do I have left?"},
	}}, nil)
	ts.flushAudit()
	if out.String() != "" {
		t.Fatalf("writing session items is not a delivery, but was recorded: %s", out.String())
	}
	body := ts.mustCall(200, "POST", "/v1/sessions/pto-9/context", map[string]any{"phase": "interpret", "agent": hr, "query": "Can I carry vacation days over?"},
		http.Header{RequestIDHeader: {"pack-1"}})
	p := decodePack(t, body)
	ts.flushAudit()
	recs := readAudit(t, []byte(out.String()))
	if len(recs) != 1 {
		t.Fatalf("%d lines, want 1: %s", len(recs), out.String())
	}
	r := recs[0]
	if r.Endpoint != "session" || r.Session != "pto-9" || r.RequestID != "pack-1" || r.Agent != hr || r.Tokens != p.TotalTokens || len(r.Routes) == 0 {
		t.Errorf("record %+v", r)
	}
	if len(r.Chunks) != len(p.Chunks) || len(p.Chunks) == 0 {
		t.Fatalf("%d chunk entries for %d pack chunks", len(r.Chunks), len(p.Chunks))
	}
	for i, c := range p.Chunks {
		if r.Chunks[i].SHA256 != ChunkHash(c.Content) {
			t.Errorf("chunk %d hash %s, want %s", i, r.Chunks[i].SHA256, ChunkHash(c.Content))
		}
	}
	if strings.Contains(out.String(), "vacation") {
		t.Errorf("the record holds the question or the session's text: %s", out.String())
	}
}

// TestAuditStalledSink: a sink nobody reads (a pipe, as `--audit-log -`
// into a stuck log shipper) never holds up an answer. Lines queue up to the
// bound, then are dropped and counted; status and metrics say the sink is
// stalled while /readyz stays ready (the answers are right; only their
// record is at risk). Once the pipe is read again the queued lines arrive
// whole and the stall clears. Every delivery is written or dropped.
func TestAuditStalledSink(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	const limit = 16 << 10
	ts := startServer(t, Options{Paths: []string{dir}, AuditLog: "-", AuditOutput: w, auditQueueBytes: limit, auditStallAfter: 20 * time.Millisecond})
	ts.waitReady()
	if a := ts.status().Audit; a == nil || a.Stalled || a.QueueLimitBytes != limit || a.Dropped != 0 {
		t.Fatalf("status.audit of an idle writer: %+v", a)
	}

	// A query that waited for the sink would hang: the client gives up.
	client := &http.Client{Timeout: 10 * time.Second}
	ask := func(id string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/query", strings.NewReader(`{"text": "vacation days", "agent": "hr-assistant"}`))
		req.Header.Set(RequestIDHeader, id)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("query %s while the audit sink is stalled: %v", id, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("query %s: status %d", id, resp.StatusCode)
		}
	}
	// The pipe takes 32 lines of 1.5 KB (a write per line), the queue 11.
	sent := 0
	for ; ts.status().Audit.Dropped == 0; sent++ {
		if sent == 3000 {
			t.Fatalf("no audit line dropped after %d queries into a pipe nobody reads: %+v", sent, ts.status().Audit)
		}
		ask(fmt.Sprintf("stalled-%04d", sent))
	}
	// The write in progress is stalled once 20ms pass.
	eventually(t, 10*time.Second, "the stall reported", func() bool {
		ask(fmt.Sprintf("stalled-%04d", sent))
		sent++
		return ts.status().Audit.Stalled
	})
	a := ts.status().Audit
	if !a.Stalled || a.StalledSince == nil || a.QueuedBytes > limit || a.QueuedBytes == 0 || a.Dropped == 0 {
		t.Errorf("status.audit with a stalled sink: %+v; want stalled, lines queued within the %d-byte limit and dropped", a, limit)
	}
	if v, _ := ts.metric("contextrouter_audit_sink_stalled"); v != 1 {
		t.Errorf("audit_sink_stalled = %v, want 1", v)
	}
	if v, _ := ts.metric("contextrouter_audit_dropped_total"); v != float64(a.Dropped) {
		t.Errorf("audit_dropped_total = %v, status says %d", v, a.Dropped)
	}
	if code, b := ts.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with a stalled audit sink: %d %s; the router still answers", code, b)
	}
	// The stall is logged by the next delivery that finds it.
	eventually(t, 10*time.Second, "the stall logged", func() bool {
		ask(fmt.Sprintf("stalled-%04d", sent))
		sent++
		return strings.Contains(ts.logs.String(), "audit log sink stalled")
	})
	// Once per episode, not per line. (A pipe may take a few more bytes now
	// and then, so the queue can empty, and an episode end, while nobody reads.)
	episodes := strings.Count(ts.logs.String(), "audit log sink caught up") + 1
	for _, msg := range []string{"audit log sink stalled", "audit log queue full"} {
		if n := strings.Count(ts.logs.String(), msg); n < 1 || n > episodes {
			t.Errorf("%q logged %d times in %d episodes", msg, n, episodes)
		}
	}

	// Someone reads the pipe again.
	var got syncBuffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&got, r)
		close(copied)
	}()
	ts.flushAudit()
	last := fmt.Sprintf("stalled-%04d", sent)
	ask(last)
	sent++
	ts.flushAudit()
	a = ts.status().Audit
	if a.Stalled || a.QueuedBytes != 0 {
		t.Errorf("status.audit after the sink recovered: %+v", a)
	}
	if a.Written+a.Dropped != uint64(sent) || a.WriteErrors != 0 {
		t.Errorf("%d written + %d dropped (%d errors), want the %d deliveries", a.Written, a.Dropped, a.WriteErrors, sent)
	}
	if n := strings.Count(ts.logs.String(), "audit log sink caught up"); n < 1 || n > episodes {
		t.Errorf("the recovery was logged %d times in %d episodes", n, episodes)
	}
	ts.stop() // closes the writer; the pipe's writing end is ours
	_ = w.Close()
	<-copied
	recs := readAudit(t, []byte(got.String()))
	if uint64(len(recs)) != a.Written || recs[len(recs)-1].RequestID != last {
		t.Fatalf("%d whole lines read from the pipe, the writer counts %d written; last %+v", len(recs), a.Written, recs[len(recs)-1])
	}
	// Lines arrive in the order of the answers, each once.
	for i := 1; i < len(recs); i++ {
		if recs[i].RequestID <= recs[i-1].RequestID {
			t.Fatalf("line %d is %s after %s", i, recs[i].RequestID, recs[i-1].RequestID)
		}
	}
}

// TestAuditShutdown: stopping the server writes every queued line before
// the file is closed; a sink that takes nothing gets a bounded time, after
// which the lines still queued are counted as dropped and logged, and the
// server stops anyway.
func TestAuditShutdown(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n")
	t.Run("flushed", func(t *testing.T) {
		logPath := filepath.Join(t.TempDir(), "audit.jsonl")
		ts := startServer(t, Options{Paths: []string{dir}, AuditLog: logPath})
		ts.waitReady()
		for i := range 20 {
			postAudited(t, ts, engine.Request{Text: "vacation days", Agent: "hr-assistant"}, http.Header{RequestIDHeader: {fmt.Sprintf("last-%02d", i)}})
		}
		if err := ts.stop(); err != nil {
			t.Fatal(err)
		}
		recs := readAuditFile(t, logPath)
		if len(recs) != 20 || recs[19].RequestID != "last-19" {
			t.Fatalf("%d lines in the file after shutdown, want the 20 answered", len(recs))
		}
	})
	t.Run("stalled sink", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
		ts := startServer(t, Options{Paths: []string{dir}, AuditLog: "-", AuditOutput: w, auditFlushTimeout: 50 * time.Millisecond})
		ts.waitReady()
		// The pipe takes 32 to 43 lines; the rest wait in the queue.
		const n = 80
		for i := range n {
			postAudited(t, ts, engine.Request{Text: "vacation days", Agent: "hr-assistant"}, http.Header{RequestIDHeader: {fmt.Sprintf("s-%02d", i)}})
		}
		if err := ts.stop(); err != nil {
			t.Fatal(err)
		}
		a := ts.srv.auditLog.status(time.Now())
		if a.Dropped == 0 || a.Written+a.Dropped != n || !strings.Contains(ts.logs.String(), "lines not written at shutdown") {
			t.Errorf("after a stalled shutdown: %+v; want the queued lines dropped and logged", a)
		}
		// Answers after shutdown (a request cut off by the timeout) are dropped, not written.
		ts.srv.auditLog.enqueue([]byte("{}\n"))
		if b := ts.srv.auditLog.status(time.Now()); b.Dropped != a.Dropped+1 {
			t.Errorf("a line after close: dropped %d, want %d", b.Dropped, a.Dropped+1)
		}
	})
}
