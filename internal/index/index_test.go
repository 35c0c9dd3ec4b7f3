package index

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

func build(t *testing.T, p Params, keywords bool, docs ...[2]string) *Index {
	t.Helper()
	b := NewBuilder(p, keywords)
	for i, d := range docs {
		if got := b.Add(uint16(i%2), d[0], d[1]); got != uint32(i) {
			t.Fatalf("Add returned id %d, want %d", got, i)
		}
	}
	return b.Build()
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-5 }

// TestBM25HandComputed checks the score against the formula worked by hand.
func TestBM25HandComputed(t *testing.T) {
	p := Params{K1: 1.2, B: 0.75, TitleWeight: 2}
	ix := build(t, p, false,
		[2]string{"", "deploy deploy rollback"}, // dl 3, tf(deploy)=2
		[2]string{"Deploy", "canary"},           // dl 2+1=3, tf(deploy)=2 (title weight)
		[2]string{"", "vacation policy"},        // dl 2
	)
	q := ix.NewQuery("How do I deploy?", false)
	hits := ix.BM25(nil, q, []bool{true, true})
	if len(hits) != 2 || hits[0].Doc != 0 || hits[1].Doc != 1 {
		t.Fatalf("hits = %+v, want docs 0 and 1", hits)
	}
	avgdl := (3.0 + 3.0 + 2.0) / 3
	idf := math.Log(1 + (3-2+0.5)/(2+0.5))
	norm := p.K1 * (1 - p.B + p.B*3/avgdl)
	want := idf * 2 * (p.K1 + 1) / (2 + norm)
	for _, h := range hits {
		if !near(h.Score, want) {
			t.Errorf("doc %d score = %v, want %v", h.Doc, h.Score, want)
		}
	}
	// The same statistics score a text that is not in the index.
	if got := ix.BM25Text(q, "", "deploy deploy rollback"); !near(got, want) {
		t.Errorf("BM25Text = %v, want %v", got, want)
	}
}

func TestBM25GroupsAndMisses(t *testing.T) {
	ix := build(t, DefaultParams, false,
		[2]string{"", "alpha beta"},
		[2]string{"", "alpha gamma"},
		[2]string{"", "delta"},
	)
	tests := []struct {
		name    string
		query   string
		allowed []bool
		want    []uint32
	}{
		{"both groups", "alpha", []bool{true, true}, []uint32{0, 1}},
		{"group 0 only", "alpha", []bool{true, false}, []uint32{0}},
		{"group 1 only", "alpha gamma", []bool{false, true}, []uint32{1}},
		{"no group", "alpha", nil, nil},
		{"unknown term", "omega", []bool{true, true}, nil},
		{"only stopwords", "the of and", []bool{true, true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.BM25(nil, ix.NewQuery(tt.query, false), tt.allowed)
			var got []uint32
			for _, h := range hits {
				if h.Score <= 0 {
					t.Errorf("doc %d has score %v", h.Doc, h.Score)
				}
				got = append(got, h.Doc)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("docs = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("docs = %v, want %v", got, tt.want)
				}
			}
		})
	}
	// The pooled accumulator must be clean for the next query.
	a := ix.BM25(nil, ix.NewQuery("alpha", false), []bool{true, true})
	b := ix.BM25(nil, ix.NewQuery("alpha", false), []bool{true, true})
	if a[0].Score != b[0].Score {
		t.Errorf("repeated query changed score: %v then %v", a[0].Score, b[0].Score)
	}
}

func TestRarerTermScoresHigher(t *testing.T) {
	ix := build(t, DefaultParams, false,
		[2]string{"", "common rare"},
		[2]string{"", "common"},
		[2]string{"", "common"},
		[2]string{"", "common filler"},
	)
	hits := ix.BM25(nil, ix.NewQuery("common rare", false), []bool{true, true})
	best := hits[0]
	for _, h := range hits {
		if h.Score > best.Score {
			best = h
		}
	}
	if best.Doc != 0 {
		t.Errorf("best = %+v, want doc 0 (has the rare term)", best)
	}
}

