//go:build e2e

package e2e

import (
	"maps"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// gitServer is a git repository served over smart HTTP by `git
// http-backend` from the host, for GitRepo sources in the cluster. The
// repository is made and changed with go-git.
type gitServer struct {
	URL  string // clone URL of the repository
	dir  string // its work tree
	repo *git.Repository
}

func newGitServer(t *testing.T, ip net.IP, name string) *gitServer {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("the GitRepo step serves a repository with `git http-backend`, and git is not installed: %v", err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, name)
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Dir:  root,
		// http-backend serves only repositories marked for export, unless
		// told to serve all of them.
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := &http.Server{Handler: backend, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &gitServer{URL: "http://" + l.Addr().String() + "/" + name, dir: dir, repo: repo}
}

// commit writes files (path -> content) into the work tree and commits
// them on main, returning the commit hash.
func (g *gitServer) commit(t *testing.T, message string, files map[string]string) string {
	t.Helper()
	wt, err := g.repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		full := filepath.Join(g.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	hash, err := wt.Commit(message, &git.CommitOptions{
		Author: &object.Signature{Name: "e2e", Email: "e2e@contextrouter.dev", When: time.Now()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return hash.String()
}
