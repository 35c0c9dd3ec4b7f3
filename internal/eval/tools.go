package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/learning"
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
// are means over the evaluated queries, rounded to 4 decimals. A card counts
// as a relevant tool when its tool or one of its near-duplicates (also) is.
type ToolReport struct {
	Dataset  string `json:"dataset"`
	Split    string `json:"split"`
	Tools    int    `json:"tools"`
	Examples int    `json:"examples"`
	// Outcomes is the number of outcomes learned (--outcomes).
	Outcomes int     `json:"outcomes,omitempty"`
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
	// ECE is the expected calibration error of the first card's
	// confidence as the chance that it is relevant: ECEBinsTools
	// equal-width bins.
	ECE float64 `json:"ece"`
	// Correlation is Pearson's r between the first card's confidence and
	// whether it is relevant (point-biserial).
	Correlation float64 `json:"confidence_correlation"`
	// ReliabilityCorrelation is Pearson's r between the bands' mean
	// confidence and their share relevant, each band weighted by its
	// queries: whether a surer band is right more often.
	ReliabilityCorrelation float64 `json:"reliability_correlation"`
	// HighConfidenceQueries are the queries whose first card's confidence
	// is at least HighConfidence, HighConfidenceRight the share of them
	// whose first card is relevant (0 when none).
	HighConfidenceQueries int     `json:"high_confidence_queries"`
	HighConfidenceRight   float64 `json:"high_confidence_right"`
	// MinConfidence is the gate the next two fields are measured at, and
	// KeptRight the share of the queries whose first card is relevant that
	// it keeps (confidence at least MinConfidence).
	MinConfidence float64 `json:"min_confidence"`
	KeptRight     float64 `json:"kept_right"`
	// Returned is the shortlist an adaptive router returns.
	Returned ReturnedSet `json:"returned"`
	// Oracle bounds what any rule that returns a prefix of the ranking can
	// reach.
	Oracle OracleSet `json:"oracle"`
	// Offtopic is measured on questions no tool fits (--offtopic).
	Offtopic *OfftopicReport `json:"offtopic,omitempty"`
}

// ECEBinsTools is the number of bins of ToolReport.ECE.
const ECEBinsTools = 10

// ReturnedSet is the quality of the cards a router with
// spec.tools.adaptive returns: of the first TopK, those Rule keeps
// (Utility with RecallWeight, Relative with RelativeCut).
type ReturnedSet struct {
	TopK         int     `json:"top_k"`
	Rule         string  `json:"rule"`
	RecallWeight float64 `json:"recall_weight"`
	RelativeCut  float64 `json:"relative_cut"`
	// Precision is the mean share of a query's cards that are relevant,
	// Recall the mean share of its relevant tools the cards hold.
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	// Cards is the mean number of cards.
	Cards float64 `json:"cards"`
}

// HighConfidence is the first card's confidence from which ToolReport
// counts a query as a confident one (the seed's "high confidence").
const HighConfidence = 0.8

// OracleRecall is the mean recall at which ToolReport.Oracle is measured:
// the target.
const OracleRecall = 0.9

// OracleSet is the best mean precision of returned sets that are a
// prefix of each query's ranking (the first k cards, k from 1 to the
// cards ranked, chosen per query by one who knows the relevant tools) at a
// mean recall of at least OracleRecall: an upper bound for any rule that
// cuts the ranking, adaptive or not. Recall is the mean recall of that
// choice (OracleRecall when the bound interpolates between the two
// Lagrangian optima around it, an upper bound of the exact optimum; below
// OracleRecall when no prefixes reach it, and then the choice with the
// most recall).
type OracleSet struct {
	Recall    float64 `json:"recall"`
	Precision float64 `json:"precision"`
	Cards     float64 `json:"cards"`
}

