package eval

import (
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
	var a ToolAccumulator
	// q1: the relevant tool second. q2: one of two relevant tools first,
	// the other sixth. q3: nothing relevant, skipped.
	a.Add([]string{"b", "a", "c"}, 0.95, map[string]int{"a": 1}, 10*time.Microsecond)
	a.Add([]string{"a", "c", "d", "e", "f", "b"}, 0.5, map[string]int{"a": 1, "b": 1}, 30*time.Microsecond)
	a.Add([]string{"a"}, 0.99, map[string]int{"a": 0}, time.Second)
	r := a.Report()
	// By hand: recall@1 (0 + 1/2)/2; @3 and @5 (1 + 1/2)/2; @10 1.
	// nDCG@5: q1 1/log2(3) = 0.6309; q2 1 / (1 + 1/log2(3)) = 0.6131.
	want := ToolReport{Queries: 2, Recall1: 0.25, Recall3: 0.75, Recall5: 0.75, Recall10: 1, NDCG5: 0.622,
		Latency: Latency{P50: 10, P99: 30}}
	r.Calibration, want.Calibration = nil, nil
	if !reflect.DeepEqual(r, want) {
		t.Errorf("report %+v\nwant   %+v", r, want)
	}
	bands := a.Report().Calibration
	if len(bands) != len(confidenceBands) {
		t.Fatalf("%d bands", len(bands))
	}
	for _, b := range bands {
		switch b.Min {
		case 0.9:
			if b.Queries != 1 || b.Top1Relevant != 0 || b.Max != 1 {
				t.Errorf("band %+v, want 1 query, none relevant", b)
			}
		case 0.4:
			if b.Queries != 1 || b.Top1Relevant != 1 {
				t.Errorf("band %+v, want 1 query, relevant", b)
			}
		default:
			if b.Queries != 0 {
				t.Errorf("band %+v, want empty", b)
			}
		}
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
	// Without examples q3 finds nothing: recall 2/3 at every depth.
	r := Tools(ds, nil, tools.Options{})
	if r.Queries != 3 || r.Tools != 3 || math.Abs(r.Recall1-0.6667) > 1e-9 || math.Abs(r.Recall10-0.6667) > 1e-9 {
		t.Errorf("without examples: %+v", r)
	}
	// An example gives q3 its answer.
	ex := []ToolExample{{"charge ACME 300 euros", "billing.invoices.create"}}
	r = Tools(ds, ex, tools.Options{})
	if r.Examples != 1 || r.Recall1 != 1 || r.NDCG5 != 1 {
		t.Errorf("with examples: %+v", r)
	}
}
