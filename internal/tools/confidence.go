package tools

import (
	"math"
	"slices"
)

// confidenceDepth is how many of the best cards the relative confidence
// (Evidence.Softmax) shares out: a fixed number, so that it means the same
// in a catalog of 50 tools and one of 10,000, and whether or not tools have
// examples (which make many more tools candidates).
const confidenceDepth = 10

// Evidence is what a card's confidence is computed from: how much of the
// question the tool's words hold, and how the card stands against the
// others. Every field is in [0, 1] but Rank and Words.
type Evidence struct {
	// Rank is the card's position, 0 for the first.
	Rank int `json:"rank"`
	// Relative is the card's score over the first card's.
	Relative float64 `json:"relative"`
	// Margin is the card's score minus the next card's (0 when there is
	// none), over the first card's.
	Margin float64 `json:"margin"`
	// Softmax is the confidence the card gets from its rank alone: a
	// softmax of Relative over the first confidenceDepth cards (the
	// confidence before calibration; a lone match has 1).
	Softmax float64 `json:"softmax"`
	// Coverage is the share of the question's words that the tool's own
	// words (name, namespace, description, tags) hold. The question's
	// words are its distinct catalog terms and its other words (stopwords
	// aside): a word no tool has counts against every tool.
	Coverage float64 `json:"coverage"`
	// NameCoverage is the share of the question's words its name and
	// namespace hold.
	NameCoverage float64 `json:"name_coverage"`
	// Self is the cosine of the question's catalog terms and the tool's
	// own words, idf²-weighted.
	Self float64 `json:"self"`
	// Example is the cosine of the closest example, as Self (0 without).
	Example float64 `json:"example"`
	// Examples is the number of the tool's examples: the more it has, the
	// more a question that matches none of them says.
	Examples int `json:"examples"`
	// Words is the number of the question's words, Matched how many of them
	// the tool's own words hold.
	Words   int `json:"words"`
	Matched int `json:"matched"`
	// Cards is the number of tools with evidence for the question, counted
	// up to confidenceDepth+1: a catalog's density.
	Cards int `json:"cards"`
	// ExampleLead is Example minus the best Example of the other cards
	// confidence looks at (the first confidenceDepth+1): how far the
	// card's closest example stands ahead of (or behind) the others'.
	ExampleLead float64 `json:"example_lead"`
}

// NumFeatures is the length of Evidence.Features.
const NumFeatures = 13

// Features are the inputs of the calibration: the softmax as a log-odds,
// the coverages, cosines, relative score and margin, whether the card is
// the first, the logs of the question's length, of the cards, of the
// words matched and of the tool's examples, and the example lead. (The
// share of the question's words the catalog knows and the number of
// candidates were tried too: they helped with every catalog example and
// hurt with few or learned ones and on cw-gold, benchmarks.md.)
func (e *Evidence) Features() [NumFeatures]float64 {
	p := min(max(e.Softmax, 1e-3), 1-1e-3)
	lp := math.Log(p / (1 - p))
	n := math.Log1p(float64(e.Examples))
	top := 0.0
	if e.Rank == 0 {
		top = 1
	}
	return [NumFeatures]float64{
		lp, e.Coverage, e.NameCoverage, e.Self, e.Example,
		e.Relative, e.Margin, top, math.Log1p(float64(e.Words)), math.Log1p(float64(e.Cards)),
		math.Log1p(float64(e.Matched)), n, e.ExampleLead,
	}
}

// Logistic is a logistic model over Evidence.Features.
type Logistic struct {
	Bias    float64
	Weights [NumFeatures]float64
}

// Prob is the model's probability for features x.
func (l *Logistic) Prob(x [NumFeatures]float64) float64 {
	z := l.Bias
	for i, w := range l.Weights {
		z += w * x[i]
	}
	return 1 / (1 + math.Exp(-z))
}

// Calibration turns a card's evidence into the chance that its tool is one
// the question needs: a logistic model per kind of card, Models[examples]
// [dense], as the tool has no examples, a few (fewer than manyExamples) or
// many (a question that matches none of many examples says more than one
// that misses the only one), and as the question has evidence in more than
// confidenceDepth tools or not (in a large catalog a card competes with
// many; in a small one a word or two often match one tool alone, fitting
// or not). DefaultCalibration was fitted on MetaTool dev (hack/toolcal).
type Calibration struct {
	Models [3][2]Logistic
}

// manyExamples is the number of examples from which a tool's cards take
// the model of tools with many.
const manyExamples = 5

