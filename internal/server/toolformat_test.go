package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// openAIDefinition is one Chat Completions function tool.
type openAIDefinition struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

// toolsWithDefinitions is a POST /v1/tools answer read with its definitions.
type toolsWithDefinitions struct {
	Tools       []engine.ToolCard `json:"tools"`
	Definitions struct {
		Format  string                    `json:"format"`
		Tools   []json.RawMessage         `json:"tools"`
		Names   map[string]engine.ToolRef `json:"names"`
		Omitted []engine.OmittedTool      `json:"omitted"`
	} `json:"definitions"`
}

// POST /v1/tools with format: the cards as function definitions with their
// parameters, for the tools the agent may use only.
func TestToolsEndpointFormat(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	code, b := ts.do(http.MethodPost, "/v1/tools", strings.NewReader(`{"text": "create an invoice for a customer", "max_tools": 2, "format": "openai"}`), nil)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	var resp toolsWithDefinitions
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	d := resp.Definitions
	if d.Format != "openai" || len(d.Tools) != 2 || len(resp.Tools) != 2 || len(d.Omitted) != 0 {
		t.Fatalf("definitions = %+v for cards %+v", d, resp.Tools)
	}
	var first openAIDefinition
	if err := json.Unmarshal(d.Tools[0], &first); err != nil {
		t.Fatal(err)
	}
	f := first.Function
	wantParams := map[string]any{"type": "object", "properties": map[string]any{"customer": map[string]any{"type": "string"}}, "required": []any{"customer"}}
	if first.Type != "function" || f.Name != "billing_invoices__create_invoice" || f.Description != "Create an invoice for a customer and send it by e-mail." || !jsonEqual(f.Parameters, wantParams) {
		t.Errorf("first definition = %s", d.Tools[0])
	}
	if ref := d.Names[f.Name]; ref != (engine.ToolRef{ID: "billing.invoices.create_invoice", Source: "billing-tools"}) {
		t.Errorf("names[%q] = %+v", f.Name, ref)
	}
	// The cards are those of the answer without format.
	_, plain, _ := postTools(t, ts, `{"text": "create an invoice for a customer", "max_tools": 2}`)
	if !sameCards(plain.Tools, resp.Tools) {
		t.Errorf("cards with format %+v, without %+v", resp.Tools, plain.Tools)
	}

	// support-bot may not use the financial create_invoice nor the
	// destructive delete_invoice: no card, no definition, no name.
	code, b = ts.do(http.MethodPost, "/v1/tools", strings.NewReader(`{"text": "create or delete an invoice of a customer", "agent": "support-bot", "max_tools": 10, "format": "anthropic"}`), nil)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, b)
	}
	var bot toolsWithDefinitions
	if err := json.Unmarshal(b, &bot); err != nil {
		t.Fatal(err)
	}
	if len(bot.Definitions.Tools) == 0 || len(bot.Definitions.Tools) != len(bot.Tools) {
		t.Fatalf("support-bot: %d definitions for %d cards: %s", len(bot.Definitions.Tools), len(bot.Tools), b)
	}
	for _, denied := range []string{"create_invoice", "delete_invoice"} {
		if strings.Contains(string(b), denied) {
			t.Errorf("support-bot's answer names the denied %s: %s", denied, b)
		}
	}
	for _, raw := range bot.Definitions.Tools {
		var a struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.InputSchema["type"] != "object" || bot.Definitions.Names[a.Name].ID == "" {
			t.Errorf("anthropic definition %s (names %v)", raw, bot.Definitions.Names)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestToolsEndpointFormatErrors(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	tests := []struct {
		name, path, body, want string
	}{
		{"an unknown format", "/v1/tools", `{"text": "invoice", "format": "gemini"}`, `bad request: format \"gemini\" is not one of openai, openai-responses, anthropic`},
		{"a format of the wrong type", "/v1/tools", `{"text": "invoice", "format": 1}`, `format`},
		{"a query answers no definitions", "/v1/query", `{"text": "invoice", "format": "openai"}`, `bad request: format: a query answers no tool definitions; ask POST /v1/tools (MCP find_tools) for them`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := ts.do(http.MethodPost, tt.path, strings.NewReader(tt.body), nil)
			if code != http.StatusBadRequest || !strings.Contains(string(b), tt.want) {
				t.Errorf("%s %s: %d %s; want 400 with %q", tt.path, tt.body, code, b, tt.want)
			}
		})
	}
}

// find_tools with format answers what POST /v1/tools answers; a bad format
// is a tool error, as is a format on get_context.
func TestMCPFindToolsFormat(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	cs, err := ts.mcpConnect(nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name != "find_tools" {
			continue
		}
		b, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties struct {
				Format struct {
					Enum []string `json:"enum"`
				} `json:"format"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil || !slices.Equal(schema.Properties.Format.Enum, engine.ToolFormats) {
			t.Errorf("find_tools' format = %s, want the enum %q", b, engine.ToolFormats)
		}
	}
	for _, format := range engine.ToolFormats {
		args := map[string]any{"text": "create an invoice for a customer", "max_tools": 3, "agent": "support-bot", "format": format}
		res := callTool(t, cs, "find_tools", args)
		if res.IsError {
			t.Fatalf("find_tools %s: %s", format, resultText(res))
		}
		body, _ := json.Marshal(args)
		code, b := ts.do(http.MethodPost, "/v1/tools", strings.NewReader(string(body)), nil)
		if code != http.StatusOK {
			t.Fatalf("POST /v1/tools: %d %s", code, b)
		}
		var got, want toolsWithDefinitions
		if err := json.Unmarshal([]byte(resultText(res)), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if got.Definitions.Format != format || len(got.Definitions.Tools) == 0 || !jsonEqual(got.Definitions, want.Definitions) {
			t.Errorf("%s: find_tools definitions %+v, POST /v1/tools %+v", format, got.Definitions, want.Definitions)
		}
		if strings.Contains(resultText(res), "create_invoice") {
			t.Errorf("%s: support-bot's find_tools names the denied create_invoice: %s", format, resultText(res))
		}
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"find_tools", map[string]any{"text": "invoice", "format": "gemini"}, `bad request: format "gemini" is not one of openai, openai-responses, anthropic`},
		{"get_context", map[string]any{"text": "invoice", "format": "openai"}, "a query answers no tool definitions"},
	} {
		if res := callTool(t, cs, tc.tool, tc.args); !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("%s %v: error %v, %s; want a tool error with %q", tc.tool, tc.args, res.IsError, resultText(res), tc.want)
		}
	}
}
