package eval

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/tools"
)

func TestToolAccumulator(t *testing.T) {
	a := ToolAccumulator{MinConfidence: 0.5}
	card := func(conf float64, ids ...string) RankedCard { return RankedCard{IDs: ids, Confidence: conf} }
	// q1: the relevant tool second, the first card sure and wrong; the
	// adaptive set keeps the wrong card only.
	q1 := []RankedCard{card(0.95, "b"), card(0.3, "a"), card(0.1, "c")}
	a.Add(q1, q1[:1], map[string]int{"a": 1}, 10*time.Microsecond)
	// q2: one of two relevant tools first (under the gate), the other
	// sixth; the adaptive set holds it and a wrong card.
	q2 := []RankedCard{card(0.45, "a"), card(0.2, "c"), card(0.1, "d"), card(0.1, "e"), card(0.1, "f"), card(0.05, "b")}
	a.Add(q2, q2[:2], map[string]int{"a": 1, "b": 1}, 30*time.Microsecond)
	// Nothing relevant: skipped.
	a.Add(q1, q1, map[string]int{"a": 0}, time.Second)
	// q3: the relevant tool is the first card's near-duplicate.
	q3 := []RankedCard{card(0.6, "z", "a")}
	a.Add(q3, q3, map[string]int{"a": 1}, 20*time.Microsecond)
	// Off-topic: no card, a confident card, a weak card.
	a.AddOfftopic(nil)
	a.AddOfftopic([]RankedCard{card(0.7, "a")})
	a.AddOfftopic([]RankedCard{card(0.2, "a"), card(0.1, "b")})
	r := a.Report()
	// By hand: recall@1 (0 + 1/2 + 1)/3; @3 and @5 (1 + 1/2 + 1)/3; @10 1.
	// nDCG@5: q1 1/log2(3) = 0.6309; q2 1 / (1 + 1/log2(3)) = 0.6131; q3 1.
	// ECE: one query per bin, |0 − 0.95|, |1 − 0.45|, |1 − 0.6|: 1.9/3.
	// Correlation of (0.95, 0.45, 0.6) and (0, 1, 1): −0.2833/√(0.1317·0.6667).
	// One query per band: the reliability correlation is the same. Only q1
	// is confident (≥ 0.8), and wrong.
	// Kept: q3 of q2 and q3. Returned: precision (0 + 1/2 + 1)/3, recall
	// (0 + 1/2 + 1)/3, cards 4/3.
	// Oracle: the best precision alone takes 2, 1, 1 cards (recall 5/6,
	// precision 5/6); all of q2's six cards reach recall 1 at precision
	// (1/2 + 1/3 + 1)/3 and 3 cards; 0.9 is 0.4 of the way.
	want := ToolReport{Queries: 3, Recall1: 0.5, Recall3: 0.8333, Recall5: 0.8333, Recall10: 1, NDCG5: 0.748,
		Latency: Latency{P50: 20, P99: 30}, ECE: 0.6333, Correlation: -0.9563, ReliabilityCorrelation: -0.9563,
		HighConfidenceQueries: 1, HighConfidenceRight: 0, MinConfidence: 0.5, KeptRight: 0.5,
		Returned: ReturnedSet{Precision: 0.5, Recall: 0.5, Cards: 1.3333},
		Oracle:   OracleSet{Recall: 0.9, Precision: 0.7444, Cards: 2},
		Offtopic: &OfftopicReport{Queries: 3, BelowMinConfidence: 0.6667, MeanConfidence: 0.3}}
	bands := r.Calibration
	r.Calibration = nil
	if !reflect.DeepEqual(r, want) {
		t.Errorf("report %+v\nwant   %+v", r, want)
	}
	if r.Offtopic != nil && !reflect.DeepEqual(*r.Offtopic, *want.Offtopic) {
		t.Errorf("off-topic %+v, want %+v", *r.Offtopic, *want.Offtopic)
	}
	if len(bands) != len(confidenceBands) {
		t.Fatalf("%d bands", len(bands))
	}
	for _, b := range bands {
		t.Run(fmt.Sprint(b.Min), func(t *testing.T) {
			want := map[float64]ConfidenceBand{
				0.9: {Min: 0.9, Max: 1, Queries: 1, MeanConfidence: 0.95, Top1Relevant: 0},
				0.4: {Min: 0.4, Max: 0.6, Queries: 1, MeanConfidence: 0.45, Top1Relevant: 1},
				0.6: {Min: 0.6, Max: 0.8, Queries: 1, MeanConfidence: 0.6, Top1Relevant: 1},
			}[b.Min]
			want.Min = b.Min
			if want.Max == 0 {
				want.Max = b.Max
			}
			if b != want {
				t.Errorf("band %+v, want %+v", b, want)
			}
		})
	}
}

