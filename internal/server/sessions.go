package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/storeselect"
)

// The session API (api.md §11.9): writes to an agent's session, context
// packs built from it, and drill-down into the artifacts of its tool
// results. The caller's identity is settled as for a query (identify): the
// pinned agent, the token's ServiceAccount, or with auth.mode None the
// agent the request names; it owns the sessions it creates.

// MaxSessionWriteBytes bounds the body of a session write or context
// request: an item at session.MaxItemBytes with room for JSON escapes, and
// more items beside it.
const MaxSessionWriteBytes = 4 << 20

const (
	sessionsPrefix  = "/v1/sessions/"
	artifactsPrefix = "/v1/artifacts/"
)

// sessionRoute is the handler of a path under the session prefixes, with
// the label of its request counter.
func (s *Server) sessionRoute(urlPath string) (counter string, h http.HandlerFunc, ok bool) {
	switch {
	case strings.HasPrefix(urlPath, sessionsPrefix):
		return "sessions", s.serveSessionAPI, true
	case strings.HasPrefix(urlPath, artifactsPrefix):
		return "artifacts", s.serveSessionAPI, true
	}
	return "", nil, false
}

// newSessionMux routes the session API (api.md §11.9) by method and
// path. A GET pattern serves HEAD too; path values are unescaped segments,
// so a fact key may hold '/' as %2F.
func (s *Server) newSessionMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+sessionsPrefix+"{id}", s.withSessionID(s.getSession))
	mux.HandleFunc("DELETE "+sessionsPrefix+"{id}", s.withSessionID(s.deleteSession))
	mux.HandleFunc("POST "+sessionsPrefix+"{id}/items", s.withSessionID(s.appendItems))
	mux.HandleFunc("PUT "+sessionsPrefix+"{id}/facts/{key}", s.withSessionID(s.putFact))
	mux.HandleFunc("POST "+sessionsPrefix+"{id}/episodes", s.withSessionID(s.appendEpisode))
	mux.HandleFunc("POST "+sessionsPrefix+"{id}/context", s.withSessionID(s.sessionContext))
	mux.HandleFunc("GET "+artifactsPrefix+"{ref}", s.handleArtifact)
	return mux
}

// serveSessionAPI serves a request under the session prefixes. A path no
// pattern has, or one with empty segments or a trailing slash (the mux would
// redirect it), is 404; a method the path does not serve is 405 with the
// methods it does in Allow, as the mux finds them; both with the API's JSON
// errors.
func (s *Server) serveSessionAPI(w http.ResponseWriter, r *http.Request) {
	r = literalDots(r)
	esc := r.URL.EscapedPath()
	h, pattern := s.sessionMux.Handler(r)
	if pattern != "" && path.Clean(esc) == esc {
		s.sessionMux.ServeHTTP(w, r)
		return
	}
	probe := &headerProbe{header: http.Header{}}
	if pattern == "" {
		h.ServeHTTP(probe, r) // the mux's own 404 or 405 answer
	}
	if allow := probe.header.Get("Allow"); probe.code == http.StatusMethodNotAllowed && allow != "" {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s: use %s", r.Method, r.URL.Path, allow))
		return
	}
	what := "sessions serve GET and DELETE /v1/sessions/{id}, POST …/items, PUT …/facts/{key}, POST …/episodes and POST …/context"
	if strings.HasPrefix(r.URL.Path, artifactsPrefix) {
		what = "use GET /v1/artifacts/{ref}"
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s: %s", r.URL.Path, what))
}

// literalDots escapes the "." and ".." segments of r's path: here they
// are names (a session id or a fact key, which their checks refuse or
// keep), not steps up the path, which the mux would resolve by a redirect.
func literalDots(r *http.Request) *http.Request {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	dots := false
	for i, seg := range segs {
		if seg == "." || seg == ".." {
			segs[i], dots = strings.Repeat("%2E", len(seg)), true
		}
	}
	if !dots {
		return r
	}
	r = r.Clone(r.Context())
	r.URL.RawPath = strings.Join(segs, "/")
	return r
}

// headerProbe records the status and headers of the mux's own answer
// and drops its plain-text body.
type headerProbe struct {
	header http.Header
	code   int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) WriteHeader(code int)        { p.code = code }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }

