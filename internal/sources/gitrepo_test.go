package sources

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// gitBaseTime is the author and committer time of the first test commit;
// each later commit is one hour later.
var gitBaseTime = time.Date(2024, 3, 1, 9, 30, 0, 0, time.UTC)

// gitUpstream is a repository with a working tree that tests commit to.
type gitUpstream struct {
	t    testing.TB
	dir  string
	repo *git.Repository
	wt   *git.Worktree
	when time.Time
}

func newGitUpstream(t testing.TB, branch string) *gitUpstream {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "upstream")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return &gitUpstream{t: t, dir: dir, repo: repo, wt: wt, when: gitBaseTime}
}

func (u *gitUpstream) sig() *object.Signature {
	return &object.Signature{Name: "Test Author", Email: "author@example.com", When: u.when}
}

// commit writes files (slash paths), removes the listed paths and commits
// on the checked-out branch.
func (u *gitUpstream) commit(msg string, files map[string]string, remove ...string) plumbing.Hash {
	u.t.Helper()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		full := filepath.Join(u.dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			u.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(files[name]), 0o644); err != nil {
			u.t.Fatal(err)
		}
		if _, err := u.wt.Add(name); err != nil {
			u.t.Fatal(err)
		}
	}
	for _, name := range remove {
		if _, err := u.wt.Remove(name); err != nil {
			u.t.Fatal(err)
		}
	}
	h, err := u.wt.Commit(msg, &git.CommitOptions{Author: u.sig(), Committer: u.sig()})
	if err != nil {
		u.t.Fatal(err)
	}
	u.when = u.when.Add(time.Hour)
	return h
}

func (u *gitUpstream) commitTime(h plumbing.Hash) time.Time {
	u.t.Helper()
	c, err := u.repo.CommitObject(h)
	if err != nil {
		u.t.Fatal(err)
	}
	return c.Committer.When
}

func (u *gitUpstream) setRef(name plumbing.ReferenceName, h plumbing.Hash) {
	u.t.Helper()
	if err := u.repo.Storer.SetReference(plumbing.NewHashReference(name, h)); err != nil {
		u.t.Fatal(err)
	}
}

// checkout moves the working tree to a branch, creating it at from when from is set.
func (u *gitUpstream) checkout(branch string, from plumbing.Hash) {
	u.t.Helper()
	opts := &git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Force: true}
	if !from.IsZero() {
		opts.Create, opts.Hash = true, from
	}
	if err := u.wt.Checkout(opts); err != nil {
		u.t.Fatal(err)
	}
}

func (u *gitUpstream) fileURL() string { return "file://" + filepath.ToSlash(u.dir) }

// gitLog collects log output for assertions.
type gitLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *gitLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *gitLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func gitSpec(name string, src v1alpha1.GitRepoSource) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo, GitRepo: &src},
	}
}

// gitEnv is an environment with its own cache folder, log and secrets.
func gitEnv(t testing.TB, secrets map[string]string) (Env, *gitLog) {
	log := &gitLog{}
	return Env{
		CacheDir: filepath.Join(t.TempDir(), "cache"),
		Logger:   slog.New(slog.NewTextHandler(log, nil)),
		Secrets:  EnvFileSecrets{Getenv: func(k string) string { return secrets[k] }},
	}, log
}

func newTestGitRepo(t testing.TB, src v1alpha1.GitRepoSource, env Env) *GitRepo {
	t.Helper()
	s, err := New(gitSpec("wiki", src), env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	g, ok := s.(*GitRepo)
	if !ok {
		t.Fatalf("New returned %T, want *GitRepo", s)
	}
	return g
}

func mustLoad(t testing.TB, g *GitRepo) []Chunk {
	t.Helper()
	chunks, err := g.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return chunks
}

// gitFiles maps each path to its chunks' contents joined by a blank line.
func gitFiles(chunks []Chunk) map[string]string {
	out := map[string]string{}
	for _, c := range chunks {
		if prev, ok := out[c.Path]; ok {
			out[c.Path] = prev + "\n\n" + c.Content
		} else {
			out[c.Path] = c.Content
		}
	}
	return out
}

func gitPaths(chunks []Chunk) []string {
	var out []string
	for _, c := range chunks {
		if len(out) == 0 || out[len(out)-1] != c.Path {
			out = append(out, c.Path)
		}
	}
	return out
}

// checkCommit asserts every chunk carries the commit hash and its time.
func checkCommit(t testing.TB, chunks []Chunk, want plumbing.Hash, when time.Time) {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("no chunks")
	}
	for _, c := range chunks {
		if c.Commit != want.String() {
			t.Fatalf("chunk %s#%d has commit %q, want %s", c.Path, c.Index, c.Commit, want)
		}
		if !c.ModTime.Equal(when) {
			t.Fatalf("chunk %s#%d has ModTime %v, want %v", c.Path, c.Index, c.ModTime, when)
		}
		if c.Source != "wiki" {
			t.Fatalf("chunk %s#%d has source %q", c.Path, c.Index, c.Source)
		}
	}
}

func TestGitRepoRegistered(t *testing.T) {
	if !slices.Contains(Types(), v1alpha1.SourceGitRepo) {
		t.Fatalf("Types() = %v, missing GitRepo", Types())
	}
}

