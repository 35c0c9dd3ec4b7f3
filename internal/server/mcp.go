package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The /mcp endpoint (api.md §10.6): the router as an MCP server over
// streamable HTTP. It is stateless (every POST stands alone, as a query
// does), so each request is authenticated as POST /v1/query is and no
// session can carry one caller's identity to another.

// MCP tool names of the endpoint.
const (
	mcpToolGetContext   = "get_context"
	mcpToolFindTools    = "find_tools"
	mcpToolDescribeTool = "describe_tool"
)

// mcpAgentKey carries the agent a request's token identifies from the
// authentication in front of the SDK's handler to the token verifier the
// SDK calls, which hands it to the tools as TokenInfo.UserID.
type mcpAgentKey struct{}

// newMCPHandler builds the /mcp endpoint.
func (s *Server) newMCPHandler() http.Handler {
	srv := s.newMCPServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
	})
	return s.guardMCP(h)
}

// newMCPServer is the MCP server of the endpoint and its tools.
func (s *Server) newMCPServer() *mcp.Server {
	version := s.opts.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "contextrouter", Version: version}, &mcp.ServerOptions{
		Instructions: "Call get_context with the user's question to get the documents this agent may read that fit it; find_tools to shortlist the tools that fit it, and describe_tool for the input schema of the one to call; drilldown reads the parts of a tool result that a context pack stored as an artifact.",
	})
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolGetContext,
		Title:       "Get context",
		Description: "Returns the documents that fit a question or task, within a token budget, from the sources the agent may read (the answer of POST /v1/query): the joined text, and the chunks with their sources and scores.",
		InputSchema: getContextSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, s.mcpHandler(mcpToolGetContext, s.getContext))
	s.addMCPToolTools(srv)
	s.addMCPDrilldown(srv)
	s.addMCPOutcome(srv)
	return srv
}

// guardMCP puts the endpoint's own checks in front of the SDK's handler h:
// readiness, the caller's token, and admitMCP.
func (s *Server) guardMCP(h http.Handler) http.Handler {
	// The SDK passes TokenInfo to tools only from its own middleware; the
	// token was checked already, so its verifier hands over the agent.
	withAgent := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		agent, _ := ctx.Value(mcpAgentKey{}).(string)
		if agent == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: agent, Expiration: time.Now().Add(time.Minute)}, nil
	}, nil)(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.state.Load()
		if st == nil {
			writeError(w, http.StatusServiceUnavailable, s.notReadyMessage())
			return
		}
		if !st.tokens || s.opts.Agent != "" {
			if s.admitMCP(w, r) {
				h.ServeHTTP(w, r)
			}
			return
		}
		agent, herr := s.tokenAgent(r.Context(), r, st.cfg.Router.Namespace)
		if herr != nil {
			writeAuthError(w, herr)
			return
		}
		if s.admitMCP(w, r) {
			withAgent.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpAgentKey{}, agent)))
		}
	})
}

// JSON-RPC error codes the endpoint answers itself.
const jsonrpcInvalidRequest = -32600

// maxExactID is the largest JSON-RPC id number the SDK echoes exactly: it
// reads a number as a float64 and sends back its int64, so 2^64 came back
// as -2^63 and 2^53+1 as 2^53.
const maxExactID = 1<<53 - 1

// admitMCP reads a POST's body (up to --max-body-size) and refuses, before
// any call runs, what the SDK would mishandle: a JSON-RPC batch (the MCP
// transport since 2025-06-18 has none, and one request could carry
// thousands of calls) and an id it could not echo exactly. It hands the
// body on to the SDK; false means it answered.
func (s *Server) admitMCP(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes (--max-body-size)", tooLarge.Limit))
		} else {
			writeError(w, http.StatusBadRequest, "cannot read the request body")
		}
		return false
	}
	if msg := mcpRefusal(body); msg != "" {
		// As the MCP transport asks: an HTTP error, with a JSON-RPC error
		// without id (none can be echoed) as its body.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		type rpcError struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		b, _ := json.Marshal(struct {
			JSONRPC string   `json:"jsonrpc"`
			ID      *int     `json:"id"`
			Error   rpcError `json:"error"`
		}{"2.0", nil, rpcError{jsonrpcInvalidRequest, msg}})
		_, _ = w.Write(b)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// mcpRefusal is why a JSON-RPC message is refused ("" = pass it on; the SDK