// withSessionID checks the {id} of a session path (400) before its handler.
func (s *Server) withSessionID(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := session.ValidateSessionID(id); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, id)
	}
}

// openSessionStore sets up the server's store: the one given, or the one
// each configuration's spec.sessions names (storeselect.Holder; the
// sidecar's is always embedded), opened when the first configuration loads.
func (s *Server) openSessionStore() error {
	if s.opts.SessionStore != nil {
		s.sessions = s.opts.SessionStore
		return nil
	}
	if dir := s.opts.Sessions.Dir; dir != "" {
		if err := memstore.PrepareDir(dir); err != nil {
			return err
		}
	}
	s.holder = storeselect.NewHolder(storeselect.Where{Local: s.opts.Agent != "", Memory: s.opts.Sessions})
	return nil
}

// updateSessionStore makes the store of a newly compiled configuration
// current; a store that cannot open (a missing password Secret) answers 503
// with the reason while queries go on.
func (s *Server) updateSessionStore(cfg *engine.Config) {
	if s.holder == nil {
		return
	}
	before := s.holder.Store()
	if err := s.holder.Update(&cfg.Router, s.opts.Engine.Secrets); err != nil {
		s.log.Error("session store not available; sessions answer 503 until a configuration fixes it", "error", err.Error())
	}
	if m, ok := s.holder.Store().(*memstore.Store); ok && s.holder.Store() != before {
		for _, err := range m.Skipped() {
			s.log.Error("session file set aside; its session is left out", "error", err.Error())
		}
	}
}

// sessionStore is the store requests use: every request asks here, so a
// store that changes with the configuration is picked up per request.
func (s *Server) sessionStore() session.Store {
	if s.holder != nil {
		return s.holder.Store()
	}
	return s.sessions
}

// closeSessionStore closes the store the server opened.
func (s *Server) closeSessionStore() {
	if s.holder != nil {
		if err := s.holder.Close(); err != nil {
			s.log.Error("closing the session store", "error", err.Error())
		}
	}
}

// sessionCaller settles the serving state and the caller's identity, the
// agent the request names (body or ?agent=) reconciled with it.
func (s *Server) sessionCaller(w http.ResponseWriter, r *http.Request) (*state, string, bool) {
	st := s.state.Load()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
		return nil, "", false
	}
	established, herr := s.identify(r.Context(), r, st)
	if herr != nil {
		writeAuthError(w, herr)
		return nil, "", false
	}
	return st, established, true
}

// settleAgent is the one agent check of a request that runs no query (a
// query's is its validation): the agent it names within its bound
// (engine.CheckAgent) and reconciled with the caller's.
func settleAgent(established, requested string) (string, *httpError) {
	if err := engine.CheckAgent(requested); err != nil {
		return "", errorf(http.StatusBadRequest, "%v", err)
	}
	return reconcileAgent(established, requested)
}

// readSessionBody settles the caller and decodes a JSON body into v, whose
// agent field (*string) names the agent the request speaks for.
func (s *Server) readSessionBody(w http.ResponseWriter, r *http.Request, v any, agentField *string, example string) (*state, string, bool) {
	st, established, ok := s.sessionCaller(w, r)
	if !ok {
		return nil, "", false
	}
	if herr := decodeStrict(http.MaxBytesReader(w, r.Body, MaxSessionWriteBytes), MaxSessionWriteBytes, v, example); herr != nil {
		writeError(w, herr.code, herr.msg)
		return nil, "", false
	}
	agent, herr := settleAgent(established, *agentField)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return nil, "", false
	}
	return st, agent, true
}

// sessionError is the one place a store's error becomes a status and a
// message: by the sentinel it wraps (session.ErrStoreFull 507,
// session.ErrTooLarge 413, session.ErrUnavailable 503), never by its text.
func (s *Server) sessionError(id string, err error) *httpError {
	var bad *session.Error
	switch {
	case errors.Is(err, session.ErrNotFound):
		return errorf(http.StatusNotFound, "session %q not found", id)
	case errors.Is(err, session.ErrForbidden):
		return errorf(http.StatusForbidden, "session %q belongs to another agent", id)
	case errors.Is(err, context.Canceled):
		// The caller went away; nobody reads this answer.
		s.log.Debug("session request cancelled", "session", id)
		return errorf(http.StatusServiceUnavailable, "the request was cancelled; retry")
	case errors.Is(err, session.ErrUnavailable):
		s.log.Warn("session store unavailable", "error", err.Error())
		return errorf(http.StatusServiceUnavailable, "%v; nothing was written, retry later", err)
	case errors.Is(err, session.ErrStoreFull):
		return errorf(http.StatusInsufficientStorage, "%v", err)
	case errors.Is(err, session.ErrTooLarge):
		return errorf(http.StatusRequestEntityTooLarge, "%v", err)
	case errors.As(err, &bad), errors.Is(err, session.ErrBadArtifactRef):
		return errorf(http.StatusBadRequest, "%v", err)
	}
	s.log.Error("session store failed", "error", err.Error())
	return errorf(http.StatusInternalServerError, "internal error")
}

