package tools

import "math"

// confidenceDepth is how many of the best candidates share the confidence:
// a fixed number, so that a confidence means the same in a catalog of 50
// tools and one of 10,000, and whether or not tools have examples (which
// make many more tools candidates).
const confidenceDepth = 10

// setConfidence sets the confidence of the hits, sorted best first: a
// softmax over score/top score of the first confidenceDepth candidates at
// temperature t, and for those past them the share their score would have.
func setConfidence(sorted []Hit, t float64) {
	if len(sorted) == 0 || sorted[0].Score <= 0 {
		return
	}
	top := sorted[0].Score
	exp := func(s float64) float64 { return math.Exp((s/top - 1) / t) }
	var sum float64
	for _, h := range sorted[:min(len(sorted), confidenceDepth)] {
		sum += exp(h.Score)
	}
	for i := range sorted {
		sorted[i].Confidence = exp(sorted[i].Score) / sum
	}
}
