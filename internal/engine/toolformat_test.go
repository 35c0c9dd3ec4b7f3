package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

var providerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestProviderToolNames(t *testing.T) {
	long := strings.Repeat("observability.", 5) + "metrics" // 77 characters
	longBase := strings.ReplaceAll(long, ".", "_")
	tests := []struct {
		name  string
		tools []ToolInfo
		want  []string
	}{
		{"a name without a namespace", []ToolInfo{{Name: "web_search", Source: "web"}}, []string{"web_search"}},
		{"namespace dots become _ and __ joins the name", []ToolInfo{{Namespace: "billing.invoices", Name: "create_invoice", Source: "b"}},
			[]string{"billing_invoices__create_invoice"}},
		{"dots of a dotted name, dashes kept", []ToolInfo{{Namespace: "gh", Name: "issues.list-open", Source: "b"}, {Name: "a.b", Source: "b"}},
			[]string{"gh__issues_list-open", "a_b"}},
		{"a long name is cut and hashed by its id", []ToolInfo{{Namespace: long, Name: "query_range", Source: "m"}},
			[]string{longBase[:55] + "_" + hash8(long+".query_range")}},
		{"long names that share their first 55 characters differ", []ToolInfo{
			{Namespace: long, Name: "query_range", Source: "m"}, {Namespace: long, Name: "query_instant", Source: "m"}},
			[]string{longBase[:55] + "_" + hash8(long+".query_range"), longBase[:55] + "_" + hash8(long+".query_instant")}},
		{"ids that differ by . and _ are told apart by source and id", []ToolInfo{
			{Namespace: "a.b", Name: "c", Source: "s"}, {Namespace: "a_b", Name: "c", Source: "s"}, {Name: "d", Source: "s"}},
			[]string{"a_b__c_" + hash8("s/a.b.c"), "a_b__c_" + hash8("s/a_b.c"), "d"}},
		{"the same id in two sources", []ToolInfo{{Name: "search", Source: "web"}, {Name: "search", Source: "wiki"}},
			[]string{"search_" + hash8("web/search"), "search_" + hash8("wiki/search")}},
		{"a long name shared by two sources", []ToolInfo{{Namespace: long, Name: "q", Source: "a"}, {Namespace: long, Name: "q", Source: "b"}},
			[]string{longBase[:55] + "_" + hash8("a/"+long+".q"), longBase[:55] + "_" + hash8("b/"+long+".q")}},
		{"no tools", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ProviderToolNames(tt.tools)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("names = %q, want %q", got, tt.want)
			}
			for _, n := range got {
				if !providerNameRE.MatchString(n) {
					t.Errorf("%q is not a provider tool name", n)
				}
			}
			// The names do not depend on the order of the cards.
			rev := slices.Clone(tt.tools)
			slices.Reverse(rev)
			back := ProviderToolNames(rev)
			slices.Reverse(back)
			if !slices.Equal(back, got) {
				t.Errorf("reversed cards get %q, want %q", back, got)
			}
		})
	}
	// When hashing cannot tell them apart, the later cards are numbered.
	t.Run("names still shared are numbered", func(t *testing.T) {
		same := func(string) string { return "00000000" }
		got := providerToolNames([]ToolInfo{{Name: "x", Source: "a"}, {Name: "x", Source: "b"}, {Name: "x", Source: "c"}, {Name: "x_00000000_2", Source: "d"}}, same)
		want := []string{"x_00000000", "x_00000000_2", "x_00000000_3", "x_00000000_2_2"}
		if !slices.Equal(got, want) {
			t.Errorf("names = %q, want %q", got, want)
		}
		got = providerToolNames([]ToolInfo{{Namespace: long, Name: "q", Source: "a"}, {Namespace: long, Name: "q", Source: "b"}}, same)
		if want := []string{longBase[:55] + "_00000000", longBase[:55] + "_000000_2"}; !slices.Equal(got, want) {
			t.Errorf("long shared names = %q, want %q (64 characters)", got, want)
		}
	})
}

