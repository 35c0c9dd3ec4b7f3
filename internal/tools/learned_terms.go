package tools

import (
	"cmp"
	"math"
	"slices"
)

// discountPseudoTools are tools without the word added to those with
// learned examples when the discount counts them: with few learned tools,
// a word two of them share says little yet about the word, so it is
// barely discounted.
const discountPseudoTools = 20

// discount lowers, in the overlay's weights (l.idf2, which the learned
// examples, anti-examples and profiles are scored with), the words that
// the learned examples (ps) of many tools hold. The catalog's idf knows
// only what tools say about themselves, and questions are worded
// otherwise: "latest", "recent" or "help" are rare in descriptions, so
// weigh much, yet an agent asks every tool for the latest. Its outcomes
// show it: such a word is held by the learned examples of many tools,
// and tells them apart no better than its idf among them, which is how
// much of its weight it keeps:
//
//	idf ×= (idfL(df) / idfL(1))^LearnedDiscount
//
// idfL the BM25 idf over the tools with learned examples (plus
// discountPseudoTools), df the number of them whose examples hold the
// word. A word of one tool's learned examples, or of none, keeps its
// weight. The catalog's own scores (BM25F, its examples) are left alone:
// discounting them too did not help (docs/benchmarks.md, "Learning from
// outcomes").
func (l *Learned) discount(ps *sentenceSets) {
	alpha := l.ix.ix.p.LearnedDiscount
	if alpha <= 0 || len(ps.owner) == 0 {
		return
	}
	tools := 0
	for _, c := range l.count {
		if c > 0 {
			tools++
		}
	}
	n := float64(tools + discountPseudoTools)
	idf := func(df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }
	one := idf(1)
	df := toolDF(ps, len(l.idf2))
	// l.idf2 may share the catalog's array (no new words): the overlay
	// writes its own.
	l.idf2 = slices.Clone(l.idf2)
	for t, d := range df {
		if d > 1 {
			s := math.Pow(idf(float64(d))/one, alpha)
			l.idf2[t] *= float32(s * s)
		}
	}
}

// toolDF is, per term of nTerms, the number of distinct tools whose
// sentences (ss) hold it. The sentences need not be grouped by tool (a
// store keeps them by id): they are visited tool after tool.
func toolDF(ss *sentenceSets, nTerms int) []uint32 {
	order := make([]int, len(ss.owner))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Or(cmp.Compare(ss.owner[a], ss.owner[b]), cmp.Compare(a, b)) })
	df := make([]uint32, nTerms)
	last := make([]uint32, nTerms) // per term: 1 + the last tool counted
	for _, i := range order {
		o := ss.owner[i] + 1
		for _, t := range ss.ids[ss.off[i]:ss.off[i+1]] {
			if last[t] != o {
				last[t] = o
				df[t]++
			}
		}
	}
	return df
}
