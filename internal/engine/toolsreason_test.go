package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// TestToolsReason: the one decision of stats.tools.reason, in its order.
func TestToolsReason(t *testing.T) {
	tests := []struct {
		name string
		f    toolFacts
		want string
	}{
		{"cards", toolFacts{routed: true, serving: 1, stats: ToolStats{Candidates: 3, Returned: 2}}, ""},
		{"fallback cards only", toolFacts{routed: true, serving: 1, stats: ToolStats{Candidates: 3, Denied: 3, Returned: 1}}, ""},
		{"no route names a tool source", toolFacts{}, ToolsNoToolSource},
		{"every tool source denied", toolFacts{routed: true}, ToolsSourcesDenied},
		{"the readable one failed", toolFacts{routed: true, failed: true}, ToolsSourcesFailed},
		{"one serves, another failed: not the failure", toolFacts{routed: true, serving: 1, failed: true, stats: ToolStats{Candidates: 2}}, ToolsNoMatch},
		{"a serving source without tools", toolFacts{routed: true, serving: 1}, ToolsEmptyCatalog},
		{"every candidate denied by tool rules", toolFacts{routed: true, serving: 2, stats: ToolStats{Candidates: 4, Denied: 4}}, ToolsAllDenied},
		{"no tool shares a term", toolFacts{routed: true, serving: 1, stats: ToolStats{Candidates: 4, Denied: 1}}, ToolsNoMatch},
		{"every card under minScore", toolFacts{routed: true, serving: 1, stats: ToolStats{Candidates: 4, BelowThreshold: 2}}, ToolsBelowMinScore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toolsReason(tt.f); got != tt.want {
				t.Errorf("toolsReason(%+v) = %q, want %q", tt.f, got, tt.want)
			}
		})
	}
	for _, r := range ToolsReasons() {
		if ToolsReasonText(r) == "" {
			t.Errorf("reason %q has no text", r)
		}
	}
}

// TestToolsReasonInAnswers: every reason as a query and FindTools answer
// it, over real catalogs, permissions and a failing catalog folder.
func TestToolsReasonInAnswers(t *testing.T) {
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "tools.yaml"), []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirTools := func(name, path string) v1alpha1.ContextSource {
		return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: path}},
		}}
	}
	bot := func(mut func(*v1alpha1.AgentPermissionSpec)) v1alpha1.AgentPermission {
		spec := v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, Default: v1alpha1.AccessAllow, MaxSensitivity: v1alpha1.SensitivityConfidential}
		mut(&spec)
		return perm("bot", spec)
	}
	const question = "create an invoice for a customer"
	tests := []struct {
		name     string
		cfg      func() *Config
		text     string
		want     string
		wantCard bool
	}{
		{"cards: no reason", func() *Config { return toolsConfig(nil) }, question, "", true},
		{"no route names a tool source", func() *Config {
			c := toolsConfig(nil)
			c.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt")}
			return c
		}, question, ToolsNoToolSource, false},
		{"no route matched", func() *Config {
			c := toolsConfig(nil)
			c.Routes = []v1alpha1.ContextRoute{routeTo("never", "false", "billing-tools")}
			return c
		}, question, ToolsNoToolSource, false},
		{"the tool source is denied", func() *Config {
			return toolsConfig(nil, bot(func(p *v1alpha1.AgentPermissionSpec) { p.DenySources = []string{"billing-tools"} }))
		}, question, ToolsSourcesDenied, false},
		{"the tool source failed to load", func() *Config {
			c := toolsConfig(nil)
			c.Sources = append(c.Sources, dirTools("gone-tools", filepath.Join(empty, "missing")))
			c.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "gone-tools")}
			return c
		}, question, ToolsSourcesFailed, false},
		{"the catalog is empty", func() *Config {
			c := toolsConfig(nil)
			c.Sources = append(c.Sources, dirTools("no-tools", empty))
			c.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "no-tools")}
			return c
		}, question, ToolsEmptyCatalog, false},
		{"tool rules deny every tool", func() *Config {
			return toolsConfig(nil, bot(func(p *v1alpha1.AgentPermissionSpec) { p.Tools.Allow = []string{"nothing.*"} }))
		}, question, ToolsAllDenied, false},
		{"no tool shares a word", func() *Config { return toolsConfig(nil) }, "zebra quantum tuba", ToolsNoMatch, false},
		{"every card under minScore", func() *Config {
			return toolsConfig(func(r *v1alpha1.ContextRouterSpec) { r.Tools.MinScore = "1000" })
		}, question, ToolsBelowMinScore, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, tt.cfg())
			req := Request{Text: tt.text, Agent: "bot"}
			resp := query(t, s, req)
			found, err := s.FindTools(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for what, st := range map[string]ToolStats{"query": resp.Stats.Tools, "FindTools": found.Stats.Tools} {
				if st.Reason != tt.want {
					t.Errorf("%s: stats.tools = %+v, want reason %q", what, st, tt.want)
				}
			}
			if (len(resp.Tools) > 0) != tt.wantCard || (len(found.Tools) > 0) != tt.wantCard {
				t.Errorf("cards: query %q, FindTools %q; want cards %v", cardIDs(resp.Tools), cardIDs(found.Tools), tt.wantCard)
			}
			b, _ := json.Marshal(found.Stats.Tools)
			if has := strings.Contains(string(b), `"reason"`); has != (tt.want != "") {
				t.Errorf("JSON %s: reason present %v, want %v", b, has, tt.want != "")
			}
		})
	}
}

// TestToolTreeWarnings: the choice graph warns as a query does when no
// permission names the agent, and says when it is empty.
func TestToolTreeWarnings(t *testing.T) {
	deny := func(r *v1alpha1.ContextRouterSpec) { r.DefaultAccess = v1alpha1.AccessDeny }
	named := perm("bot", v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, AllowSources: []string{"billing-tools"}, MaxSensitivity: v1alpha1.SensitivityConfidential})
	tests := []struct {
		name  string
		cfg   *Config
		agent string
		want  []string
	}{
		{"a named agent with tools", toolsConfig(deny, named), "bot", nil},
		{"no agent under defaultAccess Deny", toolsConfig(deny, named), "", []string{
			`no agent was given and no AgentPermission names "*", so the router's defaultAccess: Deny denies every source`,
			"no agent was given, and an agent without a name may use none of the router's 7 tools",
		}},
		{"an unknown agent under defaultAccess Deny", toolsConfig(deny, named), "bto", []string{
			`no AgentPermission names agent "bto", so the router's defaultAccess: Deny denies every source`,
			`agent "bto" may use none of the router's 7 tools`,
		}},
		{"no agent under defaultAccess Allow", toolsConfig(nil), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, tt.cfg)
			got := s.ToolTreeWarnings(tt.agent, s.ToolTree(tt.agent))
			if !slices.Equal(got, tt.want) {
				t.Errorf("warnings = %q, want %q", got, tt.want)
			}
			// A query by the same agent carries the same access warning.
			r := query(t, s, Request{Text: "create an invoice", Agent: tt.agent})
			if hasQ, hasT := len(r.Warnings) > 0, len(got) > 0; hasQ != hasT {
				t.Errorf("query warnings %q, tree warnings %q", r.Warnings, got)
			}
		})
	}
}
