package memlimit

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// tree writes files (slash paths relative to the fake root) into a temp dir.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func ptr[T any](v T) *T { return &v }

// restoreLimit puts the process's soft limit back after a test changed it.
func restoreLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
}

const v1Unlimited = "9223372036854771712\n"

func TestResolve(t *testing.T) {
	restoreLimit(t)
	debug.SetMemoryLimit(300 << 20) // what $GOMEMLIMIT would have set at start
	for _, tc := range []struct {
		name  string
		flag  *int64
		env   map[string]string
		files map[string]string
		want  Limit
		err   string
	}{
		{name: "GOMEMLIMIT wins over everything", flag: ptr[int64](1 << 30),
			env:   map[string]string{"GOMEMLIMIT": "300MiB", ContainerLimitEnv: "1073741824"},
			files: map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"},
			want:  Limit{Bytes: 300 << 20, From: FromGOMEMLIMIT}},
		{name: "flag wins over the container", flag: ptr[int64](512 << 20),
			env:  map[string]string{ContainerLimitEnv: "1073741824"},
			want: Limit{Bytes: 512 << 20, From: FromFlag}},
		{name: "flag 0 is no limit", flag: ptr[int64](0),
			files: map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"},
			want:  Limit{From: FromFlag}},
		{name: "negative flag", flag: ptr[int64](-1), err: "--memory-limit: -1 must not be negative"},
		{name: "container limit from the Downward API",
			env:   map[string]string{ContainerLimitEnv: "1073741824"},
			files: map[string]string{"sys/fs/cgroup/memory.max": "268435456\n"},
			want:  Limit{Bytes: 1073741824 / 100 * 90, From: FromContainer, Container: 1073741824}},
		{name: "container limit not a number", env: map[string]string{ContainerLimitEnv: "1Gi"},
			err: `$CONTEXTROUTER_CONTAINER_MEMORY_LIMIT: "1Gi" is not a positive number of bytes`},
		{name: "cgroup v2, own namespace",
			files: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "268435456\n"},
			want:  Limit{Bytes: 268435456 / 100 * 90, From: FromCgroupV2, Container: 268435456}},
		{name: "cgroup v2 unlimited",
			files: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"},
			want:  Limit{}},
		{name: "cgroup v2, the smallest limit on the path wins",
			files: map[string]string{
				"proc/self/cgroup":                             "0::/kubepods/pod1/ctr\n",
				"sys/fs/cgroup/kubepods/memory.max":            "max\n",
				"sys/fs/cgroup/kubepods/pod1/memory.max":       "536870912\n",
				"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":   "max\n",
				"sys/fs/cgroup/kubepods/pod1/other/memory.max": "1048576\n",
			},
			want: Limit{Bytes: 536870912 / 100 * 90, From: FromCgroupV2, Container: 536870912}},
		{name: "cgroup v1",
			files: map[string]string{
				"proc/self/cgroup":                                      "9:name=systemd:/docker/abc\n4:cpu,memory:/docker/abc\n0::/\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":            v1Unlimited,
				"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
			},
			want: Limit{Bytes: 1073741824 / 100 * 90, From: FromCgroupV1, Container: 1073741824}},
		{name: "cgroup v1 unlimited",
			files: map[string]string{
				"proc/self/cgroup": "4:memory:/x\n",
				"sys/fs/cgroup/memory/x/memory.limit_in_bytes": v1Unlimited,
				"sys/fs/cgroup/memory/memory.limit_in_bytes":   v1Unlimited,
			},
			want: Limit{}},
		{name: "a path from another namespace falls back to the mount's root",
			files: map[string]string{"proc/self/cgroup": "0::/../../elsewhere\n", "sys/fs/cgroup/memory.max": "134217728\n"},
			want:  Limit{Bytes: 134217728 / 100 * 90, From: FromCgroupV2, Container: 134217728}},
		{name: "no proc: the mount's root",
			files: map[string]string{"sys/fs/cgroup/memory.max": "134217728\n"},
			want:  Limit{Bytes: 134217728 / 100 * 90, From: FromCgroupV2, Container: 134217728}},
		{name: "nothing to read", want: Limit{}},
		{name: "garbage in memory.max",
			files: map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"},
			err:   `/sys/fs/cgroup/memory.max: "lots" is not a number of bytes or max`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.flag, env(tc.env), os.DirFS(tree(t, tc.files)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resolve = %+v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A limit resolved from a container's cgroup is what the runtime holds
// afterwards; no limit removes one.
func TestApply(t *testing.T) {
	restoreLimit(t)
	root := tree(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "268435456\n"})
	l, err := Resolve(nil, env(nil), os.DirFS(root))
	if err != nil {
		t.Fatal(err)
	}
	l.Apply()
	if got, want := debug.SetMemoryLimit(-1), int64(268435456/100*90); got != want {
		t.Fatalf("runtime memory limit %d, want %d", got, want)
	}
	Limit{From: FromFlag}.Apply()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("runtime memory limit %d after no limit, want none", got)
	}
	// $GOMEMLIMIT was applied by the runtime: Apply leaves it.
	debug.SetMemoryLimit(123 << 20)
	Limit{Bytes: 1, From: FromGOMEMLIMIT}.Apply()
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Fatalf("runtime memory limit %d, want $GOMEMLIMIT's %d kept", got, 123<<20)
	}
}

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		headroom, live uint64
		want           int
	}{
		{32 << 20, 4 << 20, 800},
		{32 << 20, 32 << 20, 100},
		{32 << 20, 500 << 20, 100},
		{32 << 20, 1 << 10, 10000},
		{32 << 20, 0, 10000},
	} {
		if got := percentFor(tc.headroom, tc.live); got != tc.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", tc.headroom, tc.live, got, tc.want)
		}
	}
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitPercent collects until the tuner has set the percent for the live
// heap the last collection found, and returns it.
func waitPercent(t *testing.T, headroom uint64) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		// The tuner runs on the finalizer goroutine, after the collection.
		time.Sleep(10 * time.Millisecond)
		if got, want := gcPercent(), percentFor(headroom, liveHeap()); got == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d, want %d for a live heap of %d bytes", gcPercent(), percentFor(headroom, liveHeap()), liveHeap())
		}
	}
}

var keep [][]byte

// The percent follows the live heap collection by collection: when the
// heap grows, it falls back to 100, so the goal never becomes a multiple of
// a live heap measured when it was small.
func TestTuneGC(t *testing.T) {
	const headroom = 32 << 20
	before := gcPercent()
	stop := TuneGC(headroom, slog.New(slog.DiscardHandler))

	small := waitPercent(t, headroom)
	if small <= minGCPercent {
		t.Fatalf("GC percent %d with a live heap of %d bytes; want more than %d", small, liveHeap(), minGCPercent)
	}
	// The live heap grows past the headroom: the goal becomes 2×live, not
	// small% of it.
	for range 48 {
		keep = append(keep, make([]byte, 1<<20))
	}
	if grown := waitPercent(t, headroom); grown != minGCPercent {
		t.Fatalf("GC percent %d with a live heap of %d bytes; want %d", grown, liveHeap(), minGCPercent)
	}
	keep = nil
	if again := waitPercent(t, headroom); again <= minGCPercent {
		t.Fatalf("GC percent %d once the heap shrank; want more than %d", again, minGCPercent)
	}

	stop()
	if got := gcPercent(); got != before {
		t.Fatalf("GC percent %d after stop, want %d as before", got, before)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if got := gcPercent(); got != before {
		t.Fatalf("GC percent %d after stop and a collection; the tuner still runs", got)
	}
}
