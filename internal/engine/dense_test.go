package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/embed"
	"github.com/contextrouter/contextrouter/internal/embed/embedtest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

const denseKey = "sk-dense-secret-4242"

// The model knows that an automobile or a vehicle is a car and that upkeep
// and servicing are maintenance; BM25 does not.
var carSynonyms = map[string]string{"automobile": "car", "vehicle": "car", "upkeep": "maintenance", "servicing": "maintenance", "service": "maintenance"}

// carDocs: park.md says "car" most often (BM25's best for "car maintenance"),
// upkeep.md says it once but is about maintenance (the model's best), and
// schedule.md shares no word with the question.
var carDocs = map[string]string{
	"park.md":     "# Car park\n\nThe car park opens at eight; the car park fee is 2 euros per car.\n",
	"upkeep.md":   "# Automobile upkeep\n\nService the car yearly and rotate tyres.\n",
	"schedule.md": "# Vehicle servicing\n\nVehicle servicing happens in spring.\n",
}

type mapSecrets map[string]string

func (m mapSecrets) SecretValue(name, key string) (string, error) {
	if v, ok := m[name+"/"+key]; ok {
		return v, nil
	}
	return "", sources.ErrSecretNotFound
}

func writeDocs(t testing.TB, dir string, docs map[string]string) {
	t.Helper()
	for name, text := range docs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// denseConfig is a router over one Directory source of docs, ranked by
// strategy with the test server's embeddings.
func denseConfig(t testing.TB, srv *embedtest.Server, dir string, mut func(*v1alpha1.RankingSpec)) *Config {
	t.Helper()
	r := router(func(s *v1alpha1.ContextRouterSpec) {
		s.Ranking.DedupThreshold = "0"
		s.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: srv.EmbeddingsURL(), Model: "test-model",
			APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "ai", Key: "key"}, BatchSize: 2, Timeout: &metav1.Duration{Duration: 2 * time.Second}}
		if mut != nil {
			mut(&s.Ranking)
		}
	})
	src := v1alpha1.ContextSource{ObjectMeta: meta("docs"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: dir},
		Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
	}}
	src.Default()
	return &Config{Router: r, Routes: []v1alpha1.ContextRoute{routeTo("all", "", "docs")}, Sources: []v1alpha1.ContextSource{src}}
}

func denseServer(t testing.TB) *embedtest.Server {
	srv := embedtest.New(t)
	srv.Synonyms, srv.Key = carSynonyms, denseKey
	return srv
}

func compileDenseCfg(t testing.TB, cfg *Config, cacheDir string) *Snapshot {
	t.Helper()
	s, err := Compile(context.Background(), cfg, Options{CacheDir: cacheDir, Secrets: mapSecrets{"ai/key": denseKey}})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func paths(resp *Response) []string {
	var out []string
	for _, c := range resp.Chunks {
		out = append(out, c.Path)
	}
	return out
}

func TestDenseAndHybridRanking(t *testing.T) {
	srv := denseServer(t)
	dir := t.TempDir()
	writeDocs(t, dir, carDocs)
	tests := []struct {
		name     string
		strategy v1alpha1.RankingStrategy
		weight   string
		want     []string
	}{
		{"BM25 ranks the page that says car most", v1alpha1.RankingRelevance, "", []string{"park.md", "upkeep.md"}},
		{"Embedding ranks by meaning and finds a page with no shared word", v1alpha1.RankingEmbedding, "", []string{"schedule.md", "upkeep.md", "park.md"}},
		{"Hybrid leaning dense puts the dense winner first", v1alpha1.RankingHybrid, "0.7", []string{"upkeep.md", "park.md", "schedule.md"}},
		{"Hybrid leaning BM25 keeps the BM25 winner first", v1alpha1.RankingHybrid, "0.2", []string{"park.md", "upkeep.md", "schedule.md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) {
				r.Strategy = tt.strategy
				if tt.weight != "" {
					r.Hybrid = &v1alpha1.HybridSpec{DenseWeight: tt.weight}
				}
			})
			s := compileDenseCfg(t, cfg, t.TempDir())
			resp := query(t, s, Request{Text: "car maintenance"})
			if got := paths(resp); !slices.Equal(got, tt.want) {
				t.Errorf("order = %v, want %v", got, tt.want)
			}
			if len(resp.Warnings) != 0 {
				t.Errorf("warnings: %v", resp.Warnings)
			}
			if resp.Chunks[0].RelevanceScore != 1 {
				t.Errorf("best score %v, want 1", resp.Chunks[0].RelevanceScore)
			}
		})
	}
}