// TestKeywordHandComputed follows the reference formula:
// |query keywords in title ∪ content keywords| / |query keywords|, capped at 1.
func TestKeywordHandComputed(t *testing.T) {
	ix := build(t, DefaultParams, true,
		[2]string{"Remote Work", "Employees may work remotely three days a week."},
		[2]string{"Vacation", "Twenty-five days of paid vacation per year."},
		[2]string{"", "policy"},
		[2]string{"Empty Title", "The a of, it is."},
	)
	tests := []struct {
		query string
		want  map[uint32]float64
	}{
		// keywords: remote, work, policy -> doc0 has remote+work (title) = 2/3; doc2 policy = 1/3
		{"What is the remote work policy?", map[uint32]float64{0: 2.0 / 3, 2: 1.0 / 3}},
		// keywords: days, vacation -> doc0 "days" 1/2; doc1 both = 1
		{"vacation days", map[uint32]float64{0: 0.5, 1: 1}},
		// "remotely" is a different keyword from "remote": no stemming in the reference formula
		{"remotely", map[uint32]float64{0: 1}},
		{"the a of", map[uint32]float64{}},
		// As in the reference, a content without keywords scores 0 even when its title matches.
		{"empty title", map[uint32]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q := ix.NewQuery(tt.query, true)
			hits := ix.Keyword(nil, q, []bool{true, true})
			if tt.query == "empty title" {
				if got := KeywordText(q, "Empty Title", "The a of, it is."); got != 0 {
					t.Errorf("KeywordText = %v, want 0", got)
				}
			}
			if len(hits) != len(tt.want) {
				t.Fatalf("hits = %+v, want %v", hits, tt.want)
			}
			for _, h := range hits {
				if w, ok := tt.want[h.Doc]; !ok || !near(h.Score, w) {
					t.Errorf("doc %d score %v, want %v", h.Doc, h.Score, tt.want[h.Doc])
				}
			}
			if tt.query == "vacation days" {
				if got := KeywordText(q, "Vacation", "Twenty-five days of paid vacation per year."); !near(got, 1) {
					t.Errorf("KeywordText = %v, want 1", got)
				}
			}
		})
	}
}

func TestJaccardAndTermIDs(t *testing.T) {
	ix := build(t, DefaultParams, false, [2]string{"", "alpha beta gamma"})
	extra := map[string]uint32{}
	a := ix.TermIDs("alpha beta gamma delta", extra)
	b := ix.TermIDs("delta gamma beta alpha alpha", extra)
	c := ix.TermIDs("alpha epsilon", extra)
	if got := Jaccard(a, b); got != 1 {
		t.Errorf("Jaccard(a,b) = %v, want 1", got)
	}
	if got := Jaccard(a, c); !near(got, 1.0/5) {
		t.Errorf("Jaccard(a,c) = %v, want 0.2", got)
	}
	if got := Jaccard(nil, a); got != 0 {
		t.Errorf("Jaccard(nil,a) = %v, want 0", got)
	}
	if got := Jaccard(ix.DocTerms(0), ix.TermIDs("alpha beta gamma", extra)); got != 1 {
		t.Errorf("DocTerms vs TermIDs = %v, want 1", got)
	}
}

func TestJaccardAtLeastAgreesWithJaccard(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	set := func() []uint32 {
		m := map[uint32]bool{}
		for i := 0; i < rng.Intn(40); i++ {
			m[uint32(rng.Intn(60))] = true
		}
		var out []uint32
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	for i := 0; i < 20000; i++ {
		a, b := set(), set()
		if rng.Intn(3) == 0 {
			b = append([]uint32(nil), a...)
			if len(b) > 0 && rng.Intn(2) == 0 {
				b = b[:len(b)-1]
			}
		}
		th := []float64{0.1, 0.5, 0.85, 0.9, 1}[rng.Intn(5)]
		want := Jaccard(a, b) >= th
		if got := JaccardAtLeast(a, b, th); got != want {
			t.Fatalf("JaccardAtLeast(%v, %v, %v) = %v, Jaccard = %v", a, b, th, got, Jaccard(a, b))
		}
		// Prefix filter: a pair at or above the threshold shares a prefix element.
		if want {
			pa, pb := a[:PrefixLen(len(a), th)], b[:PrefixLen(len(b), th)]
			shared := false
			for _, x := range pa {
				if slices.Contains(pb, x) {
					shared = true
				}
			}
			if !shared {
				t.Fatalf("prefix filter misses %v / %v at %v", a, b, th)
			}
		}
	}
}
