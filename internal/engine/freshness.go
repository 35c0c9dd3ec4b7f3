package engine

import (
	"sync/atomic"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// freshness is a source's spec.freshness, compiled (api.md §4.7).
type freshness struct {
	// maxAge > 0 when the source sets freshness.
	maxAge time.Duration
	drop   bool
	// newest is the newest content time of a static source's chunks, or of
	// the answers a per-query source fetched (Unix nanoseconds, 0 = unknown).
	newest atomic.Int64
}

func (f *freshness) set(spec *v1alpha1.FreshnessSpec) {
	if spec == nil {
		return
	}
	f.maxAge = spec.MaxAge.Duration
	f.drop = spec.StaleAction == v1alpha1.StaleDrop
}

// observe raises newest to t; fetches of one source may race.
func (f *freshness) observe(t time.Time) {
	if t.IsZero() {
		return
	}
	n := t.UnixNano()
	for {
		old := f.newest.Load()
		if old >= n || f.newest.CompareAndSwap(old, n) {
			return
		}
	}
}

// observeChunks raises newest to the newest content time of an answer's
// chunks (ContentTime: an HTTPAPI result's own date when timeField gives
// one, else its fetch), so the source's status ages as its chunks do.
func (f *freshness) observeChunks(chunks []sources.Chunk) {
	var newest time.Time
	for i := range chunks {
		if t := ContentTime(&chunks[i]); t.After(newest) {
			newest = t
		}
	}
	f.observe(newest)
}

func (f *freshness) newestTime() time.Time {
	if n := f.newest.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// ContentTime is when a chunk's content was last known current: its
// modification time (a file's, or the served commit's committer time), else
// the time its answer was fetched (HTTPAPI); zero when unknown (Inline).
func ContentTime(c *sources.Chunk) time.Time {
	if !c.ModTime.IsZero() {
		return c.ModTime
	}
	return c.FetchedAt()
}

// Staleness is the one rule of freshness: the age of content last current
// at t, in whole seconds at now (content from the future, a skewed clock,
// is 0 seconds old), and whether it is older than maxAge.
func Staleness(t, now time.Time, maxAge time.Duration) (ageSeconds int64, stale bool) {
	age := max(now.Sub(t), 0)
	return int64(age / time.Second), age > maxAge
}
