package engine_test

import (
	"context"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/embed/embedtest"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// BenchmarkQueryQuickstartDense is BenchmarkQueryQuickstart's question under
// the quickstart's router ranked by Relevance, Embedding and Hybrid (384
// dimensions, an in-process endpoint). The question's vector is in the LRU
// after the first query, so the difference to Relevance is what dense
// ranking adds beyond the endpoint's own time (docs/benchmarks.md).
func BenchmarkQueryQuickstartDense(b *testing.B) {
	srv := embedtest.New(b)
	srv.Dims = 384
	for _, strategy := range []v1alpha1.RankingStrategy{v1alpha1.RankingRelevance, v1alpha1.RankingEmbedding, v1alpha1.RankingHybrid} {
		b.Run("strategy="+string(strategy), func(b *testing.B) {
			set, err := manifest.Load("../../examples/quickstart")
			if err != nil {
				b.Fatal(err)
			}
			rk := &set.Routers[0].Spec.Ranking
			rk.Strategy = strategy
			rk.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: srv.EmbeddingsURL(), Model: "bench", BatchSize: 64}
			cfg, err := set.Config("")
			if err != nil {
				b.Fatal(err)
			}
			s, err := engine.Compile(context.Background(), cfg, engine.Options{CacheDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			if e := s.Embedding(); strategy != v1alpha1.RankingRelevance && (e == nil || e.Error != "") {
				b.Fatalf("embedding: %+v", e)
			}
			req := engine.Request{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := s.Query(ctx, req)
				if err != nil || len(resp.Chunks) == 0 || len(resp.Warnings) > 0 {
					b.Fatal(err, resp.Warnings)
				}
			}
			b.ReportMetric(float64(s.Chunks()), "chunks")
		})
	}
}
