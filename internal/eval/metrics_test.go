package eval

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"
)

const eps = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) < eps }

// rels builds a relevance map from alternating id, grade pairs.
func rels(pairs ...any) map[string]int {
	m := map[string]int{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i].(string)] = pairs[i+1].(int)
	}
	return m
}

func TestNDCG(t *testing.T) {
	// 1/log2(3) = 0.6309297535714575: the discount at rank 2.
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"perfect single", []string{"a", "b", "c"}, rels("a", 1), 10, 1},
		{"hit at rank 2", []string{"b", "a"}, rels("a", 1), 10, 0.6309297535714575},
		// DCG 1/log2(3) + 1/log2(5) = 1.0616, IDCG 1 + 1/log2(3) = 1.6309.
		{"two hits at ranks 2 and 4", []string{"x", "a", "y", "b"}, rels("a", 1, "b", 1), 10, 0.6509209298071326},
		{"graded ideal order", []string{"a", "b"}, rels("a", 2, "b", 1), 10, 1},
		// DCG 1 + 3/log2(3) = 2.8928, IDCG 3 + 1/log2(3) = 3.6309.
		{"graded swapped", []string{"b", "a"}, rels("a", 2, "b", 1), 10, 0.7967075809905066},
		// IDCG counts all three relevant docs (1 + 0.6309 + 0.5) though only one was returned.
		{"k larger than list", []string{"a"}, rels("a", 1, "b", 1, "c", 1), 10, 0.46927872602275644},
		{"hit beyond k", []string{"b", "c", "a"}, rels("a", 1), 2, 0},
		{"ideal truncated to k", []string{"a", "b"}, rels("a", 1, "b", 1, "c", 1), 2, 1},
		// The repeat of a keeps rank 2 but adds no gain: DCG 1 + 1/log2(4) = 1.5, IDCG 1.6309.
		{"duplicate counted once", []string{"a", "a", "b"}, rels("a", 1, "b", 1), 10, 0.9197207891481876},
		{"empty ranked list", nil, rels("a", 1), 10, 0},
		{"no relevant docs", []string{"a"}, rels("a", 0), 10, 0},
		{"nil relevance", []string{"a"}, nil, 10, 0},
		{"zero grade ignored in ideal", []string{"a"}, rels("a", 1, "b", 0), 10, 1},
		{"k zero", []string{"a"}, rels("a", 1), 0, 0},
		{"k negative", []string{"a"}, rels("a", 1), -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NDCG(tt.ranked, tt.rel, tt.k); !near(got, tt.want) {
				t.Errorf("NDCG(%v, %v, %d) = %.16f, want %.16f", tt.ranked, tt.rel, tt.k, got, tt.want)
			}
		})
	}
}

func TestRecall(t *testing.T) {
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"one of two in top 2", []string{"a", "x", "b"}, rels("a", 1, "b", 1), 2, 0.5},
		{"both in top 3", []string{"a", "x", "b"}, rels("a", 1, "b", 1), 3, 1},
		{"k larger than list", []string{"b"}, rels("a", 1, "b", 1), 100, 0.5},
		{"duplicate counted once", []string{"a", "a"}, rels("a", 1, "b", 1), 5, 0.5},
		{"graded counts once", []string{"a"}, rels("a", 3), 5, 1},
		{"zero grade not in denominator", []string{"a"}, rels("a", 1, "b", 0), 5, 1},
		{"zero grade not a hit", []string{"b"}, rels("a", 1, "b", 0), 5, 0},
		{"empty ranked list", nil, rels("a", 1), 5, 0},
		{"no relevant docs", []string{"a"}, rels("a", 0), 5, 0},
		{"k zero", []string{"a"}, rels("a", 1), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recall(tt.ranked, tt.rel, tt.k); !near(got, tt.want) {
				t.Errorf("Recall(%v, %v, %d) = %v, want %v", tt.ranked, tt.rel, tt.k, got, tt.want)
			}
		})
	}
}

func TestPrecisionAt1(t *testing.T) {
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		want   float64
	}{
		{"top hit relevant", []string{"a", "x"}, rels("a", 1), 1},
		{"top hit irrelevant", []string{"x", "a"}, rels("a", 1), 0},
		{"zero grade", []string{"a"}, rels("a", 0), 0},
		{"empty ranked list", nil, rels("a", 1), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrecisionAt1(tt.ranked, tt.rel); got != tt.want {
				t.Errorf("PrecisionAt1(%v, %v) = %v, want %v", tt.ranked, tt.rel, got, tt.want)
			}
		})
	}
}

func TestMRR(t *testing.T) {
	tests := []struct {
		name   string
		ranked []string
		rel    map[string]int
		k      int
		want   float64
	}{
		{"first", []string{"a", "b"}, rels("a", 1, "b", 1), 10, 1},
		{"third", []string{"x", "y", "a"}, rels("a", 1), 10, 1.0 / 3},
		{"beyond k", []string{"x", "y", "a"}, rels("a", 1), 2, 0},
		{"k larger than list", []string{"x", "a"}, rels("a", 1), 100, 0.5},
		{"repeated miss keeps its rank", []string{"x", "x", "a"}, rels("a", 1), 10, 1.0 / 3},
		{"zero grade skipped", []string{"b", "a"}, rels("a", 1, "b", 0), 10, 0.5},
		{"empty ranked list", nil, rels("a", 1), 10, 0},
		{"k zero", []string{"a"}, rels("a", 1), 0, 0},
		{"k negative", []string{"a"}, rels("a", 1), -3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MRR(tt.ranked, tt.rel, tt.k); !near(got, tt.want) {
				t.Errorf("MRR(%v, %v, %d) = %v, want %v", tt.ranked, tt.rel, tt.k, got, tt.want)
			}
		})
	}
}

