package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

func TestServiceAccountRef(t *testing.T) {
	for _, tc := range []struct {
		user, ns, name string
		ok             bool
	}{
		{"system:serviceaccount:agents:hr-assistant", "agents", "hr-assistant", true},
		{"system:serviceaccount:a:b", "a", "b", true},
		{"system:serviceaccount::hr-assistant", "", "", false},
		{"system:serviceaccount:agents:", "", "", false},
		{"system:serviceaccount:agents", "", "", false},
		{"system:serviceaccount:agents:a:b", "", "", false},
		{"system:node:worker-1", "", "", false},
		{"alice@example.com", "", "", false},
	} {
		ns, name, ok := serviceAccountRef(tc.user)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("serviceAccountRef(%q) = %q, %q, %v; want %q, %q, %v", tc.user, ns, name, ok, tc.ns, tc.name, tc.ok)
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
			ans := reviewAnswer(tc.status)
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

// mcpInitialize is an MCP client's first request.
const mcpInitialize = `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}`

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

// agentsNamespace is the namespace of the router and its agents in token tests.
const agentsNamespace = "agents"

// tokenCluster is a real API server issuing ServiceAccount tokens, with
// the router's own ServiceAccount "router" of agentsNamespace bound to
// system:auth-delegator only, as the operator sets it up.
type tokenCluster struct {
	t   *testing.T
	env *testenv.Env
	cs  *kubernetes.Clientset
}

func newTokenCluster(t *testing.T) *tokenCluster {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &tokenCluster{t: t, env: env, cs: cs}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "router-auth-delegator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "router", Namespace: agentsNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// token issues a token of ServiceAccount ns/sa (created with its
// namespace when missing) for audiences (none: the API server's own).
func (c *tokenCluster) token(ns, sa string, audiences ...string) string {
	c.t.Helper()
	ctx := context.Background()
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatal(err)
	}
	if _, err := c.cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		c.t.Fatal(err)
	}
	tr, err := c.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return tr.Status.Token
}

// kube is the router's connection to the API server, as ServiceAccount
// router, each request through wrap when given.
func (c *tokenCluster) kube(wrap func(http.RoundTripper) http.RoundTripper) func() (*rest.Config, error) {
	routerToken := c.token(agentsNamespace, "router")
	return func() (*rest.Config, error) {
		cfg := &rest.Config{Host: c.env.Config.Host, BearerToken: routerToken, TLSClientConfig: rest.TLSClientConfig{CAData: c.env.Config.CAData}}
		if wrap != nil {
			cfg.Wrap(wrap)
		}
		return cfg, nil
	}
}

// routerDir writes the manifests of a token-mode router of agentsNamespace
// with one source, notes, that hr-assistant may read.
func (c *tokenCluster) routerDir() string {
	dir := c.t.TempDir()
	writeAtomic(c.t, filepath.Join(dir, "router.yaml"), strings.Replace(tokenRouter, "metadata: {name: secure}", "metadata: {name: secure, namespace: "+agentsNamespace+"}", 1)+"---\n"+inlineManifests("v1", "notes"))
	return dir
}

// reviewCounter counts the TokenReviews that reach the API server.
type reviewCounter struct{ tokenReviews atomic.Int64 }

func (c *reviewCounter) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/tokenreviews") {
			c.tokenReviews.Add(1)
		}
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// auth.mode ServiceAccountToken against a real API server: tokens from the
// TokenRequest API for audience contextrouter.dev identify the agent, and
// /v1/status and /metrics are guarded too. The router calls the API server
// as a ServiceAccount bound to system:auth-delegator only, as the operator
// sets it up.
func TestTokenReviewWithAPIServer(t *testing.T) {
	c := newTokenCluster(t)
	hr := c.token(agentsNamespace, "hr-assistant", Audience)
	intruder := c.token(agentsNamespace, "intruder", Audience)
	otherAudience := c.token(agentsNamespace, "hr-assistant", "https://kubernetes.default.svc")
	// The API server's own audience: what Prometheus presents.
	scraper := func() string { return c.token(agentsNamespace, "prometheus") }
	// The same ServiceAccount name in another namespace is another agent.
	impostor := c.token("elsewhere", "hr-assistant", Audience)

	dir := c.routerDir()
	counter := &reviewCounter{}
	kube := c.kube(counter.RoundTrip)
	ts := startServer(t, Options{Paths: []string{dir}, Kube: kube})
	ts.waitReady()
	ask := func(method, path, auth, body string) (*http.Response, string) {
		t.Helper()
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		resp, b := ts.request(method, path, strings.NewReader(body), h)
		return resp, string(b)
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
			resp, b := ask(http.MethodPost, "/v1/query", tc.auth, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(b, tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tc.code, tc.want)
			}
			// Naming another agent is a fault of the body, not of the credentials.
			if tc.name != "hr-assistant naming another agent" {
				checkChallenge(t, resp)
			}
		})
	}

	// Answers are cached: asking again reviews nothing new.
	calls := counter.tokenReviews.Load()
	for range 5 {
		code, _ := ts.do(http.MethodPost, "/v1/query", strings.NewReader(body), http.Header{"Authorization": {"Bearer " + hr}})
		if code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if got := counter.tokenReviews.Load(); got != calls {
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

	// /v1/status asks what a query asks: a ServiceAccount token of the
	// router's namespace for audience contextrouter.dev.
	for _, tc := range []struct {
		name, auth string
		code       int
		want       string
	}{
		{"no token", "", 401, "requires an `Authorization: Bearer <token>` header"},
		{"garbage token", "Bearer not-a-token", 401, "token rejected"},
		{"token for another audience", "Bearer " + otherAudience, 401, "token rejected"},
		{"same name in another namespace", "Bearer " + impostor, 403, "is not in the router's namespace"},
		{"an agent", "Bearer " + hr, 200, `"auth": "token"`},
		{"any ServiceAccount of the namespace", "Bearer " + intruder, 200, `"router": "secure"`},
	} {
		t.Run("status/"+tc.name, func(t *testing.T) {
			resp, b := ask(http.MethodGet, "/v1/status", tc.auth, "")
			if resp.StatusCode != tc.code || !strings.Contains(b, tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tc.code, tc.want)
			}
			checkChallenge(t, resp)
		})
		if tc.code == http.StatusOK {
			continue
		}
		// /mcp refuses as a query does (api.md §10.6), before the MCP layer.
		t.Run("mcp/"+tc.name, func(t *testing.T) {
			resp, b := ask(http.MethodPost, "/mcp", tc.auth, mcpInitialize)
			if resp.StatusCode != tc.code || !strings.Contains(b, tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tc.code, tc.want)
			}
			checkChallenge(t, resp)
		})
	}

	// The tool endpoints settle the agent as a query does.
	for _, tc := range []struct {
		name, method, path, auth, body string
		code                           int
		want                           string
	}{
		{"tools without a token", http.MethodPost, "/v1/tools", "", body, 401, "requires an `Authorization: Bearer <token>` header"},
		{"tools of an agent", http.MethodPost, "/v1/tools", "Bearer " + hr, body, 200, `"tools":[]`},
		{"tools naming another agent", http.MethodPost, "/v1/tools", "Bearer " + hr, `{"text": "x", "agent": "finance-analyst"}`, 403, `agent \"finance-analyst\" is not allowed`},
		{"tools from another namespace", http.MethodPost, "/v1/tools", "Bearer " + impostor, body, 403, "is not in the router's namespace"},
		{"tree without a token", http.MethodGet, "/v1/tools/tree", "", "", 401, "requires an `Authorization: Bearer <token>` header"},
		{"tree with a garbage token", http.MethodGet, "/v1/tools/tree", "Bearer not-a-token", "", 401, "token rejected"},
		{"tree of an agent", http.MethodGet, "/v1/tools/tree", "Bearer " + hr, "", 200, `{"root":{"label":"tools","children":[],"tools":[]}}`},
		{"tree naming itself", http.MethodGet, "/v1/tools/tree?agent=hr-assistant", "Bearer " + hr, "", 200, `"root"`},
		{"tree naming another agent", http.MethodGet, "/v1/tools/tree?agent=finance-analyst", "Bearer " + hr, "", 403, `agent \"finance-analyst\" is not allowed`},
		{"tree from another namespace", http.MethodGet, "/v1/tools/tree", "Bearer " + impostor, "", 403, "is not in the router's namespace"},
	} {
		t.Run("tools/"+tc.name, func(t *testing.T) {
			resp, b := ask(tc.method, tc.path, tc.auth, tc.body)
			if resp.StatusCode != tc.code || !strings.Contains(b, tc.want) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tc.code, tc.want)
			}
		})
	}

	// /metrics needs a token the API server accepts for itself, of a user
	// allowed to get the nonResourceURL /metrics (SubjectAccessReview).
	prometheus := scraper()
	for _, tc := range []struct {
		name, auth string
		code       int
	}{
		{"no token", "", 401},
		{"garbage token", "Bearer not-a-token", 401},
		{"an agent's token is for contextrouter.dev, not the API server", "Bearer " + hr, 401},
		{"a ServiceAccount without the metrics-reader role", "Bearer " + prometheus, 403},
	} {
		t.Run("metrics/"+tc.name, func(t *testing.T) {
			resp, b := ask(http.MethodGet, "/metrics", tc.auth, "")
			if resp.StatusCode != tc.code || strings.Contains(b, "contextrouter_") {
				t.Fatalf("%d %s, want %d and no metrics", resp.StatusCode, b, tc.code)
			}
			checkChallenge(t, resp)
		})
	}
	ctx, cs := context.Background(), c.cs
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: agentsNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A fresh token: the filter remembers a denial for 30 seconds.
	prometheus = scraper()
	eventually(t, 30*time.Second, "an authorized scrape", func() bool {
		resp, b := ask(http.MethodGet, "/metrics", "Bearer "+prometheus, "")
		return resp.StatusCode == 200 && strings.Contains(b, "contextrouter_token_reviews_total")
	})

	if _, err := ts.mcpConnect(nil); err == nil {
		t.Error("an MCP client without a token connected")
	}
	for _, tc := range []struct {
		name, token string
		args        map[string]any
		want        string
	}{
		{"hr-assistant", hr, map[string]any{"text": "deploy checklist"}, `"denied_sources":[]`},
		{"hr-assistant naming itself", hr, map[string]any{"text": "deploy checklist", "agent": "hr-assistant"}, `"source":"notes"`},
		{"another service account", intruder, map[string]any{"text": "deploy checklist"}, `"denied_sources":["notes"]`},
		{"another service account naming hr-assistant", intruder, map[string]any{"text": "deploy checklist", "agent": "hr-assistant"}, `error: agent "hr-assistant" is not allowed: this router identifies the caller as agent "intruder"`},
	} {
		t.Run("mcp/"+tc.name, func(t *testing.T) {
			cs, err := ts.mcpConnect(http.Header{"Authorization": {"Bearer " + tc.token}})
			if err != nil {
				t.Fatal(err)
			}
			res := getContext(t, cs, tc.args)
			got := resultText(res)
			if res.IsError {
				got = "error: " + got
			} else {
				b, _ := json.Marshal(res.StructuredContent)
				got = string(b)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("get_context: %s, want %s", got, tc.want)
			}
		})
	}

	// The kubelet's probes stay open.
	for _, path := range []string{"/healthz", "/readyz"} {
		if resp, b := ask(http.MethodGet, path, "", ""); resp.StatusCode != 200 {
			t.Errorf("%s without a token: %d %s", path, resp.StatusCode, b)
		}
	}
}

