package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// headerTransport adds fixed headers to every request of the SDK's client.
type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session with the server's /mcp endpoint, as an
// agent's MCP client does (the SDK's).
func (ts *testServer) mcpConnect(header http.Header) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: ts.url + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{header}}, MaxRetries: -1,
	}, nil)
	if err == nil {
		ts.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// getContext calls get_context and returns the result, failing on a
// protocol error (a tool error is a result).
func getContext(t *testing.T, cs *mcp.ClientSession, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_context", Arguments: args})
	if err != nil {
		t.Fatalf("get_context: %v", err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// withoutTiming drops evaluation_time_ms, the one field two answers to the
// same request do not share.
func withoutTiming(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	delete(m, "evaluation_time_ms")
	return m
}

const mcpPermission = `apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: no-wiki}
spec:
  agents: [bot]
  allowSources: [notes]
---
`

// get_context answers what POST /v1/query answers, and refuses what it
// refuses with the same message.
func TestMCPGetContext(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), mcpPermission+inlineManifests("v1", "notes", "wiki"))
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"describe_tool", "drilldown", "find_tools", "get_context", "report_tool_outcome"}) {
		t.Errorf("tools/list: %v", names)
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		// code is the HTTP API's status for the same request.
		code int
	}{
		{"plain", map[string]any{"text": "deploy checklist"}, 200},
		{"an agent the permissions restrict", map[string]any{"text": "deploy checklist", "agent": "bot", "max_tokens": 40}, 200},
		{"every field", map[string]any{"text": "vacation policy", "agent": "x", "tags": []string{"hr"}, "metadata": map[string]string{"team": "a"}, "max_tokens": 500, "max_chunks": 1}, 200},
		{"text too long", map[string]any{"text": strings.Repeat("x", engine.MaxTextBytes+1)}, 400},
		{"no text", map[string]any{}, 400},
		{"unknown field", map[string]any{"text": "x", "question": "y"}, 400},
		{"wrong type", map[string]any{"text": "x", "max_tokens": "many"}, 400},
		{"too many tags", map[string]any{"text": "x", "tags": make([]string, 65)}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(tc.args)
			code, want := ts.do(http.MethodPost, "/v1/query", bytes.NewReader(body), nil)
			if code != tc.code {
				t.Fatalf("HTTP %d %s, want %d", code, want, tc.code)
			}
			res := getContext(t, cs, tc.args)
			if tc.code != 200 {
				var e errorBody
				_ = json.Unmarshal(want, &e)
				if !res.IsError || resultText(res) != e.Error {
					t.Fatalf("tool result %v %q, want the error %q", res.IsError, resultText(res), e.Error)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error: %s", resultText(res))
			}
			got, _ := json.Marshal(res.StructuredContent)
			g, w := withoutTiming(t, got), withoutTiming(t, want)
			// The answer's request id, which HTTP sends as X-Request-Id.
			if id, _ := g["request_id"].(string); id == "" {
				t.Errorf("structured content without request_id: %s", got)
			}
			delete(g, "request_id")
			if fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("structured content\n%s\nwant the HTTP answer\n%s", got, want)
			}
			var resp engine.Response
			_ = json.Unmarshal(want, &resp)
			if resultText(res) != resp.Text || resp.Text == "" && tc.name == "plain" {
				t.Errorf("text content %q, want %q", resultText(res), resp.Text)
			}
		})
	}
	for result, want := range map[string]float64{"success": 3, "refused": 5} {
		if got, _ := ts.metric("contextrouter_mcp_tool_calls_total", "tool", "get_context", "result", result); got != want {
			t.Errorf("mcp_tool_calls_total{result=%s} = %v, want %v", result, got, want)
		}
	}
	if got, _ := ts.metric("contextrouter_http_requests_total", "handler", "mcp", "code", "200"); got < 9 {
		t.Errorf("http_requests_total{handler=mcp,code=200} = %v, want every call counted", got)
	}
}

