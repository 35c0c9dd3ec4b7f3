package tools

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestRelatedTable(t *testing.T) {
	table := loadRelated()
	for _, tt := range []struct {
		term string
		kind int
		want string
	}{
		{"physician", relSynonym, "doctor"},
		{"car", relSynonym, "automobil"}, // terms are stems, as the index's
		{"scholar", relRelated, "academ"},
		{"buy", relBroader, "acquir"},
	} {
		t.Run(tt.term, func(t *testing.T) {
			var got []string
			found := table.lookup(tt.term, func(kind int, rel []byte) {
				if kind == tt.kind {
					got = append(got, string(rel))
				}
			})
			if !found || !slices.Contains(got, tt.want) {
				t.Errorf("lookup(%q) kind %d = %v (found %v), want it to hold %q", tt.term, tt.kind, got, found, tt.want)
			}
		})
	}
	t.Run("unknown term", func(t *testing.T) {
		if table.lookup("zzqx", func(int, []byte) { t.Error("called") }) {
			t.Error("found")
		}
	})
}

func TestSearchExpansion(t *testing.T) {
	catalog := []Entry{
		tool("", "find_physician", "Find a physician near you."),
		tool("", "buy_tickets", "Buy tickets for a concert."),
		tool("", "purchase_tickets", "Purchase tickets for a concert."),
		tool("", "academic_search", "Search academic papers."),
		tool("", "weather", "The weather forecast for a city."),
	}
	off := DefaultParams
	off.Synonym, off.Related, off.Broader = 0, 0, 0
	for _, tt := range []struct {
		name, query string
		want        []string // the first tools, in order
		without     []string // the first tools without expansion
	}{
		{"a synonym reaches the tool", "I need a doctor", []string{"find_physician"}, nil},
		{"a related form reaches the tool", "scholarly work on climate", []string{"academic_search"}, nil},
		{"an exact match outranks its synonym", "buy tickets", []string{"buy_tickets", "purchase_tickets"}, []string{"buy_tickets", "purchase_tickets"}},
		{"the synonym's own word wins the other way", "purchase tickets", []string{"purchase_tickets", "buy_tickets"}, []string{"purchase_tickets", "buy_tickets"}},
		{"a word with no relatives changes nothing", "weather in Paris", []string{"weather"}, []string{"weather"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []struct {
				name string
				p    *Params
				want []string
			}{{"expansion", nil, tt.want}, {"none", &off, tt.without}} {
				ix := NewIndex(catalog, Options{Params: mode.p})
				got := ids(ix, ix.Search(tt.query, 5, nil))
				if len(got) < len(mode.want) || !slices.Equal(got[:len(mode.want)], mode.want) {
					t.Errorf("%s: Search(%q) = %v, want it to start with %v", mode.name, tt.query, got, mode.want)
				}
				if mode.want == nil && len(got) > 0 {
					t.Errorf("%s: Search(%q) = %v, want no tool", mode.name, tt.query, got)
				}
			}
		})
	}
}

func TestSearchExpansionConcurrent(t *testing.T) {
	ix := NewIndex([]Entry{tool("", "find_physician", "Find a physician near you.")}, Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if got := ids(ix, ix.Search("a doctor please", 1, nil)); !slices.Equal(got, []string{"find_physician"}) {
					t.Errorf("Search = %v", got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestWordNetLicenseTravelsWithTheTable(t *testing.T) {
	for _, want := range []string{"WordNet 3.0 Copyright 2006 by Princeton University", "hack/wordnet"} {
		if !strings.Contains(WordNetLicense, want) {
			t.Errorf("WordNetLicense lacks %q", want)
		}
	}
}

// TestRelatedCacheBounded: only words of the table are remembered for the
// words of questions the catalog lacks, so made-up words cannot grow it.
func TestRelatedCacheBounded(t *testing.T) {
	ix := NewIndex([]Entry{tool("", "find_physician", "Find a physician near you.")}, Options{})
	for i := range 1000 {
		ix.Search(fmt.Sprintf("qzx%dv please", i), 5, nil)
	}
	ix.Search("a doctor, a doctor", 5, nil)
	if n := len(ix.ix.relOther); n != 2 { // "doctor" and "pleas"
		t.Errorf("%d words remembered, want 2", n)
	}
}
