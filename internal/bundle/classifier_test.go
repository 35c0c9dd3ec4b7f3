package bundle

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
)

func classifier(name string, mut ...func(*v1alpha1.ContextClassifier)) v1alpha1.ContextClassifier {
	c := v1alpha1.ContextClassifier{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.ContextClassifierSpec{
		Labels: []v1alpha1.ClassifierLabel{
			{Name: "refund", Examples: []string{"I want my money back", "refund my order"}},
			{Name: "deploy", Examples: []string{"roll out the release", "deploy the service"}},
		},
		Entities: []v1alpha1.EntityExtractor{{Type: "ticket", Pattern: `[A-Z]+-[0-9]+`}},
	}}
	for _, m := range mut {
		m(&c)
	}
	return c
}

func TestBuildCarriesClassifiers(t *testing.T) {
	in := Input{
		Router: router("acme"),
		Routes: []v1alpha1.ContextRoute{
			route("refunds", `detected.intent.label == "refund"`, "docs"),
			route("broken-reader", `detected.broken.label == "x"`, "docs"),
			route("plain", "", "docs"),
			// A misspelt label leaves the route out (issue 20)...
			route("typo", `detected.intent.label == "refnd"`, "docs"),
			// ...where the labels are known: examplesFrom is read by the pod, not here.
			route("file-reader", `detected["from-file"].label == "anything"`, "docs"),
		},
		Sources: []v1alpha1.ContextSource{inline("docs", "Refunds take five days."),
			directory("examples", "", configMapVolume("intent-examples"))},
		Classifiers: []v1alpha1.ContextClassifier{
			classifier("intent"),
			classifier("broken", func(c *v1alpha1.ContextClassifier) { c.Spec.Entities[0].Pattern = "([A-Z" }),
			classifier("from-file", func(c *v1alpha1.ContextClassifier) {
				c.Spec.ExamplesFrom = &v1alpha1.SourceFile{Source: "examples", Path: "train.jsonl"}
			}),
			classifier("from-missing", func(c *v1alpha1.ContextClassifier) {
				c.Spec.ExamplesFrom = &v1alpha1.SourceFile{Source: "nope", Path: "train.jsonl"}
			}),
			classifier("values-missing", func(c *v1alpha1.ContextClassifier) {
				c.Spec.Entities = append(c.Spec.Entities, v1alpha1.EntityExtractor{Type: "team",
					Dictionary: &v1alpha1.EntityDictionary{ValuesFrom: &v1alpha1.SourceFile{Source: "lists", Path: "teams.txt"}}})
			}),
		},
	}
	b := mustBuild(t, in)
	if want := []string{"from-file", "intent"}; !slices.Equal(b.Classifiers, want) {
		t.Errorf("classifiers %q, want %q", b.Classifiers, want)
	}
	if want := []string{"file-reader", "plain", "refunds"}; !slices.Equal(b.Routes, want) {
		t.Errorf("routes %q, want %q", b.Routes, want)
	}
	// The examples' source goes into the bundle (the pod reads the file), though no route names it.
	if want := []string{"docs", "examples"}; !slices.Equal(b.Sources, want) {
		t.Errorf("sources %q, want %q", b.Sources, want)
	}
	// The operator trains what it can without reading files.
	if len(b.Trained) != 2 || !b.Trained[1].Trained || b.Trained[1].Labels["refund"] != 2 || b.Trained[0].Trained {
		t.Errorf("trained %+v", b.Trained)
	}
	cases := []struct {
		kind, name string
		included   bool
		reason     v1alpha1.ConditionReason
		msg        string
	}{
		{v1alpha1.KindContextClassifier, "intent", true, "", ""},
		{v1alpha1.KindContextClassifier, "broken", false, v1alpha1.ReasonInvalidSpec, "spec.entities[0].pattern"},
		{v1alpha1.KindContextClassifier, "from-missing", false, v1alpha1.ReasonSourceNotFound, `spec.examplesFrom.source: ContextSource "nope" not found`},
		{v1alpha1.KindContextClassifier, "values-missing", false, v1alpha1.ReasonSourceNotFound, `spec.entities[1].dictionary.valuesFrom.source: ContextSource "lists" not found`},
		{v1alpha1.KindContextRoute, "broken-reader", false, v1alpha1.ReasonInvalidCondition, `ContextClassifier "broken" is left out`},
		{v1alpha1.KindContextRoute, "typo", false, v1alpha1.ReasonInvalidCondition,
			`ContextRoute/typo: spec.when: detected.intent.label compared with "refnd", which is not a label of ContextClassifier intent (did you mean "refund"?); its labels are "deploy", "refund"`},
		{v1alpha1.KindContextRoute, "file-reader", true, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			v, ok := b.Verdict(tc.kind, tc.name)
			if !ok || v.Included != tc.included {
				t.Fatalf("verdict %+v (found %v), want included %v", v, ok, tc.included)
			}
			if tc.reason == "" {
				if len(v.Problems) > 0 {
					t.Errorf("problems %v", v.Problems)
				}
				return
			}
			if len(v.Problems) == 0 || v.Problems[0].Reason != tc.reason || !strings.Contains(v.Problems[0].Error(), tc.msg) {
				t.Errorf("problems %v, want %s %q", v.Problems, tc.reason, tc.msg)
			}
		})
	}

	// The bundle decodes to the classifiers: a pod loads and answers with them.
	inline := Input{Router: in.Router, Routes: in.Routes[:1], Sources: in.Sources[:1], Classifiers: in.Classifiers[:1]}
	_, snap := load(t, mustBuild(t, inline))
	resp, err := snap.Query(context.Background(), engine.Request{Text: "refund my order please"})
	if err != nil || !slices.Equal(resp.MatchedRoutes, []string{"refunds"}) || resp.Detection == nil {
		t.Fatalf("query of the loaded bundle: %v %+v", err, resp)
	}
	// Adding no classifier keeps a bundle's bytes: classifiers are written last.
	if plain := mustBuild(t, Input{Router: in.Router, Routes: in.Routes[2:3], Sources: in.Sources[:1]}); strings.Contains(string(plain.Data), "ContextClassifier") {
		t.Errorf("a bundle without classifiers mentions them:\n%s", plain.Data)
	}
}
