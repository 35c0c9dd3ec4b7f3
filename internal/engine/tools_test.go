package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
)

func tool(namespace, name, desc string, se v1alpha1.SideEffects, safety ...string) v1alpha1.Tool {
	return v1alpha1.Tool{Name: name, Namespace: namespace, Description: desc, SideEffects: se, SafetyTags: safety}
}

func toolsSource(name string, catalog ...v1alpha1.Tool) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Catalog: catalog},
	}}
}

var billingCatalog = []v1alpha1.Tool{
	func() v1alpha1.Tool {
		t := tool("billing.invoices", "create_invoice", "Create an invoice for a customer and send it by e-mail.", v1alpha1.SideEffectsWrite, "financial")
		t.InputSchema = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"customer":{"type":"string"},"amount":{"type":"number"}},"required":["customer","amount"]}`)}
		t.CostHint = "low"
		t.Examples = []string{"bill ACME 300 euros for March"}
		return t
	}(),
	tool("billing.invoices", "list_invoices", "List the invoices of a customer.", v1alpha1.SideEffectsRead),
	tool("billing.invoices", "delete_invoice", "Delete a draft invoice.", v1alpha1.SideEffectsDestructive),
	tool("billing", "refund_payment", "Refund a payment to a customer's card.", v1alpha1.SideEffectsWrite, "financial"),
	tool("crm", "find_customer", "Find a customer by name or e-mail address.", v1alpha1.SideEffectsRead, "pii"),
	tool("calendar", "create_event", "Create a calendar event with attendees.", v1alpha1.SideEffectsWrite),
}

// toolsConfig routes every question to the billing tools and an inline
// prompt; web-tools is only the router's fallback.
func toolsConfig(mut func(*v1alpha1.ContextRouterSpec), perms ...v1alpha1.AgentPermission) *Config {
	return &Config{
		Router: router(mut),
		Routes: []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "billing-tools")},
		Sources: []v1alpha1.ContextSource{
			inlineSource("prompt", "Prompt", "You are a helpful billing assistant."),
			toolsSource("billing-tools", billingCatalog...),
			toolsSource("web-tools", tool("", "web_search", "Search the public web.", v1alpha1.SideEffectsRead)),
		},
		Permissions: perms,
	}
}

func cardIDs(cards []ToolCard) []string {
	var out []string
	for _, c := range cards {
		id := toolID(c.Namespace, c.Name)
		if c.Fallback {
			id += "(fallback)"
		}
		out = append(out, id)
	}
	return out
}

func TestQueryShortlistsTools(t *testing.T) {
	s := compile(t, toolsConfig(nil))
	resp := query(t, s, Request{Text: "Create an invoice for ACME: 300 euros"})
	if len(resp.Tools) == 0 || toolID(resp.Tools[0].Namespace, resp.Tools[0].Name) != "billing.invoices.create_invoice" {
		t.Fatalf("cards = %q, want create_invoice first", cardIDs(resp.Tools))
	}
	c := resp.Tools[0]
	want := ToolInfo{Name: "create_invoice", Namespace: "billing.invoices", Source: "billing-tools",
		Description: "Create an invoice for a customer and send it by e-mail.", SideEffects: v1alpha1.SideEffectsWrite,
		SafetyTags: []string{"financial"}, CostHint: "low"}
	if !sameJSON(c.ToolInfo, want) {
		t.Errorf("card = %+v\nwant %+v", c.ToolInfo, want)
	}
	if c.Score <= 0 || c.Score != round4(c.Score) || c.Confidence <= 0 || c.Confidence > 1 || c.Fallback {
		t.Errorf("card score %v, confidence %v, fallback %v", c.Score, c.Confidence, c.Fallback)
	}
	for i := 1; i < len(resp.Tools); i++ {
		if resp.Tools[i].Score > resp.Tools[i-1].Score {
			t.Errorf("cards not in rank order: %v", cardIDs(resp.Tools))
		}
	}
	// The schema is never part of a card.
	b, _ := json.Marshal(resp)
	for _, leak := range []string{"inputSchema", "input_schema", `"required"`, "customer\":{"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("response holds %s: %s", leak, b)
		}
	}
	st := resp.Stats.Tools
	if st.Candidates != len(billingCatalog) || st.Denied != 0 || st.Returned != len(resp.Tools) || len(resp.Tools) > 5 {
		t.Errorf("stats.tools = %+v with %d cards", st, len(resp.Tools))
	}
	// The web tools are not routed: never a candidate.
	if slices.Contains(cardIDs(resp.Tools), "web_search") {
		t.Error("an unrouted tool source answered")
	}

	// Tools never count against the budget: the chunks are those of a router without tool sources.
	noTools := toolsConfig(nil)
	noTools.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt")}
	plain := query(t, compile(t, noTools), Request{Text: "Create an invoice for ACME: 300 euros"})
	if !sameJSON(plain.Chunks, resp.Chunks) || plain.TotalTokens != resp.TotalTokens || !sameJSON(plain.Stats.Dropped, resp.Stats.Dropped) {
		t.Errorf("chunks differ with tools routed:\n%+v\n%+v", plain.Chunks, resp.Chunks)
	}
	if plain.Tools == nil || len(plain.Tools) != 0 || plain.Stats.Tools != (ToolStats{Reason: ToolsNoToolSource}) {
		t.Errorf("without tool sources: tools = %#v, stats = %+v; want [], zeros and the reason", plain.Tools, plain.Stats.Tools)
	}
}

func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestToolExpansion: spec.tools.expansion Synonyms (the default) lets a
// question reach a tool through a related word; None does not.
func TestToolExpansion(t *testing.T) {
	for _, tt := range []struct {
		name      string
		expansion v1alpha1.ToolExpansion
		want      []string
	}{
		{"unset", "", []string{"billing.refund_payment"}},
		{"Synonyms", v1alpha1.ToolExpansionSynonyms, []string{"billing.refund_payment"}},
		{"None", v1alpha1.ToolExpansionNone, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { r.Tools.Expansion = tt.expansion }))
			resp := query(t, s, Request{Text: "please reimburse me"})
			if got := cardIDs(resp.Tools); !slices.Equal(got, tt.want) {
				t.Errorf("cards = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMaxToolsAndTopK(t *testing.T) {
	s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { r.Tools.TopK = 2 }))
	text := "invoice customer payment refund calendar event e-mail"
	if got := query(t, s, Request{Text: text}); len(got.Tools) != 2 {
		t.Errorf("topK 2: %d cards %q", len(got.Tools), cardIDs(got.Tools))
	}
	if got := query(t, s, Request{Text: text, MaxTools: 4}); len(got.Tools) != 4 {
		t.Errorf("max_tools 4: %d cards %q", len(got.Tools), cardIDs(got.Tools))
	}
	if got := query(t, s, Request{Text: text, MaxTools: 1}); len(got.Tools) != 1 {
		t.Errorf("max_tools 1: %d cards", len(got.Tools))
	}
	if _, err := s.Query(context.Background(), Request{Text: text, MaxTools: MaxToolsPerRequest + 1}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "max_tools is 101") {
		t.Errorf("max_tools past the bound: %v", err)
	}
}

func TestMinScoreAndFallback(t *testing.T) {
	fallback := func(r *v1alpha1.ContextRouterSpec) {
		r.Tools.Fallback = []v1alpha1.ToolReference{{Source: "web-tools", Name: "web_search"}, {Source: "billing-tools", Name: "no.such_tool"}}
	}
	t.Run("minScore leaves out weak cards", func(t *testing.T) {
		all := query(t, compile(t, toolsConfig(nil)), Request{Text: "create an invoice for a customer"})
		// Between the two best cards' (rounded) scores: the best is kept.
		cut := (all.Tools[0].Score + all.Tools[1].Score) / 2
		s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { r.Tools.MinScore = formatScore(cut) }))
		resp := query(t, s, Request{Text: "create an invoice for a customer"})
		if len(resp.Tools) == 0 || len(resp.Tools) >= len(all.Tools) {
			t.Fatalf("minScore %v: %q of %q", cut, cardIDs(resp.Tools), cardIDs(all.Tools))
		}
		if resp.Stats.Tools.BelowThreshold != len(all.Tools)-len(resp.Tools) || resp.Stats.Tools.Returned != len(resp.Tools) {
			t.Errorf("stats.tools = %+v", resp.Stats.Tools)
		}
		for _, c := range resp.Tools {
			if c.Score < cut-1e-4 {
				t.Errorf("card %s scores %v < minScore %v", c.Name, c.Score, cut)
			}
		}
	})
	t.Run("no confident card adds the fallback", func(t *testing.T) {
		s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { fallback(r); r.Tools.MinConfidence = "1" }))
		resp := query(t, s, Request{Text: "customer"}) // several tools share the word: no card is certain
		ids := cardIDs(resp.Tools)
		if len(ids) < 2 || ids[len(ids)-1] != "web_search(fallback)" || resp.Stats.Tools.Returned != len(ids) {
			t.Fatalf("cards = %q, stats %+v; want the web search added last as a fallback", ids, resp.Stats.Tools)
		}
		if f := resp.Tools[len(ids)-1]; f.Source != "web-tools" || f.Score != 0 {
			t.Errorf("fallback card = %+v", f)
		}
		// A question no tool knows gets the fallback alone.
		resp = query(t, s, Request{Text: "weather in Munich tomorrow"})
		if ids := cardIDs(resp.Tools); !slices.Equal(ids, []string{"web_search(fallback)"}) {
			t.Errorf("unknown question: cards = %q", ids)
		}
	})
	t.Run("cards under minScore do not make the gate confident", func(t *testing.T) {
		s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) {
			fallback(r)
			r.Tools.MinConfidence = "0.01"
			r.Tools.MinScore = "1000"
		}))
		resp := query(t, s, Request{Text: "create an invoice for a customer and send it by e-mail"})
		if ids := cardIDs(resp.Tools); !slices.Equal(ids, []string{"web_search(fallback)"}) || resp.Stats.Tools.BelowThreshold == 0 {
			t.Errorf("cards = %q, stats %+v; want every card under minScore and the fallback", ids, resp.Stats.Tools)
		}
	})
	t.Run("no fallback without a routed tool source", func(t *testing.T) {
		cfg := toolsConfig(func(r *v1alpha1.ContextRouterSpec) { fallback(r); r.Tools.MinConfidence = "0.99" })
		cfg.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt")}
		s := compile(t, cfg)
		if resp := query(t, s, Request{Text: "weather"}); len(resp.Tools) != 0 {
			t.Errorf("query: cards = %q", cardIDs(resp.Tools))
		}
		found, err := s.FindTools(context.Background(), Request{Text: "weather"})
		if err != nil || found.Tools == nil || len(found.Tools) != 0 {
			t.Errorf("FindTools: %+v, %v", found, err)
		}
	})
	t.Run("a confident card needs no fallback", func(t *testing.T) {
		s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { fallback(r); r.Tools.MinConfidence = "0" }))
		resp := query(t, s, Request{Text: "weather in Munich tomorrow"})
		if len(resp.Tools) != 0 {
			t.Errorf("minConfidence 0: cards = %q", cardIDs(resp.Tools))
		}
	})
	t.Run("the fallback is subject to permissions", func(t *testing.T) {
		deny := perm("no-web", v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, Default: v1alpha1.AccessAllow,
			MaxSensitivity: v1alpha1.SensitivityRestricted, Tools: v1alpha1.ToolRules{Deny: []string{"web_*"}}})
		s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { fallback(r); r.Tools.MinConfidence = "0.99" }, deny))
		if resp := query(t, s, Request{Text: "weather in Munich", Agent: "bot"}); len(resp.Tools) != 0 {
			t.Errorf("denied fallback returned: %q", cardIDs(resp.Tools))
		}
		deny.Spec.Tools = v1alpha1.ToolRules{}
		deny.Spec.DenySources = []string{"web-tools"}
		s = compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { fallback(r); r.Tools.MinConfidence = "0.99" }, deny))
		if resp := query(t, s, Request{Text: "weather in Munich", Agent: "bot"}); len(resp.Tools) != 0 {
			t.Errorf("fallback of a denied source returned: %q", cardIDs(resp.Tools))
		}
	})
}

func formatScore(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func TestToolPermissions(t *testing.T) {
	base := v1alpha1.AgentPermissionSpec{Agents: []string{"support-bot"}, Default: v1alpha1.AccessAllow, MaxSensitivity: v1alpha1.SensitivityConfidential}
	with := func(mut func(*v1alpha1.AgentPermissionSpec)) v1alpha1.AgentPermission {
		spec := base
		mut(&spec)
		return perm("p", spec)
	}
	text := "invoice customer payment refund calendar event e-mail"
	tests := []struct {
		name   string
		perm   v1alpha1.AgentPermission
		want   []string // usable tool ids, sorted
		denied []string
	}{
		{name: "no rules", perm: with(func(*v1alpha1.AgentPermissionSpec) {}),
			want: []string{"billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices", "billing.refund_payment", "calendar.create_event", "crm.find_customer"}},
		{name: "read only, no pii", perm: with(func(p *v1alpha1.AgentPermissionSpec) {
			p.Tools = v1alpha1.ToolRules{MaxSideEffects: v1alpha1.SideEffectsRead, DenySafetyTags: []string{"pii"}}
		}), want: []string{"billing.invoices.list_invoices"}},
		{name: "allow under billing, deny deletes", perm: with(func(p *v1alpha1.AgentPermissionSpec) {
			p.Tools = v1alpha1.ToolRules{Allow: []string{"billing.**"}, Deny: []string{"billing.**.delete_*"}}
		}), want: []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices", "billing.refund_payment"}},
		{name: "source denied", perm: with(func(p *v1alpha1.AgentPermissionSpec) { p.DenySources = []string{"billing-tools"} }),
			denied: []string{"billing-tools"}},
		{name: "source above clearance", perm: with(func(p *v1alpha1.AgentPermissionSpec) { p.MaxSensitivity = v1alpha1.SensitivityPublic }),
			denied: []string{"billing-tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) { r.Tools.TopK = 100 }, tt.perm))
			resp := query(t, s, Request{Text: text, Agent: "support-bot"})
			got := cardIDs(resp.Tools)
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("cards = %q, want %q", got, tt.want)
			}
			if !slices.Equal(resp.DeniedSources, append([]string{}, tt.denied...)) && !(len(resp.DeniedSources) == 0 && len(tt.denied) == 0) {
				t.Errorf("denied_sources = %q, want %q", resp.DeniedSources, tt.denied)
			}
			st := resp.Stats.Tools
			if len(tt.denied) == 0 && (st.Candidates != len(billingCatalog) || st.Denied != len(billingCatalog)-len(tt.want)) {
				t.Errorf("stats.tools = %+v", st)
			}
			// FindTools, DescribeTool and ToolTree agree with the query.
			found, err := s.FindTools(context.Background(), Request{Text: text, Agent: "support-bot"})
			if err != nil || !sameJSON(found.Tools, resp.Tools) || found.Stats.Tools != resp.Stats.Tools || !sameJSON(found.DeniedSources, resp.DeniedSources) {
				t.Errorf("FindTools = %+v, %v; want the query's tools", found, err)
			}
			var tree []string
			var walk func(n ToolNode)
			walk = func(n ToolNode) {
				for _, c := range n.Tools {
					if c.Source == "billing-tools" {
						tree = append(tree, toolID(c.Namespace, c.Name))
					}
				}
				for _, ch := range n.Children {
					walk(ch)
				}
			}
			walk(s.ToolTree("support-bot"))
			slices.Sort(tree)
			if !slices.Equal(tree, tt.want) {
				t.Errorf("tree tools = %q, want %q", tree, tt.want)
			}
			for _, tl := range billingCatalog {
				e, ok := s.DescribeTool("support-bot", "", tl.ID())
				if usable := slices.Contains(tt.want, tl.ID()); ok != usable {
					t.Errorf("DescribeTool(%s) = %v, want %v", tl.ID(), ok, usable)
				} else if ok && (e.Source != "billing-tools" || e.Tool.ID() != tl.ID()) {
					t.Errorf("DescribeTool(%s) = %+v", tl.ID(), e)
				}
			}
		})
	}
}

func TestDescribeToolHasTheSchema(t *testing.T) {
	s := compile(t, toolsConfig(nil))
	e, ok := s.DescribeTool("", "billing-tools", "billing.invoices.create_invoice")
	if !ok || e.Tool.InputSchema == nil || !strings.Contains(string(e.Tool.InputSchema.Raw), `"required":["customer","amount"]`) {
		t.Fatalf("DescribeTool = %+v, %v", e, ok)
	}
	if _, ok := s.DescribeTool("", "web-tools", "billing.invoices.create_invoice"); ok {
		t.Error("found a tool in a source that does not have it")
	}
	if _, ok := s.DescribeTool("", "", "nope"); ok {
		t.Error("found an unknown tool")
	}
	if e, ok := s.DescribeTool("", "", "web_search"); !ok || e.Source != "web-tools" {
		t.Errorf("any source: %+v, %v", e, ok)
	}
}

func TestToolCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		want []string
	}{
		{"fallback source missing", func(c *Config) {
			c.Router.Spec.Tools.Fallback = []v1alpha1.ToolReference{{Source: "nope", Name: "x"}}
		}, []string{`ContextRouter/test: spec.tools.fallback[0].source: ContextSource "nope" not found`}},
		{"fallback source not a tool source", func(c *Config) {
			c.Router.Spec.Tools.Fallback = []v1alpha1.ToolReference{{Source: "prompt", Name: "x"}}
		}, []string{`spec.tools.fallback[0].source: ContextSource "prompt" is of type Inline, not a tool source`}},
		{"bad tool glob", func(c *Config) {
			c.Permissions = []v1alpha1.AgentPermission{perm("p", v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, Tools: v1alpha1.ToolRules{Deny: []string{"billing.[x"}}})}
		}, []string{`AgentPermission/p: spec.tools.deny[0]: invalid glob "billing.[x"`}},
		{"bad minScore", func(c *Config) { c.Router.Spec.Tools.MinScore = "high" }, []string{`spec.tools.minScore: "high" is not a number`}},
		{"inline schema and duplicate", func(c *Config) {
			c.Sources[1].Spec.Tools.Catalog = append(slices.Clone(billingCatalog), tool("crm", "find_customer", "Again.", v1alpha1.SideEffectsRead))
		}, []string{`spec.tools.catalog[6].name: duplicate tool id "crm.find_customer": spec.tools.catalog[4] has it too`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := toolsConfig(nil)
			tt.mut(cfg)
			_, err := Compile(context.Background(), cfg, Options{})
			var pl problem.List
			if !errors.As(err, &pl) {
				t.Fatalf("Compile error = %v, want a problem list", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckSourceReportsEveryCatalogProblem(t *testing.T) {
	src := toolsSource("t",
		tool("", "a", "A.", v1alpha1.SideEffectsRead),
		v1alpha1.Tool{Name: "b", Description: "B.", SideEffects: v1alpha1.SideEffectsRead, InputSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"string"}`)}},
		tool("", "a", "A again.", v1alpha1.SideEffectsRead),
	)
	src.Default()
	errs := CheckSource(&src)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	slices.Sort(got)
	if want := []string{"spec.tools.catalog[1].inputSchema", "spec.tools.catalog[2].name"}; !slices.Equal(got, want) {
		t.Errorf("fields = %q, want %q (%v)", got, want, errs.ToAggregate())
	}
}

