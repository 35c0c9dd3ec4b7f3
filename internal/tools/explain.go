package tools

import (
	"cmp"
	"math"
	"slices"
)

// Explanation says why a card scored and is trusted as it is (explain:
// true, api.md §10.3).
type Explanation struct {
	// Terms are the question's words the tool holds: where, and their part
	// of the BM25F score.
	Terms []TermMatch `json:"terms"`
	// Related are the words related to the question's (spec.tools.expansion)
	// the tool holds, and their part.
	Related []TermMatch `json:"related"`
	// Example is the tool's example closest to the question, when one
	// shares a word with it; AntiPattern its closest anti-pattern.
	Example     *SentenceMatch `json:"example,omitempty"`
	AntiPattern *SentenceMatch `json:"anti_pattern,omitempty"`
	// Parts add up to the score.
	Parts ScoreParts `json:"score_parts"`
	// Evidence is what the confidence was computed from.
	Evidence Evidence `json:"evidence"`
	// ConfidenceBefore is the confidence before calibration
	// (Evidence.Softmax), Confidence after.
	ConfidenceBefore float64 `json:"confidence_before"`
	Confidence       float64 `json:"confidence"`
}

// TermMatch is a word of the question (or one related to it) that a tool
// holds.
type TermMatch struct {
	// Term is the word's shortest form in the catalog.
	Term string `json:"term"`
	// Fields are the tool's fields that hold it: name, namespace,
	// description, tags, examples.
	Fields []string `json:"fields"`
	// Score is its part of the BM25F score.
	Score float64 `json:"score"`
}

// SentenceMatch is an example or anti-pattern and its cosine with the
// question.
type SentenceMatch struct {
	Text       string  `json:"text"`
	Similarity float64 `json:"similarity"`
}

// ScoreParts split a score: (Terms + Related + Learned + Example) ×
// AntiPattern × Lift (1 when omitted).
type ScoreParts struct {
	// Terms is the BM25F score of the question's own words, Related that of
	// their related words.
	Terms   float64 `json:"terms"`
	Related float64 `json:"related"`
	// Learned is the BM25 score of the tool's learned profile (its learned
	// examples as one text, learned.go); omitted without learned outcomes.
	Learned float64 `json:"learned,omitempty"`
	// Example is the closest example's part: its cosine times the best
	// BM25F score among the candidates, times Params.ExampleMatch.
	Example float64 `json:"example"`
	// AntiPattern is the factor the closest anti-pattern leaves (1: none).
	AntiPattern float64 `json:"anti_pattern"`
	// Lift is the factor of the gap between the tool's learned examples
	// and its own words (Params.LearnedGap); omitted without learned
	// examples of the tool.
	Lift float64 `json:"lift,omitempty"`
}

// fieldNames name the fields of a tool's BM25F document, in field order.
var fieldNames = [numFields]string{"name", "namespace", "description", "tags", "examples"}

// Explain explains hits, the result of Search for the same question and
// allowed tools: one explanation per hit. It scores the question again,
// so it costs about a search more.
func (ix *Index) Explain(query string, hits []Hit, allowed []bool) []Explanation {
	return ix.ExplainLearned(query, hits, allowed, nil)
}

// ExplainLearned is Explain for hits of SearchLearned with the overlay l:
// the learned examples count in the example part, the learned failures in
// the anti-pattern factor, and the learned profiles are the learned part.
func (ix *Index) ExplainLearned(query string, hits []Hit, allowed []bool, l *Learned) []Explanation {
	if len(hits) == 0 {
		return nil
	}
	allowed = ix.mask(allowed)
	x := ix.ix
	sc := ix.scratchFor(l)
	defer ix.putScratch(sc)
	x.gather(sc, query, allowed)
	exWeight := float64(x.p.ExampleMatch) * float64(x.topBM25F(sc))
	out := make([]Explanation, len(hits))
	for i, h := range hits {
		d := uint32(h.Entry)
		e := &out[i]
		e.Terms = ix.termMatches(sc, d, sc.terms, func(t uint32) float32 { return x.toolIDF[t] })
		e.Related = ix.termMatches(sc, d, sc.expand, func(t uint32) float32 { return sc.expW[t] })
		for _, m := range e.Terms {
			e.Parts.Terms += m.Score
		}
		for _, m := range e.Related {
			e.Parts.Related += m.Score
		}
		if sc.learned != nil {
			// What the BM25F sum holds past the tool's own terms and related terms.
			if v := float64(sc.tool[d]) - e.Parts.Terms - e.Parts.Related; v > 1e-4 {
				e.Parts.Learned = v
			}
			if sc.learned.Examples(h.Entry) > 0 {
				e.Parts.Lift = float64(sc.learned.lift(d))
			}
		}
		t := &ix.entries[d].Tool
		e.Example = closest(x, sc, t.Examples)
		e.AntiPattern = closest(x, sc, t.AntiPatterns)
		e.Parts.Example = exWeight * float64(sc.best[d])
		e.Parts.AntiPattern = float64(x.antiFactor(sc.antiSim[d], sc.best[d], d, sc))
		e.Evidence, e.ConfidenceBefore, e.Confidence = h.Evidence, h.Evidence.Softmax, h.Confidence
	}
	x.reset(sc)
	x.release(sc)
	return out
}

// termMatches are the terms (weighted by weight) that tool d holds, with
// the fields holding them and their part of its BM25F score.
func (ix *Index) termMatches(sc *scratch, d uint32, terms []uint32, weight func(t uint32) float32) []TermMatch {
	x := ix.ix
	var fields [numFields][]uint32
	t := &ix.entries[d].Tool
	for f, texts := range [numFields][]string{{nameWords(t.Name) + " " + t.Name}, {nameWords(t.Namespace)}, {t.Description}, t.Tags, t.Examples} {
		for _, s := range texts {
			fields[f] = x.queryTerms(fields[f], s, nil)
		}
	}
	out := []TermMatch{}
	for _, term := range terms {
		lo, hi := x.toolOff[term], x.toolOff[term+1]
		j, ok := slices.BinarySearch(x.toolDoc[lo:hi], d)
		if !ok {
			continue
		}
		m := TermMatch{Term: x.surface[term], Fields: []string{}, Score: float64(weight(term) * x.toolSat[lo+uint32(j)])}
		for f := range fields {
			if slices.Contains(fields[f], term) {
				m.Fields = append(m.Fields, fieldNames[f])
			}
		}
		out = append(out, m)
	}
	slices.SortStableFunc(out, func(a, b TermMatch) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

// closest is the sentence of texts closest to the question (sc.seen), by
// the cosine the index uses, or nil when none shares a term with it.
func closest(x *termIndex, sc *scratch, texts []string) *SentenceMatch {
	var best *SentenceMatch
	var terms []uint32
	for _, s := range texts {
		terms = x.queryTerms(terms[:0], s, nil)
		var dot, norm float32
		for _, t := range terms {
			norm += x.idf2[t]
			if sc.seen[t] {
				dot += x.idf2[t]
			}
		}
		if dot == 0 {
			continue
		}
		c := float64(dot) / math.Sqrt(float64(norm)*float64(sc.qnorm))
		if best == nil || c > best.Similarity {
			best = &SentenceMatch{Text: s, Similarity: c}
		}
	}
	return best
}
