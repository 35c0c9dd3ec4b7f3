package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/session/redisstore/redistest"
)

// outcomeManifests is an ops catalog routed to every question; carol may
// not use the weather tool; teacher may teach. SCOPE is the learning scope.
const outcomeManifests = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: ops}
spec:
  defaultAccess: Allow
  tools: {topK: 3, learning: {scope: SCOPE}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: ops-tools}
spec:
  type: Tools
  tools:
    catalog:
    - {name: weather_forecast, description: Forecast of the weather for a city., sideEffects: Read}
    - {name: flight_search, description: Search flights between two cities., sideEffects: Read}
    - {name: hotel_booking, description: Book a hotel room in a city., sideEffects: Write}
    - {name: page_oncall, description: Page the engineer on call., sideEffects: Write}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: ops}
spec:
  sources: [{name: ops-tools}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: carol}
spec:
  agents: [carol]
  default: Allow
  tools: {deny: [weather_forecast]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: teacher}
spec:
  agents: [teacher]
  default: Allow
  tools: {teach: true}
`

func outcomeServer(t *testing.T, scope string, opts Options) *testServer {
	t.Helper()
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), strings.Replace(outcomeManifests, "SCOPE", scope, 1))
	opts.Paths = []string{dir}
	ts := startServer(t, opts)
	ts.waitReady()
	return ts
}

func report(t *testing.T, ts *testServer, body string) (int, string) {
	t.Helper()
	code, b := ts.do(http.MethodPost, outcomesPath, strings.NewReader(body), nil)
	return code, string(b)
}

// firstTool is the first card's name for the agent's question ("" none).
func firstTool(t *testing.T, ts *testServer, agent, text string) string {
	t.Helper()
	_, resp, raw := postTools(t, ts, fmt.Sprintf(`{"text": %q, "agent": %q}`, text, agent))
	if len(resp.Tools) == 0 {
		return ""
	}
	_ = raw
	return resp.Tools[0].Name
}

const umbrella = "will I need an umbrella in Lisbon"

// A success teaches the reporting agent only (scope Agent); GET lists it,
// DELETE removes it; an outcome for a tool the agent may not use is
// refused and changes nothing; request_id names an earlier answer.
func TestOutcomesAgentScope(t *testing.T) {
	ts := outcomeServer(t, "Agent", Options{})
	if got := firstTool(t, ts, "alice", umbrella); got != "" {
		t.Fatalf("before learning alice gets %q, want no card", got)
	}
	code, raw := report(t, ts, `{"text": "do I need an umbrella tomorrow in Porto", "tool": "weather_forecast", "outcome": "success", "agent": "alice"}`)
	if code != http.StatusOK {
		t.Fatalf("report: %d %s", code, raw)
	}
	var ans outcomeAnswer
	if err := json.Unmarshal([]byte(raw), &ans); err != nil || ans.Scope != "Agent" || ans.Owner != "alice" || ans.Source != "ops-tools" || ans.ID == "" {
		t.Fatalf("answer %s (%v)", raw, err)
	}
	if got := firstTool(t, ts, "alice", umbrella); got != "weather_forecast" {
		t.Errorf("after learning alice gets %q, want weather_forecast", got)
	}
	if got := firstTool(t, ts, "bob", umbrella); got != "" {
		t.Errorf("bob gets %q from alice's outcome, want no card", got)
	}
	if q := ts.query(engineRequest(umbrella, "alice")); len(q.Tools) == 0 || q.Tools[0].Name != "weather_forecast" {
		t.Errorf("POST /v1/query for alice: %+v, want weather_forecast first", q.Tools)
	}

	// Carol may not use the tool: refused, nothing stored.
	code, raw = report(t, ts, `{"text": "umbrella in Porto", "tool": "weather_forecast", "outcome": "success", "agent": "carol"}`)
	if code != http.StatusForbidden || !strings.Contains(raw, `tool \"weather_forecast\" is not a tool agent \"carol\" may use; nothing was learned`) {
		t.Errorf("carol: %d %s", code, raw)
	}
	if v, _ := ts.metric("contextrouter_tool_outcomes_total", "result", "refused", "reason", "not_usable"); v != 1 {
		t.Errorf("refused not_usable = %v, want 1", v)
	}
	if code, b := ts.get(outcomesPath + "?agent=carol"); code != 200 || strings.TrimSpace(string(b)) != `{"outcomes":[]}` {
		t.Errorf("carol's list: %d %s", code, b)
	}

	// Bad requests name the field.
	for _, c := range []struct{ body, want string }{
		{`{"tool": "weather_forecast", "outcome": "success", "agent": "alice"}`, "send exactly one of text and request_id"},
		{`{"text": "x", "tool": "weather_forecast", "outcome": "maybe", "agent": "alice"}`, `outcome: \"maybe\" must be success or failure`},
		{fmt.Sprintf(`{"text": %q, "tool": "weather_forecast", "outcome": "success", "agent": "alice"}`, strings.Repeat("a ", 600)), "text is 1200 bytes; learned questions are limited to 1024 bytes"},
		{`{"text": "x", "tool": "weather_forecast", "outcome": "success", "agent": "alice", "extra": 1}`, `unknown field \"extra\"`},
	} {
		if code, raw := report(t, ts, c.body); code != http.StatusBadRequest || !strings.Contains(raw, c.want) {
			t.Errorf("%s: %d %s, want 400 %s", c.body, code, raw, c.want)
		}
	}

	// request_id: the answer's X-Request-Id names its question.
	resp, _ := ts.request(http.MethodPost, "/v1/tools", strings.NewReader(`{"text": "book a hotel room in Lisbon", "agent": "alice"}`), nil)
	rid := resp.Header.Get(RequestIDHeader)
	if rid == "" {
		t.Fatal("no X-Request-Id on a tools answer")
	}
	if code, raw := report(t, ts, fmt.Sprintf(`{"request_id": %q, "tool": "hotel_booking", "outcome": "success", "agent": "bob"}`, rid)); code != http.StatusNotFound {
		t.Errorf("another agent's request_id: %d %s, want 404", code, raw)
	}
	code, raw = report(t, ts, fmt.Sprintf(`{"request_id": %q, "tool": "hotel_booking", "outcome": "success", "agent": "alice"}`, rid))
	if code != 200 || !strings.Contains(raw, `"text":"book a hotel room in Lisbon"`) {
		t.Errorf("request_id: %d %s", code, raw)
	}

	// GET lists, DELETE removes a tool's.
	code, b := ts.get(outcomesPath + "?agent=alice&tool=weather_forecast")
	var list struct{ Outcomes []learning.Record }
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Outcomes) != 1 || list.Outcomes[0].Text != "do I need an umbrella tomorrow in Porto" {
		t.Fatalf("GET: %d %s", code, b)
	}
	if code, b := ts.do(http.MethodDelete, outcomesPath+"?agent=alice", nil, nil); code != 400 {
		t.Errorf("DELETE without tool or id: %d %s", code, b)
	}
	if code, b := ts.do(http.MethodDelete, outcomesPath+"?agent=alice&tool=weather_forecast", nil, nil); code != 200 || strings.TrimSpace(string(b)) != `{"deleted":1}` {
		t.Errorf("DELETE: %d %s", code, b)
	}
	// (The hotel question learned above shares "in Lisbon".)
	if got := firstTool(t, ts, "alice", umbrella); got == "weather_forecast" {
		t.Errorf("after DELETE alice still gets weather_forecast")
	}
	if code, _ := ts.do(http.MethodPut, outcomesPath, nil, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: %d, want 405", code)
	}
}