// TestStaleToolSource: a catalog file that turns invalid keeps serving its
// last good tools, and the source is reported with the reason.
func TestStaleToolSource(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("- {name: create_invoice, namespace: billing, description: Create an invoice., sideEffects: Write}\n")
	src := v1alpha1.ContextSource{ObjectMeta: meta("file-tools"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: dir}},
	}}
	cfg := &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "file-tools")}, Sources: []v1alpha1.ContextSource{src}}
	// One source instance across compiles, as serve keeps it.
	built := map[string]sources.Source{}
	opts := Options{Open: func(spec *v1alpha1.ContextSource, env sources.Env) (sources.Source, error) {
		if s := built[spec.Name]; s != nil {
			return s, nil
		}
		s, err := sources.New(spec, env)
		built[spec.Name] = s
		return s, err
	}}
	s1, err := Compile(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r := query(t, s1, Request{Text: "invoice"}); len(r.Tools) != 1 || len(r.FailedSources) != 0 {
		t.Fatalf("first: tools %q, failed %+v", cardIDs(r.Tools), r.FailedSources)
	}
	write("- {name: create_invoice, namespace: billing, description: Create an invoice., sideEffects: Sometimes}\n")
	s2, err := Compile(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := query(t, s2, Request{Text: "invoice"})
	if len(r.Tools) != 1 || len(r.FailedSources) != 1 {
		t.Fatalf("after a bad edit: tools %q, failed %+v; want the last good tool and the source reported", cardIDs(r.Tools), r.FailedSources)
	}
	if f := r.FailedSources[0]; f.Source != "file-tools" || !strings.Contains(f.Error, `tools.yaml:1: [0].sideEffects: Unsupported value: "Sometimes"`) || !strings.Contains(f.Error, "serving the content last read") {
		t.Errorf("failed source = %+v", f)
	}
	if s1.Hash() == s2.Hash() {
		t.Error("a stale source must change the snapshot hash")
	}
	if st := s2.Sources()[0]; st.Tools != 1 || st.Error == "" {
		t.Errorf("status = %+v", st)
	}
}

// TestToolIndexLimit: the tools of all tool sources must fit one index; the
// source that passes tools.MaxTools fails, the others answer.
func TestToolIndexLimit(t *testing.T) {
	const perSource = 9400 // 7 sources: 65,800 tools, past 65,536
	var srcs []v1alpha1.ContextSource
	route := routeTo("all", "")
	for i := range 7 {
		catalog := make([]v1alpha1.Tool, perSource)
		for j := range catalog {
			catalog[j] = tool("", "tool"+strconv.Itoa(j), "Does thing number "+strconv.Itoa(j)+".", v1alpha1.SideEffectsRead)
		}
		name := "tools-" + strconv.Itoa(i)
		srcs = append(srcs, toolsSource(name, catalog...))
		route.Spec.Sources = append(route.Spec.Sources, v1alpha1.LocalObjectReference{Name: name})
	}
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{route}, Sources: srcs})
	if s.Tools() != 6*perSource {
		t.Errorf("%d tools indexed, want %d", s.Tools(), 6*perSource)
	}
	resp := query(t, s, Request{Text: "thing number 42"})
	if len(resp.FailedSources) != 1 || resp.FailedSources[0].Source != "tools-6" || !strings.Contains(resp.FailedSources[0].Error, "more than 65536 tools") {
		t.Errorf("failed_sources = %+v", resp.FailedSources)
	}
	if len(resp.Tools) == 0 {
		t.Error("the sources within the limit do not answer")
	}
}

