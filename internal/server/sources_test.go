package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/redact/redacttest"
)

// A source that hangs and one that fails: the query still answers within
// the source timeout, with both in failed_sources, and the metrics count them.
func TestFailingHTTPSources(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hang.Close()
	defer close(release)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "index unavailable", http.StatusInternalServerError)
	}))
	defer broken.Close()
	working := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `[{"title": "Search hit", "text": "Deploy checklist from search for %s."}]`, r.URL.Query().Get("q"))
	}))
	defer working.Close()

	dir := t.TempDir()
	httpSource := func(name, url string) string {
		return fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: %s}
spec:
  type: HTTPAPI
  httpAPI: {url: "%s/search?q={{query}}", textField: text, titleField: title, timeout: 1s}
---
`, name, url)
	}
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes")+
		httpSource("hang", hang.URL)+httpSource("broken", broken.URL)+httpSource("search", working.URL)+`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: remote}
spec:
  sources: [{name: hang}, {name: broken}, {name: search}]
`)
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()

	start := time.Now()
	resp := ts.query(engine.Request{Text: "deploy"})
	took := time.Since(start)
	if took > 4*time.Second {
		t.Errorf("the query took %s with a 1s source timeout", took)
	}
	failed := map[string]string{}
	for _, f := range resp.FailedSources {
		failed[f.Source] = f.Error
	}
	if len(failed) != 2 || !strings.Contains(failed["hang"], "timeout after 1s") || !strings.Contains(failed["broken"], "500") {
		t.Fatalf("failed_sources %+v", resp.FailedSources)
	}
	var got []string
	for _, c := range resp.Chunks {
		got = append(got, c.Source)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"notes", "search"}) {
		t.Fatalf("chunks from %v, want notes and search", got)
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"contextrouter_source_failures_total", []string{"source", "hang"}, 1},
		{"contextrouter_source_failures_total", []string{"source", "broken"}, 1},
		{"contextrouter_source_failures_total", []string{"source", "search"}, 0},
		{"contextrouter_source_fetch_duration_seconds", []string{"source", "hang"}, 1},
		{"contextrouter_source_fetch_duration_seconds", []string{"source", "broken"}, 1},
		{"contextrouter_source_fetch_duration_seconds", []string{"source", "search"}, 1},
	} {
		if got, ok := ts.metric(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// The timed-out fetch took about its timeout.
	code, b := ts.get("/metrics")
	if code != 200 || !strings.Contains(string(b), `contextrouter_source_fetch_duration_seconds_bucket{source="hang",le="0.5"} 0`) ||
		!strings.Contains(string(b), `contextrouter_source_fetch_duration_seconds_bucket{source="hang",le="2.5"} 1`) {
		t.Errorf("hang's fetch duration buckets are not around 1s:\n%s", grepLines(string(b), `source="hang"`))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// upstream is a git repository with a working tree that tests commit to.
type upstream struct {
	t    *testing.T
	dir  string
	repo *git.Repository
	when time.Time
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "wiki")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return &upstream{t: t, dir: dir, repo: repo, when: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
}

func (u *upstream) commit(files map[string]string) string {
	u.t.Helper()
	wt, err := u.repo.Worktree()
	if err != nil {
		u.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(u.dir, name), []byte(content), 0o644); err != nil {
			u.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			u.t.Fatal(err)
		}
	}
	u.when = u.when.Add(time.Hour)
	sig := &object.Signature{Name: "Wiki Bot", Email: "wiki@example.com", When: u.when}
	h, err := wt.Commit("update", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		u.t.Fatal(err)
	}
	return h.String()
}

// A git source picks up new commits on its interval without a restart, and
// when its remote disappears keeps serving the last good commit while the
// status and metrics report the failing syncs.
func TestGitSyncAndVanishingRemote(t *testing.T) {
	up := newUpstream(t)
	first := up.commit(map[string]string{"deploys.md": "# Deploys\n\nRoll back a deploy with the previous release, edition g1.\n"})
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec:
  type: GitRepo
  gitRepo: {url: "file://%s", interval: 100ms}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: wiki}]
`, filepath.ToSlash(up.dir)))
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	ts.waitEdition("g1")
	src := ts.status().Sources[0]
	if src.Commit != first || src.LastSync == nil || src.LastSyncError != "" || src.SyncInterval != "100ms" {
		t.Fatalf("git source status: %+v", src)
	}

	// A new commit is served after the next sync, from the same clone.
	second := up.commit(map[string]string{"deploys.md": "# Deploys\n\nRoll back a deploy with the previous release, edition g2.\n"})
	ts.waitEdition("g2")
	if c := ts.status().Sources[0].Commit; c != second {
		t.Fatalf("serving commit %s, want %s", c, second)
	}
	if age, ok := ts.metric("contextrouter_git_sync_age_seconds", "source", "wiki"); !ok || age < 0 || age > 5 {
		t.Fatalf("git sync age %v (present %v)", age, ok)
	}

	// The remote disappears: syncs fail, the last good commit keeps serving.
	if err := os.RemoveAll(up.dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a failed sync", func() bool {
		v, _ := ts.metric("contextrouter_git_sync_failures_total", "source", "wiki")
		return v >= 2 && ts.status().Sources[0].LastSyncError != ""
	})
	st := ts.status().Sources[0]
	if st.Commit != second || st.Chunks == 0 || !strings.Contains(st.LastSyncError, "wiki") {
		t.Fatalf("status after the remote vanished: %+v", st)
	}
	resp := ts.query(engine.Request{Text: "deploy checklist"})
	if edition(resp) != "g2" || len(resp.FailedSources) != 0 {
		t.Fatalf("answer after the remote vanished: edition %q, failed %+v", edition(resp), resp.FailedSources)
	}
	time.Sleep(300 * time.Millisecond)
	if age, _ := ts.metric("contextrouter_git_sync_age_seconds", "source", "wiki"); age < 0.3 {
		t.Fatalf("git sync age %v keeps resetting while syncs fail", age)
	}
	if code, _ := ts.get("/readyz"); code != 200 {
		t.Fatal("not ready while serving the last good commit")
	}
}

