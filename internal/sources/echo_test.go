package sources

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/redact/redacttest"
)

// A git server that refuses the credentials and echoes the Authorization
// header in its 401/403 body (as sent, URL-encoded and decoded): no
// encoding of the token or password reaches the sync error, the status or
// the log, whether the credentials come from auth.secretRef or the URL.
func TestGitRepoEchoedCredentials(t *testing.T) {
	const (
		token    = "ghp_EchoTok3n0123456789abcdef"
		password = "pa55/w+rd=secret"
	)
	auth := &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: "wiki-git"}}
	tests := []struct {
		name     string
		userinfo string // written into the URL
		secrets  map[string]string
		auth     *v1alpha1.GitAuth
		forms    []string
	}{
		{"token secret", "", wikiGitSecrets(map[string]string{"token": token}), auth, redacttest.BasicForms("x-access-token", token)},
		{"username and password secret", "", wikiGitSecrets(map[string]string{"username": "alice", "password": password}), auth, redacttest.BasicForms("alice", password)},
		{"token as the URL's user", token, nil, nil, redacttest.BasicForms(token, "")},
		{"password in the URL", "alice:" + url.PathEscape(password), nil, nil, redacttest.BasicForms("alice", password)},
	}
	for _, tc := range tests {
		for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			t.Run(tc.name+"/"+http.StatusText(status), func(t *testing.T) {
				var raw atomic.Value // the Authorization header the server got
				raw.Store("")
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					raw.Store(r.Header.Get("Authorization"))
					redacttest.EchoHandler(status, "Authorization").ServeHTTP(w, r)
				}))
				defer srv.Close()
				u := srv.URL + "/org/wiki.git"
				if tc.userinfo != "" {
					u = strings.Replace(u, "http://", "http://"+tc.userinfo+"@", 1)
				}
				env, log := gitEnv(t, tc.secrets)
				g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u, Auth: tc.auth}, env)
				_, err := g.Sync(context.Background())
				if err == nil {
					t.Fatal("Sync succeeded")
				}
				// The server did get the credentials: the test checks their echo.
				got := raw.Load().(string)
				if pair, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, "Basic ")); !strings.Contains(string(pair), ":") {
					t.Fatalf("the server got Authorization %q", got)
				}
				if !strings.Contains(err.Error(), "access denied. Authorization: Basic ***") {
					t.Errorf("error %q does not show the server's text, masked", err)
				}
				for what, text := range map[string]string{"error": err.Error(), "status": g.Status().LastError, "log": log.String()} {
					if leaks := redacttest.Leaks(text, tc.forms); len(leaks) > 0 {
						t.Errorf("%s shows %q:\n%s", what, leaks, text)
					}
				}
			})
		}
	}
}

