// Package tools shortlists the tools of a snapshot for a question: a flat
// index over every tool (name, namespace, description, tags, examples) that
// a query searches among the tools the agent may use, and the choice graph
// for browsing a catalog. Pure Go, no Kubernetes client.
package tools

import (
	"slices"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/topk"
)

// MaxTools bounds the tools of one index; callers enforce it (memory and
// the cost of a query grow with the catalog).
const MaxTools = 1 << 16

// Entry is one tool of a source, as a snapshot holds it.
type Entry struct {
	// Source is the ContextSource's name.
	Source string
	// Tool is defaulted and valid.
	Tool v1alpha1.Tool
}

// Options tune the ranking; the zero value is the tuned default.
type Options struct {
	// Params overrides DefaultParams (for tuning on dev data).
	Params *Params
	// NoExpansion counts the question's own words only: no related words
	// (spec.tools.expansion None).
	NoExpansion bool
}

// Index ranks tools. It is immutable and safe for concurrent use.
type Index struct {
	entries []Entry
	ix      *termIndex
	tie     []uint32 // entry -> rank in (source, id) order
	// rank is better as a value, made once, so a search hands it to
	// topk.Best without allocating a closure.
	rank func(a, b Hit) bool
}

// NewIndex indexes entries (at most MaxTools). Hits refer to entries by
// their position in this slice.
func NewIndex(entries []Entry, opts Options) *Index {
	p := DefaultParams
	if opts.Params != nil {
		p = *opts.Params
	}
	if opts.NoExpansion {
		p.Synonym, p.Related, p.Broader = 0, 0, 0
	}
	ix := &Index{entries: entries, ix: newIndex(entries, p), tie: tieOrder(entries)}
	ix.rank = ix.better
	return ix
}

// Len is the number of tools.
func (ix *Index) Len() int { return len(ix.entries) }

// Entry returns tool i.
func (ix *Index) Entry(i int) *Entry { return &ix.entries[i] }

// Hit is a ranked tool.
type Hit struct {
	// Entry is the tool's position in the entries given to NewIndex.
	Entry int
	// Score is the ranking score (higher is better).
	Score float64
	// Confidence in [0, 1] says how sure the ranking is that this tool fits.
	Confidence float64
}

// Search returns at most k tools for the question, best first, among those
// allowed (allowed[i] for entry i; nil allows every tool). Ties are broken
// by source, then id. Tools with no evidence for the question are left out.
func (ix *Index) Search(query string, k int, allowed []bool) []Hit {
	if k <= 0 || len(ix.entries) == 0 {
		return nil
	}
	if allowed != nil && len(allowed) < len(ix.entries) {
		// A short mask allows nothing past its end.
		allowed = append(slices.Clip(allowed), make([]bool, len(ix.entries)-len(allowed))...)
	}
	x := ix.ix
	sc := x.pool.Get().(*scratch)
	defer x.pool.Put(sc)
	if x.expansion {
		sc.terms = x.queryTermsOther(sc.terms[:0], query, sc.seen, &sc.other)
		x.expandTerms(sc)
	} else {
		sc.terms = x.queryTerms(sc.terms[:0], query, sc.seen)
	}
	for _, t := range sc.terms {
		sc.seen[t] = false
	}
	// Related terms at their weight (idf included in expW), then the
	// question's own.
	for _, t := range sc.expand {
		x.addPostings(sc, t, sc.expW[t], allowed)
		sc.expW[t] = 0
	}
	sc.expand = sc.expand[:0]
	for _, t := range sc.terms {
		x.addPostings(sc, t, x.toolIDF[t], allowed)
	}
	x.examples.match(sc, sc.terms, sc.best, allowed, &sc.touched, sc.tool)
	x.anti.match(sc, sc.terms, sc.antiSim, allowed, &sc.antiHit, nil)
	var top float32
	for _, d := range sc.touched {
		top = max(top, sc.tool[d])
	}
	exWeight := float32(x.p.ExampleMatch) * top
	hits := sc.hits[:0]
	for _, d := range sc.touched {
		s := sc.tool[d] + exWeight*sc.best[d]
		// An anti-pattern closer to the question than the tool's own words
		// and examples costs the square of the difference: a question like
		// the anti-pattern loses almost everything, one that shares a word
		// or two with it little.
		if sc.antiSim[d] > sc.best[d] {
			pos := max(sc.best[d], x.selfCosine(d, sc.terms))
			if pen := min(sc.antiSim[d]-pos, 1); pen > 0 {
				s *= 1 - pen*pen
			}
		}
		if s > 0 {
			hits = append(hits, Hit{Entry: int(d), Score: float64(s)})
		}
		sc.tool[d], sc.best[d] = 0, 0
	}
	sc.touched = sc.touched[:0]
	for _, d := range sc.antiHit {
		sc.antiSim[d] = 0
	}
	sc.antiHit = sc.antiHit[:0]
	out := ix.top(hits, k)
	if len(hits) <= max(k, confidenceDepth) {
		out = slices.Clone(out) // top sorted the pooled slice in place
	}
	sc.hits = hits[:0]
	return out
}

// better ranks hits: by score, then (source, id).
func (ix *Index) better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return ix.tie[a.Entry] < ix.tie[b.Entry]
}

// top returns the k best hits in rank order, with their confidence. It
// keeps the best max(k, confidenceDepth) (topk.Best), so a query costs
// O(n log k) in its candidates, not a full sort.
func (ix *Index) top(hits []Hit, k int) []Hit {
	m := max(k, confidenceDepth)
	var best []Hit
	if len(hits) > m {
		var b topk.Best[Hit]
		b.Reset(m, ix.rank, make([]Hit, 0, m))
		for _, h := range hits {
			// Most hits are worse than the m kept: turned away here at the
			// cost of an inlined comparison, not a call.
			if worst, full := b.Worst(); full && !ix.better(h, worst) {
				continue
			}
			b.Push(h)
		}
		best = b.Sorted()
	} else {
		best = hits
		slices.SortFunc(best, func(a, b Hit) int {
			if ix.better(a, b) {
				return -1
			}
			if ix.better(b, a) {
				return 1
			}
			return 0
		})
	}
	if len(best) > 0 {
		t := ix.ix.p.Temperature
		if len(ix.entries[best[0].Entry].Tool.Examples) == 0 {
			t = ix.ix.p.PlainTemperature
		}
		setConfidence(best, t)
	}
	return best[:min(k, len(best)):min(k, len(best))]
}