// reports malformed ones).
func mcpRefusal(body []byte) string {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return "invalid request: JSON-RPC batches are not supported; send one request per POST"
	}
	id := jsonrpcID(body)
	if len(id) == 0 || id[0] == '"' || string(id) == "null" {
		return ""
	}
	if n, err := strconv.ParseInt(string(id), 10, 64); err != nil || n > maxExactID || n < -maxExactID {
		return fmt.Sprintf("invalid request: id %.64s is not a string or an integer between -%d and %d, so it could not be echoed exactly", id, maxExactID, maxExactID)
	}
	return ""
}

// jsonrpcID is the raw value of a JSON object's "id" member as the SDK
// reads it (the key exactly; the last of several wins), or nil.
func jsonrpcID(body []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			id = v
		}
	}
	return id
}

// addMCPToolTools registers find_tools and describe_tool (api.md §10.6).
func (s *Server) addMCPToolTools(srv *mcp.Server) {
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolFindTools,
		Title:       "Find tools",
		Description: "Shortlists the tools that fit a question or task among those this agent may use: choice cards with name, namespace, source, description, score, confidence and side effects, never the input schema (ask describe_tool for it). With format (openai, openai-responses, anthropic) it adds the cards as that provider's tool definitions, input schemas included, and the map from their names back to the tools.",
		InputSchema: findToolsSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, s.mcpHandler(mcpToolFindTools, s.findTools))
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolDescribeTool,
		Title:       "Describe tool",
		Description: "Returns one tool's full entry, its input schema included, if this agent may use it.",
		InputSchema: describeToolSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, s.mcpHandler(mcpToolDescribeTool, s.describeTool))
}

// findTools is find_tools: POST /v1/tools over MCP.
func (s *Server) findTools(ctx context.Context, call *mcp.CallToolRequest, start time.Time) (*mcp.CallToolResult, string) {
	st, req, herr := s.mcpRequest(call)
	if herr == nil {
		var resp *engine.ToolsResponse
		if resp, herr = s.runFindTools(ctx, st, req, start); herr == nil {
			d := toolsDelivery("mcp:find_tools", req, resp)
			h := callHeader(call)
			id := s.answerID(h, s.deliver(h, st, &d, start), req.Agent, req.Text, len(resp.Tools))
			return jsonResult(withRequestID{resp, id})
		}
	}
	return toolFailure(herr)
}

// withRequestID is a find_tools answer with its request id, which
// report_tool_outcome takes (api.md §10.10): an MCP result has no headers.
type withRequestID struct {
	*engine.ToolsResponse
	RequestID string `json:"request_id"`
}

