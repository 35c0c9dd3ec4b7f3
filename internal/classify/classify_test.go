package classify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// toy is a separable three-label set with out-of-scope examples.
var toy = []Example{
	{"I want my money back", "refund"},
	{"refund my order please", "refund"},
	{"can I get a refund for this", "refund"},
	{"return the item and refund me", "refund"},
	{"money back for the broken order", "refund"},
	{"where is my parcel", "shipping"},
	{"track my package delivery", "shipping"},
	{"when will the parcel arrive", "shipping"},
	{"delivery status of my package", "shipping"},
	{"has my package shipped yet", "shipping"},
	{"reset my password", "account"},
	{"I cannot log in to my account", "account"},
	{"change the email on my account", "account"},
	{"forgot my password again", "account"},
	{"delete my account login", "account"},
}

var toyOOS = []Example{
	{"tell me a joke about cats", "oos"},
	{"what is the capital of peru", "oos"},
	{"play some jazz music", "oos"},
	{"how tall is mount everest", "oos"},
	{"recommend a movie for tonight", "oos"},
}

func TestClassifyLearnsLabels(t *testing.T) {
	withOOS := append(slices.Clone(toy), toyOOS...)
	for _, tc := range []struct {
		name     string
		examples []Example
		opts     Options
		text     string
		want     string
	}{
		{"refund", toy, Options{}, "please refund the order", "refund"},
		{"shipping", toy, Options{}, "track the parcel", "shipping"},
		{"account", toy, Options{}, "I forgot the password of my login", "account"},
		{"unstemmed variant", toy, Options{}, "refunding orders", "refund"},
		{"empty label list is no list", toy, Options{Labels: []string{}}, "track the parcel", "shipping"},
		{"gate: nothing known", toy, Options{OutOfScopeLabel: "oos", Threshold: 0.5}, "zzxq vvkj", "oos"},
		{"gate: known text passes", toy, Options{OutOfScopeLabel: "oos", Threshold: 0.5}, "track my parcel delivery", "shipping"},
		{"trained oos label", withOOS, Options{OutOfScopeLabel: "oos"}, "tell me a joke about dogs", "oos"},
		{"trained oos keeps in-scope", withOOS, Options{OutOfScopeLabel: "oos"}, "where is my package", "shipping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Train(tc.examples, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got := m.Classify(tc.text)
			if got.Label != tc.want {
				t.Errorf("Classify(%q) = %+v, want %s", tc.text, got, tc.want)
			}
			if got.Confidence <= 0 || got.Confidence > 1 {
				t.Errorf("confidence %v outside (0, 1]", got.Confidence)
			}
		})
	}
}

