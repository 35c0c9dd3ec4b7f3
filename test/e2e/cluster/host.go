//go:build linux

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hostPackages are the Debian packages that provide the container runtime
// and the network; the kubelet and the rest come from bin/k8s.
var hostPackages = []string{"containerd", "runc", "containernetworking-plugins", "iptables"}

// hostCommands must be on PATH for the cluster to work.
var hostCommands = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc",
	"iptables", "iptables-save", "iptables-restore", "ip6tables-save", "ip6tables-restore", "ip", "mount"}

// cniPlugins are the plugins the conflist (and containerd itself, for
// loopback) invokes.
var cniPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// cniBinDirs are where distributions put the CNI plugins: Debian in
// /usr/lib/cni, upstream in /opt/cni/bin.
var cniBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// missingHostTools lists what is not installed.
func missingHostTools() []string {
	var missing []string
	for _, c := range hostCommands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if _, err := cniBinDir(); err != nil {
		missing = append(missing, "CNI plugins")
	}
	return missing
}

// ensureHostPackages installs the runtime packages with apt-get when
// something is missing: a fresh CI machine has none of them.
func ensureHostPackages(ctx context.Context, logf func(string, ...any)) error {
	missing := missingHostTools()
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing %s and there is no apt-get to install %s", strings.Join(missing, ", "), strings.Join(hostPackages, " "))
	}
	logf("missing %s: installing %s with apt-get", strings.Join(missing, ", "), strings.Join(hostPackages, " "))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"apt-get", "update", "-q"},
		append([]string{"apt-get", "install", "-y", "-q", "--no-install-recommends"}, hostPackages...),
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
	}
	if missing := missingHostTools(); len(missing) > 0 {
		return fmt.Errorf("still missing after apt-get install: %s", strings.Join(missing, ", "))
	}
	return nil
}

func cniBinDir() (string, error) {
	for _, dir := range cniBinDirs {
		ok := true
		for _, p := range cniPlugins {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				ok = false
				break
			}
		}
		if ok {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no directory of %s holds the CNI plugins %s", strings.Join(cniBinDirs, ", "), strings.Join(cniPlugins, ", "))
}

// nodeIP is the IPv4 address of the interface that carries the default
// route: the address the node registers and the API server advertises, and
// the one pods reach the host on.
func nodeIP() (net.IP, error) {
	iface, err := defaultRouteInterface()
	if err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.To4(), nil
		}
	}
	return nil, fmt.Errorf("interface %s (default route) has no IPv4 address", iface)
}

// defaultRouteInterface reads /proc/net/route: the row with destination 0
// and mask 0.
func defaultRouteInterface() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 8 && fields[1] == "00000000" && fields[7] == "00000000" {
			return fields[0], nil
		}
	}
	return "", errors.New("no IPv4 default route in /proc/net/route: the kubelet needs one to pick the node address")
}

// cgroupDriver follows the host: systemd when it is PID 1's init system,
// else cgroupfs (these VMs have no systemd). The kubelet and containerd
// must agree.
func cgroupDriver() string {
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		return "systemd"
	}
	return "cgroupfs"
}

// checkPortsFree fails naming the first port something already listens on:
// the components bind fixed ports, and a second cluster (or a leftover)
// would otherwise fail later with a less direct message.
func checkPortsFree(ports []int) error {
	var busy []string
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			busy = append(busy, strconv.Itoa(p))
			continue
		}
		l.Close()
	}
	if len(busy) > 0 {
		return fmt.Errorf("ports %s are in use (another cluster or a process of an earlier run that is not ours?)", strings.Join(busy, ", "))
	}
	return nil
}

// mountsUnder returns the mount points below any of the prefixes, deepest
// first so that nested mounts go before their parents.
func mountsUnder(prefixes ...string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, p := range prefixes {
			if mp == p || strings.HasPrefix(mp, strings.TrimSuffix(p, "/")+"/") {
				mounts = append(mounts, mp)
				break
			}
		}
	}
	sort.Slice(mounts, func(i, j int) bool {
		if a, b := strings.Count(mounts[i], "/"), strings.Count(mounts[j], "/"); a != b {
			return a > b
		}
		return mounts[i] > mounts[j]
	})
	return mounts, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount below the prefixes. A mount can appear
