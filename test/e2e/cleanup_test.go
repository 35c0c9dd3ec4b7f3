//go:build e2e

package e2e

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestCleanup removes what a cluster of an earlier run left on the machine,
// such as one kept running with E2E_KEEP=1, and checks that the host is
// clean afterwards. On a clean machine it has nothing to do.
//
//	go test -tags e2e -run TestCleanup -v ./test/e2e/
func TestCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("cleaning up after the e2e cluster needs root")
	}
	runDir := runDirFromEnv()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Cleanup(ctx, runDir, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup of %s done in %.1fs", runDir, time.Since(start).Seconds())
	for _, leftover := range hostLeftovers(runDir) {
		t.Errorf("after cleanup: %s", leftover)
	}
	if fileExists(runDir) {
		t.Errorf("after cleanup: %s still exists", runDir)
	}
}
