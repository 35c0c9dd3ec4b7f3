package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// An empty tool answer says why, over HTTP and in MCP find_tools, as
// structured content and as JSON text (issue 20 item 4).
func TestFindToolsSaysWhyEmpty(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text, want string
	}{
		{"zebra tuba quantum", engine.ToolsNoMatch},
		{"create an invoice for a customer", ""},
	} {
		t.Run(tc.text, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"text": tc.text})
			code, resp, raw := postTools(t, ts, string(body))
			if code != http.StatusOK || resp.Stats.Tools.Reason != tc.want || (len(resp.Tools) == 0) != (tc.want != "") {
				t.Errorf("POST /v1/tools: %d %s; want reason %q", code, raw, tc.want)
			}
			res := callTool(t, cs, "find_tools", map[string]any{"text": tc.text})
			var text, structured engine.ToolsResponse
			b, _ := json.Marshal(res.StructuredContent)
			if res.IsError || json.Unmarshal([]byte(resultText(res)), &text) != nil || json.Unmarshal(b, &structured) != nil {
				t.Fatalf("find_tools: %s", resultText(res))
			}
			if text.Stats.Tools != resp.Stats.Tools || structured.Stats.Tools != resp.Stats.Tools {
				t.Errorf("find_tools stats.tools: text %+v, structured %+v; POST /v1/tools %+v", text.Stats.Tools, structured.Stats.Tools, resp.Stats.Tools)
			}
		})
	}
}
