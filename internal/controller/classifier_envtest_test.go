package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

func newClassifier(ns string, mut func(*v1alpha1.ContextClassifier)) *v1alpha1.ContextClassifier {
	c := &v1alpha1.ContextClassifier{ObjectMeta: metav1.ObjectMeta{Name: "intent", Namespace: ns}, Spec: v1alpha1.ContextClassifierSpec{
		Labels: []v1alpha1.ClassifierLabel{
			{Name: "refund", Examples: []string{"I want my money back", "refund my order"}},
			{Name: "deploy", Examples: []string{"roll out the release"}},
		},
		Entities: []v1alpha1.EntityExtractor{{Type: "ticket", Pattern: `[A-Z]+-[0-9]+`}},
	}}
	if mut != nil {
		mut(c)
	}
	return c
}

// TestClassifierStatus: a router's verdict on a classifier reaches its
// status (per-router Accepted/ResolvedRefs, Ready, labels and training
// accuracy), and a classifier the router leaves out takes the routes that
// read it along. Objects are created without the webhook, as a cluster
// whose webhook is down (or an older one) would store them.
func TestClassifierStatus(t *testing.T) {
	env := testenv.Start(t)
	startOperator(t, env, testr.New(t))
	c := env.Client
	cases := []struct {
		name     string
		mut      func(*v1alpha1.ContextClassifier)
		accepted metav1.ConditionStatus
		resolved metav1.ConditionStatus
		reason   v1alpha1.ConditionReason
		msg      string
	}{
		{"valid", nil, condTrue, condTrue, v1alpha1.ReasonAccepted, ""},
		{"pattern does not compile", func(c *v1alpha1.ContextClassifier) { c.Spec.Entities[0].Pattern = "([A-Z" },
			condFalse, condTrue, v1alpha1.ReasonInvalidSpec, `spec.entities[0].pattern: Invalid value: "([A-Z": error parsing regexp: missing closing ]`},
		{"example past the byte limit", func(c *v1alpha1.ContextClassifier) { c.Spec.Labels[1].Examples = []string{strings.Repeat("é", 600)} },
			condFalse, condTrue, v1alpha1.ReasonInvalidSpec, "1200 bytes; examples are limited to 1024 bytes"},
		{"examples source missing", func(c *v1alpha1.ContextClassifier) {
			c.Spec.ExamplesFrom = &v1alpha1.SourceFile{Source: "intent-examples", Path: "train.jsonl"}
		}, condTrue, condFalse, v1alpha1.ReasonSourceNotFound, `ContextSource "intent-examples" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			cl := newClassifier(ns, tc.mut)
			route := newRoute(ns, "refunds", `detected.intent.label == "refund"`, "docs")
			create(t, c, newRouter(ns, "acme"), newInline(ns, "docs"), cl, route)
			got := wait(t, c, cl, func(cl *v1alpha1.ContextClassifier) error {
				if len(cl.Status.Parents) != 1 || cl.Status.Parents[0].ParentRef.Name != "acme" {
					return fmt.Errorf("status.parents %+v, want acme's entry", cl.Status.Parents)
				}
				ps := cl.Status.Parents[0].Conditions
				ready := condFalse
				if tc.reason == v1alpha1.ReasonAccepted {
					ready = condTrue
				}
				return errors.Join(
					wantCond(ps, "Accepted", tc.accepted, map[bool]v1alpha1.ConditionReason{true: v1alpha1.ReasonAccepted, false: tc.reason}[tc.accepted == condTrue], 1),
					wantCond(ps, "ResolvedRefs", tc.resolved, map[bool]v1alpha1.ConditionReason{true: v1alpha1.ReasonResolvedRefs, false: tc.reason}[tc.resolved == condTrue], 1),
					wantCond(cl.Status.Conditions, "Ready", ready, tc.reason, 1))
			})
			if tc.msg != "" {
				if msg := findCondition(got.Status.Conditions, "Ready").Message; !strings.Contains(msg, tc.msg) {
					t.Errorf("Ready message %q does not contain %q", msg, tc.msg)
				}
				// The route reading the classifier is left out with it.
				waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
					if err := wantParents(r, "acme"); err != nil {
						return err
					}
					return wantCond(r.Status.Parents[0].Conditions, "Accepted", condFalse, v1alpha1.ReasonInvalidCondition, 1)
				})
				return
			}
			if got.Status.LabelCount != 2 || len(got.Status.Labels) != 2 || got.Status.Labels[0] != (v1alpha1.LabelStatus{Name: "deploy", Examples: 1}) ||
				got.Status.Labels[1] != (v1alpha1.LabelStatus{Name: "refund", Examples: 2}) || got.Status.TrainingAccuracy == "" {
				t.Errorf("status labels %+v count %d accuracy %q", got.Status.Labels, got.Status.LabelCount, got.Status.TrainingAccuracy)
			}
			waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
				return wantCond(r.Status.Conditions, "Ready", condTrue, v1alpha1.ReasonAccepted, 1)
			})
			assertStatusSettles(t, c, got)
		})
	}
}

// A route whose condition reads a classifier that does not exist, or
// compares a label the classifier does not have (issue 20), is left out, and
// says why: the compile's error reaches its status.
func TestRouteReadingAMissingClassifier(t *testing.T) {
	env := testenv.Start(t)
	startOperator(t, env, testr.New(t))
	c := env.Client
	for _, tc := range []struct{ name, when, want string }{
		{"missing classifier", `detected.intnt.label == "refund"`,
			`spec.when: detected.intnt: no ContextClassifier "intnt" attaches to router acme (known: "intent")`},
		{"misspelt label", `detected.intent.label == "refnd"`,
			`spec.when: detected.intent.label compared with "refnd", which is not a label of ContextClassifier intent (did you mean "refund"?); its labels are "deploy", "refund"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			route := newRoute(ns, "refunds", tc.when, "docs")
			create(t, c, newRouter(ns, "acme"), newInline(ns, "docs"), newClassifier(ns, nil), route)
			got := waitRoute(t, c, route, func(r *v1alpha1.ContextRoute) error {
				if err := wantParents(r, "acme"); err != nil {
					return err
				}
				return wantCond(r.Status.Parents[0].Conditions, "Accepted", condFalse, v1alpha1.ReasonInvalidCondition, 1)
			})
			if msg := findCondition(got.Status.Parents[0].Conditions, "Accepted").Message; !strings.Contains(msg, tc.want) {
				t.Errorf("Accepted message %q does not contain %q", msg, tc.want)
			}
		})
	}
}