// A sidecar's pinned agent cannot be overridden by the tool argument.
func TestMCPPinnedAgent(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), mcpPermission+inlineManifests("v1", "notes", "wiki"))
	ts := startServer(t, Options{Paths: []string{dir}, Agent: "bot"})
	ts.waitReady()
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := getContext(t, cs, map[string]any{"text": "deploy checklist", "agent": "admin"})
	if !res.IsError || resultText(res) != `agent "admin" is not allowed: this router identifies the caller as agent "bot"` {
		t.Errorf("naming another agent: %v %q", res.IsError, resultText(res))
	}
	for _, args := range []map[string]any{{"text": "deploy checklist"}, {"text": "deploy checklist", "agent": "bot"}} {
		res = getContext(t, cs, args)
		var resp engine.Response
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &resp); err != nil || res.IsError {
			t.Fatalf("%v: %s", err, resultText(res))
		}
		if !slices.Equal(resp.DeniedSources, []string{"wiki"}) {
			t.Errorf("answered as another agent than bot: denied_sources %v", resp.DeniedSources)
		}
	}
}

// An MCP source in serve: its sync loop follows the server's
// notifications/tools/list_changed at once (not after the interval) and
// asks for a rebuild; a failing server is counted and logged, never with a
// credential.
func TestServeSyncsMCPSources(t *testing.T) {
	const secret = "mcp-k3y-s3cret"
	var upstream *mcp.Server
	upstream = mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "v1"}, nil)
	addTool := func(name string) {
		upstream.AddTool(&mcp.Tool{Name: name, Description: "Tool " + name + ".", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	addTool("search_code")
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstream }, nil)
	broken := make(chan struct{})
	// streams counts the requests that open a notification stream: the
	// standalone GET, or subscriptions/listen in newer protocol versions.
	var streams atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodGet || bytes.Contains(body, []byte(`"subscriptions/listen"`)) {
			streams.Add(1)
		}
		select {
		case <-broken:
			http.Error(w, "denied "+r.Header.Get("X-Api-Key"), http.StatusUnauthorized)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(up.Close) // after the router stops: it holds a stream open
	userURL := strings.Replace(up.URL, "http://", "http://robot:url-pa55word@", 1)

	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes", "gh"))
	interval := time.Hour
	// The manifests' loader does not know type MCP yet (its validation
	// lands with the API change), so the source "gh" is opened as one.
	open := func(spec *v1alpha1.ContextSource, env sources.Env) (sources.Source, error) {
		if spec.Name != "gh" {
			return sources.New(spec, env)
		}
		mcpSpec := &v1alpha1.ContextSource{ObjectMeta: spec.ObjectMeta, Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP,
			MCP: &v1alpha1.MCPSource{URL: userURL, Interval: &metav1.Duration{Duration: interval},
				Headers: []v1alpha1.HTTPHeader{{Name: "X-Api-Key", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.SecretKeySelector{Name: "gh", Key: "key"}}}}}}}
		return sources.New(mcpSpec, env)
	}
	getenv := func(k string) string {
		if k == "CONTEXTROUTER_SECRET_GH_KEY" {
			return secret
		}
		return ""
	}
	ts := startServer(t, Options{Paths: []string{dir}, Engine: engine.Options{Open: open, Getenv: getenv}})
	ts.waitReady()
	catalog := func() []string {
		src, _ := ts.srv.Snapshot().Source("gh").(sources.ToolSource)
		if src == nil {
			t.Fatal("source gh is not a tool source")
		}
		tools, _ := src.LoadTools(context.Background())
		var ids []string
		for _, tool := range tools {
			ids = append(ids, tool.ID())
		}
		return ids
	}
	if got := catalog(); !slices.Equal(got, []string{"search_code"}) {
		t.Fatalf("first catalog %v", got)
	}
	// The loop's first sync opens the session notifications arrive on.
	eventually(t, 10*time.Second, "the notification stream", func() bool { return streams.Load() >= 1 })
	rebuilds := strings.Count(ts.logs.String(), "trigger=sources")
	addTool("merge_pr")
	eventually(t, 10*time.Second, "the catalog after list_changed", func() bool {
		return slices.Equal(catalog(), []string{"merge_pr", "search_code"})
	})
	eventually(t, 10*time.Second, "a rebuild after the change", func() bool {
		return strings.Count(ts.logs.String(), "trigger=sources") > rebuilds
	})

	// A server that refuses: the next sync (on a notification) fails, is
	// counted and logged, and the catalog stays.
	close(broken)
	addTool("close_issue") // notifies over the open stream
	// The listing comes sources.MCPMinRelist after the previous one.
	eventually(t, sources.MCPMinRelist+20*time.Second, "a counted failure", func() bool {
		n, _ := ts.metric("contextrouter_mcp_sync_failures_total", "source", "gh")
		return n >= 1
	})
	if got := catalog(); !slices.Equal(got, []string{"merge_pr", "search_code"}) {
		t.Errorf("catalog after the failure %v, want the last good one", got)
	}
	_, metrics := ts.get("/metrics")
	_, status := ts.get("/v1/status")
	for what, text := range map[string]string{"the log": ts.logs.String(), "/metrics": string(metrics), "/v1/status": string(status)} {
		for _, s := range []string{secret, "url-pa55word", "robot"} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %q:\n%s", what, s, grepLines(text, s))
			}
		}
	}
	if !strings.Contains(ts.logs.String(), "MCP listing failed; serving the last good catalog") || !strings.Contains(ts.logs.String(), "HTTP 401 Unauthorized") {
		t.Errorf("the log does not report the failed listing:\n%s", ts.logs.String())
	}
}

