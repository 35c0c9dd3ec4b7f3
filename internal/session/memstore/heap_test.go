package memstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// heapShapes are the items a store is filled with to hold its bound to the
// heap: the smallest item, the fattest (32 tags, 32 metadata pairs, a
// parent), and sessions of one item each (the store's own bookkeeping).
var heapShapes = []string{"minimal", "fat", "sessions"}

// fillStore writes items of shape into m as the HTTP API and session files
// do (decoded from JSON, 100 a write, sessions of 2,000 items) until m
// refuses a write past maxBytes. check runs after every write; an error
// from it ends the fill. It returns the items stored.
func fillStore(m *Store, shape string, check func() error) (int, error) {
	const perWrite, perSession = 100, 2000
	var tags, meta []string
	for j := range 32 {
		tags = append(tags, fmt.Sprintf(`"t%d"`, j))
		meta = append(meta, fmt.Sprintf(`"k%d":"v"`, j))
	}
	fat := fmt.Sprintf(`"sensitivity":"Public","tags":[%s],"metadata":{%s}`, strings.Join(tags, ","), strings.Join(meta, ","))
	items := 0
	for w := 0; ; w++ {
		var b strings.Builder
		b.WriteString(`{"items":[`)
		n := perWrite
		if shape == "sessions" {
			n = 1
		}
		for j := range n {
			i := items + j
			if j > 0 {
				b.WriteString(",")
			}
			switch shape {
			case "minimal", "sessions":
				fmt.Fprintf(&b, `{"id":"i%d","kind":"user_turn","text":"x"}`, i)
			case "fat":
				parent := ""
				if i%perSession > 0 {
					parent = fmt.Sprintf(`"parent_id":"i%d",`, i-1)
				}
				fmt.Fprintf(&b, `{"id":"i%d","kind":"tool_result",%s"text":"x",%s}`, i, parent, fat)
			}
		}
		b.WriteString("]}")
		var d logDelta
		if err := json.Unmarshal([]byte(b.String()), &d); err != nil {
			return items, err
		}
		id, agent := fmt.Sprintf("s%d", items/perSession), "agent"
		if shape == "sessions" {
			id, agent = fmt.Sprintf("s%d", w), fmt.Sprintf("agent-%d", w)
		}
		_, err := m.Append(context.Background(), id, agent, session.Delta(d))
		var le *session.LimitError
		if errors.As(err, &le) && le.Limit == "maxBytes" {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items += n
		if err := check(); err != nil {
			return items, err
		}
	}
}

// TestMemStoreHeapWithinMaxBytes fills an 8 MiB store until it refuses and
// holds the heap it took to its bound: at most twice maxBytes (issue 22:
// counting texts only, 8 MiB of one-character items took some 270 MiB) and
// at least half of it (an estimate that counts far more than the heap
// refuses writes the memory could take).
func TestMemStoreHeapWithinMaxBytes(t *testing.T) {
	const maxBytes = 8 << 20
	for _, shape := range heapShapes {
		t.Run(shape, func(t *testing.T) {
			var ms runtime.MemStats
			heap := func() int64 { runtime.ReadMemStats(&ms); return int64(ms.HeapAlloc) }
			runtime.GC()
			base := heap()
			m := openStore(t, Config{MaxBytes: maxBytes, MaxSessions: 1 << 20})
			// Stop once the heap, garbage and all, is past the bound even
			// after a collection: the store would go on far past it.
			check := func() error {
				if heap()-base <= 2*maxBytes {
					return nil
				}
				runtime.GC()
				if grew := heap() - base; grew > 2*maxBytes {
					return fmt.Errorf("the heap grew %.1f MiB while the store counts %.1f MiB of its %d MiB",
						float64(grew)/(1<<20), float64(m.bytes)/(1<<20), maxBytes>>20)
				}
				return nil
			}
			items, err := fillStore(m, shape, check)
			if err != nil {
				t.Fatalf("after %d items: %v", items, err)
			}
			runtime.GC()
			grew := heap() - base
			t.Logf("%d items: heap %.2f MiB, counted %.2f MiB (heap/counted %.2f)", items, float64(grew)/(1<<20), float64(m.bytes)/(1<<20), float64(grew)/float64(m.bytes))
			if grew > 2*maxBytes || grew < maxBytes/2 {
				t.Errorf("a full store of maxBytes %d MiB took %.1f MiB of heap; want %d to %d MiB", maxBytes>>20, float64(grew)/(1<<20), maxBytes>>21, 2*maxBytes>>20)
			}
			// The store was filled to its bound, not refused early.
			if m.bytes < maxBytes*9/10 || m.bytes > maxBytes {
				t.Errorf("the store refused at %d bytes of %d", m.bytes, maxBytes)
			}
			runtime.KeepAlive(m)
		})
	}
}

// TestMemStoreFillRSS is issue 22's bar: an 8 MiB store filled until it
// refuses grows the process's resident memory by at most 32 MiB (its peak,
// garbage and all). Each shape runs in a process of its own, this test
// binary run again, so the pages of other tests do not count.
func TestMemStoreFillRSS(t *testing.T) {
	if shape := os.Getenv("SESSION_FILL_RSS"); shape != "" {
		fillRSSChild(shape)
		return
	}
	switch {
	case runtime.GOOS != "linux":
		t.Skip("reads /proc/self/status")
	case raceDetector:
		t.Skip("under -race the detector's shadow memory is resident too; TestMemStoreHeapWithinMaxBytes still runs")
	}
	for _, shape := range heapShapes {
		t.Run(shape, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemStoreFillRSS$")
			cmd.Env = append(os.Environ(), "SESSION_FILL_RSS="+shape)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var r struct {
				Items          int
				Counted, Grown int64
				Err            string
			}
			line, _, _ := strings.Cut(string(out), "\n")
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("%d items, counted %.1f MiB: peak RSS grew %.1f MiB", r.Items, float64(r.Counted)/(1<<20), float64(r.Grown)/(1<<20))
			if r.Err != "" {
				t.Fatal(r.Err)
			}
			if r.Grown > 32<<20 {
				t.Errorf("filling an 8 MiB store grew the peak RSS by %.1f MiB; want at most 32 MiB", float64(r.Grown)/(1<<20))
			}
		})
	}
}

// fillRSSChild fills an 8 MiB store and prints one JSON line: items stored,
// bytes counted, the peak RSS over the RSS at start. It stops past 64 MiB.
func fillRSSChild(shape string) {
	status := func(field string) int64 {
		f, err := os.Open("/proc/self/status")
		if err != nil {
			panic(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
		panic("no " + field)
	}
	runtime.GC()
	start := status("VmRSS")
	m, err := New(Config{MaxBytes: 8 << 20, MaxSessions: 1 << 20})
	if err != nil {
		panic(err)
	}
	items, err := fillStore(m, shape, func() error {
		if g := status("VmHWM") - start; g > 64<<20 {
			return fmt.Errorf("stopped: the peak RSS grew %d MiB while the store counts %.1f MiB", g>>20, float64(m.bytes)/(1<<20))
		}
		return nil
	})
	r := map[string]any{"Items": items, "Counted": m.bytes, "Grown": status("VmHWM") - start}
	if err != nil {
		r["Err"] = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	os.Exit(0)
}