// jsonResult answers a tool call with v, as structured content and as JSON text.
func jsonResult(v any) (*mcp.CallToolResult, string) {
	b, err := json.Marshal(v)
	if err != nil {
		return toolError("internal error: encoding the answer"), outcomeFailure
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, outcomeSuccess
}

// The outcomes of a tool call, the result label of mcp_tool_calls_total:
// one label per kind of outcome, whichever tool (api.md §10.6).
const (
	outcomeSuccess = "success"
	// outcomeRefused: the call cannot be answered as made (4xx): bad or
	// unknown arguments, no identity, another agent, nothing found.
	outcomeRefused = "refused"
	// outcomeFailure: the router could not answer (5xx): not ready, a
	// timeout, a store unavailable or full, an internal error.
	outcomeFailure = "failure"
)

// toolFailure answers a tool call with the HTTP API's error for the same
// request: its message as the tool error, its status as the outcome.
func toolFailure(herr *httpError) (*mcp.CallToolResult, string) {
	if herr.code >= http.StatusInternalServerError {
		return toolError(herr.msg), outcomeFailure
	}
	return toolError(herr.msg), outcomeRefused
}

// mcpCaller settles the state and the established agent of a tool call,
// and decodes its arguments into args strictly (decodeArgs).
func (s *Server) mcpCaller(call *mcp.CallToolRequest, args any, example string) (*state, string, *httpError) {
	st := s.state.Load()
	if st == nil {
		return nil, "", errorf(http.StatusServiceUnavailable, "%s", s.notReadyMessage())
	}
	established, herr := s.mcpIdentity(call, st)
	if herr == nil {
		herr = s.decodeArgs(call, args, example)
	}
	if herr != nil {
		return nil, "", herr
	}
	return st, established, nil
}

// decodeArgs is the one decoder of every tool's arguments: as strict as a
// request body (decodeStrict), so an unknown or mistyped argument is a tool
// error that names it; no arguments are an empty object.
func (s *Server) decodeArgs(call *mcp.CallToolRequest, v any, example string) *httpError {
	args := call.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	return decodeStrict(bytes.NewReader(args), s.opts.MaxBodyBytes, v, example)
}

// describeExample is describe_tool's arguments as its errors show them.
const describeExample = `{"name": "hr.leave_balance"}`

// describeArgs are describe_tool's arguments.
type describeArgs struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

// describeTool is describe_tool: a tool's full entry, if the agent may use
// it; any other tool is "not found", whether it exists or not.
func (s *Server) describeTool(_ context.Context, call *mcp.CallToolRequest, _ time.Time) (*mcp.CallToolResult, string) {
	var args describeArgs
	st, established, herr := s.mcpCaller(call, &args, describeExample)
	if herr == nil && args.Name == "" {
		herr = errorf(http.StatusBadRequest, "name: required: describe_tool takes name (a tool id), and optionally source and agent, such as %s", describeExample)
	}
	var agent string
	if herr == nil {
		agent, herr = settleAgent(established, args.Agent)
	}
	if herr != nil {
		return toolFailure(herr)
	}
	e, ok := st.snap.DescribeTool(agent, args.Source, args.Name)
	if !ok {
		return toolFailure(errorf(http.StatusNotFound, "tool %q not found among the tools this agent may use", args.Name))
	}
	t := e.Tool
	if t.InputSchema == nil {
		t.InputSchema = &apiextensionsv1.JSON{Raw: []byte(engine.DefaultInputSchema)}
	}
	return jsonResult(struct {
		Source string `json:"source"`
		ID     string `json:"id"`
		v1alpha1.Tool
	}{e.Source, t.ID(), t})
}

// mcpHandler runs a tool of the endpoint and counts its calls by result.
func (s *Server) mcpHandler(name string, call func(context.Context, *mcp.CallToolRequest, time.Time) (*mcp.CallToolResult, string)) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, result := call(ctx, req, time.Now())
		s.metrics.mcpToolCalls.WithLabelValues(name, result).Inc()
		return res, nil
	}
}

// mcpRequest settles the state, the agent and the query request of a tool
// call that runs a query (get_context, find_tools): the arguments are a
// query request, decoded as POST /v1/query decodes its body; the agent's
// bound is the query's validation.
func (s *Server) mcpRequest(call *mcp.CallToolRequest) (*state, engine.Request, *httpError) {
	var req engine.Request
	st, established, herr := s.mcpCaller(call, &req, queryExample)
	if herr == nil {
		req.Agent, herr = reconcileAgent(established, req.Agent)
	}
	return st, req, herr
}

// Argument properties of the endpoint's tools, shared where two tools take
// the same argument.
const (
	argAgent    = `"agent": {"type": "string", "description": "The agent asking; only where the router trusts callers to say who they are (auth.mode None)."}`
	argQuestion = `"text": {"type": "string", "description": "The question or task, as the user wrote it."},
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags the route conditions may read."},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Key/value pairs the route conditions may read."},
    "max_tools": {"type": "integer", "minimum": 0, "maximum": 100, "description": "At most this many tool cards (0: the router's topK)."}`
)