// misses returns n distinct irrelevant ids.
func misses(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "miss" + string(rune('A'+i/26)) + string(rune('a'+i%26))
	}
	return out
}

func TestAccumulatorReport(t *testing.T) {
	acc := Accumulator{Dataset: "tiny", Split: "test", Scorer: "bm25"}
	// Per query: nDCG@10, R@5, R@10, R@100, P@1, MRR@10.
	acc.Add([]string{"a"}, rels("a", 1), 10*time.Microsecond)                     // 1, 1, 1, 1, 1, 1
	acc.Add([]string{"x", "a"}, rels("a", 1), 30*time.Microsecond)                // .6309, 1, 1, 1, 0, 1/2
	acc.Add(append(misses(6), "c"), rels("c", 1), 20*time.Microsecond)            // 1/log2(8)=1/3, 0, 1, 1, 0, 1/7
	acc.Add(append(misses(49), "d"), rels("d", 1, "e", 1), 41250*time.Nanosecond) // 0, 0, 0, 1/2, 0, 0
	acc.Add([]string{"z"}, rels("z", 0), time.Second)                             // no relevant doc: skipped
	acc.Add(nil, nil, time.Second)                                                // skipped
	got := acc.Report()
	want := Report{
		Dataset: "tiny", Split: "test", Scorer: "bm25",
		Queries:   4,
		NDCG10:    0.4911, // (1 + 0.6309 + 0.3333) / 4 = 0.49107
		Recall5:   0.5,
		Recall10:  0.75,
		Recall100: 0.875,
		P1:        0.25,
		MRR10:     0.4107, // (1 + 0.5 + 0.142857) / 4 = 0.41071
		// Sorted latencies 10, 20, 30, 41.25 µs: p50 is rank ceil(2) = 2, p99 is rank ceil(3.96) = 4;
		// 41.25 rounds half away from zero to 41.3. The skipped 1 s queries must not appear.
		Latency: Latency{P50: 20, P99: 41.3},
	}
	if got != want {
		t.Errorf("Report() =\n%+v\nwant\n%+v", got, want)
	}
	// Report must not disturb later accumulation.
	acc.Add([]string{"a"}, rels("a", 1), 5*time.Microsecond)
	if got := acc.Report(); got.Queries != 5 || got.P1 != 0.4 || got.Latency.P50 != 20 {
		t.Errorf("after another Add: queries %d p@1 %v p50 %v, want 5 0.4 20", got.Queries, got.P1, got.Latency.P50)
	}
}

func TestAccumulatorEmpty(t *testing.T) {
	acc := Accumulator{Dataset: "d", Split: "s", Scorer: "keyword"}
	acc.Add([]string{"a"}, rels("a", 0), time.Millisecond)
	want := Report{Dataset: "d", Split: "s", Scorer: "keyword"}
	if got := acc.Report(); got != want {
		t.Errorf("Report() = %+v, want %+v", got, want)
	}
}

func TestReportJSONFields(t *testing.T) {
	var acc Accumulator
	acc.Add([]string{"a"}, rels("a", 1), 1500*time.Nanosecond)
	b, err := json.Marshal(acc.Report())
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wantKeys := []string{"dataset", "latency_us", "mrr@10", "ndcg@10", "p@1", "queries", "recall@10", "recall@100", "recall@5", "scorer", "split"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys = %v, want %v", keys, wantKeys)
	}
	lat, ok := obj["latency_us"].(map[string]any)
	if !ok || lat["p50"] != 1.5 || lat["p99"] != 1.5 || len(lat) != 2 {
		t.Errorf("latency_us = %v, want {p50: 1.5, p99: 1.5}", obj["latency_us"])
	}
	if obj["queries"] != 1.0 || obj["ndcg@10"] != 1.0 {
		t.Errorf("queries %v ndcg@10 %v, want 1 1", obj["queries"], obj["ndcg@10"])
	}
}

func TestNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"single p50", []time.Duration{7}, 50, 7},
		{"single p99", []time.Duration{7}, 99, 7},
		{"two p50 takes lower", []time.Duration{1, 2}, 50, 1},
		{"two p99 takes upper", []time.Duration{1, 2}, 99, 2},
		{"hundred p50", hundred, 50, 50},
		{"hundred p99", hundred, 99, 99},
		{"hundred p100", hundred, 100, 100},
		{"three p50 rounds rank up", []time.Duration{1, 2, 3}, 50, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nearestRank(tt.sorted, tt.p); got != tt.want {
				t.Errorf("nearestRank(p%d) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestMicros(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want float64
	}{
		{0, 0},
		{1234 * time.Nanosecond, 1.2},
		{1250 * time.Nanosecond, 1.3},
		{1249 * time.Nanosecond, 1.2},
		{3 * time.Millisecond, 3000},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := micros(tt.d); got != tt.want {
				t.Errorf("micros(%v) = %v, want %v", tt.d, got, tt.want)
			}
		})
	}
}