// callTool calls a tool of the endpoint, failing on a protocol error (a
// tool error is a result).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// find_tools answers what POST /v1/tools answers; describe_tool gives the
// schema of a tool the agent may use and nothing about the others.
func TestMCPFindAndDescribeTools(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"text": "create an invoice for a customer", "max_tools": 2}`
	code, want, raw := postTools(t, ts, body)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/tools: %d %s", code, raw)
	}
	res := callTool(t, cs, "find_tools", map[string]any{"text": "create an invoice for a customer", "max_tools": 2})
	if res.IsError {
		t.Fatalf("find_tools: %s", resultText(res))
	}
	var got engine.ToolsResponse
	if err := json.Unmarshal([]byte(resultText(res)), &got); err != nil {
		t.Fatal(err)
	}
	if !sameCards(got.Tools, want.Tools) || got.Stats.Tools != want.Stats.Tools || len(got.Tools) != 2 {
		t.Errorf("find_tools %+v, POST /v1/tools %+v", got.Tools, want.Tools)
	}
	if strings.Contains(resultText(res), "inputSchema") {
		t.Errorf("a card holds the schema: %s", resultText(res))
	}
	// explain: every card says why.
	res = callTool(t, cs, "find_tools", map[string]any{"text": "create an invoice for a customer", "max_tools": 2, "explain": true})
	var explained engine.ToolsResponse
	if err := json.Unmarshal([]byte(resultText(res)), &explained); err != nil || len(explained.Tools) != 2 {
		t.Fatalf("find_tools explain: %v %s", err, resultText(res))
	}
	for _, c := range explained.Tools {
		if c.Explain == nil || len(c.Explain.Terms) == 0 || c.Explain.Evidence.Words == 0 {
			t.Errorf("find_tools explain: card %s explains %+v", c.Name, c.Explain)
		}
	}
	if res := callTool(t, cs, "find_tools", map[string]any{"text": "x", "max_tools": 101}); !res.IsError || !strings.Contains(resultText(res), "max_tools") {
		t.Errorf("max_tools past the bound: %s", resultText(res))
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		// want is in the answer; refused means a tool error.
		want    string
		refused bool
	}{
		{"schema of a usable tool", map[string]any{"name": "billing.invoices.create_invoice"}, `"required":["customer"]`, false},
		{"a tool without a schema gets the empty object schema", map[string]any{"name": "billing.invoices.list_invoices"}, `"inputSchema":{"type":"object"}`, false},
		{"with its source", map[string]any{"name": "crm.find_customer", "source": "file-tools"}, `"source":"file-tools"`, false},
		{"the wrong source", map[string]any{"name": "crm.find_customer", "source": "billing-tools"}, "not found", true},
		{"no such tool", map[string]any{"name": "billing.nope"}, "not found", true},
		// support-bot: at most Write, nothing tagged financial.
		{"denied by the side-effect limit", map[string]any{"name": "billing.invoices.delete_invoice", "agent": "support-bot"}, "not found", true},
		{"denied by a safety tag", map[string]any{"name": "billing.invoices.create_invoice", "agent": "support-bot"}, "not found", true},
		{"allowed to that agent", map[string]any{"name": "billing.invoices.list_invoices", "agent": "support-bot"}, `"id":"billing.invoices.list_invoices"`, false},
		{"no name", map[string]any{}, "describe_tool takes name", true},
		// The one agent check of the other tools (settleAgent), not a copy.
		{"agent past its bound", map[string]any{"name": "billing.invoices.list_invoices", "agent": strings.Repeat("a", 254)}, "bad request: agent is 254 bytes; it is limited to 253 bytes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := callTool(t, cs, "describe_tool", tc.args)
			if res.IsError != tc.refused || !strings.Contains(resultText(res), tc.want) {
				t.Errorf("describe_tool %v: error %v, %s; want error %v and %q", tc.args, res.IsError, resultText(res), tc.refused, tc.want)
			}
		})
	}
}

// mcpToolArgs are valid arguments of each tool of the endpoint.
var mcpToolArgs = map[string]map[string]any{
	"get_context":   {"text": "create an invoice"},
	"find_tools":    {"text": "create an invoice"},
	"describe_tool": {"name": "billing.invoices.create_invoice"},
	"drilldown":     {"ref": "sha256:" + strings.Repeat("0", 64)},
}

// mcpToolCalls reads contextrouter_mcp_tool_calls_total of each tool and
// result from /metrics, as a scraper does.
func mcpToolCalls(t *testing.T, ts *testServer) map[string]string {
	t.Helper()
	code, b := ts.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, b)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "contextrouter_mcp_tool_calls_total{"); ok {
			labels, value, _ := strings.Cut(rest, "} ")
			got[labels] = value
		}
	}
	return got
}

// TestMCPToolOutcomes: every tool decodes its arguments with the one strict
// decoder (an unknown argument is a tool error naming it, as the HTTP API's
// body error says it), and counts each kind of outcome under one label,
// whichever tool: a refused call "refused", a call while no configuration
// serves "failure" (get_context and find_tools said "refused", describe_tool
// a message of its own; issue 23).
func TestMCPToolOutcomes(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, args := range mcpToolArgs {
		t.Run("unknown argument to "+name, func(t *testing.T) {
			bad := maps.Clone(args)
			bad["bogus"] = 1
			res := callTool(t, cs, name, bad)
			if msg := `invalid request body: unknown field "bogus"`; !res.IsError || resultText(res) != msg {
				t.Errorf("%s: %v %q, want the tool error %q", name, res.IsError, resultText(res), msg)
			}
		})
		want[`result="refused",tool="`+name+`"`] = "1"
	}
	if got := mcpToolCalls(t, ts); !maps.Equal(got, want) {
		t.Errorf("mcp_tool_calls_total after unknown arguments:\n%v\nwant\n%v", got, want)
	}

	// Not ready: /mcp answers 503 before any tool runs, so the tools' own
	// check is reached in process, as a call let in just before would.
	file := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes")+"kind: Unknown\n")
	nr := startServer(t, Options{Paths: []string{file}})
	eventually(t, 10*time.Second, "a failed first load", func() bool { return nr.status().LastReloadError != "" })
	ctx := context.Background()
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := nr.srv.newMCPServer().Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	ncs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ncs.Close() })
	want = map[string]string{}
	for name, args := range mcpToolArgs {
		res := callTool(t, ncs, name, args)
		if !res.IsError || !strings.HasPrefix(resultText(res), "no configuration is serving: ") {
			t.Errorf("%s while not ready: %v %q, want the not-ready message", name, res.IsError, resultText(res))
		}
		want[`result="failure",tool="`+name+`"`] = "1"
	}
	if got := mcpToolCalls(t, nr); !maps.Equal(got, want) {
		t.Errorf("mcp_tool_calls_total while not ready:\n%v\nwant\n%v", got, want)
	}
}

// postMCP posts one raw body to /mcp as a streamable HTTP client does.
func (ts *testServer) postMCP(body string, header http.Header) (int, string) {
	ts.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	for k, v := range header {
		h[k] = v
	}
	code, b := ts.do(http.MethodPost, "/mcp", strings.NewReader(body), h)
	return code, string(b)
}

// jsonrpcError is a JSON-RPC error answer.
type jsonrpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// decodeJSONRPCError reads a refusal: a JSON-RPC error with id null.
func decodeJSONRPCError(t *testing.T, code int, body string) jsonrpcError {
	t.Helper()
	var e jsonrpcError
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusBadRequest || e.JSONRPC != "2.0" ||
		string(e.ID) != "null" || e.Error.Code != -32600 {
		t.Fatalf("%d %s: want 400 with a JSON-RPC error -32600 and id null (%v)", code, body, err)
	}
	return e
}

// A JSON-RPC batch is refused whole, before any call runs: no tool is
// called, nothing is delivered or audited. One request per POST still works.
func TestMCPRefusesBatches(t *testing.T) {
	dir := auditQuickstart(t, "    enabled: true\n")
	var out syncBuffer
	ts := startServer(t, Options{Paths: []string{dir}, AuditOutput: &out})
	ts.waitReady()
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "get_context", "arguments": {"text": "vacation days", "agent": "hr-assistant"}}}`, id)
	}
	batch := func(n int) string {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = call(i + 1)
		}
		return " \n[" + strings.Join(calls, ",") + "]"
	}
	for _, tc := range []struct {
		name, body string
		header     http.Header
	}{
		{"500 calls, no protocol version (2025-03-26 had batches)", batch(500), nil},
		{"500 calls, 2025-03-26", batch(500), http.Header{"Mcp-Protocol-Version": {"2025-03-26"}}},
		{"one call", batch(1), nil},
		{"2025-06-18", batch(2), http.Header{"Mcp-Protocol-Version": {"2025-06-18"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := ts.postMCP(tc.body, tc.header)
			if e := decodeJSONRPCError(t, code, body); !strings.Contains(e.Error.Message, "batches are not supported") {
				t.Errorf("message %q", e.Error.Message)
			}
		})
	}
	ts.flushAudit()
	if v, ok := ts.metric("contextrouter_mcp_tool_calls_total", "tool", "get_context"); ok || v != 0 {
		t.Errorf("mcp_tool_calls_total{tool=get_context} = %v: a batch ran", v)
	}
	if out.String() != "" {
		t.Errorf("a refused batch was audited:\n%.500s", out.String())
	}

	code, body := ts.postMCP(call(7), nil)
	if code != http.StatusOK || !strings.Contains(body, `"id":7`) || !strings.Contains(body, `hr-docs`) {
		t.Fatalf("one call: %d %.300s", code, body)
	}
	ts.flushAudit()
	if recs := readAudit(t, []byte(out.String())); len(recs) != 1 || recs[0].Endpoint != "mcp:get_context" {
		t.Errorf("one call audited as %+v", recs)
	}
}

