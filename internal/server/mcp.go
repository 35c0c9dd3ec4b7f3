package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The /mcp endpoint (api.md §10.6): the router as an MCP server over
// streamable HTTP. It is stateless (every POST stands alone, as a query
// does), so each request is authenticated as POST /v1/query is and no
// session can carry one caller's identity to another.

// MCP tool names of the endpoint.
const (
	mcpToolGetContext = "get_context"
)

// mcpAgentKey carries the agent a request's token identifies from the
// authentication in front of the SDK's handler to the token verifier the
// SDK calls, which hands it to the tools as TokenInfo.UserID.
type mcpAgentKey struct{}

// newMCPHandler builds the /mcp endpoint.
func (s *Server) newMCPHandler() http.Handler {
	version := s.opts.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "contextrouter", Version: version}, &mcp.ServerOptions{
		Instructions: "Call get_context with the user's question to get the documents this agent may read that fit it.",
	})
	srv.AddTool(&mcp.Tool{
		Name:        mcpToolGetContext,
		Title:       "Get context",
		Description: "Returns the documents that fit a question or task, within a token budget, from the sources the agent may read (the answer of POST /v1/query): the joined text, and the chunks with their sources and scores.",
		InputSchema: getContextSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)},
	}, s.mcpGetContext)
	s.addMCPToolTools(srv)

	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: s.opts.MaxBodyBytes,
	})
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
			h.ServeHTTP(w, r)
			return
		}
		agent, herr := s.tokenAgent(r.Context(), r, st.cfg.Router.Namespace)
		if herr != nil {
			writeAuthError(w, herr)
			return
		}
		withAgent.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpAgentKey{}, agent)))
	})
}

// addMCPToolTools registers find_tools and describe_tool (api.md §10.6) on
// the endpoint. They need the engine's tool selection (Snapshot.FindTools,
// DescribeTool), which lands in another change: this is where they plug in.
func (s *Server) addMCPToolTools(*mcp.Server) {}

// getContextSchema is get_context's arguments: the fields of a query
// request (api.md §6.1), under the same bounds.
var getContextSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The question or task, as the user wrote it."},
    "agent": {"type": "string", "description": "The agent asking; only where the router trusts callers to say who they are (auth.mode None)."},
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags the route conditions may read."},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Key/value pairs the route conditions may read."},
    "max_tokens": {"type": "integer", "minimum": 0, "description": "Lowers the router's token budget."},
    "max_chunks": {"type": "integer", "minimum": 0, "description": "At most this many chunks (0: no cap)."}
  },
  "required": ["text"],
  "additionalProperties": false
}`)

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

// mcpGetContext is get_context: a query, answered as POST /v1/query
// answers it (the same bytes as structured content, and its text), and
// refused with the same messages as tool errors.
func (s *Server) mcpGetContext(ctx context.Context, call *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, result := s.getContext(ctx, call, start)
	s.metrics.mcpToolCalls.WithLabelValues(mcpToolGetContext, result).Inc()
	return res, nil
}

func (s *Server) getContext(ctx context.Context, call *mcp.CallToolRequest, start time.Time) (*mcp.CallToolResult, string) {
	st := s.state.Load()
	if st == nil {
		return toolError(s.notReadyMessage()), "failure"
	}
	established, herr := s.mcpIdentity(call, st)
	if herr != nil {
		return toolError(herr.msg), "refused"
	}
	args := call.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	req, herr := decodeQuery(bytes.NewReader(args), s.opts.MaxBodyBytes)
	if herr == nil {
		req.Agent, herr = reconcileAgent(established, req.Agent)
	}
	if herr != nil {
		return toolError(herr.msg), "refused"
	}
	resp, herr := s.runQuery(ctx, st, req, start)
	if herr != nil {
		result := "failure"
		if herr.code == http.StatusBadRequest {
			result = "refused"
		}
		return toolError(herr.msg), result
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: resp.Text}},
		StructuredContent: json.RawMessage(appendResponse(nil, resp)),
	}, "success"
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
