package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/eval"
	"github.com/contextrouter/contextrouter/internal/index"
	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/textutil"
	"github.com/contextrouter/contextrouter/internal/tools"
)

func newEvalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure quality on public datasets",
	}
	cmd.AddCommand(newEvalRetrievalCommand(), newEvalToolsCommand(), newEvalIntentsCommand(), newEvalRoutesCommand())
	return cmd
}

func newEvalToolsCommand() *cobra.Command {
	var (
		dataset, split, examples, outcomes, offtopic, output string
		copies, perTool                                      int
		f                                                    toolSettingFlags
	)
	cmd := &cobra.Command{
		Use:   "tools --dataset DIR [--split test] [--examples FILE] [--outcomes FILE --outcomes-per-tool K] [--offtopic FILE] [--copies N] [-o text|json]",
		Short: "Tool selection quality (recall, confidence calibration, adaptive shortlists) on a BEIR-layout tool set",
		Long: `eval tools makes corpus.jsonl a tool catalog (_id the tool id, split at its last "." into
namespace and name; text the description), indexes it as the router does, shortlists the top 10 cards
for every query of qrels/SPLIT.tsv, and reports recall@1, @3, @5, @10, nDCG@5, the latency of the
shortlist, how well the first card's confidence is calibrated (per band, ECE, correlation with being
right per query and over the bands, the share right of first cards with confidence >= 0.8, what
minConfidence keeps), the precision and recall of an adaptive shortlist (spec.tools.adaptive, rule
--adaptive-rule), and the oracle: the best
precision at recall >= 0.90 of any rule that returns the first k cards of the ranking. --examples
reads {"text", "tool"} lines and makes them the tools' examples; --outcomes reads the same lines and
reports the first --outcomes-per-tool of each tool as successes through the router's learning path
(learned examples, POST /v1/tools/outcomes) before ranking; --offtopic reads {"text"} lines, questions
no tool fits, and reports how many fall under minConfidence; --copies N grows the catalog to N tools with
the reference router's synthetic copies (<id>.v2, ...).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output: must be text or json, not %q", output)
			}
			settings, err := f.parse()
			if err != nil {
				return err
			}
			if copies < 0 || copies > tools.MaxTools {
				return fmt.Errorf("--copies: %d must be between 0 and %d", copies, tools.MaxTools)
			}
			ds, err := eval.LoadBEIR(dataset, split)
			if err != nil {
				return err
			}
			e := settings
			if examples != "" {
				if e.Examples, err = eval.LoadToolExamples(examples, ds); err != nil {
					return err
				}
			}
			if outcomes != "" {
				if perTool < 1 || perTool > learning.DefaultBounds.PerTool {
					return fmt.Errorf("--outcomes-per-tool: %d must be between 1 and %d", perTool, learning.DefaultBounds.PerTool)
				}
				if e.Outcomes, err = eval.LoadToolExamples(outcomes, ds); err != nil {
					return err
				}
				e.OutcomesPerTool = perTool
			}
			if offtopic != "" {
				if e.Offtopic, err = eval.LoadOfftopic(offtopic); err != nil {
					return err
				}
			}
			eval.ReferenceCopies(ds, copies)
			report, err := eval.Tools(ds, e)
			if err != nil {
				return err
			}
			report.Dataset = filepath.Base(filepath.Clean(dataset))
			report.Split = split
			return writeEvalReport(cmd.OutOrStdout(), output, report, func(w io.Writer) error { return printToolReport(w, report) })
		},
	}
	cmd.Flags().StringVar(&dataset, "dataset", "", "BEIR-layout directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
	cmd.Flags().StringVar(&split, "split", eval.DefaultSplit, "qrels split to evaluate")
	cmd.Flags().StringVar(&examples, "examples", "", `JSON lines {"text", "tool"}: example questions of the tools`)
	cmd.Flags().StringVar(&outcomes, "outcomes", "", `JSON lines {"text", "tool"}: successes reported to the router's learning path (POST /v1/tools/outcomes)`)
	cmd.Flags().IntVar(&perTool, "outcomes-per-tool", 5, "outcomes of --outcomes learned per tool (the first of each, in file order)")
	cmd.Flags().StringVar(&offtopic, "offtopic", "", `JSON lines {"text"}: questions no tool fits`)
	cmd.Flags().IntVar(&copies, "copies", 0, "grow the catalog to this many tools with the reference router's synthetic copies (0: none)")
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("dataset")
	return cmd
}

// toolSettingFlags are the spec.tools settings eval tools measures, with
// the router's defaults.
type toolSettingFlags struct {
	minConfidence, collapse, relativeCut, rule, recallWeight string
	topK                                                     int
}

func (f *toolSettingFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.minConfidence, "min-confidence", v1alpha1.DefaultToolsMinConfidence, "spec.tools.minConfidence: the gate the report measures")
	cmd.Flags().StringVar(&f.collapse, "collapse", v1alpha1.DefaultToolsCollapseThreshold, `spec.tools.collapseThreshold: near-duplicates share a card ("0": never)`)
	cmd.Flags().StringVar(&f.rule, "adaptive-rule", string(v1alpha1.DefaultToolsAdaptiveRule), "spec.tools.adaptive.rule of the adaptive shortlist the report measures: Utility or Relative")
	cmd.Flags().StringVar(&f.recallWeight, "recall-weight", v1alpha1.DefaultToolsRecallWeight, "spec.tools.adaptive.recallWeight (rule Utility)")
	cmd.Flags().StringVar(&f.relativeCut, "relative-cut", v1alpha1.DefaultToolsRelativeCut, "spec.tools.adaptive.relativeCut (rule Relative)")
	cmd.Flags().IntVar(&f.topK, "top-k", int(v1alpha1.DefaultToolsTopK), "spec.tools.topK of the adaptive shortlist the report measures")
}

