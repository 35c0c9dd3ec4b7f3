package tools

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestNameWords(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"create_invoice", "create invoice"},
		{"createInvoice", "create Invoice"},
		{"create-invoice", "create invoice"},
		{"billing.create", "billing create"},
		{"HTTPServer", "HTTP Server"},
		{"ABCmouse", "AB Cmouse"}, // ambiguous with HTTPServer; the whole name is indexed too
		{"AI2sql", "AI 2 sql"},
		{"web3", "web 3"},
		{"PDF&URLTool", "PDF&URL Tool"},
		{"x", "x"},
		{"", ""},
	} {
		t.Run(tt.in, func(t *testing.T) {
			if got := nameWords(tt.in); got != tt.want {
				t.Errorf("nameWords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func tool(ns, name, desc string, mod ...func(*v1alpha1.Tool)) Entry {
	t := v1alpha1.Tool{Namespace: ns, Name: name, Description: desc}
	for _, m := range mod {
		m(&t)
	}
	return Entry{Source: "src", Tool: t}
}

func examples(e ...string) func(*v1alpha1.Tool) {
	return func(t *v1alpha1.Tool) { t.Examples = e }
}

func antiPatterns(a ...string) func(*v1alpha1.Tool) {
	return func(t *v1alpha1.Tool) { t.AntiPatterns = a }
}

var billing = []Entry{
	tool("billing.invoices", "create_invoice", "Create an invoice for a customer and send it by e-mail.",
		examples("bill ACME 300 euros for March", "charge the customer for the consulting hours"),
		antiPatterns("show me last month's invoices")),
	tool("billing.invoices", "list_invoices", "List the invoices of a customer, newest first."),
	tool("billing.payments", "refundPayment", "Give money back to a customer for a payment."),
	tool("", "web_search", "Search the web and return the top pages."),
	tool("crm.contacts", "get-contact", "Look up a contact by e-mail address."),
}

func ids(ix *Index, hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, ix.Entry(h.Entry).Tool.ID())
	}
	return out
}

func TestSearchRanks(t *testing.T) {
	ix := NewIndex(billing, Options{})
	for _, tt := range []struct {
		name, query string
		first       string
	}{
		{"description words", "send an invoice by e-mail", "billing.invoices.create_invoice"},
		{"camel-case name words", "refund a payment", "billing.payments.refundPayment"},
		{"kebab-case name words", "get contact", "crm.contacts.get-contact"},
		{"namespace words", "crm contacts", "crm.contacts.get-contact"},
		{"an example the description lacks", "charge the consulting hours", "billing.invoices.create_invoice"},
		{"example beats a plain description match", "bill ACME for March", "billing.invoices.create_invoice"},
		{"anti-pattern sends the question elsewhere", "show me last month's invoices", "billing.invoices.list_invoices"},
		{"whole name", "web_search for cats", "web_search"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits := ix.Search(tt.query, 3, nil)
			if got := ids(ix, hits); len(got) == 0 || got[0] != tt.first {
				t.Errorf("Search(%q) = %v, want %s first", tt.query, got, tt.first)
			}
		})
	}
}

func TestAntiPatternDemotes(t *testing.T) {
	// The same catalog without the anti-pattern ranks create_invoice first
	// for its anti-pattern question: the penalty is what moves it.
	plain := slices.Clone(billing)
	plain[0].Tool.AntiPatterns = nil
	q := "show me last month's invoices"
	without := NewIndex(plain, Options{}).Search(q, 5, nil)
	ix := NewIndex(billing, Options{})
	with := ix.Search(q, 5, nil)
	score := func(hits []Hit, entry int) float64 {
		for _, h := range hits {
			if h.Entry == entry {
				return h.Score
			}
		}
		return 0
	}
	if a, b := score(with, 0), score(without, 0); !(a < b) {
		t.Errorf("create_invoice scores %v with its anti-pattern, %v without; want lower with", a, b)
	}
	// A question that only resembles the anti-pattern in part is not
	// dropped: the tool keeps evidence it earned from its description.
	if hits := ix.Search("create an invoice for last month", 5, nil); len(hits) == 0 || hits[0].Entry != 0 {
		t.Errorf("create an invoice for last month: %v, want create_invoice first", ids(ix, hits))
	}
}

func TestSearchFiltersAndBounds(t *testing.T) {
	ix := NewIndex(billing, Options{})
	t.Run("allowed hides tools", func(t *testing.T) {
		allowed := []bool{false, true, true, true, true}
		for _, h := range ix.Search("create an invoice for a customer", 10, allowed) {
			if h.Entry == 0 {
				t.Fatalf("denied tool returned: %v", ids(ix, []Hit{h}))
			}
		}
	})
	t.Run("a short mask allows nothing past its end", func(t *testing.T) {
		if got := ids(ix, ix.Search("contact e-mail address", 10, []bool{true})); slices.Contains(got, "crm.contacts.get-contact") {
			t.Errorf("tool past the mask returned: %v", got)
		}
	})
	t.Run("no evidence, no hits", func(t *testing.T) {
		if hits := ix.Search("zebra xylophone", 10, nil); len(hits) != 0 {
			t.Errorf("hits for unknown words: %v", ids(ix, hits))
		}
		if hits := ix.Search("the of and", 10, nil); len(hits) != 0 {
			t.Errorf("hits for stopwords: %v", ids(ix, hits))
		}
	})
	t.Run("k bounds the hits", func(t *testing.T) {
		if n := len(ix.Search("customer invoice payment contact", 2, nil)); n != 2 {
			t.Errorf("k=2 gave %d hits", n)
		}
		if n := len(ix.Search("customer", 0, nil)); n != 0 {
			t.Errorf("k=0 gave %d hits", n)
		}
	})
	t.Run("empty catalog", func(t *testing.T) {
		if hits := NewIndex(nil, Options{}).Search("invoice", 5, nil); len(hits) != 0 {
			t.Errorf("hits from an empty catalog: %v", hits)
		}
	})
}

func TestSearchTiesAndDeterminism(t *testing.T) {
	// Equal tools in two sources and under two names: score ties break by
	// source, then id, whatever the input order.
	entries := []Entry{
		{Source: "b", Tool: v1alpha1.Tool{Name: "alpha", Description: "Convert currency."}},
		{Source: "a", Tool: v1alpha1.Tool{Name: "beta", Description: "Convert currency."}},
		{Source: "a", Tool: v1alpha1.Tool{Name: "alpha", Description: "Convert currency."}},
	}
	ix := NewIndex(entries, Options{})
	hits := ix.Search("convert currency", 5, nil)
	var got []string
	for _, h := range hits {
		got = append(got, entries[h.Entry].Source+"/"+entries[h.Entry].Tool.Name)
	}
	if want := []string{"a/alpha", "a/beta", "b/alpha"}; !slices.Equal(got, want) {
		t.Errorf("tie order %v, want %v", got, want)
	}
	if hits[0].Score != hits[2].Score {
		t.Errorf("scores differ: %v", hits)
	}
}

func TestSearchConcurrent(t *testing.T) {
	ix := NewIndex(genCatalog(2000, 5), Options{})
	queries := []string{"create a stripe invoice", "list kubernetes pods", "archive old slack channel", "export hr employee"}
	want := make([][]Hit, len(queries))
	for i, q := range queries {
		want[i] = ix.Search(q, 10, nil)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				q := (w + i) % len(queries)
				if got := ix.Search(queries[q], 10, nil); !reflect.DeepEqual(got, want[q]) {
					errs <- fmt.Sprintf("%q: %v, want %v", queries[q], got, want[q])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestGeneratedCatalogFindsItsTools(t *testing.T) {
	entries := genCatalog(10000, 1)
	ix := NewIndex(entries, Options{})
	found := 0
	for i := 0; i < len(entries); i += 97 {
		tl := &entries[i].Tool
		hits := ix.Search(tl.Examples[0], 10, nil)
		for _, h := range hits {
			if h.Entry == i || ix.Entry(h.Entry).Tool.Description == tl.Description {
				found++
				break
			}
		}
	}
	// Many generated tools share an example text; still, the tool or one
	// with its description should be in the top 10 for most.
	if total := (len(entries) + 96) / 97; found < total*8/10 {
		t.Errorf("%d of %d example questions find their tool in the top 10", found, total)
	}
}