// Past learning.PerMinute outcomes of one agent in a minute: 429.
func TestOutcomesRate(t *testing.T) {
	ts := outcomeServer(t, "Agent", Options{})
	refused := 0
	// Two minutes' worth and one: a minute boundary crossed once still
	// leaves a refusal.
	for i := range 2*learning.PerMinute + 1 {
		code, raw := report(t, ts, fmt.Sprintf(`{"text": "flights to city %d", "tool": "flight_search", "outcome": "success", "agent": "alice"}`, i%learning.DefaultBounds.PerTool))
		if code == http.StatusTooManyRequests {
			refused++
			if !strings.Contains(raw, "outcomes this minute, the limit") {
				t.Errorf("429 says %s", raw)
			}
		}
	}
	if refused == 0 {
		t.Fatalf("no 429 in %d outcomes", 2*learning.PerMinute+1)
	}
	if v, _ := ts.metric("contextrouter_tool_outcomes_total", "result", "refused", "reason", "rate"); v != float64(refused) {
		t.Errorf("refused rate = %v, want %d", v, refused)
	}
	// Another agent has its own budget.
	if code, raw := report(t, ts, `{"text": "flights", "tool": "flight_search", "outcome": "success", "agent": "bob"}`); code != 200 {
		t.Errorf("bob: %d %s", code, raw)
	}
}

// newMinute lets the server's rate window start again, as a minute passing does.
func newMinute(ts *testServer) {
	ts.srv.outcomes.mu.Lock()
	ts.srv.outcomes.minute = -1
	ts.srv.outcomes.mu.Unlock()
}

var poisonQuestions = []string{umbrella, "book a hotel room in Paris", "search flights from Lisbon to Paris", "page the engineer on call", "forecast for tomorrow in the city"}

