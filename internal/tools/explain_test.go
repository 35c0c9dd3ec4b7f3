package tools

import (
	"math"
	"slices"
	"testing"
)

func TestExplain(t *testing.T) {
	ix := NewIndex(billing, Options{})
	find := func(e []TermMatch, term string) *TermMatch {
		for i := range e {
			if e[i].Term == term {
				return &e[i]
			}
		}
		return nil
	}
	t.Run("words, fields and an example", func(t *testing.T) {
		q := "create an invoice for ACME for March"
		hits := ix.Search(q, 3, nil)
		exps := ix.Explain(q, hits, nil)
		if len(exps) != len(hits) || hits[0].Entry != 0 {
			t.Fatalf("%d explanations of %v", len(exps), ids(ix, hits))
		}
		for i, e := range exps {
			p := e.Parts
			if got := (p.Terms + p.Related + p.Example) * p.AntiPattern; math.Abs(got-hits[i].Score) > 1e-4*hits[i].Score {
				t.Errorf("card %d: parts %+v make %v, score %v", i, p, got, hits[i].Score)
			}
			if e.Confidence != hits[i].Confidence || e.ConfidenceBefore != hits[i].Evidence.Softmax || e.Evidence != hits[i].Evidence {
				t.Errorf("card %d: confidence %v / %v, hit %+v", i, e.ConfidenceBefore, e.Confidence, hits[i])
			}
		}
		e := exps[0]
		create := find(e.Terms, "create")
		if create == nil || !slices.Equal(create.Fields, []string{"name", "description"}) || create.Score <= 0 {
			t.Errorf("create: %+v", create)
		}
		if m := find(e.Terms, "march"); m == nil || !slices.Equal(m.Fields, []string{"examples"}) {
			t.Errorf("march: %+v", m)
		}
		if e.Example == nil || e.Example.Text != "bill ACME 300 euros for March" || e.Example.Similarity <= 0 {
			t.Errorf("example %+v", e.Example)
		}
		if math.Abs(e.Example.Similarity-hits[0].Evidence.Example) > 1e-5 {
			t.Errorf("example similarity %v, evidence %v", e.Example.Similarity, hits[0].Evidence.Example)
		}
		// The anti-pattern shares "invoice" but is farther than the
		// example: it costs nothing.
		if e.AntiPattern == nil || e.AntiPattern.Similarity >= e.Example.Similarity || e.Parts.AntiPattern != 1 {
			t.Errorf("anti-pattern %+v, factor %v", e.AntiPattern, e.Parts.AntiPattern)
		}
		// Terms come by their part of the score.
		for i := 1; i < len(e.Terms); i++ {
			if e.Terms[i].Score > e.Terms[i-1].Score {
				t.Errorf("terms out of order: %+v", e.Terms)
			}
		}
	})
	t.Run("an anti-pattern and related words", func(t *testing.T) {
		q := "show me last month's invoices"
		hits := ix.Search(q, 5, nil)
		exps := ix.Explain(q, hits, nil)
		for i, h := range hits {
			if h.Entry != 0 {
				continue
			}
			e := exps[i]
			if e.AntiPattern == nil || e.AntiPattern.Text != "show me last month's invoices" || e.Parts.AntiPattern >= 1 {
				t.Errorf("create_invoice: anti-pattern %+v, factor %v", e.AntiPattern, e.Parts.AntiPattern)
			}
			return
		}
		t.Errorf("create_invoice not shortlisted: %v", ids(ix, hits))
	})
	t.Run("related words", func(t *testing.T) {
		q := "reimburse a payment"
		hits := ix.Search(q, 5, nil)
		exps := ix.Explain(q, hits, nil)
		var related []string
		for i, h := range hits {
			if h.Entry == 2 {
				for _, m := range exps[i].Related {
					related = append(related, m.Term)
				}
				if exps[i].Parts.Related <= 0 {
					t.Errorf("refundPayment: related part %v", exps[i].Parts.Related)
				}
			}
		}
		if !slices.Contains(related, "refund") {
			t.Errorf("refundPayment's related words %v, want refund", related)
		}
	})
	t.Run("nothing to explain", func(t *testing.T) {
		if e := ix.Explain("invoice", nil, nil); e != nil {
			t.Errorf("explanations of no hits: %v", e)
		}
	})
}
