//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

func TestCheckRefusesWhileAnotherClusterRuns(t *testing.T) {
	e2eHolder := cluster.Holder{Owner: "the e2e tests (make e2e)", PID: 4242, RunDir: "/var/lib/contextrouter-e2e",
		Since: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC), Stop: "wait for the e2e tests to end"}
	ownHolder := cluster.Holder{Owner: "make cluster-up", PID: 4343, RunDir: "/var/lib/contextrouter-cluster"}
	for _, tc := range []struct {
		name    string
		holder  *cluster.Holder // nil: the lock is free
		wantErr []string        // nil: check passes
	}{
		{name: "free", holder: nil},
		{name: "the e2e tests' cluster", holder: &e2eHolder,
			wantErr: []string{"another cluster runs", "the e2e tests (make e2e)", "pid 4242", "/var/lib/contextrouter-e2e", "wait for the e2e tests to end"}},
		{name: "its own cluster, already up", holder: &ownHolder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cluster.lock")
			if tc.holder != nil {
				l, err := cluster.AcquireLock(path, *tc.holder)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release()
			}
			var out bytes.Buffer
			err := run([]string{"check", "-lock", path, "-run-dir", "/var/lib/contextrouter-cluster"}, &out, &out)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("check: %v, want it to pass", err)
				}
				return
			}
			if err == nil {
				t.Fatal("check passed while another cluster holds the lock")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestCheckLeavesACrashedHoldersRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.lock")
	crashed := cluster.Holder{Owner: "make cluster-up", PID: 4343, RunDir: "/var/lib/contextrouter-cluster",
		Since: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)}
	l, err := cluster.AcquireLock(path, crashed)
	if err != nil {
		t.Fatal(err)
	}
	l.Drop()
	if err := run([]string{"check", "-lock", path, "-run-dir", "/tmp/elsewhere"}, os.Stdout, os.Stderr); err != nil {
		t.Fatalf("check on a free lock: %v", err)
	}
	got, err := cluster.ReadHolder(path)
	if err != nil || got != crashed {
		t.Errorf("after check the record is %+v (%v), want the crashed holder %+v: the next cluster cleans up after it", got, err, crashed)
	}
}

func TestDownWithoutACluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "none")
	var out bytes.Buffer
	if err := run([]string{"down", "-run-dir", dir, "-lock", filepath.Join(t.TempDir(), "cluster.lock")}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := "no cluster in " + dir + ": nothing to stop"; !strings.Contains(out.String(), want) {
		t.Errorf("down printed %q, want %q", out.String(), want)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"start"}} {
		err := run(args, os.Stdout, os.Stderr)
		if err == nil || !strings.Contains(err.Error(), "usage: cluster up|down|check") {
			t.Errorf("run(%q) = %v, want the usage", args, err)
		}
	}
}
