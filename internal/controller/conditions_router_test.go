package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

// testBundle builds a real bundle of n inline sources of size bytes each.
func testBundle(t *testing.T, n, size int, broken ...string) *bundle.Bundle {
	t.Helper()
	in := bundle.Input{Router: &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "ns"}}}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		in.Sources = append(in.Sources, v1alpha1.ContextSource{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline,
				Inline: &v1alpha1.InlineSource{Content: strings.Repeat("x", size)}},
		})
		in.Routes = append(in.Routes, v1alpha1.ContextRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "r" + name, Namespace: "ns"},
			Spec:       v1alpha1.ContextRouteSpec{Sources: []v1alpha1.LocalObjectReference{{Name: name}}},
		})
	}
	for _, name := range broken {
		in.Routes = append(in.Routes, v1alpha1.ContextRoute{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:       v1alpha1.ContextRouteSpec{When: "text ==", Sources: []v1alpha1.LocalObjectReference{{Name: "s0"}}},
		})
	}
	b, err := bundle.Build(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRouterNameProblem(t *testing.T) {
	tests := []struct {
		name string
		want string // substring; "" = no problem
	}{
		{"acme", ""},
		{"a-1", ""},
		{strings.Repeat("a", 63), ""},
		{strings.Repeat("a", 64), "must be no more than 63 characters"},
		{"9lives", "start with an alphabetic character"},
		{"acme.eu", "cannot name the router's Service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := routerNameProblem(tt.name)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("routerNameProblem(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

// refusedBundle builds a bundle that a router or permission problem refuses.
func refusedBundle(t *testing.T, router bool) *bundle.Bundle {
	t.Helper()
	in := bundle.Input{Router: &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "ns"}}}
	if router {
		// Past the bound the CEL cost check assumes: only the engine refuses it.
		in.Router.Spec.Variables = map[string]apiextensionsv1.JSON{"team": {Raw: []byte(`"` + strings.Repeat("x", 1025) + `"`)}}
	} else {
		in.Permissions = []v1alpha1.AgentPermission{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec:       v1alpha1.AgentPermissionSpec{Agents: []string{"*"}, DenyPaths: []string{"[x"}},
		}}
	}
	b, err := bundle.Build(context.Background(), in)
	if err != nil || len(b.Refused) == 0 {
		t.Fatalf("want a refused bundle; err %v, refused %v", err, b.Refused)
	}
	return b
}

func TestRouterAccepted(t *testing.T) {
	routerInvalid, permInvalid := refusedBundle(t, true), refusedBundle(t, false)
	tests := []struct {
		name    string
		facts   routerFacts
		status  metav1.ConditionStatus
		reason  v1alpha1.ConditionReason
		message string
	}{
		{"valid", routerFacts{}, metav1.ConditionTrue, v1alpha1.ReasonAccepted, "the router spec is valid"},
		{"bad name", routerFacts{NameProblem: "the name is bad"}, metav1.ConditionFalse, v1alpha1.ReasonInvalidName, "the name is bad"},
		{"invalid router spec", routerFacts{Bundle: routerInvalid}, metav1.ConditionFalse, v1alpha1.ReasonInvalidSpec,
			"string of 1025 bytes; variables are limited to 1024 bytes per string"},
		{"permission problems do not reject the router", routerFacts{Bundle: permInvalid}, metav1.ConditionTrue, v1alpha1.ReasonAccepted, ""},
		{"other build errors do not either", routerFacts{BuildErr: errors.New("boom")}, metav1.ConditionTrue, v1alpha1.ReasonAccepted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerAccepted(4, tt.facts)
			if c.Type != v1alpha1.ConditionAccepted || c.Status != tt.status || c.Reason != string(tt.reason) || c.ObservedGeneration != 4 {
				t.Errorf("got %s=%s reason %s gen %d, want %s reason %s gen 4", c.Type, c.Status, c.Reason, c.ObservedGeneration, tt.status, tt.reason)
			}
			if !strings.Contains(c.Message, tt.message) {
				t.Errorf("message %q, want it to contain %q", c.Message, tt.message)
			}
		})
	}
}

func TestRouterProgrammed(t *testing.T) {
	accepted := routerAccepted(2, routerFacts{})
	rejected := routerAccepted(2, routerFacts{NameProblem: "bad"})
	small := testBundle(t, 2, 100)
	withBroken := testBundle(t, 1, 10, "bad-route")
	large := testBundle(t, 3, 400_000)
	permInvalid := refusedBundle(t, false)
	tests := []struct {
		name     string
		accepted metav1.Condition
		facts    routerFacts
		status   metav1.ConditionStatus
		reason   v1alpha1.ConditionReason
		messages []string
	}{
		{"programmed", accepted, routerFacts{Bundle: small}, metav1.ConditionTrue, v1alpha1.ReasonProgrammed,
			[]string{"bundle " + small.Hash, "2 routes, 2 sources, 0 permissions"}},
		{"left-out routes are named", accepted, routerFacts{Bundle: withBroken}, metav1.ConditionTrue, v1alpha1.ReasonProgrammed,
			[]string{"1 routes", "1 left out", `ContextRoute "bad-route": spec.when: `}},
		{"not accepted", rejected, routerFacts{Bundle: small}, metav1.ConditionFalse, v1alpha1.ReasonInvalid,
			[]string{"not accepted (InvalidName)"}},
		{"invalid permissions", accepted, routerFacts{Bundle: permInvalid}, metav1.ConditionFalse, v1alpha1.ReasonInvalidPermissions,
			[]string{"AgentPermission/p: spec.denyPaths[0]", "last bundle keeps serving"}},
		{"compile failed", accepted, routerFacts{BuildErr: errors.New("no convergence")}, metav1.ConditionFalse, v1alpha1.ReasonCompileFailed,
			[]string{"no convergence"}},
		{"too large", accepted, routerFacts{Bundle: large}, metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge,
			[]string{fmt.Sprintf("%d bytes", large.Size()), "1048576", "3 routes, 3 sources"}},
		{"too large wins over apply errors", accepted, routerFacts{Bundle: large, ApplyErr: errors.New("x")}, metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, nil},
		{"apply failed", accepted, routerFacts{Bundle: small, ApplyErr: errors.New(`apply Deployment ns/acme: conflict`)}, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed,
			[]string{"apply Deployment ns/acme: conflict"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerProgrammed(2, tt.accepted, tt.facts)
			if c.Type != v1alpha1.ConditionProgrammed || c.Status != tt.status || c.Reason != string(tt.reason) || c.ObservedGeneration != 2 {
				t.Errorf("got %s=%s reason %s gen %d (%q), want %s reason %s gen 2", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message, tt.status, tt.reason)
			}
			for _, m := range tt.messages {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q, want it to contain %q", c.Message, m)
				}
			}
		})
	}
}