// providerShapes are JSON Schemas of one tool definition per format,
// written from the providers' SDK types (testdata/providers, whose
// $comment names the package versions).
func providerShapes(t *testing.T) map[string]*jsonschema.Resolved {
	out := map[string]*jsonschema.Resolved{}
	for _, f := range ToolFormats {
		b, err := os.ReadFile(filepath.Join("testdata", "providers", f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = rs
	}
	return out
}

func schemaJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

// opsFormatConfig routes every question to ops tools whose schemas try
// each rule of api.md §10.8; web_search is the fallback.
func opsFormatConfig(perms ...v1alpha1.AgentPermission) *Config {
	withSchema := func(t v1alpha1.Tool, s string) v1alpha1.Tool { t.InputSchema = schemaJSON(s); return t }
	catalog := []v1alpha1.Tool{
		withSchema(tool("deploys", "rollback_deploy", "Roll a service back to its previous release.", v1alpha1.SideEffectsDestructive),
			`{"type":"object","properties":{"service":{"type":"string"},"region":{"type":"string"}},"required":["service","region"]}`),
		withSchema(tool("deploys", "deploy_status", "Show the release a service runs.", v1alpha1.SideEffectsRead), `{"type":"object"}`),
		tool("incidents", "list_incidents", "List the open incidents of a service.", v1alpha1.SideEffectsRead),
		withSchema(tool("incidents", "get_incident", "Get one incident of a service by id or by title.", v1alpha1.SideEffectsRead),
			`{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"}},"anyOf":[{"required":["id"]},{"required":["title"]}]}`),
		withSchema(tool("pods", "restart_pod", "Restart the pods of a service in one cluster.", v1alpha1.SideEffectsWrite),
			`{"type":"object","properties":{"service":{"type":"string"},"all":{"type":"boolean"},"pod":{"type":"string"}},"not":{"required":["all","pod"]}}`),
		tool("pods", "restart_pod_v2", "Restart the pods of a service in one cluster.", v1alpha1.SideEffectsWrite),
		tool(strings.Repeat("observability.", 5)+"metrics", "query_service_latency", "Query the latency of a service.", v1alpha1.SideEffectsRead),
	}
	return &Config{
		Router: router(func(r *v1alpha1.ContextRouterSpec) {
			r.Tools.TopK = 20
			r.Tools.MinConfidence = "1" // the fallback always joins
			r.Tools.Fallback = []v1alpha1.ToolReference{{Source: "web-tools", Name: "web_search"}}
		}),
		Routes: []v1alpha1.ContextRoute{routeTo("all", "", "ops-tools")},
		Sources: []v1alpha1.ContextSource{
			toolsSource("ops-tools", catalog...),
			toolsSource("web-tools", tool("", "web_search", "Search the public web.", v1alpha1.SideEffectsRead)),
		},
		Permissions: perms,
	}
}

func TestToolDefinitions(t *testing.T) {
	shapes := providerShapes(t)
	deny := perm("no-rollback", v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, Default: v1alpha1.AccessAllow,
		MaxSensitivity: v1alpha1.SensitivityRestricted, Tools: v1alpha1.ToolRules{Deny: []string{"deploys.rollback_*"}}})
	s := compile(t, opsFormatConfig(deny))
	const question = "restart or roll back the service, its incidents, release and latency"
	omittedBy := map[string][]string{
		FormatOpenAI:          {"incidents.get_incident: inputSchema has anyOf at the top level, which OpenAI refuses", "pods.restart_pod: inputSchema has not at the top level, which OpenAI refuses"},
		FormatOpenAIResponses: {"incidents.get_incident: inputSchema has anyOf at the top level, which OpenAI refuses", "pods.restart_pod: inputSchema has not at the top level, which OpenAI refuses"},
		FormatAnthropic:       {"incidents.get_incident: inputSchema has anyOf at the top level, which Anthropic refuses"},
	}
	for _, format := range ToolFormats {
		t.Run(format, func(t *testing.T) {
			for _, agent := range []string{"", "bot"} {
				resp, err := s.FindTools(context.Background(), Request{Text: question, Agent: agent, Format: format})
				if err != nil {
					t.Fatal(err)
				}
				d := resp.Definitions
				if d == nil || d.Format != format {
					t.Fatalf("agent %q: definitions = %+v", agent, d)
				}
				ids := cardIDs(resp.Tools)
				want := []string{"deploys.deploy_status", "deploys.rollback_deploy", "incidents.get_incident", "incidents.list_incidents",
					strings.Repeat("observability.", 5) + "metrics.query_service_latency", "pods.restart_pod", "web_search(fallback)"}
				if agent == "bot" {
					want = slices.DeleteFunc(want, func(id string) bool { return id == "deploys.rollback_deploy" })
				}
				// The fallback comes last, restart_pod_v2 stands behind restart_pod (also).
				if got := slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) || ids[len(ids)-1] != "web_search(fallback)" {
					t.Fatalf("agent %q: cards = %q; want %q", agent, ids, want)
				}
				// Every card has a definition or is omitted, in card order; nothing else is defined.
				var omitted []string
				for _, o := range d.Omitted {
					omitted = append(omitted, o.ID+": "+o.Reason)
				}
				if !slices.Equal(omitted, omittedBy[format]) {
					t.Errorf("agent %q: omitted = %q, want %q", agent, omitted, omittedBy[format])
				}
				if len(d.Tools)+len(d.Omitted) != len(resp.Tools) || len(d.Names) != len(d.Tools) {
					t.Fatalf("agent %q: %d definitions, %d names, %d omitted for %d cards", agent, len(d.Tools), len(d.Names), len(d.Omitted), len(resp.Tools))
				}
				names := ProviderToolNames(func() []ToolInfo {
					var in []ToolInfo
					for _, c := range resp.Tools {
						in = append(in, c.ToolInfo)
					}
					return in
				}())
				next := 0
				for i, c := range resp.Tools {
					id := toolID(c.Namespace, c.Name)
					if slices.ContainsFunc(d.Omitted, func(o OmittedTool) bool { return o.ID == id && o.Source == c.Source }) {
						continue
					}
					def := decodeDefinition(t, shapes[format], d.Tools[next])
					next++
					if def.name != names[i] || def.description != c.Description {
						t.Errorf("definition of %s: name %q, description %q; want %q, %q", id, def.name, def.description, names[i], c.Description)
					}
					if ref := d.Names[def.name]; ref != (ToolRef{ID: id, Source: c.Source}) {
						t.Errorf("names[%q] = %+v, want %s of %s", def.name, ref, id, c.Source)
					}
					checkDefinedSchema(t, s, c, id, def.schema)
				}
				long := strings.Repeat("observability_", 5)[:55] + "_" + hash8(strings.Repeat("observability.", 5)+"metrics.query_service_latency")
				if _, ok := d.Names[long]; !ok || len(long) != 64 {
					t.Errorf("agent %q: no definition named %q: %v", agent, long, d.Names)
				}
				_, denied := d.Names["deploys__rollback_deploy"]
				if denied != (agent == "") {
					t.Errorf("agent %q: rollback_deploy defined = %v; want it for the agent that may use it only", agent, denied)
				}
				if agent == "bot" && slices.Contains(ids, "deploys.rollback_deploy") {
					t.Errorf("agent bot: the denied tool is a card: %q", ids)
				}
			}
		})
	}
	t.Run("no format, no definitions", func(t *testing.T) {
		resp, err := s.FindTools(context.Background(), Request{Text: question})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(resp)
		if resp.Definitions != nil || strings.Contains(string(b), `"definitions"`) {
			t.Errorf("definitions without a format: %s", b)
		}
	})
	t.Run("no cards, empty definitions", func(t *testing.T) {
		cfg := opsFormatConfig()
		cfg.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "web-tools")}
		cfg.Router.Spec.Tools.MinConfidence = "0"
		resp, err := compile(t, cfg).FindTools(context.Background(), Request{Text: "quantum chromodynamics", Format: FormatAnthropic})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(resp.Definitions)
		if string(b) != `{"format":"anthropic","tools":[],"names":{},"omitted":[]}` || len(resp.Tools) != 0 {
			t.Errorf("definitions = %s for cards %q", b, cardIDs(resp.Tools))
		}
	})
}