// appended is the answer of a session write.
type appended struct {
	Session string   `json:"session"`
	Items   []string `json:"items"`
	Fact    string   `json:"fact,omitempty"`
	Episode string   `json:"episode,omitempty"`
	// SecretsMasked counts the values masked before the write was stored
	// (api.md §11.10); absent when none was.
	SecretsMasked int `json:"secrets_masked,omitempty"`
}

// write masks the secrets of d under the router's policy, appends it to a
// session and answers the write. Masking comes first: no store, file or
// log ever holds what it masks.
func (s *Server) write(w http.ResponseWriter, r *http.Request, st *state, id, agent string, d session.Delta, ans appended) {
	masked := session.MaskSecrets(st.policy.Secrets(), &d)
	ids, err := s.sessionStore().Append(r.Context(), id, agent, d)
	if err != nil {
		herr := s.sessionError(id, err)
		writeError(w, herr.code, herr.msg)
		return
	}
	for rule, n := range masked {
		s.metrics.secretsMasked.WithLabelValues(rule).Add(float64(n))
	}
	ans.Session, ans.Items, ans.SecretsMasked = id, ids, masked.Total()
	if ans.Items == nil {
		ans.Items = []string{}
	}
	writeJSON(w, http.StatusOK, ans, false)
}

// POST /v1/sessions/{id}/items {"items": [...], "agent": A}
func (s *Server) appendItems(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Items []session.Item `json:"items"`
		Agent string         `json:"agent"`
	}
	if st, agent, ok := s.readSessionBody(w, r, &body, &body.Agent, `{"items": [{"id": "u1", "kind": "user_turn", "text": "..."}]}`); ok {
		if len(body.Items) == 0 {
			writeError(w, http.StatusBadRequest, "items: the list is empty: send at least one item")
			return
		}
		s.write(w, r, st, id, agent, session.Delta{Items: body.Items}, appended{})
	}
}

// PUT /v1/sessions/{id}/facts/{key} {"value": V, "agent": A}
func (s *Server) putFact(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		Value *string `json:"value"`
		Agent string  `json:"agent"`
	}
	if st, agent, ok := s.readSessionBody(w, r, &body, &body.Agent, `{"value": "..."}`); ok {
		if body.Value == nil {
			writeError(w, http.StatusBadRequest, "value: required")
			return
		}
		key := r.PathValue("key")
		s.write(w, r, st, id, agent, session.Delta{Facts: []session.Fact{{Key: key, Value: *body.Value}}}, appended{Fact: key})
	}
}

// POST /v1/sessions/{id}/episodes {"id": E, "text": T, "agent": A}
func (s *Server) appendEpisode(w http.ResponseWriter, r *http.Request, id string) {
	var body struct {
		session.Episode
		Agent string `json:"agent"`
	}
	if st, agent, ok := s.readSessionBody(w, r, &body, &body.Agent, `{"id": "e1", "text": "..."}`); ok {
		s.write(w, r, st, id, agent, session.Delta{Episodes: []session.Episode{body.Episode}}, appended{Episode: body.ID})
	}
}

// storedSession is the answer of GET /v1/sessions/{id}: the session as
// stored, in the order it was written.
type storedSession struct {
	Session  string            `json:"session"`
	Items    []session.Item    `json:"items"`
	Facts    []session.Fact    `json:"facts"`
	Episodes []session.Episode `json:"episodes"`
}