// OfftopicReport is how the first card's confidence treats questions no
// tool fits.
type OfftopicReport struct {
	Queries int `json:"queries"`
	// BelowMinConfidence is the share of them with no card, or whose first
	// card's confidence is under the gate (the fallback tools join).
	BelowMinConfidence float64 `json:"below_min_confidence"`
	// MeanConfidence is the mean confidence of their first cards (0 when
	// none).
	MeanConfidence float64 `json:"mean_confidence"`
}

// ConfidenceBand is the queries whose top tool's confidence is in [Min,
// Max) (the last band includes 1).
type ConfidenceBand struct {
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Queries int     `json:"queries"`
	// MeanConfidence is their first cards' mean confidence (0 when none).
	MeanConfidence float64 `json:"mean_confidence"`
	// Top1Relevant is the share of those queries whose top tool is relevant.
	Top1Relevant float64 `json:"top1_relevant"`
}

// confidenceBands are the bands' lower bounds.
var confidenceBands = []float64{0, 0.2, 0.4, 0.6, 0.8, 0.9}

// RankedCard is a card of a shortlist as eval tools scores it.
type RankedCard struct {
	// IDs are the card's tool, then its near-duplicates.
	IDs        []string
	Confidence float64
}

// ToolAccumulator collects per-query results; set MinConfidence before
// adding. It is not safe for concurrent use.
type ToolAccumulator struct {
	MinConfidence float64

	n                      int
	r1, r3, r5, r10, ndcg5 float64
	latencies              []time.Duration
	bandN, bandHit         [6]int
	bandConf               [6]float64
	highN, highRight       int
	prefixes               [][]prefix
	bins                   calibrationBins
	corr                   Pearson
	right, kept            int
	precision, recall      float64
	cards                  int
	off                    OfftopicReport
	offBelow               int
	offConf                float64
	ranked                 []string
}

// Add records one query's cards, best first, the cards an adaptive router
// returns (a subset, in the same order), and the search latency. Queries
// without a relevant tool are skipped.
func (a *ToolAccumulator) Add(cards, returned []RankedCard, rel map[string]int, latency time.Duration) {
	if !hasRelevant(rel) {
		return
	}
	if a.bins.n == nil {
		a.bins = newCalibrationBins(ECEBinsTools)
	}
	a.n++
	// A card stands for the first relevant tool it holds.
	ranked := a.ranked[:0]
	for _, c := range cards {
		id := c.IDs[0]
		for _, o := range c.IDs {
			if rel[o] > 0 {
				id = o
				break
			}
		}
		ranked = append(ranked, id)
	}
	a.ranked = ranked
	a.r1 += Recall(ranked, rel, 1)
	a.r3 += Recall(ranked, rel, 3)
	a.r5 += Recall(ranked, rel, 5)
	a.r10 += Recall(ranked, rel, 10)
	a.ndcg5 += NDCG(ranked, rel, 5)
	a.latencies = append(a.latencies, latency)
	top := 0.0
	right := false
	if len(cards) > 0 {
		top = cards[0].Confidence
		right = rel[ranked[0]] > 0
		b := 0
		for i, lo := range confidenceBands {
			if top >= lo {
				b = i
			}
		}
		a.bandN[b]++
		a.bandConf[b] += top
		if right {
			a.bandHit[b]++
		}
		if top >= HighConfidence {
			a.highN++
			if right {
				a.highRight++
			}
		}
	}
	a.bins.add(top, right)
	a.corr.Add(top, map[bool]float64{true: 1}[right])
	if right {
		a.right++
		if top >= a.MinConfidence {
			a.kept++
		}
	}
	a.addReturned(returned, rel)
	a.addPrefixes(cards, rel)
}

// prefix is the precision and recall of a query's first cards.
type prefix struct {
	precision, recall float64
	cards             int
}

// addPrefixes records the precision and recall of every prefix of cards
// (at least one card; none when there are no cards) for the oracle.
func (a *ToolAccumulator) addPrefixes(cards []RankedCard, rel map[string]int) {
	if len(cards) == 0 {
		a.prefixes = append(a.prefixes, []prefix{{}})
		return
	}
	ps := make([]prefix, len(cards))
	for k := range cards {
		p, r := setScore(cards[:k+1], rel)
		ps[k] = prefix{p, r, k + 1}
	}
	a.prefixes = append(a.prefixes, ps)
}