// definition is what every format holds.
type definition struct {
	name, description string
	schema            map[string]any
}

// decodeDefinition checks a definition against its provider's shape and
// reads it.
func decodeDefinition(t *testing.T, shape *jsonschema.Resolved, v any) definition {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := shape.Validate(doc); err != nil {
		t.Fatalf("%s is not the provider's shape: %v", b, err)
	}
	var d struct {
		Name, Description string
		Parameters        map[string]any
		InputSchema       map[string]any `json:"input_schema"`
		Function          *struct {
			Name, Description string
			Parameters        map[string]any
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if f := d.Function; f != nil {
		return definition{f.Name, f.Description, f.Parameters}
	}
	if d.InputSchema != nil {
		return definition{d.Name, d.Description, d.InputSchema}
	}
	return definition{d.Name, d.Description, d.Parameters}
}

// checkDefinedSchema compares a definition's schema with the catalog's:
// the same, with an empty properties where it has none.
func checkDefinedSchema(t *testing.T, s *Snapshot, c ToolCard, id string, got map[string]any) {
	t.Helper()
	e, ok := s.DescribeTool("", c.Source, id)
	if !ok {
		t.Fatalf("%s of %s not found", id, c.Source)
	}
	want := map[string]any{"type": "object"}
	if e.Tool.InputSchema != nil {
		if err := json.Unmarshal(e.Tool.InputSchema.Raw, &want); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := want["properties"]; !ok {
		want["properties"] = map[string]any{}
	}
	if !sameJSON(got, want) {
		t.Errorf("schema of %s = %v, want %v", id, got, want)
	}
}

func TestToolFormatErrors(t *testing.T) {
	s := compile(t, opsFormatConfig())
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"an unknown format", func() error {
			_, err := s.FindTools(context.Background(), Request{Text: "restart", Format: "gemini"})
			return err
		}, `bad request: format "gemini" is not one of openai, openai-responses, anthropic`},
		{"a format's case matters", func() error {
			_, err := s.FindTools(context.Background(), Request{Text: "restart", Format: "OpenAI"})
			return err
		}, `bad request: format "OpenAI" is not one of openai, openai-responses, anthropic`},
		{"a long format is cut", func() error {
			_, err := s.FindTools(context.Background(), Request{Text: "restart", Format: strings.Repeat("x", 100)})
			return err
		}, `bad request: format "` + strings.Repeat("x", 32) + `"… is not one of openai, openai-responses, anthropic`},
		{"a query answers no definitions", func() error {
			_, err := s.Query(context.Background(), Request{Text: "restart", Format: FormatOpenAI})
			return err
		}, `bad request: format: a query answers no tool definitions; ask POST /v1/tools (MCP find_tools) for them`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if !errors.Is(err, ErrBadRequest) || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// The shapes must refuse what the providers refuse, or checking against
// them proves nothing.
func TestProviderShapesRefuse(t *testing.T) {
	shapes := providerShapes(t)
	tests := []struct {
		format, name, def string
	}{
		{FormatOpenAI, "a dot in the name", `{"type":"function","function":{"name":"a.b","parameters":{"type":"object"}}}`},
		{FormatOpenAI, "65 characters", `{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `","parameters":{"type":"object"}}}`},
		{FormatOpenAI, "the flat shape", `{"type":"function","name":"a","parameters":{"type":"object"}}`},
		{FormatOpenAI, "top-level anyOf", `{"type":"function","function":{"name":"a","parameters":{"type":"object","anyOf":[{"required":["x"]}]}}}`},
		{FormatOpenAI, "not an object schema", `{"type":"function","function":{"name":"a","parameters":{"type":"array"}}}`},
		{FormatOpenAI, "a field the type lacks", `{"type":"function","function":{"name":"a","input_schema":{"type":"object"}}}`},
		{FormatOpenAIResponses, "no strict", `{"type":"function","name":"a","parameters":{"type":"object"}}`},
		{FormatOpenAIResponses, "the nested shape", `{"type":"function","function":{"name":"a","parameters":{"type":"object"}},"strict":false}`},
		{FormatOpenAIResponses, "top-level not", `{"type":"function","name":"a","parameters":{"type":"object","not":{}},"strict":false}`},
		{FormatAnthropic, "parameters for input_schema", `{"name":"a","parameters":{"type":"object"}}`},
		{FormatAnthropic, "top-level oneOf", `{"name":"a","input_schema":{"type":"object","oneOf":[{}]}}`},
		{FormatAnthropic, "a space in the name", `{"name":"a b","input_schema":{"type":"object"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.format+": "+tt.name, func(t *testing.T) {
			var doc any
			if err := json.Unmarshal([]byte(tt.def), &doc); err != nil {
				t.Fatal(err)
			}
			if shapes[tt.format].Validate(doc) == nil {
				t.Errorf("%s passes as %s", tt.def, tt.format)
			}
		})
	}
}
