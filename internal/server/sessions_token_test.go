package server

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// Sessions in auth.mode ServiceAccountToken against a real API server: the
// token's ServiceAccount owns the sessions it creates; another agent's token
// gets 403 on them and finds none of their artifacts.
func TestSessionsTokenMode(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "agents"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string, audiences ...string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	// The router's own token is for the API server's audience.
	hr, intruder, routerToken := token("hr-assistant", Audience), token("intruder", Audience), token("router")
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "router-auth-delegator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "router", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), strings.Replace(tokenRouter, "metadata: {name: secure}", "metadata: {name: secure, namespace: agents}", 1)+"---\n"+inlineManifests("v1", "notes"))
	kube := func() (*rest.Config, error) {
		return &rest.Config{Host: env.Config.Host, BearerToken: routerToken, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}, nil
	}
	ts := startServer(t, Options{Paths: []string{dir}, Kube: kube})
	ts.waitReady()
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	ts.mustCall(200, "POST", "/v1/sessions/s1/items", `{"items": [{"id": "r", "kind": "tool_result", "text": `+jsonString(bigBalance)+`}]}`, bearer(hr))
	ref := session.ArtifactRef(bigBalance)
	ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?view=json&path=.employee", nil, bearer(hr))
	ts.mustCall(200, "POST", "/v1/sessions/s1/context", `{"phase": "interpret"}`, bearer(hr))
	for _, tc := range []struct {
		name, method, path, body string
		header                   http.Header
		code                     int
		want                     string
	}{
		{"no token", "POST", "/v1/sessions/s1/context", `{"phase": "answer"}`, nil, 401, "requires an `Authorization: Bearer <token>` header"},
		{"garbage token", "POST", "/v1/sessions/s1/items", `{"items": [{"id": "x", "kind": "user_turn"}]}`, bearer("nope"), 401, "token rejected"},
		{"another agent writes", "POST", "/v1/sessions/s1/items", `{"items": [{"id": "x", "kind": "user_turn"}]}`, bearer(intruder), 403, `session \"s1\" belongs to another agent`},
		{"another agent packs", "POST", "/v1/sessions/s1/context", `{"phase": "answer"}`, bearer(intruder), 403, `session \"s1\" belongs to another agent`},
		{"another agent deletes", "DELETE", "/v1/sessions/s1", ``, bearer(intruder), 403, `belongs to another agent`},
		{"another agent's artifact", "GET", "/v1/artifacts/" + ref, ``, bearer(intruder), 404, "not found in this agent's sessions"},
		{"naming the owner", "POST", "/v1/sessions/s1/context", `{"phase": "answer", "agent": "hr-assistant"}`, bearer(intruder), 403, `agent \"hr-assistant\" is not allowed: this router identifies the caller as agent \"intruder\"`},
		{"artifact naming the owner", "GET", "/v1/artifacts/" + ref + "?agent=hr-assistant", ``, bearer(intruder), 403, `agent \"hr-assistant\" is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := ts.sessionCall(tc.method, tc.path, tc.body, tc.header)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("%d %s\nwant %d with %s", code, out, tc.code, tc.want)
			}
		})
	}
	ts.mustCall(204, "DELETE", "/v1/sessions/s1", nil, bearer(hr))
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s))
	b.WriteByte('"')
	return b.String()
}
