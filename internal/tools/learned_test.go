package tools

import (
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func learnCatalog() []Entry {
	return []Entry{
		{Source: "ops", Tool: v1alpha1.Tool{Name: "weather_forecast", Description: "Forecast of the weather for a city."}},
		{Source: "ops", Tool: v1alpha1.Tool{Name: "flight_search", Description: "Search flights between two cities."}},
		{Source: "ops", Tool: v1alpha1.Tool{Name: "hotel_booking", Description: "Book a hotel room in a city."}},
	}
}

func firstID(ix *Index, hits []Hit) string {
	if len(hits) == 0 {
		return ""
	}
	return ix.Entry(hits[0].Entry).Tool.Name
}

// A learned success teaches a word no tool has; a learned failure costs its
// tool as an anti-pattern; the overlay never adds a tool the mask leaves out.
func TestLearnedOverlay(t *testing.T) {
	ix := NewIndex(learnCatalog(), Options{})
	q := "will I need an umbrella in Lisbon"
	if hits := ix.Search(q, 3, nil); len(hits) != 0 {
		t.Fatalf("before learning: %d cards, want none (no word is the catalog's)", len(hits))
	}
	q2 := "will I need an umbrella in the city"
	before := ix.Search(q2, 3, nil)
	l := ix.Learn([]LearnedExample{{Entry: 0, Text: "do I need an umbrella tomorrow", Success: true}})
	if l.Examples(0) != 1 || l.Len() != 1 {
		t.Fatalf("Examples(0) = %d, Len = %d", l.Examples(0), l.Len())
	}
	after := ix.SearchLearned(q2, 3, nil, l)
	if got := firstID(ix, after); got != "weather_forecast" {
		t.Errorf("after a learned success the first card is %q, want weather_forecast (before: %v)", got, before)
	}
	if after[0].Evidence.Examples != 1 || after[0].Evidence.Example <= 0 {
		t.Errorf("evidence = %+v, want the learned example counted", after[0].Evidence)
	}
	// The mask wins: the learned tool is not allowed, so it is not a card.
	masked := ix.SearchLearned(q2, 3, []bool{false, true, true}, l)
	for _, h := range masked {
		if h.Entry == 0 {
			t.Errorf("a tool the mask leaves out is a card: %+v", h)
		}
	}
	// A failure is an anti-example: the same question costs the tool.
	q3 := "book a hotel in the city centre"
	base := ix.Search(q3, 3, nil)
	if firstID(ix, base) != "hotel_booking" {
		t.Fatalf("base first card %q", firstID(ix, base))
	}
	neg := ix.Learn([]LearnedExample{{Entry: 2, Text: q3, Success: false}})
	for _, h := range ix.SearchLearned(q3, 3, nil, neg) {
		// The anti-pattern rule of §10.3: the cost is the square of how much
		// closer the failure is than the tool's own words.
		if h.Entry == 2 && h.Score >= base[0].Score*0.99 {
			t.Errorf("after a failure the tool scores %.4f, want below %.4f", h.Score, base[0].Score)
		}
	}
	// An overlay of another index is ignored.
	other := NewIndex(learnCatalog(), Options{})
	if got := other.SearchLearned(q, 3, nil, l); len(got) != 0 {
		t.Errorf("another index's overlay was used: %v", got)
	}
}

// Explaining a learned card: the example part holds the learned example,
// the learned part the learned profile, and the parts make the score.
func TestExplainLearned(t *testing.T) {
	ix := NewIndex(learnCatalog(), Options{})
	l := ix.Learn([]LearnedExample{{Entry: 0, Text: "do I need an umbrella tomorrow", Success: true}})
	q := "will I need an umbrella in the city"
	hits := ix.SearchLearned(q, 3, nil, l)
	if len(hits) == 0 || hits[0].Entry != 0 {
		t.Fatalf("hits %+v", hits)
	}
	exp := ix.ExplainLearned(q, hits, nil, l)
	p := exp[0].Parts
	if p.Learned <= 0 || p.Example <= 0 {
		t.Errorf("parts %+v: want a learned profile part and a learned example part", p)
	}
	if got := (p.Terms + p.Related + p.Learned + p.Example) * p.AntiPattern; got < hits[0].Score*0.999 || got > hits[0].Score*1.001 {
		t.Errorf("parts make %.4f, the score is %.4f", got, hits[0].Score)
	}
	// Without the overlay, explaining gives the catalog's parts only.
	if p := ix.Explain(q, hits, nil)[0].Parts; p.Learned != 0 {
		t.Errorf("Explain without the overlay has a learned part: %+v", p)
	}
}