// checkChallenge asserts that a refusal carries the bearer challenge.
func checkChallenge(t *testing.T, resp *http.Response) {
	t.Helper()
	want := map[int]string{
		http.StatusUnauthorized: `Bearer realm="contextrouter"`,
		http.StatusForbidden:    `Bearer realm="contextrouter", error="insufficient_scope"`,
	}[resp.StatusCode]
	if got := resp.Header.Get("WWW-Authenticate"); got != want {
		t.Errorf("%d with WWW-Authenticate %q, want %q", resp.StatusCode, got, want)
	}
}

// Token auth without a way to reach the API server fails the load: the
// router never serves unauthenticated, and its status and metrics are not
// open meanwhile; the reason is in the log.
func TestTokenModeNeedsReviewer(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), tokenRouter+"---\n"+inlineManifests("v1", "notes"))
	for _, tc := range []struct {
		name string
		kube func() (*rest.Config, error)
		want string
	}{
		{"none configured", nil, "none is configured"},
		{"unreachable", func() (*rest.Config, error) { return nil, errors.New("no in-cluster config") }, "no in-cluster config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Options{Paths: []string{dir}, Kube: tc.kube})
			want := `ContextRouter \"secure\": spec.auth.mode ServiceAccountToken`
			eventually(t, 10*time.Second, "the failed load in the log", func() bool {
				return strings.Contains(ts.logs.String(), want) && strings.Contains(ts.logs.String(), tc.want)
			})
			for _, tc := range []struct {
				path, auth string
				code       int
			}{
				{"/v1/status", "", http.StatusUnauthorized},
				{"/v1/status", "Bearer some-token", http.StatusServiceUnavailable},
				{"/metrics", "", http.StatusServiceUnavailable},
				{"/readyz", "", http.StatusServiceUnavailable},
			} {
				code, b := ts.do(http.MethodGet, tc.path, nil, http.Header{"Authorization": {tc.auth}})
				if code != tc.code || strings.Contains(string(b), "secure") || strings.Contains(string(b), "contextrouter_") {
					t.Errorf("%s with %q: %d %s; want %d without the configuration's details", tc.path, tc.auth, code, b, tc.code)
				}
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

// brokenRoute is a route whose source does not exist: the manifests decode,
// their check fails, and the error names the missing source.
const brokenRoute = `---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: leaky}
spec:
  sources: [{name: internal-ledger-7f3a}]
`

// notServingAnswers asks what an unauthenticated caller can ask of a server
// that has no configuration, and returns the bodies by path.
func notServingAnswers(t *testing.T, ts *testServer) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/readyz", ""},
		{http.MethodPost, "/v1/query", `{"text": "deploy"}`},
		{http.MethodPost, "/mcp", mcpInitialize},
		{http.MethodGet, "/v1/status", ""},
	} {
		code, b := ts.do(r.method, r.path, strings.NewReader(r.body), http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}})
		out[r.path] = fmt.Sprintf("%d %s", code, b)
	}
	return out
}