// A git server whose 401 page is long, echoing the token URL-encoded near
// its start and again at its end: the sync error is one line, cut at
// maxUpstreamErrorBytes, holds no encoding of the token, and keeps the
// hint a missing auth gets.
func TestGitRepoLongErrorPage(t *testing.T) {
	const token = "ghp_LongPageTok3n0123456789"
	page := "<html>\n  <body>\n    <p>bad token " + url.QueryEscape(token) + "</p>\n" + strings.Repeat("    <p>Please sign in.</p>\n", 4000) + token + "</body></html>\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusUnauthorized)
	}))
	defer srv.Close()
	env, log := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: strings.Replace(srv.URL, "http://", "http://"+token+"@", 1) + "/org/wiki.git"}, env)
	_, err := g.Sync(context.Background())
	if err == nil {
		t.Fatal("Sync succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "authentication required: <html> <body> <p>bad token ***</p> <p>Please sign in.</p>") ||
		!strings.HasSuffix(msg, " (set spec.gitRepo.auth)") || strings.ContainsAny(msg, "\n\r") {
		t.Errorf("error = %q", msg)
	}
	if len(msg) > maxUpstreamErrorBytes+200 {
		t.Errorf("error is %d bytes, want the server's page cut at %d", len(msg), maxUpstreamErrorBytes)
	}
	for what, text := range map[string]string{"error": msg, "status": g.Status().LastError, "log": log.String()} {
		if leaks := redacttest.Leaks(text, redacttest.BasicForms(token, "")); len(leaks) > 0 {
			t.Errorf("%s shows %q", what, leaks)
		}
	}
}

// An HTTP API that refuses a request echoes a header (as sent, URL-encoded
// and decoded) in its error body: no encoding of a secret header, of a
// literal Basic header's password or of an environment value reaches the
// error callers see.
func TestHTTPAPIEchoedCredentials(t *testing.T) {
	const (
		apiKey   = "kb-key/with+sl@sh"
		password = "svc-pa55word"
		envToken = "env-t0ken/value"
	)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("svc:"+password))
	headers := []v1alpha1.HTTPHeader{
		{Name: "X-Api-Key", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.SecretKeySelector{Name: "kb", Key: "key"}}},
		{Name: "Authorization", Value: &basic},
		{Name: "X-Token", Value: httpStrPtr("${KB_TOKEN}")},
	}
	env := Env{Getenv: func(k string) string {
		return map[string]string{SecretEnvVar("kb", "key"): apiKey, "KB_TOKEN": envToken}[k]
	}}
	// Every request carries all three, and the server decodes the Basic one
	// whichever it echoes.
	forms := slices.Concat(redacttest.Forms(apiKey), redacttest.BasicForms("svc", password), redacttest.Forms(envToken))
	for _, header := range []string{"X-Api-Key", "Authorization", "X-Token"} {
		for _, status := range []int{http.StatusUnauthorized, http.StatusInternalServerError} {
			t.Run(header+"/"+http.StatusText(status), func(t *testing.T) {
				srv := httptest.NewServer(redacttest.EchoHandler(status, header))
				defer srv.Close()
				h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/search?q={{query}}", TextField: "text", Headers: headers}, env)
				_, err := h.Fetch(t.Context(), "q")
				if err == nil {
					t.Fatal("Fetch succeeded")
				}
				if !strings.Contains(err.Error(), "access denied. "+header+": ***; encoded: ***;") {
					t.Errorf("error %q does not show the server's text, masked", err)
				}
				if leaks := redacttest.Leaks(err.Error(), forms); len(leaks) > 0 {
					t.Errorf("error shows %q: %s", leaks, err)
				}
			})
		}
	}
}

// An MCP server that refuses the session with a JSON-RPC error whose
// message echoes the headers: the sync error holds no encoding of the spec
// headers' values, nor of the Basic value net/http makes of the URL's
// user part.
func TestMCPEchoedCredentials(t *testing.T) {
	const urlPassword = "pa55/w+rd!x" // its Basic value ends in "="
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32001, "message": redacttest.Echo(r, "X-Api-Key", "Authorization")}})
	}))
	defer srv.Close()
	tests := []struct {
		name  string
		url   string
		edit  func(*v1alpha1.MCPSource)
		forms []string
	}{
		{"spec headers", srv.URL + "/mcp", nil, append(redacttest.Forms(mcpSecretKey), redacttest.Forms(mcpEnvToken)...)},
		{"URL user part", strings.Replace(srv.URL, "http://", "http://robot:"+url.PathEscape(urlPassword)+"@", 1) + "/mcp",
			func(s *v1alpha1.MCPSource) { s.Headers = nil }, redacttest.BasicForms("robot", urlPassword)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMCPSource(t, tc.url, tc.edit)
			_, err := m.Sync(context.Background())
			if err == nil {
				t.Fatal("Sync succeeded")
			}
			if !strings.Contains(err.Error(), `initialize: calling "initialize": access denied.`) || !strings.Contains(err.Error(), "Authorization: ***") &&
				!strings.Contains(err.Error(), "Authorization: Basic ***") {
				t.Errorf("error %q does not show the server's text, masked", err)
			}
			if leaks := redacttest.Leaks(err.Error(), tc.forms); len(leaks) > 0 {
				t.Errorf("error shows %q: %s", leaks, err)
			}
		})
	}
}