// TestToolAccumulatorSeedCriteria checks the seed's confidence criteria
// (the share right of confident first cards, the reliability correlation
// over bands) and the oracle against sums by hand.
func TestToolAccumulatorSeedCriteria(t *testing.T) {
	card := func(conf float64, ids ...string) RankedCard { return RankedCard{IDs: ids, Confidence: conf} }
	rel := map[string]int{"a": 1}
	type query struct {
		conf float64
		rank int // of "a", from 0
	}
	tests := []struct {
		name        string
		queries     []query
		multi       bool
		none        int // queries without cards
		reliability float64
		high        int
		highRight   float64
		oracle      OracleSet
	}{{
		// Bands (mean confidence, share right, queries): (0.3, 1/2, 2),
		// (0.5, 0, 1), (0.95, 3/4, 4); weighted Pearson 0.6577. The oracle
		// takes "a" wherever it is: precision (4 + 2·1/2 + 1/3)/7, cards
		// (4 + 2·2 + 3)/7, recall 1.
		name:        "single",
		queries:     []query{{0.95, 0}, {0.95, 0}, {0.95, 0}, {0.95, 1}, {0.3, 0}, {0.3, 1}, {0.5, 2}},
		reliability: 0.6577, high: 4, highRight: 0.75,
		oracle: OracleSet{Recall: 1, Precision: 0.7619, Cards: 1.5714},
	}, {
		// "a" first, then "a" first of {a, b} with b fourth: the best
		// precision alone (1, 1) has recall 3/4; b's four cards give recall
		// 1 at precision 3/4; 0.9 is 0.6 of the way: precision 0.85, cards
		// 1 + 0.6·1.5.
		name: "multi", multi: true,
		queries:     []query{{0.9, 0}},
		reliability: 0, high: 2, highRight: 1,
		oracle: OracleSet{Recall: 0.9, Precision: 0.85, Cards: 1.9},
	}, {
		// A query without cards returns none, whatever the oracle: "a"
		// first in one query of two, the other without cards, reaches
		// recall 1/2 at 1/2 a card.
		name:    "no cards",
		queries: []query{{0.9, 0}}, none: 1,
		reliability: 0, high: 1, highRight: 1,
		oracle: OracleSet{Recall: 0.5, Precision: 0.5, Cards: 0.5},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a ToolAccumulator
			for range tt.none {
				a.Add(nil, nil, rel, time.Microsecond)
			}
			for _, q := range tt.queries {
				cards := []RankedCard{card(q.conf, "x"), card(q.conf/2, "y"), card(q.conf/3, "z")}
				cards[q.rank].IDs = []string{"a"}
				a.Add(cards, cards[:1], rel, time.Microsecond)
			}
			if tt.multi {
				cards := []RankedCard{card(0.85, "a"), card(0.3, "c"), card(0.2, "d"), card(0.1, "b")}
				a.Add(cards, cards[:1], map[string]int{"a": 1, "b": 1}, time.Microsecond)
			}
			r := a.Report()
			if r.ReliabilityCorrelation != tt.reliability || r.HighConfidenceQueries != tt.high || r.HighConfidenceRight != tt.highRight {
				t.Errorf("reliability %v, high %d right %v; want %v, %d, %v", r.ReliabilityCorrelation, r.HighConfidenceQueries, r.HighConfidenceRight, tt.reliability, tt.high, tt.highRight)
			}
			if r.Oracle != tt.oracle {
				t.Errorf("oracle %+v, want %+v", r.Oracle, tt.oracle)
			}
		})
	}
}

func TestToolCatalog(t *testing.T) {
	ds := &Dataset{Corpus: []Doc{
		{ID: "billing.invoices.create", Title: "invoices_create", Text: "Create an invoice."},
		{ID: "WeatherTool", Title: "WeatherTool", Text: "Weather forecasts."},
		{ID: "crm.find", Title: "Contact finder", Text: "Find a contact."},
	}}
	entries := ToolCatalog(ds, []ToolExample{{"bill ACME", "billing.invoices.create"}, {"will it rain", "WeatherTool"}, {"invoice March", "billing.invoices.create"}})
	for _, tt := range []struct {
		i                  int
		ns, name, desc, id string
		examples           []string
	}{
		{0, "billing.invoices", "create", "Create an invoice.", "billing.invoices.create", []string{"bill ACME", "invoice March"}},
		{1, "", "WeatherTool", "Weather forecasts.", "WeatherTool", []string{"will it rain"}},
		// A title with words the id lacks becomes evidence.
		{2, "crm", "find", "Contact finder. Find a contact.", "crm.find", nil},
	} {
		t.Run(tt.id, func(t *testing.T) {
			tl := entries[tt.i].Tool
			if tl.Namespace != tt.ns || tl.Name != tt.name || tl.Description != tt.desc || tl.ID() != tt.id || !slices.Equal(tl.Examples, tt.examples) {
				t.Errorf("tool %+v", tl)
			}
		})
	}
}

