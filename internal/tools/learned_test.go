package tools

import (
	"fmt"
	"math"
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
	if p.Lift != 1 {
		t.Errorf("lift %.4f: the only learned tool has the mean gap, want 1", p.Lift)
	}
	if got := (p.Terms + p.Related + p.Learned + p.Example) * p.AntiPattern * p.Lift; got < hits[0].Score*0.999 || got > hits[0].Score*1.001 {
		t.Errorf("parts make %.4f, the score is %.4f", got, hits[0].Score)
	}
	// Without the overlay, explaining gives the catalog's parts only.
	if p := ix.Explain(q, hits, nil)[0].Parts; p.Learned != 0 {
		t.Errorf("Explain without the overlay has a learned part: %+v", p)
	}
}

// A word the learned examples of many tools hold says little, as it would
// had the examples been written into the catalog, even when the catalog's
// own words hold it once: "detailed" is a word of one tool's description,
// but three tools' learned questions use it, so the question's other word
// decides (the news tool itself is not allowed).
func TestLearnedIDFCountsProfiles(t *testing.T) {
	cat := append(learnCatalog(), Entry{Source: "ops", Tool: v1alpha1.Tool{Name: "news_digest", Description: "Detailed news digest."}})
	ix := NewIndex(cat, Options{})
	l := ix.Learn([]LearnedExample{
		{Entry: 0, Text: "detailed rain outlook", Success: true},
		{Entry: 1, Text: "airfare to Rome for two adults in June", Success: true},
		{Entry: 2, Text: "detailed room rates", Success: true},
	})
	hits := ix.SearchLearned("detailed airfare", 3, []bool{true, true, true, false}, l)
	if got := firstID(ix, hits); got != "flight_search" {
		t.Errorf("first card %q, want flight_search: %+v", got, hits)
	}
}

// The overlay does not depend on the order of its records: a word learned
// by two tools weighs the same whether a tool's records come together or
// not.
func TestLearnedOrderFree(t *testing.T) {
	ix := NewIndex(learnCatalog(), Options{})
	ex := []LearnedExample{
		{Entry: 0, Text: "umbrella tomorrow", Success: true},
		{Entry: 1, Text: "umbrella on board", Success: true},
		{Entry: 0, Text: "umbrella or raincoat", Success: true},
		{Entry: 2, Text: "umbrella stand in the lobby", Success: false},
	}
	other := []LearnedExample{ex[0], ex[2], ex[1], ex[3]}
	a := ix.SearchLearned("umbrella", 3, nil, ix.Learn(ex))
	b := ix.SearchLearned("umbrella", 3, nil, ix.Learn(other))
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("cards %+v and %+v", a, b)
	}
	for i := range a {
		if a[i].Entry != b[i].Entry || a[i].Score != b[i].Score {
			t.Errorf("card %d: %d %.6f in one order, %d %.6f in the other", i, a[i].Entry, a[i].Score, b[i].Entry, b[i].Score)
		}
	}
}

// A tool whose learned questions share no word with its own words is
// lifted by 1 + LearnedGap, one whose learned question is its description
// is not, both over their mean; a tool without learned examples has no
// lift.
func TestLearnedGap(t *testing.T) {
	learned := []LearnedExample{
		{Entry: 0, Text: "Forecast of the weather for a city.", Success: true},
		{Entry: 1, Text: "cheapest way to get to Rome", Success: true},
	}
	ix := NewIndex(learnCatalog(), Options{})
	l := ix.Learn(learned)
	q := "city weather and the cheapest way to Rome, or a hotel in the city"
	hits := ix.SearchLearned(q, 3, nil, l)
	g := DefaultParams.LearnedGap
	mean := (1 + 1 + g) / 2
	want := map[string]float64{"weather_forecast": 1 / mean, "flight_search": (1 + g) / mean, "hotel_booking": 0}
	exp := ix.ExplainLearned(q, hits, nil, l)
	if len(exp) != 3 {
		t.Fatalf("cards %+v, want all three", hits)
	}
	for i, h := range hits {
		name := ix.Entry(h.Entry).Tool.Name
		if got := exp[i].Parts.Lift; math.Abs(got-want[name]) > 1e-5 {
			t.Errorf("%s: lift %.6f, want %.6f", name, got, want[name])
		}
	}
	// With LearnedGap 0 the flight tool scores less by its lift.
	p := DefaultParams
	p.LearnedGap = 0
	flat := NewIndex(learnCatalog(), Options{Params: &p})
	score := func(hs []Hit, entry int) float64 {
		for _, h := range hs {
			if h.Entry == entry {
				return h.Score
			}
		}
		return 0
	}
	if a, b := score(hits, 1), score(flat.SearchLearned(q, 3, nil, flat.Learn(learned)), 1); math.Abs(a-b*want["flight_search"]) > 1e-4*a {
		t.Errorf("flight_search scores %.5f lifted and %.5f without, want a factor %.4f", a, b, want["flight_search"])
	}
}

// Learning one tool does not bury another: a question in the words of the
// currency tool's description stays the currency tool's, though learned
// examples of the weather tool hold most of them, because the currency
// tool's BM25F score stands in for the learned profile it lacks (without
// the stand-in the weather tool wins).
func TestLearnedStandIn(t *testing.T) {
	cat := append(learnCatalog(), Entry{Source: "ops", Tool: v1alpha1.Tool{Name: "convert", Description: "Convert an amount of money between currencies at the exchange rate of the day."}})
	learned := []LearnedExample{
		{Entry: 0, Text: "will the storm move the exchange rate", Success: true},
		{Entry: 0, Text: "money for an umbrella on a rainy day", Success: true},
	}
	q := "will the exchange rate of my money move"
	for _, c := range []struct {
		standIn float64
		want    string
	}{
		{DefaultParams.LearnedStandIn, "convert"},
		{0, "weather_forecast"},
	} {
		t.Run(fmt.Sprint(c.standIn), func(t *testing.T) {
			p := DefaultParams
			p.LearnedStandIn = c.standIn
			ix := NewIndex(cat, Options{Params: &p})
			hits := ix.SearchLearned(q, 4, nil, ix.Learn(learned))
			if got := firstID(ix, hits); got != c.want {
				t.Errorf("first card %q, want %q: %+v", got, c.want, hits)
			}
		})
	}
}