// parse checks the flags with the router's validation of the fields they
// set (v1alpha1's Validate: no NaN, infinity or exponent passes).
func (f *toolSettingFlags) parse() (eval.ToolEval, error) {
	var e eval.ToolEval
	var r v1alpha1.ContextRouter
	t := &r.Spec.Tools
	t.MinConfidence, t.CollapseThreshold = f.minConfidence, f.collapse
	t.Adaptive.Rule, t.Adaptive.RecallWeight, t.Adaptive.RelativeCut = v1alpha1.AdaptiveRule(f.rule), f.recallWeight, f.relativeCut
	tp := field.NewPath("spec", "tools")
	bad := map[string]string{}
	for _, err := range r.Validate() {
		bad[err.Field] = err.Detail
	}
	for _, d := range []struct {
		path        *field.Path
		flag, value string
		to          *float64
	}{
		{tp.Child("minConfidence"), "--min-confidence", f.minConfidence, &e.MinConfidence},
		{tp.Child("collapseThreshold"), "--collapse", f.collapse, &e.Options.Collapse},
		{tp.Child("adaptive", "recallWeight"), "--recall-weight", f.recallWeight, &e.Cut.RecallWeight},
		{tp.Child("adaptive", "relativeCut"), "--relative-cut", f.relativeCut, &e.Cut.RelativeCut},
	} {
		v, err := strconv.ParseFloat(d.value, 64)
		if msg, ok := bad[d.path.String()]; ok || err != nil {
			return e, fmt.Errorf("%s: %q %s", d.flag, d.value, cmp.Or(msg, "is not a number"))
		}
		*d.to = v
	}
	if msg, ok := bad[tp.Child("adaptive", "rule").String()]; ok || f.rule == "" {
		return e, fmt.Errorf("--adaptive-rule: %q %s", f.rule, cmp.Or(msg, "must not be empty"))
	}
	e.Cut.Utility = v1alpha1.AdaptiveRule(f.rule).Utility()
	if f.topK < 1 || f.topK > engine.MaxToolsPerRequest {
		return e, fmt.Errorf("--top-k: %d must be between 1 and %d", f.topK, engine.MaxToolsPerRequest)
	}
	e.TopK = f.topK
	return e, nil
}

