// Package classify trains text classifiers from labelled examples and applies
// them: the first hop of context detection (intent, domain, urgency ...).
// It is pure Go with no Kubernetes client; the engine compiles one Model per
// ContextClassifier and calls Classify once per query.
//
// The model is a multinomial logistic regression over TF-IDF word unigrams,
// word bigrams (Snowball stems, stopwords kept) and character 2–5-grams
// inside word boundaries, hashed and compacted to the features seen in
// training. It is trained in-process with SGD, deterministically, and its
// probabilities are calibrated by temperature scaling on held-out examples.
package classify

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/contextrouter/contextrouter/internal/textutil"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Limits enforced by Train where examples enter. Classify truncates longer
// texts to MaxTextBytes instead of failing: it sits on the query path.
const (
	// MaxExamples bounds the training set (training and validation
	// examples each).
	MaxExamples = 200_000
	// MaxTextBytes bounds one example's text.
	MaxTextBytes = 4096
	// MaxLabels bounds the number of distinct labels.
	MaxLabels = 1000
	// MaxLabelBytes bounds one label.
	MaxLabelBytes = 253
	// MaxParameters bounds the weight matrix (features × labels); beyond
	// it the rarest features are dropped, so memory stays under 4·MaxParameters bytes.
	MaxParameters = 32 << 20
)

// Example is one labelled text.
type Example struct {
	Text  string `json:"text"`
	Label string `json:"label"`
}

// Options tune training.
type Options struct {
	// OutOfScopeLabel is returned when the best label's confidence is below
	// Threshold. Examples may carry it (out-of-scope training data).
	OutOfScopeLabel string
	// Threshold is the confidence below which the result is OutOfScopeLabel.
	// Zero disables the gate; outside [0, 1] is an error.
	Threshold float64
	// MaxAlternatives caps Result.Alternatives (default 3; negative is an
	// error).
	MaxAlternatives int
	// Labels, when set, is the complete label list: every label must have
	// an example and every example a listed label.
	Labels []string
	// Validation are held-out examples for calibration (and threshold
	// tuning). Without them Train holds out a stratified tenth of the
	// examples, fits the temperature there, and trains the served model on
	// all examples.
	Validation []Example
	// TuneThreshold picks Threshold on the held-out examples (Validation,
	// else the held-out tenth) when they contain OutOfScopeLabel examples
	// (Validation may have them even when the training examples do not):
	// the threshold that maximises their accuracy, out-of-scope counted as a
	// label. It then overrides Threshold (Model.Threshold says which is used).
	TuneThreshold bool
	// Seed seeds the example shuffles and the hold-out split; the same
	// examples, options and seed give the same model.
	Seed uint64
}

// Key names a training run: a SHA-256, in hex, of examples and of every
// field of o. Train is deterministic, so equal keys train equal models and
// a cache of trained models can be keyed by it. A field added to Options
// must be written here: TestOptionsKeyCoversEveryField sets each field in
// turn and fails when the key does not change.
func (o Options) Key(examples []Example) string {
	k := keyWriter{h: sha256.New()}
	k.str(o.OutOfScopeLabel)
	k.uint(math.Float64bits(o.Threshold))
	k.uint(uint64(o.MaxAlternatives))
	k.uint(uint64(len(o.Labels)))
	for _, l := range o.Labels {
		k.str(l)
	}
	k.examples(o.Validation)
	k.bool(o.TuneThreshold)
	k.uint(o.Seed)
	k.examples(examples)
	return hex.EncodeToString(k.h.Sum(nil))
}

// keyWriter writes Key's fields, each string after its length, so no two
// different runs write the same bytes ("ab","c" and "a","bc" differ).
type keyWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (k *keyWriter) uint(v uint64) { k.h.Write(binary.AppendUvarint(k.buf[:0], v)) }

func (k *keyWriter) str(s string) {
	k.uint(uint64(len(s)))
	io.WriteString(k.h, s)
}

func (k *keyWriter) bool(b bool) {
	if b {
		k.uint(1)
	} else {
		k.uint(0)
	}
}

