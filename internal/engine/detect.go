package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"golang.org/x/sync/singleflight"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/classify"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/lru"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/textutil"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Bounds of detection results. The cost check sizes every string, list and
// map under `detected` and `entities` at MaxDetectedSize.
const (
	// MaxEntities is the most entities one query reports.
	MaxEntities = 256
	// MaxEntityValueBytes bounds an entity's value; longer matches are skipped.
	MaxEntityValueBytes = 256
	// MaxDetectedSize bounds every string, list and map under detected and entities.
	MaxDetectedSize = 256
	// MaxDetect bounds the request's detect list.
	MaxDetect = 16
)

// Detection is what a query detected (api.md §6.2): present only when the
// query ran detection.
type Detection struct {
	Classifiers map[string]ClassifierResult `json:"classifiers"`
	Entities    []Entity                    `json:"entities"`
}

// ClassifierResult is one classifier's answer.
type ClassifierResult struct {
	Label        string                 `json:"label"`
	Confidence   float64                `json:"confidence"`
	Alternatives []classify.Alternative `json:"alternatives"`
}

// Entity is one match of an extractor; Start and End are byte offsets into
// the question (End exclusive).
type Entity struct {
	Type  string `json:"type"`
	Value string `json:"value"`
	Start int    `json:"start"`
	End   int    `json:"end"`
}

// ClassifierStatus describes a compiled classifier (validate, status).
type ClassifierStatus struct {
	Name string `json:"name"`
	// Labels maps each learned label to its number of examples; nil when the
	// classifier was not trained (its examples are in a file not read).
	Labels           map[string]int `json:"labels,omitempty"`
	TrainingAccuracy float64        `json:"training_accuracy"`
	Trained          bool           `json:"trained"`
	Extractors       int            `json:"extractors"`
}

type classifierState struct {
	name   string
	model  *classify.Model // nil when not trained (SkipLoad with examplesFrom)
	labels map[string]bool
}

type extractor struct {
	typ  string
	pat  *entityPattern
	dict *dictionary
}

// dictionary matches word sequences, compared in lower case (simple folding).
type dictionary struct {
	// first maps a value's first word to the word sequences that start with it.
	first map[string][][]string
}

// maxModelCache bounds the trained models kept (each is up to a few MB).
const maxModelCache = 64

// modelCache keeps trained models by what they were trained on: the
// operator and serve recompile on every change of any object, and training
// is the expensive part of a classifier.
var modelCache = newTrainCache(maxModelCache, classify.Train)

// trainCache is a memo of trained models keyed by classify.Options.Key
// (the examples and every option): a bounded LRU, so a configuration of one
// classifier past the bound retrains one, not all; and one training per key
// at a time, so compiles racing on one classifier (serve's reload and the
// operator's reconcilers) wait for one training instead of each running it.
type trainCache struct {
	models *lru.Cache[string, *classify.Model]
	flight singleflight.Group
	train  func([]classify.Example, classify.Options) (*classify.Model, error)
}

func newTrainCache(bound int, train func([]classify.Example, classify.Options) (*classify.Model, error)) *trainCache {
	return &trainCache{models: lru.New[string, *classify.Model](bound), train: train}
}

// get returns the model trained on examples with opts, training it when no
// caller has. A failed training is not kept: the next compile tries again.
func (c *trainCache) get(examples []classify.Example, opts classify.Options) (*classify.Model, error) {
	key := opts.Key(examples)
	if m, ok := c.models.Get(key); ok {
		return m, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		// A flight that ended between the look-up above and this one has
		// added its model.
		if m, ok := c.models.Get(key); ok {
			return m, nil
		}
		m, err := c.train(examples, opts)
		if err != nil {
			return nil, err
		}
		c.models.Add(key, m)
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*classify.Model), nil
}

