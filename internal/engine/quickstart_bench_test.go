package engine_test

import (
	"context"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// BenchmarkQueryQuickstart is one full query on examples/quickstart (about
// 150 chunks): routes, permissions, BM25, ranking, dedup, budget, assembly.
func BenchmarkQueryQuickstart(b *testing.B) {
	set, err := manifest.Load("../../examples/quickstart")
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := set.Config("")
	if err != nil {
		b.Fatal(err)
	}
	s, err := engine.Compile(context.Background(), cfg, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range s.Sources() {
		if st.Error != "" {
			b.Fatalf("source %s: %s", st.Name, st.Error)
		}
	}
	req := engine.Request{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.Query(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Chunks) == 0 {
			b.Fatal("no chunks")
		}
	}
	b.ReportMetric(float64(s.Chunks()), "chunks")
}