// TestToolCardSettings covers spec.tools.collapseThreshold and
// spec.tools.adaptive, and the request's explain.
func TestToolCardSettings(t *testing.T) {
	mirrored := func(mut func(*v1alpha1.ContextRouterSpec)) *Config {
		cfg := toolsConfig(mut)
		// A second server of the invoice tools, one with a versioned name.
		cfg.Sources = append(cfg.Sources, toolsSource("mirror",
			tool("billing.invoices", "list_invoices", "List the invoices of a customer.", v1alpha1.SideEffectsRead),
			tool("billing.invoices", "list_invoices_v2", "List the invoices of a customer (2).", v1alpha1.SideEffectsRead)))
		cfg.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "billing-tools", "mirror")}
		return cfg
	}
	const q = "list the invoices of a customer"
	t.Run("near-duplicates share a card", func(t *testing.T) {
		resp := query(t, compile(t, mirrored(nil)), Request{Text: q})
		if ids := cardIDs(resp.Tools); len(ids) == 0 || ids[0] != "billing.invoices.list_invoices" || slices.Contains(ids[1:], "billing.invoices.list_invoices") || slices.Contains(ids, "billing.invoices.list_invoices_v2") {
			t.Fatalf("cards %q", ids)
		}
		want := []ToolRef{{ID: "billing.invoices.list_invoices", Source: "mirror"}, {ID: "billing.invoices.list_invoices_v2", Source: "mirror"}}
		if c := resp.Tools[0]; c.Source != "billing-tools" || !slices.Equal(c.Also, want) {
			t.Errorf("card %s of %s also %v, want %v", c.Name, c.Source, c.Also, want)
		}
		// Only near-duplicates the agent may use are listed.
		deny := perm("no-v2", v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, Default: v1alpha1.AccessAllow,
			MaxSensitivity: v1alpha1.SensitivityRestricted, Tools: v1alpha1.ToolRules{Deny: []string{"**.*_v2"}}})
		cfg := mirrored(nil)
		cfg.Permissions = []v1alpha1.AgentPermission{deny}
		resp = query(t, compile(t, cfg), Request{Text: q, Agent: "bot"})
		if c := resp.Tools[0]; !slices.Equal(c.Also, want[:1]) {
			t.Errorf("bot: also %v, want %v", c.Also, want[:1])
		}
	})
	t.Run("collapseThreshold 0 gives every tool its card", func(t *testing.T) {
		resp := query(t, compile(t, mirrored(func(r *v1alpha1.ContextRouterSpec) { r.Tools.CollapseThreshold = "0" })), Request{Text: q})
		n := 0
		for _, c := range resp.Tools {
			if strings.HasPrefix(c.Name, "list_invoices") {
				n++
			}
			if len(c.Also) > 0 {
				t.Errorf("card %s lists %v", c.Name, c.Also)
			}
		}
		if n != 3 {
			t.Errorf("%d cards of the 3 copies: %q", n, cardIDs(resp.Tools))
		}
	})
	t.Run("adaptive Relative keeps the cards close to the best", func(t *testing.T) {
		// Relative is also the default rule.
		for _, rule := range []v1alpha1.AdaptiveRule{"", v1alpha1.AdaptiveRelative} {
			t.Run("rule "+string(rule), func(t *testing.T) {
				plain := query(t, compile(t, toolsConfig(nil)), Request{Text: "create an invoice for a customer"})
				s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) {
					r.Tools.Adaptive = v1alpha1.ToolsAdaptive{Enabled: true, Rule: rule, RelativeCut: "0.5"}
				}))
				resp := query(t, s, Request{Text: "create an invoice for a customer"})
				if len(resp.Tools) == 0 || len(resp.Tools) >= len(plain.Tools) {
					t.Fatalf("adaptive %q, plain %q", cardIDs(resp.Tools), cardIDs(plain.Tools))
				}
				st := resp.Stats.Tools
				if st.BelowCut != len(plain.Tools)-len(resp.Tools) || st.Returned != len(resp.Tools) {
					t.Errorf("stats %+v", st)
				}
				for _, c := range resp.Tools {
					if c.Confidence < 0.5*resp.Tools[0].Confidence-1e-4 {
						t.Errorf("card %s at %v under half the best %v", c.Name, c.Confidence, resp.Tools[0].Confidence)
					}
				}
				for _, c := range plain.Tools[len(resp.Tools):] {
					if c.Confidence >= 0.5*plain.Tools[0].Confidence {
						t.Errorf("card %s at %v left out", c.Name, c.Confidence)
					}
				}
			})
		}
	})
	t.Run("adaptive Utility keeps the first cards worth their cost", func(t *testing.T) {
		const q = "create an invoice for a customer"
		plain := query(t, compile(t, toolsConfig(nil)), Request{Text: q})
		for _, tt := range []struct {
			weight string
			w      float64
		}{{"", 1.75}, {"0", 0}, {"0.2", 0.2}, {"100", 100}} {
			t.Run("recallWeight "+tt.weight, func(t *testing.T) {
				// The default weight when none is set.
				s := compile(t, toolsConfig(func(r *v1alpha1.ContextRouterSpec) {
					r.Tools.Adaptive = v1alpha1.ToolsAdaptive{Enabled: true, Rule: v1alpha1.AdaptiveUtility, RecallWeight: tt.weight}
				}))
				resp := query(t, s, Request{Text: q})
				// By hand from the plain cards: the smallest k maximising
				// S/k + w·S.
				want, best, sum := 0, -1.0, 0.0
				for i, c := range plain.Tools {
					sum += c.Confidence
					if u := sum/float64(i+1) + tt.w*sum; u > best+1e-9 {
						want, best = i+1, u
					}
				}
				if !slices.Equal(cardIDs(resp.Tools), cardIDs(plain.Tools)[:want]) {
					t.Errorf("adaptive %q, want the first %d of %q", cardIDs(resp.Tools), want, cardIDs(plain.Tools))
				}
				if st := resp.Stats.Tools; st.BelowCut != len(plain.Tools)-want {
					t.Errorf("below_cut %d, want %d", st.BelowCut, len(plain.Tools)-want)
				}
			})
		}
	})
	t.Run("explain", func(t *testing.T) {
		s := compile(t, toolsConfig(nil))
		resp := query(t, s, Request{Text: "bill ACME 300 euros for March", Explain: true})
		c := resp.Tools[0]
		if c.Name != "create_invoice" || c.Explain == nil || c.Explain.Example == nil || c.Explain.Example.Text != "bill ACME 300 euros for March" {
			t.Fatalf("card %+v", c)
		}
		if c.Explain.Parts.Example <= 0 || c.Explain.Evidence.Examples != 1 {
			t.Errorf("explain %+v", c.Explain)
		}
		if plain := query(t, s, Request{Text: "bill ACME 300 euros for March"}); plain.Tools[0].Explain != nil {
			t.Errorf("explain without asking")
		}
	})
}
