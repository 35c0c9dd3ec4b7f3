package convert

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	gitobject "github.com/go-git/go-git/v5/plumbing/object"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// wikiRepo is a git repository with the engineering wiki under wiki/ (the
// fixture's git_repo path) and a file outside it.
func wikiRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wiki.git")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"wiki/deploy.md": "# Deploys\n\n## Rolling out\nDeploy the service with the release pipeline; roll back with the previous tag.\n",
		"README.md":      "# Deploy notes outside the wiki folder\n",
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &gitobject.Signature{Name: "t", Email: "t@example.com", When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := wt.Commit("wiki", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	// The fixture's ref.
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: head.Hash(), Branch: "refs/heads/main", Create: true}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The converted fixture passes validate as written to a folder, and queries
// through it select what the theaios routes and permissions select: the
// routes match by text, agent, metadata and variables, permissions deny
// sources and paths, and ${VAR} references reach the git URL, the HTTP URL
// and the header value.
func TestRoundTrip(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "authorization|q" of each KB request
	kb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Q string `json:"q"`
			K int    `json:"k"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/search" || json.NewDecoder(r.Body).Decode(&body) != nil || body.K != 5 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+"|"+body.Q)
		mu.Unlock()
		_, _ = w.Write([]byte(`{"data": {"results": [{"title": "Queue resets", "body": "Reset the ticket queue from the admin page."}]}}`))
	}))
	defer kb.Close()
	t.Setenv("WIKI_GIT_URL", wikiRepo(t))
	t.Setenv("KB_URL", kb.URL)
	t.Setenv("KB_TOKEN", "tok-123")

	out := t.TempDir()
	res := convertFixture(t, Options{OutputDir: out})
	for _, f := range Files {
		if data := res.FileFor(f.Kind); data != nil {
			if err := os.WriteFile(filepath.Join(out, f.Name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	opts := engine.Options{CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	set, problems := manifest.Validate(ctx, []string{out}, "", opts)
	if len(problems) > 0 {
		t.Fatalf("validate:\n%v", problems)
	}
	cfg, err := set.Config("")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := engine.Compile(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		req        engine.Request
		routes     []string
		denied     []string
		paths      []string // source:path of the chunks, in order
		pathDenied int
	}{
		{"policy question of the HR assistant: docs, not the secrets", engine.Request{Text: "What is the PTO policy?", Agent: "hr-assistant"},
			[]string{"always", "policy-questions"}, nil,
			[]string{"system-prompt:", "company-docs:hr/pto.md", "company-docs:hr/pto.md", "company-docs:hr/remote.md"}, 1},
		{"engineering by agent reads the wiki folder of the repository", engine.Request{Text: "How do I deploy the service?", Agent: "eng-assistant"},
			[]string{"always", "engineering"}, nil,
			[]string{"system-prompt:", "eng-wiki:wiki/deploy.md"}, 0},
		{"not (text contains salary)", engine.Request{Text: "deploy salary", Agent: "eng-assistant"},
			[]string{"always"}, nil, []string{"system-prompt:"}, 0},
		// No chunk shares a word: as in theaios, the matched folder gives its chunks (onNoMatch: Priority), secrets still denied.
		{"engineering by metadata, but the wiki is denied to HR", engine.Request{Text: "How do I deploy?", Agent: "hr-assistant", Metadata: map[string]string{"department": "engineering"}},
			[]string{"always", "engineering"}, []string{"eng-wiki"},
			[]string{"system-prompt:", "company-docs:hr/pto.md", "company-docs:hr/pto.md", "company-docs:hr/remote.md"}, 1},
		{"support by a variable: the KB is asked", engine.Request{Text: "Ticket from bob@acme.com: reset the queue", Agent: "support-bot"},
			[]string{"always", "support"}, nil, []string{"system-prompt:", "kb-search:"}, 0},
		{"contains is case-sensitive", engine.Request{Text: "what is the pto Policy", Agent: "hr-assistant"},
			[]string{"always"}, nil, []string{"system-prompt:"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := snap.Query(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(resp.MatchedRoutes, tt.routes) {
				t.Errorf("matched routes = %v, want %v", resp.MatchedRoutes, tt.routes)
			}
			if !slices.Equal(resp.DeniedSources, tt.denied) && (len(resp.DeniedSources) > 0 || len(tt.denied) > 0) {
				t.Errorf("denied = %v, want %v", resp.DeniedSources, tt.denied)
			}
			var got []string
			for _, c := range resp.Chunks {
				got = append(got, c.Source+":"+c.Path)
				if strings.Contains(c.Content, "hunter2") {
					t.Errorf("a denied path's content was delivered: %q", c.Content)
				}
			}
			if !slices.Equal(got, tt.paths) {
				t.Errorf("chunks = %v, want %v", got, tt.paths)
			}
			if resp.Stats.Dropped.PathDenied != tt.pathDenied {
				t.Errorf("path_denied = %d, want %d", resp.Stats.Dropped.PathDenied, tt.pathDenied)
			}
			if len(resp.FailedSources) > 0 || len(resp.RouteErrors) > 0 {
				t.Errorf("failed %v, route errors %v", resp.FailedSources, resp.RouteErrors)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"Bearer tok-123|Ticket from bob@acme.com: reset the queue"}; !slices.Equal(seen, want) {
		t.Errorf("KB requests = %q, want %q", seen, want)
	}
}

// Under manual ranking the converted router answers in theaios's order: the
// order of routes and of their sources, whatever priority said.
func TestManualRankingKeepsRouteOrder(t *testing.T) {
	in := `sources:
  b: {type: inline, content: "B text", priority: 50}
  a: {type: inline, content: "A text"}
  c: {type: inline, content: "C text"}
routes:
  - {name: first, sources: [a]}
  - {name: second, sources: [b, a, c]}
budget: {ranking: manual}
`
	snap := compileTheaios(t, in)
	resp, err := snap.Query(context.Background(), engine.Request{Text: "text"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.Chunks {
		got = append(got, c.Source)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("chunks from %v, want %v", got, want)
	}
}

// A converted configuration ranks questions as the reference keyword score
// does. Each case differs between the reference tokenization and a
// plausible other one, and the wrong answer would win the tie-break (source
// name): "#" and "+" stay part of a keyword, "not" is a reference stopword,
// U+001C separates words as Python's str.split does, and a text whose
// content holds no keyword scores 0.
func TestKeywordRankingMatchesReference(t *testing.T) {
	in := "sources:\n" +
		"  a-ops: {type: inline, content: \"Our on-call channel is ops, not pager.\"}\n" +
		"  b-hash-ops: {type: inline, content: \"Post escalations in #ops.\"}\n" +
		"  a-not: {type: inline, content: \"Do not email; not ever; not now.\"}\n" +
		"  b-vacation: {type: inline, content: \"Vacation requests need approval.\"}\n" +
		"  a-c: {type: inline, content: \"Errors in C code.\"}\n" +
		"  b-cpp: {type: inline, content: \"C++ errors are compiler output.\"}\n" +
		"  a-glued: {type: inline, content: \"rota\\u001cschedule here\"}\n" +
		"  b-schedule: {type: inline, content: \"The schedule is weekly.\"}\n" +
		"routes:\n" +
		"  - {name: all, sources: [a-ops, b-hash-ops, a-not, b-vacation, a-c, b-cpp, a-glued, b-schedule]}\n" +
		"budget: {ranking: relevance}\n"
	snap := compileTheaios(t, in)
	// Reference scores (|question keywords in the chunk| / |question keywords|), worked by hand.
	tests := []struct {
		question, top string
		score         float64
	}{
		{"Where is #ops?", "b-hash-ops", 1},         // {#ops}: a-ops holds "ops", not "#ops"
		{"not vacation", "b-vacation", 1},           // {vacation}: "not" is a stopword
		{"c++ errors", "b-cpp", 1},                  // {c++, errors}: a-c has errors only, 0.5
		{"weekly schedule", "b-schedule", 1},        // a-glued holds "schedule" too (U+001C splits), 0.5
		{"rota\u001cschedule", "a-glued", 1},        // {rota, schedule}: b-schedule 0.5
		{"(approval)! [requests]", "b-vacation", 1}, // brackets and marks are trimmed
	}
	for _, tt := range tests {
		t.Run(tt.question, func(t *testing.T) {
			resp, err := snap.Query(context.Background(), engine.Request{Text: tt.question})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Chunks) == 0 {
				t.Fatal("no chunks")
			}
			if c := resp.Chunks[0]; c.Source != tt.top || c.RelevanceScore != tt.score {
				t.Errorf("top = %s (%v), want %s (%v); all: %+v", c.Source, c.RelevanceScore, tt.top, tt.score, resp.Chunks)
			}
		})
	}
}

// compileTheaios converts a theaios file and compiles the result.
func compileTheaios(t *testing.T, in string) *engine.Snapshot {
	t.Helper()
	res, err := Theaios("f.yaml", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Parse("out.yaml", res.Stream())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := set.Config("")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := engine.Compile(context.Background(), cfg, engine.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