func (k *keyWriter) examples(exs []Example) {
	k.uint(uint64(len(exs)))
	for _, ex := range exs {
		k.str(ex.Label)
		k.str(ex.Text)
	}
}

// Alternative is a runner-up label.
type Alternative struct {
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
}

// Result is one classification. When the threshold gate fires, Label is the
// out-of-scope label and Confidence stays the best label's (below the
// threshold); that label heads Alternatives.
type Result struct {
	Label        string        `json:"label"`
	Confidence   float64       `json:"confidence"`
	Alternatives []Alternative `json:"alternatives,omitempty"`
}

// Model is a trained classifier. It is safe for concurrent use.
type Model struct {
	opts        Options
	labels      []string
	counts      map[string]int
	index       *vocabulary
	idf         []float32
	lin         *linear
	temperature float64
	trainAcc    float64
	heldOutAcc  float64
	heldOut     int
	pool        sync.Pool
}

// Errors returned by Train; messages wrap them with the offending example.
var (
	ErrNoExamples           = errors.New("no examples")
	ErrTooManyExamples      = fmt.Errorf("more than %d examples", MaxExamples)
	ErrTooManyLabels        = fmt.Errorf("more than %d labels", MaxLabels)
	ErrEmptyLabel           = errors.New("empty label")
	ErrLabelTooLong         = fmt.Errorf("label longer than %d bytes", MaxLabelBytes)
	ErrEmptyText            = errors.New("empty text")
	ErrTextTooLong          = fmt.Errorf("text longer than %d bytes", MaxTextBytes)
	ErrUnknownLabel         = errors.New("label not in the label list")
	ErrLabelWithoutExamples = errors.New("label has no examples")
	ErrBadOption            = errors.New("invalid option")
)

// holdOutShare is the share of each label's examples held out for
// calibration when no Validation set is given; labels with fewer than
// minHeldOutLabel examples keep them all.
const (
	holdOutShare    = 0.1
	minHeldOutLabel = 5
	// minCalibration is the fewest held-out examples a temperature is fitted
	// on; below it the temperature stays 1.
	minCalibration = 20
)

func checkExamples(what string, examples []Example, known map[string]bool) error {
	if len(examples) > MaxExamples {
		return fmt.Errorf("%s: %d examples: %w", what, len(examples), ErrTooManyExamples)
	}
	for i, ex := range examples {
		var err error
		switch {
		case ex.Label == "":
			err = ErrEmptyLabel
		case len(ex.Label) > MaxLabelBytes:
			err = ErrLabelTooLong
		case len(ex.Text) > MaxTextBytes:
			err = ErrTextTooLong
		case !hasWord(ex.Text):
			err = ErrEmptyText
		case known != nil && !known[ex.Label]:
			err = fmt.Errorf("%w %v", ErrUnknownLabel, sortedKeys(known))
		}
		if err != nil {
			return fmt.Errorf("%s: example %d (label %q): %w", what, i+1, textutil.CutBytes(ex.Label, 64, ""), err)
		}
	}
	return nil
}

func hasWord(s string) bool {
	found := false
	tokenize.EachWord(s, func([]byte) { found = true })
	return found
}

