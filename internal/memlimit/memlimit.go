// Package memlimit bounds the memory of `contextrouter serve`: it picks the
// Go runtime's soft memory limit (debug.SetMemoryLimit) from $GOMEMLIMIT, a
// flag or the container's memory limit, and keeps the garbage collector's
// goal a fixed headroom above the live heap.
//
// The soft limit is what keeps a router inside its container: when the heap
// nears it, the collector runs as often as it must, whatever the GC percent
// says. The headroom only saves CPU when the live heap is small.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

const (
	// ContainerLimitEnv carries the container's memory limit in bytes. The
	// operator sets it on router pods and injected sidecars from the Downward
	// API (resourceFieldRef limits.memory).
	ContainerLimitEnv = "CONTEXTROUTER_CONTAINER_MEMORY_LIMIT"

	// ContainerPercent of the container's limit becomes the soft limit. The
	// rest is for memory the Go runtime does not count as its own (kernel
	// buffers, the page cache of the result files charged to the container)
	// and for the collector to catch up before the kernel's OOM killer acts.
	ContainerPercent = 90

	// unlimitedV1 is where cgroup v1 values start to mean "no limit"
	// (the kernel reports 2^63 rounded down to a page).
	unlimitedV1 = 1 << 62
)

// Sources of a Limit, for the log.
const (
	FromGOMEMLIMIT = "$GOMEMLIMIT"
	FromFlag       = "--memory-limit"
	FromContainer  = "$" + ContainerLimitEnv
	FromCgroupV2   = "cgroup v2 memory.max"
	FromCgroupV1   = "cgroup v1 memory.limit_in_bytes"
)

// Limit is a soft memory limit and where it came from.
type Limit struct {
	// Bytes is the soft limit; 0 means none.
	Bytes int64
	// From names the setting the limit was taken from ("" when there is none
	// to take).
	From string
	// Container is the container's limit the soft limit was derived from (0
	// unless From is FromContainer or a cgroup).
	Container int64
}

// Resolve picks the soft limit, first match wins:
//
//  1. $GOMEMLIMIT, when set: the Go runtime applied it at start; Resolve
//     reports what the runtime holds.
//  2. flag, when not nil: a number of bytes, 0 for none.
//  3. ContainerPercent of $CONTEXTROUTER_CONTAINER_MEMORY_LIMIT.
//  4. ContainerPercent of the memory limit of the process's cgroup (v2
//     memory.max, else v1 memory.limit_in_bytes; the smallest along the
//     path to the root), read from root, which holds proc/self/cgroup and
//     sys/fs/cgroup (os.DirFS("/") in production).
//
// No limit anywhere gives Limit{} (no soft limit).
func Resolve(flag *int64, getenv func(string) string, root fs.FS) (Limit, error) {
	if getenv("GOMEMLIMIT") != "" {
		l := Limit{From: FromGOMEMLIMIT}
		if cur := debug.SetMemoryLimit(-1); cur != math.MaxInt64 {
			l.Bytes = cur
		}
		return l, nil
	}
	if flag != nil {
		if *flag < 0 {
			return Limit{}, fmt.Errorf("--memory-limit: %d must not be negative (0 = no limit)", *flag)
		}
		return Limit{Bytes: *flag, From: FromFlag}, nil
	}
	if v := getenv(ContainerLimitEnv); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 {
			return Limit{}, fmt.Errorf("$%s: %q is not a positive number of bytes", ContainerLimitEnv, v)
		}
		return fromContainer(n, FromContainer), nil
	}
	n, from, err := cgroupLimit(root)
	if err != nil || n == 0 {
		return Limit{}, err
	}
	return fromContainer(n, from), nil
}

func fromContainer(n int64, from string) Limit {
	return Limit{Bytes: n / 100 * ContainerPercent, From: from, Container: n}
}

// Apply sets the runtime's soft limit. A limit from $GOMEMLIMIT is already
// in place; no limit removes any.
func (l Limit) Apply() {
	switch {
	case l.From == FromGOMEMLIMIT:
	case l.Bytes > 0:
		debug.SetMemoryLimit(l.Bytes)
	default:
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// cgroupLimit returns the smallest memory limit on the path of the
// process's cgroups (v2 and v1), 0 when there is none.
func cgroupLimit(root fs.FS) (int64, string, error) {
	v2, v1, err := cgroupPaths(root)
	if err != nil {
		return 0, "", err
	}
	var limit int64
	var from string
	consider := func(n int64, src string) {
		if n > 0 && (limit == 0 || n < limit) {
			limit, from = n, src
		}
	}
	n, err := smallestUp(root, "sys/fs/cgroup", v2, "memory.max", parseV2)
	if err != nil {
		return 0, "", err
	}
	consider(n, FromCgroupV2)
	n, err = smallestUp(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", parseV1)
	if err != nil {
		return 0, "", err
	}
	consider(n, FromCgroupV1)
	return limit, from, nil
}

// cgroupPaths reads the process's v2 cgroup and v1 memory cgroup from
// proc/self/cgroup ("/" for either when it is missing: the container's
// own cgroup namespace).
func cgroupPaths(root fs.FS) (v2, v1 string, err error) {
	v2, v1 = "/", "/"
	f, err := root.Open("proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return v2, v1, nil
	}
	if err != nil {
		return "", "", fmt.Errorf("memory limit: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case hasController(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	return v2, v1, sc.Err()
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// smallestUp reads file in the cgroup dir at p under mount and in each of
// its parents up to the mount's root, and returns the smallest limit (0 =
// none). Dirs that do not exist are skipped: in a container's own cgroup
// namespace the root of the mount is the container's cgroup.
func smallestUp(root fs.FS, mount, p, file string, parse func(string) (int64, error)) (int64, error) {
	var limit int64
	for dir := path.Clean("/" + p); ; dir = path.Dir(dir) {
		name := path.Join(mount, dir, file)
		b, err := fs.ReadFile(root, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, fmt.Errorf("memory limit: %w", err)
		default:
			n, err := parse(strings.TrimSpace(string(b)))
			if err != nil {
				return 0, fmt.Errorf("memory limit: /%s: %w", name, err)
			}
			if n > 0 && (limit == 0 || n < limit) {
				limit = n
			}
		}
		if dir == "/" {
			return limit, nil
		}
	}
}

// parseV2 reads memory.max: bytes, or "max" for none.
func parseV2(s string) (int64, error) {
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a number of bytes or max", s)
	}
	return n, nil
}

// parseV1 reads memory.limit_in_bytes, where "no limit" is a huge number.
func parseV1(s string) (int64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of bytes", s)
	}
	if n >= unlimitedV1 {
		return 0, nil
	}
	return int64(n), nil
}