// several times (stacked), so it repeats until none is left.
func unmountAll(prefixes ...string) error {
	for round := 0; round < 5; round++ {
		mounts, err := mountsUnder(prefixes...)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, m := range mounts {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	mounts, err := mountsUnder(prefixes...)
	if err == nil && len(mounts) > 0 {
		err = fmt.Errorf("still mounted: %s", strings.Join(mounts, ", "))
	}
	return err
}

// removeNetns removes the network namespaces containerd's CRI creates for
// pod sandboxes (/run/netns/cni-*): bind mounts of a namespace that keep it
// alive until unmounted.
func removeNetns() error {
	names, _ := filepath.Glob("/run/netns/cni-*")
	var errs []error
	for _, n := range names {
		_ = syscall.Unmount(n, syscall.MNT_DETACH)
		if err := os.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteLink removes a network interface such as the cni0 bridge.
func deleteLink(ctx context.Context, name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ip", "link", "delete", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link delete %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// ourChain matches the iptables chains the cluster creates: KUBE-* by the
// kubelet and kube-proxy, CNI-* by the bridge plugin's ipMasq.
func ourChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-")
}

// cleanIptables removes our chains and every rule that jumps to one, from
// the IPv4 and IPv6 filter, nat and mangle tables. Each table is rewritten
// whole with iptables-restore, so the rules of others stay and the change is
// atomic; kube-proxy --cleanup alone leaves KUBE-FIREWALL,
// KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT behind.
func cleanIptables(ctx context.Context) error {
	var errs []error
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.CommandContext(ctx, family+"-save", "-t", table).Output()
			if err != nil {
				// No such table (e.g. no IPv6 support): nothing of ours in it.
				continue
			}
			cleaned, changed := dropChains(string(out), ourChain)
			if !changed {
				continue
			}
			cmd := exec.CommandContext(ctx, family+"-restore")
			cmd.Stdin = strings.NewReader(cleaned)
			if b, err := cmd.CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s-restore (%s table): %w: %s", family, table, err, bytes.TrimSpace(b)))
			}
		}
	}
	return errors.Join(errs...)
}

// dropChains filters iptables-save output: chain declarations and rules of
// matching chains, and rules elsewhere whose target (-j or -g) matches.
func dropChains(save string, match func(string) bool) (string, bool) {
	var b strings.Builder
	changed := false
	for _, line := range strings.SplitAfter(save, "\n") {
		if dropRule(strings.TrimSpace(line), match) {
			changed = true
			continue
		}
		b.WriteString(line)
	}
	return b.String(), changed
}

func dropRule(line string, match func(string) bool) bool {
	if strings.HasPrefix(line, ":") {
		name, _, _ := strings.Cut(line[1:], " ")
		return match(name)
	}
	if !strings.HasPrefix(line, "-A ") {
		return false
	}
	fields := strings.Fields(line)
	if match(fields[1]) {
		return true
	}
	for i := 2; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && match(fields[i+1]) {
			return true
		}
	}
	return false
}

// kubepodsCgroups are the cgroup directories the kubelet creates with the
// cgroupfs driver: kubepods under each v1 controller or the v2 root.
func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if fi, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && fi.IsDir() {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	sort.Strings(dirs)
	return dirs
}

// removeCgroups removes the kubepods trees bottom-up. Processes still in
// them are containers of our cluster whose shim is gone; they are killed by
// PID first, as rmdir refuses a cgroup with members.
func removeCgroups() error {
	var errs []error
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err == nil || errors.Is(err, fs.ErrNotExist) {
				continue
			}
			for _, pid := range cgroupProcs(dirs[i]) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			var err error
			for try := 0; try < 50; try++ {
				if err = os.Remove(dirs[i]); err == nil || errors.Is(err, fs.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeLinksInto removes the symlinks in dir that point below target: the
// kubelet links /var/log/containers/*.log to the pod logs it writes under
// our run directory, whatever podLogsDir says.
func removeLinksInto(dir, target string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		dest, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(dest, target+"/") {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")))
	return strings.TrimSpace(string(b)), err
}

func writeSysctl(name, value string) error {
	return os.WriteFile(filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/")), []byte(value), 0o644)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func execOutput(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	return string(out), err
}
