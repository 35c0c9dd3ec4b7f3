//go:build linux

// Command cluster starts a real single-node Kubernetes cluster on this
// machine that keeps running, with the operator installed from
// charts/contextrouter, and stops it again: `make cluster-up` and
// `make cluster-down` (see docs/operator.md, "A local cluster"). It is the
// end-to-end tests' cluster (package test/e2e/cluster) in a run directory
// of its own; it needs root.
//
//	cluster up    [-run-dir DIR]
//	cluster down  [-run-dir DIR]
//	cluster check [-run-dir DIR]   fails, naming it, when another cluster runs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/contextrouter/contextrouter/internal/testenv"
	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// defaultRunDir is apart from the e2e tests' /var/lib/contextrouter-e2e.
const defaultRunDir = "/var/lib/contextrouter-cluster"

// nodeName tells this cluster's node from the e2e tests'.
const nodeName = "contextrouter-dev"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "check") {
		return errors.New("usage: cluster up|down|check [-run-dir DIR] (make cluster-up, make cluster-down)")
	}
	fs := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	runDir := fs.String("run-dir", defaultRunDir, "where the cluster keeps its state, PKI, kubeconfig and logs")
	lock := fs.String("lock", cluster.DefaultLockPath, "the machine's cluster lock, which make e2e takes too")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	opts := cluster.Options{
		RunDir:   *runDir,
		LockPath: *lock,
		NodeName: nodeName,
		Owner:    "make cluster-up",
		Stop:     "make cluster-down",
		Keep:     true,
		Logf: func(format string, a ...any) {
			fmt.Fprintf(stderr, format+"\n", a...)
		},
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "up":
		return up(ctx, opts, stdout)
	case "check":
		return check(opts)
	}
	return down(opts, stdout)
}

// check refuses before make spends a minute on builds, and rewrites the
// image tarballs, that a running e2e test may be importing.
func check(opts cluster.Options) error {
	err := cluster.ProbeLock(opts.LockPath)
	var busy *cluster.BusyError
	if errors.As(err, &busy) && busy.Holder.RunDir == filepath.Clean(opts.RunDir) {
		return nil // ours: up reports it
	}
	return err
}

func up(ctx context.Context, opts cluster.Options, stdout io.Writer) error {
	start := time.Now()
	c, err := cluster.New(opts)
	var busy *cluster.BusyError
	if errors.As(err, &busy) && busy.Holder.RunDir == filepath.Clean(opts.RunDir) {
		return alreadyUp(opts, busy.Holder, stdout)
	}
	if err != nil {
		return err
	}
	err = c.Start(ctx)
	if err == nil {
		err = c.InstallOperator(ctx)
	}
	if err != nil {
		// Nothing half-started stays behind; the logs do, for a look.
		if derr := c.Down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("tearing down: %w", derr))
		}
		return fmt.Errorf("%w\nthe components' logs are in %s", err, c.Path("logs"))
	}
	c.Detach()
	fmt.Fprintf(stdout, "\ncluster up in %.0fs: node %s Ready, operator %s available (chart charts/contextrouter, release %s in %s)\n",
		time.Since(start).Seconds(), c.NodeName, cluster.OperatorName, cluster.ReleaseName, cluster.ReleaseNamespace)
	usage(stdout, c.Kubeconfig, c.BinDir, c.RunDir)
	return nil
}

// alreadyUp reports the running cluster, or says how to recover one that
// is partly running.
func alreadyUp(opts cluster.Options, h cluster.Holder, stdout io.Writer) error {
	c, err := cluster.Attach(opts)
	if err != nil {
		return err
	}
	running, stopped := c.Status()
	if len(stopped) > 0 {
		return fmt.Errorf("the cluster in %s is only partly running (%s stopped, %s running): run `make cluster-down`, then `make cluster-up`",
			c.RunDir, strings.Join(stopped, ", "), strings.Join(running, ", "))
	}
	fmt.Fprintf(stdout, "cluster already up since %s (started by %s): %s\n", h.Since.UTC().Format(time.RFC3339), h.Owner, strings.Join(running, ", "))
	usage(stdout, c.Kubeconfig, c.BinDir, c.RunDir)
	return nil
}

func usage(w io.Writer, kubeconfig, binDir, runDir string) {
	root := testenv.RepoRoot()
	rel, err := filepath.Rel(root, binDir)
	if err != nil {
		rel = binDir
	}
	fmt.Fprintf(w, `
  export KUBECONFIG=%s
  export PATH=$PWD/%s:$PATH   # kubectl %s

Try the samples (docs/operator.md, "A local cluster"):
  kubectl create namespace acme
  kubectl apply -n acme -f config/samples/
  kubectl get contextrouter -n acme -w

Logs: %s. Stop it with: make cluster-down
`, kubeconfig, rel, testenv.KubernetesVersion, filepath.Join(runDir, "logs"))
}

func down(opts cluster.Options, stdout io.Writer) error {
	start := time.Now()
	if _, err := os.Stat(opts.RunDir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "no cluster in %s: nothing to stop\n", opts.RunDir)
		return nil
	}
	c, err := cluster.Attach(opts)
	if err != nil {
		return err
	}
	running, _ := c.Status()
	if err := c.Remove(); err != nil {
		return err
	}
	if left := cluster.Leftovers(c.RunDir); len(left) > 0 {
		return fmt.Errorf("after the teardown the host still has:\n  %s", strings.Join(left, "\n  "))
	}
	what := "no component was running"
	if len(running) > 0 {
		what = "stopped " + strings.Join(running, ", ")
	}
	fmt.Fprintf(stdout, "cluster down in %.0fs: %s; %s removed; no process, mount, bridge, network namespace or KUBE-/CNI- iptables rule of it is left\n",
		time.Since(start).Seconds(), what, c.RunDir)
	return nil
}