func TestClassifyGate(t *testing.T) {
	m, err := Train(toy, Options{OutOfScopeLabel: "oos", Threshold: 0.9, MaxAlternatives: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := m.Classify("zzxq vvkj")
	p := m.Probabilities("zzxq vvkj")
	best := slices.Max(p)
	if r.Label != "oos" || r.Confidence != best {
		t.Fatalf("gated result %+v, want label oos with the best confidence %v", r, best)
	}
	if len(r.Alternatives) != 2 || r.Alternatives[0].Confidence != best {
		t.Errorf("gated alternatives %+v: want the best label first, capped at 2", r.Alternatives)
	}
	// No gate without an out-of-scope label.
	m, _ = Train(toy, Options{Threshold: 0.9})
	if r := m.Classify("zzxq vvkj"); r.Label == "oos" || r.Label == "" {
		t.Errorf("without OutOfScopeLabel the gate fired: %+v", r)
	}
}

func TestClassifyAlternatives(t *testing.T) {
	var ex []Example
	for i := range 6 {
		for j := range 3 {
			ex = append(ex, Example{fmt.Sprintf("topic%d word%d common", i, j), fmt.Sprintf("l%d", i)})
		}
	}
	for _, tc := range []struct {
		max, want int
	}{{0, 3}, {1, 1}, {2, 2}, {10, 5}} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			m, err := Train(ex, Options{MaxAlternatives: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			r := m.Classify("topic3 common")
			if r.Label != "l3" {
				t.Errorf("label %s, want l3", r.Label)
			}
			if len(r.Alternatives) != tc.want {
				t.Fatalf("%d alternatives, want %d: %+v", len(r.Alternatives), tc.want, r.Alternatives)
			}
			prev := r.Confidence
			for _, a := range r.Alternatives {
				if a.Label == r.Label || a.Confidence > prev {
					t.Errorf("alternatives not sorted below the label: %+v", r)
				}
				prev = a.Confidence
			}
			sum := 0.0
			for _, p := range m.Probabilities("topic3 common") {
				sum += p
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Errorf("probabilities sum to %v", sum)
			}
		})
	}
}

// synthetic makes n examples per label over k labels: one or two label words among
// shared noise words, so the set is learnable but not trivially.
func synthetic(k, n int, seed uint64) []Example {
	rng := rand.New(rand.NewPCG(seed, 1))
	noise := []string{"please", "can", "you", "the", "my", "help", "now", "want", "need", "about"}
	var out []Example
	for l := range k {
		for range n {
			var w []string
			for range 4 {
				w = append(w, noise[rng.IntN(len(noise))])
			}
			key := fmt.Sprintf("key%dx", l)
			if rng.IntN(5) == 0 { // some examples carry a neighbour's word
				key = fmt.Sprintf("key%dx", (l+1)%k)
			}
			w = append(w, key)
			if rng.IntN(2) == 0 {
				w = append(w, fmt.Sprintf("alt%dy", l))
			}
			rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
			out = append(out, Example{Text: strings.Join(w, " "), Label: fmt.Sprintf("label%02d", l)})
		}
	}
	return out
}

func TestTrainDeterministic(t *testing.T) {
	ex := synthetic(8, 40, 1)
	val := synthetic(8, 5, 2)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"held-out tenth", Options{}},
		{"validation set", Options{Validation: val}},
		{"seed", Options{Seed: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Train(ex, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Train(ex, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.lin.w, b.lin.w) || !slices.Equal(a.lin.b, b.lin.b) || a.Temperature() != b.Temperature() {
				t.Fatal("two trainings on the same examples differ")
			}
			if a.Temperature() == 1 {
				t.Errorf("temperature not fitted (held out %d)", a.heldOut)
			}
			if acc, n := a.HeldOutAccuracy(); n == 0 || acc < 0.5 {
				t.Errorf("held-out accuracy %v on %d examples", acc, n)
			}
			for _, e := range val {
				if ra, rb := a.Classify(e.Text), b.Classify(e.Text); !slicesEqualResult(ra, rb) {
					t.Fatalf("Classify(%q): %+v vs %+v", e.Text, ra, rb)
				}
			}
		})
	}
	a, _ := Train(ex, Options{Seed: 1})
	b, _ := Train(ex, Options{Seed: 2})
	if slices.Equal(a.lin.w, b.lin.w) {
		t.Error("different seeds gave identical weights: the seed is not used")
	}
}

func slicesEqualResult(a, b Result) bool {
	return a.Label == b.Label && a.Confidence == b.Confidence && slices.Equal(a.Alternatives, b.Alternatives)
}

func TestTrainBounds(t *testing.T) {
	many := make([]Example, MaxExamples+1)
	for i := range many {
		many[i] = Example{"hello there", "greet"}
	}
	var labels []Example
	for i := range MaxLabels + 1 {
		labels = append(labels, Example{"hello", fmt.Sprint("l", i)})
	}
	long := strings.Repeat("word ", MaxTextBytes/5+1)
	for _, tc := range []struct {
		name     string
		examples []Example
		opts     Options
		want     error
		msg      string
	}{
		{"no examples", nil, Options{}, ErrNoExamples, ""},
		{"too many examples", many, Options{}, ErrTooManyExamples, "200001 examples"},
		{"too many validation examples", toy, Options{Validation: many}, ErrTooManyExamples, "validation"},
		{"too many labels", labels, Options{}, ErrTooManyLabels, "1001 labels"},
		{"too long label list", toy, Options{Labels: slices.Repeat([]string{"x"}, MaxLabels+1)}, ErrTooManyLabels, "label list"},
		{"empty label", []Example{{"hi", "a"}, {"yo", ""}}, Options{}, ErrEmptyLabel, "example 2"},
		{"long label", []Example{{"hi", strings.Repeat("x", MaxLabelBytes+1)}}, Options{}, ErrLabelTooLong, "example 1"},
		{"long text", []Example{{"hi", "a"}, {long, "b"}}, Options{}, ErrTextTooLong, "example 2"},
		{"no words", []Example{{"hi", "a"}, {" ?! ", "b"}}, Options{}, ErrEmptyText, `label "b"`},
		{"listed label without examples", toy, Options{Labels: []string{"refund", "shipping", "account", "billing"}}, ErrLabelWithoutExamples, `"billing"`},
		{"example label not listed", toy, Options{Labels: []string{"refund", "shipping"}}, ErrUnknownLabel, `label "account"`},
		{"negative alternatives", toy, Options{MaxAlternatives: -1}, ErrBadOption, "maxAlternatives is -1"},
		{"threshold above 1", toy, Options{Threshold: 1.5}, ErrBadOption, "threshold is 1.5"},
		{"threshold below 0", toy, Options{Threshold: -0.1}, ErrBadOption, "threshold is -0.1"},
		{"validation label unknown", toy, Options{Validation: []Example{{"hi", "weather"}}}, ErrUnknownLabel, "validation: example 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Train(tc.examples, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if m != nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err %q should name %q (model %v)", err, tc.msg, m != nil)
			}
		})
	}
	// Classify cuts a long query instead of failing.
	m, err := Train(toy, Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := "refund " + strings.Repeat("x", 2*MaxTextBytes)
	if got, want := m.Classify(q), m.Classify(q[:MaxTextBytes]); !slicesEqualResult(got, want) {
		t.Errorf("long query: %+v, want the result of its first %d bytes %+v", got, MaxTextBytes, want)
	}
}