// getSession answers the session itself, for debugging an agent's prompt
// assembly; like a pack, it starts the idle time again.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, id string) {
	_, established, ok := s.sessionCaller(w, r)
	if !ok {
		return
	}
	q, herr := onlyParams(r, "agent")
	var sess *session.Session
	if herr == nil {
		var agent string
		if agent, herr = settleAgent(established, q.Get("agent")); herr == nil {
			var err error
			if sess, err = s.sessionStore().Load(r.Context(), id, agent); err != nil {
				herr = s.sessionError(id, err)
			}
		}
	}
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	out := storedSession{Session: id, Items: sess.Items, Facts: sess.Facts, Episodes: sess.Episodes}
	if out.Items == nil {
		out.Items = []session.Item{}
	}
	if out.Facts == nil {
		out.Facts = []session.Fact{}
	}
	if out.Episodes == nil {
		out.Episodes = []session.Episode{}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out, false)
}

// DELETE /v1/sessions/{id}?agent=A
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, id string) {
	_, established, ok := s.sessionCaller(w, r)
	if !ok {
		return
	}
	q, herr := onlyParams(r, "agent")
	if herr == nil {
		var agent string
		if agent, herr = settleAgent(established, q.Get("agent")); herr == nil {
			if err := s.sessionStore().Delete(r.Context(), id, agent); err != nil {
				herr = s.sessionError(id, err)
			}
		}
	}
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// onlyParams refuses query parameters other than names.
func onlyParams(r *http.Request, names ...string) (url.Values, *httpError) {
	q := r.URL.Query()
	for name := range q {
		known := false
		for _, n := range names {
			known = known || n == name
		}
		if !known {
			return nil, errorf(http.StatusBadRequest, "unknown query parameter %q: %s takes %s", name, r.URL.Path, strings.Join(names, ", "))
		}
	}
	return q, nil
}

// contextRequest is the body of POST /v1/sessions/{id}/context.
type contextRequest struct {
	Phase     string   `json:"phase"`
	Query     string   `json:"query"`
	Agent     string   `json:"agent"`
	MaxTokens int      `json:"max_tokens"`
	Tags      []string `json:"tags"`
	// Explain adds dropped_items: the entries left out and why.
	Explain bool `json:"explain"`
}

// packRequest is the one place the server turns a context request into a
// pack request, under the router's policy (the state's): a max_tokens
// above the phase's ceiling is refused here, before the session is read.
func packRequest(agent string, req *contextRequest, pol *session.Policy) (session.Request, *httpError) {
	ph, err := session.ParsePhase(req.Phase)
	if err != nil {
		return session.Request{}, errorf(http.StatusBadRequest, "phase: %v", err)
	}
	if req.MaxTokens < 0 || req.MaxTokens > session.MaxBudget {
		return session.Request{}, errorf(http.StatusBadRequest, "max_tokens: %d must be between 0 and %d", req.MaxTokens, session.MaxBudget)
	}
	if _, err := pol.Limit(ph, req.MaxTokens); err != nil {
		return session.Request{}, errorf(http.StatusBadRequest, "%v", err)
	}
	if n := len(req.Tags); n > engine.MaxTags {
		return session.Request{}, errorf(http.StatusBadRequest, "tags: %d tags; at most %d are allowed", n, engine.MaxTags)
	}
	return session.Request{Phase: ph, Query: req.Query, Agent: agent, Tags: req.Tags, MaxTokens: req.MaxTokens,
		Explain: req.Explain, Policy: pol}, nil
}

// POST /v1/sessions/{id}/context: the pack (api.md §11.5).
func (s *Server) sessionContext(w http.ResponseWriter, r *http.Request, id string) {
	start := time.Now()
	var req contextRequest
	st, agent, ok := s.readSessionBody(w, r, &req, &req.Agent, `{"phase": "answer", "query": "..."}`)
	if !ok {
		return
	}
	pack, resp, herr := s.buildPack(r.Context(), st, id, agent, &req, start)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	d := packDelivery(id, agent, req.Query, pack, resp)
	if rid := s.deliver(r.Header, st, &d, start); rid != "" {
		w.Header().Set(RequestIDHeader, rid)
	}
	writeJSON(w, http.StatusOK, pack, false)
}

// buildPack loads the session and builds its pack as `session build`
// does, with the query pipeline under the query timeout when the request
// has a query.
func (s *Server) buildPack(ctx context.Context, st *state, id, agent string, req *contextRequest, start time.Time) (*session.Pack, *engine.Response, *httpError) {
	preq, herr := packRequest(agent, req, st.policy)
	if herr != nil {
		return nil, nil, herr
	}
	sess, err := s.sessionStore().Load(ctx, id, agent)
	if err != nil {
		return nil, nil, s.sessionError(id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	pack, resp, err := session.BuildFor(ctx, st.snap, sess, preq)
	switch {
	case session.IsQueryError(err):
		return nil, nil, s.queryError(err, start)
	case err != nil:
		return nil, nil, s.sessionError(id, err)
	}
	if resp != nil {
		s.observeResponse(st, resp)
	}
	s.metrics.sessionPacks.WithLabelValues(string(preq.Phase)).Inc()
	s.metrics.packDuration.Observe(time.Since(start).Seconds())
	return pack, resp, nil
}

// drill answers a drill-down for the agent (GET /v1/artifacts/{ref}, MCP
// drilldown): the artifact of one of its live sessions, never another's.
func (s *Server) drill(ctx context.Context, agent, ref string, req session.DrillRequest) (*session.Drill, *httpError) {
	if _, err := session.ParseArtifactRef(ref); err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err) // before asking the store
	}
	content, err := s.sessionStore().Artifact(ctx, agent, ref)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return nil, errorf(http.StatusNotFound, "artifact %s not found in this agent's sessions", ref)
	case err != nil:
		return nil, s.sessionError("", err)
	}
	d, err := session.DrillDown(ref, content, req)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	return d, nil
}

