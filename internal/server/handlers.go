package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// routes builds the HTTP handler. Paths are matched exactly; every error is
// a JSON object {"error": "..."}.
func (s *Server) routes() http.Handler {
	s.plainMetrics = promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{
		ErrorLog: errorLogger{s}, Registry: s.metrics.reg,
	})
	type route struct {
		method  string
		counter string
		h       http.HandlerFunc
	}
	table := map[string]route{
		"/v1/query":      {http.MethodPost, "query", s.handleQuery},
		"/v1/tools":      {http.MethodPost, "tools", s.handleTools},
		"/v1/tools/tree": {http.MethodGet, "tools_tree", s.handleToolTree},
		outcomesPath:     {"", "tools_outcomes", s.handleOutcomes},
		"/v1/status":     {http.MethodGet, "status", s.handleStatus},
		"/healthz":       {http.MethodGet, "healthz", s.handleHealthz},
		"/readyz":        {http.MethodGet, "readyz", s.handleReadyz},
		"/metrics":       {http.MethodGet, "metrics", s.handleMetrics},
		// The MCP transport uses POST, and GET and DELETE for sessions.
		"/mcp": {"", "mcp", s.mcp.ServeHTTP},
	}
	// One counter per handler and status code, resolved on first use.
	var counters sync.Map
	count := func(handler string, code int) {
		key := handler + " " + strconv.Itoa(code)
		c, ok := counters.Load(key)
		if !ok {
			c, _ = counters.LoadOrStore(key, s.metrics.requests.WithLabelValues(handler, strconv.Itoa(code)))
		}
		c.(prometheus.Counter).Inc()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := table[r.URL.Path]
		if counter, h, session := s.sessionRoute(r.URL.Path); !ok && session {
			rt, ok = route{"", counter, h}, true
		}
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: the API serves POST /v1/query, POST /v1/tools, GET /v1/tools/tree, GET /v1/status, /v1/sessions/{id}/…, GET /v1/artifacts/{ref}, /mcp, /healthz, /readyz and /metrics", r.URL.Path))
			count("other", http.StatusNotFound)
			return
		}
		rw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if !rw.wrote {
					writeError(rw, http.StatusInternalServerError, "internal error")
				}
			}
			count(rt.counter, rw.code)
		}()
		allowed := rt.method == "" || r.Method == rt.method || (rt.method == http.MethodGet && r.Method == http.MethodHead)
		if !allowed {
			rw.Header().Set("Allow", rt.method)
			writeError(rw, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s: use %s", r.Method, r.URL.Path, rt.method))
			return
		}
		rt.h(rw, r)
	})
}

// statusWriter records the status code for the request counter.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: msg}, false)
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer keeps one huge response from pinning its buffer.
const maxPooledBuffer = 1 << 20

func writeJSON(w http.ResponseWriter, code int, v any, indent bool) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBuffer {
			bufPool.Put(buf)
		}
	}()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		// Only unsupported values fail, which the response types do not hold.
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"internal error: encoding the response"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// handleQuery answers POST /v1/query (API.md "Query API").
func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.metrics.queryDuration.Observe(time.Since(start).Seconds()) }()

	// The state is loaded once: the whole query runs on one snapshot.
	st, req, ok := s.readQuery(w, r)
	if !ok {
		return
	}
	resp, herr := s.runQuery(r.Context(), st, req, start)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	d := DeliveryFromResponse("query", req.Text, req.Agent, resp)
	id := s.deliver(r.Header, st, &d, start)
	if len(resp.Tools) > 0 {
		id = s.answerID(r.Header, id, req.Agent, req.Text, len(resp.Tools))
	}
	bp := respPool.Get().(*[]byte)
	b := appendResponse((*bp)[:0], resp)
	h := w.Header()
	if id != "" {
		h.Set(RequestIDHeader, id)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledBuffer {
		*bp = b[:0]
		respPool.Put(bp)
	}
}

// readQuery settles the serving state, the caller's identity and the request
// of a query (POST /v1/query, POST /v1/tools); ok is false when it answered
// a refusal.
func (s *Server) readQuery(w http.ResponseWriter, r *http.Request) (st *state, req engine.Request, ok bool) {
	st = s.state.Load()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
		return nil, req, false
	}
	established, herr := s.identify(r.Context(), r, st)
	if herr != nil {
		writeAuthError(w, herr)
		return nil, req, false
	}
	req, herr = decodeRequest(w, r, s.opts.MaxBodyBytes)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return nil, req, false
	}
	req.Agent, herr = reconcileAgent(established, req.Agent)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return nil, req, false
	}
	return st, req, true
}

