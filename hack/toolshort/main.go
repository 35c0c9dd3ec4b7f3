// Command toolshort measures, on MetaTool's dev splits with every catalog
// example, the precision and recall of the rules an adaptive shortlist
// (spec.tools.adaptive) could cut the ranking by, over a grid of their
// settings, beside the oracle bound (eval.OracleSet):
//
//	go run ./hack/toolshort [-metatool ../shared/eval/metatool] [-recall 0.9]
//
// For each rule it prints the setting with the best dev precision at dev
// recall ≥ -recall, that setting on dev-multi, and the best dev-multi
// precision at dev-multi recall ≥ -recall. The test splits are never read.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/eval"
	"github.com/contextrouter/contextrouter/internal/tools"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// question is a query's ranked cards and its relevant tools.
type question struct {
	hits []tools.Hit
	rel  map[string]int
}

// split is the questions of one split over its dataset.
type split struct {
	name string
	ds   *eval.Dataset
	qs   []question
}

// rule cuts a ranking: it returns the cards kept.
type rule struct {
	family string
	param  string
	keep   func(hits []tools.Hit) []tools.Hit
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolshort", flag.ContinueOnError)
	fs.SetOutput(stderr)
	metatool := fs.String("metatool", "../shared/eval/metatool", "MetaTool in BEIR layout (dev, dev-multi, examples.jsonl)")
	target := fs.Float64("recall", eval.OracleRecall, "recall the precision is measured at")
	curve := fs.String("curve", "", "print every setting of the rules whose name holds this (e.g. \"utility, top 5\")")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var splits []*split
	for _, name := range []string{"dev", "dev-multi"} {
		s, err := load(*metatool, name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		splits = append(splits, s)
	}
	for _, s := range splits {
		r := measure(s, func(h []tools.Hit) []tools.Hit { return h[:1] })
		fmt.Fprintf(stdout, "%s: %d questions; first card only: precision %.4f recall %.4f; oracle at recall >= %.2f: precision %.4f recall %.4f cards %.2f\n",
			s.name, len(s.qs), r.Returned.Precision, r.Returned.Recall, eval.OracleRecall, r.Oracle.Precision, r.Oracle.Recall, r.Oracle.Cards)
	}
	type best struct {
		r    rule
		p, c float64
		rec  float64
		ok   bool
	}
	var families []string
	bestDev, bestMulti := map[string]*best{}, map[string]*best{}
	for _, r := range rules() {
		if *curve != "" && strings.Contains(r.family, *curve) {
			d, m := measure(splits[0], r.keep).Returned, measure(splits[1], r.keep).Returned
			fmt.Fprintf(stdout, "%-28s %-20s dev %.4f %.4f %.2f  multi %.4f %.4f %.2f\n", r.family, r.param, d.Precision, d.Recall, d.Cards, m.Precision, m.Recall, m.Cards)
		}
		if bestDev[r.family] == nil {
			families = append(families, r.family)
			bestDev[r.family], bestMulti[r.family] = &best{}, &best{}
		}
		for i, s := range splits {
			rep := measure(s, r.keep)
			b := map[int]*best{0: bestDev[r.family], 1: bestMulti[r.family]}[i]
			ret := rep.Returned
			if ret.Recall >= *target && (!b.ok || ret.Precision > b.p) {
				*b = best{r: r, p: ret.Precision, c: ret.Cards, rec: ret.Recall, ok: true}
			}
		}
	}
	fmt.Fprintf(stdout, "\n%-28s %-20s %9s %9s %6s | %9s %9s %6s | %-26s %9s %9s\n", "rule", "best on dev", "precision", "recall", "cards", "multi P", "multi R", "cards", "best on dev-multi", "precision", "recall")
	for _, f := range families {
		d, m := bestDev[f], bestMulti[f]
		line := fmt.Sprintf("%-28s ", f)
		if d.ok {
			rep := measure(splits[1], d.r.keep).Returned
			line += fmt.Sprintf("%-20s %9.4f %9.4f %6.2f | %9.4f %9.4f %6.2f | ", d.r.param, d.p, d.rec, d.c, rep.Precision, rep.Recall, rep.Cards)
		} else {
			line += fmt.Sprintf("%-20s %9s %9s %6s | %9s %9s %6s | ", "(recall not reached)", "", "", "", "", "", "")
		}
		if m.ok {
			line += fmt.Sprintf("%-20s %9.4f %9.4f", m.r.param, m.p, m.rec)
		} else {
			line += "(recall not reached)"
		}
		fmt.Fprintln(stdout, line)
	}
	return 0
}

// load ranks the first ToolDepth cards of every question of a split, the
// catalog with all its examples.
func load(dir, name string) (*split, error) {
	ds, err := eval.LoadBEIR(dir, name)
	if err != nil {
		return nil, err
	}
	examples, err := eval.LoadToolExamples(filepath.Join(dir, "examples.jsonl"), ds)
	if err != nil {
		return nil, err
	}
	collapse, err := strconv.ParseFloat(v1alpha1.DefaultToolsCollapseThreshold, 64)
	if err != nil {
		return nil, err
	}
	ix := tools.NewIndex(eval.ToolCatalog(ds, examples), tools.Options{Collapse: collapse})
	s := &split{name: name, ds: ds}
	for _, q := range ds.Queries {
		s.qs = append(s.qs, question{hits: ix.Search(q.Text, eval.ToolDepth, nil), rel: ds.Qrels[q.ID]})
	}
	return s, nil
}

// measure is the report of the cards keep returns for every question.
func measure(s *split, keep func([]tools.Hit) []tools.Hit) eval.ToolReport {
	var acc eval.ToolAccumulator
	buf := make([]tools.Hit, 0, eval.ToolDepth)
	for _, q := range s.qs {
		var kept []tools.Hit
		if len(q.hits) > 0 {
			kept = keep(append(buf[:0], q.hits...))
		}
		acc.Add(eval.RankedCards(s.ds, q.hits), eval.RankedCards(s.ds, kept), q.rel, 0)
	}
	return acc.Report()
}

// grid is the settings tried of the cuts in [0, 1].
var grid = []float64{0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8}

// rules are the rules tried, by family.
func rules() []rule {
	var out []rule
	for _, k := range []int{2, 3, 4, 5, 10} {
		for _, c := range grid {
			out = append(out, rule{fmt.Sprintf("relative cut, top %d", k), fmt.Sprintf("cut %.2f", c), func(h []tools.Hit) []tools.Hit {
				return tools.Adaptive(h[:min(k, len(h))], c)
			}})
		}
	}
	for _, k := range []int{3, 5, 10} {
		for _, f := range grid {
			out = append(out, rule{fmt.Sprintf("absolute floor, top %d", k), fmt.Sprintf("floor %.2f", f), func(h []tools.Hit) []tools.Hit {
				return keepIf(h[:min(k, len(h))], func(x tools.Hit) bool { return x.Confidence >= f })
			}})
		}
	}
	for _, k := range []int{3, 5, 10} {
		for _, c := range grid {
			for _, f := range grid {
				out = append(out, rule{fmt.Sprintf("relative + floor, top %d", k), fmt.Sprintf("cut %.2f floor %.2f", c, f), func(h []tools.Hit) []tools.Hit {
					return keepIf(h[:min(k, len(h))], func(x tools.Hit) bool {
						return x.Confidence >= f && x.Confidence >= c*h[0].Confidence
					})
				}})
			}
		}
	}
	for _, k := range []int{3, 5, 10} {
		for _, p := range []float64{0.5, 0.7, 0.8, 0.9, 0.95, 1, 1.1, 1.2, 1.3, 1.5, 1.7, 2, 2.5} {
			out = append(out, rule{fmt.Sprintf("confidence mass, top %d", k), fmt.Sprintf("sum %.2f", p), func(h []tools.Hit) []tools.Hit {
				h = h[:min(k, len(h))]
				sum := 0.0
				for i := range h {
					if sum >= p {
						return h[:i]
					}
					sum += h[i].Confidence
				}
				return h
			}})
		}
	}
	for _, k := range []int{3, 5, 10} {
		for _, c := range grid {
			out = append(out, rule{fmt.Sprintf("step ratio, top %d", k), fmt.Sprintf("ratio %.2f", c), func(h []tools.Hit) []tools.Hit {
				h = h[:min(k, len(h))]
				for i := 1; i < len(h); i++ {
					if h[i].Confidence < c*h[i-1].Confidence {
						return h[:i]
					}
				}
				return h
			}})
		}
	}
	for _, k := range []int{3, 5, 10} {
		for _, l := range []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75, 2, 2.5, 3, 5} {
			out = append(out, rule{fmt.Sprintf("expected utility, top %d", k), fmt.Sprintf("lambda %.2f", l), func(h []tools.Hit) []tools.Hit {
				return tools.Utility(h[:min(k, len(h))], l)
			}})
		}
	}
	return out
}

// keepIf keeps the first card and the others for which ok holds, in
// order, as tools.Adaptive does.
func keepIf(h []tools.Hit, ok func(tools.Hit) bool) []tools.Hit {
	out := h[:1]
	for _, x := range h[1:] {
		if ok(x) {
			out = append(out, x)
		}
	}
	return out
}
