//go:build linux

package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func holderFor(owner, dir string) Holder {
	return Holder{Owner: owner, PID: os.Getpid(), RunDir: dir, Kubeconfig: filepath.Join(dir, "pki", "admin.kubeconfig"),
		Since: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC), Stop: "make cluster-down"}
}

func TestLockRefusesASecondClusterNamingTheFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.lock")
	first := holderFor("make cluster-up", "/var/lib/contextrouter-cluster")
	l, err := AcquireLock(path, first)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquireLock(path, holderFor("the e2e tests (make e2e)", "/var/lib/contextrouter-e2e"))
	var busy *BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("second AcquireLock: got %v, want a *BusyError", err)
	}
	if busy.Holder != first {
		t.Errorf("refusal names holder %+v, want %+v", busy.Holder, first)
	}
	for _, want := range []string{"make cluster-up", fmt.Sprintf("started by pid %d at 2026-11-28T06:00:00Z", os.Getpid()),
		"state in /var/lib/contextrouter-cluster", "kubeconfig /var/lib/contextrouter-cluster/pki/admin.kubeconfig",
		"to stop it: make cluster-down", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(path, holderFor("the e2e tests (make e2e)", "/var/lib/contextrouter-e2e"))
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	defer l2.Release()
	if l2.Prev != (Holder{}) {
		t.Errorf("after a clean release the next holder sees a previous one: %+v", l2.Prev)
	}
}

func TestLockAfterACrashNamesThePreviousHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.lock")
	first := holderFor("make cluster-up", "/var/lib/contextrouter-cluster")
	l, err := AcquireLock(path, first)
	if err != nil {
		t.Fatal(err)
	}
	l.Drop() // as the holder's death would
	l2, err := AcquireLock(path, holderFor("the e2e tests (make e2e)", "/var/lib/contextrouter-e2e"))
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	defer l2.Release()
	if l2.Prev != first {
		t.Errorf("Prev = %+v, want the crashed holder %+v (its run directory has leftovers)", l2.Prev, first)
	}
}

// starterEnv makes the test binary act as the starter of a component and
// exit without tearing down, as make cluster-up does.
const starterEnv = "CLUSTER_TEST_STARTER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(starterEnv); spec != "" {
		os.Exit(runStarter(spec))
	}
	os.Exit(m.Run())
}

// runStarter takes the lock, starts `sleep` as component "sleeper" (kept
// or not) and exits.
func runStarter(spec string) int {
	dir, keep, _ := strings.Cut(spec, ",")
	l, err := AcquireLock(filepath.Join(dir, "cluster.lock"), Holder{Owner: "starter", PID: os.Getpid(), RunDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var inherit *os.File
	if keep == "keep" {
		inherit = l.File()
	}
	if _, err := startProc(dir, "sleeper", inherit, "sleep", "120"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A kept cluster's components outlive the process that started them and
// hold the lock until the last one exits; the e2e tests' die with it.
func TestKeptComponentsOutliveTheStarterAndHoldTheLock(t *testing.T) {
	for _, tc := range []struct {
		keep      string
		wantAlive bool
	}{
		{keep: "keep", wantAlive: true},
		{keep: "no", wantAlive: false},
	} {
		t.Run(tc.keep, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"logs", "pids"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), starterEnv+"="+dir+","+tc.keep)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("starter: %v\n%s", err, out)
			}
			recs, err := readPidRecords(dir)
			if err != nil || len(recs) != 1 {
				t.Fatalf("pid records: %v, %v", recs, err)
			}
			rec := recs[0]
			t.Cleanup(func() { _ = stopRecorded(rec, time.Second) })
			// A process killed by the starter's death is gone within a
			// second; one that survives it stays.
			if gone := waitGone(rec, time.Second); gone == tc.wantAlive {
				t.Fatalf("sleeper alive after the starter exited: %t, want %t", !gone, tc.wantAlive)
			}

			path := filepath.Join(dir, "cluster.lock")
			l, err := AcquireLock(path, Holder{Owner: "next", PID: os.Getpid(), RunDir: dir})
			if !tc.wantAlive {
				if err != nil {
					t.Fatalf("the starter and its components are gone, but: %v", err)
				}
				l.Release()
				return
			}
			var busy *BusyError
			if !errors.As(err, &busy) || busy.Holder.Owner != "starter" {
				t.Fatalf("while the kept component runs: got %v, want the lock held by the starter", err)
			}
			if err := stopRecorded(rec, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			l, err = AcquireLock(path, Holder{Owner: "next", PID: os.Getpid(), RunDir: dir})
			if err != nil {
				t.Fatalf("after the kept component stopped: %v", err)
			}
			l.Release()
		})
	}
}