func answers(t *testing.T, ts *testServer, agent string) []string {
	var out []string
	for _, q := range poisonQuestions {
		_, _, raw := postTools(t, ts, fmt.Sprintf(`{"text": %q, "agent": %q}`, q, agent))
		out = append(out, raw)
	}
	return out
}

// Poisoning: 200 wrong outcomes from mallory change nothing of alice's
// answers in scope Agent, and are refused from a non-teaching agent in
// scope Shared.
func TestOutcomesPoisoning(t *testing.T) {
	wrong := func(i int) string {
		return fmt.Sprintf(`{"text": %q, "tool": "page_oncall", "outcome": "success", "agent": "mallory"}`, fmt.Sprintf("%s %d", poisonQuestions[i%len(poisonQuestions)], i))
	}
	t.Run("Agent", func(t *testing.T) {
		ts := outcomeServer(t, "Agent", Options{})
		before := answers(t, ts, "alice")
		accepted := 0
		for i := range 200 {
			if i%50 == 0 {
				newMinute(ts)
			}
			if code, raw := report(t, ts, wrong(i)); code == 200 {
				accepted++
			} else if !strings.Contains(raw, "page_oncall") {
				t.Logf("%d %s", code, raw)
			}
		}
		if accepted != learning.DefaultBounds.PerTool {
			t.Errorf("accepted %d of mallory's outcomes, want %d (the per-tool bound)", accepted, learning.DefaultBounds.PerTool)
		}
		if got := firstTool(t, ts, "mallory", "book a hotel room in Paris"); got != "page_oncall" {
			t.Errorf("mallory's own shortlist: %q, want page_oncall (it learned)", got)
		}
		if after := answers(t, ts, "alice"); !reflect.DeepEqual(before, after) {
			t.Errorf("alice's answers changed:\n%v\n%v", before, after)
		}
	})
	t.Run("Shared", func(t *testing.T) {
		ts := outcomeServer(t, "Shared", Options{})
		before := answers(t, ts, "alice")
		for i := range 200 {
			if i%50 == 0 {
				newMinute(ts)
			}
			code, raw := report(t, ts, wrong(i))
			if code != http.StatusForbidden || !strings.Contains(raw, `agent \"mallory\" may not teach`) {
				t.Fatalf("mallory's outcome %d: %d %s, want 403", i, code, raw)
			}
		}
		if v, _ := ts.metric("contextrouter_tool_outcomes_total", "result", "refused", "reason", "not_teacher"); v != 200 {
			t.Errorf("refused not_teacher = %v, want 200", v)
		}
		if after := answers(t, ts, "alice"); !reflect.DeepEqual(before, after) {
			t.Errorf("alice's answers changed")
		}
		// A teacher's outcome helps every agent.
		if code, raw := report(t, ts, `{"text": "do I need an umbrella tomorrow in Porto", "tool": "weather_forecast", "outcome": "success", "agent": "teacher"}`); code != 200 || !strings.Contains(raw, `"scope":"Shared"`) {
			t.Fatalf("teacher: %d %s", code, raw)
		}
		if got := firstTool(t, ts, "alice", umbrella); got != "weather_forecast" {
			t.Errorf("alice after the teacher's outcome: %q", got)
		}
		// ... but never a tool the agent may not use.
		if got := firstTool(t, ts, "carol", umbrella); got == "weather_forecast" {
			t.Errorf("carol got a tool she may not use")
		}
	})
}

