package cli

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/eval"
	"github.com/contextrouter/contextrouter/internal/index"
)

func newEvalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Measure quality on public datasets",
	}
	cmd.AddCommand(newEvalRetrievalCommand())
	return cmd
}

func newEvalRetrievalCommand() *cobra.Command {
	var (
		dataset, split, scorer, output string
		params                         = index.DefaultParams
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
			ds, err := eval.LoadBEIR(dataset, split)
			if err != nil {
				return err
			}
			report, err := runRetrieval(cmd, ds, sc, params)
			if err != nil {
				return err
			}
			report.Dataset = filepath.Base(filepath.Clean(dataset))
			report.Split = split
			report.Scorer = strings.ToLower(scorer)
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
	_ = cmd.MarkFlagRequired("dataset")
	return cmd
}

func runRetrieval(cmd *cobra.Command, ds *eval.Dataset, scorer v1alpha1.Scorer, params index.Params) (eval.Report, error) {
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
			b.WriteString("# " + strings.ReplaceAll(d.Title, "\n", " ") + "\n\n")
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
			Ranking:       v1alpha1.RankingSpec{Strategy: v1alpha1.RankingRelevance, Scorer: scorer, DedupThreshold: "0"},
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
	snap, err := engine.Compile(cmd.Context(), cfg, engine.Options{IndexParams: &params})
	if err != nil {
		return eval.Report{}, err
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
		ranked := make([]string, len(resp.Chunks))
		for i, c := range resp.Chunks {
			ranked[i] = idOf[c.Path]
		}
		acc.Add(ranked, ds.Qrels[q.ID], lat)
	}
	return acc.Report(), nil
}
