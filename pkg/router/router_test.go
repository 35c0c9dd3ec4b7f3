package router_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/pkg/router"
)

const manifests = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: r}
spec: {defaultAccess: Allow}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: notes}
spec:
  type: Inline
  inline: {title: Notes, content: "The deploy freeze starts on Friday."}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: search}
spec:
  type: HTTPAPI
  httpAPI: {url: "SEARCH_URL", responsePath: results, textField: text}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  parentRefs: [{name: r}]
  sources: [{name: notes}, {name: search}]
`

func write(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "router.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The embedded router answers, reports a failing source while the rest
// answers, reloads a changed file, and keeps serving the old configuration
// when the new one is invalid.
func TestLoadQueryReload(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens: the source fails
	dir := t.TempDir()
	write(t, dir, strings.Replace(manifests, "SEARCH_URL", down.URL, 1))
	ctx := context.Background()
	r, err := router.Load(ctx, []string{dir}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name() != "r" {
		t.Errorf("Name = %q, want r", r.Name())
	}
	ask := func() *router.Response {
		t.Helper()
		resp, err := r.Query(ctx, router.Request{Text: "when does the deploy freeze start?"})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := ask()
	if len(resp.Chunks) != 1 || !strings.Contains(resp.Chunks[0].Content, "Friday") {
		t.Fatalf("chunks = %+v, want the notes", resp.Chunks)
	}
	if len(resp.FailedSources) != 1 || resp.FailedSources[0].Source != "search" {
		t.Errorf("failed sources = %+v, want search", resp.FailedSources)
	}

	write(t, dir, strings.NewReplacer("SEARCH_URL", down.URL, "Friday", "Thursday").Replace(manifests))
	if err := r.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if c := ask().Chunks; len(c) != 1 || !strings.Contains(c[0].Content, "Thursday") {
		t.Fatalf("after reload: chunks = %+v, want Thursday", c)
	}

	write(t, dir, strings.NewReplacer("SEARCH_URL", down.URL, "type: Inline", "type: Carrier pigeon").Replace(manifests))
	err = r.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "router.yaml") || !strings.Contains(err.Error(), "spec.type") {
		t.Fatalf("Reload of an invalid file = %v, want an error naming the file and spec.type", err)
	}
	if c := ask().Chunks; len(c) != 1 || !strings.Contains(c[0].Content, "Thursday") {
		t.Fatalf("after a bad reload: chunks = %+v, want the previous configuration", c)
	}
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := router.Load(ctx, nil, router.Options{}); err == nil {
		t.Error("Load with no paths: no error")
	}
	missing := filepath.Join(t.TempDir(), "absent")
	if _, err := router.Load(ctx, []string{missing}, router.Options{}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("Load of a missing path = %v, want an error naming it", err)
	}
}

// A pack names what is wrong with a session, and the phase.
func TestBuildPackErrors(t *testing.T) {
	ctx := context.Background()
	r, err := router.Load(ctx, []string{"../../examples/quickstart"}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &router.Session{Items: []router.Item{{ID: "r1", Kind: "tool_result", ParentID: "c9", Text: "ok"}}}
	if _, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseAnswer}); err == nil || !strings.Contains(err.Error(), `items[0].parent_id: no item has id "c9"`) {
		t.Errorf("BuildPack with a missing parent = %v", err)
	}
	ok := &router.Session{Items: []router.Item{{ID: "u1", Kind: "user_turn", Text: "How many vacation days do I get?"}}}
	if _, err := r.BuildPack(ctx, ok, router.PackRequest{Phase: "plan"}); err == nil || !strings.Contains(err.Error(), `unknown phase "plan"`) {
		t.Errorf("BuildPack with an unknown phase = %v", err)
	}
	pack, err := r.BuildPack(ctx, ok, router.PackRequest{Phase: router.PhaseAnswer, Agent: "hr-assistant", Query: "How many vacation days do I get?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pack.Chunks) == 0 || !strings.Contains(pack.Text, "28 working days") || !strings.Contains(pack.Text, "user: How many vacation days") {
		t.Errorf("pack with a query lacks the turn or the knowledge:\n%s", pack.Text)
	}
}

// A router's spec.phases set its packs' budgets, ceilings and kinds;
// Explain lists what was left out.
func TestBuildPackPhases(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, strings.NewReplacer("SEARCH_URL", "http://127.0.0.1:1/search",
		"spec: {defaultAccess: Allow}", "spec: {defaultAccess: Allow, phases: {answer: {budget: 700, maxBudget: 900}, route: {kinds: [user_turn]}}}").Replace(manifests))
	r, err := router.Load(ctx, []string{dir}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &router.Session{Items: []router.Item{{ID: "u1", Kind: "user_turn", Text: "When does the freeze start?"},
		{ID: "a1", Kind: "agent_message", Text: "Let me check the calendar."}}}
	for _, c := range []struct {
		ph        router.Phase
		maxTokens int
		want      int
	}{{router.PhaseAnswer, 0, 700}, {router.PhaseAnswer, 900, 900}, {router.PhaseRoute, 0, 2000}, {router.PhaseHandoff, 0, 4000}} {
		pack, err := r.BuildPack(ctx, s, router.PackRequest{Phase: c.ph, MaxTokens: c.maxTokens})
		if err != nil {
			t.Fatal(err)
		}
		if pack.Budget != c.want {
			t.Errorf("%s: budget %d, want %d", c.ph, pack.Budget, c.want)
		}
	}
	if _, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseAnswer, MaxTokens: 901}); err == nil ||
		err.Error() != "max_tokens 901 is above the answer phase's ceiling 900 (spec.phases.answer.maxBudget)" {
		t.Errorf("max_tokens past the ceiling: %v", err)
	}
	pack, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseRoute, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(pack.DroppedItems) != 1 || pack.DroppedItems[0] != (router.DroppedItem{ID: "a1", Kind: "agent_message", Reason: "policy", Tokens: pack.DroppedItems[0].Tokens}) ||
		!pack.Items[0].Pinned {
		t.Errorf("route with kinds [user_turn]: items %+v, dropped %+v", pack.Items, pack.DroppedItems)
	}
}

// FindTools shortlists the quickstart's catalog for an engineer's question,
// and Sources reports each source with its chunks or tools.
func TestFindToolsAndSources(t *testing.T) {
	ctx := context.Background()
	r, err := router.Load(ctx, []string{"../../examples/quickstart"}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.FindTools(ctx, router.Request{Text: "roll back the deploy", Agent: "eng-assistant"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tools) == 0 || resp.Tools[0].Source != "eng-tools" {
		t.Fatalf("tools = %+v, want eng-tools' cards first", resp.Tools)
	}
	for _, c := range resp.Tools {
		if c.Name == "rollback_deploy" || c.Name == "open_incident" {
			t.Errorf("%s is shortlisted although the quickstart's tool rules deny it to eng-assistant", c.Name)
		}
	}
	byName := map[string]router.SourceStatus{}
	for _, s := range r.Sources() {
		byName[s.Name] = s
	}
	if s := byName["eng-tools"]; s.Tools == 0 || s.Error != "" {
		t.Errorf("eng-tools status = %+v, want its tools", s)
	}
	if s := byName["hr-docs"]; s.Chunks == 0 || s.Error != "" {
		t.Errorf("hr-docs status = %+v, want its chunks", s)
	}
}

// A router's spec.sessions.firewall.keep shows the kept paths in the
// summaries of its packs, and a pack lists artifacts without their text.
func TestBuildPackKeep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write(t, dir, strings.NewReplacer("SEARCH_URL", "http://127.0.0.1:1/search",
		"spec: {defaultAccess: Allow}", `spec: {defaultAccess: Allow, sessions: {firewall: {keep: [{tools: ["billing.*"], paths: [".state"]}]}}}`).Replace(manifests))
	r, err := router.Load(ctx, []string{dir}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	result := `{"state": "frozen", "rows": "` + strings.Repeat("r", 3000) + `"}`
	s := &router.Session{Items: []router.Item{
		{ID: "c1", Kind: "tool_call", Text: "billing.freeze_status()"},
		{ID: "r1", Kind: "tool_result", ParentID: "c1", Text: result},
	}}
	pack, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseInterpret})
	if err != nil {
		t.Fatal(err)
	}
	if len(pack.Artifacts) != 1 || !strings.Contains(pack.Artifacts[0].Summary, "\nkeep: .state = \"frozen\"\n") || strings.Contains(pack.Text, strings.Repeat("r", 200)) {
		t.Errorf("pack without the kept path, or with the result's text:\n%s", pack.Text)
	}
}

// BuildPack masks the secrets of the session it is given (the router's
// spec.sessions.secrets, Mask by default) on a copy: the caller's session
// keeps its text.
func TestBuildPackMasksSecrets(t *testing.T) {
	ctx := context.Background()
	r, err := router.Load(ctx, []string{"../../examples/quickstart"}, router.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const key = "AKIA" + "M2N4B6V8C1X3Z5L7"
	s := &router.Session{Items: []router.Item{{ID: "u1", Kind: "user_turn", Text: "is " + key + " still valid?"}}}
	pack, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseAnswer})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pack.Text, key) || !strings.Contains(pack.Text, "[secret:aws-access-key]") || pack.Stats.SecretsMasked != 1 {
		t.Errorf("pack text %q, secrets_masked %d", pack.Text, pack.Stats.SecretsMasked)
	}
	if s.Items[0].Text != "is "+key+" still valid?" {
		t.Errorf("BuildPack changed the caller's session: %q", s.Items[0].Text)
	}
}
