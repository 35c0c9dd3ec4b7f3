package tools

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

func TestConfidence(t *testing.T) {
	ix := NewIndex(genCatalog(500, 3), Options{})
	for _, q := range []string{"create a stripe invoice", "list pods", "summarize jira ticket history", "weather"} {
		t.Run(q, func(t *testing.T) {
			hits := ix.Search(q, 20, nil)
			if len(hits) < 2 {
				t.Fatalf("%d hits", len(hits))
			}
			sum := 0.0
			for i, h := range hits {
				if h.Confidence < 0 || h.Confidence > 1 || math.IsNaN(h.Confidence) {
					t.Errorf("hit %d confidence %v", i, h.Confidence)
				}
				ev := h.Evidence
				if ev.Rank != i || ev.Relative > 1 || ev.Coverage > 1 || ev.Self > 1 || ev.Cards != confidenceDepth+1 {
					t.Errorf("hit %d evidence %+v", i, ev)
				}
				// The relative confidence falls down the list and shares 1
				// out among the first confidenceDepth cards.
				if i > 0 && (h.Score > hits[i-1].Score || ev.Softmax > hits[i-1].Evidence.Softmax) {
					t.Errorf("hit %d (score %v, softmax %v) above hit %d (%v, %v)", i, h.Score, ev.Softmax, i-1, hits[i-1].Score, hits[i-1].Evidence.Softmax)
				}
				if i < confidenceDepth {
					sum += ev.Softmax
				}
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("softmax of the top %d sums to %v, want 1", confidenceDepth, sum)
			}
			// k does not change a hit's confidence.
			if one := ix.Search(q, 1, nil); one[0].Confidence != hits[0].Confidence || one[0].Evidence != hits[0].Evidence {
				t.Errorf("top confidence %v with k=1, %v with k=20", one[0].Confidence, hits[0].Confidence)
			}
		})
	}
}

// opsCatalog is a small catalog of an operations team, without examples.
var opsCatalog = []Entry{
	tool("oncall", "page_oncall", "Page the on-call engineers of a team about an urgent problem."),
	tool("oncall", "who_is_on_call", "Tell who is on call now for a team, and who is next."),
	tool("deploys", "deploy_status", "Show the release a service runs in each region and its recent deploys."),
	tool("deploys", "rollback_deploy", "Roll a service back to its previous release in one region."),
	tool("incidents", "open_incident", "Open an incident and create the incident channel."),
	tool("incidents", "list_incidents", "List open and recent incidents with their severity and owner."),
}

// TestAbsoluteConfidence: a confidence says how likely the card is right,
// not how it compares with the others. A lone match by one word of three
// is not confident (it was 1 when confidence was relative), a question the
// tool's words answer is.
func TestAbsoluteConfidence(t *testing.T) {
	ix := NewIndex(opsCatalog, Options{})
	for _, tt := range []struct {
		query    string
		first    string
		min, max float64
	}{
		{"What are the salary bands for engineers?", "oncall.page_oncall", 0, 0.5},
		{"page the on-call engineer of the payments team", "oncall.page_oncall", 0.8, 1},
		{"roll back the checkout service in eu-west", "deploys.rollback_deploy", 0.6, 1},
		{"list the open incidents", "incidents.list_incidents", 0.8, 1},
	} {
		t.Run(tt.query, func(t *testing.T) {
			hits := ix.Search(tt.query, 5, nil)
			if len(hits) == 0 || ids(ix, hits)[0] != tt.first {
				t.Fatalf("cards %v, want %s first", ids(ix, hits), tt.first)
			}
			if c := hits[0].Confidence; c < tt.min || c > tt.max {
				t.Errorf("confidence %.3f (evidence %+v), want in [%v, %v]", c, hits[0].Evidence, tt.min, tt.max)
			}
		})
	}
	t.Run("the lone match had relative confidence 1", func(t *testing.T) {
		hits := ix.Search("What are the salary bands for engineers?", 5, nil)
		if len(hits) != 1 || hits[0].Evidence.Softmax != 1 {
			t.Errorf("hits %+v, want one with softmax 1", hits)
		}
	})
}

func TestEvidence(t *testing.T) {
	ix := NewIndex(billing, Options{NoExpansion: true})
	// "refund" and "payment" are refundPayment's name words, "customer" a
	// word of its description; "ACME" no tool has.
	hits := ix.Search("refund the payment of customer ACME", 5, nil)
	if len(hits) == 0 || ids(ix, hits)[0] != "billing.payments.refundPayment" {
		t.Fatalf("cards %v", ids(ix, hits))
	}
	ev := hits[0].Evidence
	want := Evidence{Rank: 0, Words: 4, Matched: 3, Coverage: 0.75, NameCoverage: 0.5, Examples: 0, Cards: len(hits)}
	got := ev
	got.Relative, got.Margin, got.Softmax, got.Self, got.Example, got.ExampleLead = 0, 0, 0, 0, 0, 0
	if got != want {
		t.Errorf("evidence %+v, want %+v", ev, want)
	}
	// The card has no examples: its lead is minus the best example of the
	// others, which create_invoice's example is (it shares "ACME").
	var other float64
	for _, h := range hits[1:] {
		other = max(other, h.Evidence.Example)
	}
	if other <= 0 || math.Abs(ev.ExampleLead-(ev.Example-other)) > 1e-6 {
		t.Errorf("example lead %v, want %v − %v", ev.ExampleLead, ev.Example, other)
	}
	for _, h := range hits[1:] {
		if h.Evidence.Example == other && math.Abs(h.Evidence.ExampleLead-other) > 1e-6 {
			t.Errorf("the card with the best example leads by %v, want %v (the first card has none)", h.Evidence.ExampleLead, other)
		}
	}
	if ev.Relative != 1 || ev.Margin <= 0 || ev.Margin >= 1 || ev.Self <= 0 || ev.Self >= 1 || ev.Example != 0 {
		t.Errorf("evidence %+v", ev)
	}
	// An example question: create_invoice's closest example is the question.
	ex := ix.Search("bill ACME 300 euros for March", 5, nil)[0]
	if ex.Entry != 0 || math.Abs(ex.Evidence.Example-1) > 1e-6 || ex.Evidence.Examples != 2 {
		t.Errorf("example hit %+v", ex)
	}
}