// oracle is the OracleSet of the prefixes recorded. Choosing per query the
// prefix that maximises precision + λ·recall gives, for every λ, a point
// on the upper hull of what per-query choices reach; a bisection on λ finds
// the two hull points around OracleRecall.
func (a *ToolAccumulator) oracle() OracleSet {
	n := float64(len(a.prefixes))
	at := func(lambda float64) (p, r, cards float64) {
		for _, ps := range a.prefixes {
			best := 0
			for k := range ps {
				if ps[k].precision+lambda*ps[k].recall > ps[best].precision+lambda*ps[best].recall {
					best = k
				}
			}
			p += ps[best].precision
			r += ps[best].recall
			cards += float64(ps[best].cards)
		}
		return p / n, r / n, cards / n
	}
	set := func(p, r, c float64) OracleSet {
		return OracleSet{Recall: round4(r), Precision: round4(p), Cards: round4(c)}
	}
	if len(a.prefixes) == 0 {
		return OracleSet{}
	}
	// A miss has precision 0, so λ = 0 often reaches the recall already.
	if p, r, c := at(0); r >= OracleRecall {
		return set(p, r, c)
	}
	// At λ = hi any prefix holding more of a query's relevant tools wins
	// (precision is at most 1): the most recall prefixes reach.
	lo, hi := 0.0, 1e6
	if p, r, c := at(hi); r < OracleRecall {
		return set(p, r, c)
	}
	for range 100 {
		mid := (lo + hi) / 2
		if _, r, _ := at(mid); r < OracleRecall {
			lo = mid
		} else {
			hi = mid
		}
	}
	pl, rl, cl := at(lo)
	ph, rh, ch := at(hi)
	t := (OracleRecall - rl) / (rh - rl)
	return set(pl+t*(ph-pl), OracleRecall, cl+t*(ch-cl))
}

// addReturned scores the cards a router returns.
func (a *ToolAccumulator) addReturned(cards []RankedCard, rel map[string]int) {
	a.cards += len(cards)
	p, r := setScore(cards, rel)
	a.precision += p
	a.recall += r
}

// setScore is the share of cards that hold a relevant tool (0 without
// cards) and the share of the relevant tools they hold.
func setScore(cards []RankedCard, rel map[string]int) (precision, recall float64) {
	n := len(cards)
	relevant, found := 0, map[string]bool{}
	for _, c := range cards {
		hit := false
		for _, id := range c.IDs {
			if rel[id] > 0 {
				hit = true
				found[id] = true
			}
		}
		if hit {
			relevant++
		}
	}
	if n > 0 {
		precision = float64(relevant) / float64(n)
	}
	total := 0
	for _, g := range rel {
		if g > 0 {
			total++
		}
	}
	return precision, float64(len(found)) / float64(total)
}

// AddOfftopic records a question no tool fits: its cards, best first.
func (a *ToolAccumulator) AddOfftopic(cards []RankedCard) {
	a.off.Queries++
	top := 0.0
	if len(cards) > 0 {
		top = cards[0].Confidence
	}
	a.offConf += top
	if len(cards) == 0 || top < a.MinConfidence {
		a.offBelow++
	}
}

