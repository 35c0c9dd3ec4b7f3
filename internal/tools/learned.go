package tools

import (
	"cmp"
	"math"
	"slices"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Learned is an overlay of an Index: questions learned from outcomes
// (docs/api.md §10.10). A success is an example of its tool and a failure an
// anti-pattern of it, scored exactly as the catalog's (§10.3 points 2 and
// 3), so a learned example helps its tool as a written one does and a
// failure costs it as an anti-pattern does. The overlay only re-ranks: it
// never makes a tool a candidate that the allowed mask leaves out. It is
// immutable and belongs to the Index that made it.
type Learned struct {
	ix *Index
	// dict gives words the catalog lacks ids past the catalog's terms, so
	// that a learned question can teach a word no tool has.
	dict     map[string]uint32
	idf2     []float32 // per term (catalog's, then the overlay's): weigh
	pos, neg sentences
	count    []uint16 // per tool: its learned examples
	// prof are the BM25 postings of each tool's learned profile, its
	// learned examples as one text: per term, the tools and their
	// saturated weights.
	profOff []uint32
	profDoc []uint32
	profSat []float32
	// gap is per tool the factor of its score for how far its learned
	// examples lie from its own words (Params.LearnedGap); nil: 1 for all.
	gap []float32
}

// LearnedExample is one outcome for the overlay: the tool's entry, the
// question and whether the tool served it.
type LearnedExample struct {
	Entry   int
	Text    string
	Success bool
}

// Learn builds the overlay of examples (entries out of range are skipped).
// Cost: linear in the examples' words, a binary search each.
func (ix *Index) Learn(examples []LearnedExample) *Learned {
	x := ix.ix
	base := len(x.idf2)
	l := &Learned{ix: ix, dict: map[string]uint32{}, count: make([]uint16, len(ix.entries))}
	var ps, ns sentenceSets
	var terms []uint32
	for _, e := range examples {
		if e.Entry < 0 || e.Entry >= len(ix.entries) {
			continue
		}
		terms = l.terms(terms[:0], e.Text, base)
		s := &ns
		if e.Success {
			s = &ps
			if l.count[e.Entry] < math.MaxUint16 {
				l.count[e.Entry]++
			}
		}
		s.off = append(s.off, uint32(len(s.ids)))
		s.ids = append(s.ids, terms...)
		s.owner = append(s.owner, uint32(e.Entry))
	}
	ps.off = append(ps.off, uint32(len(ps.ids)))
	ns.off = append(ns.off, uint32(len(ns.ids)))
	nTerms := base + len(l.dict)
	l.weigh(l.profile(&ps, nTerms), nTerms)
	l.pos = newSentences(&ps, l.idf2)
	l.neg = newSentences(&ns, l.idf2)
	l.gap = l.gaps(&ps)
	return l
}

// terms appends the sorted distinct term ids of a learned text to dst,
// giving a word the catalog lacks an overlay id past base.
func (l *Learned) terms(dst []uint32, text string, base int) []uint32 {
	x := l.ix.ix
	tokenize.EachWord(text, func(w []byte) {
		if id, ok := x.words[string(w)]; ok {
			if id >= 0 {
				dst = append(dst, uint32(id))
			}
			return
		}
		t, ok := tokenize.Term(string(w))
		if !ok {
			return
		}
		if id, ok := x.dict[t]; ok {
			dst = append(dst, id)
			return
		}
		id, ok := l.dict[t]
		if !ok {
			id = uint32(base + len(l.dict))
			l.dict[t] = id
		}
		dst = append(dst, id)
	})
	slices.Sort(dst)
	return slices.Compact(dst)
}

// weigh sets the overlay's idf: the BM25 idf of §5.2 over the catalog's
// tools, each tool's learned profile (the distinct (term, tool) pairs of
// its learned examples, pairs) counting as part of its text. A word the
// questions of many tools hold ("provide", "information") so weighs
// little, as it would had the questions been written into the catalog,
// even when few tools' own words hold it.
func (l *Learned) weigh(pairs [][2]uint32, nTerms int) {
	x := l.ix.ix
	base := uint32(len(x.idf2))
	df := make([]uint32, nTerms)
	for _, k := range pairs {
		t, tool := k[0], k[1]
		if t < base {
			if _, ok := slices.BinarySearch(x.toolDoc[x.toolOff[t]:x.toolOff[t+1]], tool); ok {
				continue // the tool's own text holds it: counted already
			}
		}
		df[t]++
	}
	n := float64(len(l.ix.entries))
	l.idf2 = append(slices.Clip(x.idf2), make([]float32, nTerms-int(base))...)
	for t, d := range df {
		if t < int(base) {
			if d == 0 {
				continue
			}
			d += x.toolOff[t+1] - x.toolOff[t]
		}
		idf := math.Log(1 + (n-float64(d)+0.5)/(float64(d)+0.5))
		l.idf2[t] = float32(idf * idf)
	}
}

// gaps returns per tool 1 + LearnedGap·(1 − the mean cosine of its learned
// examples with its own words) over the mean of that among the tools with
// learned examples, and 1 for the others; nil when LearnedGap is 0.
func (l *Learned) gaps(ps *sentenceSets) []float32 {
	w := float32(l.ix.ix.p.LearnedGap)
	if w == 0 || len(ps.owner) == 0 {
		return nil
	}
	x := l.ix.ix
	sum := make([]float32, len(l.count))
	for i, o := range ps.owner {
		own := x.set(int(o))
		var dot, qn, on float32
		for _, t := range ps.ids[ps.off[i]:ps.off[i+1]] {
			qn += l.idf2[t]
			if _, ok := slices.BinarySearch(own, t); ok {
				dot += l.idf2[t]
			}
		}
		if dot == 0 {
			continue
		}
		for _, t := range own {
			on += l.idf2[t]
		}
		sum[o] += dot / float32(math.Sqrt(float64(qn)*float64(on)))
	}
	out := make([]float32, len(l.count))
	var total float32
	tools := 0
	for i, c := range l.count {
		out[i] = 1
		if c > 0 {
			out[i] = 1 + w*(1-sum[i]/float32(c))
			total += out[i]
			tools++
		}
	}
	// Over the mean: the lift ranks the learned tools among themselves,
	// not above the tools without learned examples.
	mean := total / float32(tools)
	for i, c := range l.count {
		if c > 0 {
			out[i] /= mean
		}
	}
	return out
}

// lift is the factor of tool d's score for its learned examples' gap (1
// without an overlay).
func (l *Learned) lift(d uint32) float32 {
	if l == nil || l.gap == nil {
		return 1
	}
	return l.gap[d]
}

// Len is the number of learned examples and anti-examples.
func (l *Learned) Len() int { return len(l.pos.owner) + len(l.neg.owner) }

// Examples is the number of learned examples of tool entry.
func (l *Learned) Examples(entry int) int {
	if l == nil || entry >= len(l.count) {
		return 0
	}
	return int(l.count[entry])
}

// apply adds the overlay's evidence to the query's (after gather): the
// closest learned example raises sc.best, the closest learned failure
// sc.antiSim, per allowed tool.
func (l *Learned) apply(sc *scratch, allowed []bool) {
	ext := append(sc.ext[:0], sc.terms...)
	for _, t := range sc.learnedWords {
		if id, ok := l.dict[t]; ok && !slices.Contains(ext, id) {
			ext = append(ext, id)
		}
	}
	sc.ext = ext
	most := max(len(l.pos.owner), len(l.neg.owner))
	if len(sc.lsent) < most {
		sc.lsent = make([]float32, most)
	}
	l.addProfile(sc, ext, allowed)
	l.pos.matchInto(sc, sc.lsent, ext, sc.best, allowed, &sc.touched, sc.tool)
	l.neg.matchInto(sc, sc.lsent, ext, sc.antiSim, allowed, &sc.antiHit, nil)
	l.standIn(sc)
}

// standIn lets the BM25F score of the tools without learned examples stand
// in for the learned profile they lack (Params.LearnedStandIn).
func (l *Learned) standIn(sc *scratch) {
	f := 1 + float32(l.ix.ix.p.LearnedStandIn)
	if f == 1 || len(l.pos.owner) == 0 {
		return // nothing to stand in for
	}
	for _, d := range sc.touched {
		if l.count[d] == 0 {
			sc.tool[d] *= f
		}
	}
}

// profile indexes each tool's learned examples as one document, scored as
// BM25 (k1 1.2, b 0.75) with the overlay's idf, and returns its distinct
// (term, tool) pairs in order.
func (l *Learned) profile(ps *sentenceSets, nTerms int) [][2]uint32 {
	const k1, b = 1.2, 0.75
	tf := map[[2]uint32]float32{}
	length := make([]float32, len(l.count))
	var total float32
	for i, o := range ps.owner {
		for _, t := range ps.ids[ps.off[i]:ps.off[i+1]] {
			tf[[2]uint32{t, o}]++
			length[o]++
			total++
		}
	}
	docs := 0
	for _, c := range l.count {
		if c > 0 {
			docs++
		}
	}
	if docs == 0 {
		return nil
	}
	avg := total / float32(docs)
	l.profOff = make([]uint32, nTerms+1)
	keys := make([][2]uint32, 0, len(tf))
	for k := range tf {
		l.profOff[k[0]+1]++
		keys = append(keys, k)
	}
	for t := range nTerms {
		l.profOff[t+1] += l.profOff[t]
	}
	// Sorted by term, then tool: each term's postings in place.
	slices.SortFunc(keys, func(a, b [2]uint32) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	l.profDoc = make([]uint32, len(keys))
	l.profSat = make([]float32, len(keys))
	for i, k := range keys {
		norm := tf[k] / (1 - b + b*length[k[1]]/avg)
		l.profDoc[i], l.profSat[i] = k[1], norm/(k1+norm)
	}
	return keys
}

// addProfile adds the learned profiles' BM25 scores of the question's
// terms (ext, overlay ids) to sc.tool.
func (l *Learned) addProfile(sc *scratch, ext []uint32, allowed []bool) {
	w := float32(l.ix.ix.p.LearnedProfile)
	if l.profOff == nil || w == 0 {
		return
	}
	for _, t := range ext {
		idf := float32(math.Sqrt(float64(l.idf2[t]))) * w
		lo, hi := l.profOff[t], l.profOff[t+1]
		for i, d := range l.profDoc[lo:hi] {
			if allowed != nil && !allowed[d] {
				continue
			}
			if sc.tool[d] == 0 && sc.best[d] == 0 {
				sc.touched = append(sc.touched, d)
			}
			sc.tool[d] += idf * l.profSat[int(lo)+i]
		}
	}
}
