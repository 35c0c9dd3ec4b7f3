// Command toolcal fits the calibration of tool confidences
// (tools.DefaultCalibration) on MetaTool's dev splits and the off-topic dev
// questions beside it, and writes it as Go source:
//
//	go run ./hack/toolcal [-metatool ../shared/eval/metatool] [-offtopic hack/toolcal/offtopic-dev.jsonl] [-o internal/tools/calibration_fit.go]
//
// A card's confidence is meant as the chance that its tool is one the
// question needs, in any catalog: MetaTool's 199 tools, and the small
// catalogs a route attaches, where a question often matches one tool alone,
// by a word or two, whether or not that tool fits. So the training rows are
// the cards (the first 10 of each question) of these catalogs, each with
// and without MetaTool's examples:
//
//   - all 199 tools: the dev and dev-multi questions, and the off-topic dev
//     questions (no card is right);
//   - the tools cut into groups of groupSize, at random and by topic (each
//     group's tools alike, as a route's often are): every dev question
//     against its tool's group, and against absentGroups others (no card is
//     right there);
//   - the off-topic questions against a group each.
//
// One logistic model per kind of tool (with examples or without) is fitted
// to "the card's tool is relevant" by Newton's method with a small ridge.
// The test splits and the off-topic test questions are never read. The
// program prints, for a model fitted on half the dev questions, the
// expected calibration error of the first card on the other half, then fits
// on all of them.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/eval"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// groupSize is the size of the small catalogs.
const groupSize = 8

// ridge is the L2 penalty of the fit, per row.
const ridge = 1e-4

// dropped are the features left out of the fit (-drop).
var dropped [tools.NumFeatures]bool