// objectSchema is the schema of an object with these properties, the
// required ones listed, and no others.
func objectSchema(required string, props ...string) json.RawMessage {
	return json.RawMessage(`{"type": "object", "properties": {` + strings.Join(props, ", ") +
		`}, "required": ["` + required + `"], "additionalProperties": false}`)
}

// getContextSchema is get_context's arguments: the fields of a query
// request (api.md §6.1), under the same bounds; findToolsSchema the same
// without the document fields; describeToolSchema describe_tool's.
var (
	getContextSchema = objectSchema("text", argQuestion, argAgent,
		`"max_tokens": {"type": "integer", "minimum": 0, "description": "Lowers the router's token budget."}`,
		`"max_chunks": {"type": "integer", "minimum": 0, "description": "At most this many chunks (0: no cap)."}`)
	findToolsSchema = objectSchema("text", argQuestion, argAgent,
		`"explain": {"type": "boolean", "description": "Add to every card why it scored and is trusted as it is: matched words and fields, closest example, score parts, confidence before and after calibration."}`,
		`"format": {"type": "string", "enum": ["`+strings.Join(engine.ToolFormats, `", "`)+`"], "description": "Also give the cards as this provider's tool definitions (definitions.tools, ready to send as the request's tools; definitions.names maps their names back to the tools)."}`)
	describeToolSchema = objectSchema("name",
		`"name": {"type": "string", "description": "The tool's id, as in its card: <namespace>.<name>, or the name."}`,
		`"source": {"type": "string", "description": "The card's source, when two sources have a tool of that id."}`,
		argAgent)
)

// mcpIdentity settles the agent of a tool call as identify does for HTTP:
// the pinned agent, the token's ServiceAccount, or (auth.mode None) none.
func (s *Server) mcpIdentity(req *mcp.CallToolRequest, st *state) (string, *httpError) {
	switch {
	case s.opts.Agent != "":
		return s.opts.Agent, nil
	case st.tokens:
		// Set by the handler in front; missing only when the configuration
		// began to require tokens after the request was let in.
		if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
			return req.Extra.TokenInfo.UserID, nil
		}
		return "", errorf(http.StatusUnauthorized, "this router requires an `Authorization: Bearer <token>` header with a ServiceAccount token for audience %s", Audience)
	}
	return "", nil
}

// getContext is get_context: a query, answered as POST /v1/query answers
// it (the same bytes as structured content, and its text), and refused with
// the same messages as tool errors.
func (s *Server) getContext(ctx context.Context, call *mcp.CallToolRequest, start time.Time) (*mcp.CallToolResult, string) {
	st, req, herr := s.mcpRequest(call)
	var resp *engine.Response
	if herr == nil {
		resp, herr = s.runQuery(ctx, st, req, start)
	}
	if herr != nil {
		return toolFailure(herr)
	}
	d := DeliveryFromResponse("mcp:get_context", req.Text, req.Agent, resp)
	h := callHeader(call)
	id := s.answerID(h, s.deliver(h, st, &d, start), req.Agent, req.Text, len(resp.Tools))
	content := []mcp.Content{&mcp.TextContent{Text: resp.Text}}
	if len(resp.Tools) > 0 {
		// The text is the context for the model; the id, which only an
		// answer with tool cards can be reported by, goes beside it.
		content = append(content, &mcp.TextContent{Text: "request_id: " + id})
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: json.RawMessage(withRequestIDField(appendResponse(nil, resp), id)),
	}, outcomeSuccess
}

// withRequestIDField adds "request_id" as the first member of the JSON
// object b.
func withRequestIDField(b []byte, id string) []byte {
	q, _ := json.Marshal(id)
	out := make([]byte, 0, len(b)+len(q)+16)
	out = append(out, `{"request_id":`...)
	out = append(out, q...)
	if rest := bytes.TrimSpace(b[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, b[1:]...)
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
