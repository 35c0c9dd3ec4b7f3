package engine

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// Provider formats of a shortlist (api.md §10.8): the cards as the tool
// definitions an LLM provider's API takes, ready to send as its "tools".
const (
	// FormatOpenAI is OpenAI Chat Completions' function tool.
	FormatOpenAI = "openai"
	// FormatOpenAIResponses is the OpenAI Responses API's function tool.
	FormatOpenAIResponses = "openai-responses"
	// FormatAnthropic is the Anthropic Messages API's (custom) tool.
	FormatAnthropic = "anthropic"
)

// ToolFormats are the values a request's format may take, in the order
// errors list them.
var ToolFormats = []string{FormatOpenAI, FormatOpenAIResponses, FormatAnthropic}

// DefaultInputSchema is the input schema of a tool whose catalog entry has
// none (api.md §10.1).
const DefaultInputSchema = `{"type":"object"}`

// toolFormat is what differs between providers.
type toolFormat struct {
	// provider names the provider in reasons.
	provider string
	// refused are the keywords the provider refuses at the top level of an
	// input schema (the whole request fails on one such tool).
	refused []string
	// define makes one definition.
	define func(name, description string, schema json.RawMessage) any
}

// The definitions' shapes, as npm openai 7.59.0 (ChatCompletionFunctionTool,
// FunctionDefinition; Responses FunctionTool) and @anthropic-ai/sdk 1.14.0
// (Tool) type them.
type (
	openAITool struct {
		Type     string         `json:"type"`
		Function openAIFunction `json:"function"`
	}
	openAIFunction struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	openAIResponsesTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		// Strict is false: strict mode holds the model to a subset of JSON
		// Schema that catalogs are rarely written for.
		Strict bool `json:"strict"`
	}
	anthropicTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

var toolFormats = map[string]toolFormat{
	FormatOpenAI: {
		provider: "OpenAI",
		refused:  []string{"oneOf", "anyOf", "allOf", "enum", "not"},
		define: func(name, description string, schema json.RawMessage) any {
			return openAITool{Type: "function", Function: openAIFunction{Name: name, Description: description, Parameters: schema}}
		},
	},
	FormatOpenAIResponses: {
		provider: "OpenAI",
		refused:  []string{"oneOf", "anyOf", "allOf", "enum", "not"},
		define: func(name, description string, schema json.RawMessage) any {
			return openAIResponsesTool{Type: "function", Name: name, Description: description, Parameters: schema}
		},
	},
	FormatAnthropic: {
		provider: "Anthropic",
		refused:  []string{"oneOf", "anyOf", "allOf"},
		define: func(name, description string, schema json.RawMessage) any {
			return anthropicTool{Name: name, Description: description, InputSchema: schema}
		},
	},
}

// CheckToolFormat reports whether f is a request's format: "" (cards only)
// or one of ToolFormats.
func CheckToolFormat(f string) error {
	if _, ok := toolFormats[f]; ok || f == "" {
		return nil
	}
	return fmt.Errorf("format %s is not one of %s", quoteShort(f), strings.Join(ToolFormats, ", "))
}

// queryFormat refuses a format on a query: only the tool answer (POST
// /v1/tools, MCP find_tools) carries definitions.
func queryFormat(f string) error {
	if f == "" {
		return nil
	}
	return fmt.Errorf("%w: format: a query answers no tool definitions; ask POST /v1/tools (MCP find_tools) for them", ErrBadRequest)
}

// ToolDefinitions are a shortlist in a provider's format (api.md §10.8).
type ToolDefinitions struct {
	Format string `json:"format"`
	// Tools are the definitions, in card order: the provider request's tools.
	Tools []any `json:"tools"`
	// Names maps a definition's name back to its tool.
	Names map[string]ToolRef `json:"names"`
	// Omitted are the cards whose schema the provider refuses.
	Omitted []OmittedTool `json:"omitted"`
}

