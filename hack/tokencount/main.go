// Command tokencount measures how far the tokenizer-free estimators (CharsDiv4, Words, Whitespace)
// are from exact byte-pair counts (O200kBase, Cl100kBase) on three kinds of text: the SciFact
// abstracts (documents a router indexes), session text (the turns, tool calls and results, facts
// and episodes of examples/sessions and of the pack benchmarks' 200-item session) and the
// quickstart's documents. It prints the tables of docs/benchmarks.md, "Token estimators":
//
//	go run ./hack/tokencount [-scifact ../shared/eval/scifact] [-sessions 'examples/sessions/*.jsonl'] [-docs examples/quickstart/docs]
//
// Each text is counted whole. For every text the relative error is (estimate − exact) / exact:
// the table gives the ratio of the sums, the mean signed error (positive: the estimate is
// higher, a budget spends fewer real tokens than it allows), the mean absolute error and its
// 95th percentile. A corpus that is not there is skipped with a message on stderr.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/eval"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// corpus is a named set of texts.
type corpus struct {
	name  string
	texts []string
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("tokencount", flag.ContinueOnError)
	fl.SetOutput(stderr)
	scifact := fl.String("scifact", "../shared/eval/scifact", "BEIR SciFact folder (corpus.jsonl)")
	sessions := fl.String("sessions", "examples/sessions/*.jsonl", "session files (JSONL, api.md §11.6), a glob")
	docs := fl.String("docs", "examples/quickstart/docs", "folder of markdown documents")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "tokencount: unexpected argument %q\n", fl.Arg(0))
		return 2
	}

	var corpora []corpus
	if c, err := loadSciFact(*scifact); err != nil {
		fmt.Fprintf(stderr, "tokencount: SciFact skipped: %v (pass -scifact DIR)\n", err)
	} else {
		corpora = append(corpora, c)
	}
	cs, err := loadSessions(*sessions)
	if err != nil {
		fmt.Fprintf(stderr, "tokencount: %v\n", err)
		return 1
	}
	corpora = append(corpora, cs...)
	if c, err := loadDocs(*docs); err != nil {
		fmt.Fprintf(stderr, "tokencount: documents skipped: %v\n", err)
	} else {
		corpora = append(corpora, c)
	}

	if err := report(stdout, corpora); err != nil {
		fmt.Fprintf(stderr, "tokencount: %v\n", err)
		return 1
	}
	return 0
}

func loadSciFact(dir string) (corpus, error) {
	ds, err := eval.LoadBEIR(dir, "")
	if err != nil {
		return corpus{}, err
	}
	c := corpus{name: "SciFact abstracts"}
	for _, d := range ds.Corpus {
		c.texts = append(c.texts, d.Title+"\n\n"+d.Text)
	}
	return c, nil
}

// loadSessions reads every text a pack can carry from the session files and the benchmark session:
// tool calls and results (JSON, mostly) apart from the rest (prose).
func loadSessions(glob string) ([]corpus, error) {
	files, err := filepath.Glob(glob)
	if err != nil {
		return nil, fmt.Errorf("-sessions %q: %w", glob, err)
	}
	sessions := []*session.Session{sessiontest.Bench()}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := session.ReadJSONL(f, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		sessions = append(sessions, s)
	}
	from := fmt.Sprintf("%d session files and the 200-item benchmark session", len(files))
	prose := corpus{name: "session turns, messages, snippets, facts and episodes (" + from + ")"}
	tools := corpus{name: "session tool calls and results (" + from + ")"}
	for _, s := range sessions {
		for _, it := range s.Items {
			if it.Kind == session.KindToolCall || it.Kind == session.KindToolResult {
				tools.texts = append(tools.texts, it.Text)
			} else {
				prose.texts = append(prose.texts, it.Text)
			}
		}
		for _, f := range s.Facts {
			prose.texts = append(prose.texts, f.Key+": "+f.Value)
		}
		for _, e := range s.Episodes {
			prose.texts = append(prose.texts, e.Text)
		}
	}
	return []corpus{prose, tools}, nil
}

func loadDocs(dir string) (corpus, error) {
	c := corpus{name: "quickstart documents"}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		c.texts = append(c.texts, string(b))
		return err
	})
	if err == nil && len(c.texts) == 0 {
		err = errors.New(dir + " holds no .md files")
	}
	return c, err
}

// stats are the errors of an estimate against exact counts over a set of texts.
type stats struct {
	Texts      int     // texts with an exact count > 0 (empty texts are left out)
	SumRatio   float64 // Σ estimate / Σ exact
	MeanSigned float64 // mean of (estimate − exact) / exact
	MeanAbs    float64 // mean of |estimate − exact| / exact
	P95Abs     float64 // 95th percentile (nearest rank) of |estimate − exact| / exact
}

func compare(est, exact []int) stats {
	var st stats
	var sumEst, sumExact float64
	var abs []float64
	for i, x := range exact {
		if x <= 0 {
			continue
		}
		rel := float64(est[i]-x) / float64(x)
		sumEst += float64(est[i])
		sumExact += float64(x)
		st.MeanSigned += rel
		abs = append(abs, math.Abs(rel))
		st.MeanAbs += math.Abs(rel)
	}
	st.Texts = len(abs)
	if st.Texts == 0 {
		return st
	}
	st.SumRatio = sumEst / sumExact
	st.MeanSigned /= float64(st.Texts)
	st.MeanAbs /= float64(st.Texts)
	slices.Sort(abs)
	st.P95Abs = abs[int(math.Ceil(0.95*float64(len(abs))))-1]
	return st
}

// references are the exact counts each estimator is compared with.
var references = []v1alpha1.TokenEstimator{v1alpha1.EstimatorO200kBase, v1alpha1.EstimatorCl100kBase}

func report(w io.Writer, corpora []corpus) error {
	estimates := v1alpha1.TokenEstimators()
	counts := map[v1alpha1.TokenEstimator]func(string) int{}
	for _, k := range estimates {
		est, err := budget.New(k)
		if err != nil {
			return err
		}
		counts[k] = est.Count
	}
	for _, c := range corpora {
		var size, runes int
		for _, t := range c.texts {
			size += len(t)
			runes += utf8.RuneCountInString(t)
		}
		fmt.Fprintf(w, "%s: %d texts, %d KB\n\n", c.name, len(c.texts), size/1000)
		fmt.Fprintln(w, "| exact | estimate | Σ estimate / Σ exact | mean signed error | mean abs. error | p95 abs. error |")
		fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
		n := map[v1alpha1.TokenEstimator][]int{}
		for _, k := range estimates {
			for _, t := range c.texts {
				n[k] = append(n[k], counts[k](t))
			}
		}
		for _, ref := range references {
			for _, k := range estimates {
				if k == ref {
					continue
				}
				st := compare(n[k], n[ref])
				fmt.Fprintf(w, "| %s | %s | %.3f | %+.1f %% | %.1f %% | %.1f %% |\n",
					ref, k, st.SumRatio, 100*st.MeanSigned, 100*st.MeanAbs, 100*st.P95Abs)
			}
		}
		total := 0
		for _, x := range n[v1alpha1.EstimatorO200kBase] {
			total += x
		}
		fmt.Fprintf(w, "\nO200kBase: %d tokens, %.2f characters a token.\n\n", total, float64(runes)/float64(total))
	}
	return nil
}