// Before a configuration serves, a failed load's error describes the
// configuration: a router in token mode shows it to nobody unauthenticated
// (/readyz, /v1/query and /mcp say only that the load failed; /v1/status
// asks for a token), and neither does a server that cannot tell whether the
// router is in token mode (the ContextRouter, or a document that could be
// one, did not decode). A router that the files show is not in token mode
// says why, as it always has.
func TestLoadErrorHiddenBeforeTokenModeServes(t *testing.T) {
	secure := tokenRouter
	open := strings.Replace(tokenRouter, "  auth: {mode: ServiceAccountToken}\n", "", 1)
	for _, tc := range []struct {
		name, manifests, marker string
		hidden                  bool
	}{
		{"token mode, a route's source missing", secure + "---\n" + inlineManifests("v1", "notes") + brokenRoute, "internal-ledger-7f3a", true},
		{"token mode, the router does not decode", strings.Replace(secure, "defaultAccess: Deny", "defaultAccess: Deny\n  ledgerAccount7f3a: x", 1) + "---\n" + inlineManifests("v1", "notes"), "ledgerAccount7f3a", true},
		{"a document that is not YAML", open + "---\n" + inlineManifests("v1", "notes") + "---\nkind: [ledger7f3a\n", "invalid YAML", true},
		{"auth mode None", open + "---\n" + inlineManifests("v1", "notes") + brokenRoute, "internal-ledger-7f3a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeAtomic(t, filepath.Join(dir, "router.yaml"), tc.manifests)
			ts := startServer(t, Options{Paths: []string{dir}})
			eventually(t, 10*time.Second, "the failed load in the log", func() bool {
				return strings.Contains(ts.logs.String(), "configuration not loaded; not ready")
			})
			if !strings.Contains(ts.logs.String(), tc.marker) {
				t.Fatalf("the log lacks the error (%s):\n%s", tc.marker, ts.logs.String())
			}
			for path, got := range notServingAnswers(t, ts) {
				leaks := strings.Contains(got, tc.marker) || strings.Contains(got, dir)
				switch {
				case tc.hidden && leaks:
					t.Errorf("%s shows the load error to an unauthenticated caller: %s", path, got)
				case tc.hidden && path == "/v1/status" && !strings.HasPrefix(got, "401 "):
					t.Errorf("%s: %s, want 401", path, got)
				case tc.hidden && path != "/v1/status" && (!strings.HasPrefix(got, "503 ") || !strings.Contains(got, "the last load failed (the router's log says why)")):
					t.Errorf("%s: %s, want 503 saying the load failed", path, got)
				case !tc.hidden && !leaks:
					t.Errorf("%s: %s; a router without token auth says why it is not ready", path, got)
				}
			}
		})
	}
}