// OmittedTool is a card that got no definition, and why.
type OmittedTool struct {
	ID     string `json:"id"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// toolDefinitions gives the cards in format (one of ToolFormats).
func (s *Snapshot) toolDefinitions(format string, cards []ToolCard) *ToolDefinitions {
	f := toolFormats[format]
	d := &ToolDefinitions{Format: format, Tools: []any{}, Names: map[string]ToolRef{}, Omitted: []OmittedTool{}}
	infos := make([]ToolInfo, len(cards))
	for i, c := range cards {
		infos[i] = c.ToolInfo
	}
	names := ProviderToolNames(infos)
	for i, c := range cards {
		ref := ToolRef{ID: toolID(c.Namespace, c.Name), Source: c.Source}
		var raw []byte
		if e, ok := s.toolEntry(c.Source, ref.ID); ok && e.Tool.InputSchema != nil {
			raw = e.Tool.InputSchema.Raw
		}
		schema, reason := providerSchema(raw, f)
		if reason != "" {
			d.Omitted = append(d.Omitted, OmittedTool{ID: ref.ID, Source: ref.Source, Reason: reason})
			continue
		}
		d.Tools = append(d.Tools, f.define(names[i], c.Description, schema))
		d.Names[names[i]] = ref
	}
	return d
}

// toolEntry finds a tool of a source by id.
func (s *Snapshot) toolEntry(source, id string) (*tools.Entry, bool) {
	st := s.sources[source]
	if st == nil || !st.isToolSource() {
		return nil, false
	}
	i, ok := s.findTool(st, id)
	if !ok {
		return nil, false
	}
	return s.toolIx.Entry(i), true
}

// providerSchema is a tool's input schema (raw; nil: none) as a provider
// takes it, or why the provider refuses it. An object schema without
// properties gets an empty one; anything else is passed as written.
func providerSchema(raw []byte, f toolFormat) (json.RawMessage, string) {
	if len(raw) == 0 {
		raw = []byte(DefaultInputSchema)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return nil, "inputSchema is not a JSON object"
	}
	var typ any
	if err := json.Unmarshal(top["type"], &typ); err != nil || typ != "object" {
		return nil, fmt.Sprintf(`inputSchema's type is not "object", which %s requires`, f.provider)
	}
	for _, k := range f.refused {
		if _, ok := top[k]; ok {
			return nil, fmt.Sprintf("inputSchema has %s at the top level, which %s refuses", k, f.provider)
		}
	}
	if _, ok := top["properties"]; ok {
		return raw, ""
	}
	top["properties"] = json.RawMessage(`{}`)
	b, err := json.Marshal(top)
	if err != nil {
		return nil, "inputSchema is not a JSON object"
	}
	return b, ""
}

// Provider tool names (api.md §10.8): both providers take [a-zA-Z0-9_-],
// at most 64 characters; a name cut or shared ends with "_" and 8 hex
// digits of a hash.
const (
	maxProviderName = 64
	providerHashLen = 8
	providerCut     = maxProviderName - 1 - providerHashLen
)

// ProviderToolNames names tools for a provider's API, one name per tool,
// unique among them (api.md §10.8): characters outside [a-zA-Z0-9_-]
// become "_" and "__" joins namespace and name; a name over 64 characters
// is cut and ends with a hash of the tool id; a name several tools would
// share ends, for each of them, with a hash of its source and id, so that
// it does not depend on their order; a name still shared gets "_2", "_3", …
// on the later tools.
func ProviderToolNames(ts []ToolInfo) []string {
	return providerToolNames(ts, hash8)
}

// providerToolNames is ProviderToolNames with its hash as a parameter, so
// that the last step can be tested.
func providerToolNames(ts []ToolInfo, hash func(string) string) []string {
	base := make([]string, len(ts))
	names := make([]string, len(ts))
	count := map[string]int{}
	for i, t := range ts {
		base[i] = providerBase(t.Namespace, t.Name)
		names[i] = base[i]
		if len(names[i]) > maxProviderName {
			names[i] = hashed(base[i], hash(toolID(t.Namespace, t.Name)))
		}
		count[names[i]]++
	}
	for i, t := range ts {
		if count[names[i]] > 1 {
			names[i] = hashed(base[i], hash(t.Source+"/"+toolID(t.Namespace, t.Name)))
		}
	}
	used := make(map[string]bool, len(ts))
	for i, n := range names {
		for k := 2; used[names[i]]; k++ {
			suffix := "_" + strconv.Itoa(k)
			names[i] = n[:min(len(n), maxProviderName-len(suffix))] + suffix
		}
		used[names[i]] = true
	}
	return names
}

// providerBase is a tool's provider name before it is cut or made unique.
func providerBase(namespace, name string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
				return r
			}
			return '_'
		}, s)
	}
	if namespace == "" {
		return clean(name)
	}
	return clean(namespace) + "__" + clean(name)
}

// hashed is base cut to leave room for "_" and h.
func hashed(base, h string) string {
	return base[:min(len(base), providerCut)] + "_" + h
}

// hash8 is the first 8 hex digits of s's SHA-256.
func hash8(s string) string {
	sum := digest.SHA256(s)
	return hex.EncodeToString(sum[:])[:providerHashLen]
}
