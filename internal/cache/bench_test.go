package cache

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCacheGetParallel measures memory hits from every core at once:
// the hot path of a server answering repeated questions.
func BenchmarkCacheGetParallel(b *testing.B) {
	const n = 1000
	c := newCache(b, Options{TTL: time.Hour, MaxEntries: n, MaxBytes: 1 << 20})
	queries := make([]string, n)
	for i := range queries {
		queries[i] = fmt.Sprintf("how do I configure feature %d?", i)
		c.Put("sha256:0123456789abcdef", queries[i], result(queries[i], 5))
	}
	var next atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(7919)
		for pb.Next() {
			i++
			if _, ok := c.Get("sha256:0123456789abcdef", queries[i%n]); !ok {
				b.Error("miss")
				return
			}
		}
	})
}

// BenchmarkCachePut measures storing a result: in memory; with the disk
// tier as a query sees it (the write runs in the background and is skipped
// while maxWritesInFlight writes are running); and waiting for the write.
func BenchmarkCachePut(b *testing.B) {
	for _, mode := range []string{"memory", "disk", "disk-flushed"} {
		b.Run(mode, func(b *testing.B) {
			o := Options{TTL: time.Hour, MaxEntries: 1000, MaxBytes: 1 << 20}
			if mode != "memory" {
				o.Dir = b.TempDir()
			}
			c := newCache(b, o)
			chunks := result("a typical question", 5)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Put("sha256:0123456789abcdef", fmt.Sprintf("question %d", i%2000), chunks)
				if mode == "disk-flushed" {
					c.Flush()
				}
			}
			c.Flush()
		})
	}
}
