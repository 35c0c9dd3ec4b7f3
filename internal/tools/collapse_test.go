package tools

import (
	"fmt"
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestCollapseGroups(t *testing.T) {
	for _, tt := range []struct {
		name   string
		descs  []string
		groups [][]int // by entry, in (source, id) order
	}{
		{"identical", []string{"Convert currency.", "Convert currency.", "Translate text."}, [][]int{{0, 1}}},
		{"a variant number and word", []string{"Create a new invoice for a customer.", "Create a new invoice for a customer (variant 2).", "Create a new invoice for a customer (variant 3)."}, [][]int{{0, 1, 2}}},
		{"a version number", []string{"Search the web, API 1.", "Search the web, API 2."}, [][]int{{0, 1}}},
		{"one word in two differs", []string{"List payment history.", "List notification history."}, nil},
		{"alike below the threshold", []string{"Create an invoice for a customer and send it.", "Create an invoice for a supplier and file it."}, nil},
		{"a chain links three", []string{"a1 b1 c1 d1 e1 f1 g1 h1 i1 j1", "a1 b1 c1 d1 e1 f1 g1 h1 i1 k1", "a1 b1 c1 d1 e1 f1 g1 h1 l1 k1"}, [][]int{{0, 1, 2}}},
		{"no words are never alike", []string{"", "", "the of"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var entries []Entry
			for i, d := range tt.descs {
				entries = append(entries, tool("", fmt.Sprintf("t%d", i), d))
			}
			ix := NewIndex(entries, Options{Collapse: 0.8})
			var got [][]int
			for _, m := range ix.ix.groups.members {
				var g []int
				for _, e := range m {
					g = append(g, int(e))
				}
				got = append(got, g)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.groups) {
				t.Errorf("groups %v, want %v", got, tt.groups)
			}
			if none := NewIndex(entries, Options{}); none.ix.groups.of != nil {
				t.Errorf("Collapse 0 grouped: %v", none.ix.groups.members)
			}
		})
	}
}

// sixCopies is a catalog where six tools (two sources) say the same thing.
func sixCopies() []Entry {
	var entries []Entry
	for i, src := range []string{"b", "a", "a", "b", "a", "b"} {
		entries = append(entries, Entry{Source: src, Tool: v1alpha1.Tool{Name: fmt.Sprintf("copy%d", i), Description: "Convert an amount from one currency to another."}})
	}
	return append(entries,
		tool("", "exchange_rates", "Show today's exchange rates of a currency."),
		tool("", "invoice_total", "Compute the total of an invoice in its currency."),
	)
}

func TestCollapseCards(t *testing.T) {
	entries := sixCopies()
	name := func(i int) string { return entries[i].Source + "/" + entries[i].Tool.Name }
	names := func(is []int) []string {
		var out []string
		for _, i := range is {
			out = append(out, name(i))
		}
		return out
	}
	q := "convert 100 euros to dollars: which currency amount"
	t.Run("six copies take one place", func(t *testing.T) {
		ix := NewIndex(entries, Options{Collapse: 0.8})
		hits := ix.Search(q, 5, nil)
		if len(hits) != 3 {
			t.Fatalf("%d cards: %v", len(hits), ids(ix, hits))
		}
		// The first of the copies by (source, id) is the card; the others
		// are its also, in (source, id) order.
		if got := name(hits[0].Entry); got != "a/copy1" {
			t.Errorf("card %s", got)
		}
		if got, want := names(hits[0].Also), []string{"a/copy2", "a/copy4", "b/copy0", "b/copy3", "b/copy5"}; !slices.Equal(got, want) {
			t.Errorf("also %v, want %v", got, want)
		}
		for _, h := range hits[1:] {
			if h.Also != nil {
				t.Errorf("card %s lists %v", name(h.Entry), h.Also)
			}
		}
	})
	t.Run("without collapsing they take five of five places", func(t *testing.T) {
		ix := NewIndex(entries, Options{})
		hits := ix.Search(q, 5, nil)
		for _, h := range hits {
			if h.Entry >= 6 {
				t.Errorf("%s among the copies: %v", name(h.Entry), ids(ix, hits))
			}
		}
	})
	t.Run("only allowed copies are listed, and the best allowed is the card", func(t *testing.T) {
		ix := NewIndex(entries, Options{Collapse: 0.8})
		allowed := []bool{true, false, true, false, true, false, true, true}
		hits := ix.Search(q, 5, allowed)
		if got := name(hits[0].Entry); got != "a/copy2" {
			t.Errorf("card %s", got)
		}
		if got, want := names(hits[0].Also), []string{"a/copy4", "b/copy0"}; !slices.Equal(got, want) {
			t.Errorf("also %v, want %v", got, want)
		}
	})
	t.Run("the copies' confidence is not shared out", func(t *testing.T) {
		hits := NewIndex(entries, Options{Collapse: 0.8}).Search(q, 5, nil)
		flat := NewIndex(entries, Options{}).Search(q, 5, nil)
		if !(hits[0].Evidence.Softmax > 3*flat[0].Evidence.Softmax) {
			t.Errorf("softmax %v collapsed, %v not", hits[0].Evidence.Softmax, flat[0].Evidence.Softmax)
		}
	})
}

// TestCollapseWidensTheWindow: a group larger than the candidates first
// looked at still leaves k distinct cards.
func TestCollapseWidensTheWindow(t *testing.T) {
	var entries []Entry
	for i := range 200 {
		entries = append(entries, tool("", fmt.Sprintf("copy%03d", i), "Convert currency amounts."))
	}
	for i := range 12 {
		entries = append(entries, tool("", fmt.Sprintf("other%02d", i), fmt.Sprintf("Currency tool number %d of kind k%02d.", i, i)))
	}
	ix := NewIndex(entries, Options{Collapse: 0.8})
	hits := ix.Search("convert currency amounts", 10, nil)
	if len(hits) != 10 {
		t.Fatalf("%d cards", len(hits))
	}
	if len(hits[0].Also) != MaxAlso {
		t.Errorf("also lists %d, want %d", len(hits[0].Also), MaxAlso)
	}
	for _, h := range hits[1:] {
		if h.Entry < 200 {
			t.Errorf("a second copy is a card: %v", ids(ix, hits))
		}
	}
}