// A reload of the manifests keeps a git source whose spec did not change:
// same clone, no new first sync, and its sync loop keeps running.
func TestReloadKeepsGitSource(t *testing.T) {
	up := newUpstream(t)
	up.commit(map[string]string{"deploys.md": "# Deploys\n\nRoll back a deploy with the previous release, edition g1.\n"})
	file := filepath.Join(t.TempDir(), "router.yaml")
	manifests := func(marker string) string {
		return inlineManifests(marker, "notes") + fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec:
  type: GitRepo
  gitRepo: {url: "file://%s", interval: 1h}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: wiki}]
`, filepath.ToSlash(up.dir))
	}
	writeAtomic(t, file, manifests("v1"))
	ts := startServer(t, Options{Paths: []string{file}, PollInterval: -1})
	ts.waitReady()
	before := ts.srv.Snapshot().Source("wiki")
	syncedAt := ts.status().Sources[1].LastSync

	writeAtomic(t, file, manifests("v2"))
	eventually(t, 10*time.Second, "the reload", func() bool { return slices.Contains(ts.status().Routes, "notes-v2") })
	if after := ts.srv.Snapshot().Source("wiki"); after != before {
		t.Fatal("the git source was rebuilt although its spec did not change")
	}
	if got := ts.status().Sources[1].LastSync; got == nil || !got.Equal(*syncedAt) {
		t.Fatalf("the git source synced again on reload: %v -> %v", syncedAt, got)
	}
	ts.srv.bgMu.Lock()
	loops := len(ts.srv.loops)
	ts.srv.bgMu.Unlock()
	if loops != 1 {
		t.Fatalf("%d sync loops, want 1", loops)
	}

	// Changing its spec builds a new source and replaces the loop.
	writeAtomic(t, file, strings.Replace(manifests("v3"), "interval: 1h", "interval: 2h", 1))
	eventually(t, 10*time.Second, "the reload", func() bool { return slices.Contains(ts.status().Routes, "notes-v3") })
	if ts.srv.Snapshot().Source("wiki") == before {
		t.Fatal("the git source was kept although its spec changed")
	}
	ts.srv.bgMu.Lock()
	_, oldLoop := ts.srv.loops[before]
	loops = len(ts.srv.loops)
	ts.srv.bgMu.Unlock()
	if oldLoop || loops != 1 {
		t.Fatalf("sync loops after the spec change: %d (old one running: %v)", loops, oldLoop)
	}
}

// source is a ContextSource manifest with the given spec lines.
func source(name string, spec ...string) string {
	return "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: " + name + "}\nspec:\n  " +
		strings.Join(spec, "\n  ") + "\n---\n"
}

// queryAfterGitFailures lets the sync loops of the named git sources fail a
// few times, so that their errors reach the status and the log, then asks a
// question: its failed_sources (source → error) and the whole answer.
func (ts *testServer) queryAfterGitFailures(t *testing.T, gitSources ...string) (map[string]string, []byte) {
	t.Helper()
	eventually(t, 10*time.Second, "failed syncs", func() bool {
		for _, name := range gitSources {
			if n, _ := ts.metric("contextrouter_git_sync_failures_total", "source", name); n < 2 {
				return false
			}
		}
		return true
	})
	body, _ := json.Marshal(engine.Request{Text: "deploy checklist"})
	code, answer := ts.do(http.MethodPost, "/v1/query", bytes.NewReader(body), nil)
	if code != http.StatusOK {
		t.Fatalf("query: %d %s", code, answer)
	}
	var resp engine.Response
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, f := range resp.FailedSources {
		failed[f.Source] = f.Error
	}
	return failed, answer
}

// Credentials in a git URL's user part (GitHub's https://<token>@host form,
// percent-encoded or not), in a URL password and in secret headers never
// show in /v1/status, in failed_sources, in /metrics or in the log, however
// the upstream fails: an HTTP error naming the URL, a refused connection, a
// body echoing the request, a redirect to another host.
func TestSourceCredentialsNeverShown(t *testing.T) {
	const (
		token   = "ghp_Tok3n/Secret"
		pw      = "url-pa55word"
		apiKey  = "api-key-s3cret"
		escaped = "ghp_Tok3n%2FSecret"
	)
	gitDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "backend unavailable", http.StatusInternalServerError)
	}))
	defer gitDown.Close()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "rejected X-Api-Key "+r.Header.Get("X-Api-Key"), http.StatusUnauthorized)
	}))
	defer echo.Close()
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other host was asked %s with X-Api-Key %q", r.URL, r.Header.Get("X-Api-Key"))
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/steal", http.StatusTemporaryRedirect))
	defer redirect.Close()

	withUser := func(base, userinfo string) string { return strings.Replace(base, "http://", "http://"+userinfo+"@", 1) }
	dir := t.TempDir()
	gitSource := func(name, url string) string {
		return source(name, "type: GitRepo", fmt.Sprintf("gitRepo: {url: %q, interval: 50ms}", url))
	}
	httpSource := func(name, url string) string {
		return source(name, "type: HTTPAPI", fmt.Sprintf(`httpAPI: {url: "%s/search?q={{query}}", method: POST, body: '{"q": {{query}}}', textField: text,`, url),
			"  headers: [{name: X-Api-Key, valueFrom: {secretKeyRef: {name: kb, key: key}}}]}")
	}
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes")+
		gitSource("wiki-token", withUser(gitDown.URL, escaped)+"/org/wiki.git")+
		gitSource("wiki-password", withUser("http://127.0.0.1:1", "x-access-token:"+pw)+"/org/wiki.git")+
		httpSource("kb-echo", echo.URL)+httpSource("kb-redirect", redirect.URL)+`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec:
  sources: [{name: wiki-token}, {name: wiki-password}, {name: kb-echo}, {name: kb-redirect}]
`)
	getenv := func(k string) string {
		if k == "CONTEXTROUTER_SECRET_KB_KEY" {
			return apiKey
		}
		return ""
	}
	ts := startServer(t, Options{Paths: []string{dir}, Engine: engine.Options{Getenv: getenv}})
	ts.waitReady()
	failed, answer := ts.queryAfterGitFailures(t, "wiki-token", "wiki-password")
	for name, want := range map[string]string{
		"wiki-token":    "git http://***@127.0.0.1:",
		"wiki-password": "git http://***@127.0.0.1:1/org/wiki.git",
		"kb-echo":       "HTTP 401 Unauthorized: rejected X-Api-Key ***",
		"kb-redirect":   "redirect to another host refused: " + elsewhere.URL + "/steal",
	} {
		if !strings.Contains(failed[name], want) {
			t.Errorf("failed_sources[%s] = %q, want it to contain %q", name, failed[name], want)
		}
	}
	_, status := ts.get("/v1/status")
	if !strings.Contains(string(status), `"last_sync_error": "git http://***@127.0.0.1:`) {
		t.Errorf("/v1/status does not report the redacted sync error:\n%s", status)
	}
	_, metrics := ts.get("/metrics")
	for what, text := range map[string]string{
		"/v1/status": string(status), "/v1/query": string(answer), "/metrics": string(metrics), "the log": ts.logs.String(),
	} {
		for _, secret := range []string{token, escaped, "ghp_Tok3n", pw, apiKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows %q:\n%s", what, secret, grepLines(text, secret))
			}
		}
	}
}