// ParseExamples reads a JSONL examples file: one {"text", "label"} object a
// line, blank lines skipped. Errors name the file and the line.
func ParseExamples(file, content string) ([]classify.Example, error) {
	var out []classify.Example
	sc := bufio.NewScanner(strings.NewReader(content))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line, textBytes := 0, 0
	labels := map[string]bool{}
	for sc.Scan() {
		line++
		raw := strings.TrimSpace(sc.Text())
		if raw == "" {
			continue
		}
		var ex struct {
			Text  *string `json:"text"`
			Label *string `json:"label"`
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ex); err != nil {
			return nil, fmt.Errorf("%s:%d: invalid JSON: %v (want {\"text\": ..., \"label\": ...})", file, line, err)
		}
		if ex.Text == nil || ex.Label == nil {
			return nil, fmt.Errorf("%s:%d: want {\"text\": ..., \"label\": ...}, both strings", file, line)
		}
		if msg := v1alpha1.ExampleTextError(*ex.Text); msg != "" {
			return nil, fmt.Errorf("%s:%d: text: %s", file, line, msg)
		}
		if errs := v1alpha1.ValidateLabelName(nil, *ex.Label); len(errs) > 0 {
			return nil, fmt.Errorf("%s:%d: label %q: %s", file, line, *ex.Label, errs[0].ErrorBody())
		}
		// The file's own totals; with the inline examples, the load checks them again.
		textBytes += len(*ex.Text)
		labels[*ex.Label] = true
		if msg := v1alpha1.ExampleTotalsError(len(out)+1, textBytes, len(labels)); msg != "" {
			return nil, fmt.Errorf("%s:%d: %s", file, line, msg)
		}
		out = append(out, classify.Example{Text: *ex.Text, Label: *ex.Label})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", file, line+1, err)
	}
	return out, nil
}

