package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/internal/classify"
)

// DefaultOOSLabel is the out-of-scope label of the intent sets (CLINC150's
// "oos").
const DefaultOOSLabel = "oos"

// ECEBins is the number of equal-width confidence bins over [0, 1] the
// expected calibration error uses (the last bin includes 1).
const ECEBins = 15

// LoadIntents reads {"text", "label"} lines; errors name the file and line.
func LoadIntents(path string) ([]classify.Example, error) {
	var out []classify.Example
	err := scanLines(path, func(n int, line []byte) error {
		if len(strings.TrimSpace(string(line))) == 0 {
			return nil
		}
		var e classify.Example
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		switch {
		case strings.TrimSpace(e.Text) == "":
			return fmt.Errorf("%s:%d: empty \"text\"", path, n)
		case e.Label == "":
			return fmt.Errorf("%s:%d: missing \"label\"", path, n)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// IntentDataset is an intent set: train.jsonl, val.jsonl when present and
// the evaluated split.
type IntentDataset struct {
	Train, Val, Eval []classify.Example
}

// LoadIntentDataset reads DIR/train.jsonl, DIR/val.jsonl (optional) and
// DIR/SPLIT.jsonl.
func LoadIntentDataset(dir, split string) (*IntentDataset, error) {
	var ds IntentDataset
	var err error
	if ds.Train, err = LoadIntents(filepath.Join(dir, "train.jsonl")); err != nil {
		return nil, err
	}
	if ds.Val, err = LoadIntents(filepath.Join(dir, "val.jsonl")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if ds.Eval, err = LoadIntents(filepath.Join(dir, split+".jsonl")); err != nil {
		return nil, err
	}
	if len(ds.Eval) == 0 {
		return nil, fmt.Errorf("%s: no examples", filepath.Join(dir, split+".jsonl"))
	}
	return &ds, nil
}

// IntentReport is the JSON object `contextrouter eval intents` prints.
// Rates are rounded to 4 decimals. The out-of-scope fields are omitted when
// the split has no out-of-scope examples.
type IntentReport struct {
	Dataset  string `json:"dataset"`
	Split    string `json:"split"`
	OOSLabel string `json:"oos_label"`
	// Labels is how many labels the model learned (the out-of-scope label
	// included when train has it).
	Labels        int `json:"labels"`
	TrainExamples int `json:"train_examples"`
	ValExamples   int `json:"val_examples"`
	Examples      int `json:"examples"`
	InScope       int `json:"in_scope"`
	OutOfScope    int `json:"out_of_scope"`
	// Threshold is the out-of-scope gate (tuned on val when it has
	// out-of-scope examples, else 0); Temperature the calibration.
	Threshold   float64 `json:"threshold"`
	Temperature float64 `json:"temperature"`
	// Accuracy counts the out-of-scope label as one more label.
	Accuracy float64 `json:"accuracy"`
	// InScopeAccuracy is over in-scope examples; out-of-scope answers are wrong.
	InScopeAccuracy float64  `json:"in_scope_accuracy"`
	OOSRecall       *float64 `json:"oos_recall,omitempty"`
	OOSPrecision    *float64 `json:"oos_precision,omitempty"`
	// MacroF1 is the unweighted mean F1 over every label that is gold or
	// predicted at least once (out-of-scope included).
	MacroF1 float64 `json:"macro_f1"`
	// ECE is the expected calibration error of the model's top label before
	// the out-of-scope gate: 15 equal-width confidence bins, |accuracy −
	// mean confidence| weighted by the bin's share of examples.
	ECE          float64 `json:"ece"`
	ECEBins      int     `json:"ece_bins"`
	Latency      Latency `json:"latency_us"`
	TrainSeconds float64 `json:"train_seconds"`
}

// IntentAccumulator collects per-example predictions; the zero value is
// ready once OOSLabel is set. It is not safe for concurrent use.
type IntentAccumulator struct {
	OOSLabel string

	n, right, nIn, inRight, nOut, outRight, predOut int
	tp, fp, fn                                      map[string]int
	bins                                            calibrationBins
	latencies                                       []time.Duration
}

// Add records one example: its gold label, the returned label (after the
// gate), the model's top label and probability before the gate, and the
// classification latency.
func (a *IntentAccumulator) Add(gold, predicted, top string, topConfidence float64, latency time.Duration) {
	if a.tp == nil {
		a.tp, a.fp, a.fn = map[string]int{}, map[string]int{}, map[string]int{}
	}
	a.n++
	if predicted == gold {
		a.right++
		a.tp[gold]++
	} else {
		a.fp[predicted]++
		a.fn[gold]++
	}
	if gold == a.OOSLabel {
		a.nOut++
		if predicted == gold {
			a.outRight++
		}
	} else {
		a.nIn++
		if predicted == gold {
			a.inRight++
		}
	}
	if predicted == a.OOSLabel {
		a.predOut++
	}
	if a.bins.n == nil {
		a.bins = newCalibrationBins(ECEBins)
	}
	a.bins.add(topConfidence, top == gold)
	a.latencies = append(a.latencies, latency)
}

// Report returns the metrics of everything added so far.
func (a *IntentAccumulator) Report() IntentReport {
	r := IntentReport{OOSLabel: a.OOSLabel, Examples: a.n, InScope: a.nIn, OutOfScope: a.nOut, ECEBins: ECEBins}
	if a.n == 0 {
		return r
	}
	rate := func(num, den int) float64 {
		if den == 0 {
			return 0
		}
		return round4(float64(num) / float64(den))
	}
	r.Accuracy = rate(a.right, a.n)
	r.InScopeAccuracy = rate(a.inRight, a.nIn)
	if a.nOut > 0 {
		recall, precision := rate(a.outRight, a.nOut), rate(a.outRight, a.predOut)
		r.OOSRecall, r.OOSPrecision = &recall, &precision
	}
	labels := map[string]bool{}
	for _, m := range []map[string]int{a.tp, a.fp, a.fn} {
		for l := range m {
			labels[l] = true
		}
	}
	keys := make([]string, 0, len(labels))
	for l := range labels {
		keys = append(keys, l)
	}
	slices.Sort(keys) // fixed summation order: identical output on reruns
	f1 := 0.0
	for _, l := range keys {
		if d := 2*a.tp[l] + a.fp[l] + a.fn[l]; d > 0 {
			f1 += 2 * float64(a.tp[l]) / float64(d)
		}
	}
	r.MacroF1 = round4(f1 / float64(len(keys)))
	r.ECE = a.bins.ece()
	r.Latency = latencyOf(a.latencies)
	return r
}

// Intents trains a classifier on ds.Train (calibrating, and tuning the
// out-of-scope gate, on ds.Val when present) and evaluates it on ds.Eval.
func Intents(ds *IntentDataset, oosLabel string) (IntentReport, error) {
	opts := classify.Options{OutOfScopeLabel: oosLabel, Validation: ds.Val, TuneThreshold: true}
	start := time.Now()
	m, err := classify.Train(ds.Train, opts)
	if err != nil {
		// classify names the set: "examples" is train.jsonl, "validation" val.jsonl.
		return IntentReport{}, fmt.Errorf("training on train.jsonl (val.jsonl as validation): %w", err)
	}
	trainTime := time.Since(start)
	labels := m.Labels()
	acc := IntentAccumulator{OOSLabel: oosLabel}
	for _, e := range ds.Eval {
		start := time.Now()
		r := m.Classify(e.Text)
		lat := time.Since(start)
		p := m.Probabilities(e.Text)
		top := 0
		for i, v := range p {
			if v > p[top] {
				top = i
			}
		}
		acc.Add(e.Label, r.Label, labels[top], p[top], lat)
	}
	rep := acc.Report()
	rep.Labels, rep.TrainExamples, rep.ValExamples = len(labels), len(ds.Train), len(ds.Val)
	rep.Threshold, rep.Temperature = round4(m.Threshold()), round4(m.Temperature())
	rep.TrainSeconds = math.Round(trainTime.Seconds()*100) / 100
	return rep, nil
}
