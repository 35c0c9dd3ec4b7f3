package engine

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// benchRoutes are ten realistic route conditions.
var benchRoutes = []string{
	``,
	`containsAnyWord(text, ["pto", "vacation", "leave", "holiday", "sick"]) || "hr" in tags`,
	`containsAnyWord(text, ["deploy", "rollback", "canary", "release"]) || metadata[?"department"].orValue("") == "engineering"`,
	`containsAllWords(text, ["incident", "review"])`,
	`agent == "finance-analyst" && containsAnyWord(text, ["budget", "forecast", "quarter"])`,
	`text.lowerAscii().contains("salary") && vars.region == "eu"`,
	`"onboarding" in tags || containsAnyWord(text, ["laptop", "badge", "first day"])`,
	`tags.exists(t, t.startsWith("eng-")) && vars.tier > 1`,
	`containsAnyWord(text, ["expense", "receipt", "travel", "per diem"])`,
	`size(text) > 200 || metadata[?"priority"].orValue("low") == "high"`,
}

func benchConfig(srcNames []string) *Config {
	cfg := &Config{Router: router(func(s *v1alpha1.ContextRouterSpec) {
		s.Variables = map[string]apiextensionsv1.JSON{"region": {Raw: []byte(`"eu"`)}, "tier": {Raw: []byte(`2`)}}
	})}
	for i, w := range benchRoutes {
		cfg.Routes = append(cfg.Routes, routeTo(fmt.Sprintf("r%d", i), w, srcNames...))
	}
	return cfg
}

// BenchmarkRouteMatch evaluates ten route conditions for one query.
func BenchmarkRouteMatch(b *testing.B) {
	cfg := benchConfig([]string{"prompt"})
	cfg.Sources = []v1alpha1.ContextSource{inlineSource("prompt", "P", "Be brief.")}
	s := compile(b, cfg)
	req := &Request{Text: "How do I roll back a canary deploy after an incident review?", Agent: "eng-assistant",
		Tags: []string{"eng-platform"}, Metadata: map[string]string{"department": "engineering"}}
	resp := &Response{}
	// As the server runs it: under the query timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		resp.MatchedRoutes, resp.RouteMatches, resp.RouteErrors = resp.MatchedRoutes[:0], resp.RouteMatches[:0], resp.RouteErrors[:0]
		if _, err := s.matchRoutes(ctx, req, resp, nil); err != nil {
			b.Fatal(err)
		}
	}
	if len(resp.MatchedRoutes) != 4 || len(resp.RouteErrors) != 0 {
		b.Fatalf("matched %v errors %v", resp.MatchedRoutes, resp.RouteErrors)
	}
}

// corpus is a generated static source: Zipf-distributed pseudo-words, so
// posting lists have realistic skew.
type corpus struct {
	name   string
	chunks []sources.Chunk
}

func (c *corpus) Name() string                                  { return c.name }
func (c *corpus) Load(context.Context) ([]sources.Chunk, error) { return c.chunks, nil }

var syllables = strings.Fields("ka te ri po lu sa me no vi da ren tor mal sik pra dor len fi go hu zan bel cri mon")

