package engine

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func perm(name string, spec v1alpha1.AgentPermissionSpec) v1alpha1.AgentPermission {
	return v1alpha1.AgentPermission{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func TestResolveAccess(t *testing.T) {
	hr := perm("hr", v1alpha1.AgentPermissionSpec{
		Agents: []string{"hr-assistant"}, AllowSources: []string{"hr-docs", "prompt"},
		DenyPaths: []string{"**/secrets/**"}, Default: v1alpha1.AccessDeny, MaxSensitivity: v1alpha1.SensitivityInternal,
	})
	everyone := perm("everyone", v1alpha1.AgentPermissionSpec{
		Agents: []string{"*"}, AllowSources: []string{"prompt"}, DenySources: []string{"hr-docs"},
		Default: v1alpha1.AccessAllow, MaxSensitivity: v1alpha1.SensitivityConfidential,
		SensitivityAction: v1alpha1.SensitivityActionRedact, DenyPaths: []string{"salaries/*", "**/secrets/**"},
	})
	open := perm("open", v1alpha1.AgentPermissionSpec{
		Agents: []string{"bot"}, Default: v1alpha1.AccessAllow, MaxSensitivity: v1alpha1.SensitivityRestricted,
		SensitivityAction: v1alpha1.SensitivityActionRedact,
	})
	tests := []struct {
		name          string
		perms         []v1alpha1.AgentPermission
		agent         string
		defaultAccess v1alpha1.AccessPolicy
		allowed       map[string]bool
		wantPerms     []string
		maxSens       v1alpha1.Sensitivity
		action        v1alpha1.SensitivityAction
		denyPaths     []string
	}{
		{
			name: "single permission, default deny", perms: []v1alpha1.AgentPermission{hr}, agent: "hr-assistant",
			allowed:   map[string]bool{"hr-docs": true, "prompt": true, "finance": false},
			wantPerms: []string{"hr"}, maxSens: v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
			denyPaths: []string{"**/secrets/**"},
		},
		{
			name: "deny beats allow and Deny default wins", perms: []v1alpha1.AgentPermission{hr, everyone}, agent: "hr-assistant",
			allowed:   map[string]bool{"hr-docs": false, "prompt": true, "finance": false},
			wantPerms: []string{"everyone", "hr"}, maxSens: v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
			denyPaths: []string{"**/secrets/**", "salaries/*"},
		},
		{
			name: "wildcard only, default allow", perms: []v1alpha1.AgentPermission{hr, everyone}, agent: "someone",
			allowed:   map[string]bool{"hr-docs": false, "prompt": true, "finance": true},
			wantPerms: []string{"everyone"}, maxSens: v1alpha1.SensitivityConfidential, action: v1alpha1.SensitivityActionRedact,
			denyPaths: []string{"**/secrets/**", "salaries/*"},
		},
		{
			name: "min sensitivity across permissions", perms: []v1alpha1.AgentPermission{open, everyone}, agent: "bot",
			allowed:   map[string]bool{"hr-docs": false, "finance": true},
			wantPerms: []string{"everyone", "open"}, maxSens: v1alpha1.SensitivityConfidential, action: v1alpha1.SensitivityActionRedact,
			denyPaths: []string{"**/secrets/**", "salaries/*"},
		},
		{
			name: "no match uses router default deny", perms: []v1alpha1.AgentPermission{hr}, agent: "stranger",
			defaultAccess: v1alpha1.AccessDeny,
			allowed:       map[string]bool{"hr-docs": false, "prompt": false},
			maxSens:       v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
		},
		{
			name: "no match uses router default allow", perms: nil, agent: "stranger", defaultAccess: v1alpha1.AccessAllow,
			allowed: map[string]bool{"hr-docs": true, "anything": true},
			maxSens: v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
		},
		{
			name: "empty agent matches only the wildcard", perms: []v1alpha1.AgentPermission{hr,
				perm("blank", v1alpha1.AgentPermissionSpec{Agents: []string{""}, Default: v1alpha1.AccessAllow})},
			agent: "", defaultAccess: v1alpha1.AccessDeny,
			allowed: map[string]bool{"hr-docs": false},
			maxSens: v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
		},
		{
			name: "unset fields take the API defaults", agent: "x",
			perms:   []v1alpha1.AgentPermission{defaulted(perm("bare", v1alpha1.AgentPermissionSpec{Agents: []string{"x"}, AllowSources: []string{"a"}}))},
			allowed: map[string]bool{"a": true, "b": false}, wantPerms: []string{"bare"},
			maxSens: v1alpha1.SensitivityInternal, action: v1alpha1.SensitivityActionDrop,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ResolveAccess(tt.perms, tt.agent, tt.defaultAccess)
			for src, want := range tt.allowed {
				if got := a.SourceAllowed(src); got != want {
					t.Errorf("SourceAllowed(%q) = %v, want %v", src, got, want)
				}
			}
			if !reflect.DeepEqual(a.Permissions, tt.wantPerms) {
				t.Errorf("Permissions = %v, want %v", a.Permissions, tt.wantPerms)
			}
			if a.MaxSensitivity != tt.maxSens || a.SensitivityAction != tt.action {
				t.Errorf("sensitivity = %s/%s, want %s/%s", a.MaxSensitivity, a.SensitivityAction, tt.maxSens, tt.action)
			}
			if !reflect.DeepEqual(a.DenyPaths, tt.denyPaths) {
				t.Errorf("DenyPaths = %v, want %v", a.DenyPaths, tt.denyPaths)
			}
		})
	}
}

// defaulted returns p as Compile hands it to ResolveAccess.
func defaulted(p v1alpha1.AgentPermission) v1alpha1.AgentPermission {
	p.Default()
	return p
}

// TestResolveAccessFailsClosed: ResolveAccess expects defaulted permissions
// (Compile defaults them), and one that is not, written by hand, is read as
// the strictest: no default access, clearance Internal, chunks dropped.
func TestResolveAccessFailsClosed(t *testing.T) {
	bare := perm("bare", v1alpha1.AgentPermissionSpec{Agents: []string{"x"}, AllowSources: []string{"a"}})
	a := ResolveAccess([]v1alpha1.AgentPermission{bare}, "x", v1alpha1.AccessAllow)
	if a.SourceAllowed("b") || !a.SourceAllowed("a") {
		t.Errorf("sources: b allowed %v (want false), a allowed %v (want true)", a.SourceAllowed("b"), a.SourceAllowed("a"))
	}
	if !a.Cleared(v1alpha1.SensitivityInternal) || a.Cleared(v1alpha1.SensitivityConfidential) {
		t.Errorf("clearance: Internal %v (want true), Confidential %v (want false)",
			a.Cleared(v1alpha1.SensitivityInternal), a.Cleared(v1alpha1.SensitivityConfidential))
	}
	if a.SensitivityAction != v1alpha1.SensitivityActionDrop {
		t.Errorf("sensitivityAction = %q, want Drop", a.SensitivityAction)
	}
	// No permission applies and the router's defaultAccess is unset: Deny.
	if a := ResolveAccess(nil, "x", ""); a.Default != v1alpha1.AccessDeny || a.MaxSensitivity != v1alpha1.SensitivityInternal {
		t.Errorf("implied permission: default %q, maxSensitivity %q; want Deny, Internal", a.Default, a.MaxSensitivity)
	}
}

func TestAccessPathDeniedAndCleared(t *testing.T) {
	a := Access{DenyPaths: []string{"**/secrets/**", "salaries/*"}, MaxSensitivity: v1alpha1.SensitivityInternal}
	paths := map[string]bool{
		"":                        false,
		"salaries/bands.md":       true,
		"salaries/2026/bands.md":  false,
		"ops/secrets/keys.md":     true,
		"secrets/keys.md":         true,
		"policies/remote-work.md": false,
	}
	for p, want := range paths {
		if got := a.PathDenied("any", p); got != want {
			t.Errorf("PathDenied(%q) = %v, want %v", p, got, want)
		}
	}
	for s, want := range map[v1alpha1.Sensitivity]bool{
		v1alpha1.SensitivityPublic: true, v1alpha1.SensitivityInternal: true, "": true,
		v1alpha1.SensitivityConfidential: false, v1alpha1.SensitivityRestricted: false, "Bogus": false,
	} {
		if got := a.Cleared(s); got != want {
			t.Errorf("Cleared(%q) = %v, want %v", s, got, want)
		}
	}
}

// A Directory source authored on macOS or Windows may spell a folder Salaries/ where the
// permission says salaries/**: only pathMatching CaseInsensitive catches it, and each permission's
// globs keep their own mode when several apply.
func TestDenyPathsCaseInsensitive(t *testing.T) {
	root := t.TempDir()
	for p, c := range map[string]string{
		"Salaries/X.md":  "# Salary bands\n\nSalary band X for engineers.",
		"Reports/Q3.md":  "# Salary report\n\nSalary review in Q3.",
		"handbook.md":    "# Handbook\n\nSalary is paid monthly.",
		"reports/old.md": "# Old salary report\n\nSalary review last year.",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	docs := v1alpha1.ContextSource{ObjectMeta: meta("docs"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: root},
		Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
	}}
	salaries := func(m v1alpha1.PathMatching) v1alpha1.AgentPermission {
		return perm("salaries", v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, Default: v1alpha1.AccessAllow,
			DenyPaths: []string{"salaries/**"}, PathMatching: m})
	}
	reports := perm("reports", v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, Default: v1alpha1.AccessAllow,
		DenyPaths: []string{"reports/**"}}) // CaseSensitive by default: Reports/Q3.md stays
	tests := []struct {
		name  string
		perms []v1alpha1.AgentPermission
		want  []string
	}{
		{"unset is case-sensitive", []v1alpha1.AgentPermission{salaries("")}, []string{"Reports/Q3.md", "Salaries/X.md", "handbook.md", "reports/old.md"}},
		{"CaseSensitive", []v1alpha1.AgentPermission{salaries(v1alpha1.PathMatchingCaseSensitive)}, []string{"Reports/Q3.md", "Salaries/X.md", "handbook.md", "reports/old.md"}},
		{"CaseInsensitive", []v1alpha1.AgentPermission{salaries(v1alpha1.PathMatchingCaseInsensitive)}, []string{"Reports/Q3.md", "handbook.md", "reports/old.md"}},
		{"each permission keeps its mode", []v1alpha1.AgentPermission{salaries(v1alpha1.PathMatchingCaseInsensitive), reports}, []string{"Reports/Q3.md", "handbook.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := compile(t, &Config{
				Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "docs")},
				Sources: []v1alpha1.ContextSource{docs}, Permissions: tt.perms,
			})
			resp := query(t, s, Request{Text: "salary"})
			var got []string
			for _, c := range resp.Chunks {
				got = append(got, c.Path)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("paths = %q, want %q", got, tt.want)
			}
			if want := 4 - len(tt.want); resp.Stats.Dropped.PathDenied != want {
				t.Errorf("path_denied = %d, want %d", resp.Stats.Dropped.PathDenied, want)
			}
		})
	}
}

