package webhook

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func testClassifier(mut func(*v1alpha1.ContextClassifier)) *v1alpha1.ContextClassifier {
	c := &v1alpha1.ContextClassifier{ObjectMeta: metav1.ObjectMeta{Name: "intent"}, Spec: v1alpha1.ContextClassifierSpec{
		Labels:   []v1alpha1.ClassifierLabel{{Name: "refund", Examples: []string{"money back"}}, {Name: "deploy", Examples: []string{"roll out"}}},
		Entities: []v1alpha1.EntityExtractor{{Type: "ticket", Pattern: `[A-Z]+-[0-9]+`}},
	}}
	if mut != nil {
		mut(c)
	}
	return c
}

// TestClassifierAdmission: what the schema cannot check is refused by the
// webhook with the field named; what it can, by the API server; a missing
// examplesFrom source is only a warning.
func TestClassifierAdmission(t *testing.T) {
	env := servingWebhooks(t)
	c, warnings := warningClient(t, env)
	ctx := t.Context()
	const webhook = "vcontextclassifier.contextrouter.dev"
	refused := []struct {
		name    string
		mut     func(*v1alpha1.ContextClassifier)
		webhook bool // refused by the webhook (else by the schema)
		want    string
	}{
		{"pattern does not compile", func(c *v1alpha1.ContextClassifier) { c.Spec.Entities[0].Pattern = "([A-Z" },
			true, `spec.entities[0].pattern: Invalid value: "([A-Z": error parsing regexp: missing closing ]`},
		{"pattern matches the empty string", func(c *v1alpha1.ContextClassifier) { c.Spec.Entities[0].Pattern = "x*" },
			true, "matches the empty string"},
		{"blank example", func(c *v1alpha1.ContextClassifier) { c.Spec.Labels[0].Examples = []string{"   "} },
			true, "spec.labels[0].examples[0]: Invalid value: \"   \": an example must not be blank"},
		{"example over 1024 bytes", func(c *v1alpha1.ContextClassifier) { c.Spec.Labels[0].Examples = []string{strings.Repeat("é", 600)} },
			true, "1200 bytes; examples are limited to 1024 bytes"},
		{"label with no examples", func(c *v1alpha1.ContextClassifier) { c.Spec.Labels[1].Examples = nil },
			false, "spec.labels[1].examples"},
		{"too many examples", func(c *v1alpha1.ContextClassifier) {
			c.Spec.Labels[0].Examples = make([]string, v1alpha1.MaxExamplesPerLabel+1)
			for i := range c.Spec.Labels[0].Examples {
				c.Spec.Labels[0].Examples[i] = "x"
			}
		}, false, "spec.labels[0].examples: Too many: 1001: must have at most 1000 items"},
		{"dictionary and pattern", func(c *v1alpha1.ContextClassifier) {
			c.Spec.Entities[0].Dictionary = &v1alpha1.EntityDictionary{Values: []string{"a"}}
		}, false, "set exactly one of dictionary and pattern"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			err := c.Create(ctx, inNS(testClassifier(tc.mut), ns))
			if tc.webhook {
				deniedBy(t, err, webhook, v1alpha1.KindContextClassifier, "intent", tc.want)
				return
			}
			var se *apierrors.StatusError
			if !errors.As(err, &se) || !apierrors.IsInvalid(err) || !strings.Contains(se.ErrStatus.Message, tc.want) {
				t.Fatalf("want Invalid with %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("a route reading a missing classifier is created with a warning", func(t *testing.T) {
		ns := env.Namespace(t)
		if err := c.Create(ctx, inNS(inlineSource("faq"), ns)); err != nil {
			t.Fatal(err)
		}
		warnings.take()
		if err := c.Create(ctx, inNS(testRoute(`detected.intnt.label == "refund"`, "faq"), ns)); err != nil {
			t.Fatal(err)
		}
		want := `spec.when: ContextClassifier "intnt" (detected.intnt) not found in namespace "` + ns + `"; the route is left out of its routers until it exists`
		if got := warnings.take(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
	})
	t.Run("missing examples source is created with a warning", func(t *testing.T) {
		ns := env.Namespace(t)
		warnings.take()
		obj := testClassifier(func(c *v1alpha1.ContextClassifier) {
			c.Spec.ExamplesFrom = &v1alpha1.SourceFile{Source: "intent-examples", Path: "train.jsonl"}
		})
		if err := c.Create(ctx, inNS(obj, ns)); err != nil {
			t.Fatal(err)
		}
		want := `spec.examplesFrom.source: ContextSource "intent-examples" not found in namespace "` + ns + `"; the classifier is left out of its routers until it exists`
		if got := warnings.take(); len(got) != 1 || got[0] != want {
			t.Errorf("warnings %q, want [%q]", got, want)
		}
	})
}
