package server

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

// TestSessionDrillViews is the issue 18 check over HTTP and MCP: a session
// whose tool result is a 400-line log with the error on its last line. The
// pack shows the tail and lists the artifact by ref only; view=lines from
// the end and view=grep reach the last line; bad parameters are 400s
// naming them.
func TestSessionDrillViews(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{"../../examples/quickstart"}})
	ts.waitReady()
	const agent = "eng-assistant"
	log := sessiontest.BuildLog(400)
	last := "2026-03-02T10:06:39Z ERROR payment-service: connection refused (dial tcp 10.0.3.7:5432)"
	ts.mustCall(200, "POST", "/v1/sessions/ci-1/items", sessionItems{Agent: agent, Items: []session.Item{
		{ID: "u1", Kind: session.KindUserTurn, Text: "why did the build fail?"},
		{ID: "c7", Kind: session.KindToolCall, Text: "ci.build_log(job=42)"},
		{ID: "r7", Kind: session.KindToolResult, ParentID: "c7", Text: log},
	}}, nil)
	out := ts.mustCall(200, "POST", "/v1/sessions/ci-1/context", map[string]any{"agent": agent, "phase": "interpret"}, nil)
	p := decodePack(t, out)
	ref := session.ArtifactRef(log)
	if len(p.Artifacts) != 1 || p.Artifacts[0].Ref != ref || p.Artifacts[0].Lines != 400 || p.Stats.Firewall.Bytes != len(log) {
		t.Fatalf("artifacts %+v, stats.firewall %+v", p.Artifacts, p.Stats.Firewall)
	}
	if !strings.Contains(p.Text, "  L400: "+last+"\n") || !strings.Contains(p.Text, "signals:\n  L212: ") {
		t.Errorf("the summary lacks the tail's error or the signal line:\n%s", p.Text)
	}
	if strings.Contains(out, "module-200") || len(out) > 8000 {
		t.Errorf("the pack holds the log's text (%d bytes)", len(out))
	}

	get := func(params url.Values) (int, string) {
		params.Set("agent", agent)
		return ts.sessionCall("GET", "/v1/artifacts/"+ref+"?"+params.Encode(), nil, nil)
	}
	var d session.Drill
	code, body := get(url.Values{"view": {"lines"}, "from": {"-3"}})
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil || d.From != 398 || d.To != 400 || len(d.Content) != 3 || d.Content[2] != last || d.Next != nil {
		t.Fatalf("view=lines&from=-3: %d %s", code, body)
	}
	code, body = get(url.Values{"view": {"grep"}, "pattern": {"ERROR"}})
	d = session.Drill{}
	if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil || *d.TotalMatches != 1 || d.Matches[0].Line != 400 || d.Matches[0].Text != last {
		t.Fatalf("view=grep&pattern=ERROR: %d %s", code, body)
	}
	for _, tc := range []struct {
		name   string
		params url.Values
		code   int
		want   string
	}{
		{"a range past the end", url.Values{"view": {"lines"}, "from": {"399"}, "to": {"450"}}, 200, `"from":399,"to":400,"content":["` + "2026-03-02T10:06:38Z step 399/400: compile module-399\",\"" + last + `"],"note":"the artifact has 400 lines; answered 399–400"`},
		{"next range", url.Values{"view": {"lines"}, "from": {"1"}, "to": {"2"}}, 200, `"next":{"from":3,"to":4}`},
		{"grep with context", url.Values{"view": {"grep"}, "pattern": {"(?i)fail"}, "context": {"1"}}, 200, `"matches":[{"line":212,"text":"2026-03-02T10:03:31Z WARN retry 1/3 failed: timeout","before":["2026-03-02T10:03:30Z step 211/400: compile module-211"],"after":["2026-03-02T10:03:32Z step 213/400: compile module-213"]}],"total_matches":1`},
		{"literal grep", url.Values{"view": {"grep"}, "pattern": {"(dial tcp"}, "literal": {"true"}}, 200, `"total_matches":1`},
		{"from 0", url.Values{"view": {"lines"}, "from": {"0"}}, 400, `from: 0 is not a line number`},
		{"from not a number", url.Values{"view": {"lines"}, "from": {"last"}}, 400, `from: \"last\" is not an integer`},
		{"from past the end", url.Values{"view": {"lines"}, "from": {"401"}}, 400, `from 401 is past the end: the artifact has 400 lines`},
		{"from after to", url.Values{"view": {"lines"}, "from": {"10"}, "to": {"5"}}, 400, `from 10 is after to 5`},
		{"from twice", url.Values{"view": {"lines"}, "from": {"1", "2"}}, 400, `from is given 2 times; give it once`},
		{"from for head", url.Values{"from": {"1"}}, 400, `from applies to view=lines only`},
		{"bad pattern", url.Values{"view": {"grep"}, "pattern": {"a(b"}}, 400, `pattern \"a(b\" is not RE2: missing closing ) in \"a(b\"`},
		{"pattern too long", url.Values{"view": {"grep"}, "pattern": {strings.Repeat("p", 1025)}}, 400, `pattern is 1025 bytes; it is limited to 1024 bytes`},
		{"no pattern", url.Values{"view": {"grep"}}, 400, `view=grep needs a pattern`},
		{"context past the bound", url.Values{"view": {"grep"}, "pattern": {"x"}, "context": {"11"}}, 400, `context is 11; it must be between 0 and 10`},
		{"max 0", url.Values{"view": {"grep"}, "pattern": {"x"}, "max": {"0"}}, 400, `max is 0; it must be between 1 and 200`},
		{"max past the bound", url.Values{"view": {"grep"}, "pattern": {"x"}, "max": {"201"}}, 400, `max is 201; it must be between 1 and 200`},
		{"literal not a boolean", url.Values{"view": {"grep"}, "pattern": {"x"}, "literal": {"yes"}}, 400, `literal: \"yes\" must be true or false`},
		{"an unknown parameter", url.Values{"view": {"lines"}, "offset": {"3"}}, 400, `unknown query parameter \"offset\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.params)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s\nwant %d with %s", code, body, tc.code, tc.want)
			}
		})
	}

	// The MCP drilldown tool takes the same arguments, strictly.
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		args["ref"], args["agent"] = ref, agent
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "drilldown", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		http url.Values
	}{
		{"lines", map[string]any{"view": "lines", "from": -3}, url.Values{"view": {"lines"}, "from": {"-3"}}},
		{"grep", map[string]any{"view": "grep", "pattern": "(?i)error|fail", "context": 2, "max": 1}, url.Values{"view": {"grep"}, "pattern": {"(?i)error|fail"}, "context": {"2"}, "max": {"1"}}},
		{"literal", map[string]any{"view": "grep", "pattern": "1/3", "literal": true}, url.Values{"view": {"grep"}, "pattern": {"1/3"}, "literal": {"true"}}},
	} {
		t.Run("mcp "+tc.name, func(t *testing.T) {
			res := call(tc.args)
			code, body := get(tc.http)
			if res.IsError || code != 200 || resultText(res)+"\n" != body {
				t.Fatalf("drilldown: %s\nHTTP: %s", resultText(res), body)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"bad pattern", map[string]any{"view": "grep", "pattern": "x[z-a]"}, `pattern "x[z-a]" is not RE2: invalid character class range in "z-a"`},
		{"from past the end", map[string]any{"view": "lines", "from": 500}, "from 500 is past the end: the artifact has 400 lines"},
		{"context past the bound", map[string]any{"view": "grep", "pattern": "x", "context": 11}, "context is 11; it must be between 0 and 10"},
		{"an argument of another view", map[string]any{"view": "json", "to": 3}, "to applies to view=lines only"},
		{"an unknown argument", map[string]any{"view": "lines", "offset": 3}, `unknown field "offset"`},
		{"from not a number", map[string]any{"view": "lines", "from": "-3"}, "cannot unmarshal string into Go struct field drilldownArgs.from of type int"},
	} {
		t.Run("mcp "+tc.name, func(t *testing.T) {
			res := call(tc.args)
			if !res.IsError || !strings.Contains(resultText(res), tc.want) {
				t.Fatalf("%v %s, want an error with %s", res.IsError, resultText(res), tc.want)
			}
		})
	}
}

// TestSessionKeepOnServe: serve's packs apply the router's
// spec.sessions.firewall.keep.
func TestSessionKeepOnServe(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../examples/quickstart")); err != nil {
		t.Fatal(err)
	}
	router := filepath.Join(dir, "router.yaml")
	raw, err := os.ReadFile(router)
	if err != nil {
		t.Fatal(err)
	}
	keep := "spec:\n  sessions:\n    firewall:\n      keep:\n        - tools: [\"hr.*\"]\n          paths: [\".remaining_days\", \".requests[1]\"]\n"
	if err := os.WriteFile(router, []byte(strings.Replace(string(raw), "spec:\n", keep, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	ts.mustCall(200, "POST", "/v1/sessions/k/items", sessionItems{Agent: "hr-assistant", Items: []session.Item{
		{ID: "c1", Kind: session.KindToolCall, Text: `hr.leave_balance(employee="e-1042")`},
		{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: bigBalance},
	}}, nil)
	p := decodePack(t, ts.mustCall(200, "POST", "/v1/sessions/k/context", map[string]any{"agent": "hr-assistant", "phase": "interpret"}, nil))
	if len(p.Artifacts) != 1 || !strings.Contains(p.Text, "\nkeep: .remaining_days = 19\nkeep: .requests[1] = {\"id\":\"pto-1\",\"days\":2}\n") {
		t.Fatalf("the pack lacks the kept paths:\n%s", p.Text)
	}
}
