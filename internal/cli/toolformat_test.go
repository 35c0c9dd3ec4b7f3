package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// tools --format: the cards as a provider's tool definitions, in JSON (the
// POST /v1/tools answer) and in text (names, then the definitions).
func TestToolsFormat(t *testing.T) {
	const question = "roll back the last deploy"
	out, stderr, code := run(t, "tools", "-f", quickstart, "-a", "eng-assistant", "--format", "openai-responses", "-o", "json", question)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var resp struct {
		Tools       []engine.ToolCard `json:"tools"`
		Definitions struct {
			Format string `json:"format"`
			Tools  []struct {
				Type       string         `json:"type"`
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
				Strict     *bool          `json:"strict"`
			} `json:"tools"`
			Names   map[string]engine.ToolRef `json:"names"`
			Omitted []engine.OmittedTool      `json:"omitted"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := resp.Definitions
	if d.Format != "openai-responses" || len(d.Tools) != len(resp.Tools) || len(d.Tools) != 2 || d.Omitted == nil || len(d.Omitted) != 0 {
		t.Fatalf("definitions = %+v for %d cards", d, len(resp.Tools))
	}
	for _, def := range d.Tools {
		ref, ok := d.Names[def.Name]
		if def.Type != "function" || def.Strict == nil || *def.Strict || def.Parameters["type"] != "object" || def.Parameters["properties"] == nil || !ok {
			t.Errorf("definition %+v (names %v)", def, d.Names)
		}
		if ref.ID == "deploys.rollback_deploy" {
			t.Errorf("eng-assistant got the destructive rollback_deploy: %+v", ref)
		}
	}
	if ref := d.Names["deploys__deploy_status"]; ref != (engine.ToolRef{ID: "deploys.deploy_status", Source: "eng-tools"}) {
		t.Errorf("names = %v", d.Names)
	}

	out, stderr, code = run(t, "tools", "-f", quickstart, "-a", "eng-assistant", "--format", "anthropic", question)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"(1) deploys.deploy_status  (score ",
		"\nanthropic definitions: 2\n    deploys__deploy_status → deploys.deploy_status (eng-tools)\n    incidents__list_incidents → incidents.list_incidents (eng-tools)\n[\n  {\n    \"name\": \"deploys__deploy_status\",",
		`"input_schema": {`,
		"\"input_schema\": {\n      \"properties\": {},\n      \"type\": \"object\"\n    }",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	// The definitions are the JSON text after the names.
	var defs []map[string]any
	if err := json.Unmarshal([]byte(out[strings.Index(out, "\n[\n")+1:]), &defs); err != nil || len(defs) != 2 {
		t.Errorf("the text output's definitions do not parse: %v", err)
	}

	// Without cards the text says so, and the definitions are [].
	out, _, code = run(t, "tools", "-f", quickstart, "-a", "eng-assistant", "--format", "openai", "what is the holiday policy")
	if code != 0 || !strings.Contains(out, "\nopenai definitions: 0\n[]\n") {
		t.Errorf("exit %d, no cards:\n%s", code, out)
	}
}

func TestToolsFormatRefused(t *testing.T) {
	for _, format := range []string{"gemini", "OPENAI", " openai"} {
		_, stderr, code := run(t, "tools", "-f", quickstart, "--format", format, "roll back the last deploy")
		want := "--format: format " + jsonQuote(format) + " is not one of openai, openai-responses, anthropic"
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("--format %q: exit %d, %s; want %q", format, code, stderr, want)
		}
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