// Train learns a model from examples.
func Train(examples []Example, opts Options) (*Model, error) {
	if len(examples) == 0 {
		return nil, ErrNoExamples
	}
	switch {
	case opts.MaxAlternatives < 0:
		return nil, fmt.Errorf("maxAlternatives is %d: %w", opts.MaxAlternatives, ErrBadOption)
	case opts.Threshold < 0 || opts.Threshold > 1:
		return nil, fmt.Errorf("threshold is %v, not between 0 and 1: %w", opts.Threshold, ErrBadOption)
	case opts.MaxAlternatives == 0:
		opts.MaxAlternatives = 3
	}
	var listed map[string]bool
	if len(opts.Labels) > 0 {
		if len(opts.Labels) > MaxLabels {
			return nil, fmt.Errorf("label list: %d labels: %w", len(opts.Labels), ErrTooManyLabels)
		}
		listed = map[string]bool{}
		for _, l := range opts.Labels {
			listed[l] = true
		}
	}
	if err := checkExamples("examples", examples, listed); err != nil {
		return nil, err
	}
	m := &Model{opts: opts, counts: map[string]int{}}
	for _, ex := range examples {
		m.counts[ex.Label]++
	}
	if len(m.counts) > MaxLabels {
		return nil, fmt.Errorf("examples: %d labels: %w", len(m.counts), ErrTooManyLabels)
	}
	for _, l := range opts.Labels {
		if m.counts[l] == 0 {
			return nil, fmt.Errorf("label %q: %w", l, ErrLabelWithoutExamples)
		}
	}
	for l := range m.counts {
		m.labels = append(m.labels, l)
	}
	sort.Strings(m.labels)
	labelIdx := make(map[string]int, len(m.labels))
	known := make(map[string]bool, len(m.labels))
	for i, l := range m.labels {
		labelIdx[l] = i
		known[l] = true
	}
	// Validation may carry an untrained out-of-scope label: it tunes the
	// gate (index k below) but is left out of the temperature fit.
	k := len(m.labels)
	calIdx := labelIdx
	if _, ok := labelIdx[opts.OutOfScopeLabel]; !ok && opts.OutOfScopeLabel != "" {
		calIdx = maps.Clone(labelIdx)
		calIdx[opts.OutOfScopeLabel] = k
		known[opts.OutOfScopeLabel] = true
	}
	if err := checkExamples("validation", opts.Validation, known); err != nil {
		return nil, err
	}
	m.buildVocabulary(examples, minDocFreq, MaxParameters)

	all := m.dataset(examples, labelIdx)
	var cal *dataset
	var fitOn *dataset // the model trained without the calibration examples
	if len(opts.Validation) > 0 {
		cal = m.dataset(opts.Validation, calIdx)
	} else if train, held := holdOut(all, k, opts.Seed); held.len() >= minCalibration {
		cal, fitOn = held, train
	}
	nFeat := len(m.idf)
	var calModel *linear
	var wg sync.WaitGroup
	if fitOn != nil {
		// The two fits are independent: use both cores, each deterministic.
		wg.Go(func() { calModel = trainSoftmax(fitOn, nFeat, k, opts.Seed+1) })
	}
	m.lin = trainSoftmax(all, nFeat, k, opts.Seed)
	wg.Wait()
	if calModel == nil {
		calModel = m.lin
	}
	// Independent passes over the trained model: one core each.
	wg.Go(func() { m.trainAcc = m.accuracy(all) })
	m.calibrate(calModel, cal, calIdx)
	wg.Wait()
	return m, nil
}

// calibrate fits the temperature on the held-out rows cal, scored by
// calModel (rows of an untrained out-of-scope label, index len(labels),
// only count for the gate), records the held-out accuracy and, with
// TuneThreshold, tunes the gate. Without cal the temperature is 1.
func (m *Model) calibrate(calModel *linear, cal *dataset, calIdx map[string]int) {
	m.temperature = 1
	if cal == nil {
		return
	}
	k := len(m.labels)
	logits := make([][]float64, cal.len())
	acc := make([]float32, k)
	var fitLogits [][]float64
	var fitY []int
	right := 0
	for i := range logits {
		z := make([]float64, k)
		calModel.scores(z, acc, cal.row(i))
		logits[i] = z
		if cal.y[i] < k {
			fitLogits, fitY = append(fitLogits, z), append(fitY, cal.y[i])
			if argmax(z) == cal.y[i] {
				right++
			}
		}
	}
	if len(fitY) > 0 {
		m.heldOut = len(fitY)
		m.heldOutAcc = float64(right) / float64(len(fitY))
		m.temperature = fitTemperature(fitLogits, fitY)
	}
	if oos, ok := calIdx[m.opts.OutOfScopeLabel]; ok && m.opts.TuneThreshold {
		if t, ok := tuneThreshold(logits, cal.y, m.temperature, oos); ok {
			m.opts.Threshold = t
		}
	}
}

