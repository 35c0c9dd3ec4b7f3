//go:build linux

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopOrder stops the components that depend on others first.
var stopOrder = []string{"kube-proxy", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd", "containerd"}

// Cleanup removes what an earlier run left on the machine when it could not
// tear down (killed test binary, CI timeout, E2E_KEEP=1): its processes,
// recorded by PID in <runDir>/pids; the containers and shims of its
// containerd; and the host state cleanupHost handles. Then it removes
// runDir. It is safe to call when there is nothing to clean.
func Cleanup(ctx context.Context, runDir string, logf func(string, ...any)) error {
	var errs []error
	recs, err := readPidRecords(runDir)
	if err != nil {
		errs = append(errs, err)
	}
	byName := map[string]pidRecord{}
	for _, r := range recs {
		byName[r.Name] = r
	}
	for _, name := range stopOrder {
		r, ok := byName[name]
		if !ok || !r.alive() {
			continue
		}
		logf("cleanup: stopping %s (pid %d) of an earlier run", name, r.PID)
		if name == "containerd" {
			if err := cleanContainers(ctx, runDir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := stopRecorded(r, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	sock := filepath.Join(runDir, "containerd", "containerd.sock")
	if shims := findProcs("containerd-shim", sock); len(shims) > 0 {
		// The shims outlived their containerd and still hold containers: a
		// containerd on the same state reconnects to them, and removes the
		// containers properly.
		logf("cleanup: %d containerd shims of an earlier run; removing their containers", len(shims))
		if err := restartAndCleanContainers(ctx, runDir); err != nil {
			errs = append(errs, err)
		}
		for _, pid := range findProcs("containerd-shim", sock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := cleanupHost(ctx, runDir, ""); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(runDir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", runDir, err))
	}
	return errors.Join(errs...)
}

func runDirCtr(runDir string) func(context.Context, ...string) (string, error) {
	return func(ctx context.Context, args ...string) (string, error) {
		args = append([]string{"--address", filepath.Join(runDir, "containerd", "containerd.sock")}, args...)
		out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return string(out), nil
	}
}

func cleanContainers(ctx context.Context, runDir string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return removeContainersVia(ctx, runDirCtr(runDir))
}

// restartAndCleanContainers runs the earlier run's containerd once more to
// delete its containers, then stops it.
func restartAndCleanContainers(ctx context.Context, runDir string) error {
	config := filepath.Join(runDir, "containerd", "config.toml")
	if _, err := os.Stat(config); err != nil {
		return fmt.Errorf("shims of an earlier run are left but not its containerd config: %w", err)
	}
	p, err := startProc(runDir, "containerd-cleanup", nil, "containerd", "--config", config)
	if err != nil {
		return err
	}
	defer p.stop(15 * time.Second)
	ctr := runDirCtr(runDir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := ctr(ctx, "version"); err == nil {
			break
		}
		if done, err := p.exited(); done || time.Now().After(deadline) {
			return fmt.Errorf("containerd for cleanup did not come up (%v); end of its log:\n%s", err, tail(p.logPath, 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return cleanContainers(ctx, runDir)
}

// cleanupHost removes the cluster's traces outside its processes. Each part
// is attempted even if another fails. kubeProxy, when not empty, is run with
// --cleanup first to remove its rules the way it knows best.
func cleanupHost(ctx context.Context, runDir, kubeProxy string) error {
	var errs []error
	add := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	add("unmounting", unmountAll(runDir))
	add("network namespaces", removeNetns())
	add("bridge", deleteLink(ctx, BridgeName))
	if kubeProxy != "" {
		if _, err := os.Stat(kubeProxy); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			// Its exit status reflects modes never used here (ipvs,
			// nftables); the sweep below is what must succeed.
			_ = exec.CommandContext(cctx, kubeProxy, "--cleanup").Run()
			cancel()
		}
	}
	add("iptables", cleanIptables(ctx))
	add("cgroups", removeCgroups())
	add("/var/log/containers", removeLinksInto("/var/log/containers", runDir))
	// containerd caches each CNI ADD result (our network's and the
	// loopback it sets up itself) until the DEL.
	for _, pattern := range []string{cniNetworkName + "-*", "cni-loopback-*"} {
		results, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", pattern))
		for _, r := range results {
			add("CNI result cache", os.Remove(r))
		}
	}
	// The kubelet's device plugin socket has a fixed path whatever its
	// root directory.
	for _, f := range []string{"kubelet.sock", "kubelet_internal_checkpoint"} {
		if err := os.Remove(filepath.Join("/var/lib/kubelet/device-plugins", f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			add("kubelet device plugin directory", err)
		}
	}
	// Directories with fixed paths that the components create and leave
	// empty; removed only when empty, so nobody else's files go.
	for _, d := range []string{
		"/var/lib/kubelet/device-plugins", "/var/lib/kubelet", "/var/log/containers",
		"/var/lib/cni/results", "/var/lib/cni",
		"/run/containerd/s", "/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd",
	} {
		_ = os.Remove(d)
	}
	add("sysctls", restoreHostState(runDir))
	return errors.Join(errs...)
}

// hostState holds host settings the cluster changes, saved before it does:
// the bridge plugin turns on IPv4 forwarding.
type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
}

var savedSysctls = []string{"net.ipv4.ip_forward"}

func saveHostState(runDir string) error {
	st := hostState{Sysctls: map[string]string{}}
	for _, s := range savedSysctls {
		v, err := readSysctl(s)
		if err != nil {
			return err
		}
		st.Sysctls[s] = v
	}
	b, _ := json.Marshal(st)
	return os.WriteFile(filepath.Join(runDir, "host-state.json"), b, 0o644)
}

func restoreHostState(runDir string) error {
	b, err := os.ReadFile(filepath.Join(runDir, "host-state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st hostState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	var errs []error
	for _, k := range sortedKeys(st.Sysctls) {
		if err := writeSysctl(k, st.Sysctls[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