// runQuery answers a request whose agent is settled, under the query
// timeout, on st's snapshot (POST /v1/query, MCP get_context).
func (s *Server) runQuery(ctx context.Context, st *state, req engine.Request, start time.Time) (*engine.Response, *httpError) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	req.Learned = s.learnedFor(ctx, st, req.Agent)
	resp, err := st.snap.Query(ctx, req)
	if err != nil {
		return nil, s.queryError(err, start)
	}
	s.observeResponse(st, resp)
	return resp, nil
}

// observeResponse counts what a query's response reports: routes, sources,
// tools and classifiers.
func (s *Server) observeResponse(st *state, resp *engine.Response) {
	st.counters.observe(resp.MatchedRoutes, resp.RouteErrors, resp.FailedSources)
	st.counters.observeRoutes(resp.RouteMatches, time.Duration(resp.EvaluationTimeMS*float64(time.Millisecond)))
	for _, f := range resp.RankingFailures {
		s.metrics.embeddingErrors.WithLabelValues(f.Endpoint, f.Reason).Inc()
	}
	if len(resp.Tools) > 0 || resp.Stats.Tools.Reason != engine.ToolsNoToolSource {
		s.metrics.toolsReturned.Observe(float64(len(resp.Tools)))
	}
	if d := resp.Detection; d != nil {
		for name, c := range d.Classifiers {
			if o := st.counters.classifierConfidence[name]; o != nil {
				o.Observe(c.Confidence)
			}
		}
	}
}

// runFindTools shortlists the tools of a request whose agent is settled
// (POST /v1/tools, MCP find_tools).
func (s *Server) runFindTools(ctx context.Context, st *state, req engine.Request, start time.Time) (*engine.ToolsResponse, *httpError) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	req.Learned = s.learnedFor(ctx, st, req.Agent)
	resp, err := st.snap.FindTools(ctx, req)
	if err != nil {
		return nil, s.queryError(err, start)
	}
	st.counters.observe(resp.MatchedRoutes, resp.RouteErrors, resp.FailedSources)
	s.metrics.toolsReturned.Observe(float64(len(resp.Tools)))
	return resp, nil
}

// queryError is the one place the HTTP API and the MCP endpoint turn a
// query's failure into a status and a message.
func (s *Server) queryError(err error, start time.Time) *httpError {
	var stopped *engine.StoppedError
	switch {
	case errors.Is(err, engine.ErrBadRequest):
		return &httpError{code: http.StatusBadRequest, msg: err.Error()}
	case errors.As(err, &stopped) && errors.Is(err, context.DeadlineExceeded):
		// Like gRPC's DEADLINE_EXCEEDED over HTTP; 503 stays "not ready".
		s.metrics.queryTimeouts.Inc()
		s.log.Warn("query timed out", "timeout", s.opts.QueryTimeout.String(), "route", stopped.Route, "elapsed", time.Since(start).String())
		return &httpError{code: http.StatusGatewayTimeout, msg: stopped.TimeoutMessage(s.opts.QueryTimeout)}
	case errors.As(err, &stopped):
		// The client went away; nobody reads the answer.
		s.log.Debug("query canceled", "route", stopped.Route, "error", err.Error())
		return &httpError{code: http.StatusServiceUnavailable, msg: "query canceled: " + err.Error()}
	}
	s.log.Error("query failed", "error", err.Error())
	return &httpError{code: http.StatusInternalServerError, msg: "internal error"}
}

// handleTools answers POST /v1/tools: the tool cards of a query, no
// documents (api.md §10.5).
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st, req, ok := s.readQuery(w, r)
	if !ok {
		return
	}
	resp, herr := s.runFindTools(r.Context(), st, req, start)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	d := toolsDelivery("tools", req, resp)
	w.Header().Set(RequestIDHeader, s.answerID(r.Header, s.deliver(r.Header, st, &d, start), req.Agent, req.Text, len(resp.Tools)))
	writeJSON(w, http.StatusOK, resp, false)
}

// toolTree is the body of GET /v1/tools/tree.
type toolTree struct {
	Root engine.ToolNode `json:"root"`
}