func TestGitRepoFactoryValidation(t *testing.T) {
	tests := []struct {
		name    string
		src     *v1alpha1.GitRepoSource
		wantErr string
	}{
		{"no block", nil, "spec.gitRepo: must be set"},
		{"empty url", &v1alpha1.GitRepoSource{}, "spec.gitRepo.url: must be set"},
		{"ftp", &v1alpha1.GitRepoSource{URL: "ftp://example.com/repo.git"}, `spec.gitRepo.url: unsupported scheme "ftp"`},
		{"git protocol", &v1alpha1.GitRepoSource{URL: "git://example.com/repo.git"}, `spec.gitRepo.url: unsupported scheme "git"`},
		{"https without host", &v1alpha1.GitRepoSource{URL: "https:///repo.git"}, "spec.gitRepo.url: \"https:///repo.git\" has no host"},
		{"file with host", &v1alpha1.GitRepoSource{URL: "file://server/repo"}, "spec.gitRepo.url: \"file://server/repo\": a file URL cannot name a host"},
		{"whitespace", &v1alpha1.GitRepoSource{URL: " https://example.com/r.git"}, "spec.gitRepo.url: must not contain"},
		{"password hidden", &v1alpha1.GitRepoSource{URL: "gopher://bob:hunter2@example.com/r"}, `spec.gitRepo.url: unsupported scheme "gopher"`},
		// url.Parse reads "bob:hunter2" as host and port and would quote ":hunter2".
		{"password cut by a slash", &v1alpha1.GitRepoSource{URL: "https://bob:hunter2/x@example.com/r.git"}, "spec.gitRepo.url: invalid URL: invalid port after host"},
		{"bad ref", &v1alpha1.GitRepoSource{URL: "https://example.com/r.git", Ref: "feature..x"}, `spec.gitRepo.ref: "feature..x" is not a valid`},
		{"ref with space", &v1alpha1.GitRepoSource{URL: "https://example.com/r.git", Ref: "my branch"}, "spec.gitRepo.ref:"},
		{"https", &v1alpha1.GitRepoSource{URL: "https://git.example.com/eng/wiki.git"}, ""},
		{"http with credentials", &v1alpha1.GitRepoSource{URL: "http://bob:pw@127.0.0.1:8080/wiki.git"}, ""},
		{"ssh", &v1alpha1.GitRepoSource{URL: "ssh://git@git.example.com:2222/eng/wiki.git"}, ""},
		{"scp-style", &v1alpha1.GitRepoSource{URL: "git@github.com:eng/wiki.git", Ref: "v1.2.3"}, ""},
		{"file", &v1alpha1.GitRepoSource{URL: "file:///srv/git/wiki.git", Ref: "0123abcd"}, ""},
		{"local path", &v1alpha1.GitRepoSource{URL: "../repos/wiki", Ref: "refs/heads/main"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := gitEnv(t, nil)
			spec := &v1alpha1.ContextSource{
				ObjectMeta: metav1.ObjectMeta{Name: "wiki"},
				Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo, GitRepo: tc.src},
			}
			s, err := New(spec, env)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if _, ok := s.(*GitRepo); !ok {
					t.Fatalf("New returned %T", s)
				}
			} else {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want prefix %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error leaks the password: %v", err)
				}
			}
			// The factory does no I/O: the cache folder is created by the first sync.
			if _, err := os.Stat(env.CacheDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("factory touched the cache folder: %v", err)
			}
		})
	}
}

func TestGitRepoURLForms(t *testing.T) {
	tests := []struct {
		raw, base     string
		wantTransport gitTransport
		wantURL       string
		wantDisplay   string
	}{
		{"https://git.example.com/wiki.git", "", gitHTTP, "https://git.example.com/wiki.git", "https://git.example.com/wiki.git"},
		{"https://bob:hunter2@git.example.com/wiki.git", "", gitHTTP, "https://bob:hunter2@git.example.com/wiki.git", "https://***@git.example.com/wiki.git"},
		{"https://ghp%5Ftoken@git.example.com/wiki.git", "", gitHTTP, "https://ghp%5Ftoken@git.example.com/wiki.git", "https://***@git.example.com/wiki.git"},
		{"ssh://git@example.com/wiki.git", "", gitSSH, "ssh://git@example.com/wiki.git", "ssh://***@example.com/wiki.git"},
		{"git@example.com:eng/wiki.git", "", gitSSH, "git@example.com:eng/wiki.git", "***@example.com:eng/wiki.git"},
		{"example.com:wiki.git", "", gitSSH, "example.com:wiki.git", "example.com:wiki.git"},
		{"file:///srv/wiki", "", gitFile, "file:///srv/wiki", "file:///srv/wiki"},
		{"/srv/wiki", "/ignored", gitFile, "/srv/wiki", "/srv/wiki"},
		{"repos/wiki", "/etc/manifests", gitFile, "/etc/manifests/repos/wiki", "/etc/manifests/repos/wiki"},
		{"./a:b/wiki", "/m", gitFile, "/m/a:b/wiki", "/m/a:b/wiki"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			ep, err := parseGitURL(tc.raw, tc.base)
			if err != nil {
				t.Fatal(err)
			}
			if ep.transport != tc.wantTransport || ep.url != tc.wantURL || ep.display != tc.wantDisplay {
				t.Fatalf("got transport %d url %q display %q, want %d %q %q",
					ep.transport, ep.url, ep.display, tc.wantTransport, tc.wantURL, tc.wantDisplay)
			}
			if strings.Contains(ep.key, "hunter2") || strings.Contains(ep.key, "bob") {
				t.Fatalf("cache key %q holds credentials", ep.key)
			}
		})
	}
	// Rotating a password in the URL keeps the same clone.
	a, _ := parseGitURL("https://bob:old@Git.Example.com/wiki.git", "")
	b, _ := parseGitURL("https://bob:new@git.example.com/wiki.git", "")
	if gitCacheFolder("", "wiki", a.key) != gitCacheFolder("", "wiki", b.key) {
		t.Fatalf("cache folder changed with the password: %q vs %q", a.key, b.key)
	}
	c, _ := parseGitURL("https://git.example.com/other.git", "")
	if gitCacheFolder("", "wiki", a.key) == gitCacheFolder("", "wiki", c.key) {
		t.Fatal("different repositories share a cache folder")
	}
	if got := gitCacheFolder("team-a", "wiki/../x", a.key); !strings.HasPrefix(got, "team-a_wiki_.._x-") {
		t.Fatalf("folder name %q", got)
	}
}

// refsUpstream builds: c1 (tagged v1-light, v1-annotated; branch release),
// c2, c3 on the default branch "trunk".
func refsUpstream(t *testing.T) (u *gitUpstream, c1, c2, c3 plumbing.Hash) {
	u = newGitUpstream(t, "trunk")
	c1 = u.commit("one", map[string]string{"README.md": "# Readme\n\nversion one", "docs/guide.md": "guide one"})
	c2 = u.commit("two", map[string]string{"README.md": "# Readme\n\nversion two"})
	c3 = u.commit("three", map[string]string{"docs/guide.md": "guide three"})
	u.setRef(plumbing.NewBranchReferenceName("release"), c1)
	if _, err := u.repo.CreateTag("v1-light", c1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := u.repo.CreateTag("v1-annotated", c1, &git.CreateTagOptions{Tagger: u.sig(), Message: "release 1"}); err != nil {
		t.Fatal(err)
	}
	return u, c1, c2, c3
}

func TestGitRepoRefs(t *testing.T) {
	u, c1, c2, c3 := refsUpstream(t)
	want := map[plumbing.Hash]map[string]string{
		c1: {"README.md": "# Readme\n\nversion one", "docs/guide.md": "guide one"},
		c2: {"README.md": "# Readme\n\nversion two", "docs/guide.md": "guide one"},
		c3: {"README.md": "# Readme\n\nversion two", "docs/guide.md": "guide three"},
	}
	tests := []struct {
		ref  string
		want plumbing.Hash
	}{
		{"", c3},
		{"HEAD", c3},
		{"trunk", c3},
		{"refs/heads/trunk", c3},
		{"release", c1},
		{"refs/heads/release", c1},
		{"v1-light", c1},
		{"v1-annotated", c1},
		{"refs/tags/v1-annotated", c1},
		{c2.String(), c2},                       // not a tip: full history needed
		{c2.String()[:7], c2},                   // abbreviated
		{strings.ToUpper(c2.String()[:10]), c2}, // hashes are case-insensitive
		{c1.String(), c1},                       // tip of release and of the tags
		{c3.String()[:12], c3},                  // tip of trunk, abbreviated
		{"refs/tags/v1-annotated^{}", plumbing.ZeroHash}, // invalid ref is refused by the factory
	}
	urls := map[string]string{"file URL": u.fileURL(), "local path": u.dir}
	for _, urlKind := range []string{"file URL", "local path"} {
		for _, tc := range tests {
			t.Run(urlKind+"/"+tc.ref, func(t *testing.T) {
				env, _ := gitEnv(t, nil)
				s, err := New(gitSpec("wiki", v1alpha1.GitRepoSource{URL: urls[urlKind], Ref: tc.ref}), env)
				if tc.want.IsZero() {
					if err == nil {
						t.Fatal("New accepted an invalid ref")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				g := s.(*GitRepo)
				chunks := mustLoad(t, g)
				checkCommit(t, chunks, tc.want, u.commitTime(tc.want))
				if got := gitFiles(chunks); !mapsEqual(got, want[tc.want]) {
					t.Fatalf("files = %q, want %q", got, want[tc.want])
				}
				st := g.Status()
				if st.Commit != tc.want.String() || st.LastError != "" || st.LastSync.IsZero() || st.LastAttempt.IsZero() {
					t.Fatalf("status = %+v", st)
				}
			})
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestGitRepoRefErrors(t *testing.T) {
	u, _, _, _ := refsUpstream(t)
	empty := newGitUpstream(t, "main")
	tests := []struct {
		name, url, ref string
		wantErr        []string
	}{
		{"unknown branch", u.fileURL(), "nope", []string{u.fileURL(), `no branch or tag "nope"`}},
		{"unknown commit", u.fileURL(), "abcdef0", []string{`no branch, tag or commit "abcdef0"`}},
		{"unknown full hash", u.fileURL(), strings.Repeat("ab", 20), []string{"is not on any branch or tag"}},
		{"missing repository", u.fileURL() + "-missing", "", []string{u.fileURL() + "-missing", "repository not found"}},
		{"empty repository", empty.fileURL(), "", []string{"remote repository is empty"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, _ := gitEnv(t, nil)
			g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: tc.url, Ref: tc.ref}, env)
			_, err := g.Load(context.Background())
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
			if st := g.Status(); st.LastError != err.Error() || st.Commit != "" || !st.LastSync.IsZero() || st.LastAttempt.IsZero() {
				t.Fatalf("status = %+v", st)
			}
			// Load does not retry a sync that got an answer: the loop's next Sync does.
			before := g.Status().LastAttempt
			if _, err2 := g.Load(context.Background()); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("second Load error = %v, want %v", err2, err)
			}
			if g.Status().LastAttempt != before {
				t.Fatal("second Load synced again")
			}
		})
	}
}

func TestGitRepoIncludeExclude(t *testing.T) {
	u := newGitUpstream(t, "main")
	big := strings.Repeat("word ", 40) // 200 bytes
	h := u.commit("files", map[string]string{
		"README.md":         "# Project\n\nTop level readme.",
		"notes.txt":         "plain notes",
		"docs/a.md":         "# A\n\nintro\n\n## Setup\n\nsteps\n\n## Usage\n\nuse it",
		"docs/deep/b.md":    "deep file",
		"docs/big.md":       big,
		"docs/logo.md":      "PNG\x00\x01\x02",
		"docs/latin1.md":    "caf\xe9",
		"docs/empty.md":     "   \n",
		"drafts/wip.md":     "draft",
		"main.go":           "package main",
		"docs/sub.dir/x.md": "dotted folder",
	})
	_ = h
	if err := os.Symlink("README.md", filepath.Join(u.dir, "link.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := u.wt.Add("link.md"); err != nil {
		t.Fatal(err)
	}
	h = u.commit("link", map[string]string{})
	tests := []struct {
		name      string
		include   []string
		exclude   []string
		wantPaths []string
		wantLogs  []string
		// wantSkips: Skipped() after the load, as reasons and example paths.
		wantSkips Skips
	}{
		{
			name:      "defaults",
			exclude:   []string{"drafts/**"},
			wantPaths: []string{"README.md", "docs/a.md", "docs/deep/b.md", "docs/sub.dir/x.md", "notes.txt"},
			wantLogs: []string{
				"skipping docs/big.md: file larger than maxFileSize",
				"skipping docs/logo.md: not UTF-8 text",
				"skipping docs/latin1.md: not UTF-8 text",
				"skipping link.md: symlink",
			},
			wantSkips: Skips{Files: 4, Reasons: map[string]int{SkipTooLarge: 1, SkipNotText: 2, SkipSymlink: 1},
				Examples: []string{"docs/big.md", "docs/latin1.md", "docs/logo.md", "link.md"}},
		},
		{
			name:      "include folder",
			include:   []string{"docs/**/*.md"},
			exclude:   []string{"**/b.md"},
			wantPaths: []string{"docs/a.md", "docs/sub.dir/x.md"},
			wantSkips: Skips{Files: 3, Reasons: map[string]int{SkipTooLarge: 1, SkipNotText: 2},
				Examples: []string{"docs/big.md", "docs/latin1.md", "docs/logo.md"}},
		},
		{
			name:      "other extension",
			include:   []string{"*.go"},
			wantPaths: []string{"main.go"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env, log := gitEnv(t, nil)
			maxSize := resource.MustParse("100")
			g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.dir, Include: tc.include, Exclude: tc.exclude, MaxFileSize: &maxSize}, env)
			chunks := mustLoad(t, g)
			if got := gitPaths(chunks); !slices.Equal(got, tc.wantPaths) {
				t.Fatalf("paths = %q, want %q", got, tc.wantPaths)
			}
			checkCommit(t, chunks, h, u.commitTime(h))
			sorted := slices.IsSortedFunc(chunks, func(a, b Chunk) int {
				if c := strings.Compare(a.Path, b.Path); c != 0 {
					return c
				}
				return a.Index - b.Index
			})
			if !sorted {
				t.Fatal("chunks are not sorted by path then index")
			}
			for _, w := range tc.wantLogs {
				if !strings.Contains(log.String(), w) {
					t.Fatalf("log lacks %q:\n%s", w, log)
				}
			}
			if got := g.Skipped(); !reflect.DeepEqual(got, tc.wantSkips) {
				t.Errorf("Skipped() = %+v, want %+v", got, tc.wantSkips)
			}
		})
	}

	t.Run("chunking and titles", func(t *testing.T) {
		env, _ := gitEnv(t, nil)
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.dir, Include: []string{"docs/a.md", "notes.txt"}}, env)
		var got []string
		for _, c := range mustLoad(t, g) {
			got = append(got, fmt.Sprintf("%s#%d %s: %s", c.Path, c.Index, c.Title, c.Content))
		}
		want := []string{
			"docs/a.md#0 A: # A\n\nintro",
			"docs/a.md#1 A - Setup: ## Setup\n\nsteps",
			"docs/a.md#2 A - Usage: ## Usage\n\nuse it",
			"notes.txt#0 notes.txt: plain notes",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("chunks =\n%q\nwant\n%q", got, want)
		}
	})

	t.Run("whole file strategy", func(t *testing.T) {
		env, _ := gitEnv(t, nil)
		spec := gitSpec("wiki", v1alpha1.GitRepoSource{URL: u.dir, Include: []string{"docs/a.md"}})
		spec.Spec.Chunking.Strategy = v1alpha1.ChunkingWholeFile
		s, err := New(spec, env)
		if err != nil {
			t.Fatal(err)
		}
		chunks := mustLoad(t, s.(*GitRepo))
		if len(chunks) != 1 || !strings.Contains(chunks[0].Content, "## Usage") {
			t.Fatalf("chunks = %+v", chunks)
		}
	})
}

func TestGitRepoSyncNewCommit(t *testing.T) {
	u := newGitUpstream(t, "main")
	c1 := u.commit("one", map[string]string{"a.md": "first", "old.md": "to be removed"})
	env, _ := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main"}, env)

	// The first sync reports a change from nothing.
	changed, err := g.Sync(context.Background())
	if err != nil || !changed {
		t.Fatalf("first Sync = %v, %v", changed, err)
	}
	chunks := mustLoad(t, g)
	checkCommit(t, chunks, c1, u.commitTime(c1))

	c2 := u.commit("two", map[string]string{"a.md": "second", "b.md": "new file"}, "old.md")
	changed, err = g.Sync(context.Background())
	if err != nil || !changed {
		t.Fatalf("Sync after commit = %v, %v", changed, err)
	}
	chunks = mustLoad(t, g)
	checkCommit(t, chunks, c2, u.commitTime(c2))
	if got, want := gitFiles(chunks), map[string]string{"a.md": "second", "b.md": "new file"}; !mapsEqual(got, want) {
		t.Fatalf("files = %q, want %q", got, want)
	}

	first := g.Status()
	changed, err = g.Sync(context.Background())
	if err != nil || changed {
		t.Fatalf("Sync without a change = %v, %v", changed, err)
	}
	st := g.Status()
	if st.Commit != c2.String() || st.LastError != "" || !st.LastSync.After(first.LastSync) && !st.LastSync.Equal(first.LastSync) {
		t.Fatalf("status = %+v (before %+v)", st, first)
	}

	// Loaded chunks are the caller's: changing them must not change the next Load.
	chunks[0].Content = "mutated"
	if again := mustLoad(t, g); again[0].Content == "mutated" {
		t.Fatal("Load returned shared chunk storage")
	}
}

func TestGitRepoSyncFailureKeepsLastGood(t *testing.T) {
	tests := []struct {
		name    string
		break_  func(t *testing.T, u *gitUpstream) (restore func())
		wantErr string
	}{
		{
			name: "upstream removed",
			break_: func(t *testing.T, u *gitUpstream) func() {
				moved := u.dir + ".gone"
				if err := os.Rename(u.dir, moved); err != nil {
					t.Fatal(err)
				}
				return func() {
					if err := os.Rename(moved, u.dir); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantErr: "repository not found",
		},
		{
			name: "upstream objects missing",
			break_: func(t *testing.T, u *gitUpstream) func() {
				objects := filepath.Join(u.dir, ".git", "objects")
				if err := os.Rename(objects, objects+".gone"); err != nil {
					t.Fatal(err)
				}
				return func() {
					if err := os.Rename(objects+".gone", objects); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantErr: "object not found",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := newGitUpstream(t, "main")
			c1 := u.commit("one", map[string]string{"a.md": "good content"})
			t1 := u.commitTime(c1) // the upstream cannot be read while broken
			env, _ := gitEnv(t, nil)
			g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL()}, env)
			checkCommit(t, mustLoad(t, g), c1, t1)
			good := g.Status()

			c2 := u.commit("two", map[string]string{"a.md": "newer content"})
			restore := tc.break_(t, u)
			changed, err := g.Sync(context.Background())
			if err == nil || changed {
				t.Fatalf("Sync on a broken upstream = %v, %v", changed, err)
			}
			if !strings.Contains(err.Error(), u.fileURL()) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q lacks the URL or %q", err, tc.wantErr)
			}
			st := g.Status()
			if st.Commit != c1.String() || st.LastError != err.Error() || !st.LastSync.Equal(good.LastSync) || st.LastAttempt.Before(good.LastAttempt) {
				t.Fatalf("status after failure = %+v (good %+v)", st, good)
			}
			chunks := mustLoad(t, g)
			checkCommit(t, chunks, c1, t1)
			if got := gitFiles(chunks)["a.md"]; got != "good content" {
				t.Fatalf("content after failure = %q", got)
			}

			restore()
			changed, err = g.Sync(context.Background())
			if err != nil || !changed {
				t.Fatalf("Sync after recovery = %v, %v", changed, err)
			}
			if st := g.Status(); st.LastError != "" || st.Commit != c2.String() {
				t.Fatalf("status after recovery = %+v", st)
			}
			if got := gitFiles(mustLoad(t, g))["a.md"]; got != "newer content" {
				t.Fatalf("content after recovery = %q", got)
			}
		})
	}
}

func TestGitRepoForcePush(t *testing.T) {
	u := newGitUpstream(t, "main")
	c1 := u.commit("one", map[string]string{"a.md": "base"})
	u.commit("two", map[string]string{"a.md": "mainline"})
	env, _ := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main"}, env)
	if got := gitFiles(mustLoad(t, g))["a.md"]; got != "mainline" {
		t.Fatalf("content = %q", got)
	}

	// Rewrite main: a commit on another line of history replaces its tip.
	u.checkout("rewrite", c1)
	x := u.commit("rewritten", map[string]string{"a.md": "rewritten history"})
	u.setRef(plumbing.NewBranchReferenceName("main"), x)
	changed, err := g.Sync(context.Background())
	if err != nil || !changed {
		t.Fatalf("Sync after force push = %v, %v", changed, err)
	}
	chunks := mustLoad(t, g)
	checkCommit(t, chunks, x, u.commitTime(x))
	if got := gitFiles(chunks)["a.md"]; got != "rewritten history" {
		t.Fatalf("content = %q", got)
	}

	// Back to a commit the clone already holds.
	u.setRef(plumbing.NewBranchReferenceName("main"), c1)
	if changed, err := g.Sync(context.Background()); err != nil || !changed {
		t.Fatalf("Sync after reset to an old commit = %v, %v", changed, err)
	}
	checkCommit(t, mustLoad(t, g), c1, u.commitTime(c1))
}

func TestGitRepoCacheReuse(t *testing.T) {
	u := newGitUpstream(t, "main")
	c1 := u.commit("one", map[string]string{"a.md": "cached content"})
	t1 := u.commitTime(c1)
	env, log := gitEnv(t, nil)
	src := v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main"}
	first := newTestGitRepo(t, src, env)
	mustLoad(t, first)

	entries, err := os.ReadDir(env.CacheDir)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "wiki-") {
		t.Fatalf("cache folder entries = %v, %v", entries, err)
	}
	second := newTestGitRepo(t, src, env)
	if second.CacheDir() != first.CacheDir() {
		t.Fatalf("second instance uses %s, first %s", second.CacheDir(), first.CacheDir())
	}

	// With the upstream gone, a restarted process still serves the commit
	// the clone recorded for this ref, and says why it is stale.
	if err := os.Rename(u.dir, u.dir+".gone"); err != nil {
		t.Fatal(err)
	}
	chunks := mustLoad(t, second)
	checkCommit(t, chunks, c1, t1)
	st := second.Status()
	if st.Commit != c1.String() || st.LastError == "" || !st.LastSync.IsZero() {
		t.Fatalf("status = %+v", st)
	}
	if !strings.Contains(log.String(), "serving the commit cached by an earlier run") {
		t.Fatalf("log lacks the fallback note:\n%s", log)
	}

	// A pinned full hash needs no remote at all once the clone has it.
	byHash := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: c1.String()}, env)
	checkCommit(t, mustLoad(t, byHash), c1, t1)
	if st := byHash.Status(); st.LastError != "" {
		t.Fatalf("status = %+v", st)
	}

	// Another ref has no recorded commit: nothing stale is served for it.
	other := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "v2"}, env)
	if _, err := other.Load(context.Background()); err == nil {
		t.Fatal("Load of an unknown ref with the upstream gone succeeded")
	}

	// A folder that is not a repository (an interrupted clone) is rebuilt.
	if err := os.Rename(u.dir+".gone", u.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(first.CacheDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(first.CacheDir(), "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(first.CacheDir(), "junk"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := newTestGitRepo(t, src, env)
	checkCommit(t, mustLoad(t, third), c1, u.commitTime(c1))
}

func TestGitRepoAuthSecretErrors(t *testing.T) {
	env := func(name string, values map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range values {
			m[SecretEnvVar(name, k)] = v
		}
		return m
	}
	tests := []struct {
		name    string
		url     string
		secrets map[string]string
		want    []string
		notWant []string
	}{
		{
			name: "https without keys",
			url:  "http://127.0.0.1:1/wiki.git",
			want: []string{`spec.gitRepo.auth.secretRef: secret "wiki-git"`, `"token"`, `"username"`, `"password"`},
		},
		{
			name:    "https with username only",
			url:     "http://127.0.0.1:1/wiki.git",
			secrets: env("wiki-git", map[string]string{"username": "alice"}),
			want:    []string{`secret "wiki-git" has neither key "token" nor both "username" and "password"`},
		},
		{
			name: "ssh without key",
			url:  "git@git.example.com:eng/wiki.git",
			want: []string{`secret "wiki-git" has no key "ssh-privatekey"`},
		},
		{
			name:    "ssh with a bad key",
			url:     "ssh://git@git.example.com/eng/wiki.git",
			secrets: env("wiki-git", map[string]string{"ssh-privatekey": "not-a-key-TOPSECRET"}),
			want:    []string{`secret "wiki-git" key "ssh-privatekey"`},
			notWant: []string{"TOPSECRET"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := gitEnv(t, tc.secrets)
			g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: tc.url, Auth: &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: "wiki-git"}}}, e)
			_, err := g.Sync(context.Background())
			if err == nil {
				t.Fatal("Sync succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Fatalf("error %q leaks %q", err, w)
				}
			}
			if g.Status().LastError != err.Error() {
				t.Fatalf("LastError = %q", g.Status().LastError)
			}
		})
	}
}

func TestGitRepoURLPasswordNotInErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "denied", http.StatusUnauthorized)
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://", "http://bob:hunter2@", 1) + "/wiki.git"
	env, log := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: url}, env)
	_, err := g.Sync(context.Background())
	if err == nil {
		t.Fatal("Sync succeeded")
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(log.String(), "hunter2") {
		t.Fatalf("password leaked: %v\n%s", err, log)
	}
	if !strings.Contains(err.Error(), "http://***@127.0.0.1:") || strings.Contains(err.Error(), "bob") {
		t.Fatalf("error %q does not name the redacted URL", err)
	}
}

func TestGitRepoContext(t *testing.T) {
	t.Run("canceled before the first load", func(t *testing.T) {
		u := newGitUpstream(t, "main")
		c1 := u.commit("one", map[string]string{"a.md": "x"})
		env, _ := gitEnv(t, nil)
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL()}, env)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := g.Load(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Load with a canceled context = %v", err)
		}
		// The caller gave up; that was no answer, so the next Load syncs.
		checkCommit(t, mustLoad(t, g), c1, u.commitTime(c1))
	})

	t.Run("stalled server", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer srv.Close()
		defer close(release)
		env, _ := gitEnv(t, nil)
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/wiki.git"}, env)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := g.Sync(ctx)
		if err == nil {
			t.Fatal("Sync succeeded")
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("Sync took %v after its context ended", elapsed)
		}
	})
}

func TestGitRepoConcurrentLoadAndSync(t *testing.T) {
	u := newGitUpstream(t, "main")
	version := map[string]string{}
	h := u.commit("v0", map[string]string{"a.md": "version 0", "b.md": "version 0"})
	version[h.String()] = "version 0"
	env, _ := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL()}, env)
	mustLoad(t, g)

	var mu sync.Mutex // guards version
	stop := make(chan struct{})
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				chunks, err := g.Load(context.Background())
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want := version[chunks[0].Commit]
				mu.Unlock()
				for _, c := range chunks {
					if c.Commit != chunks[0].Commit || c.Content != want {
						errs <- fmt.Errorf("inconsistent load: %s=%q at %s, want %q at %s", c.Path, c.Content, c.Commit, want, chunks[0].Commit)
						return
					}
				}
				_ = g.Status()
			}
		}()
	}
	for i := 1; i <= 5; i++ {
		text := fmt.Sprintf("version %d", i)
		mu.Lock()
		h := u.commit(text, map[string]string{"a.md": text, "b.md": text})
		version[h.String()] = text
		mu.Unlock()
		if _, err := g.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := gitFiles(mustLoad(t, g))["a.md"]; got != "version 5" {
		t.Fatalf("final content = %q", got)
	}
}

// wikiGitSecrets are the environment variables that hold the keys of the
// Secret "wiki-git".
func wikiGitSecrets(values map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range values {
		m[SecretEnvVar("wiki-git", k)] = v
	}
	return m
}

// gitHTTPServer serves the repositories under root with git http-backend
// behind basic auth. With refuseShallow it fails every fetch that asks for a
// shallow history, like a server that does not support it.
type gitHTTPServer struct {
	*httptest.Server
	mu       sync.Mutex
	deepens  int // fetch requests that asked for a depth
	requests int
}

func startGitHTTP(t *testing.T, root, user, pass string, refuseShallow bool) *gitHTTPServer {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; skipping the git http-backend tests")
	}
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path failed (%v); skipping the git http-backend tests", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend not found (%v); skipping the git http-backend tests", err)
	}
	home := t.TempDir()
	cgiHandler := &cgi.Handler{
		Path: backend,
		Root: "/git",
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + home,
		},
	}
	s := &gitHTTPServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			deepen := bytes.Contains(body, []byte("deepen "))
			s.mu.Lock()
			s.requests++
			if deepen {
				s.deepens++
			}
			s.mu.Unlock()
			if deepen && refuseShallow {
				http.Error(w, "shallow fetches are not supported here", http.StatusBadRequest)
				return
			}
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *gitHTTPServer) counts() (requests, deepens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.deepens
}

func shallowCommits(t *testing.T, g *GitRepo) []plumbing.Hash {
	t.Helper()
	sh, err := g.openStorage().Shallow()
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func TestGitRepoHTTP(t *testing.T) {
	root := t.TempDir()
	u := newGitUpstream(t, "main")
	// Serve the upstream from under root.
	served := filepath.Join(root, "wiki")
	if err := os.Rename(u.dir, served); err != nil {
		t.Fatal(err)
	}
	u.dir = served
	var err error
	if u.repo, err = git.PlainOpen(served); err != nil {
		t.Fatal(err)
	}
	if u.wt, err = u.repo.Worktree(); err != nil {
		t.Fatal(err)
	}
	c1 := u.commit("one", map[string]string{"a.md": "one"})
	c2 := u.commit("two", map[string]string{"a.md": "two"})
	c3 := u.commit("three", map[string]string{"a.md": "three"})

	auth := &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: "wiki-git"}}

	t.Run("token shallow clone and update", func(t *testing.T) {
		srv := startGitHTTP(t, root, "x-access-token", "tok-s3cret", false)
		env, _ := gitEnv(t, wikiGitSecrets(map[string]string{"token": "tok-s3cret"}))
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Ref: "main", Auth: auth}, env)
		checkCommit(t, mustLoad(t, g), c3, u.commitTime(c3))
		if sh := shallowCommits(t, g); !slices.Equal(sh, []plumbing.Hash{c3}) {
			t.Fatalf("shallow commits = %v, want [%s]", sh, c3)
		}
		if _, deepens := srv.counts(); deepens == 0 {
			t.Fatal("the fetch did not ask for depth 1")
		}
		c4 := u.commit("four", map[string]string{"a.md": "four"})
		if changed, err := g.Sync(context.Background()); err != nil || !changed {
			t.Fatalf("Sync = %v, %v", changed, err)
		}
		checkCommit(t, mustLoad(t, g), c4, u.commitTime(c4))
		if changed, err := g.Sync(context.Background()); err != nil || changed {
			t.Fatalf("Sync without change = %v, %v", changed, err)
		}

		// A commit below the shallow boundary deepens the same clone.
		byHash := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Ref: c1.String(), Auth: auth}, env)
		if byHash.CacheDir() != g.CacheDir() {
			t.Fatal("instances do not share the clone")
		}
		chunks := mustLoad(t, byHash)
		checkCommit(t, chunks, c1, u.commitTime(c1))
		if got := gitFiles(chunks)["a.md"]; got != "one" {
			t.Fatalf("content = %q", got)
		}
		if sh := shallowCommits(t, g); len(sh) != 0 {
			t.Fatalf("shallow markers left after deepening: %v", sh)
		}
		short := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Ref: c2.String()[:8], Auth: auth}, env)
		checkCommit(t, mustLoad(t, short), c2, u.commitTime(c2))

		// Force push over HTTP.
		u.checkout("rewrite", c1)
		x := u.commit("rewritten", map[string]string{"a.md": "rewritten"})
		u.setRef(plumbing.NewBranchReferenceName("main"), x)
		if changed, err := g.Sync(context.Background()); err != nil || !changed {
			t.Fatalf("Sync after force push = %v, %v", changed, err)
		}
		checkCommit(t, mustLoad(t, g), x, u.commitTime(x))
		u.checkout("main", plumbing.ZeroHash)
	})

	t.Run("username and password", func(t *testing.T) {
		srv := startGitHTTP(t, root, "alice", "pa55word", false)
		env, _ := gitEnv(t, wikiGitSecrets(map[string]string{"username": "alice", "password": "pa55word"}))
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Auth: auth}, env)
		head, err := u.repo.Head()
		if err != nil {
			t.Fatal(err)
		}
		checkCommit(t, mustLoad(t, g), head.Hash(), u.commitTime(head.Hash()))
	})

	t.Run("token with username", func(t *testing.T) {
		srv := startGitHTTP(t, root, "robot", "tok-2", false)
		env, _ := gitEnv(t, wikiGitSecrets(map[string]string{"username": "robot", "token": "tok-2"}))
		// c1 is below main's tip (c2 became unreachable with the force push).
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Ref: c1.String()[:10], Auth: auth}, env)
		checkCommit(t, mustLoad(t, g), c1, u.commitTime(c1))
	})

	t.Run("wrong password", func(t *testing.T) {
		srv := startGitHTTP(t, root, "alice", "right-password", false)
		env, log := gitEnv(t, wikiGitSecrets(map[string]string{"username": "alice", "password": "wrong-password"}))
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Auth: auth}, env)
		_, err := g.Load(context.Background())
		if err == nil {
			t.Fatal("Load succeeded")
		}
		if !strings.Contains(err.Error(), "authentication") || !strings.Contains(err.Error(), srv.URL) {
			t.Fatalf("error = %v", err)
		}
		if strings.Contains(err.Error(), "wrong-password") || strings.Contains(log.String(), "wrong-password") {
			t.Fatalf("password leaked: %v", err)
		}
	})

	t.Run("no auth configured", func(t *testing.T) {
		srv := startGitHTTP(t, root, "alice", "pw", false)
		env, _ := gitEnv(t, nil)
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki"}, env)
		_, err := g.Sync(context.Background())
		if err == nil || !strings.Contains(err.Error(), "set spec.gitRepo.auth") {
			t.Fatalf("error = %v", err)
		}
	})

	// GitHub's https://<token>@host/org/repo.git form: the token is the user
	// name. It authenticates, but no error, status or log line shows it, in
	// any spelling.
	t.Run("token in the URL's user part", func(t *testing.T) {
		const token = "ghp_UrlT0ken/with+chars"
		userinfo := neturl.User(token).String() // percent-encoded, as people paste it
		forms := []string{token, userinfo, neturl.QueryEscape(token)}
		noToken := func(t *testing.T, what, text string) {
			t.Helper()
			for _, f := range forms {
				if strings.Contains(text, f) {
					t.Errorf("%s shows the token (%q):\n%s", what, f, text)
				}
			}
		}
		withToken := func(base string) string {
			return strings.Replace(base, "http://", "http://"+userinfo+"@", 1)
		}

		srv := startGitHTTP(t, root, token, "", false)
		env, log := gitEnv(t, nil)
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: withToken(srv.URL) + "/git/wiki", Ref: "main"}, env)
		mustLoad(t, g)
		if !strings.Contains(log.String(), "url=http://***@127.0.0.1:") {
			t.Errorf("the log does not name the redacted URL:\n%s", log)
		}
		noToken(t, "the log", log.String())

		wrong := startGitHTTP(t, root, "another-token", "", false)
		for name, raw := range map[string]string{
			"refused token": withToken(wrong.URL) + "/git/wiki",
			"unreachable":   withToken("http://127.0.0.1:1") + "/org/repo.git",
		} {
			t.Run(name, func(t *testing.T) {
				env, log := gitEnv(t, nil)
				g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: raw, Ref: "main"}, env)
				_, err := g.Load(context.Background())
				if err == nil {
					t.Fatal("Load succeeded")
				}
				if !strings.Contains(err.Error(), "git http://***@127.0.0.1:") {
					t.Errorf("error %q does not name the redacted URL", err)
				}
				noToken(t, "the error", err.Error())
				noToken(t, "LastError", g.Status().LastError)
				noToken(t, "the log", log.String())
			})
		}
	})

	t.Run("server refuses shallow", func(t *testing.T) {
		srv := startGitHTTP(t, root, "alice", "pw", true)
		env, log := gitEnv(t, wikiGitSecrets(map[string]string{"username": "alice", "password": "pw"}))
		g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: srv.URL + "/git/wiki", Ref: "main", Auth: auth}, env)
		head, err := u.repo.Head()
		if err != nil {
			t.Fatal(err)
		}
		checkCommit(t, mustLoad(t, g), head.Hash(), u.commitTime(head.Hash()))
		if !strings.Contains(log.String(), "shallow fetch failed; fetching full history") {
			t.Fatalf("log lacks the fallback:\n%s", log)
		}
		if sh := shallowCommits(t, g); len(sh) != 0 {
			t.Fatalf("full fetch left shallow markers: %v", sh)
		}
		if strings.Contains(log.String(), "pw@") {
			t.Fatalf("log leaks credentials:\n%s", log)
		}
	})
}

func BenchmarkGitLoad(b *testing.B) {
	u := newGitUpstream(b, "main")
	files := map[string]string{}
	for i := range 200 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "# Document %d\n\nIntro paragraph for document %d.\n\n", i, i)
		for s := range 4 {
			fmt.Fprintf(&sb, "## Section %d\n\n%s\n\n", s, strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 8))
		}
		files[fmt.Sprintf("docs/area%d/doc%03d.md", i%10, i)] = sb.String()
	}
	h := u.commit("bench", files)
	env, _ := gitEnv(b, nil)
	g := newTestGitRepo(b, v1alpha1.GitRepoSource{URL: u.fileURL()}, env)
	chunks := mustLoad(b, g)
	if len(chunks) < 200 {
		b.Fatalf("only %d chunks", len(chunks))
	}
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := g.readCommit(ctx, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Load(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestGitRepoCompaction(t *testing.T) {
	old := gitMaxPacks
	gitMaxPacks = 2
	t.Cleanup(func() { gitMaxPacks = old })

	u := newGitUpstream(t, "main")
	first := u.commit("v0", map[string]string{"a.md": "version 0"})
	firstTime := u.commitTime(first)
	env, log := gitEnv(t, nil)
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main"}, env)
	// Another instance on the same clone pins the first commit.
	pinned := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: first.String()}, env)
	checkCommit(t, mustLoad(t, pinned), first, firstTime)
	mustLoad(t, g)

	// Loads run while syncs fetch and compact.
	stop := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := g.Load(context.Background()); err != nil {
				errs <- err
				return
			}
		}
	}()
	var last plumbing.Hash
	for i := 1; i <= 6; i++ {
		text := fmt.Sprintf("version %d", i)
		last = u.commit(text, map[string]string{"a.md": text, fmt.Sprintf("f%d.md", i): text})
		if changed, err := g.Sync(context.Background()); err != nil || !changed {
			t.Fatalf("Sync %d = %v, %v", i, changed, err)
		}
		if n := countPacks(g.CacheDir()); n > gitMaxPacks+1 {
			t.Fatalf("after sync %d the clone has %d packs", i, n)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Load during compaction: %v", err)
	}
	if !strings.Contains(log.String(), "git cache compacted") {
		t.Fatalf("no compaction logged:\n%s", log)
	}
	chunks := mustLoad(t, g)
	checkCommit(t, chunks, last, u.commitTime(last))
	if got := gitFiles(chunks); got["a.md"] != "version 6" || len(got) != 7 {
		t.Fatalf("files after compaction = %q", got)
	}

	// The pinned commit survived compaction, for the running instance and
	// for a new one.
	pinned.loaded = nil
	checkCommit(t, mustLoad(t, pinned), first, firstTime)
	again := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: first.String()}, env)
	checkCommit(t, mustLoad(t, again), first, firstTime)

	// A commit the compacted (now shallow) clone lacks is fetched in full
	// from a server that cannot deepen.
	second, err := u.repo.CommitObject(last)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		second, err = second.Parent(0)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := peelToCommit(g.openStorage(), second.Hash); err == nil {
		t.Fatal("compaction kept a commit no ref records")
	}
	if sh := shallowCommits(t, g); len(sh) == 0 {
		t.Fatal("the compacted clone is not shallow")
	}
	mid := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: second.Hash.String()[:9]}, env)
	chunks = mustLoad(t, mid)
	checkCommit(t, chunks, second.Hash, second.Committer.When)
	if got := gitFiles(chunks)["a.md"]; got != "version 2" {
		t.Fatalf("content = %q", got)
	}
	// The branch instance still syncs after its refs were hidden and restored.
	if changed, err := g.Sync(context.Background()); err != nil || changed {
		t.Fatalf("Sync = %v, %v", changed, err)
	}
}

// testSSHKey returns a PKCS#8 PEM ed25519 private key and its public key in
// known_hosts wire format ("ssh-ed25519 AAAA...").
func testSSHKey(t *testing.T) (privPEM, pubLine string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	privPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	var wire []byte
	for _, field := range [][]byte{[]byte("ssh-ed25519"), pub} {
		wire = binary.BigEndian.AppendUint32(wire, uint32(len(field)))
		wire = append(wire, field...)
	}
	return privPEM, "ssh-ed25519 " + base64.StdEncoding.EncodeToString(wire)
}

func TestGitRepoSSHAuth(t *testing.T) {
	key, pubLine := testSSHKey(t)
	userKnownHosts := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(userKnownHosts, []byte("[git.example.com]:2222 "+pubLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := func(values map[string]string) SecretResolver {
		return EnvFileSecrets{Getenv: func(k string) string {
			for key, v := range values {
				if SecretEnvVar("deploy-key", key) == k {
					return v
				}
			}
			return ""
		}}
	}
	tests := []struct {
		name        string
		url         string
		values      map[string]string
		knownHosts  string // SSH_KNOWN_HOSTS
		wantUser    string
		trustedHost string
		wantErr     string
	}{
		{
			name:        "known_hosts from the secret",
			url:         "git@git.example.com:eng/wiki.git",
			values:      map[string]string{"ssh-privatekey": key, "known_hosts": "git.example.com " + pubLine + "\n"},
			knownHosts:  filepath.Join(t.TempDir(), "none"),
			wantUser:    "git",
			trustedHost: "git.example.com:22",
		},
		{
			name:        "user's known_hosts and URL user",
			url:         "ssh://deploy@git.example.com:2222/eng/wiki.git",
			values:      map[string]string{"ssh-privatekey": key},
			knownHosts:  userKnownHosts,
			wantUser:    "deploy",
			trustedHost: "git.example.com:2222",
		},
		{
			name:        "username key wins",
			url:         "ssh://git.example.com:2222/eng/wiki.git",
			values:      map[string]string{"ssh-privatekey": key, "username": "robot"},
			knownHosts:  userKnownHosts,
			wantUser:    "robot",
			trustedHost: "git.example.com:2222",
		},
		{
			name:       "no known_hosts anywhere",
			url:        "git@git.example.com:eng/wiki.git",
			values:     map[string]string{"ssh-privatekey": key},
			knownHosts: filepath.Join(t.TempDir(), "missing"),
			wantErr:    `spec.gitRepo.auth.secretRef: secret "deploy-key" has no key "known_hosts" and the user's known_hosts cannot be used: unable to find any valid known_hosts file`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SSH_KNOWN_HOSTS", tc.knownHosts)
			ep, err := parseGitURL(tc.url, "")
			if err != nil {
				t.Fatal(err)
			}
			creds, err := resolveGitAuth("deploy-key", secrets(tc.values), ep)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pk, ok := creds.method.(*gitssh.PublicKeys)
			if !ok {
				t.Fatalf("auth method is %T", creds.method)
			}
			if pk.User != tc.wantUser {
				t.Fatalf("user = %q, want %q", pk.User, tc.wantUser)
			}
			if !slices.Contains(pk.HostKeyAlgorithms, "ssh-ed25519") {
				t.Fatalf("host key algorithms = %v", pk.HostKeyAlgorithms)
			}
			if got := creds.scrub.String("bad key " + key); got != "bad key ***" {
				t.Fatalf("the private key is not scrubbed from errors: %q", got)
			}
			// The test key doubles as the host key known_hosts trusts.
			hostKey := pk.Signer.PublicKey()
			addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 22}
			if err := pk.HostKeyCallback(tc.trustedHost, addr, hostKey); err != nil {
				t.Fatalf("trusted host refused: %v", err)
			}
			if err := pk.HostKeyCallback("evil.example.com:22", addr, hostKey); err == nil {
				t.Fatal("an unknown host was accepted")
			}
		})
	}
}

func TestGitRepoLocalIgnoresAuth(t *testing.T) {
	u := newGitUpstream(t, "main")
	c1 := u.commit("one", map[string]string{"a.md": "local"})
	env, _ := gitEnv(t, nil)
	// Local repositories take no credentials, so a missing secret is no error.
	g := newTestGitRepo(t, v1alpha1.GitRepoSource{URL: u.dir, Auth: &v1alpha1.GitAuth{SecretRef: v1alpha1.LocalObjectReference{Name: "unused"}}}, env)
	checkCommit(t, mustLoad(t, g), c1, u.commitTime(c1))
}