func newEvalIntentsCommand() *cobra.Command {
	var dataset, split, oosLabel, output string
	cmd := &cobra.Command{
		Use:   "intents --dataset DIR [--split test] [--oos-label oos] [-o text|json]",
		Short: "Intent classification quality (accuracy, out-of-scope recall/precision, macro F1, ECE) on an intent set",
		Long: `eval intents trains the intent classifier on DIR/train.jsonl ({"text", "label"} lines),
calibrates it and tunes its out-of-scope threshold on DIR/val.jsonl when present (else calibrates on a
held-out tenth of train), classifies every line of DIR/SPLIT.jsonl and reports accuracy, in-scope
accuracy, out-of-scope recall and precision, macro F1, the expected calibration error (15 equal-width
bins), the classification latency and the training time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output: must be text or json, not %q", output)
			}
			if oosLabel == "" {
				return fmt.Errorf("--oos-label: must not be empty")
			}
			ds, err := eval.LoadIntentDataset(dataset, split)
			if err != nil {
				return err
			}
			report, err := eval.Intents(ds, oosLabel)
			if err != nil {
				return fmt.Errorf("%s: %w", dataset, err)
			}
			report.Dataset = filepath.Base(filepath.Clean(dataset))
			report.Split = split
			return writeEvalReport(cmd.OutOrStdout(), output, report, func(w io.Writer) error { return printIntentReport(w, report) })
		},
	}
	cmd.Flags().StringVar(&dataset, "dataset", "", `directory with train.jsonl, SPLIT.jsonl and optionally val.jsonl ({"text", "label"} lines)`)
	cmd.Flags().StringVar(&split, "split", eval.DefaultSplit, "split to evaluate (SPLIT.jsonl)")
	cmd.Flags().StringVar(&oosLabel, "oos-label", eval.DefaultOOSLabel, "the dataset's out-of-scope label")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagRequired("dataset")
	return cmd
}

// writeEvalReport prints an eval report as indented JSON (-o json) or as
// text.
func writeEvalReport(w io.Writer, output string, report any, text func(io.Writer) error) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return text(w)
}

func printIntentReport(w io.Writer, r eval.IntentReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset:\t%s (split %s)\n", r.Dataset, r.Split)
	fmt.Fprintf(tw, "labels:\t%d (train %d, val %d examples)\n", r.Labels, r.TrainExamples, r.ValExamples)
	fmt.Fprintf(tw, "examples:\t%d (%d in scope, %d %s)\n", r.Examples, r.InScope, r.OutOfScope, r.OOSLabel)
	fmt.Fprintf(tw, "threshold / temperature:\t%.2f / %.4f\n", r.Threshold, r.Temperature)
	fmt.Fprintf(tw, "accuracy:\t%.4f\n", r.Accuracy)
	fmt.Fprintf(tw, "in-scope accuracy:\t%.4f\n", r.InScopeAccuracy)
	if r.OOSRecall != nil {
		fmt.Fprintf(tw, "oos recall / precision:\t%.4f / %.4f\n", *r.OOSRecall, *r.OOSPrecision)
	}
	fmt.Fprintf(tw, "macro F1:\t%.4f\n", r.MacroF1)
	fmt.Fprintf(tw, "ECE (%d bins):\t%.4f\n", r.ECEBins, r.ECE)
	fmt.Fprintf(tw, "latency (µs):\tp50 %.1f  p99 %.1f\n", r.Latency.P50, r.Latency.P99)
	fmt.Fprintf(tw, "train time (s):\t%.2f\n", r.TrainSeconds)
	return tw.Flush()
}

func printToolReport(w io.Writer, r eval.ToolReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset:\t%s (split %s)\n", r.Dataset, r.Split)
	learned := ""
	if r.Outcomes > 0 {
		learned = fmt.Sprintf(", %d learned outcomes", r.Outcomes)
	}
	fmt.Fprintf(tw, "tools:\t%d (%d examples%s)\n", r.Tools, r.Examples, learned)
	fmt.Fprintf(tw, "queries:\t%d\n", r.Queries)
	fmt.Fprintf(tw, "recall@1/3/5/10:\t%.4f  %.4f  %.4f  %.4f\n", r.Recall1, r.Recall3, r.Recall5, r.Recall10)
	fmt.Fprintf(tw, "ndcg@5:\t%.4f\n", r.NDCG5)
	fmt.Fprintf(tw, "latency (µs):\tp50 %.1f  p99 %.1f\n", r.Latency.P50, r.Latency.P99)
	fmt.Fprintf(tw, "top-1 confidence:\tqueries  mean conf.  top-1 relevant\n")
	for _, b := range r.Calibration {
		fmt.Fprintf(tw, "  [%.1f, %.1f%s\t%7d  %9.4f  %.4f\n", b.Min, b.Max, map[bool]string{true: "]", false: ")"}[b.Max == 1], b.Queries, b.MeanConfidence, b.Top1Relevant)
	}
	fmt.Fprintf(tw, "ECE (%d bins):\t%.4f\n", eval.ECEBinsTools, r.ECE)
	fmt.Fprintf(tw, "confidence correlation:\tper query %.4f  over bands %.4f\n", r.Correlation, r.ReliabilityCorrelation)
	fmt.Fprintf(tw, "confident first cards:\t%d with confidence >= %.1f, %.4f right\n", r.HighConfidenceQueries, eval.HighConfidence, r.HighConfidenceRight)
	fmt.Fprintf(tw, "right first cards kept:\t%.4f (minConfidence %.2f)\n", r.KeptRight, r.MinConfidence)
	rule := fmt.Sprintf("relative cut %.2f", r.Returned.RelativeCut)
	if r.Returned.Rule == string(v1alpha1.AdaptiveUtility) {
		rule = fmt.Sprintf("utility, recall weight %.2f", r.Returned.RecallWeight)
	}
	fmt.Fprintf(tw, "adaptive shortlist:\tprecision %.4f  recall %.4f  cards %.2f (top %d, %s)\n",
		r.Returned.Precision, r.Returned.Recall, r.Returned.Cards, r.Returned.TopK, rule)
	fmt.Fprintf(tw, "oracle prefix:\tprecision %.4f  recall %.4f  cards %.2f (best first-k sets at recall >= %.2f)\n",
		r.Oracle.Precision, r.Oracle.Recall, r.Oracle.Cards, eval.OracleRecall)
	if o := r.Offtopic; o != nil {
		fmt.Fprintf(tw, "off-topic:\t%d questions, %.4f under minConfidence, mean confidence %.4f\n", o.Queries, o.BelowMinConfidence, o.MeanConfidence)
	}
	return tw.Flush()
}

func newEvalRetrievalCommand() *cobra.Command {
	var (
		dataset, split, scorer, output string
		params                         = index.DefaultParams
		dense                          denseFlags
	)
	cmd := &cobra.Command{
		Use:   "retrieval --dataset DIR [--split test] [--scorer bm25|keyword] -o json",
		Short: "Retrieval quality (nDCG@10, recall, P@1, MRR) on a BEIR-layout dataset",
		Long: `eval retrieval writes the dataset's corpus as markdown files (one per document, "# title"
then the text), loads them as one Directory source (WholeFile chunking) through the normal engine,
asks every query of the split with a budget large enough for the top 100, and prints one JSON object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "json" {
				return fmt.Errorf("--output: only json is supported")
			}
			var sc v1alpha1.Scorer
			switch strings.ToLower(scorer) {
			case "bm25":
				sc = v1alpha1.ScorerBM25
			case "keyword":
				sc = v1alpha1.ScorerKeyword
			default:
				return fmt.Errorf("--scorer: must be bm25 or keyword, not %q", scorer)
			}
			ranking, err := dense.spec(sc)
			if err != nil {
				return err
			}
			ds, err := eval.LoadBEIR(dataset, split)
			if err != nil {
				return err
			}
			report, err := runRetrieval(cmd, ds, ranking, params)
			if err != nil {
				return err
			}
			report.Dataset = filepath.Base(filepath.Clean(dataset))
			report.Split = split
			report.Scorer = strings.ToLower(scorer)
			if ranking.Strategy != v1alpha1.RankingRelevance {
				report.Ranking = strings.ToLower(string(ranking.Strategy))
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(report)
		},
	}
	cmd.Flags().StringVar(&dataset, "dataset", "", "BEIR-layout directory (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
	cmd.Flags().StringVar(&split, "split", eval.DefaultSplit, "qrels split to evaluate")
	cmd.Flags().StringVar(&scorer, "scorer", "bm25", "scorer: bm25 or keyword")
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json")
	cmd.Flags().Float64Var(&params.K1, "k1", params.K1, "BM25 k1 (for tuning on train/dev splits)")
	cmd.Flags().Float64Var(&params.B, "b", params.B, "BM25 b (for tuning on train/dev splits)")
	cmd.Flags().Float64Var(&params.TitleWeight, "title-weight", params.TitleWeight, "weight of title terms (for tuning on train/dev splits)")
	dense.register(cmd)
	_ = cmd.MarkFlagRequired("dataset")
	return cmd
}

