package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// Learning from outcomes (api.md §10.10): POST, GET and DELETE
// /v1/tools/outcomes and the MCP tool report_tool_outcome.

const (
	outcomesPath       = "/v1/tools/outcomes"
	mcpToolReport      = "report_tool_outcome"
	outcomeAnswerCount = 4096 // answers remembered for request_id
)

// outcomeRequest is the body of POST /v1/tools/outcomes and the arguments
// of report_tool_outcome.
type outcomeRequest struct {
	Text      string `json:"text,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Tool      string `json:"tool"`
	Source    string `json:"source,omitempty"`
	Outcome   string `json:"outcome"`
	Agent     string `json:"agent,omitempty"`
}

const outcomeExample = `{"text": "roll back the deploy", "tool": "deploys.rollback", "outcome": "success", "agent": "eng-assistant"}`

// outcomeAnswer is what an accepted outcome answers.
type outcomeAnswer struct {
	learning.Record
	Scope string `json:"scope"` // Agent or Shared
}

// outcomeReasons are the reasons of contextrouter_tool_outcomes_total: a
// fixed set, so the labels stay bounded.
var outcomeReasons = []string{"bad_request", "unknown_request", "rate", "off", "not_usable", "not_teacher",
	"tool_limit", "agent_limit", "store_full", "unavailable"}

// outcomeState is the server's bookkeeping of outcomes: the answers a
// request_id names and each agent's count in the current minute.
type outcomeState struct {
	mu      sync.Mutex
	answers map[string]rememberedAnswer
	ring    [outcomeAnswerCount]string
	next    int
	minute  int64
	counts  map[string]int
}

// rememberedAnswer is an answer of /v1/tools or /v1/query: who asked what.
type rememberedAnswer struct{ agent, text string }

// rememberAnswer keeps the question of an answer with tool cards under its
// request id, among the last outcomeAnswerCount; a question too long to
// learn is not kept.
func (s *Server) rememberAnswer(id, agent, text string) {
	if id == "" || len(text) > learning.MaxText {
		return
	}
	o := &s.outcomes
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.answers == nil {
		o.answers = map[string]rememberedAnswer{}
	}
	if old := o.ring[o.next]; old != "" {
		delete(o.answers, old)
	}
	o.ring[o.next] = id
	o.next = (o.next + 1) % outcomeAnswerCount
	o.answers[id] = rememberedAnswer{agent, text}
}

// allow counts one outcome of agent in the current minute; false past
// learning.PerMinute. The counts start again each minute, so the map holds
// the agents of one minute at most.
func (o *outcomeState) allow(agent string, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m := now.Unix() / 60; m != o.minute || o.counts == nil {
		o.minute, o.counts = m, map[string]int{}
	}
	if o.counts[agent] >= learning.PerMinute {
		return false
	}
	o.counts[agent]++
	return true
}

// learningStore is the router's session store as a learning store.
func (s *Server) learningStore() (learning.Store, *httpError) {
	if ls, ok := s.sessionStore().(learning.Store); ok {
		return ls, nil
	}
	return nil, errorf(http.StatusServiceUnavailable, "%s: the session store keeps no learned outcomes", learning.ErrUnavailable)
}

// learnedFor is the overlay of the agent's learned outcomes for a query;
// a store that cannot answer costs the query its learning, not its answer.
func (s *Server) learnedFor(ctx context.Context, st *state, agent string) *tools.Learned {
	ls, herr := s.learningStore()
	if herr != nil {
		return nil
	}
	l, err := st.snap.LearnedFor(ctx, ls, agent)
	if err != nil {
		s.log.Warn("learned outcomes not read; the query is ranked without them", "error", err.Error())
		return nil
	}
	return l
}

// reportOutcome is the one path of POST /v1/tools/outcomes and
// report_tool_outcome: the request checked, the agent settled, the rate,
// the tool and the right to teach checked, then learning.Learn. reason is
// the metric's ("" when accepted).
func (s *Server) reportOutcome(ctx context.Context, st *state, established string, req outcomeRequest) (*outcomeAnswer, *httpError, string) {
	agent, herr := settleAgent(established, req.Agent)
	if herr != nil {
		return nil, herr, "bad_request"
	}
	switch {
	case (req.Text == "") == (req.RequestID == ""):
		return nil, errorf(http.StatusBadRequest, "send exactly one of text and request_id"), "bad_request"
	case req.Tool == "":
		return nil, errorf(http.StatusBadRequest, "tool: the id of the tool used is required"), "bad_request"
	}
	text := req.Text
	if req.RequestID != "" {
		s.outcomes.mu.Lock()
		a, ok := s.outcomes.answers[req.RequestID]
		s.outcomes.mu.Unlock()
		if !ok || a.agent != agent {
			return nil, errorf(http.StatusNotFound, "request_id %q names no recent answer of agent %q (the router remembers its last %d answers with a question of at most %d bytes); send text instead", req.RequestID, agent, outcomeAnswerCount, learning.MaxText), "unknown_request"
		}
		text = a.text
	}
	if err := learning.Check(text, req.Outcome); err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", err), "bad_request"
	}
	if !s.outcomes.allow(agent, time.Now()) {
		return nil, errorf(http.StatusTooManyRequests, "agent %q reported %d outcomes this minute, the limit; retry in the next minute", agent, learning.PerMinute), "rate"
	}
	rec, err := st.snap.OutcomeRecord(agent, req.Source, req.Tool, text, req.Outcome)
	var refusal *engine.OutcomeRefusal
	switch {
	case errors.Is(err, engine.ErrLearningOff):
		return nil, errorf(http.StatusForbidden, "%s", err), "off"
	case errors.As(err, &refusal):
		return nil, errorf(http.StatusForbidden, "%s", err), refusal.Reason
	case err != nil:
		return nil, errorf(http.StatusInternalServerError, "%s", err), "unavailable"
	}
	ls, herr := s.learningStore()
	if herr != nil {
		return nil, herr, "unavailable"
	}
	rec, err = learning.Learn(ctx, ls, rec, learning.DefaultBounds)
	var limit *learning.LimitError
	switch {
	case errors.As(err, &limit):
		return nil, errorf(http.StatusInsufficientStorage, "%s; nothing was learned", err), limit.Reason
	case err != nil:
		return nil, errorf(http.StatusServiceUnavailable, "%s; nothing was learned, retry later", err), "unavailable"
	}
	scope := "Agent"
	if rec.Owner == learning.Shared {
		scope = "Shared"
	}
	return &outcomeAnswer{Record: rec, Scope: scope}, nil, ""
}

// countOutcome counts an outcome by result and reason.
func (s *Server) countOutcome(reason string) {
	result := "accepted"
	if reason != "" {
		result = "refused"
	}
	s.metrics.toolOutcomes.WithLabelValues(result, reason).Inc()
}

// newOutcomesCounter is contextrouter_tool_outcomes_total, every label
// pair present from the start.
func newOutcomesCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "tool_outcomes_total",
		Help: "Outcomes reported for shortlisted tools (POST /v1/tools/outcomes, report_tool_outcome) by result (accepted, refused) and reason of a refusal.",
	}, []string{"result", "reason"})
	c.WithLabelValues("accepted", "")
	for _, r := range outcomeReasons {
		c.WithLabelValues("refused", r)
	}
	return c
}

// handleOutcomes serves /v1/tools/outcomes: POST reports, GET lists, DELETE removes.
func (s *Server) handleOutcomes(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodHead, http.MethodDelete:
	default:
		w.Header().Set("Allow", "DELETE, GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s: use POST, GET or DELETE", r.Method, outcomesPath))
		return
	}
	established, herr := s.identify(r.Context(), r, st)
	if herr != nil {
		writeAuthError(w, herr)
		return
	}
	if r.Method == http.MethodPost {
		var req outcomeRequest
		if herr := decodeStrict(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), s.opts.MaxBodyBytes, &req, outcomeExample); herr != nil {
			s.countOutcome("bad_request")
			writeError(w, herr.code, herr.msg)
			return
		}
		ans, herr, reason := s.reportOutcome(r.Context(), st, established, req)
		s.countOutcome(reason)
		if herr != nil {
			writeError(w, herr.code, herr.msg)
			return
		}
		writeJSON(w, http.StatusOK, ans, false)
		return
	}
	f, herr := outcomeFilter(r, established)
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	ls, herr := s.learningStore()
	if herr != nil {
		writeError(w, herr.code, herr.msg)
		return
	}
	if r.Method == http.MethodDelete {
		n, err := ls.DeleteOutcomes(r.Context(), f)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, struct {
			Deleted int `json:"deleted"`
		}{n}, false)
		return
	}
	recs, err := ls.ListOutcomes(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Outcomes []learning.Record `json:"outcomes"`
	}{recs}, false)
}

// outcomeFilter reads the query of GET and DELETE: agent, source, tool,
// id; DELETE needs tool or id, so no request removes everything at once
// by accident.
func outcomeFilter(r *http.Request, established string) (learning.Filter, *httpError) {
	q := r.URL.Query()
	for name, vs := range q {
		switch name {
		case "agent", "source", "tool", "id":
			if len(vs) > 1 {
				return learning.Filter{}, errorf(http.StatusBadRequest, "%s is given %d times", name, len(vs))
			}
		default:
			return learning.Filter{}, errorf(http.StatusBadRequest, "unknown query parameter %q: outcomes take agent, source, tool and id", name)
		}
	}
	agent, herr := settleAgent(established, q.Get("agent"))
	if herr != nil {
		return learning.Filter{}, herr
	}
	f := learning.Filter{Agent: agent, Source: q.Get("source"), Tool: q.Get("tool"), ID: q.Get("id")}
	if r.Method == http.MethodDelete && f.Tool == "" && f.ID == "" {
		return f, errorf(http.StatusBadRequest, "DELETE %s needs tool (all of a tool's learned outcomes) or id (one)", outcomesPath)
	}
	return f, nil
}

// addMCPOutcome registers report_tool_outcome.
func (s *Server) addMCPOutcome(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolReport,
		Title:       "Report tool outcome",
		Description: "Tells the router whether a shortlisted tool served a question (outcome success or failure), so that later shortlists of this agent rank it better or worse. Send the question as text, or the request_id of the find_tools or get_context answer.",
		InputSchema: reportOutcomeSchema,
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: new(bool)},
	}, s.mcpHandler(mcpToolReport, s.mcpReportOutcome))
}

var reportOutcomeSchema = objectSchema("tool",
	`"text": {"type": "string", "description": "The question the tool was used for (or request_id)."}`,
	`"request_id": {"type": "string", "description": "The request_id of the find_tools or get_context answer that shortlisted the tool (its X-Request-Id over HTTP), or text."}`,
	`"tool": {"type": "string", "description": "The tool's id, as in its card."}`,
	`"source": {"type": "string", "description": "The card's source, when two sources have a tool of that id."}`,
	`"outcome": {"type": "string", "enum": ["success", "failure"], "description": "Whether the tool served the question."}`,
	argAgent)

// mcpReportOutcome is report_tool_outcome: POST /v1/tools/outcomes over MCP.
func (s *Server) mcpReportOutcome(ctx context.Context, call *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, string) {
	var req outcomeRequest
	st, established, herr := s.mcpCaller(call, &req, outcomeExample)
	if herr != nil {
		if herr.code == http.StatusBadRequest || herr.code == http.StatusRequestEntityTooLarge {
			s.countOutcome("bad_request")
		}
		return toolFailure(herr)
	}
	ans, herr, reason := s.reportOutcome(ctx, st, established, req)
	s.countOutcome(reason)
	if herr != nil {
		return toolFailure(herr)
	}
	return jsonResult(ans)
}

// answerID is the request id of an answer (the audit's when it recorded
// one, else the caller's X-Request-Id or a new one), remembered with the
// question when the answer has tool cards, so an outcome can name it.
func (s *Server) answerID(h http.Header, audited, agent, text string, cards int) string {
	id := audited
	if id == "" {
		id = requestID(h)
	}
	if cards > 0 {
		s.rememberAnswer(id, agent, text)
	}
	return id
}
