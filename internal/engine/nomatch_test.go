package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// beesKB is an inline prompt and two Directory sources whose files have known
// modification times; notes has the higher priority.
func beesKB(t *testing.T) []v1alpha1.ContextSource {
	t.Helper()
	root := t.TempDir()
	for _, f := range []struct {
		path, content string
		year          int
	}{
		{"wiki/old.md", "# Old\n\nHives in winter.\n", 2020},
		{"wiki/new.md", "# New\n\nSwarms in spring.\n", 2024},
		{"notes/n.md", "# Note\n\nQueen rearing.\n", 2022},
	} {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(f.year, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name string, prio int32) v1alpha1.ContextSource {
		return v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceDirectory, Priority: prio, Directory: &v1alpha1.DirectorySource{Path: filepath.Join(root, name)},
			Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingMarkdownSections, MaxChunkTokens: 512},
		}}
	}
	return []v1alpha1.ContextSource{
		inlineSource("prompt", "Prompt", "You are the beekeeping assistant. Answer in one paragraph."),
		dir("wiki", 0), dir("notes", 5),
	}
}

func chunkIDs(resp *Response) []string {
	out := []string{}
	for _, c := range resp.Chunks {
		out = append(out, c.Source+":"+c.Path)
	}
	return out
}

// TestOnNoMatch: a route matched by a tag reaches Directory sources that share
// no term with the question; spec.ranking.onNoMatch decides what they give,
// and stats say so.
func TestOnNoMatch(t *testing.T) {
	kb := beesKB(t)
	tests := []struct {
		policy      v1alpha1.NoMatchPolicy
		text        string
		want        []string
		noTermMatch int
		fallback    int
	}{
		{v1alpha1.NoMatchEmpty, "tell me something", []string{"prompt:"}, 2, 0},
		{v1alpha1.NoMatchRecent, "tell me something", []string{"prompt:", "wiki:new.md", "notes:n.md", "wiki:old.md"}, 2, 3},
		{v1alpha1.NoMatchPriority, "tell me something", []string{"prompt:", "notes:n.md", "wiki:new.md", "wiki:old.md"}, 2, 3},
		// One source shares a term: the policy does not apply, the silent source is counted.
		{v1alpha1.NoMatchRecent, "winter hives", []string{"prompt:", "wiki:old.md"}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(string(tc.policy)+"/"+tc.text, func(t *testing.T) {
			s := compile(t, &Config{
				Router:  router(func(s *v1alpha1.ContextRouterSpec) { s.Ranking.OnNoMatch = tc.policy }),
				Routes:  []v1alpha1.ContextRoute{routeTo("bees", `"bees" in tags`, "prompt", "wiki", "notes")},
				Sources: kb,
			})
			resp := query(t, s, Request{Text: tc.text, Tags: []string{"bees"}})
			if got := chunkIDs(resp); !slices.Equal(got, tc.want) {
				t.Errorf("chunks = %v, want %v", got, tc.want)
			}
			if resp.Stats.NoTermMatch != tc.noTermMatch || resp.Stats.NoMatchFallback != tc.fallback {
				t.Errorf("no_term_match %d, no_match_fallback %d; want %d, %d", resp.Stats.NoTermMatch, resp.Stats.NoMatchFallback, tc.noTermMatch, tc.fallback)
			}
		})
	}
}

// TestInlinePinned: an Inline chunk of a matched route shares no term with the
// question, yet it is taken first under every strategy; when even it does not
// fit, stats.pinned_dropped says so.
func TestInlinePinned(t *testing.T) {
	kb := beesKB(t)
	promptTokens := 0
	for _, strategy := range []v1alpha1.RankingStrategy{v1alpha1.RankingRelevance, v1alpha1.RankingRecency, v1alpha1.RankingManual} {
		for _, tc := range []struct {
			name          string
			maxTokens     func() int
			want          []string
			pinnedDropped int
		}{
			{"room for the prompt only", func() int { return promptTokens }, []string{"prompt:"}, 0},
			{"room for both", func() int { return 1000 }, []string{"prompt:", "wiki:old.md"}, 0},
			{"no room for the prompt", func() int { return promptTokens - 1 }, []string{"wiki:old.md"}, 1},
		} {
			t.Run(string(strategy)+"/"+tc.name, func(t *testing.T) {
				s := compile(t, &Config{
					Router:  router(func(s *v1alpha1.ContextRouterSpec) { s.Ranking.Strategy = strategy }),
					Routes:  []v1alpha1.ContextRoute{routeTo("bees", "", "prompt", "wiki")},
					Sources: kb,
				})
				promptTokens = s.est.Count(kb[0].Spec.Inline.Content)
				resp := query(t, s, Request{Text: "winter hives", MaxTokens: tc.maxTokens()})
				if got := chunkIDs(resp); !slices.Equal(got, tc.want) {
					t.Errorf("chunks = %v, want %v", got, tc.want)
				}
				if resp.Stats.PinnedDropped != tc.pinnedDropped {
					t.Errorf("pinned_dropped = %d, want %d", resp.Stats.PinnedDropped, tc.pinnedDropped)
				}
			})
		}
	}
}

// TestUnnamedAgentWarning: an agent that no permission names, shut out by
// defaultAccess: Deny, is told so in the response, which names no other agent.
func TestUnnamedAgentWarning(t *testing.T) {
	kb := beesKB(t)
	staff := perm("staff", v1alpha1.AgentPermissionSpec{Agents: []string{"staff_bot", "admin_bot"}, AllowSources: []string{"wiki"}, Default: v1alpha1.AccessDeny})
	anyone := perm("anyone", v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, AllowSources: []string{"prompt"}, Default: v1alpha1.AccessDeny})
	tests := []struct {
		name   string
		access v1alpha1.AccessPolicy
		perms  []v1alpha1.AgentPermission
		agent  string
		want   []string
	}{
		{"unnamed agent, Deny", v1alpha1.AccessDeny, []v1alpha1.AgentPermission{staff}, "member_bot",
			[]string{`no AgentPermission names agent "member_bot", so the router's defaultAccess: Deny denies every source`}},
		{"no agent, Deny", v1alpha1.AccessDeny, []v1alpha1.AgentPermission{staff}, "",
			[]string{`no agent was given and no AgentPermission names "*", so the router's defaultAccess: Deny denies every source`}},
		{"named agent", v1alpha1.AccessDeny, []v1alpha1.AgentPermission{staff}, "staff_bot", []string{}},
		{"unnamed agent, Allow", v1alpha1.AccessAllow, []v1alpha1.AgentPermission{staff}, "member_bot", []string{}},
		{"a * permission names everyone", v1alpha1.AccessDeny, []v1alpha1.AgentPermission{staff, anyone}, "member_bot", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := compile(t, &Config{
				Router:      router(func(s *v1alpha1.ContextRouterSpec) { s.DefaultAccess = tc.access }),
				Routes:      []v1alpha1.ContextRoute{routeTo("all", "", "prompt", "wiki")},
				Sources:     kb,
				Permissions: tc.perms,
			})
			resp := query(t, s, Request{Text: "hives", Agent: tc.agent})
			if !slices.Equal(resp.Warnings, tc.want) {
				t.Errorf("warnings = %q, want %q", resp.Warnings, tc.want)
			}
			if got := s.KnownAgents(); !slices.Equal(got, []string{"admin_bot", "staff_bot"}) {
				t.Errorf("KnownAgents = %q", got)
			}
		})
	}
}