// denseFlags choose the ranking of eval retrieval (api.md §7).
type denseFlags struct {
	ranking, endpoint, model, weight string
	dims, batch                      int32
}

func (f *denseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.ranking, "ranking", "relevance", "ranking strategy: relevance, embedding or hybrid")
	cmd.Flags().StringVar(&f.endpoint, "embedding-endpoint", "", "embeddings URL for --ranking embedding|hybrid, such as http://localhost:11434/v1/embeddings; the key, if any, is read from $"+sources.SecretEnvVar(evalKeySecret, evalKeyKey))
	cmd.Flags().StringVar(&f.model, "embedding-model", "", "embedding model for --ranking embedding|hybrid")
	cmd.Flags().Int32Var(&f.dims, "embedding-dimensions", 0, "expected vector length (0 = the model's)")
	cmd.Flags().Int32Var(&f.batch, "embedding-batch-size", 64, "texts per embeddings request")
	cmd.Flags().StringVar(&f.weight, "dense-weight", v1alpha1.DefaultDenseWeight, "hybrid: share of the dense rank in the fusion, 0 to 1")
}

// The Secret eval retrieval reads the embeddings API key from (its environment variable).
const evalKeySecret, evalKeyKey = "embedding", "apiKey"

// spec is the router's ranking for the flags, checked by the API's own rules.
func (f *denseFlags) spec(scorer v1alpha1.Scorer) (v1alpha1.RankingSpec, error) {
	rs := v1alpha1.RankingSpec{Scorer: scorer, DedupThreshold: "0"}
	switch strings.ToLower(f.ranking) {
	case "relevance":
		rs.Strategy = v1alpha1.RankingRelevance
		return rs, nil
	case "embedding":
		rs.Strategy = v1alpha1.RankingEmbedding
	case "hybrid":
		rs.Strategy = v1alpha1.RankingHybrid
		rs.Hybrid = &v1alpha1.HybridSpec{DenseWeight: f.weight}
	default:
		return rs, fmt.Errorf("--ranking: must be relevance, embedding or hybrid, not %q", f.ranking)
	}
	if f.endpoint == "" || f.model == "" {
		return rs, fmt.Errorf("--ranking %s needs --embedding-endpoint and --embedding-model", f.ranking)
	}
	rs.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: f.endpoint, Model: f.model, BatchSize: f.batch}
	if f.dims != 0 {
		rs.Embedding.Dimensions = &f.dims
	}
	if os.Getenv(sources.SecretEnvVar(evalKeySecret, evalKeyKey)) != "" {
		rs.Embedding.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: evalKeySecret, Key: evalKeyKey}
	}
	r := v1alpha1.ContextRouter{Spec: v1alpha1.ContextRouterSpec{Ranking: rs}}
	r.Default()
	flag := map[string]string{"embedding.endpoint": "--embedding-endpoint", "embedding.dimensions": "--embedding-dimensions",
		"embedding.batchSize": "--embedding-batch-size", "hybrid.denseWeight": "--dense-weight", "embedding.model": "--embedding-model"}
	for _, e := range r.Validate() {
		if name, ok := flag[strings.TrimPrefix(e.Field, "spec.ranking.")]; ok {
			return rs, fmt.Errorf("%s: %s", name, e.ErrorBody())
		}
	}
	return r.Spec.Ranking, nil
}

