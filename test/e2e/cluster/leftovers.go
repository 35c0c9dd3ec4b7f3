//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Leftovers lists what a torn-down cluster in runDir left on the host:
// the bridge, mounts, network namespaces, containerd shims, CNI and kubelet
// files with fixed paths, kubepods cgroups and KUBE-/CNI- iptables chains.
// Empty means the host is as before.
func Leftovers(runDir string) []string {
	var found []string
	if _, err := net.InterfaceByName(BridgeName); err == nil {
		found = append(found, "bridge "+BridgeName+" exists")
	}
	if m, _ := mountsUnder(runDir, "/run/netns"); len(m) > 0 {
		found = append(found, "mounts: "+strings.Join(m, ", "))
	}
	if ns, _ := filepath.Glob("/run/netns/cni-*"); len(ns) > 0 {
		found = append(found, "network namespaces: "+strings.Join(ns, ", "))
	}
	if pids := findProcs("containerd-shim", filepath.Join(runDir, "containerd", "containerd.sock")); len(pids) > 0 {
		found = append(found, fmt.Sprintf("containerd shims: pids %v", pids))
	}
	if recs, _ := readPidRecords(runDir); len(recs) > 0 {
		for _, r := range recs {
			if r.alive() {
				found = append(found, fmt.Sprintf("%s still runs (pid %d)", r.Name, r.PID))
			}
		}
	}
	for _, pattern := range []string{
		"/var/lib/cni/results/" + cniNetworkName + "-*", "/var/lib/cni/results/cni-loopback-*",
		"/var/lib/kubelet/device-plugins/kubelet.sock", "/run/containerd/s/*", "/run/containerd/runc/k8s.io/*",
	} {
		if files, _ := filepath.Glob(pattern); len(files) > 0 {
			found = append(found, "files: "+strings.Join(files, ", "))
		}
	}
	if cg := kubepodsCgroups(); len(cg) > 0 {
		found = append(found, "cgroups: "+strings.Join(cg, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := execOutput(ctx, family+"-save", "-t", table)
			if err != nil {
				continue
			}
			if _, changed := dropChains(out, ourChain); changed {
				found = append(found, fmt.Sprintf("%s %s table has KUBE-/CNI- chains or rules", family, table))
			}
		}
	}
	return found
}

// ShimPIDs are the containerd shims of the cluster in runDir.
func ShimPIDs(runDir string) []int {
	return findProcs("containerd-shim", filepath.Join(runDir, "containerd", "containerd.sock"))
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