// Before a token-mode router serves, a caller with a ServiceAccount token of
// its namespace reads the load error in /v1/status, as it would once the
// router serves; /readyz still says only that the load failed.
func TestLoadErrorForAuthenticatedCaller(t *testing.T) {
	c := newTokenCluster(t)
	dir := c.routerDir()
	f, err := os.OpenFile(filepath.Join(dir, "router.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(brokenRoute)
	_ = f.Close()
	ts := startServer(t, Options{Paths: []string{dir}, Kube: c.kube(nil)})
	eventually(t, 10*time.Second, "the failed load", func() bool {
		return strings.Contains(ts.logs.String(), "configuration not loaded; not ready")
	})
	for _, tc := range []struct {
		name, token string
		code        int
		want        string
	}{
		{"an agent of the namespace", c.token(agentsNamespace, "hr-assistant", Audience), 200, `internal-ledger-7f3a`},
		{"another namespace", c.token("elsewhere", "hr-assistant", Audience), 403, "is not in the router's namespace"},
		{"no token", "", 401, "requires an `Authorization: Bearer <token>` header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.token != "" {
				h.Set("Authorization", "Bearer "+tc.token)
			}
			code, b := ts.do(http.MethodGet, "/v1/status", nil, h)
			if code != tc.code || !strings.Contains(string(b), tc.want) || (code != 200 && strings.Contains(string(b), "internal-ledger-7f3a")) {
				t.Errorf("/v1/status: %d %s; want %d with %s", code, b, tc.code, tc.want)
			}
		})
	}
	if code, b := ts.get("/readyz"); code != 503 || strings.Contains(string(b), "internal-ledger-7f3a") {
		t.Errorf("/readyz: %d %s", code, b)
	}
}
