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
			perms:   []v1alpha1.AgentPermission{perm("bare", v1alpha1.AgentPermissionSpec{Agents: []string{"x"}, AllowSources: []string{"a"}})},
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
		if got := a.PathDenied(p); got != want {
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
