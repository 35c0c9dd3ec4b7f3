package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// Questions written apart from the quickstart classifier's examples: twelve
// that no route should take, and twelve with the label they should get.
var (
	offTopic = []string{
		"What's for lunch on Thursday?", "Where can I park my bike?", "Can you recommend a good book?",
		"Is it going to rain in Lisbon tomorrow?", "What's the wifi password for guests?",
		"Any good restaurants near the Lisbon office?", "How tall is the Eiffel tower?", "Write a poem about robots",
		"Who is the CEO of Acme?", "What is the capital of Australia?", "Can you help me with my crossword?",
		"Where do I find the printer on the second floor?",
	}
	inScope = []struct{ text, label string }{
		{"How many vacation days do I get, and can I carry them over?", "time-off"},
		{"The robots stopped moving in the warehouse", "incident"},
		{"Who approves a new monitor purchase?", "spend"},
		{"Can I take Monday off?", "time-off"},
		{"Customers report that tracking pages are blank", "incident"},
		{"How much can I spend on a client lunch?", "spend"},
		{"My kid is sick, can I stay home?", "time-off"},
		{"Picking is down in Munich since this morning", "incident"},
		{"Is there budget left for a team offsite?", "spend"},
		{"How long is maternity leave?", "time-off"},
		{"fleet-api returns 500 errors", "incident"},
		{"Do I need approval for a 3000 euro server?", "spend"},
	}
)

// TestQuickstartClassifierOutOfScope (issue 20 item 3): without examples of
// its out-of-scope label the quickstart's classifier gives most off-topic
// questions a label, above its threshold; with the examples it ships, most
// get "other", and the in-scope questions keep their labels.
func TestQuickstartClassifierOutOfScope(t *testing.T) {
	withoutOther := func(set *manifest.Set) {
		for i := range set.Classifiers {
			set.Classifiers[i].Spec.Labels = slices.DeleteFunc(set.Classifiers[i].Spec.Labels,
				func(l v1alpha1.ClassifierLabel) bool { return l.Name == "other" })
		}
	}
	count := func(s *engine.Snapshot) (oos, right int) {
		label := func(text string) string {
			resp, err := s.Query(context.Background(), engine.Request{Text: text, Detect: []string{"intent"}})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Detection.Classifiers["intent"].Label
		}
		for _, q := range offTopic {
			if label(q) == "other" {
				oos++
			}
		}
		for _, q := range inScope {
			if label(q.text) == q.label {
				right++
			}
		}
		return oos, right
	}
	with := quickstartSnapshot(t)
	if w := with.Warnings(); len(w) != 0 {
		t.Errorf("the quickstart compiles with warnings: %v", w)
	}
	without := quickstartSnapshot(t, withoutOther)
	if w := without.Warnings(); len(w) != 1 || w[0].Field != "spec.outOfScopeLabel" {
		t.Errorf("without out-of-scope examples: warnings %v, want the one of spec.outOfScopeLabel", w)
	}
	oosWithout, rightWithout := count(without)
	oosWith, rightWith := count(with)
	t.Logf("off-topic labelled other: %d/%d without out-of-scope examples, %d/%d with; in-scope right: %d/%d, %d/%d",
		oosWithout, len(offTopic), oosWith, len(offTopic), rightWithout, len(inScope), rightWith, len(inScope))
	if oosWithout > 3 {
		t.Errorf("without out-of-scope examples %d of %d off-topic questions are other; the test no longer shows the problem", oosWithout, len(offTopic))
	}
	if oosWith < 8 || rightWith < 10 {
		t.Errorf("with out-of-scope examples: %d of %d off-topic questions are other (want ≥ 8), %d of %d in-scope questions right (want ≥ 10)",
			oosWith, len(offTopic), rightWith, len(inScope))
	}
}