// GET /v1/artifacts/{ref}?view=…&agent=A and the view's parameters
// (lines, path, from, to, pattern, literal, context, max; api.md §11.9).
func (s *Server) handleArtifact(w http.ResponseWriter, r *http.Request) {
	_, established, ok := s.sessionCaller(w, r)
	if !ok {
		return
	}
	q, herr := onlyParams(r, "view", "lines", "path", "agent", "from", "to", "pattern", "literal", "context", "max")
	var agent string
	if herr == nil {
		agent, herr = settleAgent(established, q.Get("agent"))
	}
	var req session.DrillRequest
	if herr == nil {
		req, herr = drillParams(q)
	}
	var d *session.Drill
	if herr == nil {
		d, herr = s.drill(r.Context(), agent, r.PathValue("ref"), req)
	}
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	writeJSON(w, http.StatusOK, d, false)
}

// drillParams reads a drill-down's query parameters, each at most once;
// DrillDown checks their ranges and views.
func drillParams(q url.Values) (session.DrillRequest, *httpError) {
	req := session.DrillRequest{View: q.Get("view"), Path: q.Get("path"), Pattern: q.Get("pattern")}
	for name, vs := range q {
		if len(vs) > 1 {
			return req, errorf(http.StatusBadRequest, "%s is given %d times; give it once", name, len(vs))
		}
	}
	if req.View == "" {
		req.View = session.ViewHead
	}
	var err error
	if req.Lines, err = session.ParseDrillLines(q.Get("lines")); err != nil {
		return req, errorf(http.StatusBadRequest, "%v", err)
	}
	for _, p := range [...]struct {
		name string
		to   **int
	}{{"from", &req.From}, {"to", &req.To}, {"context", &req.Context}, {"max", &req.Max}} {
		if v, ok := q[p.name]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil {
				return req, errorf(http.StatusBadRequest, "%s: %q is not an integer", p.name, v[0])
			}
			*p.to = &n
		}
	}
	if v, ok := q["literal"]; ok {
		b, err := strconv.ParseBool(v[0])
		if err != nil {
			return req, errorf(http.StatusBadRequest, "literal: %q must be true or false", v[0])
		}
		req.Literal = b
	}
	return req, nil
}

