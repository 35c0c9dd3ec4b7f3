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
	// Collapse is the similarity of descriptions and tags from which tools
	// are near-duplicates and share a card (collapse.go); 0 never collapses.
	// The router's default is spec.tools.collapseThreshold's.
	Collapse float64
	// Calibration overrides DefaultCalibration (for fitting it).
	Calibration *Calibration
}

// Index ranks tools. It is immutable and safe for concurrent use.
type Index struct {
	entries []Entry
	ix      *termIndex
	tie     []uint32 // entry -> rank in (source, id) order
	cal     *Calibration
	// rank is better as a value, made once, so a search hands it to
	// topk.Best without allocating a closure.
	rank func(a, b cand) bool
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
	cal := &DefaultCalibration
	if opts.Calibration != nil {
		cal = opts.Calibration
	}
	tie := tieOrder(entries)
	ix := &Index{entries: entries, ix: newIndex(entries, p, opts.Collapse, tie), tie: tie, cal: cal}
	ix.rank = ix.better
	return ix
}

// Len is the number of tools.
func (ix *Index) Len() int { return len(ix.entries) }

// Entry returns tool i.
func (ix *Index) Entry(i int) *Entry { return &ix.entries[i] }

// Hit is a ranked tool: a card.
type Hit struct {
	// Entry is the tool's position in the entries given to NewIndex.
	Entry int
	// Score is the ranking score (higher is better).
	Score float64
	// Confidence in [0, 1] is the calibrated chance that the tool is one
	// the question needs.
	Confidence float64
	// Also are the allowed near-duplicates of the tool (at most MaxAlso,
	// in (source, id) order), which take no card of their own.
	Also []int
	// Evidence is what the confidence was computed from.
	Evidence Evidence
}

// Search returns at most k cards for the question, best first, among the
// tools allowed (allowed[i] for entry i; nil allows every tool). Ties are
// broken by source, then id. Tools with no evidence for the question are
// left out, and a near-duplicate of a better card is listed in its Also.
func (ix *Index) Search(query string, k int, allowed []bool) []Hit {
	return ix.SearchLearned(query, k, allowed, nil)
}

// SearchLearned is Search with the learned examples of l (nil: none, or an
// overlay of another index, which is ignored) counting as the catalog's.
func (ix *Index) SearchLearned(query string, k int, allowed []bool, l *Learned) []Hit {
	if k <= 0 || len(ix.entries) == 0 {
		return nil
	}
	allowed = ix.mask(allowed)
	sc := ix.scratchFor(l)
	defer ix.putScratch(sc)
	ix.ix.score(sc, query, allowed)
	out := ix.cards(sc, k, allowed)
	ix.ix.release(sc)
	return out
}

// scratchFor takes a query's scratch from the pool, with l's learned
// examples when they are of this index (an overlay of another is ignored).
func (ix *Index) scratchFor(l *Learned) *scratch {
	sc := ix.ix.pool.Get().(*scratch)
	if l != nil && l.ix == ix && l.Len() > 0 {
		sc.learned = l
	}
	return sc
}

// putScratch returns sc to the pool without the learned examples it held.
func (ix *Index) putScratch(sc *scratch) {
	sc.learned = nil
	ix.ix.pool.Put(sc)
}

// examples is the number of examples of tool i, learned ones included.
func (ix *Index) examples(sc *scratch, i uint32) int {
	return len(ix.entries[i].Tool.Examples) + sc.learned.Examples(int(i))
}

// mask extends a short allowed mask: it allows nothing past its end.
func (ix *Index) mask(allowed []bool) []bool {
	if allowed != nil && len(allowed) < len(ix.entries) {
		allowed = append(slices.Clip(allowed), make([]bool, len(ix.entries)-len(allowed))...)
	}
	return allowed
}

// cand is a candidate tool of a query: its score and the cosine of its
// closest example.
type cand struct {
	entry   uint32
	score   float32
	example float32
}

// better orders candidates by score, then (source, id).
func (ix *Index) better(a, b cand) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return ix.tie[a.entry] < ix.tie[b.entry]
}

// cards turns the candidates of sc into at most k cards with their
// confidence: the best candidates in rank order, a near-duplicate of a card
// already taken folded into it. Confidence looks at the first
// confidenceDepth cards and at the one after each card, so that many are
// taken; a bounded heap selects them, widened only when near-duplicates
// fold too many.
func (ix *Index) cards(sc *scratch, k int, allowed []bool) []Hit {
	m := max(k, confidenceDepth) + 1
	w := m
	if ix.ix.groups.of != nil {
		w *= 4
	}
	var taken []cand
	for {
		best := ix.top(sc, w)
		taken = sc.taken[:0]
		sc.seenGroup = sc.seenGroup[:0]
		for _, c := range best {
			if g := ix.ix.groups.group(c.entry); g >= 0 {
				if slices.Contains(sc.seenGroup, g) {
					continue
				}
				sc.seenGroup = append(sc.seenGroup, g)
			}
			if taken = append(taken, c); len(taken) == m {
				break
			}
		}
		sc.taken = taken
		if len(taken) == m || len(best) == len(sc.cands) {
			break
		}
		w *= 4
	}
	if len(taken) == 0 {
		return nil
	}
	out := make([]Hit, min(k, len(taken)))
	ix.evidence(sc, taken, out)
	for i := range out {
		if g := ix.ix.groups.group(taken[i].entry); g >= 0 {
			out[i].Also = ix.also(g, taken[i].entry, allowed)
		}
	}
	return out
}

// top returns the w best candidates in rank order: the best w kept by
// topk.Best, so a query costs O(n log w) in its candidates, not a full
// sort. It may reorder sc.cands.
func (ix *Index) top(sc *scratch, w int) []cand {
	cands := sc.cands
	if len(cands) <= w {
		slices.SortFunc(cands, func(a, b cand) int {
			if ix.better(a, b) {
				return -1
			}
			if ix.better(b, a) {
				return 1
			}
			return 0
		})
		return cands
	}
	var b topk.Best[cand]
	b.Reset(w, ix.rank, sc.heap)
	for _, c := range cands {
		// Most candidates are worse than the w kept: turned away here at
		// the cost of an inlined comparison, not a call.
		if worst, full := b.Worst(); full && !ix.better(c, worst) {
			continue
		}
		b.Push(c)
	}
	sc.heap = b.Sorted()
	return sc.heap
}

// also lists the allowed members of group g other than entry.
func (ix *Index) also(g int32, entry uint32, allowed []bool) []int {
	var out []int
	for _, e := range ix.ix.groups.members[g] {
		if e != entry && (allowed == nil || allowed[e]) {
			if out = append(out, int(e)); len(out) == MaxAlso {
				break
			}
		}
	}
	return out
}
