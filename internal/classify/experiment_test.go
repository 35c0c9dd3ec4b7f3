package classify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// evalDir is where the public intent sets are: $CONTEXTROUTER_EVAL_DIR, or
// the development layout's shared folder.
var evalDir = func() string {
	if d := os.Getenv("CONTEXTROUTER_EVAL_DIR"); d != "" {
		return d
	}
	return "/work/shared/eval"
}()

func loadJSONL(t testing.TB, path string) []Example {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Example
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestExperiment is the tuning harness of docs/benchmarks.md, not a test:
// it prints CLINC150 val and Banking77 held-out numbers for the
// configuration in $HYPER and $FEAT, and runs only when asked.
func TestExperiment(t *testing.T) {
	if os.Getenv("CLASSIFY_EXPERIMENT") == "" {
		t.Skip("set CLASSIFY_EXPERIMENT=1 to run the tuning experiment")
	}
	savedHyper, savedFeatures := defaultHyper, features
	defer func() { defaultHyper, features = savedHyper, savedFeatures }()
	if v := os.Getenv("HYPER"); v != "" {
		if err := json.Unmarshal([]byte(v), &expHyper); err != nil {
			t.Fatal(err)
		}
		defaultHyper = hyper{epochs: expHyper.Epochs, lr: expHyper.LR, lambda: expHyper.Lambda, minDF: expHyper.MinDF}
	}
	if v := os.Getenv("FEAT"); v != "" {
		var f struct {
			Raw, Cross bool
			MinN, MaxN int
			GW         float64
		}
		if err := json.Unmarshal([]byte(v), &f); err != nil {
			t.Fatal(err)
		}
		features = featureSet{raw: f.Raw, cross: f.Cross, minN: f.MinN, maxN: f.MaxN, groupWeight: f.GW}
	}
	t.Logf("hyper %+v features %+v", defaultHyper, features)
	// CLINC150: train on train, calibrate+tune on val, report val (tuning set!) and held-out
	train := loadJSONL(t, filepath.Join(evalDir, "clinc150/train.jsonl"))
	val := loadJSONL(t, filepath.Join(evalDir, "clinc150/val.jsonl"))
	start := time.Now()
	m, err := Train(train, Options{OutOfScopeLabel: "oos", Validation: val})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clinc train %v T=%.3f trainAcc=%.4f feats=%d", time.Since(start), m.Temperature(), m.TrainingAccuracy(), len(m.idf))
	// 2-fold threshold on val: tune on even rows, report odd rows, and back.
	oos := slices.Index(m.labels, "oos")
	var logits [2][][]float64
	var ys [2][]int
	var exs [2][]Example
	for i, e := range val {
		p := m.Probabilities(e.Text)
		z := make([]float64, len(p))
		for c := range p {
			z[c] = math.Log(p[c] + 1e-300)
		}
		logits[i%2] = append(logits[i%2], z)
		ys[i%2] = append(ys[i%2], slices.Index(m.labels, e.Label))
		exs[i%2] = append(exs[i%2], e)
	}
	m.opts.Threshold = 0
	report(t, "clinc val thr=0", m, val, "oos")
	for _, thr := range []float64{0.1, 0.2, 0.3, 0.4, 0.5} {
		m.opts.Threshold = thr
		report(t, fmt.Sprintf("clinc val thr=%.2f", thr), m, val, "oos")
	}
	for f := range 2 {
		thr, _ := tuneThreshold(logits[f], ys[f], 1, oos)
		m.opts.Threshold = thr
		report(t, fmt.Sprintf("clinc val fold %d thr=%.2f", 1-f, thr), m, exs[1-f], "oos")
	}
	// Banking77: hold out 20% of train as val
	b := loadJSONL(t, filepath.Join(evalDir, "banking77/train.jsonl"))
	var btr, bval []Example
	for i, e := range b {
		if i%5 == 0 {
			bval = append(bval, e)
		} else {
			btr = append(btr, e)
		}
	}
	start = time.Now()
	m, err = Train(btr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("banking train %v T=%.3f", time.Since(start), m.Temperature())
	report(t, "banking val", m, bval, "oos")
}

var expHyper struct {
	Epochs int
	LR     float64
	Lambda float64
	MinDF  int
}

func report(t *testing.T, name string, m *Model, exs []Example, oos string) {
	nIn, inRight, nOut, outRight, right := 0, 0, 0, 0, 0
	var ece [15]struct {
		n, hit int
		conf   float64
	}
	for _, e := range exs {
		r := m.Classify(e.Text)
		p := m.Probabilities(e.Text)
		top := argmax(p)
		b := min(int(p[top]*15), 14)
		ece[b].n++
		ece[b].conf += p[top]
		if m.labels[top] == e.Label {
			ece[b].hit++
		}
		if r.Label == e.Label {
			right++
		}
		if e.Label == oos {
			nOut++
			if r.Label == oos {
				outRight++
			}
		} else {
			nIn++
			if r.Label == e.Label {
				inRight++
			}
		}
	}
	e := 0.0
	for _, b := range ece {
		if b.n > 0 {
			d := b.conf/float64(b.n) - float64(b.hit)/float64(b.n)
			if d < 0 {
				d = -d
			}
			e += d * float64(b.n) / float64(len(exs))
		}
	}
	t.Logf("%s: acc %.4f in-scope %.4f oos-recall %.4f (n=%d) ece %.4f", name, float64(right)/float64(len(exs)), float64(inRight)/float64(max(nIn, 1)), float64(outRight)/float64(max(nOut, 1)), nOut, e)
}