func TestCalibrationModels(t *testing.T) {
	// Each kind of card has its model: a model's change moves only its cards.
	cal := DefaultCalibration
	ev := Evidence{Softmax: 0.9, Coverage: 0.5, Self: 0.5, Relative: 1, Margin: 0.5, Words: 4, Matched: 2}
	for _, tt := range []struct {
		examples, cards int
		ex, dense       int
	}{
		{0, 3, 0, 0}, {0, 11, 0, 1},
		{1, 3, 1, 0}, {manyExamples - 1, 11, 1, 1},
		{manyExamples, 3, 2, 0}, {60, 11, 2, 1},
	} {
		t.Run(fmt.Sprintf("%d examples, %d cards", tt.examples, tt.cards), func(t *testing.T) {
			e := ev
			e.Examples, e.Cards = tt.examples, tt.cards
			if x, d := e.Kind(); x != tt.ex || d != tt.dense {
				t.Fatalf("kind %d %d, want %d %d", x, d, tt.ex, tt.dense)
			}
			before := cal.Confidence(&e)
			changed := cal
			changed.Models[tt.ex][tt.dense].Bias++
			if after := changed.Confidence(&e); !(after > before) {
				t.Errorf("confidence %v after raising its model's bias, %v before", after, before)
			}
			other := cal
			other.Models[(tt.ex+1)%3][tt.dense].Bias++
			other.Models[tt.ex][1-tt.dense].Bias++
			if after := other.Confidence(&e); after != before {
				t.Errorf("another model moved the confidence: %v, %v", after, before)
			}
		})
	}
}

func TestAdaptive(t *testing.T) {
	hit := func(c ...float64) []Hit {
		out := make([]Hit, len(c))
		for i := range c {
			out[i] = Hit{Entry: i, Confidence: c[i]}
		}
		return out
	}
	entries := func(hits []Hit) []int {
		var out []int
		for _, h := range hits {
			out = append(out, h.Entry)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		conf []float64
		cut  float64
		want []int
	}{
		{"one clear card", []float64{0.9, 0.05, 0.01}, 0.1, []int{0}},
		{"two close cards", []float64{0.6, 0.3, 0.01}, 0.1, []int{0, 1}},
		{"a later card above the cut stays", []float64{0.5, 0.01, 0.2}, 0.3, []int{0, 2}},
		{"the best need not be first", []float64{0.2, 0.8}, 0.5, []int{1}},
		{"cut 0 keeps all", []float64{0.9, 0, 0.01}, 0, []int{0, 1, 2}},
		{"cut 1 keeps the best", []float64{0.4, 0.4, 0.3}, 1, []int{0, 1}},
		{"none", nil, 0.5, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := entries(Adaptive(hit(tt.conf...), tt.cut)); !slices.Equal(got, tt.want) {
				t.Errorf("Adaptive(%v, %v) kept %v, want %v", tt.conf, tt.cut, got, tt.want)
			}
		})
	}
}

func TestUtility(t *testing.T) {
	for _, tt := range []struct {
		name   string
		conf   []float64
		weight float64
		want   []int
	}{
		// 0.9 + 1.75·0.9 = 2.475 beats 0.95/2 + 1.75·0.95 = 2.1375.
		{"one clear card", []float64{0.9, 0.05, 0.01}, 1.75, []int{0}},
		// 0.55 + 1.75·1.1 = 2.475 beats 1.65 (one card) and 2.3958 (three).
		{"two likely cards", []float64{0.6, 0.5, 0.05}, 1.75, []int{0, 1}},
		// Ties keep the fewer cards.
		{"weight 0 keeps the best alone on a tie", []float64{0.5, 0.5, 0.1}, 0, []int{0}},
		{"weight 0 takes a surer second card", []float64{0.3, 0.6}, 0, []int{0, 1}},
		// 0.9/3 + 0.9 = 1.2 beats 1.0: a prefix, so the weak card comes along.
		{"a sure card after a weak one takes it along", []float64{0.5, 0, 0.4}, 1, []int{0, 1, 2}},
		{"a large weight keeps all", []float64{0.9, 0.05, 0.01}, 100, []int{0, 1, 2}},
		{"none", nil, 1, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits := make([]Hit, len(tt.conf))
			for i, c := range tt.conf {
				hits[i] = Hit{Entry: i, Confidence: c}
			}
			var got []int
			for _, h := range Utility(hits, tt.weight) {
				got = append(got, h.Entry)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Utility(%v, %v) kept %v, want %v", tt.conf, tt.weight, got, tt.want)
			}
		})
	}
	// Cut chooses the rule.
	hits := []Hit{{Entry: 0, Confidence: 0.6}, {Entry: 1, Confidence: 0.5}, {Entry: 2, Confidence: 0.05}}
	if got := (Cut{Utility: true, RecallWeight: 1.75, RelativeCut: 0.01}).Keep(slices.Clone(hits)); len(got) != 2 {
		t.Errorf("Cut Utility kept %d cards, want 2", len(got))
	}
	if got := (Cut{RecallWeight: 1.75, RelativeCut: 0.01}).Keep(slices.Clone(hits)); len(got) != 3 {
		t.Errorf("Cut Relative kept %d cards, want 3", len(got))
	}
}
