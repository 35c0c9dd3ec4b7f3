package eval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// ToolDepth is how many tools `eval tools` ranks per query: the deepest
// cutoff it reports (recall@10).
const ToolDepth = 10

// ToolExample is one line of an examples file: a question the tool serves.
type ToolExample struct {
	Text string `json:"text"`
	Tool string `json:"tool"`
}

// LoadToolExamples reads {"text", "tool"} lines. Every tool must be a
// corpus id of ds; errors name the file and line.
func LoadToolExamples(path string, ds *Dataset) ([]ToolExample, error) {
	ids := make(map[string]bool, len(ds.Corpus))
	for _, d := range ds.Corpus {
		ids[d.ID] = true
	}
	var out []ToolExample
	err := scanLines(path, func(n int, line []byte) error {
		if len(strings.TrimSpace(string(line))) == 0 {
			return nil
		}
		var e ToolExample
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		switch {
		case strings.TrimSpace(e.Text) == "":
			return fmt.Errorf("%s:%d: empty \"text\"", path, n)
		case e.Tool == "":
			return fmt.Errorf("%s:%d: missing \"tool\"", path, n)
		case !ids[e.Tool]:
			return fmt.Errorf("%s:%d: tool %q is not in the corpus", path, n, e.Tool)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// ToolCatalog makes the corpus a tool catalog: _id is the tool id, split at
// its last "." into namespace and name; text is the description; examples
// are appended to their tools in file order. The title is a display name:
// it becomes evidence (a sentence before the description) only when it
// has words the id lacks.
func ToolCatalog(ds *Dataset, examples []ToolExample) []tools.Entry {
	entries := make([]tools.Entry, len(ds.Corpus))
	pos := make(map[string]int, len(ds.Corpus))
	for i, d := range ds.Corpus {
		t := v1alpha1.Tool{Name: d.ID, Description: d.Text}
		if i := strings.LastIndexByte(d.ID, '.'); i > 0 {
			t.Namespace, t.Name = d.ID[:i], d.ID[i+1:]
		}
		if d.Title != "" && !sameWords(d.Title, d.ID) {
			t.Description = d.Title + ". " + d.Text
		}
		entries[i] = tools.Entry{Source: "catalog", Tool: t}
		pos[d.ID] = i
	}
	for _, e := range examples {
		t := &entries[pos[e.Tool]].Tool
		t.Examples = append(t.Examples, e.Text)
	}
	return entries
}

// sameWords reports whether every word of a (split at "_", "-", "." and
// spaces, case folded) is a word of b.
func sameWords(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
			return r == '_' || r == '-' || r == '.' || r == ' '
		})
	}
	bw := split(b)
	for _, w := range split(a) {
		if !slices.Contains(bw, w) && !strings.Contains(strings.ToLower(b), w) {
			return false
		}
	}
	return true
}

// ToolReport is the JSON object `contextrouter eval tools` prints. Metrics
// are means over the evaluated queries, rounded to 4 decimals.
type ToolReport struct {
	Dataset  string  `json:"dataset"`
	Split    string  `json:"split"`
	Tools    int     `json:"tools"`
	Examples int     `json:"examples"`
	Queries  int     `json:"queries"`
	Recall1  float64 `json:"recall@1"`
	Recall3  float64 `json:"recall@3"`
	Recall5  float64 `json:"recall@5"`
	Recall10 float64 `json:"recall@10"`
	NDCG5    float64 `json:"ndcg@5"`
	Latency  Latency `json:"latency_us"`
	// Calibration says, per confidence band of the top tool, how often it
	// is relevant: what a minConfidence gate would keep and lose.
	Calibration []ConfidenceBand `json:"calibration"`
}

// ConfidenceBand is the queries whose top tool's confidence is in [Min,
// Max) (the last band includes 1).
type ConfidenceBand struct {
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Queries int     `json:"queries"`
	// Top1Relevant is the share of those queries whose top tool is relevant.
	Top1Relevant float64 `json:"top1_relevant"`
}

// confidenceBands are the bands' lower bounds.
var confidenceBands = []float64{0, 0.2, 0.4, 0.6, 0.8, 0.9}

// ToolAccumulator collects per-query results; the zero value is ready to
// use. It is not safe for concurrent use.
type ToolAccumulator struct {
	n                      int
	r1, r3, r5, r10, ndcg5 float64
	latencies              []time.Duration
	bandN, bandHit         [6]int
}

// Add records one query's ranked tool ids, the confidence of the first,
// and the search latency. Queries without a relevant tool are skipped.
func (a *ToolAccumulator) Add(ranked []string, topConfidence float64, rel map[string]int, latency time.Duration) {
	if !hasRelevant(rel) {
		return
	}
	a.n++
	a.r1 += Recall(ranked, rel, 1)
	a.r3 += Recall(ranked, rel, 3)
	a.r5 += Recall(ranked, rel, 5)
	a.r10 += Recall(ranked, rel, 10)
	a.ndcg5 += NDCG(ranked, rel, 5)
	a.latencies = append(a.latencies, latency)
	if len(ranked) > 0 {
		b := 0
		for i, lo := range confidenceBands {
			if topConfidence >= lo {
				b = i
			}
		}
		a.bandN[b]++
		a.bandHit[b] += int(PrecisionAt1(ranked, rel))
	}
}

// Report returns the means, latency percentiles and calibration bands.
func (a *ToolAccumulator) Report() ToolReport {
	r := ToolReport{Queries: a.n, Calibration: []ConfidenceBand{}}
	for i, lo := range confidenceBands {
		hi := 1.0
		if i+1 < len(confidenceBands) {
			hi = confidenceBands[i+1]
		}
		b := ConfidenceBand{Min: lo, Max: hi, Queries: a.bandN[i]}
		if b.Queries > 0 {
			b.Top1Relevant = round4(float64(a.bandHit[i]) / float64(b.Queries))
		}
		r.Calibration = append(r.Calibration, b)
	}
	if a.n == 0 {
		return r
	}
	mean := func(sum float64) float64 { return round4(sum / float64(a.n)) }
	r.Recall1, r.Recall3, r.Recall5, r.Recall10 = mean(a.r1), mean(a.r3), mean(a.r5), mean(a.r10)
	r.NDCG5 = mean(a.ndcg5)
	r.Latency = latencyOf(a.latencies)
	return r
}

// Tools ranks the catalog of ds (with examples) for every query of the
// split and reports the metrics.
func Tools(ds *Dataset, examples []ToolExample, opts tools.Options) ToolReport {
	entries := ToolCatalog(ds, examples)
	ix := tools.NewIndex(entries, opts)
	var acc ToolAccumulator
	ranked := make([]string, 0, ToolDepth)
	for _, q := range ds.Queries {
		start := time.Now()
		hits := ix.Search(q.Text, ToolDepth, nil)
		lat := time.Since(start)
		ranked = ranked[:0]
		conf := 0.0
		for i, h := range hits {
			if i == 0 {
				conf = h.Confidence
			}
			ranked = append(ranked, ds.Corpus[h.Entry].ID)
		}
		acc.Add(ranked, conf, ds.Qrels[q.ID], lat)
	}
	r := acc.Report()
	r.Tools, r.Examples = len(entries), len(examples)
	return r
}