// ParseDictionary reads a dictionary file: one value a line, blank lines
// and lines starting with # skipped, at most MaxDictionaryValues values of
// at most MaxDictionaryValueSize bytes. Errors name the file and the line.
func ParseDictionary(file, content string) ([]string, error) {
	var out []string
	for i, line := range strings.Split(content, "\n") {
		v := strings.TrimSpace(line)
		switch {
		case v == "" || strings.HasPrefix(v, "#"):
			continue
		case len(v) > v1alpha1.MaxDictionaryValueSize:
			return nil, fmt.Errorf("%s:%d: %d bytes; dictionary values are limited to %d bytes", file, i+1, len(v), v1alpha1.MaxDictionaryValueSize)
		case len(out) == v1alpha1.MaxDictionaryValues:
			return nil, fmt.Errorf("%s:%d: more than %d values; a dictionary is limited to %d", file, i+1, v1alpha1.MaxDictionaryValues, v1alpha1.MaxDictionaryValues)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no values", file)
	}
	return out, nil
}

// compileClassifier trains a classifier and compiles its extractors. read
// returns the examplesFrom file's content; nil means files are not read
// (SkipLoad), and a classifier with examplesFrom is then left untrained.
func compileClassifier(c *v1alpha1.ContextClassifier, read func(*v1alpha1.SourceFile) (string, error), add func(field, msg string)) (*classifierState, []extractor) {
	st := &classifierState{name: c.Name}
	var xs []extractor
	for i, x := range c.Spec.Entities {
		e := extractor{typ: x.Type}
		switch {
		case x.Dictionary != nil && x.Dictionary.ValuesFrom != nil:
			if read == nil {
				continue // files are not read (SkipLoad)
			}
			field := fmt.Sprintf("spec.entities[%d].dictionary.valuesFrom", i)
			content, err := read(x.Dictionary.ValuesFrom)
			if err != nil {
				add(field, err.Error())
				continue
			}
			values, err := ParseDictionary(x.Dictionary.ValuesFrom.Path, content)
			if err != nil {
				add(field, err.Error())
				continue
			}
			e.dict = newDictionary(values)
		case x.Dictionary != nil:
			e.dict = newDictionary(x.Dictionary.Values)
		default:
			pat, err := newEntityPattern(x.Pattern)
			if err != nil {
				add(fmt.Sprintf("spec.entities[%d].pattern", i), err.Error())
				continue
			}
			e.pat = pat
		}
		xs = append(xs, e)
	}
	var examples []classify.Example
	for i, l := range c.Spec.Labels {
		if len(l.Examples) == 0 {
			// Validate refuses it first; a hand-built config fails here too.
			add(fmt.Sprintf("spec.labels[%d].examples", i), "a label needs at least one example")
		}
		for _, t := range l.Examples {
			examples = append(examples, classify.Example{Text: t, Label: l.Name})
		}
	}
	if f := c.Spec.ExamplesFrom; f != nil {
		if read == nil {
			return st, xs
		}
		content, err := read(f)
		if err != nil {
			add("spec.examplesFrom", err.Error())
			return st, xs
		}
		more, err := ParseExamples(f.Path, content)
		if err != nil {
			add("spec.examplesFrom", err.Error())
			return st, xs
		}
		examples = append(examples, more...)
	}
	// Only the out-of-scope label may go without examples.
	counts := map[string]int{}
	textBytes := 0
	for _, ex := range examples {
		counts[ex.Label]++
		textBytes += len(ex.Text)
	}
	if msg := v1alpha1.ExampleTotalsError(len(examples), textBytes, len(counts)); msg != "" {
		add("spec", msg+" (inline and examplesFrom together)")
		return st, xs
	}
	if len(counts) == 0 {
		add("spec.labels", "no examples: a classifier needs examples of at least one label")
		return st, xs
	}
	threshold, _ := strconv.ParseFloat(c.Spec.Threshold, 64)
	m, err := modelCache.get(examples, classify.Options{OutOfScopeLabel: c.Spec.OutOfScopeLabel, Threshold: threshold, MaxAlternatives: int(c.Spec.MaxAlternatives)})
	if err != nil {
		add("spec", "training failed: "+err.Error())
		return st, xs
	}
	st.model = m
	st.labels = map[string]bool{}
	for _, l := range m.Labels() {
		st.labels[l] = true
	}
	if c.Spec.OutOfScopeLabel != "" {
		st.labels[c.Spec.OutOfScopeLabel] = true
	}
	return st, xs
}

func newDictionary(values []string) *dictionary {
	d := &dictionary{first: map[string][][]string{}}
	for _, v := range values {
		words := foldedWords(v)
		if len(words) == 0 {
			continue
		}
		d.first[words[0]] = append(d.first[words[0]], words)
	}
	// Longer values first, so that "data science" wins over "data".
	for k, seqs := range d.first {
		sort.SliceStable(seqs, func(i, j int) bool { return len(seqs[i]) > len(seqs[j]) })
		d.first[k] = seqs
	}
	return d
}

// span is one word of the question: its folded text (buf[lo:hi] of its
// questionWords call) and its byte offsets in the question.
type span struct {
	lo, hi     int
	start, end int
}

// questionWords splits s into maximal runs of letters, digits and marks,
// folded to lower case into one buffer: no allocation per word.
func questionWords(s string) ([]span, []byte) {
	return appendQuestionWords(nil, make([]byte, 0, len(s)), s)
}

// appendQuestionWords is questionWords appending to out and buf.
func appendQuestionWords(out []span, buf []byte, s string) ([]span, []byte) {
	start := -1
	lo := 0
	for i, r := range s {
		if tokenize.IsWordRune(r) {
			if start < 0 {
				start, lo = i, len(buf)
			}
			if r < utf8.RuneSelf {
				if 'A' <= r && r <= 'Z' {
					r += 'a' - 'A'
				}
				buf = append(buf, byte(r))
			} else {
				buf = utf8.AppendRune(buf, unicode.ToLower(r))
			}
			continue
		}
		if start >= 0 {
			out = append(out, span{lo, len(buf), start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, span{lo, len(buf), start, len(s)})
	}
	return out, buf
}

func foldedWords(s string) []string {
	ws, buf := questionWords(s)
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(buf[w.lo:w.hi])
	}
	return out
}

// extractEntities runs every extractor on text; the result is sorted and
// deterministic, at most MaxEntities long. It stops with ctx's error when
// ctx ends (between extractors, and between the steps of a pattern).
func extractEntities(ctx context.Context, text string, xs []extractor) ([]Entity, error) {
	out := []Entity{}
	var words []span
	var buf []byte
	var ws *wordScratch
	defer func() {
		if ws != nil {
			wordScratchPool.Put(ws)
		}
	}()
	for _, x := range xs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if x.pat != nil {
			if !strings.Contains(text, x.pat.lit) {
				continue
			}
			var err error
			if out, err = x.pat.find(ctx, text, x.typ, out); err != nil {
				return nil, err
			}
			continue
		}
		if ws == nil {
			ws = wordScratchPool.Get().(*wordScratch)
			ws.words, ws.buf = appendQuestionWords(ws.words[:0], ws.buf[:0], text)
			words, buf = ws.words, ws.buf
		}
		for i := 0; i < len(words); i++ {
			for _, seq := range x.dict.first[string(buf[words[i].lo:words[i].hi])] {
				if i+len(seq) > len(words) || !matchSeq(buf, words[i:i+len(seq)], seq) {
					continue
				}
				start, end := words[i].start, words[i+len(seq)-1].end
				if end-start <= MaxEntityValueBytes {
					out = append(out, Entity{Type: x.typ, Value: text[start:end], Start: start, End: end})
				}
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b Entity) int {
		switch {
		case a.Start != b.Start:
			return a.Start - b.Start
		case a.End != b.End:
			return b.End - a.End
		case a.Type != b.Type:
			return strings.Compare(a.Type, b.Type)
		}
		return strings.Compare(a.Value, b.Value)
	})
	out = slices.CompactFunc(out, func(a, b Entity) bool { return a == b })
	if len(out) > MaxEntities {
		out = out[:MaxEntities]
	}
	return out, nil
}

// wordScratch holds a query's words for the dictionaries: entity values
// are slices of the text, never of these buffers, so they go back to the
// pool after extraction.
type wordScratch struct {
	words []span
	buf   []byte
}

var wordScratchPool = sync.Pool{New: func() any { return new(wordScratch) }}

func matchSeq(buf []byte, words []span, seq []string) bool {
	for i, w := range seq {
		if string(buf[words[i].lo:words[i].hi]) != w {
			return false
		}
	}
	return true
}

// detector runs detection for one query, once, on first use.
type detector struct {
	s *Snapshot
	// ctx is the query's: entity extraction stops when it ends, with err.
	ctx  context.Context
	err  error
	text string
	// want are the classifiers to run (by index into s.classifiers).
	want []bool
	ents bool
	done bool
	// detected and entities are the CEL values.
	detected, entities ref.Val
	// detection, detected's record and its keys and values live in the
	// detector: a query with a classifier or two allocates none of them.
	detection Detection
	rec       record
	keys      []types.String
	vals      detectedFields
	keysBuf   [2]types.String
	valsBuf   [2]ref.Val
}

// classifierValue is a classifier's result as a CEL value: the record and
// its fields in one allocation.
type classifierValue struct {
	rec record
	f   resultFields
}

// detectedFields are the values of the detected record, by key.
type detectedFields []ref.Val

func (f detectedFields) field(i int) ref.Val { return f[i] }

// noEntities is the entities value of a query without entities.
var noEntities = types.NewRefValList(types.DefaultTypeAdapter, []ref.Val{})

func (d *detector) run() {
	if d.done {
		return
	}
	d.done = true
	d.detection = Detection{Classifiers: map[string]ClassifierResult{}, Entities: []Entity{}}
	det := &d.detection
	// CEL values box a field only when a condition reads it
	// (detect_values.go); detected is a record keyed by classifier name.
	d.keys, d.vals = d.keysBuf[:0], d.valsBuf[:0]
	for i, c := range d.s.classifiers {
		if !d.want[i] || c.model == nil {
			continue
		}
		v := &classifierValue{f: resultFields{r: c.model.Classify(d.text)}}
		v.rec = record{keys: resultKeys, src: &v.f}
		r := &v.f.r
		cr := ClassifierResult{Label: r.Label, Confidence: round4(r.Confidence), Alternatives: make([]classify.Alternative, len(r.Alternatives))}
		for j, a := range r.Alternatives {
			cr.Alternatives[j] = classify.Alternative{Label: a.Label, Confidence: round4(a.Confidence)}
		}
		det.Classifiers[c.name] = cr
		d.keys = append(d.keys, types.String(c.name))
		d.vals = append(d.vals, &v.rec)
	}
	if d.ents {
		ents, err := extractEntities(d.ctx, d.text, d.s.extractors)
		if err != nil {
			// The query stops (stopped); detected and entities are errors.
			d.err = err
			d.detected, d.entities = types.WrapErr(err), types.WrapErr(err)
			return
		}
		det.Entities = ents
	}
	d.entities = noEntities
	if len(det.Entities) > 0 {
		ents := make([]ref.Val, len(det.Entities))
		for i := range det.Entities {
			ents[i] = &record{keys: entityKeys, src: entityFields{&det.Entities[i]}}
		}
		d.entities = types.NewRefValList(types.DefaultTypeAdapter, ents)
	}
	d.rec = record{keys: d.keys, src: d.vals}
	d.detected = &d.rec
}

// newDetector returns the detector of a query, or nil when the query needs
// no detection; detect is the request's list (validated).
func (s *Snapshot) newDetector(ctx context.Context, text string, detect []string) *detector {
	if len(s.classifiers) == 0 && len(s.extractors) == 0 {
		return nil
	}
	want := s.detectWant
	ents := s.entitiesUsed
	if len(detect) > 0 {
		want = slices.Clone(want)
		ents = true
		for _, n := range detect {
			if n == "*" {
				for i := range want {
					want[i] = true
				}
				continue
			}
			want[s.classifierIndex[n]] = true
		}
	}
	return &detector{s: s, ctx: ctx, text: text, want: want, ents: ents}
}

// queryDetector returns the detector of a query, or nil when neither a
// condition nor the request asks for detection: such a query pays nothing.
func (s *Snapshot) queryDetector(ctx context.Context, req *Request) *detector {
	if !s.detectUsed && len(req.Detect) == 0 {
		return nil
	}
	return s.newDetector(ctx, req.Text, req.Detect)
}

// stopped is the error of a query whose detection ctx stopped (nil when it
// ran to the end or did not run).
func (d *detector) stopped(route string) error {
	if d == nil || d.err == nil {
		return nil
	}
	return &StoppedError{Route: route, Err: d.err}
}

// checkDetect refuses a detect list naming unknown classifiers.
func (s *Snapshot) checkDetect(detect []string) error {
	if n := len(detect); n > MaxDetect {
		return fmt.Errorf("%w: detect has %d entries; at most %d are allowed", ErrBadRequest, n, MaxDetect)
	}
	for i, n := range detect {
		if _, ok := s.classifierIndex[n]; !ok && n != "*" {
			return fmt.Errorf("%w: detect[%d]: no ContextClassifier %q%s", ErrBadRequest, i, textutil.CutBytes(n, 64, textutil.Ellipsis), s.knownClassifiers())
		}
	}
	return nil
}

func (s *Snapshot) knownClassifiers() string {
	if len(s.classifiers) == 0 {
		return fmt.Sprintf(" (router %s has no classifier)", s.routerName)
	}
	names := make([]string, len(s.classifiers))
	for i, c := range s.classifiers {
		names[i] = strconv.Quote(c.name)
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// Classifiers describes every compiled classifier, sorted by name.
func (s *Snapshot) Classifiers() []ClassifierStatus {
	out := make([]ClassifierStatus, len(s.classifiers))
	for i, c := range s.classifiers {
		cs := ClassifierStatus{Name: c.name, Extractors: s.extractorsOf[c.name]}
		if c.model != nil {
			cs.Trained = true
			cs.Labels = c.model.LabelCounts()
			cs.TrainingAccuracy = c.model.TrainingAccuracy()
		}
		out[i] = cs
	}
	return out
}

// readExamples returns the reader of examplesFrom files for a compile.
func readExamples(ctx context.Context, known map[string]*v1alpha1.ContextSource, envOf func(name string) sources.Env) func(*v1alpha1.SourceFile) (string, error) {
	return func(f *v1alpha1.SourceFile) (string, error) {
		spec := known[f.Source]
		if spec == nil {
			return "", fmt.Errorf("ContextSource %q not found", f.Source)
		}
		content, _, err := sources.ReadFile(ctx, spec, envOf(f.Source), f.Path)
		return content, err
	}
}

var emptyDetected = types.DefaultTypeAdapter.NativeToValue(map[string]any{})

// detectRefs is what a condition reads of detection.
type detectRefs struct {
	// names are the classifiers named as detected.<name> or detected["name"], sorted.
	names []string
	// all: detected is used otherwise (a computed key, `in`), so every classifier may be read.
	all bool
	// entities: the condition reads entities.
	entities bool
	// labels are the string literals compared with detected.<name>.label.
	labels []labelRef
}

// labelRef is a label literal a condition compares with a classifier's label.
type labelRef struct{ classifier, label string }

// classifierKey returns the classifier an expression names, for
// detected.<name> and detected["name"].
func classifierKey(e celast.Expr) (string, bool) {
	switch e.Kind() {
	case celast.SelectKind:
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "detected" {
			return sel.FieldName(), true
		}
	case celast.CallKind:
		call := e.AsCall()
		if (call.FunctionName() == "_[_]" || call.FunctionName() == "_[?_]") && len(call.Args()) == 2 {
			if op := call.Args()[0]; op.Kind() == celast.IdentKind && op.AsIdent() == "detected" {
				return stringLit(call.Args()[1])
			}
		}
	}
	return "", false
}

// labelOf returns the classifier of detected.<name>.label.
func labelOf(e celast.Expr) (string, bool) {
	if e.Kind() != celast.SelectKind || e.AsSelect().FieldName() != "label" || e.AsSelect().IsTestOnly() {
		return "", false
	}
	return classifierKey(e.AsSelect().Operand())
}

func stringLit(e celast.Expr) (string, bool) {
	if e.Kind() == celast.LiteralKind {
		if s, ok := e.AsLiteral().(types.String); ok {
			return string(s), true
		}
	}
	return "", false
}

// detectRefsOf finds what an expression reads of detection.
func detectRefsOf(root celast.Expr) detectRefs {
	var r detectRefs
	uses, named := 0, 0
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.IdentKind {
			switch e.AsIdent() {
			case "detected":
				uses++
			case "entities":
				r.entities = true
			}
			return
		}
		if name, ok := classifierKey(e); ok {
			named++
			if !slices.Contains(r.names, name) {
				r.names = append(r.names, name)
			}
		}
		if e.Kind() != celast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case "_==_", "_!=_":
			for i := range 2 {
				if c, ok := labelOf(args[i]); ok {
					if l, ok := stringLit(args[1-i]); ok {
						r.labels = append(r.labels, labelRef{c, l})
					}
				}
			}
		case "@in":
			if c, ok := labelOf(args[0]); ok && args[1].Kind() == celast.ListKind {
				for _, el := range args[1].AsList().Elements() {
					if l, ok := stringLit(el); ok {
						r.labels = append(r.labels, labelRef{c, l})
					}
				}
			}
		}
	}))
	r.all = uses > named
	sort.Strings(r.names)
	return r
}

