package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

func intentClassifier() v1alpha1.ContextClassifier {
	return v1alpha1.ContextClassifier{ObjectMeta: meta("intent"), Spec: v1alpha1.ContextClassifierSpec{
		Labels: []v1alpha1.ClassifierLabel{
			{Name: "refund", Examples: []string{"I want my money back", "refund my order please", "return the item for a refund"}},
			{Name: "deploy", Examples: []string{"roll out the new release", "deploy the service to production", "the deploy pipeline failed"}},
		},
		OutOfScopeLabel: "other", Threshold: "0.5",
		Entities: []v1alpha1.EntityExtractor{
			{Type: "ticket", Pattern: `\b[A-Z]+-[0-9]+\b`},
			{Type: "team", Dictionary: &v1alpha1.EntityDictionary{Values: []string{"Payments", "data science", "data"}}},
		},
	}}
}

func detectConfig(routes ...v1alpha1.ContextRoute) *Config {
	return &Config{
		Router:      router(nil),
		Sources:     []v1alpha1.ContextSource{inlineSource("refunds", "Refunds", "Refunds take five days."), inlineSource("deploys", "Deploys", "Deploy with the pipeline.")},
		Routes:      routes,
		Classifiers: []v1alpha1.ContextClassifier{intentClassifier()},
	}
}

func TestDetectionInConditions(t *testing.T) {
	s := compile(t, detectConfig(
		routeTo("refunds", `detected.intent.label == "refund" && detected.intent.confidence >= 0.5`, "refunds"),
		routeTo("deploys", `detected["intent"].label == "deploy"`, "deploys"),
		routeTo("tickets", `entities.exists(e, e.type == "ticket")`, "deploys"),
	))
	cases := []struct {
		text     string
		routes   []string
		label    string
		entities []Entity
	}{
		{"I want a refund for my order", []string{"refunds"}, "refund", []Entity{}},
		{"the deploy of the service failed, see OPS-12", []string{"deploys", "tickets"}, "deploy",
			[]Entity{{Type: "ticket", Value: "OPS-12", Start: 38, End: 44}}},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			resp := query(t, s, Request{Text: tc.text})
			if !slices.Equal(resp.MatchedRoutes, tc.routes) {
				t.Errorf("matched %q, want %q", resp.MatchedRoutes, tc.routes)
			}
			if resp.Detection == nil {
				t.Fatal("no detection in the response")
			}
			got := resp.Detection.Classifiers["intent"]
			if got.Label != tc.label || got.Confidence <= 0 || got.Confidence > 1 || len(got.Alternatives) == 0 {
				t.Errorf("intent = %+v, want label %q with a confidence and alternatives", got, tc.label)
			}
			if !slices.Equal(resp.Detection.Entities, tc.entities) {
				t.Errorf("entities = %+v, want %+v", resp.Detection.Entities, tc.entities)
			}
		})
	}
}

func TestDetectionIsLazy(t *testing.T) {
	other := intentClassifier()
	other.Name = "urgency"
	cfg := detectConfig(routeTo("all", "", "refunds"), routeTo("refunds", `detected.intent.label == "refund"`, "refunds"))
	cfg.Classifiers = append(cfg.Classifiers, other)
	s := compile(t, cfg)
	resp := query(t, s, Request{Text: "refund my order"})
	if resp.Detection == nil {
		t.Fatal("no detection although a condition reads detected.intent")
	}
	if _, ok := resp.Detection.Classifiers["urgency"]; ok || len(resp.Detection.Classifiers) != 1 {
		t.Errorf("classifiers run: %v; only intent is read by a condition", resp.Detection.Classifiers)
	}
	resp = query(t, s, Request{Text: "refund my order", Detect: []string{"urgency"}})
	if len(resp.Detection.Classifiers) != 2 {
		t.Errorf("detect: [urgency] ran %v, want intent and urgency", resp.Detection.Classifiers)
	}

	// No condition reads detection: a query runs none, unless it asks.
	s = compile(t, detectConfig(routeTo("all", `containsAnyWord(text, ["refund"])`, "refunds")))
	if resp := query(t, s, Request{Text: "refund my order"}); resp.Detection != nil {
		t.Errorf("detection ran without a reader: %+v", resp.Detection)
	}
	resp = query(t, s, Request{Text: "refund my order for PAY-7", Detect: []string{"*"}})
	if resp.Detection == nil || resp.Detection.Classifiers["intent"].Label != "refund" || len(resp.Detection.Entities) != 1 {
		t.Errorf("detect: [*] = %+v", resp.Detection)
	}
	_, err := s.Query(context.Background(), Request{Text: "x", Detect: []string{"intnt"}})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `detect[0]: no ContextClassifier "intnt" (known: "intent")`) {
		t.Errorf("unknown detect name: %v", err)
	}
	// A long unknown name is echoed cut at 64 bytes, before a character the
	// cut would split (é is two bytes, from byte 63), then "…".
	_, err = s.Query(context.Background(), Request{Text: "x", Detect: []string{strings.Repeat("a", 63) + "é" + strings.Repeat("b", 100)}})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `no ContextClassifier "`+strings.Repeat("a", 63)+`…" (known`) {
		t.Errorf("long unknown detect name: %v", err)
	}
	_, err = s.Query(context.Background(), Request{Text: "x", Detect: slices.Repeat([]string{"intent"}, MaxDetect+1)})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "at most 16") {
		t.Errorf("detect past its limit: %v", err)
	}
}