// report_tool_outcome is POST /v1/tools/outcomes over MCP.
func TestMCPReportToolOutcome(t *testing.T) {
	ts := outcomeServer(t, "Agent", Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := callTool(t, cs, mcpToolReport, map[string]any{"text": "do I need an umbrella tomorrow in Porto", "tool": "weather_forecast", "outcome": "success", "agent": "alice"})
	if res.IsError {
		t.Fatalf("report_tool_outcome: %+v", res.Content)
	}
	if got := firstTool(t, ts, "alice", umbrella); got != "weather_forecast" {
		t.Errorf("after the MCP report alice gets %q", got)
	}
	res = callTool(t, cs, mcpToolReport, map[string]any{"text": "umbrella", "tool": "weather_forecast", "outcome": "success", "agent": "carol"})
	if !res.IsError {
		t.Errorf("carol's report was accepted")
	}
	if v, _ := ts.metric("contextrouter_mcp_tool_calls_total", "tool", mcpToolReport, "result", "refused"); v != 1 {
		t.Errorf("refused calls = %v", v)
	}
}

// find_tools and get_context answers carry their request id (structured
// content and text), which report_tool_outcome takes: the question of that
// answer is learned and listed; an id of no answer is refused.
func TestMCPReportOutcomeByRequestID(t *testing.T) {
	ts := outcomeServer(t, "Agent", Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	// answerID reads a tool result's request id, in structured content and
	// in its text parts.
	answerID := func(t *testing.T, res *mcp.CallToolResult) string {
		t.Helper()
		if res.IsError {
			t.Fatalf("tool error: %+v", res.Content)
		}
		var sc struct {
			RequestID string `json:"request_id"`
			Tools     []engine.ToolCard
		}
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &sc); err != nil || sc.RequestID == "" || len(sc.Tools) == 0 {
			t.Fatalf("structured content %s: no request_id or no cards (%v)", b, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if !strings.Contains(text.String(), sc.RequestID) {
			t.Errorf("the text parts do not carry request_id %s: %s", sc.RequestID, text.String())
		}
		return sc.RequestID
	}
	listed := func(t *testing.T, agent string) []learning.Record {
		t.Helper()
		code, b := ts.get(outcomesPath + "?agent=" + agent)
		var list struct{ Outcomes []learning.Record }
		if code != http.StatusOK || json.Unmarshal(b, &list) != nil {
			t.Fatalf("GET: %d %s", code, b)
		}
		return list.Outcomes
	}

	tests := []struct {
		name, tool, text, card string
	}{
		{"find_tools", mcpToolFindTools, "book a hotel room in Lisbon", "hotel_booking"},
		{"get_context", mcpToolGetContext, "search flights from Porto to Lisbon", "flight_search"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rid := answerID(t, callTool(t, cs, tt.tool, map[string]any{"text": tt.text, "agent": "alice"}))
			res := callTool(t, cs, mcpToolReport, map[string]any{"request_id": rid, "tool": tt.card, "outcome": "success", "agent": "alice"})
			if res.IsError {
				t.Fatalf("report_tool_outcome by request_id: %+v", res.Content)
			}
			var ans outcomeAnswer
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &ans); err != nil || ans.Tool != tt.card || ans.ID == "" {
				t.Errorf("answer %s (%v)", b, err)
			}
			found := false
			for _, r := range listed(t, "alice") {
				found = found || (r.Text == tt.text && r.Tool == tt.card && r.Outcome == learning.Success)
			}
			if !found {
				t.Errorf("GET /v1/tools/outcomes does not list %q for %s: %+v", tt.text, tt.card, listed(t, "alice"))
			}
		})
	}

	before := len(listed(t, "alice"))
	res := callTool(t, cs, mcpToolReport, map[string]any{"request_id": "no-such-answer", "tool": "hotel_booking", "outcome": "success", "agent": "alice"})
	if msg := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(msg, `request_id "no-such-answer" names no recent answer of agent "alice"`) {
		t.Errorf("unknown request_id: %+v", res.Content)
	}
	if after := len(listed(t, "alice")); after != before {
		t.Errorf("an unknown request_id changed the outcomes: %d, then %d", before, after)
	}
}

func engineRequest(text, agent string) engine.Request {
	return engine.Request{Text: text, Agent: agent}
}

// Two replicas of a router whose spec.sessions names Redis learn from one
// outcome together: reported to one, it re-ranks the other's answers, and
// DELETE on the other removes it for both.
func TestOutcomesRedisReplicas(t *testing.T) {
	rs := redistest.Start(t, redistest.Config{})
	dir := t.TempDir()
	m := strings.Replace(outcomeManifests, "SCOPE", "Agent", 1)
	m = strings.Replace(m, "  tools: {topK: 3,", "  sessions: {store: Redis, redis: {address: \""+rs.Addr+"\"}}\n  tools: {topK: 3,", 1)
	writeAtomic(t, filepath.Join(dir, "router.yaml"), m)
	opts := Options{Paths: []string{dir}}
	a, b := startServer(t, opts), startServer(t, opts)
	a.waitReady()
	b.waitReady()
	if code, raw := report(t, a, `{"text": "do I need an umbrella tomorrow in Porto", "tool": "weather_forecast", "outcome": "success", "agent": "alice"}`); code != 200 {
		t.Fatalf("report: %d %s", code, raw)
	}
	if got := firstTool(t, b, "alice", umbrella); got != "weather_forecast" {
		t.Errorf("the other replica gives alice %q, want weather_forecast", got)
	}
	if got := firstTool(t, b, "bob", umbrella); got != "" {
		t.Errorf("bob gets %q", got)
	}
	if code, body := b.do(http.MethodDelete, outcomesPath+"?agent=alice&tool=weather_forecast", nil, nil); code != 200 || strings.TrimSpace(string(body)) != `{"deleted":1}` {
		t.Fatalf("DELETE on the other replica: %d %s", code, body)
	}
	if got := firstTool(t, a, "alice", umbrella); got != "" {
		t.Errorf("after DELETE the first replica gives alice %q", got)
	}
}
