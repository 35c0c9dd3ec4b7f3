package memlimit

import (
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Bounds of the GC percent the headroom tuner sets: never below Go's
// default, and never so high that one collection's live heap, multiplied,
// could matter (the soft limit caps the heap in any case).
const (
	minGCPercent = 100
	maxGCPercent = 10000
)

// MaxGCHeadroom is the largest headroom serve accepts (--gc-headroom): far
// past what a router's heap grows by between collections, and short of
// values (8Ei) that only say the flag was mistyped.
const MaxGCHeadroom = 64 << 30

// gcTuner sets the GC percent after every collection so that the next one
// starts about headroom bytes past the live heap that collection found.
type gcTuner struct {
	headroom uint64
	log      *slog.Logger
	sample   []metrics.Sample

	mu      sync.Mutex // orders setting the percent against stop
	stopped bool
	last    int
}

// sentinel is garbage the moment it is armed: its finalizer runs after the
// next collection. It holds a pointer, so it is never a tiny allocation
// (whose finalizers may not run).
type sentinel struct{ t *gcTuner }

// TuneGC keeps the collector's goal at max(2×live, live+headroom): after
// every collection it sets the GC percent to headroom/live (between 100
// and 10000) from that collection's live heap. A router's live heap is
// often a few MB, where Go's default would collect every few MB of
// allocation; a percent computed once would instead multiply whatever the
// heap grows to later. The soft memory limit still caps the heap. stop
// ends the tuning and restores the percent in place before.
func TuneGC(headroom int64, log *slog.Logger) (stop func()) {
	t := &gcTuner{
		headroom: uint64(headroom),
		log:      log,
		sample:   []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
	}
	before := gcPercent()
	t.last = before
	t.arm()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.stopped = true
			debug.SetGCPercent(before)
		})
	}
}

func (t *gcTuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, (*sentinel).collected)
}

// collected runs on the finalizer goroutine after a collection.
func (s *sentinel) collected() {
	if s.t.tune() {
		s.t.arm()
	}
}

// tune sets the percent for the live heap of the last collection; false
// once stopped.
func (t *gcTuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return true
	}
	live := t.sample[0].Value.Uint64()
	if pct := percentFor(t.headroom, live); pct != t.last {
		debug.SetGCPercent(pct)
		t.last = pct
		t.log.Debug("garbage collector tuned", "live_heap_bytes", live, "gc_percent", pct)
	}
	return true
}

// gcPercent reads the GC percent in effect (GOGC) without changing it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if v := s[0].Value.Uint64(); v <= math.MaxInt32 {
		return int(v)
	}
	return -1 // off
}

// percentFor is the GC percent that puts the next collection headroom bytes
// past live, within [minGCPercent, maxGCPercent].
func percentFor(headroom, live uint64) int {
	live = max(live, 1)
	return int(min(max(headroom*100/live, minGCPercent), maxGCPercent))
}