// holdOut splits d per label: a seeded shuffle of each label's rows, the
// first holdOutShare of them held out (labels with few rows keep all).
func holdOut(d *dataset, k int, seed uint64) (train, held *dataset) {
	byLabel := make([][]int, k)
	for i, y := range d.y {
		byLabel[y] = append(byLabel[y], i)
	}
	rng := rand.New(rand.NewPCG(seed, 0x686f6c646f7574))
	var tr, he []int
	for _, rows := range byLabel {
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		n := 0
		if len(rows) >= minHeldOutLabel {
			n = int(math.Round(holdOutShare * float64(len(rows))))
		}
		he = append(he, rows[:n]...)
		tr = append(tr, rows[n:]...)
	}
	slices.Sort(tr)
	slices.Sort(he)
	return d.subset(tr), d.subset(he)
}

// tuneThreshold picks the gate (in steps of 0.01, the lowest on ties) that
// maximises accuracy on held-out logits, the out-of-scope label counting as
// one more label; oos is
// the out-of-scope label's index. ok is false
// when the held-out set lacks in-scope or out-of-scope examples.
func tuneThreshold(logits [][]float64, y []int, temperature float64, oos int) (float64, bool) {
	type row struct {
		conf float64
		top  int
	}
	rows := make([]row, len(logits))
	nIn, nOut := 0, 0
	for i, z := range logits {
		p := make([]float64, len(z))
		for c, v := range z {
			p[c] = v / temperature
		}
		softmaxInPlace(p)
		top := argmax(p)
		rows[i] = row{conf: p[top], top: top}
		if y[i] == oos {
			nOut++
		} else {
			nIn++
		}
	}
	if nIn == 0 || nOut == 0 {
		return 0, false
	}
	best, bestScore := 0.0, -1.0
	for step := 0; step <= 100; step++ {
		t := float64(step) / 100
		inRight, outRight := 0, 0
		for i, r := range rows {
			gated := r.conf < t || r.top == oos
			if y[i] == oos {
				if gated {
					outRight++
				}
			} else if !gated && r.top == y[i] {
				inRight++
			}
		}
		score := float64(inRight + outRight)
		if score > bestScore+1e-12 {
			best, bestScore = t, score
		}
	}
	return best, true
}

func argmax(z []float64) int {
	best := 0
	for i, v := range z {
		if v > z[best] {
			best = i
		}
	}
	return best
}

// buildVocabulary keeps the hashed features occurring in at least minDF
// training texts (the most frequent ones, ties by hash, if features ×
// labels would pass maxParams), indexes them in ascending hash order and computes their
// smoothed idf, ln((1+N)/(1+df)) + 1.
func (m *Model) buildVocabulary(examples []Example, minDF, maxParams int) {
	df := map[uint32]int{}
	var e extractor
	seen := map[uint32]bool{}
	for _, ex := range examples {
		e.hash(ex.Text)
		clear(seen)
		for _, ids := range [][]uint32{e.word, e.char} {
			for _, id := range ids {
				if !seen[id] {
					seen[id] = true
					df[id]++
				}
			}
		}
	}
	ids := make([]uint32, 0, len(df))
	for id, n := range df {
		if n >= minDF {
			ids = append(ids, id)
		}
	}
	if limit := maxParams / len(m.labels); len(ids) > limit {
		slices.SortFunc(ids, func(a, b uint32) int {
			if df[a] != df[b] {
				return df[b] - df[a]
			}
			return int(a) - int(b)
		})
		ids = ids[:limit]
	}
	slices.Sort(ids)
	m.index = newVocabulary(ids)
	m.idf = make([]float32, len(ids))
	n := float64(len(examples))
	for i, id := range ids {
		m.idf[i] = float32(math.Log((1+n)/(1+float64(df[id]))) + 1)
	}
}

func (m *Model) dataset(examples []Example, labelIdx map[string]int) *dataset {
	d := &dataset{}
	var e extractor
	var x []feat
	for _, ex := range examples {
		x = e.vectorize(x, ex.Text, m.index, m.idf)
		d.add(x, labelIdx[ex.Label])
	}
	return d
}