func TestFitTemperature(t *testing.T) {
	// Logits (2, 0) whose label is 0 with probability sigmoid(2/T) for T=2.
	var logits [][]float64
	var y []int
	p := 1 / (1 + math.Exp(-1.0))
	for i := range 1000 {
		logits = append(logits, []float64{2, 0})
		if float64(i) < p*1000 {
			y = append(y, 0)
		} else {
			y = append(y, 1)
		}
	}
	if got := fitTemperature(logits, y); math.Abs(got-2) > 0.02 {
		t.Errorf("temperature %v, want 2", got)
	}
	// A held-out set the model gets all right pulls T to the floor, not to 0.
	sure := [][]float64{{3, 0}, {0, 3}}
	if got := fitTemperature(sure, []int{0, 1}); math.Abs(got-0.25) > 0.01 {
		t.Errorf("all right: temperature %v, want the floor 0.25", got)
	}
	if got := fitTemperature(nil, nil); got != 1 {
		t.Errorf("no logits: temperature %v, want 1", got)
	}
}

func TestTuneThreshold(t *testing.T) {
	// Labels a=0, b=1, oos=2; rows are probabilities (temperature 1).
	rows := [][]float64{
		{0.9, 0.05, 0.05}, // a, right while t <= 0.9
		{0.8, 0.1, 0.1},   // a, right while t <= 0.8
		{0.5, 0.3, 0.2},   // b, wrong whatever t
		{0.4, 0.3, 0.3},   // oos, right once t > 0.4
		{0.2, 0.1, 0.7},   // oos, predicted oos: always right
		{0.6, 0.2, 0.2},   // a, right while t <= 0.6
	}
	y := []int{0, 0, 1, 2, 2, 0}
	logits := make([][]float64, len(rows))
	for i, r := range rows {
		for _, p := range r {
			logits[i] = append(logits[i], math.Log(p))
		}
	}
	// 5 of 6 right for t in [0.41, 0.60]: the lowest is kept.
	got, ok := tuneThreshold(logits, y, 1, 2)
	if !ok || got != 0.41 {
		t.Errorf("threshold %v %v, want 0.41", got, ok)
	}
	if _, ok := tuneThreshold(logits[:3], y[:3], 1, 2); ok {
		t.Error("tuned without out-of-scope examples")
	}
}