// handleToolTree answers GET /v1/tools/tree?agent=A: the choice graph of
// the tools the agent may use. The agent is settled as for a query.
func (s *Server) handleToolTree(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
		return
	}
	established, herr := s.identify(r.Context(), r, st)
	if herr != nil {
		writeAuthError(w, herr)
		return
	}
	q := r.URL.Query()
	for name := range q {
		if name != "agent" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown query parameter %q: the tree takes agent only", name))
			return
		}
	}
	agent, herr := settleAgent(established, q.Get("agent"))
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	writeJSON(w, http.StatusOK, toolTree{Root: st.snap.ToolTree(agent)}, false)
}

// respPool holds answer buffers; a quickstart answer is about 14 KB.
var respPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 32<<10)
	return &b
}}

// decodeRequest reads one JSON object, strictly: unknown fields, trailing
// data and oversize bodies are refused.
func decodeRequest(w http.ResponseWriter, r *http.Request, limit int64) (engine.Request, *httpError) {
	// Content-Type is not checked: `curl -d` sends a form type with JSON.
	return decodeQuery(http.MaxBytesReader(w, r.Body, limit), limit)
}

// decodeQuery is decodeRequest's decoding, which the MCP endpoint's
// arguments share: the same rules and messages.
func decodeQuery(body io.Reader, limit int64) (engine.Request, *httpError) {
	var req engine.Request
	return req, decodeStrict(body, limit, &req, queryExample)
}

// queryExample is a query request as the errors of an empty one show it.
const queryExample = `{"text": "..."}`

func (s *Server) notReadyMessage() string {
	if s.draining.Load() {
		return "shutting down"
	}
	s.statusMu.Lock()
	lastErr := s.lastErr
	s.statusMu.Unlock()
	switch {
	case lastErr != "" && s.guard().tokens:
		// The error describes the configuration; callers here are unauthenticated.
		return "no configuration is serving: the last load failed (the router's log says why)"
	case lastErr != "":
		return "no configuration is serving: " + lastErr
	}
	return "no configuration is serving yet: the first snapshot is being built"
}

func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if !s.Ready() {
		writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok\n")
}

// Status is the body of GET /v1/status.
type Status struct {
	// Router is the serving router's name ("" before the first load).
	Router string `json:"router"`
	Ready  bool   `json:"ready"`
	// SnapshotHash identifies the serving configuration and content.
	SnapshotHash string     `json:"snapshot_hash"`
	BuiltAt      *time.Time `json:"built_at,omitempty"`
	Chunks       int        `json:"chunks"`
	Routes       []string   `json:"routes"`
	// Auth is how callers are identified: "agent" (pinned), "token" or "none".
	Auth  string `json:"auth"`
	Agent string `json:"agent,omitempty"`
	// LastReloadAt is the last snapshot build attempt; LastReloadError its
	// error when it failed (the previous snapshot keeps serving).
	LastReloadAt    *time.Time     `json:"last_reload_at,omitempty"`
	LastSuccessAt   *time.Time     `json:"last_success_at,omitempty"`
	LastReloadError string         `json:"last_reload_error,omitempty"`
	Sources         []SourceStatus `json:"sources"`
	// Classifiers are the ContextClassifiers the snapshot trained, sorted by
	// name: learned labels with their example counts, training accuracy.
	Classifiers []engine.ClassifierStatus `json:"classifiers,omitempty"`
	// Embedding reports the chunk vectors of spec.ranking.embedding.
	Embedding *engine.EmbeddingStatus `json:"embedding,omitempty"`
	// Audit reports the audit log's writer while the configuration audits
	// (api.md §6.5): a stalled sink and dropped lines show here.
	Audit *AuditStatus `json:"audit,omitempty"`
}

