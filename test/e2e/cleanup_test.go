//go:build e2e

package e2e

import (
	"os"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// TestCleanup removes what an e2e run killed before its teardown (a CI
// timeout, a killed test binary) left on the machine, and checks that the
// host is clean afterwards. On a clean machine it has nothing to do. It
// takes the cluster lock, so it refuses to touch the host while another
// cluster runs. (make cluster-down does the same for make cluster-up's.)
//
//	go test -tags e2e -run TestCleanup -v ./test/e2e/
func TestCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("cleaning up after the e2e cluster needs root")
	}
	c, err := cluster.New(options(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup of %s done in %.1fs", c.RunDir, time.Since(start).Seconds())
	for _, leftover := range hostLeftovers(c.RunDir) {
		t.Errorf("after cleanup: %s", leftover)
	}
	if fileExists(c.RunDir) {
		t.Errorf("after cleanup: %s still exists", c.RunDir)
	}
}