func TestRerankReorders(t *testing.T) {
	for _, tt := range []struct{ format, path string }{{"TEI", "/rerank"}, {"Cohere", "/v1/rerank"}} {
		t.Run(tt.format, func(t *testing.T) {
			srv := denseServer(t)
			// The reranker prefers short documents.
			srv.RerankScore = func(q, d string) float64 { return -float64(len(d)) }
			dir := t.TempDir()
			writeDocs(t, dir, carDocs)
			cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) {
				r.Embedding = nil
				r.Rerank = &v1alpha1.RerankSpec{Endpoint: srv.URL + tt.path, Model: "rr", Format: v1alpha1.RerankFormat(tt.format), TopN: 2,
					APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "ai", Key: "key"}}
			})
			s := compileDenseCfg(t, cfg, t.TempDir())
			resp := query(t, s, Request{Text: "car"})
			if got, want := paths(resp), []string{"upkeep.md", "park.md"}; !slices.Equal(got, want) {
				t.Errorf("order = %v, want %v (BM25 gives park.md first)", got, want)
			}
			if srv.Reranks() != 1 || srv.Requests() != 0 {
				t.Errorf("%d rerank and %d embedding requests, want 1 and 0", srv.Reranks(), srv.Requests())
			}
		})
	}
}

func TestDenseFallsBackToBM25(t *testing.T) {
	bm25 := []string{"park.md", "upkeep.md"}
	tests := []struct {
		name    string
		mut     func(*v1alpha1.RankingSpec)
		break_  func(srv *embedtest.Server)
		warning string
		failure RankingFailure
	}{
		{"embedding endpoint down at query time", func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingHybrid },
			func(srv *embedtest.Server) { srv.FailAlways = true },
			"embedding endpoint failed (http://127.0.0.1", RankingFailure{EndpointEmbedding, embed.ReasonStatus}},
		{"embedding endpoint too slow", func(r *v1alpha1.RankingSpec) {
			r.Strategy = v1alpha1.RankingEmbedding
			r.Embedding.Timeout = &metav1.Duration{Duration: 50 * time.Millisecond}
		}, func(srv *embedtest.Server) { srv.Delay = time.Second },
			"timeout after 50ms); ranked by BM25", RankingFailure{EndpointEmbedding, embed.ReasonTimeout}},
		{"rerank endpoint answers 503 (asked once: a query does not wait for retries)", func(r *v1alpha1.RankingSpec) {
			r.Rerank = &v1alpha1.RerankSpec{Endpoint: "/rerank", Format: v1alpha1.RerankTEI, TopN: 5,
				APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "ai", Key: "key"}}
		}, func(srv *embedtest.Server) { srv.FailAlways = true },
			"/rerank: HTTP 503 Service Unavailable", RankingFailure{EndpointRerank, embed.ReasonStatus}},
		{"rerank endpoint down", func(r *v1alpha1.RankingSpec) {
			r.Rerank = &v1alpha1.RerankSpec{Endpoint: "http://127.0.0.1:1/rerank", Format: v1alpha1.RerankTEI, TopN: 5}
		}, func(srv *embedtest.Server) {},
			"rerank endpoint failed (http://127.0.0.1:1/rerank: ", RankingFailure{EndpointRerank, embed.ReasonNetwork}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := denseServer(t)
			srv.EchoAuth = true
			dir := t.TempDir()
			writeDocs(t, dir, carDocs)
			cfg := denseConfig(t, srv, dir, tt.mut)
			if rr := cfg.Router.Spec.Ranking.Rerank; rr != nil && strings.HasPrefix(rr.Endpoint, "/") {
				rr.Endpoint = srv.URL + rr.Endpoint
			}
			s := compileDenseCfg(t, cfg, t.TempDir())
			if e := s.Embedding(); cfg.Router.Spec.Ranking.Strategy != v1alpha1.RankingRelevance && (e == nil || e.Error != "" || e.Vectors != 3) {
				t.Fatalf("Embedding() = %+v, want 3 vectors", e)
			}
			tt.break_(srv)
			before := srv.Requests() + srv.Reranks()
			resp := query(t, s, Request{Text: "car"})
			if got := paths(resp); !slices.Equal(got, bm25) {
				t.Errorf("order = %v, want BM25's %v", got, bm25)
			}
			if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tt.warning) {
				t.Errorf("warnings = %q, want one with %q", resp.Warnings, tt.warning)
			}
			if !slices.Equal(resp.RankingFailures, []RankingFailure{tt.failure}) {
				t.Errorf("RankingFailures = %v, want %v", resp.RankingFailures, tt.failure)
			}
			if strings.Contains(strings.Join(resp.Warnings, " "), denseKey) {
				t.Errorf("the key leaks: %q", resp.Warnings)
			}
			if n := srv.Requests() + srv.Reranks() - before; tt.failure.Reason == embed.ReasonStatus && n != 1 {
				t.Errorf("the query sent %d requests to the server, want 1 (no retries at query time)", n)
			}
		})
	}
}

