package eval

import (
	"math"
	"slices"
	"time"
)

// Depth is the deepest cutoff any reported metric uses (recall@100): rank at least this many docs per query.
const Depth = 100

// The metrics below share these conventions:
//   - a doc is relevant when its grade in rel is > 0;
//   - only the first occurrence of a doc in ranked counts; a repeat keeps its rank position but adds nothing,
//     so a buggy ranker can never score higher by repeating a hit;
//   - k <= 0 and queries without relevant docs score 0.

// NDCG is nDCG@k with gain 2^rel − 1 and a log2(rank+1) discount; the ideal DCG comes from the query's
// relevance grades sorted in descending order, truncated to k.
func NDCG(ranked []string, rel map[string]int, k int) float64 {
	if k <= 0 {
		return 0
	}
	grades := make([]int, 0, len(rel))
	for _, g := range rel {
		if g > 0 {
			grades = append(grades, g)
		}
	}
	if len(grades) == 0 {
		return 0
	}
	slices.Sort(grades)
	slices.Reverse(grades)
	var idcg float64
	for i, g := range grades[:min(k, len(grades))] {
		idcg += gain(g) / discount(i)
	}
	var dcg float64
	var hits []string
	for i, id := range ranked[:min(k, len(ranked))] {
		g := rel[id]
		if g <= 0 || slices.Contains(hits, id) {
			continue
		}
		hits = append(hits, id)
		dcg += gain(g) / discount(i)
	}
	return dcg / idcg
}

// Recall is |relevant ∩ top k| / |relevant|.
func Recall(ranked []string, rel map[string]int, k int) float64 {
	total := 0
	for _, g := range rel {
		if g > 0 {
			total++
		}
	}
	if total == 0 || k <= 0 {
		return 0
	}
	var hits []string
	for _, id := range ranked[:min(k, len(ranked))] {
		if rel[id] > 0 && !slices.Contains(hits, id) {
			hits = append(hits, id)
		}
	}
	return float64(len(hits)) / float64(total)
}

// PrecisionAt1 is 1 when the top-ranked doc is relevant, else 0.
func PrecisionAt1(ranked []string, rel map[string]int) float64 {
	if len(ranked) > 0 && rel[ranked[0]] > 0 {
		return 1
	}
	return 0
}