// Kind is the model of a card with evidence e: examples (0 none, 1 a few,
// 2 many), dense (0 or 1).
func (e *Evidence) Kind() (examples, dense int) {
	switch {
	case e.Examples >= manyExamples:
		examples = 2
	case e.Examples > 0:
		examples = 1
	}
	if e.Cards > confidenceDepth {
		dense = 1
	}
	return examples, dense
}

// Confidence is the calibrated confidence of a card with evidence e.
func (c *Calibration) Confidence(e *Evidence) float64 {
	ex, dense := e.Kind()
	return c.Models[ex][dense].Prob(e.Features())
}

// evidence fills out (the first len(out) of the cards taken, which holds
// confidenceDepth of them when there are that many, and the card after
// each in out when there is one) with the cards' evidence and confidence.
func (ix *Index) evidence(sc *scratch, taken []cand, out []Hit) {
	x := ix.ix
	top := float64(taken[0].score)
	t := x.p.PlainTemperature
	if ix.examples(sc, taken[0].entry) > 0 {
		t = x.p.Temperature
	}
	exp := func(s float32) float64 { return math.Exp((float64(s)/top - 1) / t) }
	var sum float64
	for _, c := range taken[:min(len(taken), confidenceDepth)] {
		sum += exp(c.score)
	}
	words := len(sc.terms) + sc.unknown
	share := func(n int) float64 { return float64(n) / float64(max(words, 1)) }
	// The two best example cosines among the cards looked at: the best
	// other than a card's own is the second when the card holds the first.
	var ex1, ex2 float32
	first := -1
	for i, c := range taken[:min(len(taken), confidenceDepth+1)] {
		switch {
		case first < 0 || c.example > ex1:
			ex1, ex2, first = c.example, ex1, i
		case c.example > ex2:
			ex2 = c.example
		}
	}
	for i := range out {
		c := taken[i]
		other := ex1
		if i == first {
			other = ex2
		}
		next := 0.0
		if i+1 < len(taken) {
			next = float64(taken[i+1].score)
		}
		var own, name int
		for _, t := range x.own.get(int(c.entry)) {
			if sc.seen[t] {
				own++
			}
		}
		for _, t := range x.names.get(int(c.entry)) {
			if sc.seen[t] {
				name++
			}
		}
		ev := Evidence{
			Rank: i, Relative: float64(c.score) / top, Margin: (float64(c.score) - next) / top,
			Softmax: exp(c.score) / sum, Coverage: share(own), NameCoverage: share(name),
			Self: float64(x.selfCosine(c.entry, sc)), Example: float64(c.example),
			Examples: ix.examples(sc, c.entry), Words: words, Matched: own, Cards: min(len(taken), confidenceDepth+1),
			ExampleLead: float64(c.example - other),
		}
		out[i] = Hit{Entry: int(c.entry), Score: float64(c.score), Confidence: ix.cal.Confidence(&ev), Evidence: ev}
	}
}

// Cut is the rule of an adaptive shortlist (spec.tools.adaptive).
type Cut struct {
	// Utility chooses Utility with RecallWeight; else Adaptive with
	// RelativeCut.
	Utility                   bool
	RecallWeight, RelativeCut float64
}

// Keep returns the hits the rule keeps, in order; it reuses the slice.
func (c Cut) Keep(hits []Hit) []Hit {
	if c.Utility {
		return Utility(hits, c.RecallWeight)
	}
	return Adaptive(hits, c.RelativeCut)
}

// Utility keeps the first k hits that maximise S/k + weight·S, S the sum
// of their confidences (the smallest such k, at least 1): a confidence is
// the chance that the hit's tool is needed, so S/k is the expected
// precision of the first k and S the needed tools they hold in
// expectation (spec.tools.adaptive rule Utility).
func Utility(hits []Hit, weight float64) []Hit {
	k, best, sum := min(len(hits), 1), math.Inf(-1), 0.0
	for i, h := range hits {
		sum += h.Confidence
		if u := sum/float64(i+1) + weight*sum; u > best {
			k, best = i+1, u
		}
	}
	return hits[:k]
}

// Adaptive keeps, in order, the hits whose confidence is at least cut
// times the best hit's (spec.tools.adaptive rule Relative): the best is
// always kept. It reuses the slice.
func Adaptive(hits []Hit, cut float64) []Hit {
	best := 0.0
	for _, h := range hits {
		best = max(best, h.Confidence)
	}
	return slices.DeleteFunc(hits, func(h Hit) bool { return h.Confidence < cut*best })
}
