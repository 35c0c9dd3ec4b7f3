//go:build experiment

package classify

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestExperiment is the tuning harness of docs/benchmarks.md, not a test:
// it asserts nothing and prints CLINC150 val and Banking77 held-out numbers
// for the configuration the constants of softmax.go and features.go set.
// It builds only with the experiment tag:
//
//	go test -tags experiment -run TestExperiment -v ./internal/classify
func TestExperiment(t *testing.T) {
	t.Logf("hyper: epochs %d, step %v, lambda %v, minDF %d; features: char %d–%d-grams, word share %v, raw words %v, across words %v",
		trainEpochs, learnRate, l2Lambda, minDocFreq, minGram, maxGram, groupWeight, rawWords, crossWords)
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