// Warnings are problems found while compiling that do not stop the router,
// such as a condition comparing a label that its classifier does not have.
func (s *Snapshot) Warnings() problem.List { return slices.Clone(s.warnings) }

// compileDetection trains the classifiers of cfg, compiles their
// extractors and checks what the route conditions read of them: an unknown
// classifier or label is an error. A classifier without out-of-scope
// examples is a warning. It returns the hashes
// of the example files read, for the snapshot's hash.
func (s *Snapshot) compileDetection(ctx context.Context, cfg *Config, opts Options, known map[string]*v1alpha1.ContextSource,
	envOf func(string) sources.Env, addReason func(reason v1alpha1.ConditionReason, kind, name, field, msg string)) [][]byte {
	kind := v1alpha1.KindContextClassifier
	cls := make([]v1alpha1.ContextClassifier, len(cfg.Classifiers))
	for i := range cfg.Classifiers {
		cls[i] = *cfg.Classifiers[i].DeepCopy()
		cls[i].Default()
	}
	sort.SliceStable(cls, func(i, j int) bool { return cls[i].Name < cls[j].Name })
	s.classifierIndex = make(map[string]int, len(cls))
	s.extractorsOf = make(map[string]int, len(cls))
	var fileHashes [][]byte
	var read func(*v1alpha1.SourceFile) (string, error)
	if !opts.SkipLoad {
		r := readExamples(ctx, known, envOf)
		read = func(f *v1alpha1.SourceFile) (string, error) {
			content, err := r(f)
			if err == nil {
				sum := digest.SHA256(content)
				fileHashes = append(fileHashes, sum[:])
			}
			return content, err
		}
	}
	for i := range cls {
		c := &cls[i]
		missing := false
		for _, f := range c.Files() {
			if known[f.File.Source] == nil {
				addReason(v1alpha1.ReasonSourceNotFound, kind, c.Name, f.Field, fmt.Sprintf("ContextSource %q not found", f.File.Source))
				missing = true
			}
		}
		if missing {
			continue
		}
		st, xs := compileClassifier(c, read, func(field, msg string) {
			addReason(v1alpha1.ReasonInvalidSpec, kind, c.Name, field, problem.OneLine(msg))
		})
		if st.model != nil {
			if msg := outOfScopeWarning(c.Spec.OutOfScopeLabel, st.model.LabelCounts()); msg != "" {
				s.warnings = append(s.warnings, problem.Problem{Location: cfg.Origin(kind, c.Name), Kind: kind, Name: c.Name,
					Field: "spec.outOfScopeLabel", Severity: problem.Warning, Reason: v1alpha1.ReasonInvalidSpec, Message: msg})
			}
		}
		s.classifierIndex[c.Name] = len(s.classifiers)
		s.classifiers = append(s.classifiers, st)
		s.extractors = append(s.extractors, xs...)
		s.extractorsOf[c.Name] = len(xs)
	}
	s.detectWant = make([]bool, len(s.classifiers))
	for _, rt := range cfg.Routes {
		c, _ := compileCached(rt.Spec.When)
		if c == nil {
			continue
		}
		refs := c.detect
		s.entitiesUsed = s.entitiesUsed || refs.entities
		s.detectUsed = s.detectUsed || refs.entities || refs.all || len(refs.names) > 0
		if refs.all {
			for i := range s.detectWant {
				s.detectWant[i] = true
			}
		}
		for _, n := range refs.names {
			i, ok := s.classifierIndex[n]
			if !ok {
				addReason(v1alpha1.ReasonInvalidCondition, v1alpha1.KindContextRoute, rt.Name, "spec.when",
					fmt.Sprintf("detected.%s: no ContextClassifier %q attaches to router %s%s", n, n, s.routerName, s.knownClassifiers()))
				continue
			}
			s.detectWant[i] = true
		}
		for _, l := range refs.labels {
			i, ok := s.classifierIndex[l.classifier]
			if !ok || s.classifiers[i].labels == nil || s.classifiers[i].labels[l.label] {
				continue
			}
			addReason(v1alpha1.ReasonInvalidCondition, v1alpha1.KindContextRoute, rt.Name, "spec.when",
				unknownLabelMessage(l.classifier, l.label, s.classifiers[i].labels))
		}
	}
	return fileHashes
}