func TestLoadToolExamples(t *testing.T) {
	ds := &Dataset{Corpus: []Doc{{ID: "a"}, {ID: "b"}}}
	good := `{"text": "first", "tool": "a"}` + "\n\n" + `{"text": "second", "tool": "b"}` + "\n"
	path := filepath.Join(writeTree(t, map[string]string{"examples.jsonl": good}), "examples.jsonl")
	got, err := LoadToolExamples(path, ds)
	if err != nil || !slices.Equal(got, []ToolExample{{"first", "a"}, {"second", "b"}}) {
		t.Fatalf("LoadToolExamples = %v, %v", got, err)
	}
	for _, tt := range []struct {
		name, line, want string
	}{
		{"unknown tool", `{"text": "x", "tool": "zzz"}`, `:2: tool "zzz" is not in the corpus`},
		{"missing tool", `{"text": "x"}`, `:2: missing "tool"`},
		{"empty text", `{"text": " ", "tool": "a"}`, `:2: empty "text"`},
		{"not JSON", `{"text": `, `:2: unexpected end of JSON input`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := writeTree(t, map[string]string{"examples.jsonl": `{"text": "ok", "tool": "a"}` + "\n" + tt.line + "\n"})
			_, err := LoadToolExamples(filepath.Join(d, "examples.jsonl"), ds)
			if err == nil || !strings.Contains(err.Error(), "examples.jsonl"+tt.want) {
				t.Errorf("error %v, want it to contain %q", err, "examples.jsonl"+tt.want)
			}
		})
	}
	if _, err := LoadToolExamples(path+".missing", ds); err == nil || !strings.Contains(err.Error(), "examples.jsonl.missing") {
		t.Errorf("missing file: %v", err)
	}
}

// TestToolsOnGeneratedSet runs the whole evaluation on a small set whose
// answers are known.
func TestToolsOnGeneratedSet(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"corpus.jsonl": `{"_id": "billing.invoices.create", "title": "invoices_create", "text": "Create an invoice for a customer."}
{"_id": "billing.invoices.list", "title": "invoices_list", "text": "List the invoices of a customer."}
{"_id": "web.search", "title": "search", "text": "Search the web for pages."}
`,
		"queries.jsonl": `{"_id": "q1", "text": "create a new invoice"}
{"_id": "q2", "text": "search the web"}
{"_id": "q3", "text": "charge ACME"}
`,
		"qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\tbilling.invoices.create\t1\nq2\tweb.search\t1\nq3\tbilling.invoices.create\t1\n",
	})
	ds, err := LoadBEIR(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	e := ToolEval{MinConfidence: 0.5, Cut: tools.Cut{RelativeCut: 0.1, RecallWeight: 2}, TopK: 5}
	// Without examples q3 finds nothing: recall 2/3 at every depth.
	r, err := Tools(ds, e)
	if err != nil {
		t.Fatal(err)
	}
	if r.Queries != 3 || r.Tools != 3 || math.Abs(r.Recall1-0.6667) > 1e-9 || math.Abs(r.Recall10-0.6667) > 1e-9 {
		t.Errorf("without examples: %+v", r)
	}
	if r.Returned.TopK != 5 || r.Returned.Rule != "Relative" || r.Returned.RelativeCut != 0.1 || r.Returned.RecallWeight != 2 || r.Returned.Recall != r.Recall5 || r.MinConfidence != 0.5 {
		t.Errorf("settings: %+v", r)
	}
	// An example gives q3 its answer; off-topic questions are measured.
	e.Examples = []ToolExample{{"charge ACME 300 euros", "billing.invoices.create"}}
	e.Offtopic = []string{"what is the capital of peru", "search for the web pages of a customer invoice"}
	if r, err = Tools(ds, e); err != nil {
		t.Fatal(err)
	}
	if r.Examples != 1 || r.Recall1 != 1 || r.NDCG5 != 1 {
		t.Errorf("with examples: %+v", r)
	}
	if o := r.Offtopic; o == nil || o.Queries != 2 || o.BelowMinConfidence < 0.5 {
		t.Errorf("off-topic: %+v (the first has no card)", o)
	}
}

