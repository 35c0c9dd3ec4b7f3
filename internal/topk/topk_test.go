package topk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// item has a score and an id that breaks ties, as the rankers' items do.
type item struct {
	score float32
	id    int
}

func better(a, b item) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

func byRank(a, b item) int {
	if better(a, b) {
		return -1
	}
	if better(b, a) {
		return 1
	}
	return 0
}

// randomItems draws n items with few distinct scores, so ties are common.
func randomItems(r *rand.Rand, n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{score: float32(r.IntN(8)), id: i}
	}
	r.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestHeapPopsInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 257} {
		items := randomItems(r, n)
		want := slices.SortedFunc(slices.Values(items), byRank)
		h := NewHeap(slices.Clone(items[:n/2]), better)
		for _, it := range items[n/2:] {
			h.Push(it)
		}
		if h.Len() != n {
			t.Fatalf("n=%d: Len %d", n, h.Len())
		}
		var got []item
		for h.Len() > 0 {
			if top := h.Top(); top != h.items[0] {
				t.Fatal("Top is not the root")
			}
			got = append(got, h.Pop())
		}
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: popped %v, want %v", n, got, want)
		}
	}
}

func TestHeapReplaceTop(t *testing.T) {
	h := NewHeap([]item{{5, 0}, {3, 1}, {4, 2}}, better)
	h.ReplaceTop(item{1, 3}) // the best (5) goes, 1 comes in
	var got []float32
	for h.Len() > 0 {
		got = append(got, h.Pop().score)
	}
	if !slices.Equal(got, []float32{4, 3, 1}) {
		t.Errorf("after ReplaceTop popped %v, want [4 3 1]", got)
	}
}

// TestBest: the k best of a stream, best first, are the first k of a full
// sort, for k below, at and past the stream's length.
func TestBest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ n, k int }{{0, 3}, {5, 0}, {5, -1}, {1, 1}, {10, 3}, {10, 10}, {10, 20}, {1000, 7}, {1000, 100}} {
		items := randomItems(r, tc.n)
		want := slices.SortedFunc(slices.Values(items), byRank)[:max(0, min(tc.k, tc.n))]
		var b Best[item]
		b.Reset(tc.k, better, nil)
		for _, it := range items {
			b.Push(it)
		}
		if b.Len() != len(want) {
			t.Errorf("n=%d k=%d: Len %d, want %d", tc.n, tc.k, b.Len(), len(want))
		}
		kept := slices.SortedFunc(slices.Values(b.Items()), byRank)
		if !slices.Equal(kept, want) {
			t.Errorf("n=%d k=%d: Items %v, want %v", tc.n, tc.k, kept, want)
		}
		if got := b.Sorted(); !slices.Equal(got, want) {
			t.Errorf("n=%d k=%d: Sorted %v, want %v", tc.n, tc.k, got, want)
		}
		if b.Len() != 0 {
			t.Errorf("n=%d k=%d: Sorted left %d items", tc.n, tc.k, b.Len())
		}
	}
}

// TestBestReusesBuffer: Reset keeps the caller's array, so a pooled
// buffer makes a search allocate nothing for its candidates.
func TestBestReusesBuffer(t *testing.T) {
	buf := make([]item, 0, 4)
	var b Best[item]
	items := randomItems(rand.New(rand.NewPCG(5, 6)), 100)
	allocs := testing.AllocsPerRun(20, func() {
		b.Reset(4, better, buf)
		for _, it := range items {
			b.Push(it)
		}
		_ = b.Sorted()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per search with a buffer of capacity k", allocs)
	}
	b.Reset(4, better, buf)
	for _, it := range items {
		b.Push(it)
	}
	if s := b.Sorted(); &s[0] != &buf[:1][0] {
		t.Error("Sorted did not use the buffer's array")
	}
}