// Report returns the means, latency percentiles and calibration bands.
func (a *ToolAccumulator) Report() ToolReport {
	r := ToolReport{Queries: a.n, Calibration: []ConfidenceBand{}, MinConfidence: a.MinConfidence}
	for i, lo := range confidenceBands {
		hi := 1.0
		if i+1 < len(confidenceBands) {
			hi = confidenceBands[i+1]
		}
		b := ConfidenceBand{Min: lo, Max: hi, Queries: a.bandN[i]}
		if b.Queries > 0 {
			b.MeanConfidence = round4(a.bandConf[i] / float64(b.Queries))
			b.Top1Relevant = round4(float64(a.bandHit[i]) / float64(b.Queries))
		}
		r.Calibration = append(r.Calibration, b)
	}
	var reliability Pearson
	for i, n := range a.bandN {
		if n > 0 {
			reliability.AddWeighted(a.bandConf[i]/float64(n), float64(a.bandHit[i])/float64(n), float64(n))
		}
	}
	r.ReliabilityCorrelation = reliability.R()
	r.HighConfidenceQueries = a.highN
	if a.highN > 0 {
		r.HighConfidenceRight = round4(float64(a.highRight) / float64(a.highN))
	}
	if a.off.Queries > 0 {
		off := a.off
		off.BelowMinConfidence = round4(float64(a.offBelow) / float64(off.Queries))
		off.MeanConfidence = round4(a.offConf / float64(off.Queries))
		r.Offtopic = &off
	}
	if a.n == 0 {
		return r
	}
	mean := func(sum float64) float64 { return round4(sum / float64(a.n)) }
	r.Recall1, r.Recall3, r.Recall5, r.Recall10 = mean(a.r1), mean(a.r3), mean(a.r5), mean(a.r10)
	r.NDCG5 = mean(a.ndcg5)
	r.Latency = latencyOf(a.latencies)
	r.ECE = a.bins.ece()
	r.Correlation = a.corr.R()
	if a.right > 0 {
		r.KeptRight = round4(float64(a.kept) / float64(a.right))
	}
	r.Returned.Precision, r.Returned.Recall = mean(a.precision), mean(a.recall)
	r.Returned.Cards = mean(float64(a.cards))
	r.Oracle = a.oracle()
	return r
}

// ToolEval is what Tools measures besides the dataset.
type ToolEval struct {
	// Examples are appended to their tools' examples.
	Examples []ToolExample
	// Outcomes are reported as successes through the router's learning
	// path (learning.Learn, learning.Overlay), at most OutcomesPerTool of
	// each tool (in file order).
	Outcomes        []ToolExample
	OutcomesPerTool int
	// Offtopic are questions no tool fits.
	Offtopic []string
	// Options index the catalog.
	Options tools.Options
	// MinConfidence, TopK and Cut are the router settings the report
	// measures (spec.tools).
	MinConfidence float64
	TopK          int
	Cut           tools.Cut
}

// Tools ranks the catalog of ds (with examples) for every query of the
// split, and for the off-topic questions, and reports the metrics.
func Tools(ds *Dataset, e ToolEval) (ToolReport, error) {
	entries := ToolCatalog(ds, e.Examples)
	ix := tools.NewIndex(entries, e.Options)
	learned, n, err := learnOutcomes(ix, entries, e.Outcomes, e.OutcomesPerTool)
	if err != nil {
		return ToolReport{}, err
	}
	acc := ToolAccumulator{MinConfidence: e.MinConfidence}
	for _, q := range ds.Queries {
		start := time.Now()
		hits := ix.SearchLearned(q.Text, ToolDepth, nil, learned)
		lat := time.Since(start)
		returned := e.Cut.Keep(slices.Clone(hits[:min(e.TopK, len(hits))]))
		acc.Add(RankedCards(ds, hits), RankedCards(ds, returned), ds.Qrels[q.ID], lat)
	}
	for _, q := range e.Offtopic {
		acc.AddOfftopic(RankedCards(ds, ix.SearchLearned(q, ToolDepth, nil, learned)))
	}
	r := acc.Report()
	r.Tools, r.Examples, r.Outcomes = len(entries), len(e.Examples), n
	r.Returned.TopK, r.Returned.RecallWeight, r.Returned.RelativeCut = e.TopK, e.Cut.RecallWeight, e.Cut.RelativeCut
	r.Returned.Rule = string(v1alpha1.AdaptiveRelative)
	if e.Cut.Utility {
		r.Returned.Rule = string(v1alpha1.AdaptiveUtility)
	}
	return r, nil
}