func TestDetectionConditionChecks(t *testing.T) {
	t.Run("unknown classifier is an error", func(t *testing.T) {
		_, err := Compile(context.Background(), detectConfig(routeTo("r", `detected.intnt.label == "refund"`, "refunds")), Options{})
		var ps problem.List
		if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Field != "spec.when" || ps[0].Reason != v1alpha1.ReasonInvalidCondition ||
			!strings.Contains(ps[0].Message, `detected.intnt: no ContextClassifier "intnt" attaches to router test (known: "intent")`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unknown label is an error naming the labels and the nearest", func(t *testing.T) {
		_, err := Compile(context.Background(), detectConfig(routeTo("r", `detected.intent.label == "refnd" || detected.intent.label in ["deploy", "deplyo", "rollout"]`, "refunds")), Options{})
		var ps problem.List
		if !errors.As(err, &ps) {
			t.Fatalf("Compile: %v, want the unknown labels as errors", err)
		}
		want := []string{
			`ContextRoute/r: spec.when: detected.intent.label compared with "refnd", which is not a label of ContextClassifier intent (did you mean "refund"?); its labels are "deploy", "other", "refund"`,
			`ContextRoute/r: spec.when: detected.intent.label compared with "deplyo", which is not a label of ContextClassifier intent (did you mean "deploy"?); its labels are "deploy", "other", "refund"`,
			// Nothing near enough to suggest.
			`ContextRoute/r: spec.when: detected.intent.label compared with "rollout", which is not a label of ContextClassifier intent; its labels are "deploy", "other", "refund"`,
		}
		var got []string
		for _, p := range ps {
			if p.IsWarning() || p.Reason != v1alpha1.ReasonInvalidCondition {
				t.Errorf("%v: severity %v, reason %s; want an error, InvalidCondition", p, p.Severity, p.Reason)
			}
			got = append(got, p.Error())
		}
		if !slices.Equal(got, want) {
			t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("known labels and out-of-scope examples give no problem", func(t *testing.T) {
		cfg := detectConfig(routeTo("r", `detected.intent.label == "other" || "refund" == detected.intent.label`, "refunds"))
		cfg.Classifiers[0].Spec.Labels = append(cfg.Classifiers[0].Spec.Labels,
			v1alpha1.ClassifierLabel{Name: "other", Examples: []string{"what is for lunch", "is it going to rain tomorrow"}})
		if w := compile(t, cfg).Warnings(); len(w) != 0 {
			t.Errorf("warnings %v", w)
		}
	})
	t.Run("no out-of-scope examples is a warning naming the classifier", func(t *testing.T) {
		const why = "a question none of the labels covers still gets the nearest label, often with high confidence"
		for _, tc := range []struct{ outOfScope, want string }{
			{"other", `ContextClassifier/intent: spec.outOfScopeLabel: label "other" has no examples: ` + why + `; give it examples of questions the routes should not take`},
			{"", `ContextClassifier/intent: spec.outOfScopeLabel: no out-of-scope examples: ` + why + `; set outOfScopeLabel (such as "other") and give that label examples of questions the routes should not take`},
		} {
			cfg := detectConfig()
			cfg.Classifiers[0].Spec.OutOfScopeLabel = tc.outOfScope
			w := compile(t, cfg).Warnings()
			if len(w) != 1 || !w[0].IsWarning() || w[0].Error() != tc.want {
				t.Errorf("outOfScopeLabel %q: warnings %v, want\n%s", tc.outOfScope, w, tc.want)
			}
		}
	})
	t.Run("label without examples", func(t *testing.T) {
		cfg := detectConfig()
		cfg.Classifiers[0].Spec.Labels[1].Examples = nil
		_, err := Compile(context.Background(), cfg, Options{})
		if err == nil || !strings.Contains(err.Error(), "spec.labels[1].examples: a label needs at least one example") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("pattern that does not compile", func(t *testing.T) {
		cfg := detectConfig()
		cfg.Classifiers[0].Spec.Entities[0].Pattern = "([A-Z"
		_, err := Compile(context.Background(), cfg, Options{})
		if err == nil || !strings.Contains(err.Error(), "ContextClassifier/intent: spec.entities[0].pattern: error parsing regexp: missing closing ]") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestExamplesFrom(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("intents/train.jsonl", `{"text": "where is my parcel", "label": "shipping"}`+"\n\n"+`{"text": "track the delivery", "label": "shipping"}`+"\n")
	write("intents/bad.jsonl", `{"text": "ok", "label": "a"}`+"\n"+`{"text": "broken"`+"\n")
	write("intents/nolabel.jsonl", `{"text": "ok"}`+"\n")
	write("intents/long.jsonl", `{"text": "`+strings.Repeat("a", v1alpha1.MaxExampleBytes+1)+`", "label": "a"}`+"\n")
	// A file at the limit of example text: with the inline examples, past it.
	write("intents/full.jsonl", strings.Repeat(`{"text": "`+strings.Repeat("a", v1alpha1.MaxExampleBytes)+`", "label": "shipping"}`+"\n",
		v1alpha1.MaxClassifierExampleBytes/v1alpha1.MaxExampleBytes))
	// Room for full.jsonl: 1 MiB of text, and its JSON.
	maxFile := resource.MustParse("2Mi")
	src := v1alpha1.ContextSource{ObjectMeta: meta("examples"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: dir, MaxFileSize: &maxFile}}}
	src.Default()
	cases := []struct {
		path, want string // want "" = compiles, with label shipping
	}{
		{"intents/train.jsonl", ""},
		{"intents/missing.jsonl", "spec.examplesFrom: intents/missing.jsonl: file not found in ContextSource \"examples\""},
		{"intents/bad.jsonl", "spec.examplesFrom: intents/bad.jsonl:2: invalid JSON"},
		{"intents/nolabel.jsonl", "spec.examplesFrom: intents/nolabel.jsonl:1: want {\"text\": ..., \"label\": ...}"},
		{"intents/long.jsonl", "spec.examplesFrom: intents/long.jsonl:1: text: 1025 bytes; examples are limited to 1024 bytes"},
		{"intents/full.jsonl", "ContextClassifier/intent: spec: 1048728 bytes of example text; a classifier is limited to 1048576 (1 MiB) (inline and examplesFrom together)"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			cfg := detectConfig(routeTo("r", `detected.intent.label == "shipping"`, "refunds"))
			cfg.Sources = append(cfg.Sources, src)
			cfg.Classifiers[0].Spec.ExamplesFrom = &v1alpha1.SourceFile{Source: "examples", Path: tc.path}
			s, err := Compile(context.Background(), cfg, Options{})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Classifiers()[0].Labels["shipping"]; got != 2 {
				t.Errorf("shipping examples = %d, want 2 (from the file)", got)
			}
			if resp := query(t, s, Request{Text: "where is my parcel delivery"}); !slices.Equal(resp.MatchedRoutes, []string{"r"}) {
				t.Errorf("matched %v", resp.MatchedRoutes)
			}
			// The operator's compile reads no file: the classifier is left untrained, not refused.
			if _, err := Compile(context.Background(), cfg, Options{SkipLoad: true}); err != nil {
				t.Errorf("SkipLoad: %v", err)
			}
		})
	}
}

func TestTrainingIsCachedByContent(t *testing.T) {
	a := compile(t, detectConfig())
	b := compile(t, detectConfig())
	if a.classifiers[0].model != b.classifiers[0].model {
		t.Error("the same examples were trained twice")
	}
	cfg := detectConfig()
	cfg.Classifiers[0].Spec.Labels[0].Examples = append(cfg.Classifiers[0].Spec.Labels[0].Examples, "one more")
	if c := compile(t, cfg); c.classifiers[0].model == a.classifiers[0].model {
		t.Error("changed examples reused the old model")
	}
}

func TestExtractEntities(t *testing.T) {
	xs := []extractor{
		{typ: "team", dict: newDictionary([]string{"Payments", "data science", "data", "Ünïcode"})},
		{typ: "ticket", pat: mustPattern(t, `\b[A-Z]+-[0-9]+\b`)},
	}
	cases := []struct {
		text string
		want []Entity
	}{
		{"ask PAYMENTS about data-science", []Entity{{"team", "PAYMENTS", 4, 12}, {"team", "data-science", 19, 31}}},
		{"paymentsx and xdata are not words", []Entity{}},
		{"Ärger: ünïcode OPS-1", []Entity{{"team", "ünïcode", 8, 17}, {"ticket", "OPS-1", 18, 23}}},
		{"data, then data", []Entity{{"team", "data", 0, 4}, {"team", "data", 11, 15}}},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			got := mustExtract(t, tc.text, xs)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			for _, e := range got {
				if tc.text[e.Start:e.End] != e.Value {
					t.Errorf("%+v: offsets are not the value's bytes", e)
				}
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		text := strings.Repeat("OPS-1 ", MaxEntities+10) + "X-" + strings.Repeat("1", MaxEntityValueBytes)
		if got := mustExtract(t, text, xs); len(got) != MaxEntities {
			t.Errorf("%d entities, want the limit %d", len(got), MaxEntities)
		}
		long := "X-" + strings.Repeat("1", MaxEntityValueBytes)
		if got := mustExtract(t, long, xs); len(got) != 0 {
			t.Errorf("a match over %d bytes was reported: %d", MaxEntityValueBytes, len(got))
		}
	})
}

func mustPattern(t testing.TB, p string) *entityPattern {
	t.Helper()
	pat, err := newEntityPattern(p)
	if err != nil {
		t.Fatal(err)
	}
	return pat
}

// mustExtract runs the extractors on text with a context that does not end.
func mustExtract(t testing.TB, text string, xs []extractor) []Entity {
	t.Helper()
	got, err := extractEntities(context.Background(), text, xs)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestDetectionConditionCost(t *testing.T) {
	for _, expr := range []string{
		`detected.intent.label == "refund" && detected.intent.confidence >= 0.7`,
		`detected.intent.alternatives.exists(a, a.label == "deploy" && a.confidence > 0.2)`,
		`entities.exists(e, e.type == "ticket" && e.value.startsWith("OPS-"))`,
		`entities.filter(e, e.type == "team").map(e, e.value).exists(v, v in ["payments"])`,
	} {
		t.Run(expr, func(t *testing.T) {
			ast, iss := celEnv.Compile(expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			estimate, err := checkCost(ast)
			if err != nil {
				t.Fatal(err)
			}
			prg, err := celEnv.Program(ast, cel.CostTracking(wordsCostTracker{}))
			if err != nil {
				t.Fatal(err)
			}
			act := newActivation(&Request{Text: "x"}, nil)
			act.det = maxDetector()
			if _, det, err := prg.Eval(act); err != nil || det.ActualCost() == nil || *det.ActualCost() > estimate {
				t.Errorf("evaluation %v: actual cost %v exceeds the estimate %d", err, det.ActualCost(), estimate)
			}
		})
	}
}

// maxDetector is a detection at the bounds the cost check assumes: the
// classifier "intent" with a label of MaxDetectedSize bytes and
// MaxDetectedSize alternatives, and MaxDetectedSize entities of values that size.
func maxDetector() *detector {
	long := strings.Repeat("x", MaxDetectedSize)
	alts := make([]any, MaxDetectedSize)
	for i := range alts {
		alts[i] = map[string]any{"label": long, "confidence": 0.5}
	}
	ents := make([]any, MaxDetectedSize)
	for i := range ents {
		ents[i] = map[string]any{"type": long, "value": long, "start": int64(i), "end": int64(i + 1)}
	}
	return &detector{done: true,
		detected: types.DefaultTypeAdapter.NativeToValue(map[string]any{"intent": map[string]any{"label": long, "confidence": 0.5, "alternatives": alts}}),
		entities: types.DefaultTypeAdapter.NativeToValue(ents)}
}

// BenchmarkDetect is the work detection adds to a quickstart query: the
// intent classifier and the two entity extractors on the question, and the
// CEL values the incident-help route reads.
func BenchmarkDetect(b *testing.B) {
	raw, err := os.ReadFile("../../examples/quickstart/classifiers.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var qc v1alpha1.ContextClassifier
	if err := yaml.Unmarshal(raw, &qc); err != nil {
		b.Fatal(err)
	}
	cfg := detectConfig(routeTo("incident-help", `(detected.intent.label == "incident" && detected.intent.confidence >= 0.6) || entities.exists(e, e.type == "ticket")`, "deploys"))
	cfg.Classifiers = []v1alpha1.ContextClassifier{qc}
	s := compile(b, cfg)
	text := "How many vacation days do I get, and can I carry them over?"
	b.Run("classify+entities", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d := s.newDetector(context.Background(), text, nil)
			d.run()
		}
	})
	b.Run("entities", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mustExtract(b, text, s.extractors)
		}
	})
	b.Run("classify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.classifiers[0].model.Classify(text)
		}
	})
}

// TestDetectionValuesInCEL: the records conditions read behave as CEL maps.
func TestDetectionValuesInCEL(t *testing.T) {
	cases := []struct {
		when    string
		matched bool
		err     string
	}{
		{`"label" in detected.intent && size(detected.intent) == 3`, true, ""},
		{`detected.intent.alternatives.all(a, a.confidence <= detected.intent.confidence)`, true, ""},
		{`detected.intent.exists(k, k == "alternatives")`, true, ""},
		{`has(detected.intent.label) && !has(detected.intent.nope)`, true, ""},
		{`entities.exists(e, e.type == "ticket" && e.value == "OPS-7" && e.start == 14 && e.end == 19)`, true, ""},
		{`entities[0] == {"type": "ticket", "value": "OPS-7", "start": 14, "end": 19}`, true, ""},
		{`detected.intent.nope == "x"`, false, "no such key: nope"},
		{`"refund" in detected.intent.alternatives.map(a, a.label) || detected.intent.label == "refund"`, true, ""},
		// detected itself is a record keyed by classifier name.
		{`size(detected) == 1 && "intent" in detected && !("nope" in detected) && detected.all(k, k == "intent")`, true, ""},
		{`detected == {"intent": detected.intent} && detected != {}`, true, ""},
		{`detected["no" + "pe"].label == "x"`, false, "no such key: nope"},
		{`size(entities) == 1 && entities != []`, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.when, func(t *testing.T) {
			s := compile(t, detectConfig(routeTo("r", tc.when, "refunds")))
			resp := query(t, s, Request{Text: "refund please OPS-7"})
			if got := slices.Equal(resp.MatchedRoutes, []string{"r"}); got != tc.matched {
				t.Errorf("matched %v, want %v (errors %v)", got, tc.matched, resp.RouteErrors)
			}
			if tc.err != "" && (len(resp.RouteErrors) != 1 || !strings.Contains(resp.RouteErrors[0].Error, tc.err)) {
				t.Errorf("route errors %v, want %q", resp.RouteErrors, tc.err)
			}
		})
	}
}

func TestParseExamplesLimit(t *testing.T) {
	line := `{"text": "where is my parcel", "label": "shipping"}` + "\n"
	long := `{"text": "` + strings.Repeat("a", v1alpha1.MaxExampleBytes) + `", "label": "shipping"}` + "\n"
	for _, tc := range []struct {
		name, content, want string // want "" = parsed
		n                   int
	}{
		{"examples at the limit", strings.Repeat(line, v1alpha1.MaxClassifierExamples), "", v1alpha1.MaxClassifierExamples},
		{"one example more", strings.Repeat(line, v1alpha1.MaxClassifierExamples+1), "big.jsonl:20001: 20001 examples; a classifier is limited to 20000", 0},
		{"text at the limit", strings.Repeat(long, v1alpha1.MaxClassifierExampleBytes/v1alpha1.MaxExampleBytes), "", 1024},
		{"one long example more", strings.Repeat(long, v1alpha1.MaxClassifierExampleBytes/v1alpha1.MaxExampleBytes+1),
			"big.jsonl:1025: 1049600 bytes of example text; a classifier is limited to 1048576 (1 MiB)", 0},
		// A new label and 1,000 bytes a line: 184 labels × 184,000 bytes pass 32 Mi at line 184.
		{"labels × text past the limit", func() string {
			var b strings.Builder
			for i := range 600 {
				fmt.Fprintf(&b, `{"text": "%s", "label": "l%d"}`+"\n", strings.Repeat("a", 1000), i%200)
			}
			return b.String()
		}(), "big.jsonl:184: 184 labels × 184000 bytes of example text is 33856000; a classifier is limited to 33554432 (32 Mi), which trains in seconds: fewer labels or less text", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExamples("big.jsonl", tc.content)
			if tc.want != "" {
				if err == nil || err.Error() != tc.want {
					t.Fatalf("got %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("%d examples, %v; want %d", len(got), err, tc.n)
			}
		})
	}
	if _, err := ParseExamples("extra.jsonl", `{"text": "a", "label": "b", "lable": "c"}`); err == nil || !strings.Contains(err.Error(), `extra.jsonl:1: invalid JSON: json: unknown field "lable"`) {
		t.Errorf("unknown field: %v", err)
	}
}

// Queries share a snapshot's models and extractors: concurrent detection
// gives every query the answer a lone query gets (run with -race).
func TestDetectionConcurrent(t *testing.T) {
	s := compile(t, detectConfig(routeTo("refunds", `detected.intent.label == "refund" || entities.exists(e, e.type == "team")`, "refunds")))
	texts := []string{"refund my order", "deploy the service for Payments", "data science team, OPS-3"}
	want := make([]*Response, len(texts))
	for i, text := range texts {
		want[i] = query(t, s, Request{Text: text, Detect: []string{"*"}})
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 30 {
				i := (g + n) % len(texts)
				resp, err := s.Query(context.Background(), Request{Text: texts[i], Detect: []string{"*"}})
				if err != nil || !reflect.DeepEqual(resp.Detection, want[i].Detection) || !slices.Equal(resp.MatchedRoutes, want[i].MatchedRoutes) {
					errs <- fmt.Sprintf("%q: %v %+v, want %+v", texts[i], err, resp.Detection, want[i].Detection)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A dictionary read from a source file: values one a line; a missing file,
// a value past its limit or too many values name the file and the line.
func TestDictionaryValuesFrom(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"teams.txt":    "# teams\nPayments\n\ndata science\n",
		"long.txt":     "ok\n" + strings.Repeat("v", v1alpha1.MaxDictionaryValueSize+1) + "\n",
		"many.txt":     strings.Repeat("v\n", v1alpha1.MaxDictionaryValues+1),
		"comments.txt": "# nothing\n\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := v1alpha1.ContextSource{ObjectMeta: meta("lists"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: dir}}}
	src.Default()
	cases := []struct{ path, err string }{
		{"teams.txt", ""},
		{"nope.txt", `spec.entities[1].dictionary.valuesFrom: nope.txt: file not found in ContextSource "lists"`},
		{"long.txt", "spec.entities[1].dictionary.valuesFrom: long.txt:2: 257 bytes; dictionary values are limited to 256 bytes"},
		{"many.txt", "spec.entities[1].dictionary.valuesFrom: many.txt:10001: more than 10000 values"},
		{"comments.txt", "spec.entities[1].dictionary.valuesFrom: comments.txt: no values"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			cfg := detectConfig(routeTo("r", `entities.exists(e, e.type == "team")`, "refunds"))
			cfg.Sources = append(cfg.Sources, src)
			cfg.Classifiers[0].Spec.Entities[1].Dictionary = &v1alpha1.EntityDictionary{ValuesFrom: &v1alpha1.SourceFile{Source: "lists", Path: tc.path}}
			s, err := Compile(context.Background(), cfg, Options{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp := query(t, s, Request{Text: "ask Data-Science and PAYMENTS"})
			want := []Entity{{"team", "Data-Science", 4, 16}, {"team", "PAYMENTS", 21, 29}}
			if !slices.Equal(resp.Detection.Entities, want) || !slices.Equal(resp.MatchedRoutes, []string{"r"}) {
				t.Errorf("entities %+v, matched %v; want %+v", resp.Detection.Entities, resp.MatchedRoutes, want)
			}
		})
	}
	t.Run("missing source", func(t *testing.T) {
		cfg := detectConfig()
		cfg.Classifiers[0].Spec.Entities[1].Dictionary = &v1alpha1.EntityDictionary{ValuesFrom: &v1alpha1.SourceFile{Source: "lists", Path: "teams.txt"}}
		_, err := Compile(context.Background(), cfg, Options{})
		if err == nil || !strings.Contains(err.Error(), `spec.entities[1].dictionary.valuesFrom.source: ContextSource "lists" not found`) {
			t.Fatalf("got %v", err)
		}
	})
}