// unknownLabelMessage is the error of a condition comparing a classifier's
// label with a string that is not one of its labels: such a route would
// silently never match (or always, with !=). It lists the labels and
// suggests the nearest, as for an unknown field.
func unknownLabelMessage(classifier, label string, labels map[string]bool) string {
	names := slices.Sorted(maps.Keys(labels))
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	hint := ""
	if sug := located.Closest(label, names); sug != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", sug)
	}
	return fmt.Sprintf("detected.%s.label compared with %q, which is not a label of ContextClassifier %s%s; its labels are %s",
		classifier, label, classifier, hint, strings.Join(quoted, ", "))
}

// outOfScopeWarning says why a classifier trained on labelled examples
// (counts per label) and without examples of its out-of-scope label is
// overconfident ("" when it has them): its confidence is relative to the
// labels it knows, so a question none of them covers still gets the nearest
// one, often above the threshold (api.md §1.5).
func outOfScopeWarning(outOfScope string, counts map[string]int) string {
	const why = "a question none of the labels covers still gets the nearest label, often with high confidence"
	switch {
	case outOfScope == "":
		return "no out-of-scope examples: " + why + `; set outOfScopeLabel (such as "other") and give that label examples of questions the routes should not take`
	case counts[outOfScope] == 0:
		return fmt.Sprintf("label %q has no examples: %s; give it examples of questions the routes should not take", outOfScope, why)
	}
	return ""
}

// ConditionClassifiers names the classifiers a condition reads as
// detected.<name> (nil when it does not compile).
func ConditionClassifiers(expr string) []string {
	c, _ := compileCached(expr)
	if c == nil {
		return nil
	}
	return c.detect.names
}
