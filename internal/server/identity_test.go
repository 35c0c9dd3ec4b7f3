package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

func TestServiceAccountName(t *testing.T) {
	for _, tc := range []struct {
		user, want string
		ok         bool
	}{
		{"system:serviceaccount:agents:hr-assistant", "hr-assistant", true},
		{"system:serviceaccount:a:b", "b", true},
		{"system:serviceaccount::hr-assistant", "", false},
		{"system:serviceaccount:agents:", "", false},
		{"system:serviceaccount:agents", "", false},
		{"system:serviceaccount:agents:a:b", "", false},
		{"system:node:worker-1", "", false},
		{"alice@example.com", "", false},
	} {
		got, ok := serviceAccountName(tc.user)
		if got != tc.want || ok != tc.ok {
			t.Errorf("serviceAccountName(%q) = %q, %v; want %q, %v", tc.user, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReviewAnswer(t *testing.T) {
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:agents:hr-assistant"}
	for _, tc := range []struct {
		name   string
		status authenticationv1.TokenReviewStatus
		agent  string
		code   int
		msg    string
	}{
		{"service account", authenticationv1.TokenReviewStatus{Authenticated: true, User: sa, Audiences: []string{Audience}}, "hr-assistant", 0, ""},
		{"several audiences", authenticationv1.TokenReviewStatus{Authenticated: true, User: sa, Audiences: []string{"api", Audience}}, "hr-assistant", 0, ""},
		{"not authenticated", authenticationv1.TokenReviewStatus{Error: "token has expired"}, "", 401, "token rejected: token has expired"},
		{"audience-unaware authenticator", authenticationv1.TokenReviewStatus{Authenticated: true, User: sa}, "", 401, "not issued for audience contextrouter.dev"},
		{"a person", authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice"}, Audiences: []string{Audience}}, "", 403, `user "alice" is not a ServiceAccount`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans := reviewAnswer(&authenticationv1.TokenReview{Status: tc.status})
			if ans.agent != tc.agent {
				t.Errorf("agent %q, want %q", ans.agent, tc.agent)
			}
			switch {
			case tc.code == 0 && ans.err != nil:
				t.Errorf("error %v", ans.err)
			case tc.code != 0 && (ans.err == nil || ans.err.code != tc.code || !strings.Contains(ans.err.msg, tc.msg)):
				t.Errorf("error %+v, want %d %q", ans.err, tc.code, tc.msg)
			}
		})
	}
}

func TestReconcileAgent(t *testing.T) {
	for _, tc := range []struct {
		established, requested, want string
		refused                      bool
	}{
		{"", "", "", false},
		{"", "anyone", "anyone", false},
		{"hr-assistant", "", "hr-assistant", false},
		{"hr-assistant", "hr-assistant", "hr-assistant", false},
		{"hr-assistant", "finance-analyst", "", true},
		{"hr-assistant", "HR-Assistant", "", true},
	} {
		got, err := reconcileAgent(tc.established, tc.requested)
		if got != tc.want || (err != nil) != tc.refused || (err != nil && err.code != http.StatusForbidden) {
			t.Errorf("reconcileAgent(%q, %q) = %q, %v", tc.established, tc.requested, got, err)
		}
	}
}

const tokenRouter = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: secure}
spec:
  defaultAccess: Deny
  auth: {mode: ServiceAccountToken}
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: hr}
spec:
  agents: [hr-assistant]
  allowSources: [notes]
`

// countingReviewer counts the TokenReviews that reach the API server.
type countingReviewer struct {
	next  TokenReviewer
	calls atomic.Int64
}

func (c *countingReviewer) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.calls.Add(1)
	return c.next.Create(ctx, tr, opts)
}

// auth.mode ServiceAccountToken against a real API server: tokens from the
// TokenRequest API for audience contextrouter.dev identify the agent.
func TestTokenReviewWithAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "agents"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string, audiences ...string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
			if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	hr := token("hr-assistant", Audience)
	intruder := token("intruder", Audience)
	otherAudience := token("hr-assistant", "https://kubernetes.default.svc")
	// The same ServiceAccount name in another namespace is another agent.
	ns = "elsewhere"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	impostor := token("hr-assistant", Audience)

	dir := t.TempDir()
	// The router lives in the agents' namespace.
	writeAtomic(t, filepath.Join(dir, "router.yaml"), strings.Replace(tokenRouter, "metadata: {name: secure}", "metadata: {name: secure, namespace: agents}", 1)+"---\n"+inlineManifests("v1", "notes"))
	reviewer := &countingReviewer{next: cs.AuthenticationV1().TokenReviews()}
	ts := startServer(t, Options{Paths: []string{dir}, TokenReviewer: func() (TokenReviewer, error) { return reviewer, nil }})
	ts.waitReady()
	if st := ts.status(); st.Auth != "token" || st.Router != "secure" {
		t.Fatalf("status auth %q router %q", st.Auth, st.Router)
	}

	body := `{"text": "deploy checklist"}`
	tests := []struct {
		name, auth, body string
		code             int
		want             string
	}{
		{"no token", "", body, 401, "requires an `Authorization: Bearer <token>` header"},
		{"basic auth", "Basic aHI6cHc=", body, 401, "requires an `Authorization: Bearer <token>` header"},
		{"garbage token", "Bearer not-a-token", body, 401, "token rejected"},
		{"token for another audience", "Bearer " + otherAudience, body, 401, "token rejected"},
		{"hr-assistant", "Bearer " + hr, body, 200, `"denied_sources":[]`},
		{"hr-assistant naming itself", "Bearer " + hr, `{"text": "deploy checklist", "agent": "hr-assistant"}`, 200, `"source":"notes"`},
		{"hr-assistant naming another agent", "Bearer " + hr, `{"text": "deploy checklist", "agent": "finance-analyst"}`, 403, `agent \"finance-analyst\" is not allowed`},
		{"another service account", "Bearer " + intruder, body, 200, `"denied_sources":["notes"]`},
		{"scheme in lower case", "bearer " + hr, body, 200, `"source":"notes"`},
		{"same name in another namespace", "Bearer " + impostor, body, 403, `ServiceAccount elsewhere/hr-assistant is not in the router's namespace`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.auth != "" {
				h.Set("Authorization", tc.auth)
			}
			req, _ := http.NewRequest(http.MethodPost, ts.url+"/v1/query", strings.NewReader(tc.body))
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tc.code, tc.want)
			}
			if tc.code == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}

	// Answers are cached: asking again reviews nothing new.
	calls := reviewer.calls.Load()
	for range 5 {
		code, _ := ts.do(http.MethodPost, "/v1/query", strings.NewReader(body), http.Header{"Authorization": {"Bearer " + hr}})
		if code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if got := reviewer.calls.Load(); got != calls {
		t.Errorf("%d more TokenReviews for a cached token", got-calls)
	}
	// hr, intruder, impostor, garbage and the wrong-audience token: one review each.
	if calls != 5 {
		t.Errorf("%d TokenReviews, want 5 (one per distinct token)", calls)
	}
	for result, want := range map[string]float64{"authenticated": 3, "rejected": 2} {
		if got, _ := ts.metric("contextrouter_token_reviews_total", "result", result); got != want {
			t.Errorf("token_reviews_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// Token auth without a way to reach the API server fails the load: the
// router never serves unauthenticated.
func TestTokenModeNeedsReviewer(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), tokenRouter+"---\n"+inlineManifests("v1", "notes"))
	for _, tc := range []struct {
		name    string
		factory func() (TokenReviewer, error)
		want    string
	}{
		{"none configured", nil, "none is configured"},
		{"unreachable", func() (TokenReviewer, error) { return nil, errors.New("no in-cluster config") }, "no in-cluster config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{Paths: []string{dir}, TokenReviewer: tc.factory})
			eventually(t, 10*time.Second, "the failed load", func() bool { return ts.status().LastReloadError != "" })
			st := ts.status()
			if st.Ready || !strings.Contains(st.LastReloadError, `ContextRouter "secure": spec.auth.mode ServiceAccountToken`) ||
				!strings.Contains(st.LastReloadError, tc.want) {
				t.Fatalf("status %+v", st)
			}
		})
	}
	// A pinned agent (sidecar) needs no token: the pod's identity is fixed.
	ts := startServer(t, Options{Paths: []string{dir}, Agent: "hr-assistant"})
	ts.waitReady()
	resp := ts.query(engine.Request{Text: "deploy checklist"})
	if len(resp.Chunks) != 1 || !slices.Equal(resp.DeniedSources, []string{}) {
		t.Fatalf("pinned answer: %+v", resp)
	}
}