// A request's id comes back exactly as sent, or the request is refused: the
// SDK reads numbers as float64 into int64, so an id it would change (2^64
// came back as -2^63) is a JSON-RPC error, not a different id.
func TestMCPRequestIDs(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes"))
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	for _, tc := range []struct {
		id      string
		refused bool
	}{
		{`1`, false},
		{`0`, false},
		{`-7`, false},
		{`9007199254740991`, false},  // 2^53-1
		{`-9007199254740991`, false}, // -(2^53-1)
		{`"18446744073709551616"`, false},
		{`"a \"quoted\" id"`, false},
		{`18446744073709551616`, true}, // 2^64
		{`9223372036854775808`, true},  // 2^63
		{`9007199254740993`, true},     // 2^53+1: a float64 rounds it to 2^53
		{`9007199254740992`, true},     // 2^53
		{`-18446744073709551616`, true},
		{`1.5`, true},
		{`1e3`, true},
		{`12345678901234567890123456789012345678901234567890123456789012345678901234567890`, true},
	} {
		t.Run(tc.id, func(t *testing.T) {
			code, body := ts.postMCP(`{"jsonrpc": "2.0", "id": `+tc.id+`, "method": "tools/list"}`, nil)
			if tc.refused {
				e := decodeJSONRPCError(t, code, body)
				if !strings.Contains(e.Error.Message, "could not be echoed exactly") || len(e.Error.Message) > 200 {
					t.Errorf("message %q", e.Error.Message)
				}
				return
			}
			var resp struct {
				ID     json.RawMessage `json:"id"`
				Result struct{ Tools []any }
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK {
				t.Fatalf("%d %s: %v", code, body, err)
			}
			if string(resp.ID) != tc.id || len(resp.Result.Tools) != 5 {
				t.Errorf("id %s answered with id %s and %d tools: %.200s", tc.id, resp.ID, len(resp.Result.Tools), body)
			}
		})
	}
}