// SourceStatus is one source of the serving snapshot.
type SourceStatus struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Chunks int    `json:"chunks"`
	// Tools is the size of a tool source's catalog.
	Tools int `json:"tools,omitempty"`
	// Error is why the source could not be loaded.
	Error string `json:"error,omitempty"`
	// Commit is the git commit the snapshot serves.
	Commit string `json:"commit,omitempty"`
	// LastSync is the last successful git sync; LastSyncError the error of
	// the last sync when it failed.
	LastSync      *time.Time `json:"last_sync,omitempty"`
	LastSyncError string     `json:"last_sync_error,omitempty"`
	SyncInterval  string     `json:"sync_interval,omitempty"`
	// Skipped counts the files the source left out at load, by reason.
	Skipped *SkipCounts `json:"skipped,omitempty"`
	// NewestContentTime is the content time of the source's newest chunk
	// (or fetched answer), ContentAgeSeconds its age now, and Stale is set
	// when even that is older than spec.freshness.maxAge (api.md §4.7).
	NewestContentTime *time.Time `json:"newest_content_time,omitempty"`
	ContentAgeSeconds *int64     `json:"content_age_seconds,omitempty"`
	Stale             bool       `json:"stale,omitempty"`
	// ToolsDigest is a tool source's catalog digest, Approval its spec's
	// approval; under Manual, PendingTools counts the tools held back and
	// Pending lists the first maxStatusPending by id (api.md §10.9).
	ToolsDigest  string               `json:"tools_digest,omitempty"`
	Approval     string               `json:"approval,omitempty"`
	PendingTools *int                 `json:"pending_tools,omitempty"`
	Pending      []engine.PendingTool `json:"pending,omitempty"`
}

// SkipCounts is sources.Skips without the paths: /v1/status answers callers
// who may not read every source, and a file's name can say what it holds
// (validate, run by whoever has the files, shows the paths).
type SkipCounts struct {
	Files   int            `json:"files"`
	Reasons map[string]int `json:"reasons"`
}

// Status reports the serving snapshot, the last reload and every source.
func (s *Server) Status() Status {
	out := Status{Ready: s.Ready(), Routes: []string{}, Sources: []SourceStatus{}, Auth: "none"}
	s.statusMu.Lock()
	out.LastReloadError = s.lastErr
	out.LastReloadAt = timePtr(s.lastReloadAt)
	out.LastSuccessAt = timePtr(s.lastSuccess)
	s.statusMu.Unlock()
	st := s.state.Load()
	switch {
	case s.opts.Agent != "":
		out.Auth, out.Agent = "agent", s.opts.Agent
	case st != nil && st.tokens:
		out.Auth = "token"
	}
	if st == nil {
		return out
	}
	snap := st.snap
	out.Router = snap.Router()
	out.SnapshotHash = snap.Hash()
	out.BuiltAt = timePtr(snap.BuiltAt())
	out.Chunks = snap.Chunks()
	out.Routes = snap.Routes()
	out.Classifiers = snap.Classifiers()
	out.Embedding = snap.Embedding()
	now := time.Now()
	if st.audit != nil {
		a := s.auditLog.status(now)
		out.Audit = &a
	}
	for _, src := range snap.Sources() {
		ss := SourceStatus{Name: src.Name, Type: string(src.Type), Chunks: src.Chunks, Tools: src.Tools, Error: src.Error, Commit: src.Commit}
		if age, stale, ok := src.ContentAge(now); ok {
			ss.NewestContentTime, ss.ContentAgeSeconds, ss.Stale = timePtr(src.NewestContent), &age, stale
		}
		if k := src.Skipped; k != nil {
			ss.Skipped = &SkipCounts{Files: k.Files, Reasons: k.Reasons}
		}
		setPending(&ss, &src)
		live := snap.Source(src.Name)
		if g, ok := live.(interface{ Status() sources.GitStatus }); ok {
			gs := g.Status()
			ss.LastSync = timePtr(gs.LastSync)
			ss.LastSyncError = gs.LastError
		}
		if iv, ok := live.(interface{ Interval() time.Duration }); ok {
			ss.SyncInterval = iv.Interval().String()
		}
		out.Sources = append(out.Sources, ss)
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// handleStatus answers GET /v1/status. In token mode it asks what a query
// asks: a ServiceAccount token of the router's namespace.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if g := s.guard(); g.tokens {
		if _, herr := s.tokenAgent(r.Context(), r, g.namespace); herr != nil {
			writeAuthError(w, herr)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.Status(), true)
}

// handleMetrics answers GET /metrics. In token mode the caller's token
// must be one the API server accepts, for a user allowed to get the
// nonResourceURL /metrics (the metrics-reader ClusterRole).
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.guard().tokens {
		s.plainMetrics.ServeHTTP(w, r)
		return
	}
	h := s.auth.scrapeHandler()
	if h == nil {
		writeError(w, http.StatusServiceUnavailable, "token verification is not available: the Kubernetes API could not be reached")
		return
	}
	h.ServeHTTP(w, r)
}

// errorLogger sends promhttp's errors to the server log.
type errorLogger struct{ s *Server }

func (l errorLogger) Println(v ...any) { l.s.log.Error("metrics", "error", fmt.Sprint(v...)) }