func TestDenseCompileFailureServesBM25(t *testing.T) {
	srv := denseServer(t)
	srv.FailAlways, srv.EchoAuth = true, true
	dir := t.TempDir()
	writeDocs(t, dir, carDocs)
	cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingEmbedding })
	s := compileDenseCfg(t, cfg, t.TempDir())
	e := s.Embedding()
	if e == nil || !strings.Contains(e.Error, "HTTP 503") || !strings.Contains(e.Error, "(after 4 attempts)") || e.Vectors != 0 {
		t.Fatalf("Embedding() = %+v, want the 503 after 4 attempts", e)
	}
	ws := s.Warnings()
	if len(ws) != 1 || ws[0].Field != "spec.ranking.embedding" || !strings.Contains(ws[0].Message, "ranked by BM25") {
		t.Errorf("Warnings() = %v", ws)
	}
	resp := query(t, s, Request{Text: "car"})
	if got := paths(resp); !slices.Equal(got, []string{"park.md", "upkeep.md"}) {
		t.Errorf("order = %v, want BM25's", got)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "Embedding ranking is unavailable (chunk embeddings failed: ") {
		t.Errorf("warnings = %q", resp.Warnings)
	}
	for _, text := range append([]string{e.Error, ws[0].Message}, resp.Warnings...) {
		if strings.Contains(text, denseKey) {
			t.Errorf("the key leaks: %q", text)
		}
	}
}

func TestDenseVectorsAreCached(t *testing.T) {
	srv := denseServer(t)
	dir, cacheDir := t.TempDir(), t.TempDir()
	writeDocs(t, dir, carDocs)
	cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingHybrid })
	s := compileDenseCfg(t, cfg, cacheDir)
	if got := srv.Batches(); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("first compile: batches %v, want [2 1] (batchSize 2)", got)
	}
	if e := s.Embedding(); e.Embedded != 3 || e.Vectors != 3 || e.Dimensions != 64 {
		t.Errorf("Embedding() = %+v", e)
	}
	// A query vector is asked for once.
	srv.Reset()
	query(t, s, Request{Text: "car maintenance"})
	query(t, s, Request{Text: "car maintenance"})
	if got := srv.Inputs(); !slices.Equal(got, []string{"car maintenance"}) {
		t.Errorf("queries sent %q, want the question once", got)
	}
	// A recompile (a reload, a restart) sends only the changed chunk.
	writeDocs(t, dir, map[string]string{"park.md": "# Car park\n\nThe car park is closed.\n"})
	srv.Reset()
	s2 := compileDenseCfg(t, cfg, cacheDir)
	if got := srv.Inputs(); len(got) != 1 || !strings.Contains(got[0], "The car park is closed.") {
		t.Errorf("recompile sent %q, want only the changed chunk", got)
	}
	if e := s2.Embedding(); e.Embedded != 1 || e.Vectors != 3 {
		t.Errorf("Embedding() = %+v, want 1 embedded of 3", e)
	}
	// Checking a configuration (the operator, the webhook) asks nothing.
	srv.Reset()
	if _, err := Compile(context.Background(), cfg, Options{SkipLoad: true}); err != nil || srv.Requests() != 0 {
		t.Errorf("SkipLoad: err %v, %d requests", err, srv.Requests())
	}
}

// An embedding block under a strategy that does not use vectors costs nothing.
func TestEmbeddingIgnoredByRelevance(t *testing.T) {
	srv := denseServer(t)
	dir := t.TempDir()
	writeDocs(t, dir, carDocs)
	s := compileDenseCfg(t, denseConfig(t, srv, dir, nil), t.TempDir())
	resp := query(t, s, Request{Text: "car"})
	if srv.Requests() != 0 || s.Embedding() != nil || len(resp.Warnings) != 0 {
		t.Errorf("%d requests, Embedding() %+v, warnings %q; want none", srv.Requests(), s.Embedding(), resp.Warnings)
	}
}

// A rotated API key, and nothing else, gives another snapshot hash: serve
// replaces a snapshot only when the hash differs.
func TestRotatedKeyChangesHash(t *testing.T) {
	srv := embedtest.New(t) // no key required: every compile embeds
	dir := t.TempDir()
	writeDocs(t, dir, carDocs)
	cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) {
		r.Strategy = v1alpha1.RankingHybrid
		r.Rerank = &v1alpha1.RerankSpec{Endpoint: srv.URL + "/rerank", Format: v1alpha1.RerankTEI, TopN: 5,
			APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "rr", Key: "key"}}
	})
	hash := func(embedKey, rerankKey string) string {
		t.Helper()
		s, err := Compile(context.Background(), cfg, Options{CacheDir: t.TempDir(),
			Secrets: mapSecrets{"ai/key": embedKey, "rr/key": rerankKey}})
		if err != nil {
			t.Fatal(err)
		}
		if e := s.Embedding(); e == nil || e.Error != "" {
			t.Fatalf("Embedding() = %+v", e)
		}
		return s.Hash()
	}
	base := hash("embed-1", "rerank-1")
	tests := []struct {
		name                string
		embedKey, rerankKey string
		same                bool
	}{
		{"the same keys give the same hash", "embed-1", "rerank-1", true},
		{"a rotated embedding key", "embed-2", "rerank-1", false},
		{"a rotated rerank key", "embed-1", "rerank-2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hash(tt.embedKey, tt.rerankKey)
			if (got == base) != tt.same {
				t.Errorf("hash %s, first %s: same = %v, want %v", got, base, got == base, tt.same)
			}
		})
	}
}

// The endpoint's error body (its own words, maybe the key it was sent) goes
// to the log only: status, warnings and responses carry the status code.
func TestEndpointErrorBodyStaysInLog(t *testing.T) {
	tests := []struct {
		name        string
		compileFail bool
		rerank      bool
	}{
		{"chunk embeddings at compile", true, false},
		{"the question's embedding", false, false},
		{"the rerank request", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := denseServer(t)
			srv.EchoAuth, srv.FailAlways = true, tt.compileFail
			dir := t.TempDir()
			writeDocs(t, dir, carDocs)
			cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) {
				r.Strategy = v1alpha1.RankingHybrid
				if tt.rerank {
					r.Rerank = &v1alpha1.RerankSpec{Endpoint: srv.URL + "/rerank", Format: v1alpha1.RerankTEI, TopN: 5,
						APIKeySecretRef: &v1alpha1.SecretKeySelector{Name: "ai", Key: "key"}}
				}
			})
			var log strings.Builder
			s, err := Compile(context.Background(), cfg, Options{CacheDir: t.TempDir(), Secrets: mapSecrets{"ai/key": denseKey},
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			srv.FailAlways = true
			resp := query(t, s, Request{Text: "car"})
			shown := append([]string{s.Embedding().Error}, resp.Warnings...)
			for _, w := range s.Warnings() {
				shown = append(shown, w.Message)
			}
			all := strings.Join(shown, "\n")
			if !strings.Contains(all, "HTTP 503") {
				t.Errorf("callers are not told the status: %q", all)
			}
			if strings.Contains(all, "overloaded") || strings.Contains(all, "Bearer") {
				t.Errorf("the endpoint's error body reaches callers: %q", all)
			}
			if !strings.Contains(log.String(), "overloaded") {
				t.Errorf("the log lacks the endpoint's error body: %s", log.String())
			}
			if strings.Contains(log.String(), denseKey) {
				t.Errorf("the key leaks into the log: %s", log.String())
			}
		})
	}
}