func TestTuneThresholdOnValidation(t *testing.T) {
	ex := synthetic(6, 30, 3)
	val := synthetic(6, 5, 4)
	for i := range 10 {
		val = append(val, Example{fmt.Sprintf("other%d talk", i), "oos"})
	}
	m, err := Train(ex, Options{OutOfScopeLabel: "oos", Validation: val, TuneThreshold: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Threshold() <= 0 || m.Threshold() >= 1 {
		t.Errorf("tuned threshold %v", m.Threshold())
	}
	if r := m.Classify("other99 talk"); r.Label != "oos" {
		t.Errorf("unseen chatter: %+v, want oos", r)
	}
	if r := m.Classify(val[0].Text); r.Label != val[0].Label {
		t.Errorf("in-scope %q: %+v, want %s", val[0].Text, r, val[0].Label)
	}
	if slices.Contains(m.Labels(), "oos") {
		t.Errorf("labels %v: the untrained out-of-scope label is not a model label", m.Labels())
	}
}

// BenchmarkClassify measures one classification with a CLINC150 model (150
// intents + oos) when the eval data is present, else a synthetic 150-label one.
func BenchmarkClassify(b *testing.B) {
	benchOnce.Do(func() { benchModel, benchErr = trainBenchModel(b) })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	m := benchModel
	queries := []string{"how would i say thank you in german", "what is my bank balance", "set an alarm for 7am tomorrow", "tell me something about penguins"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Classify(queries[i%len(queries)])
	}
}

// The benchmark model is trained once per test binary: Go calls a
// benchmark function several times.
var (
	benchOnce  sync.Once
	benchModel *Model
	benchErr   error
)

func trainBenchModel(b *testing.B) (*Model, error) {
	if _, err := os.Stat(filepath.Join(evalDir, "clinc150/train.jsonl")); err == nil {
		return Train(loadJSONL(b, filepath.Join(evalDir, "clinc150/train.jsonl")), Options{OutOfScopeLabel: "oos", Threshold: 0.2})
	}
	b.Log("no CLINC150 under " + evalDir + ": synthetic 150-label model")
	return Train(synthetic(150, 20, 5), Options{OutOfScopeLabel: "oos", Threshold: 0.2})
}

func TestVocabularyBounds(t *testing.T) {
	ex := []Example{{"alpha beta", "a"}, {"alpha gamma", "b"}, {"alpha beta delta", "a"}}
	df := func(m *Model, word string) int {
		_, ok := m.index.lookup(fnv(kindWord, tokenize.Stem(word)))
		if ok {
			return 1
		}
		return 0
	}
	all := &Model{labels: []string{"a", "b"}}
	all.buildVocabulary(ex, 1, MaxParameters)
	capped := &Model{labels: []string{"a", "b"}}
	capped.buildVocabulary(ex, 1, 2*4) // 4 features for 2 labels
	if len(capped.idf) != 4 || len(all.idf) <= 4 {
		t.Fatalf("features: capped %d (want 4), uncapped %d", len(capped.idf), len(all.idf))
	}
	// The kept ones are the most frequent: features of "alpha" (in all 3
	// texts), not "delta" (in 1).
	var e extractor
	e.hash("alpha")
	capped.index.each(func(id uint32) {
		if !slices.Contains(e.word, id) && !slices.Contains(e.char, id) {
			t.Errorf("capped vocabulary kept %d, not a feature of alpha", id)
		}
	})
	if df(capped, "delta") != 0 || df(all, "delta") != 1 {
		t.Errorf("delta: capped %d, uncapped %d", df(capped, "delta"), df(all, "delta"))
	}
	twice := &Model{labels: []string{"a", "b"}}
	twice.buildVocabulary(ex, 2, MaxParameters)
	if df(twice, "alpha") != 1 || df(twice, "beta") != 1 || df(twice, "gamma") != 0 {
		t.Errorf("minDF 2 kept a feature of one text or dropped one of two")
	}
}

func TestClassifyConcurrent(t *testing.T) {
	m, err := Train(synthetic(5, 20, 9), Options{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"key1x please", "alt3y now", "key4x help alt4y", "nothing known", "key0x key2x"}
	want := make([]Result, len(texts))
	for i, q := range texts {
		want[i] = m.Classify(q)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(texts))
	for range 8 {
		wg.Go(func() {
			for range 50 {
				for i, q := range texts {
					if got := m.Classify(q); !slicesEqualResult(got, want[i]) {
						errs <- fmt.Sprintf("%q: %+v, want %+v", q, got, want[i])
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestSingleLabel(t *testing.T) {
	m, err := Train([]Example{{"hello there", "greet"}, {"hi", "greet"}}, Options{OutOfScopeLabel: "oos", Threshold: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Classify("anything at all"); r.Label != "greet" || r.Confidence != 1 || r.Alternatives != nil {
		t.Errorf("one label: %+v, want greet with confidence 1 and no alternatives", r)
	}
}

// TestWordMemoBounds: an extractor remembers at most maxMemo words of at
// most maxMemoWord bytes, and remembered or not, a text gets the vector a
// fresh extractor gives it.
func TestWordMemoBounds(t *testing.T) {
	m, err := Train(synthetic(5, 10, 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e extractor
	long := strings.Repeat("w", maxMemoWord+1)
	texts := []string{"w0x1 w2y3 and " + long, long + " w0x1"}
	for i := range maxMemo + 100 {
		texts = append(texts, fmt.Sprintf("w%dx%d again w0x1", i, i%7))
	}
	texts = append(texts, "w0x1 w2y3 and "+long)
	var x []feat
	for _, text := range texts {
		x = e.vectorize(x, text, m.index, m.idf)
		var fresh extractor
		if want := fresh.vectorize(nil, text, m.index, m.idf); !slices.Equal(x, want) {
			t.Fatalf("%q: memoised vector %v, fresh %v", text, x, want)
		}
	}
	if len(e.memos) != maxMemo {
		t.Errorf("%d words remembered, want the bound %d", len(e.memos), maxMemo)
	}
	if _, ok := e.memos[long]; ok {
		t.Errorf("a word of %d bytes was remembered", len(long))
	}
}