func vocabulary(n int, rng *rand.Rand) []string {
	seen := map[string]bool{}
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		for k := 0; k < 2+rng.Intn(3); k++ {
			b.WriteString(syllables[rng.Intn(len(syllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// generate makes n chunks of 80-240 words over a 50k-word vocabulary, spread
// over 20 sources, and returns them with the vocabulary.
func generate(n int) (map[string]*corpus, []string, int) {
	rng := rand.New(rand.NewSource(1))
	vocab := vocabulary(50_000, rng)
	zipf := rand.NewZipf(rng, 1.07, 2, uint64(len(vocab)-1))
	srcs := map[string]*corpus{}
	textBytes := 0
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("src%02d", i%20)
		c := srcs[name]
		if c == nil {
			c = &corpus{name: name}
			srcs[name] = c
		}
		var b strings.Builder
		words := 80 + rng.Intn(160)
		for w := 0; w < words; w++ {
			b.WriteString(vocab[zipf.Uint64()])
			if w%17 == 16 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		if i%(n/50) == 0 {
			b.WriteString(" needleword") // exactly 50 chunks at every corpus size
		}
		title := vocab[zipf.Uint64()] + " " + vocab[zipf.Uint64()]
		text := b.String()
		textBytes += len(text) + len(title)
		c.chunks = append(c.chunks, sources.Chunk{Source: name, Title: title, Path: fmt.Sprintf("docs/%d.md", i), Content: text, Index: 0,
			ModTime: time.Unix(1_700_000_000+int64(i), 0)})
	}
	return srcs, vocab, textBytes
}

// corpusConfig is a router over the generated sources of generate(n).
func corpusConfig(srcs map[string]*corpus) (*Config, Options) {
	var names []string
	var specs []v1alpha1.ContextSource
	for name := range srcs {
		names = append(names, name)
		specs = append(specs, v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: "/generated"}}})
	}
	cfg := benchConfig(names)
	cfg.Sources = specs
	return cfg, Options{Open: func(spec *v1alpha1.ContextSource, _ sources.Env) (sources.Source, error) {
		return srcs[spec.Name], nil
	}}
}

func corpusSnapshot(b *testing.B, n int) (*Snapshot, []string, int) {
	srcs, vocab, textBytes := generate(n)
	cfg, opts := corpusConfig(srcs)
	s, err := Compile(context.Background(), cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	return s, vocab, textBytes
}

// benchQueries are 3-5 words from the middle of the frequency range, the way
// real questions mix common and rare words.
func benchQueries(vocab []string) []string {
	rng := rand.New(rand.NewSource(2))
	qs := make([]string, 64)
	for i := range qs {
		var w []string
		for k := 0; k < 3+rng.Intn(3); k++ {
			w = append(w, vocab[50+rng.Intn(5000)])
		}
		qs[i] = strings.Join(w, " ")
	}
	return qs
}

// BenchmarkQueryCorpus runs full queries (ten routes, permissions, BM25,
// ranking, dedup, budget 8000) over generated corpora.
func BenchmarkQueryCorpus(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			s, vocab, _ := corpusSnapshot(b, n)
			qs := benchQueries(vocab)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			i, cands := 0, 0
			for b.Loop() {
				resp, err := s.Query(ctx, Request{Text: qs[i%len(qs)], Agent: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				cands += resp.Stats.Candidates
				i++
			}
			b.ReportMetric(float64(cands)/float64(i), "candidates/op")
		})
	}
}

// BenchmarkQueryFixedMatches asks for a term that exactly 50 chunks hold, at
// every corpus size: the time should stay flat as the corpus grows.
func BenchmarkQueryFixedMatches(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			s, _, _ := corpusSnapshot(b, n)
			ctx := context.Background()
			req := Request{Text: "where is the needleword", Agent: "bench"}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := s.Query(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.Stats.Candidates != 50 {
					b.Fatalf("candidates = %d, want 50", resp.Stats.Candidates)
				}
			}
		})
	}
}

// BenchmarkCompileCorpus measures snapshot build time and the heap the
// snapshot holds per chunk and relative to the corpus text.
func BenchmarkCompileCorpus(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			srcs, _, textBytes := generate(n)
			cfg, opts := corpusConfig(srcs)
			var heap uint64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := Compile(context.Background(), cfg, opts)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = after.HeapAlloc - before.HeapAlloc
				runtime.KeepAlive(s)
			}
			// The chunk texts are shared with the generator, so the snapshot's
			// own heap is the index plus per-chunk bookkeeping; add the text once.
			b.ReportMetric(float64(heap)/float64(n), "index-B/chunk")
			b.ReportMetric(float64(heap+uint64(textBytes))/float64(textBytes), "heap/text")
		})
	}
}

// BenchmarkCompileScale compiles a router with 1,000 routes (distinct
// conditions), 500 sources and 100 permissions — the operator's scale case —
// with source loading skipped as the operator does. "cold" clears the CEL
// program cache first; "warm" is a reconcile after an unrelated change.
func BenchmarkCompileScale(b *testing.B) {
	cfg := &Config{Router: router(nil)}
	for i := 0; i < 500; i++ {
		cfg.Sources = append(cfg.Sources, inlineSource(fmt.Sprintf("src-%03d", i), "T", "content"))
	}
	for i := 0; i < 1000; i++ {
		when := fmt.Sprintf(`containsAnyWord(text, ["topic%d", "subject%d"]) || "team-%d" in tags || metadata[?"project"].orValue("") == "p%d"`, i, i, i%50, i)
		cfg.Routes = append(cfg.Routes, routeTo(fmt.Sprintf("route-%04d", i), when, fmt.Sprintf("src-%03d", i%500), fmt.Sprintf("src-%03d", (i+1)%500)))
	}
	for i := 0; i < 100; i++ {
		cfg.Permissions = append(cfg.Permissions, perm(fmt.Sprintf("perm-%03d", i), v1alpha1.AgentPermissionSpec{
			Agents: []string{fmt.Sprintf("agent-%d", i)}, AllowSources: []string{fmt.Sprintf("src-%03d", i)}, DenyPaths: []string{"**/secret/**"}}))
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				if mode == "cold" {
					resetCompiledCache()
				}
				if _, err := Compile(context.Background(), cfg, Options{SkipLoad: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