// The priors of the fit, which the dev data cannot tell.
var (
	// absentGroups is how many small catalogs without its tool a dev
	// question meets, besides its tool's: in a small catalog a question
	// that shares a word or two with one tool is taken to fit it one time
	// in three when its evidence cannot tell.
	absentGroups = 2
	// offtopicShare is the share of the questions to the whole catalog
	// that no tool fits: the off-topic dev questions weigh that much
	// against the dev questions.
	offtopicShare = 0.1
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolcal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	metatool := fs.String("metatool", "../shared/eval/metatool", "MetaTool in BEIR layout (dev, dev-multi, examples.jsonl)")
	offtopic := fs.String("offtopic", "hack/toolcal/offtopic-dev.jsonl", `{"text"} lines no MetaTool tool fits`)
	out := fs.String("o", "internal/tools/calibration_fit.go", "Go file to write (- for standard output)")
	fs.IntVar(&absentGroups, "absent", absentGroups, "small catalogs without its tool each dev question meets")
	fs.Float64Var(&offtopicShare, "offtopic-share", offtopicShare, "share of the questions to the whole catalog that no tool fits")
	describeRows := fs.Bool("describe", false, "print the mean features of the first cards per setting")
	drop := fs.String("drop", "", "comma-separated indices of Evidence.Features to leave out of the fit (their weights 0), to measure what a feature adds")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, f := range strings.FieldsFunc(*drop, func(r rune) bool { return r == ',' }) {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= tools.NumFeatures {
			fmt.Fprintf(stderr, "-drop: %q is not a feature index (0 to %d)\n", f, tools.NumFeatures-1)
			return 2
		}
		dropped[i] = true
	}
	rows, err := collect(*metatool, *offtopic)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *describeRows {
		describe(stdout, rows)
	}
	// Held-out check: fit on even questions, measure on odd ones.
	even, odd := split(rows)
	half := fit(even)
	fmt.Fprintf(stdout, "fitted on half the dev questions, measured on the other half:\n")
	report(stdout, &half, odd)
	cal := fit(rows)
	fmt.Fprintf(stdout, "fitted on all of them (in-sample):\n")
	report(stdout, &cal, rows)
	src, err := source(&cal)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *out == "-" {
		_, _ = stdout.Write(src)
		return 0
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return 0
}

// row is a card: its evidence, whether its tool is relevant, which
// question it answers (for the held-out split), the setting it comes from
// and whether it is the first card of its question.
type row struct {
	ev       tools.Evidence
	relevant bool
	question int
	setting  string
	weight   float64
}

// collect builds the training rows of every setting.
func collect(dir, offtopicPath string) ([]row, error) {
	dev, err := eval.LoadBEIR(dir, "dev")
	if err != nil {
		return nil, err
	}
	multi, err := eval.LoadBEIR(dir, "dev-multi")
	if err != nil {
		return nil, err
	}
	examples, err := eval.LoadToolExamples(filepath.Join(dir, "examples.jsonl"), dev)
	if err != nil {
		return nil, err
	}
	offtopic, err := eval.LoadOfftopic(offtopicPath)
	if err != nil {
		return nil, err
	}
	collapse, err := strconv.ParseFloat(v1alpha1.DefaultToolsCollapseThreshold, 64)
	if err != nil {
		return nil, err
	}
	var rows []row
	q := 0
	for _, kind := range []string{"plain", "examples", "mixed"} {
		var ex []eval.ToolExample
		switch kind {
		case "examples":
			ex = examples
		case "mixed":
			ex = someExamples(examples)
		}
		entries := eval.ToolCatalog(dev, ex)
		full := catalog{entries: entries, ix: tools.NewIndex(entries, tools.Options{Collapse: collapse}), ids: idsOf(dev)}
		for _, ds := range []*eval.Dataset{dev, multi} {
			for _, qu := range ds.Queries {
				rows = full.rows(rows, "full "+kind, qu.Text, ds.Qrels[qu.ID], q)
				q++
			}
		}
		// The off-topic questions weigh offtopicShare of all.
		w := offtopicShare / (1 - offtopicShare) * float64(len(dev.Queries)+len(multi.Queries)) / float64(len(offtopic))
		for _, t := range offtopic {
			from := len(rows)
			rows = full.rows(rows, "full off-topic "+kind, t, nil, q)
			for i := from; i < len(rows); i++ {
				rows[i].weight *= w
			}
			q++
		}
		for _, coherent := range []bool{false, true} {
			name := map[bool]string{false: "small", true: "topical"}[coherent]
			groups, of := smallCatalogs(entries, dev, collapse, topics(dev, collapse, coherent))
			for i, qu := range dev.Queries {
				var gold string
				for id := range dev.Qrels[qu.ID] {
					gold = id
				}
				g := of[gold]
				rows = groups[g].rows(rows, name+" "+kind, qu.Text, dev.Qrels[qu.ID], q)
				for a := range absentGroups {
					other := (g + 1 + (absentGroups*i+a)%(len(groups)-1)) % len(groups)
					rows = groups[other].rows(rows, name+" absent "+kind, qu.Text, nil, q)
				}
				q++
			}
			for i, t := range offtopic {
				rows = groups[i%len(groups)].rows(rows, name+" off-topic "+kind, t, nil, q)
				q++
			}
		}
	}
	return rows, nil
}

// exampleCounts are how many examples a tool keeps in the mixed catalogs
// (0: none; -1: all), drawn per tool: catalogs whose tools have a few
// examples or none beside tools with many.
var exampleCounts = []int{0, 1, 2, 3, 5, 9, -1}

// someExamples keeps, per tool, its first n examples, n drawn from
// exampleCounts at random (seeded).
func someExamples(examples []eval.ToolExample) []eval.ToolExample {
	r := rand.New(rand.NewPCG(20261128, 7))
	keep := map[string]int{}
	var out []eval.ToolExample
	for _, e := range examples {
		n, ok := keep[e.Tool]
		if !ok {
			n = exampleCounts[r.IntN(len(exampleCounts))]
			keep[e.Tool] = n
		}
		if n != 0 {
			out = append(out, e)
			keep[e.Tool] = n - 1
		}
	}
	return out
}

// catalog is an index and the corpus ids of its entries.
type catalog struct {
	entries []tools.Entry
	ix      *tools.Index
	ids     []string
}

func idsOf(ds *eval.Dataset) []string {
	ids := make([]string, len(ds.Corpus))
	for i, d := range ds.Corpus {
		ids[i] = d.ID
	}
	return ids
}

// rows appends the first 10 cards of text with their relevance (rel nil:
// none is relevant).
func (c *catalog) rows(rows []row, setting, text string, rel map[string]int, question int) []row {
	for _, h := range c.ix.Search(text, eval.ToolDepth, nil) {
		relevant := rel[c.ids[h.Entry]] > 0
		for _, o := range h.Also {
			relevant = relevant || rel[c.ids[o]] > 0
		}
		// The mixed catalogs train the model of tools with a few examples
		// only: there a tool with many examples outranks plain ones more
		// often than in a catalog where every tool has many.
		if ex, _ := h.Evidence.Kind(); strings.Contains(setting, "mixed") && ex != 1 {
			continue
		}
		rows = append(rows, row{ev: h.Evidence, relevant: relevant, question: question, setting: setting, weight: 1})
	}
	return rows
}

// smallCatalogs cuts the tools, in order, into groups of groupSize and
// indexes each; of maps a tool id to its group.
func smallCatalogs(entries []tools.Entry, ds *eval.Dataset, collapse float64, order []int) ([]catalog, map[string]int) {
	var groups []catalog
	of := map[string]int{}
	for lo := 0; lo < len(order); lo += groupSize {
		var c catalog
		for _, i := range order[lo:min(lo+groupSize, len(order))] {
			c.entries = append(c.entries, entries[i])
			c.ids = append(c.ids, ds.Corpus[i].ID)
			of[ds.Corpus[i].ID] = len(groups)
		}
		c.ix = tools.NewIndex(c.entries, tools.Options{Collapse: collapse})
		groups = append(groups, c)
	}
	return groups, of
}

// topics orders the tools of ds at random (seeded) or, when coherent, so
// that every groupSize of them are alike, as the tools a route attaches
// often are: a tool in random order, then the tools its description finds
// first among those left, and so on.
func topics(ds *eval.Dataset, collapse float64, coherent bool) []int {
	n := len(ds.Corpus)
	r := rand.New(rand.NewPCG(20261128, 19))
	seeds := r.Perm(n)
	if !coherent {
		return seeds
	}
	ix := tools.NewIndex(eval.ToolCatalog(ds, nil), tools.Options{Collapse: collapse})
	taken := make([]bool, n)
	var order []int
	for _, s := range seeds {
		if taken[s] {
			continue
		}
		taken[s] = true
		order = append(order, s)
		group := 1
		for _, h := range ix.Search(ds.Corpus[s].Text, n, nil) {
			if group == groupSize {
				break
			}
			if !taken[h.Entry] {
				taken[h.Entry] = true
				order = append(order, h.Entry)
				group++
			}
		}
		// Fill a group its description could not: the next seeds.
		for ; group < groupSize; group++ {
			i := slices.IndexFunc(seeds, func(j int) bool { return !taken[j] })
			if i < 0 {
				break
			}
			taken[seeds[i]] = true
			order = append(order, seeds[i])
		}
	}
	return order
}

// split parts rows by their question's parity.
func split(rows []row) (even, odd []row) {
	for _, r := range rows {
		if r.question%2 == 0 {
			even = append(even, r)
		} else {
			odd = append(odd, r)
		}
	}
	return even, odd
}

// fit fits one logistic model per kind of card.
func fit(rows []row) tools.Calibration {
	var kinds [3][2][]row
	for _, r := range rows {
		ex, dense := r.ev.Kind()
		kinds[ex][dense] = append(kinds[ex][dense], r)
	}
	var cal tools.Calibration
	for ex := range kinds {
		for dense := range 2 {
			cal.Models[ex][dense] = newton(kinds[ex][dense])
		}
	}
	return cal
}

// newton fits a logistic model by Newton's method with a ridge on the
// weights (not the bias).
func newton(rows []row) tools.Logistic {
	const p = tools.NumFeatures + 1
	x := make([][p]float64, len(rows))
	y := make([]float64, len(rows))
	wt := make([]float64, len(rows))
	for i, r := range rows {
		wt[i] = r.weight
		f := r.ev.Features()
		for j := range f {
			if dropped[j] {
				f[j] = 0
			}
		}
		x[i][0] = 1
		copy(x[i][1:], f[:])
		if r.relevant {
			y[i] = 1
		}
	}
	var w [p]float64
	lambda := ridge * float64(len(rows))
	for range 50 {
		var g [p]float64
		var h [p][p]float64
		for i := range x {
			z := 0.0
			for j := range p {
				z += w[j] * x[i][j]
			}
			mu := 1 / (1 + math.Exp(-z))
			s := max(mu*(1-mu), 1e-9) * wt[i]
			for j := range p {
				g[j] += wt[i] * (mu - y[i]) * x[i][j]
				for k := range p {
					h[j][k] += s * x[i][j] * x[i][k]
				}
			}
		}
		for j := 1; j < p; j++ {
			g[j] += lambda * w[j]
			h[j][j] += lambda
		}
		step := solve(h, g)
		change := 0.0
		for j := range p {
			w[j] -= step[j]
			change = max(change, math.Abs(step[j]))
		}
		if change < 1e-9 {
			break
		}
	}
	var l tools.Logistic
	l.Bias = w[0]
	copy(l.Weights[:], w[1:])
	return l
}

// solve solves h·x = g by Gaussian elimination with partial pivoting.
func solve(h [tools.NumFeatures + 1][tools.NumFeatures + 1]float64, g [tools.NumFeatures + 1]float64) [tools.NumFeatures + 1]float64 {
	const p = tools.NumFeatures + 1
	for c := range p {
		piv := c
		for r := c + 1; r < p; r++ {
			if math.Abs(h[r][c]) > math.Abs(h[piv][c]) {
				piv = r
			}
		}
		h[c], h[piv] = h[piv], h[c]
		g[c], g[piv] = g[piv], g[c]
		for r := c + 1; r < p; r++ {
			f := h[r][c] / h[c][c]
			for k := c; k < p; k++ {
				h[r][k] -= f * h[c][k]
			}
			g[r] -= f * g[c]
		}
	}
	var x [p]float64
	for r := p - 1; r >= 0; r-- {
		s := g[r]
		for k := r + 1; k < p; k++ {
			s -= h[r][k] * x[k]
		}
		x[r] = s / h[r][r]
	}
	return x
}

// report prints, per setting, the expected calibration error of the first
// card (10 bins), its mean confidence and accuracy, and the share under
// the default minConfidence.
func report(w io.Writer, cal *tools.Calibration, rows []row) {
	gate, _ := strconv.ParseFloat(v1alpha1.DefaultToolsMinConfidence, 64)
	type stat struct {
		n, right, under int
		conf            float64
		bins            [10][3]float64
		corr            eval.Pearson
	}
	stats := map[string]*stat{}
	var names []string
	for _, r := range rows {
		if r.ev.Rank != 0 {
			continue
		}
		s := stats[r.setting]
		if s == nil {
			s = &stat{}
			stats[r.setting] = s
			names = append(names, r.setting)
		}
		c := cal.Confidence(&r.ev)
		s.n++
		s.conf += c
		s.corr.Add(c, map[bool]float64{true: 1}[r.relevant])
		if r.relevant {
			s.right++
		}
		if c < gate {
			s.under++
		}
		b := min(int(c*10), 9)
		s.bins[b][0]++
		s.bins[b][1] += c
		if r.relevant {
			s.bins[b][2]++
		}
	}
	slices.Sort(names)
	fmt.Fprintf(w, "  %-28s %6s %8s %8s %8s %8s %8s\n", "setting", "first", "right", "conf", "ECE", "<gate", "r")
	for _, n := range names {
		s := stats[n]
		ece := 0.0
		for _, b := range s.bins {
			if b[0] > 0 {
				ece += b[0] / float64(s.n) * math.Abs(b[2]/b[0]-b[1]/b[0])
			}
		}
		// Pearson's r of the confidence and being right.
		fmt.Fprintf(w, "  %-28s %6d %8.4f %8.4f %8.4f %8.4f %8.4f\n", n, s.n, float64(s.right)/float64(s.n), s.conf/float64(s.n), ece, float64(s.under)/float64(s.n), s.corr.R())
	}
}

// source is the Go file holding cal.
func source(cal *tools.Calibration) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./hack/toolcal; DO NOT EDIT.\n\npackage tools\n\n")
	b.WriteString("// DefaultCalibration was fitted on MetaTool dev and dev-multi and the\n// off-topic dev questions by hack/toolcal (api.md §10.3).\n")
	b.WriteString("var DefaultCalibration = Calibration{Models: [3][2]Logistic{\n")
	for ex := range len(cal.Models) {
		b.WriteString("\t{\n")
		for dense := range 2 {
			l := cal.Models[ex][dense]
			fmt.Fprintf(&b, "\t\t// examples: %s, dense: %v\n\t\t{Bias: %s, Weights: [NumFeatures]float64{", []string{"none", "a few", "many"}[ex], dense == 1, num(l.Bias))
			for i, w := range l.Weights {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(num(w))
			}
			b.WriteString("}},\n")
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}}\n")
	return format.Source(b.Bytes())
}

// num prints a weight with 6 significant digits.
func num(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }
