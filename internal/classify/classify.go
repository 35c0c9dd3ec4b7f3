// Package classify trains text classifiers from labelled examples and applies
// them: the first hop of context detection (intent, domain, urgency ...).
// It is pure Go with no Kubernetes client; the engine compiles one Model per
// ContextClassifier and calls Classify once per query.
package classify

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/contextrouter/contextrouter/internal/tokenize"
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
	// Zero disables the gate.
	Threshold float64
	// MaxAlternatives caps Result.Alternatives (default 3).
	MaxAlternatives int
}

// Alternative is a runner-up label.
type Alternative struct {
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
}

// Result is one classification.
type Result struct {
	Label        string        `json:"label"`
	Confidence   float64       `json:"confidence"`
	Alternatives []Alternative `json:"alternatives,omitempty"`
}

// Model is a trained classifier. It is safe for concurrent use.
type Model struct {
	opts      Options
	labels    []string
	counts    map[string]int
	centroids []map[string]float64
	trainAcc  float64
}

// ErrNoExamples is returned by Train when there is nothing to learn from.
var ErrNoExamples = errors.New("no examples")

// Train learns a model from examples.
func Train(examples []Example, opts Options) (*Model, error) {
	if len(examples) == 0 {
		return nil, ErrNoExamples
	}
	if opts.MaxAlternatives == 0 {
		opts.MaxAlternatives = 3
	}
	m := &Model{opts: opts, counts: map[string]int{}}
	for i, ex := range examples {
		if ex.Label == "" {
			return nil, fmt.Errorf("example %d: empty label", i+1)
		}
		m.counts[ex.Label]++
	}
	for l := range m.counts {
		m.labels = append(m.labels, l)
	}
	sort.Strings(m.labels)
	index := map[string]int{}
	for i, l := range m.labels {
		index[l] = i
	}
	m.centroids = make([]map[string]float64, len(m.labels))
	for i := range m.centroids {
		m.centroids[i] = map[string]float64{}
	}
	for _, ex := range examples {
		c := m.centroids[index[ex.Label]]
		for t, w := range vector(ex.Text) {
			c[t] += w
		}
	}
	for _, c := range m.centroids {
		normalize(c)
	}
	right := 0
	for _, ex := range examples {
		if m.best(ex.Text) == ex.Label {
			right++
		}
	}
	m.trainAcc = float64(right) / float64(len(examples))
	return m, nil
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

func (m *Model) best(text string) string {
	r := m.Classify(text)
	if len(r.Alternatives) > 0 && r.Label == m.opts.OutOfScopeLabel && m.counts[r.Label] == 0 {
		return r.Alternatives[0].Label
	}
	return r.Label
}

// Classify labels text.
func (m *Model) Classify(text string) Result {
	v := vector(text)
	scores := make([]float64, len(m.labels))
	for i, c := range m.centroids {
		for t, w := range v {
			scores[i] += w * c[t]
		}
	}
	// Softmax with a fixed temperature: a placeholder calibration.
	maxS := math.Inf(-1)
	for _, s := range scores {
		maxS = math.Max(maxS, s)
	}
	sum := 0.0
	for i, s := range scores {
		scores[i] = math.Exp((s - maxS) * 10)
		sum += scores[i]
	}
	order := make([]int, len(scores))
	for i := range order {
		order[i] = i
		scores[i] /= sum
	}
	sort.SliceStable(order, func(a, b int) bool { return scores[order[a]] > scores[order[b]] })
	r := Result{Label: m.labels[order[0]], Confidence: scores[order[0]]}
	for _, i := range order[1:] {
		if len(r.Alternatives) == m.opts.MaxAlternatives {
			break
		}
		r.Alternatives = append(r.Alternatives, Alternative{Label: m.labels[i], Confidence: scores[i]})
	}
	if m.opts.Threshold > 0 && r.Confidence < m.opts.Threshold && m.opts.OutOfScopeLabel != "" {
		r.Alternatives = append([]Alternative{{Label: r.Label, Confidence: r.Confidence}}, r.Alternatives...)
		if len(r.Alternatives) > m.opts.MaxAlternatives {
			r.Alternatives = r.Alternatives[:m.opts.MaxAlternatives]
		}
		r.Label = m.opts.OutOfScopeLabel
	}
	return r
}

func vector(text string) map[string]float64 {
	v := map[string]float64{}
	for _, t := range tokenize.Terms(nil, text) {
		v[t]++
	}
	normalize(v)
	return v
}

func normalize(v map[string]float64) {
	n := 0.0
	for _, w := range v {
		n += w * w
	}
	if n == 0 {
		return
	}
	n = math.Sqrt(n)
	for k := range v {
		v[k] /= n
	}
}
