package embed

import (
	"runtime"
	"sync"

	"github.com/contextrouter/contextrouter/internal/topk"
)

// Store holds unit vectors of equal length in one slice, row by row, so an
// exact cosine search is a run of dot products over contiguous memory.
type Store struct {
	dims int
	data []float32
}

// NewStore copies vecs (all of length dims, already normalised) into a Store.
func NewStore(dims int, vecs [][]float32) *Store {
	s := &Store{dims: dims, data: make([]float32, 0, dims*len(vecs))}
	for _, v := range vecs {
		s.data = append(s.data, v...)
	}
	return s
}

// Dims is the length of every vector.
func (s *Store) Dims() int { return s.dims }

// Len is the number of vectors.
func (s *Store) Len() int {
	if s.dims == 0 {
		return 0
	}
	return len(s.data) / s.dims
}

// Dot is the cosine similarity of unit vector q and row i.
func (s *Store) Dot(q []float32, i int) float32 {
	return dot(q, s.data[i*s.dims:(i+1)*s.dims])
}

// dot is unrolled by eight with four accumulators: the compiler does not
// vectorise, and independent sums let the CPU overlap the multiplies.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		aa, bb := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += aa[0]*bb[0] + aa[4]*bb[4]
		s1 += aa[1]*bb[1] + aa[5]*bb[5]
		s2 += aa[2]*bb[2] + aa[6]*bb[6]
		s3 += aa[3]*bb[3] + aa[7]*bb[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Hit is a row and its cosine similarity to the query.
type Hit struct {
	Row   uint32
	Score float32
}

// Range is the rows [Lo, Hi).
type Range struct{ Lo, Hi uint32 }

// parallelRows is the least work worth a second goroutine.
const parallelRows = 4096

// Search returns the k rows of ranges most similar to q, best first (ties
// by row). It compares q with every row: exact, and split across the CPUs.
func (s *Store) Search(q []float32, ranges []Range, k int) []Hit {
	if k <= 0 || s.dims == 0 || len(q) != s.dims {
		return nil
	}
	total := 0
	for _, r := range ranges {
		total += int(r.Hi - r.Lo)
	}
	workers := min(runtime.GOMAXPROCS(0), max(1, total/parallelRows))
	// Each worker takes an equal share of the rows of all ranges.
	share := (total + workers - 1) / workers
	tops := make([]topk.Best[Hit], workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		from, to := w*share, min((w+1)*share, total)
		tops[w].Reset(k, better, nil)
		run := func() { s.scan(q, ranges, from, to, &tops[w]) }
		if w == workers-1 {
			run()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	all := &tops[0]
	for i := range tops[1:] {
		for _, h := range tops[1+i].Items() {
			all.Push(h)
		}
	}
	return all.Sorted()
}

// scan scores the rows at positions [from, to) of the concatenated ranges.
func (s *Store) scan(q []float32, ranges []Range, from, to int, t *topk.Best[Hit]) {
	pos := 0
	for _, r := range ranges {
		n := int(r.Hi - r.Lo)
		lo, hi := max(from-pos, 0), min(to-pos, n)
		for i := lo; i < hi; i++ {
			row := int(r.Lo) + i
			t.Push(Hit{Row: uint32(row), Score: dot(q, s.data[row*s.dims:(row+1)*s.dims])})
		}
		pos += n
	}
}

// better ranks hits: higher score, then lower row.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Row < b.Row
}