// accuracy is the share of d whose arg-max label is right (no gate).
func (m *Model) accuracy(d *dataset) float64 {
	if d.len() == 0 {
		return 0
	}
	z := make([]float64, len(m.labels))
	acc := make([]float32, len(m.labels))
	right := 0
	for i := range d.y {
		m.lin.scores(z, acc, d.row(i))
		if argmax(z) == d.y[i] {
			right++
		}
	}
	return float64(right) / float64(d.len())
}

// Labels returns the learned labels, sorted.
func (m *Model) Labels() []string { return append([]string(nil), m.labels...) }

// LabelCounts returns how many examples each label was trained on.
func (m *Model) LabelCounts() map[string]int {
	out := make(map[string]int, len(m.counts))
	for k, v := range m.counts {
		out[k] = v
	}
	return out
}

// TrainingAccuracy is the share of training examples the model labels right.
func (m *Model) TrainingAccuracy() float64 { return m.trainAcc }

// HeldOutAccuracy is the arg-max accuracy on the calibration examples
// (Validation, else the held-out tenth, scored by the model trained
// without them) and how many there were; 0, 0 when none were held out.
func (m *Model) HeldOutAccuracy() (float64, int) { return m.heldOutAcc, m.heldOut }

// Temperature is the fitted softmax temperature (1 when uncalibrated).
func (m *Model) Temperature() float64 { return m.temperature }

// Threshold is the out-of-scope gate in use: Options.Threshold, or the
// tuned one with Options.TuneThreshold.
func (m *Model) Threshold() float64 { return m.opts.Threshold }

type scratch struct {
	e   extractor
	x   []feat
	z   []float64
	acc []float32
}

// Probabilities returns the calibrated probability of every label, in
// Labels order, without the out-of-scope gate.
func (m *Model) Probabilities(text string) []float64 {
	s := m.scratch()
	defer m.pool.Put(s)
	return append([]float64(nil), m.probabilities(s, text)...)
}

func (m *Model) scratch() *scratch {
	if s, ok := m.pool.Get().(*scratch); ok {
		return s
	}
	return &scratch{z: make([]float64, len(m.labels)), acc: make([]float32, len(m.labels))}
}

func (m *Model) probabilities(s *scratch, text string) []float64 {
	s.x = s.e.vectorize(s.x, textutil.CutBytes(text, MaxTextBytes, ""), m.index, m.idf)
	m.lin.scores(s.z, s.acc, s.x)
	for c := range s.z {
		s.z[c] /= m.temperature
	}
	softmaxInPlace(s.z)
	return s.z
}

// Classify labels text. Texts longer than MaxTextBytes are cut there.
func (m *Model) Classify(text string) Result {
	s := m.scratch()
	defer m.pool.Put(s)
	p := m.probabilities(s, text)
	// Top MaxAlternatives+1 labels by probability, ties by label order.
	n := min(m.opts.MaxAlternatives+1, len(p))
	var topBuf [8]int // on the stack for the usual few alternatives
	top := topBuf[:0]
	for c := range p {
		i := len(top)
		for i > 0 && p[top[i-1]] < p[c] {
			i--
		}
		if i < n {
			top = slices.Insert(top, i, c)
			if len(top) > n {
				top = top[:n]
			}
		}
	}
	r := Result{Label: m.labels[top[0]], Confidence: p[top[0]], Alternatives: make([]Alternative, 0, len(top)-1)}
	for _, c := range top[1:] {
		r.Alternatives = append(r.Alternatives, Alternative{Label: m.labels[c], Confidence: p[c]})
	}
	if m.opts.Threshold > 0 && r.Confidence < m.opts.Threshold && m.opts.OutOfScopeLabel != "" && r.Label != m.opts.OutOfScopeLabel {
		alts := []Alternative{{Label: r.Label, Confidence: r.Confidence}}
		for _, a := range r.Alternatives {
			if a.Label != m.opts.OutOfScopeLabel {
				alts = append(alts, a)
			}
		}
		r.Alternatives = alts[:min(len(alts), m.opts.MaxAlternatives)]
		r.Label = m.opts.OutOfScopeLabel
	}
	if len(r.Alternatives) == 0 {
		r.Alternatives = nil
	}
	return r
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], "...")
	}
	return out
}