// The nearest chunks an agent's path rules hide do not take the dense
// places: 120 hidden files nearer to the question than the one the agent
// may read still leave that one among its candidates, whichever kind of
// path rule hides them.
func TestDenseSkipsPathDeniedRows(t *testing.T) {
	srv := denseServer(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{"open.md": "# Vehicle servicing\n\nVehicle servicing happens in spring, booked by the fleet office.\n"}
	for i := range 120 {
		docs[fmt.Sprintf("secret/s%03d.md", i)] = "# Vehicle servicing\n\nVehicle servicing.\n"
	}
	writeDocs(t, dir, docs)
	for _, tt := range []struct {
		name string
		spec v1alpha1.AgentPermissionSpec
	}{
		{"denyPaths", v1alpha1.AgentPermissionSpec{DenyPaths: []string{"secret/**"}}},
		{"denyPaths, case-insensitive", v1alpha1.AgentPermissionSpec{DenyPaths: []string{"SECRET/**"}, PathMatching: v1alpha1.PathMatchingCaseInsensitive}},
		{"sourceDenyPaths", v1alpha1.AgentPermissionSpec{SourceDenyPaths: []v1alpha1.SourceDenyPaths{{Source: "docs", Paths: []string{"secret/**"}}}}},
		// Only a case-insensitive list: the dense search once took it for no path rule at all.
		{"sourceDenyPaths, case-insensitive", v1alpha1.AgentPermissionSpec{SourceDenyPaths: []v1alpha1.SourceDenyPaths{{Source: "docs", Paths: []string{"Secret/**"}}},
			PathMatching: v1alpha1.PathMatchingCaseInsensitive}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingEmbedding })
			tt.spec.Agents, tt.spec.Default = []string{"a"}, v1alpha1.AccessAllow
			cfg.Permissions = []v1alpha1.AgentPermission{perm("p", tt.spec)}
			s := compileDenseCfg(t, cfg, t.TempDir())
			resp := query(t, s, Request{Text: "car maintenance", Agent: "a"})
			if got := paths(resp); !slices.Equal(got, []string{"open.md"}) {
				t.Errorf("agent a gets %v, want [open.md]", got)
			}
			// Another agent, without the rule, gets the nearest 100.
			if got := paths(query(t, s, Request{Text: "car maintenance", Agent: "b"})); len(got) != 100 || slices.Contains(got, "open.md") {
				t.Errorf("agent b gets %d chunks (open.md among them: %t), want the 100 nearest", len(got), slices.Contains(got, "open.md"))
			}
		})
	}
}

// Stale chunks a source drops (freshness Drop) do not take dense places
// either: 120 old files nearer to the question than the one fresh file.
func TestDenseSkipsStaleDroppedRows(t *testing.T) {
	srv := denseServer(t)
	dir := t.TempDir()
	docs := map[string]string{"fresh.md": "# Vehicle servicing\n\nVehicle servicing happens in spring, booked by the fleet office.\n"}
	for i := range 120 {
		docs[fmt.Sprintf("old%03d.md", i)] = "# Vehicle servicing\n\nVehicle servicing.\n"
	}
	writeDocs(t, dir, docs)
	old := time.Now().Add(-48 * time.Hour)
	for name := range docs {
		if name != "fresh.md" {
			if err := os.Chtimes(filepath.Join(dir, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := denseConfig(t, srv, dir, func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingEmbedding })
	cfg.Sources[0].Spec.Freshness = &v1alpha1.FreshnessSpec{MaxAge: metav1.Duration{Duration: time.Hour}, StaleAction: v1alpha1.StaleDrop}
	s := compileDenseCfg(t, cfg, t.TempDir())
	resp := query(t, s, Request{Text: "car maintenance"})
	if got := paths(resp); !slices.Equal(got, []string{"fresh.md"}) {
		t.Errorf("got %v, want [fresh.md]", got)
	}
}
