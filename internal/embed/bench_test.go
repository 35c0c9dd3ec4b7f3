package embed_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/contextrouter/contextrouter/internal/embed"
)

// BenchmarkSearch100k is the exact dense search of docs/benchmarks.md: a
// query against 100,000 chunk vectors, top 100, at 384 dimensions (the small
// sentence-embedding models TEI and Ollama serve) and 768 (nomic-embed-text,
// bge-base).
func BenchmarkSearch100k(b *testing.B) {
	for _, dims := range []int{384, 768} {
		b.Run(fmt.Sprintf("dims=%d", dims), func(b *testing.B) { benchSearch(b, dims) })
	}
}

func benchSearch(b *testing.B, dims int) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := make([][]float32, n)
	for i := range vecs {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		embed.Normalize(v)
		vecs[i] = v
	}
	st := embed.NewStore(dims, vecs)
	q := vecs[42]
	ranges := []embed.Range{{Lo: 0, Hi: n}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if hits := st.Search(q, ranges, 100); len(hits) != 100 || hits[0].Row != 42 {
			b.Fatalf("hits %v", hits[:1])
		}
	}
}
