package tools

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

func TestToolDF(t *testing.T) {
	// Sentences of tools 0, 1, 0, 2, out of tool order (a store's order).
	ss := &sentenceSets{
		off:   []uint32{0, 2, 4, 6, 7},
		ids:   []uint32{0, 1, 0, 2, 0, 1, 2},
		owner: []uint32{0, 1, 0, 2},
	}
	for _, tc := range []struct {
		name  string
		terms int
		want  []uint32
	}{
		{"each tool counts once", 3, []uint32{2, 1, 2}},
		{"terms no sentence holds are 0", 5, []uint32{2, 1, 2, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolDF(ss, tc.terms); !slices.Equal(got, tc.want) {
				t.Errorf("toolDF = %v, want %v", got, tc.want)
			}
		})
	}
}

// discountCatalog has seven tools that say who they are, and twenty
// others, so that idf means something; one holds "latest".
func discountCatalog() []Entry {
	entries := []Entry{
		{Source: "s", Tool: v1alpha1.Tool{Name: "news", Description: "Top headlines of the day."}},
		{Source: "s", Tool: v1alpha1.Tool{Name: "weather", Description: "Forecasts for a city."}},
		{Source: "s", Tool: v1alpha1.Tool{Name: "stocks", Description: "Share prices."}},
		{Source: "s", Tool: v1alpha1.Tool{Name: "sports", Description: "Match results."}},
		{Source: "s", Tool: v1alpha1.Tool{Name: "papers", Description: "Search academic papers."}},
		{Source: "s", Tool: v1alpha1.Tool{Name: "currency", Description: "Converts money."}},
	}
	entries = append(entries, Entry{Source: "s", Tool: v1alpha1.Tool{Name: "backups", Description: "Keeps the latest backups."}})
	for i := range 20 {
		entries = append(entries, Entry{Source: "s", Tool: v1alpha1.Tool{Name: fmt.Sprintf("filler%02d", i), Description: fmt.Sprintf("Handles chores of kind k%02d.", i)}})
	}
	return entries
}

// discountExamples ask five tools for the latest something; only the
// currency tool was asked about exchange rates.
var discountExamples = []LearnedExample{
	{Entry: 0, Text: "give me the latest headlines", Success: true},
	{Entry: 1, Text: "what is the latest forecast", Success: true},
	{Entry: 2, Text: "show the latest share price", Success: true},
	{Entry: 3, Text: "latest match score please", Success: true},
	{Entry: 4, Text: "find the latest paper on graphs", Success: true},
	{Entry: 5, Text: "euro exchange rates", Success: true},
}

// A word the learned examples of many tools hold weighs less in the
// overlay, one of a single tool's keeps its weight, the catalog's weights
// are untouched, and the question asking for the latest exchange rates
// finds the currency tool rather than the one "latest" is the name of.
func TestLearnedDiscount(t *testing.T) {
	for _, tc := range []struct {
		name     string
		discount float64
		lower    bool   // "latest" weighs less than in the catalog
		first    string // the first card of the question
	}{
		{"off", 0, false, "news"},
		{"default", DefaultParams.LearnedDiscount, true, "currency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams
			p.LearnedDiscount = tc.discount
			ix := NewIndex(discountCatalog(), Options{Params: &p})
			catalog := slices.Clone(ix.ix.idf2)
			l := ix.Learn(discountExamples)
			if !slices.Equal(ix.ix.idf2, catalog) {
				t.Fatal("learning changed the catalog's idf")
			}
			latest := ix.ix.dict[term(t, "latest")]
			if got := l.idf2[latest] < catalog[latest]; got != tc.lower {
				t.Errorf("latest: overlay idf² %.3f, catalog's %.3f: lower = %v, want %v", l.idf2[latest], catalog[latest], got, tc.lower)
			}
			// "euro" and "rates" are the currency tool's alone: not discounted.
			for _, w := range []string{"euro", "rates", "exchange"} {
				id, ok := l.dict[term(t, w)]
				if !ok {
					t.Fatalf("%q is not an overlay term: %v", w, l.dict)
				}
				if want := idfSquared(float64(len(ix.entries)), 1); l.idf2[id] != want {
					t.Errorf("%s: idf² %.4f, want %.4f (one tool's word keeps its weight)", w, l.idf2[id], want)
				}
			}
			hits := ix.SearchLearned("what are the latest rates", 3, nil, l)
			if got := firstID(ix, hits); got != tc.first {
				t.Errorf("first card %q, want %q (hits %+v)", got, tc.first, hits)
			}
		})
	}
}

// idfSquared is the weight of a word that df of n tools hold.
func idfSquared(n, df float64) float32 {
	idf := math.Log(1 + (n-df+0.5)/(df+0.5))
	return float32(idf * idf)
}

// term is the term of word.
func term(t *testing.T, word string) string {
	s, ok := tokenize.Term(word)
	if !ok {
		t.Fatalf("%q is no term", word)
	}
	return s
}

// An overlay whose words are all the catalog's shares its weights until
// it discounts one: the catalog's stay as they were.
func TestLearnedDiscountKeepsCatalog(t *testing.T) {
	ix := NewIndex(discountCatalog(), Options{})
	catalog := slices.Clone(ix.ix.idf2)
	l := ix.Learn([]LearnedExample{
		{Entry: 0, Text: "latest headlines", Success: true},
		{Entry: 1, Text: "latest forecasts", Success: true},
	})
	latest := ix.ix.dict[term(t, "latest")]
	if l.idf2[latest] >= catalog[latest] {
		t.Errorf("latest: overlay idf² %.3f, want below the catalog's %.3f", l.idf2[latest], catalog[latest])
	}
	if !slices.Equal(ix.ix.idf2, catalog) {
		t.Error("learning changed the catalog's idf")
	}
	if hits := ix.Search("latest backups", 1, nil); firstID(ix, hits) != "backups" || hits[0].Score <= 0 {
		t.Errorf("the catalog's search after learning: %+v", hits)
	}
}