func deployment(gen, observed int64, st appsv1.DeploymentStatus) *appsv1.Deployment {
	st.ObservedGeneration = observed
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "acme", Generation: gen}, Status: st}
}

func TestRouterReady(t *testing.T) {
	programmed := metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: string(v1alpha1.ReasonProgrammed)}
	notProgrammed := metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse, Reason: string(v1alpha1.ReasonBundleTooLarge)}
	healthy := appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	tests := []struct {
		name       string
		programmed metav1.Condition
		dep        *appsv1.Deployment
		replicas   int32
		status     metav1.ConditionStatus
		reason     v1alpha1.ConditionReason
		message    string
	}{
		{"ready", programmed, deployment(3, 3, healthy), 2, metav1.ConditionTrue, v1alpha1.ReasonReady, "2 of 2 replicas ready"},
		{"not programmed, even with a healthy deployment", notProgrammed, deployment(3, 3, healthy), 2, metav1.ConditionFalse, v1alpha1.ReasonNotProgrammed, "BundleTooLarge"},
		{"no deployment", programmed, nil, 2, metav1.ConditionFalse, v1alpha1.ReasonDeploymentPending, "does not exist"},
		{"generation not observed", programmed, deployment(4, 3, healthy), 2, metav1.ConditionFalse, v1alpha1.ReasonDeploymentPending, "generation 4 is not yet observed (at 3)"},
		{"rolling out", programmed, deployment(4, 4, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}), 2,
			metav1.ConditionFalse, v1alpha1.ReasonRollingOut, "1 of 2 replicas run the current bundle"},
		{"old replicas terminating", programmed, deployment(4, 4, appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}), 2,
			metav1.ConditionFalse, v1alpha1.ReasonRollingOut, "1 replicas of an older bundle"},
		{"not ready", programmed, deployment(4, 4, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}), 2,
			metav1.ConditionFalse, v1alpha1.ReasonReplicasNotReady, "1 of 2 replicas ready"},
		{"ready but not yet available", programmed, deployment(4, 4, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1}), 2,
			metav1.ConditionFalse, v1alpha1.ReasonReplicasNotReady, "1 of 2 replicas ready"},
		{"progress deadline", programmed, deployment(4, 4, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "acme-1" has timed out progressing.`,
		}}}), 2, metav1.ConditionFalse, v1alpha1.ReasonRolloutFailed, "has timed out progressing"},
		{"scaled to zero", programmed, deployment(5, 5, appsv1.DeploymentStatus{}), 0, metav1.ConditionTrue, v1alpha1.ReasonReady, "scaled to 0 replicas"},
		{"scaled to zero, not yet observed", programmed, deployment(5, 4, appsv1.DeploymentStatus{}), 0, metav1.ConditionFalse, v1alpha1.ReasonDeploymentPending, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := routerReady(7, tt.programmed, routerFacts{Deployment: tt.dep, Replicas: tt.replicas})
			if c.Type != v1alpha1.ConditionReady || c.Status != tt.status || c.Reason != string(tt.reason) || c.ObservedGeneration != 7 {
				t.Errorf("got %s=%s reason %s gen %d (%q), want %s reason %s gen 7", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message, tt.status, tt.reason)
			}
			if !strings.Contains(c.Message, tt.message) {
				t.Errorf("message %q, want it to contain %q", c.Message, tt.message)
			}
		})
	}
}

func TestRouterConditions(t *testing.T) {
	b := testBundle(t, 1, 10)
	healthy := deployment(1, 1, appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1})
	tests := []struct {
		name  string
		facts routerFacts
		want  [3]v1alpha1.ConditionReason // reasons of Accepted, Programmed, Ready
	}{
		{"all good", routerFacts{Bundle: b, Deployment: healthy, Replicas: 1}, [3]v1alpha1.ConditionReason{v1alpha1.ReasonAccepted, v1alpha1.ReasonProgrammed, v1alpha1.ReasonReady}},
		{"bad name cascades", routerFacts{NameProblem: "x", Deployment: healthy, Replicas: 1}, [3]v1alpha1.ConditionReason{v1alpha1.ReasonInvalidName, v1alpha1.ReasonInvalid, v1alpha1.ReasonNotProgrammed}},
		{"pending deployment", routerFacts{Bundle: b, Replicas: 1}, [3]v1alpha1.ConditionReason{v1alpha1.ReasonAccepted, v1alpha1.ReasonProgrammed, v1alpha1.ReasonDeploymentPending}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := routerConditions(3, tt.facts)
			if len(conds) != 3 {
				t.Fatalf("%d conditions", len(conds))
			}
			for i, typ := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionProgrammed, v1alpha1.ConditionReady} {
				if conds[i].Type != typ || conds[i].Reason != string(tt.want[i]) {
					t.Errorf("condition %d = %s reason %s, want %s reason %s", i, conds[i].Type, conds[i].Reason, typ, tt.want[i])
				}
			}
		})
	}
}

// TestRouterSecretProblems: a router whose Redis password Secret (or its
// key) is missing is not Ready, with reason SecretNotFound naming the field,
// even while its Deployment is healthy; a Memory store reads no Secret.
func TestRouterSecretProblems(t *testing.T) {
	router := func(store v1alpha1.SessionStoreType) *v1alpha1.ContextRouter {
		r := &v1alpha1.ContextRouter{}
		r.Name = "acme"
		r.Spec.Sessions = v1alpha1.SessionsSpec{Store: store, Redis: &v1alpha1.RedisSpec{Address: "redis:6379",
			PasswordSecretRef: &v1alpha1.SecretKeySelector{Name: "cache", Key: "password"}}}
		return r
	}
	programmed := metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: string(v1alpha1.ReasonProgrammed)}
	healthy := deployment(3, 3, appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2})
	tests := []struct {
		name    string
		store   v1alpha1.SessionStoreType
		secrets map[string][]string
		reason  v1alpha1.ConditionReason
		message string
	}{
		{"no Secret", v1alpha1.SessionStoreRedis, nil, v1alpha1.ReasonSecretNotFound,
			`spec.sessions.redis.passwordSecretRef: Secret "cache" not found; the router pods run`},
		{"no key", v1alpha1.SessionStoreRedis, map[string][]string{"cache": {"pass"}}, v1alpha1.ReasonSecretNotFound,
			`spec.sessions.redis.passwordSecretRef: Secret "cache" has no key "password"`},
		{"present", v1alpha1.SessionStoreRedis, map[string][]string{"cache": {"password"}}, v1alpha1.ReasonReady, "2 of 2 replicas ready"},
		{"Memory store reads none", v1alpha1.SessionStoreMemory, nil, v1alpha1.ReasonReady, "2 of 2 replicas ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := routerSecretProblems(router(tt.store), tt.secrets)
			c := routerReady(7, programmed, routerFacts{Deployment: healthy, Replicas: 2, SecretProblems: ps})
			if c.Reason != string(tt.reason) || !strings.Contains(c.Message, tt.message) {
				t.Errorf("Ready %s %s %q; want reason %s and %q", c.Status, c.Reason, c.Message, tt.reason, tt.message)
			}
		})
	}
}

// TestTransitionEventNote: an event repeats at most maxEventNote bytes of
// its condition's message, cut on a character boundary and marked (a cut
// at byte 1000 split a character, so the note was not valid UTF-8).
func TestTransitionEventNote(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"short", "bundle is fine", "bundle is fine"},
		{"a character across the bound", strings.Repeat("x", maxEventNote-1) + "é" + strings.Repeat("y", 50), strings.Repeat("x", maxEventNote-1) + "…"},
		{"at the bound", strings.Repeat("z", maxEventNote), strings.Repeat("z", maxEventNote)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &events.FakeRecorder{Events: make(chan string, 4)}
			r := &RouterReconciler{Recorder: rec}
			before := &v1alpha1.ContextRouter{}
			after := before.DeepCopy()
			after.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse,
				Reason: string(v1alpha1.ReasonBundleTooLarge), Message: tc.msg}}
			r.recordTransitions(before, after)
			select {
			case got := <-rec.Events:
				note := strings.TrimPrefix(got, "Warning "+string(v1alpha1.ReasonBundleTooLarge)+" ")
				if note != tc.want || !utf8.ValidString(note) {
					t.Errorf("note %q (valid UTF-8: %v), want %q", note, utf8.ValidString(note), tc.want)
				}
			default:
				t.Fatal("no event")
			}
		})
	}
}
