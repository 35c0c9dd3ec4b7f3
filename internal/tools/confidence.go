package tools

import "math"

// confidence turns the scores of one query's candidates into
// probabilities: a softmax over score/top, top the query's best score, at
// temperature confidenceT.
type confidence struct {
	top, sum float64
}

// confidenceT was calibrated on MetaTool dev (docs/benchmarks.md).
const confidenceT = 0.1

func newConfidence(hits []Hit) confidence {
	var c confidence
	for _, h := range hits {
		c.top = max(c.top, h.Score)
	}
	for _, h := range hits {
		c.sum += c.exp(h.Score)
	}
	return c
}

func (c confidence) exp(s float64) float64 { return math.Exp((s/c.top - 1) / confidenceT) }

func (c confidence) of(s float64) float64 {
	if c.sum == 0 {
		return 0
	}
	return c.exp(s) / c.sum
}