// Git and HTTP servers that refuse the credentials and echo them back in
// their 401/403 bodies (the Authorization header as sent, URL-encoded and
// decoded; an API key header likewise): no encoding of a token, password or
// key shows in failed_sources, /v1/status or the log (at debug).
func TestEchoedCredentialsNeverShown(t *testing.T) {
	const (
		token    = "ghp_Ech0edT0ken0123456789"
		password = "pa55/w+rd=echo"
		apiKey   = "kb-key/echo+d"
	)
	gitToken := httptest.NewServer(redacttest.EchoHandler(http.StatusUnauthorized, "Authorization"))
	defer gitToken.Close()
	gitPassword := httptest.NewServer(redacttest.EchoHandler(http.StatusForbidden, "Authorization"))
	defer gitPassword.Close()
	kb := httptest.NewServer(redacttest.EchoHandler(http.StatusUnauthorized, "X-Api-Key"))
	defer kb.Close()

	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), inlineManifests("v1", "notes")+
		source("wiki-token", "type: GitRepo", fmt.Sprintf("gitRepo: {url: %q, interval: 50ms, auth: {secretRef: {name: wiki}}}", gitToken.URL+"/org/wiki.git"))+
		source("wiki-password", "type: GitRepo", fmt.Sprintf("gitRepo: {url: %q, interval: 50ms}",
			strings.Replace(gitPassword.URL, "http://", "http://alice:"+url.PathEscape(password)+"@", 1)+"/org/wiki.git"))+
		source("kb", "type: HTTPAPI", fmt.Sprintf(`httpAPI: {url: "%s/search?q={{query}}", textField: text,`, kb.URL),
			"  headers: [{name: X-Api-Key, valueFrom: {secretKeyRef: {name: kb, key: key}}}]}")+`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec:
  sources: [{name: wiki-token}, {name: wiki-password}, {name: kb}]
`)
	getenv := func(k string) string {
		return map[string]string{"CONTEXTROUTER_SECRET_WIKI_TOKEN": token, "CONTEXTROUTER_SECRET_KB_KEY": apiKey}[k]
	}
	ts := startServer(t, Options{Paths: []string{dir}, Engine: engine.Options{Getenv: getenv}})
	ts.waitReady()
	failed, answer := ts.queryAfterGitFailures(t, "wiki-token", "wiki-password")
	// The servers' texts are shown, with every credential masked.
	for name, want := range map[string]string{
		"wiki-token":    "authentication required: access denied. Authorization: Basic ***; encoded: Basic+***; you sent x-access-token:***",
		"wiki-password": "authorization failed: access denied. Authorization: Basic ***; encoded: Basic+***; you sent alice:***",
		"kb":            "HTTP 401 Unauthorized: access denied. X-Api-Key: ***; encoded: ***; decoded: ***;",
	} {
		if !strings.Contains(failed[name], want) {
			t.Errorf("failed_sources[%s] = %q, want it to contain %q", name, failed[name], want)
		}
	}
	_, status := ts.get("/v1/status")
	if !strings.Contains(string(status), "you sent x-access-token:***") {
		t.Errorf("/v1/status does not report the masked sync error:\n%s", status)
	}
	forms := slices.Concat(redacttest.BasicForms("x-access-token", token), redacttest.BasicForms("alice", password), redacttest.Forms(apiKey))
	for what, text := range map[string]string{"/v1/query": string(answer), "/v1/status": string(status), "the log": ts.logs.String()} {
		if leaks := redacttest.Leaks(text, forms); len(leaks) > 0 {
			t.Errorf("%s shows %q", what, leaks)
		}
	}
}
