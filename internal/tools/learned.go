package tools

import (
	"cmp"
	"maps"
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
	idf2     []float32 // per term (catalog's, then the overlay's)
	pos, neg sentences
	count    []uint16 // per tool: its learned examples
	// prof are the BM25 postings of each tool's learned profile, its
	// learned examples as one text: per term, the tools and their
	// saturated weights.
	profOff []uint32
	profDoc []uint32
	profSat []float32
}

// LearnedExample is one outcome for the overlay: the tool's entry, the
// question and whether the tool served it.
type LearnedExample struct {
	Entry   int
	Text    string
	Success bool
}

// Learn builds the overlay of examples (entries out of range are skipped).
// Cost: linear in the examples' words.
func (ix *Index) Learn(examples []LearnedExample) *Learned {
	x := ix.ix
	base := len(x.idf2)
	l := &Learned{ix: ix, dict: map[string]uint32{}, count: make([]uint16, len(ix.entries))}
	var ps, ns sentenceSets
	var newDF []uint32 // per overlay term: tools whose learned examples hold it
	lastTool := []int{}
	var terms []uint32
	for _, e := range examples {
		if e.Entry < 0 || e.Entry >= len(ix.entries) {
			continue
		}
		terms = terms[:0]
		tokenize.EachWord(e.Text, func(w []byte) {
			if id, ok := x.words[string(w)]; ok {
				if id >= 0 {
					terms = append(terms, uint32(id))
				}
				return
			}
			t, ok := tokenize.Term(string(w))
			if !ok {
				return
			}
			if id, ok := x.dict[t]; ok {
				terms = append(terms, id)
				return
			}
			id, ok := l.dict[t]
			if !ok {
				id = uint32(base + len(newDF))
				l.dict[t] = id
				newDF = append(newDF, 0)
				lastTool = append(lastTool, -1)
			}
			terms = append(terms, id)
		})
		slices.Sort(terms)
		terms = slices.Compact(terms)
		for _, t := range terms {
			if int(t) >= base && lastTool[int(t)-base] != e.Entry {
				lastTool[int(t)-base] = e.Entry
				newDF[int(t)-base]++
			}
		}
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
	// A word only learned examples hold weighs as a catalog word held by as
	// many tools (the BM25 idf of §5.2 over the catalog's tools).
	n := float64(len(ix.entries))
	l.idf2 = append(slices.Clip(x.idf2), make([]float32, len(newDF))...)
	for i, df := range newDF {
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		l.idf2[base+i] = float32(idf * idf)
	}
	l.discount(&ps)
	l.profile(&ps, len(l.idf2))
	l.pos = newSentences(&ps, l.idf2)
	l.neg = newSentences(&ns, l.idf2)
	return l
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
}

// profile indexes each tool's learned examples as one document, scored as
// BM25 (k1 1.2, b 0.75) with the overlay's idf.
func (l *Learned) profile(ps *sentenceSets, nTerms int) {
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
		return
	}
	avg := total / float32(docs)
	l.profOff = make([]uint32, nTerms+1)
	for k := range tf {
		l.profOff[k[0]+1]++
	}
	for t := range nTerms {
		l.profOff[t+1] += l.profOff[t]
	}
	l.profDoc = make([]uint32, len(tf))
	l.profSat = make([]float32, len(tf))
	next := slices.Clone(l.profOff[:nTerms])
	keys := slices.Collect(maps.Keys(tf))
	slices.SortFunc(keys, func(a, b [2]uint32) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	for _, k := range keys {
		f := tf[k]
		norm := f / (1 - b + b*length[k[1]]/avg)
		i := next[k[0]]
		l.profDoc[i], l.profSat[i] = k[1], norm/(k1+norm)
		next[k[0]]++
	}
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