// MRR is the reciprocal rank of the first relevant doc within the top k (MRR@k), 0 when there is none.
// Repeats need no guard: a repeated doc's first occurrence always comes first.
func MRR(ranked []string, rel map[string]int, k int) float64 {
	for i, id := range ranked[:min(max(k, 0), len(ranked))] {
		if rel[id] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

func gain(grade int) float64 { return math.Exp2(float64(grade)) - 1 }

// discount is the DCG denominator for the 0-based rank i.
func discount(i int) float64 { return math.Log2(float64(i + 2)) }

// Report is the JSON object `contextrouter eval retrieval` prints. Metrics are means over the evaluated
// queries, rounded to 4 decimals.
type Report struct {
	Dataset string `json:"dataset"`
	Split   string `json:"split"`
	Scorer  string `json:"scorer"`
	// Ranking is the strategy when it is not the default relevance (embedding, hybrid).
	Ranking   string  `json:"ranking,omitempty"`
	Queries   int     `json:"queries"`
	NDCG10    float64 `json:"ndcg@10"`
	Recall5   float64 `json:"recall@5"`
	Recall10  float64 `json:"recall@10"`
	Recall100 float64 `json:"recall@100"`
	P1        float64 `json:"p@1"`
	MRR10     float64 `json:"mrr@10"`
	Latency   Latency `json:"latency_us"`
}

// Latency holds per-query latency percentiles in microseconds, rounded to 0.1 µs.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Accumulator collects per-query results and latencies and produces the Report. The zero value is ready to
// use; Dataset, Split and Scorer are copied into the Report as labels. It is not safe for concurrent use.
type Accumulator struct {
	Dataset, Split, Scorer string

	n                                int
	ndcg10, r5, r10, r100, p1, mrr10 float64
	latencies                        []time.Duration
}

// Add records one query's ranking. Queries without a relevant doc are skipped entirely: they would add a
// constant 0 to every metric and say nothing about the ranker, and their latency is not recorded either.
func (a *Accumulator) Add(ranked []string, rel map[string]int, latency time.Duration) {
	if !hasRelevant(rel) {
		return
	}
	a.n++
	a.ndcg10 += NDCG(ranked, rel, 10)
	a.r5 += Recall(ranked, rel, 5)
	a.r10 += Recall(ranked, rel, 10)
	a.r100 += Recall(ranked, rel, 100)
	a.p1 += PrecisionAt1(ranked, rel)
	a.mrr10 += MRR(ranked, rel, 10)
	a.latencies = append(a.latencies, latency)
}

// Report returns the means and latency percentiles of everything added so far; all zero when nothing was.
func (a *Accumulator) Report() Report {
	r := Report{Dataset: a.Dataset, Split: a.Split, Scorer: a.Scorer, Queries: a.n}
	if a.n == 0 {
		return r
	}
	mean := func(sum float64) float64 { return round4(sum / float64(a.n)) }
	r.NDCG10 = mean(a.ndcg10)
	r.Recall5 = mean(a.r5)
	r.Recall10 = mean(a.r10)
	r.Recall100 = mean(a.r100)
	r.P1 = mean(a.p1)
	r.MRR10 = mean(a.mrr10)
	r.Latency = latencyOf(a.latencies)
	return r
}

// hasRelevant reports whether a query has a relevant doc (grade > 0).
func hasRelevant(rel map[string]int) bool {
	for _, g := range rel {
		if g > 0 {
			return true
		}
	}
	return false
}

// latencyOf is the p50 and p99 of a non-empty list of latencies.
func latencyOf(latencies []time.Duration) Latency {
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	return Latency{P50: micros(nearestRank(sorted, 50)), P99: micros(nearestRank(sorted, 99))}
}

// nearestRank is the nearest-rank percentile of an ascending, non-empty slice: the value at 1-based rank
// ceil(p/100 · n). It always returns an observed value, never an interpolation.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// micros converts to microseconds rounded to one decimal.
func micros(d time.Duration) float64 { return math.Round(float64(d.Nanoseconds())/100) / 10 }

// calibrationBins gather confidences and outcomes in equal-width bins over
// [0, 1] for the expected calibration error; the zero value needs bins.
type calibrationBins struct {
	n, right []int
	conf     []float64
	total    int
}

func newCalibrationBins(bins int) calibrationBins {
	return calibrationBins{n: make([]int, bins), right: make([]int, bins), conf: make([]float64, bins)}
}

// add records one confidence and whether what it backs was right.
func (c *calibrationBins) add(confidence float64, right bool) {
	b := max(min(int(confidence*float64(len(c.n))), len(c.n)-1), 0)
	c.n[b]++
	c.conf[b] += confidence
	if right {
		c.right[b]++
	}
	c.total++
}

// ece is Σ over bins of |accuracy − mean confidence| weighted by the bin's
// share of what was added, rounded to 4 decimals.
func (c *calibrationBins) ece() float64 {
	ece := 0.0
	for b, n := range c.n {
		if n == 0 {
			continue
		}
		ece += float64(n) / float64(c.total) * math.Abs(float64(c.right[b])/float64(n)-c.conf[b]/float64(n))
	}
	return round4(ece)
}

// Pearson accumulates Pearson's correlation of pairs (x, y); with y 0 or 1
// it is the point-biserial correlation. It keeps the means and the
// centred sums (Welford), so a side that is constant has a variance of
// exactly 0: n·Σx² − (Σx)² leaves rounding noise there, and r of noise.
type Pearson struct{ n, mx, my, cxx, cyy, cxy float64 }

// Add records the pair (x, y).
func (p *Pearson) Add(x, y float64) { p.AddWeighted(x, y, 1) }

// AddWeighted records the pair w times (w may be fractional, > 0).
func (p *Pearson) AddWeighted(x, y, w float64) {
	p.n += w
	dx, dy := x-p.mx, y-p.my
	p.mx += w * dx / p.n
	p.my += w * dy / p.n
	p.cxx += w * dx * (x - p.mx)
	p.cyy += w * dy * (y - p.my)
	p.cxy += w * dx * (y - p.my)
}

// R is the correlation, rounded to 4 decimals; 0 when either side is constant.
func (p *Pearson) R() float64 {
	if p.cxx <= 0 || p.cyy <= 0 {
		return 0
	}
	return round4(p.cxy / math.Sqrt(p.cxx*p.cyy))
}
