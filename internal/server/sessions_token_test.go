package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextrouter/contextrouter/internal/session"
)

// Sessions in auth.mode ServiceAccountToken against a real API server: the
// token's ServiceAccount owns the sessions it creates; another agent's token
// gets 403 on them and finds none of their artifacts.
func TestSessionsTokenMode(t *testing.T) {
	c := newTokenCluster(t)
	hr, intruder := c.token(agentsNamespace, "hr-assistant", Audience), c.token(agentsNamespace, "intruder", Audience)
	dir, kube := c.routerDir(), c.kube(nil)
	ts := startServer(t, Options{Paths: []string{dir}, Kube: kube})
	ts.waitReady()
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	ts.mustCall(200, "POST", "/v1/sessions/s1/items", `{"items": [{"id": "r", "kind": "tool_result", "text": `+jsonString(bigBalance)+`}]}`, bearer(hr))
	ref := session.ArtifactRef(bigBalance)
	ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?view=json&path=.employee", nil, bearer(hr))
	ts.mustCall(200, "POST", "/v1/sessions/s1/context", `{"phase": "interpret"}`, bearer(hr))
	for _, tc := range []struct {
		name, method, path, body string
		header                   http.Header
		code                     int
		want                     string
	}{
		{"no token", "POST", "/v1/sessions/s1/context", `{"phase": "answer"}`, nil, 401, "requires an `Authorization: Bearer <token>` header"},
		{"garbage token", "POST", "/v1/sessions/s1/items", `{"items": [{"id": "x", "kind": "user_turn"}]}`, bearer("nope"), 401, "token rejected"},
		{"another agent writes", "POST", "/v1/sessions/s1/items", `{"items": [{"id": "x", "kind": "user_turn"}]}`, bearer(intruder), 403, `session \"s1\" belongs to another agent`},
		{"another agent packs", "POST", "/v1/sessions/s1/context", `{"phase": "answer"}`, bearer(intruder), 403, `session \"s1\" belongs to another agent`},
		{"another agent deletes", "DELETE", "/v1/sessions/s1", ``, bearer(intruder), 403, `belongs to another agent`},
		{"another agent's artifact", "GET", "/v1/artifacts/" + ref, ``, bearer(intruder), 404, "not found in this agent's sessions"},
		{"naming the owner", "POST", "/v1/sessions/s1/context", `{"phase": "answer", "agent": "hr-assistant"}`, bearer(intruder), 403, `agent \"hr-assistant\" is not allowed: this router identifies the caller as agent \"intruder\"`},
		{"artifact naming the owner", "GET", "/v1/artifacts/" + ref + "?agent=hr-assistant", ``, bearer(intruder), 403, `agent \"hr-assistant\" is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := ts.sessionCall(tc.method, tc.path, tc.body, tc.header)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("%d %s\nwant %d with %s", code, out, tc.code, tc.want)
			}
		})
	}
	// drilldown over MCP: the token's agent, the same answers.
	for _, tc := range []struct {
		name, token, want string
		isError           bool
	}{
		{"owner", hr, `"value":"e-1042"`, false},
		{"another agent", intruder, "not found in this agent's sessions", true},
	} {
		t.Run("mcp "+tc.name, func(t *testing.T) {
			cs, err := ts.mcpConnect(bearer(tc.token))
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "drilldown", Arguments: map[string]any{"ref": ref, "view": "json", "path": ".employee"}})
			if err != nil || res.IsError != tc.isError || !strings.Contains(resultText(res), tc.want) {
				t.Fatalf("%v %v %s, want %s", err, res.IsError, resultText(res), tc.want)
			}
		})
	}
	ts.mustCall(204, "DELETE", "/v1/sessions/s1", nil, bearer(hr))
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