// TestToolsCopiesCollapse grows a catalog with the reference router's
// copies: they crowd the shortlist unless near-duplicates share a card,
// and a copy standing for the relevant tool counts.
func TestToolsCopiesCollapse(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"corpus.jsonl": `{"_id": "fx.convert", "title": "convert", "text": "Convert an amount between currencies. Tags: money, fx"}
{"_id": "fx.rates", "title": "rates", "text": "Show exchange rates of currencies. Tags: money"}
{"_id": "web.search", "title": "search", "text": "Search the web."}
`,
		"queries.jsonl": `{"_id": "q1", "text": "show me exchange rates for currencies"}
`,
		"qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\tfx.rates\t1\n",
	})
	ds, err := LoadBEIR(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	ReferenceCopies(ds, 9)
	if len(ds.Corpus) != 9 {
		t.Fatalf("%d tools", len(ds.Corpus))
	}
	if d := ds.Corpus[4]; d.ID != "fx.rates.v2" || d.Title != "rates_v2" || d.Text != "Show exchange rates of currencies (variant 2). Tags: money" {
		t.Errorf("copy %+v", d)
	}
	if d := ds.Corpus[8]; d.ID != "web.search.v3" || d.Text != "Search the web (variant 3)" {
		t.Errorf("copy %+v", d)
	}
	for _, tt := range []struct {
		name     string
		collapse float64
		cards    float64
	}{
		// The three copies of fx.rates take one card; without collapsing
		// each takes its own.
		{"collapsed", 0.8, 2},
		{"not collapsed", 0, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Tools(ds, ToolEval{Options: tools.Options{Collapse: tt.collapse}, TopK: 10, Cut: tools.Cut{RelativeCut: 0}})
			if err != nil {
				t.Fatal(err)
			}
			if r.Recall1 != 1 || r.Returned.Cards != tt.cards {
				t.Errorf("recall@1 %v, cards %v; want 1, %v", r.Recall1, r.Returned.Cards, tt.cards)
			}
		})
	}
}

func TestLoadOfftopic(t *testing.T) {
	d := writeTree(t, map[string]string{
		"ok.jsonl":    `{"text": "what is the capital of peru"}` + "\n\n" + `{"text": "tell me a joke"}` + "\n",
		"empty.jsonl": `{"text": "a"}` + "\n" + `{"text": "  "}` + "\n",
		"bad.jsonl":   `{"text": 3}` + "\n",
	})
	got, err := LoadOfftopic(filepath.Join(d, "ok.jsonl"))
	if err != nil || !slices.Equal(got, []string{"what is the capital of peru", "tell me a joke"}) {
		t.Errorf("LoadOfftopic = %q, %v", got, err)
	}
	for file, want := range map[string]string{"empty.jsonl": `empty.jsonl:2: empty "text"`, "bad.jsonl": "bad.jsonl:1: json"} {
		if _, err := LoadOfftopic(filepath.Join(d, file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", file, err, want)
		}
	}
}

// When every first card falls in one confidence band there is one point
// and no correlation over the bands to measure: 0, never the rounding
// noise of a variance that is zero (which gave 1.4142 or 0.7071).
func TestReliabilityOneBand(t *testing.T) {
	rel := map[string]int{"a": 1}
	for _, tt := range []struct{ queries, right, step int }{{22, 13, 2}, {31, 13, 1}, {33, 31, 2}, {40, 22, 3}} {
		t.Run(fmt.Sprintf("%d queries %d right", tt.queries, tt.right), func(t *testing.T) {
			var a ToolAccumulator
			for i := range tt.queries {
				id := "x"
				if i < tt.right {
					id = "a"
				}
				// Confidences from 0.41 to 0.59: band [0.4, 0.6).
				cards := []RankedCard{{IDs: []string{id}, Confidence: 0.41 + 0.01*float64(i*tt.step%19)}}
				a.Add(cards, cards, rel, time.Microsecond)
			}
			r := a.Report()
			if n := r.Calibration[2].Queries; n != tt.queries {
				t.Fatalf("band [0.4, 0.6) has %d queries, want all %d", n, tt.queries)
			}
			if r.ReliabilityCorrelation != 0 {
				t.Errorf("reliability_correlation %v over one band, want 0", r.ReliabilityCorrelation)
			}
		})
	}
}
