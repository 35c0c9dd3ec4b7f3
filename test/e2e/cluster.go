//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/testenv"
	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// Cluster is a single-node cluster of package cluster with the helpers the
// tests use, which fail the test instead of returning an error.
type Cluster struct {
	*cluster.Cluster
	t testing.TB
}

// NodeName is the e2e cluster's node.
const NodeName = cluster.DefaultNodeName

const (
	bridgeName    = cluster.BridgeName
	defaultRunDir = "/var/lib/contextrouter-e2e"
)

// The harness reads its settings from the environment: E2E_RUN_DIR, where
// the cluster keeps its state and logs (default /var/lib/contextrouter-e2e),
// and E2E_IMAGES_DIR (below).
func runDirFromEnv() string {
	if d := os.Getenv("E2E_RUN_DIR"); d != "" {
		return filepath.Clean(d)
	}
	return defaultRunDir
}

// imagesDir is where the image tarballs are: bin/images, or $E2E_IMAGES_DIR
// to try other builds of the images.
func imagesDir(root string) string {
	if d := os.Getenv("E2E_IMAGES_DIR"); d != "" {
		return filepath.Clean(d)
	}
	return filepath.Join(root, "bin", "images")
}

// options are the e2e cluster's: its run directory, and how it is named
// to a cluster the lock refuses.
func options(logf func(string, ...any)) cluster.Options {
	return cluster.Options{
		RunDir:    runDirFromEnv(),
		ImagesDir: imagesDir(testenv.RepoRoot()),
		Owner:     "the e2e tests (make e2e)",
		Stop:      "wait for the e2e tests to end: their cluster goes down with them",
		Logf:      logf,
	}
}

// Up brings up a fresh cluster (see cluster.Cluster.Start). It is torn down
// when the test ends, after the test's own cleanups. The test fails at once
// when another cluster runs on the machine (make cluster-up's, or another
// e2e run), naming it.
func Up(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv("E2E_KEEP") != "" {
		// It used to claim to keep the cluster, which died with the test
		// binary all the same.
		t.Fatal("E2E_KEEP is not supported: the e2e cluster goes down with the test. " +
			"For a cluster that keeps running, with the operator installed, use `make cluster-up` (and `make cluster-down`)")
	}
	cl, err := cluster.New(options(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Cluster: cl, t: t}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpDiagnostics()
		}
		if err := c.Down(); err != nil {
			t.Errorf("tearing down: %v", err)
		}
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("cluster bring-up failed: %v", err)
	}
	return c
}

func (c *Cluster) logf(format string, args ...any) { c.Logf(format, args...) }
func (c *Cluster) path(rel string) string          { return c.Path(rel) }

func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (bool, string, error)) error {
	return c.WaitUntil(ctx, what, timeout, check)
}

func (c *Cluster) getJSON(ctx context.Context, v any, args ...string) error {
	return c.KubectlJSON(ctx, v, args...)
}

// CheckRunning fails the test if a component has exited, e.g. between steps.
func (c *Cluster) CheckRunning(t testing.TB) {
	t.Helper()
	if err := c.CheckProcs(); err != nil {
		t.Fatal(err)
	}
}

// Image returns the image held by tarball file (e.g. "agent.tar"), failing
// the test with how to build it when it is not there.
func (c *Cluster) Image(t testing.TB, file string) string {
	t.Helper()
	ref, ok := c.Images[file]
	if !ok {
		t.Fatalf("image %s/%s is missing: build the images with `make images` (make e2e does)", c.ImagesDir, file)
	}
	return ref
}

// GetJSON runs kubectl with -o json and decodes the output into v, failing
// the test on error.
func (c *Cluster) GetJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.getJSON(ctx, v, args...); err != nil {
		t.Fatal(err)
	}
}