// TestToolRules is the merge rule of api.md §10.4 over a small catalog.
func TestToolRules(t *testing.T) {
	rules := func(name string, agents []string, r v1alpha1.ToolRules) v1alpha1.AgentPermission {
		return perm(name, v1alpha1.AgentPermissionSpec{Agents: agents, Default: v1alpha1.AccessAllow, Tools: r})
	}
	catalog := []v1alpha1.Tool{
		{Name: "refund", Namespace: "billing", SideEffects: v1alpha1.SideEffectsWrite, SafetyTags: []string{"financial"}},
		{Name: "create_invoice", Namespace: "billing.invoices", SideEffects: v1alpha1.SideEffectsWrite},
		{Name: "delete_invoice", Namespace: "billing.invoices", SideEffects: v1alpha1.SideEffectsDestructive},
		{Name: "list_invoices", Namespace: "billing.invoices", SideEffects: v1alpha1.SideEffectsRead},
		{Name: "web_search", SideEffects: v1alpha1.SideEffectsRead},
		{Name: "lookup", Namespace: "crm", SideEffects: v1alpha1.SideEffectsNone, SafetyTags: []string{"pii"}},
	}
	bot := []string{"bot"}
	tests := []struct {
		name  string
		perms []v1alpha1.AgentPermission
		agent string
		want  []string
	}{
		{"no permission restricts nothing", nil, "bot",
			[]string{"billing.refund", "billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices", "web_search", "crm.lookup"}},
		{"one level glob", []v1alpha1.AgentPermission{rules("a", bot, v1alpha1.ToolRules{Allow: []string{"billing.*"}})}, "bot",
			[]string{"billing.refund"}},
		{"globstar", []v1alpha1.AgentPermission{rules("a", bot, v1alpha1.ToolRules{Allow: []string{"billing.**"}})}, "bot",
			[]string{"billing.refund", "billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices"}},
		{"deny beats allow", []v1alpha1.AgentPermission{
			rules("a", bot, v1alpha1.ToolRules{Allow: []string{"billing.**"}}),
			rules("b", []string{"*"}, v1alpha1.ToolRules{Deny: []string{"billing.**.delete_*", "billing.refund"}}),
		}, "bot", []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices"}},
		{"allows are a union, and constrain once one permission lists some", []v1alpha1.AgentPermission{
			rules("a", bot, v1alpha1.ToolRules{Allow: []string{"web_search"}}),
			rules("b", bot, v1alpha1.ToolRules{Allow: []string{"crm.*"}}),
			rules("c", bot, v1alpha1.ToolRules{}),
		}, "bot", []string{"web_search", "crm.lookup"}},
		{"lowest maxSideEffects", []v1alpha1.AgentPermission{
			rules("a", bot, v1alpha1.ToolRules{MaxSideEffects: v1alpha1.SideEffectsWrite}),
			rules("b", bot, v1alpha1.ToolRules{MaxSideEffects: v1alpha1.SideEffectsRead}),
			rules("c", bot, v1alpha1.ToolRules{}),
		}, "bot", []string{"billing.invoices.list_invoices", "web_search", "crm.lookup"}},
		{"denySafetyTags union", []v1alpha1.AgentPermission{
			rules("a", bot, v1alpha1.ToolRules{DenySafetyTags: []string{"pii"}}),
			rules("b", bot, v1alpha1.ToolRules{DenySafetyTags: []string{"financial"}}),
		}, "bot", []string{"billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices", "web_search"}},
		{"permissions of other agents do not apply", []v1alpha1.AgentPermission{
			rules("a", []string{"other"}, v1alpha1.ToolRules{Deny: []string{"**"}}),
			rules("b", bot, v1alpha1.ToolRules{Deny: []string{"crm.**"}}),
		}, "bot", []string{"billing.refund", "billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices", "web_search"}},
		{"deny everything", []v1alpha1.AgentPermission{rules("a", []string{"*"}, v1alpha1.ToolRules{Deny: []string{"**"}})}, "bot", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := ResolveAccess(tt.perms, tt.agent, v1alpha1.AccessAllow)
			var got []string
			for i := range catalog {
				if a.Tools.Usable(&catalog[i]) {
					got = append(got, catalog[i].ID())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("usable = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestToolRulesUnsetSideEffectsIsWorstCase(t *testing.T) {
	a := ResolveAccess([]v1alpha1.AgentPermission{perm("a", v1alpha1.AgentPermissionSpec{Agents: []string{"*"},
		Tools: v1alpha1.ToolRules{MaxSideEffects: v1alpha1.SideEffectsWrite}})}, "x", v1alpha1.AccessAllow)
	if a.Tools.Usable(&v1alpha1.Tool{Name: "undeclared"}) {
		t.Error("a tool without sideEffects (not defaulted) must count as Destructive")
	}
}

// TestSourceDenyPaths: spec.sourceDenyPaths deny paths of the named source
// only, merged like denyPaths (union, each permission's pathMatching), while
// denyPaths still apply to every source.
func TestSourceDenyPaths(t *testing.T) {
	perms := []v1alpha1.AgentPermission{
		defaulted(perm("finance", v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, Default: v1alpha1.AccessAllow,
			DenyPaths:       []string{"**/drafts/**"},
			SourceDenyPaths: []v1alpha1.SourceDenyPaths{{Source: "finance-docs", Paths: []string{"salaries/**"}}}})),
		defaulted(perm("wiki", v1alpha1.AgentPermissionSpec{Agents: []string{"bot"}, Default: v1alpha1.AccessAllow, PathMatching: v1alpha1.PathMatchingCaseInsensitive,
			SourceDenyPaths: []v1alpha1.SourceDenyPaths{{Source: "wiki", Paths: []string{"hr/**"}}, {Source: "finance-docs", Paths: []string{"Payroll/**"}}}})),
	}
	tests := []struct {
		agent, source, path string
		want                bool
	}{
		{"bot", "finance-docs", "salaries/bands.md", true},
		{"bot", "hr-docs", "salaries/bands.md", false}, // another source with the same layout keeps its files
		{"bot", "wiki", "salaries/bands.md", false},
		{"bot", "wiki", "HR/leave.md", true}, // the wiki permission is CaseInsensitive
		{"bot", "finance-docs", "payroll/2026.md", true},
		{"bot", "finance-docs", "Salaries/bands.md", false}, // the finance permission is CaseSensitive
		{"bot", "hr-docs", "hr/leave.md", false},
		{"bot", "hr-docs", "a/drafts/x.md", true}, // denyPaths: every source
		{"other", "wiki", "hr/leave.md", false},   // the wiki permission does not apply
		{"other", "finance-docs", "salaries/bands.md", true},
		{"bot", "finance-docs", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.agent+"/"+tc.source+"/"+tc.path, func(t *testing.T) {
			a := ResolveAccess(perms, tc.agent, v1alpha1.AccessDeny)
			if got := a.PathDenied(tc.source, tc.path); got != tc.want {
				t.Errorf("PathDenied(%q, %q) = %v, want %v", tc.source, tc.path, got, tc.want)
			}
		})
	}
	a := ResolveAccess(perms, "bot", v1alpha1.AccessDeny)
	want := map[string][]string{"finance-docs": {"salaries/**"}}
	if !reflect.DeepEqual(a.SourceDenyPaths, want) {
		t.Errorf("SourceDenyPaths = %v, want %v", a.SourceDenyPaths, want)
	}
	wantFolded := map[string][]string{"finance-docs": {"payroll/**"}, "wiki": {"hr/**"}}
	if !reflect.DeepEqual(a.SourceDenyPathsIgnoreCase, wantFolded) {
		t.Errorf("SourceDenyPathsIgnoreCase = %v, want %v", a.SourceDenyPathsIgnoreCase, wantFolded)
	}
}