// decodeStrict reads one JSON object into v, strictly: unknown fields,
// trailing data and bodies over limit are refused; example is what an
// empty body is told to send.
func decodeStrict(body io.Reader, limit int64, v any, example string) *httpError {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Anything after the object is a malformed request, not a second one.
		if _, terr := dec.Token(); terr != io.EOF {
			err = terr
			if err == nil {
				err = errors.New("unexpected data after the JSON object")
			}
		}
	}
	if err == nil {
		return nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errorf(http.StatusRequestEntityTooLarge, "request body is larger than %d bytes", limit)
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "request body is empty: send a JSON object such as %s", example)
	}
	return errorf(http.StatusBadRequest, "invalid request body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// mcpToolDrilldown is the MCP tool of GET /v1/artifacts/{ref}.
const mcpToolDrilldown = "drilldown"

// drilldownArgs are the drilldown tool's arguments: GET
// /v1/artifacts/{ref}'s parameters.
type drilldownArgs struct {
	Ref     string `json:"ref"`
	View    string `json:"view"`
	Path    string `json:"path"`
	Lines   int    `json:"lines"`
	From    *int   `json:"from"`
	To      *int   `json:"to"`
	Pattern string `json:"pattern"`
	Literal bool   `json:"literal"`
	Context *int   `json:"context"`
	Max     *int   `json:"max"`
	Agent   string `json:"agent"`
}

var drilldownSchema = objectSchema("ref",
	`"ref": {"type": "string", "description": "The artifact's ref, as a context pack's artifacts name it: sha256:<hex>."}`,
	`"view": {"type": "string", "enum": ["head", "lines", "grep", "json", "csv", "columns"], "description": "head: the first lines; lines: the lines from..to (negative counts from the end); grep: the lines matching pattern; json: the value at path; csv: rows, columns and first rows; columns: column names and types. Default head."}`,
	`"path": {"type": "string", "description": "For view json and columns: the value to return, such as .items[0].name or .[\"a key\"] (default: the whole document)."}`,
	fmt.Sprintf(`"lines": {"type": "integer", "minimum": 0, "maximum": %d, "description": "For view head and csv: lines of head, rows of csv: %s."}`, session.MaxDrillLines, session.DrillLinesRule),
	`"from": {"type": "integer", "description": "For view lines: the first line, from 1; negative counts from the end (-1 is the last line). Default 1."}`,
	`"to": {"type": "integer", "description": "For view lines: the last line, as from (default from+19). At most 200 lines and 64 KiB come back; next gives the range to ask for next."}`,
	`"pattern": {"type": "string", "maxLength": 1024, "description": "For view grep: an RE2 regular expression matched line by line ((?i) for any case), or a plain string with literal."}`,
	`"literal": {"type": "boolean", "description": "For view grep: pattern is a plain string."}`,
	`"context": {"type": "integer", "minimum": 0, "maximum": 10, "description": "For view grep: lines before and after each match (default 0)."}`,
	`"max": {"type": "integer", "minimum": 1, "maximum": 200, "description": "For view grep: matches to return (default 50); total_matches counts them all."}`,
	argAgent)

// addMCPDrilldown registers drilldown (api.md §11.9).
func (s *Server) addMCPDrilldown(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolDrilldown,
		Title:       "Drill down into an artifact",
		Description: "Reads any part of a tool result that a context pack replaced by a summary (its artifact): lines by number from either end, the lines matching a pattern, the first lines, a JSON value by path, or a CSV table's shape, within bounds. Only artifacts of this agent's sessions are found.",
		InputSchema: drilldownSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, s.mcpHandler(mcpToolDrilldown, s.mcpDrill))
}

// mcpDrill is drilldown: GET /v1/artifacts/{ref} over MCP, with the same
// identity rules and answers.
func (s *Server) mcpDrill(ctx context.Context, call *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, string) {
	var args drilldownArgs
	_, established, herr := s.mcpCaller(call, &args, `{"ref": "sha256:..."}`)
	var agent string
	if herr == nil {
		agent, herr = settleAgent(established, args.Agent)
	}
	var d *session.Drill
	if herr == nil {
		if args.View == "" {
			args.View = session.ViewHead
		}
		d, herr = s.drill(ctx, agent, args.Ref, session.DrillRequest{View: args.View, Path: args.Path, Lines: args.Lines,
			From: args.From, To: args.To, Pattern: args.Pattern, Literal: args.Literal, Context: args.Context, Max: args.Max})
	}
	if herr != nil {
		return toolFailure(herr)
	}
	return jsonResult(d)
}

// sessionsCollector reports the live sessions of a store that counts them
// (the embedded one), read at scrape time.
type sessionsCollector struct{ s *Server }

var sessionsDesc = prometheus.NewDesc(metricsNamespace+"_sessions",
	"Live sessions of the embedded session store (idle ones past the TTL are swept first).", nil, nil)

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	if l, ok := c.s.sessionStore().(interface{ Len() int }); ok {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(l.Len()))
	}
}