func runRetrieval(cmd *cobra.Command, ds *eval.Dataset, ranking v1alpha1.RankingSpec, params index.Params) (eval.Report, error) {
	dir, err := os.MkdirTemp("", "contextrouter-eval-")
	if err != nil {
		return eval.Report{}, err
	}
	defer os.RemoveAll(dir)
	// File names are positions, so any document id works; paths map back to ids.
	idOf := make(map[string]string, len(ds.Corpus))
	for i, d := range ds.Corpus {
		name := fmt.Sprintf("d%07d.md", i)
		var b strings.Builder
		if d.Title != "" {
			b.WriteString("# " + textutil.OneLine(d.Title) + "\n\n")
		}
		b.WriteString(d.Text)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return eval.Report{}, err
		}
		idOf[name] = d.ID
	}
	max := int32(math.MaxInt32)
	cfg := &engine.Config{
		Router: v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "eval"}, Spec: v1alpha1.ContextRouterSpec{
			DefaultAccess: v1alpha1.AccessAllow,
			Budget:        v1alpha1.BudgetSpec{MaxTokens: max, Truncation: v1alpha1.TruncationDrop, Estimator: v1alpha1.EstimatorCharsDiv4},
			Ranking:       ranking,
		}},
		Routes: []v1alpha1.ContextRoute{{ObjectMeta: metav1.ObjectMeta{Name: "corpus"}, Spec: v1alpha1.ContextRouteSpec{
			Sources: []v1alpha1.LocalObjectReference{{Name: "corpus"}}}}},
		Sources: []v1alpha1.ContextSource{{ObjectMeta: metav1.ObjectMeta{Name: "corpus"}, Spec: v1alpha1.ContextSourceSpec{
			Type:        v1alpha1.SourceDirectory,
			Sensitivity: v1alpha1.SensitivityPublic,
			Chunking:    v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
			Directory:   &v1alpha1.DirectorySource{Path: dir, Include: []string{"*.md"}},
		}}},
	}
	(&cfg.Sources[0]).Default()
	snap, err := engine.Compile(cmd.Context(), cfg, engine.Options{IndexParams: &params, Secrets: sources.EnvFileSecrets{}})
	if err != nil {
		return eval.Report{}, err
	}
	// A measure of dense ranking that fell back to BM25 would be a wrong number.
	if e := snap.Embedding(); e != nil && e.Error != "" {
		return eval.Report{}, fmt.Errorf("chunk embeddings: %s", e.Error)
	}
	if st := snap.Sources()[0]; st.Error != "" || st.Chunks != len(ds.Corpus) {
		return eval.Report{}, fmt.Errorf("corpus source: %d chunks for %d documents %s", st.Chunks, len(ds.Corpus), st.Error)
	}
	var acc eval.Accumulator
	for _, q := range ds.Queries {
		start := time.Now()
		resp, err := snap.Query(cmd.Context(), engine.Request{Text: q.Text, Agent: "eval", MaxChunks: eval.Depth})
		lat := time.Since(start)
		if err != nil {
			return eval.Report{}, fmt.Errorf("query %s: %w", q.ID, err)
		}
		if len(resp.RankingFailures) > 0 {
			return eval.Report{}, fmt.Errorf("query %s: %s", q.ID, strings.Join(resp.Warnings, "; "))
		}
		ranked := make([]string, len(resp.Chunks))
		for i, c := range resp.Chunks {
			ranked[i] = idOf[c.Path]
		}
		acc.Add(ranked, ds.Qrels[q.ID], lat)
	}
	return acc.Report(), nil
}