// evalAgent reports the outcomes of eval tools.
const evalAgent = "eval"

// learnOutcomes feeds the first perTool outcomes of each tool to an
// embedded learning store as successes of one agent, the way
// POST /v1/tools/outcomes does, and returns the agent's overlay and the
// outcomes stored.
func learnOutcomes(ix *tools.Index, entries []tools.Entry, outcomes []ToolExample, perTool int) (*tools.Learned, int, error) {
	if len(outcomes) == 0 || perTool <= 0 {
		return nil, 0, nil
	}
	store, _ := learning.NewMemory("")
	ctx := context.Background()
	pos := make(map[string]int, len(entries))
	for i := range entries {
		pos[entries[i].Tool.ID()] = i
	}
	taken := map[string]int{}
	bounds := learning.DefaultBounds
	bounds.PerAgent = max(bounds.PerAgent, perTool*len(entries))
	for _, o := range outcomes {
		if taken[o.Tool] >= perTool {
			continue
		}
		r := learning.Record{Owner: evalAgent, Agent: evalAgent, Source: entries[pos[o.Tool]].Source, Tool: o.Tool, Text: o.Text, Outcome: learning.Success}
		if _, err := learning.Learn(ctx, store, r, bounds); err != nil {
			return nil, 0, fmt.Errorf("outcome for %q: %w", o.Tool, err)
		}
		taken[o.Tool]++
	}
	recs, _ := store.Outcomes(ctx, evalAgent)
	return learning.Overlay(ix, recs, func(_, tool string) (int, bool) {
		i, ok := pos[tool]
		return i, ok
	}), len(recs), nil
}

// RankedCards are the cards of hits by corpus id.
func RankedCards(ds *Dataset, hits []tools.Hit) []RankedCard {
	out := make([]RankedCard, len(hits))
	for i, h := range hits {
		ids := make([]string, 0, 1+len(h.Also))
		ids = append(ids, ds.Corpus[h.Entry].ID)
		for _, o := range h.Also {
			ids = append(ids, ds.Corpus[o].ID)
		}
		out[i] = RankedCard{IDs: ids, Confidence: h.Confidence}
	}
	return out
}

// LoadOfftopic reads {"text"} lines: questions no tool of the catalog fits.
// Errors name the file and line.
func LoadOfftopic(path string) ([]string, error) {
	var out []string
	err := scanLines(path, func(n int, line []byte) error {
		if len(strings.TrimSpace(string(line))) == 0 {
			return nil
		}
		var q struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(line, &q); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if strings.TrimSpace(q.Text) == "" {
			return fmt.Errorf("%s:%d: empty \"text\"", path, n)
		}
		out = append(out, q.Text)
		return nil
	})
	return out, err
}

// ReferenceCopies extends the corpus of ds to n tools the way the
// reference router's benchmark grows its catalog past its 83 tools
// (contextweaver benchmarks/benchmark.py, catalog sizes over the natural
// pool): copy k = 2, 3, ... of every tool in corpus order, until n, has the
// id "<id>.v<k>", the title "<title>_v<k>" and the description followed by
// " (variant k)" (before the ". Tags: ..." of cw-gold's texts). The copies
// are never relevant. It does nothing when the corpus has n tools or more.
func ReferenceCopies(ds *Dataset, n int) {
	base := len(ds.Corpus)
	for k := 2; len(ds.Corpus) < n && base > 0; k++ {
		for _, d := range ds.Corpus[:base] {
			if len(ds.Corpus) == n {
				break
			}
			desc, tags, found := strings.Cut(d.Text, ". Tags: ")
			text := fmt.Sprintf("%s (variant %d)", strings.TrimSuffix(desc, "."), k)
			if found {
				text += ". Tags: " + tags
			}
			ds.Corpus = append(ds.Corpus, Doc{ID: fmt.Sprintf("%s.v%d", d.ID, k), Title: fmt.Sprintf("%s_v%d", d.Title, k), Text: text})
		}
	}
}
