package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// clock is a fake time source the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newCache(t testing.TB, o Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return c
}

// result is a recognisable answer for a query.
func result(query string, n int) []sources.Chunk {
	out := make([]sources.Chunk, n)
	for i := range out {
		out[i] = sources.Chunk{Source: "kb", Title: fmt.Sprintf("%s #%d", query, i), Path: fmt.Sprintf("docs/%d.md", i), Content: "answer to " + query, Index: i,
			Fetched: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()}
	}
	return out
}

func wantHit(t *testing.T, c *Cache, source, query string, want []sources.Chunk) {
	t.Helper()
	got, ok := c.Get(source, query)
	if !ok {
		t.Fatalf("Get(%q, %q): miss, want a hit", source, query)
	}
	sameChunks(t, got, want)
}

func wantMiss(t *testing.T, c *Cache, source, query string) {
	t.Helper()
	if got, ok := c.Get(source, query); ok {
		t.Fatalf("Get(%q, %q): hit with %d chunks, want a miss", source, query, len(got))
	}
}

func sameChunks(t *testing.T, got, want []sources.Chunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d chunks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.ModTime.Equal(w.ModTime) {
			t.Errorf("chunk %d: ModTime %v, want %v", i, g.ModTime, w.ModTime)
		}
		g.ModTime, w.ModTime = time.Time{}, time.Time{}
		if g != w {
			t.Errorf("chunk %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func TestCacheLRUOrderAndEviction(t *testing.T) {
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 3, MaxBytes: 1 << 20})
	for _, q := range []string{"a", "b", "c"} {
		c.Put("src", q, result(q, 1))
	}
	wantHit(t, c, "src", "a", result("a", 1)) // a is now the most recently used; b the least
	c.Put("src", "d", result("d", 1))
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	wantMiss(t, c, "src", "b")
	for _, q := range []string{"a", "c", "d"} {
		wantHit(t, c, "src", q, result(q, 1))
	}
	// Replacing an entry does not grow the cache and refreshes its recency.
	c.Put("src", "c", result("c", 2))
	c.Put("src", "e", result("e", 1)) // recency is now e, c, d, a: a goes
	if c.Len() != 3 {
		t.Fatalf("Len = %d after a replace, want 3", c.Len())
	}
	wantMiss(t, c, "src", "a")
	wantHit(t, c, "src", "c", result("c", 2))

	// The source key is part of the key.
	wantMiss(t, c, "other", "c")
	hits, misses := c.Stats()
	if hits != 5 || misses != 3 {
		t.Errorf("Stats = %d hits, %d misses; want 5, 3", hits, misses)
	}
}

func TestCacheTTLExpiry(t *testing.T) {
	clk := newClock()
	c := newCache(t, Options{TTL: time.Minute, MaxEntries: 10, MaxBytes: 1 << 20, Now: clk.Now})
	c.Put("src", "q", result("q", 2))
	clk.Advance(time.Minute - time.Nanosecond)
	wantHit(t, c, "src", "q", result("q", 2))
	clk.Advance(time.Nanosecond)
	wantMiss(t, c, "src", "q")
	if c.Len() != 0 {
		t.Errorf("Len = %d after an expired Get, want 0 (the entry is dropped)", c.Len())
	}

	// A new Put starts a new TTL.
	c.Put("src", "q", result("q", 1))
	clk.Advance(30 * time.Second)
	c.Put("src", "q", result("q", 3))
	clk.Advance(45 * time.Second)
	wantHit(t, c, "src", "q", result("q", 3))

	// An entry dated far in the future (the clock moved back) is not trusted forever.
	c.Put("src", "back", result("back", 1))
	clk.Advance(-2 * time.Minute)
	wantMiss(t, c, "src", "back")
}

func TestCacheDisabledAndInvalidOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "http")
	c := newCache(t, Options{TTL: time.Minute, MaxEntries: 0, MaxBytes: 1 << 20, Dir: dir})
	c.Put("src", "q", result("q", 1))
	wantMiss(t, c, "src", "q")
	if h, m := c.Stats(); h != 0 || m != 0 || c.Len() != 0 {
		t.Errorf("disabled cache: Stats %d/%d, Len %d; want all 0", h, m, c.Len())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a disabled cache created its folder: %v", err)
	}
	// A disabled cache needs no TTL (spec.cache.maxEntries: 0 alone).
	if _, err := New(Options{MaxEntries: 0, MaxBytes: 1 << 20}); err != nil {
		t.Errorf("New(maxEntries 0, no TTL): %v", err)
	}

	var nilCache *Cache
	nilCache.Put("src", "q", nil)
	if _, ok := nilCache.Get("src", "q"); ok || nilCache.Len() != 0 || nilCache.Clear() != nil {
		t.Error("a nil cache must behave as an empty, disabled one")
	}

	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"negative max entries", Options{TTL: time.Minute, MaxEntries: -1, MaxBytes: 1 << 20}, "maxEntries: must be >= 0"},
		{"zero TTL", Options{MaxEntries: 1, MaxBytes: 1 << 20}, "ttl: must be positive, got 0s"},
		{"negative TTL", Options{TTL: -time.Second, MaxEntries: 1, MaxBytes: 1 << 20}, "ttl: must be positive, got -1s"},
		{"no byte bound", Options{TTL: time.Minute, MaxEntries: 1}, "maxBytes: must be positive, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCachePutCopiesAndEmptyResults(t *testing.T) {
	c := newCache(t, Options{TTL: time.Minute, MaxEntries: 10, MaxBytes: 1 << 20})
	in := result("q", 2)
	c.Put("src", "q", in)
	in[0].Content = "changed by the caller"
	wantHit(t, c, "src", "q", result("q", 2))

	// A successful fetch with no results is an answer too.
	c.Put("src", "none", nil)
	got, ok := c.Get("src", "none")
	if !ok || got == nil || len(got) != 0 {
		t.Errorf("Get of an empty result = %v, %v; want an empty, non-nil hit", got, ok)
	}
}

func TestCacheSetLimits(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 4, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now})
	for _, q := range []string{"a", "b", "c", "d"} {
		c.Put("src", q, result(q, 1))
		c.Flush()
		clk.Advance(time.Minute)
	}
	wantHit(t, c, "src", "a", result("a", 1))

	t.Run("lower max entries evicts the least recently used and the oldest files", func(t *testing.T) {
		if err := c.SetLimits(time.Hour, 2, 1<<20); err != nil {
			t.Fatal(err)
		}
		if c.Len() != 2 {
			t.Fatalf("Len = %d, want 2", c.Len())
		}
		if got := entryFiles(t, dir); len(got) != 2 {
			t.Fatalf("%d files, want 2", len(got))
		}
		// Memory keeps a (just used) and d; disk keeps c and d (newest).
		wantHit(t, c, "src", "a", result("a", 1))
		wantHit(t, c, "src", "d", result("d", 1))
		wantHit(t, c, "src", "c", result("c", 1)) // from disk
		wantMiss(t, c, "src", "b")
	})
	t.Run("a shorter TTL applies to existing entries", func(t *testing.T) {
		if err := c.SetLimits(90*time.Second, 2, 1<<20); err != nil {
			t.Fatal(err)
		}
		// d was fetched 1m ago, c 2m ago.
		wantHit(t, c, "src", "d", result("d", 1))
		wantMiss(t, c, "src", "c")
	})
	t.Run("zero disables and keeps the files", func(t *testing.T) {
		if err := c.SetLimits(time.Hour, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		wantMiss(t, c, "src", "d")
		if c.Len() != 0 {
			t.Errorf("Len = %d, want 0", c.Len())
		}
		if err := c.SetLimits(time.Hour, 2, 1<<20); err != nil {
			t.Fatal(err)
		}
		wantHit(t, c, "src", "d", result("d", 1))
	})
	t.Run("invalid", func(t *testing.T) {
		if err := c.SetLimits(0, 5, 1<<20); err == nil {
			t.Error("SetLimits(0, 5, 1<<20) = nil, want an error")
		}
	})
}

// bigResult is one chunk of n bytes of content.
func bigResult(query string, n int) []sources.Chunk {
	return []sources.Chunk{{Source: "kb", Title: query, Content: strings.Repeat("x", n)}}
}

// The memory tier holds at most MaxBytes (as entrySize counts them) and the
// disk tier at most MaxBytes of files: the least recently used go first, and
// a result larger than the bound is kept in neither.
func TestCacheMaxBytes(t *testing.T) {
	const payload = 10 << 10
	one := entrySize(key{"src", "a"}, bigResult("a", payload))
	// Room for three results in memory, not four.
	maxBytes := 3*one + one/2

	t.Run("memory: least recently used evicted past the byte bound", func(t *testing.T) {
		c := newCache(t, Options{TTL: time.Hour, MaxEntries: 100, MaxBytes: maxBytes})
		for _, q := range []string{"a", "b", "c"} {
			c.Put("src", q, bigResult(q, payload))
		}
		wantHit(t, c, "src", "a", bigResult("a", payload)) // b is now the least recently used
		c.Put("src", "d", bigResult("d", payload))
		if c.Len() != 3 || c.Bytes() > maxBytes {
			t.Fatalf("Len %d, Bytes %d; want 3 entries within %d bytes", c.Len(), c.Bytes(), maxBytes)
		}
		wantMiss(t, c, "src", "b")
		for _, q := range []string{"a", "c", "d"} {
			wantHit(t, c, "src", q, bigResult(q, payload))
		}
		// One result of twice the size pushes out two.
		c.Put("src", "e", bigResult("e", 2*payload))
		if c.Bytes() > maxBytes || c.Len() != 2 {
			t.Fatalf("Len %d, Bytes %d; want 2 entries within %d bytes", c.Len(), c.Bytes(), maxBytes)
		}
		wantHit(t, c, "src", "e", bigResult("e", 2*payload))
	})
	t.Run("a result larger than the bound is not cached", func(t *testing.T) {
		dir := t.TempDir()
		c := newCache(t, Options{TTL: time.Hour, MaxEntries: 100, MaxBytes: maxBytes, Dir: dir})
		c.Put("src", "small", bigResult("small", payload))
		c.Put("src", "huge", bigResult("huge", int(maxBytes)))
		c.Flush()
		wantMiss(t, c, "src", "huge")
		wantHit(t, c, "src", "small", bigResult("small", payload))
		if files := entryFiles(t, dir); len(files) != 1 {
			t.Errorf("%d files, want 1 (the huge result is not written)", len(files))
		}
		// A huge result replacing a small one for the same key drops the old one.
		c.Put("src", "small", bigResult("small", int(maxBytes)))
		if c.Len() != 0 || c.Bytes() != 0 {
			t.Errorf("Len %d, Bytes %d after an oversize replace; want 0, 0", c.Len(), c.Bytes())
		}
	})
	t.Run("disk: files within the byte bound, oldest removed", func(t *testing.T) {
		dir := t.TempDir()
		clk := newClock()
		c := newCache(t, Options{TTL: time.Hour, MaxEntries: 100, MaxBytes: maxBytes, Dir: dir, Now: clk.Now})
		for i := range 10 {
			c.Put("src", fmt.Sprint(i), bigResult(fmt.Sprint(i), payload))
			c.Flush()
			clk.Advance(time.Second)
		}
		if got := dirBytes(t, dir); got > maxBytes {
			t.Errorf("%d bytes of files, want at most %d", got, maxBytes)
		}
		files := entryFiles(t, dir)
		if len(files) != 3 {
			t.Fatalf("%d files, want the newest 3", len(files))
		}
		// A new process with a smaller bound trims the folder to it, oldest first.
		c2 := newCache(t, Options{TTL: time.Hour, MaxEntries: 100, MaxBytes: maxBytes / 2, Dir: dir, Now: clk.Now})
		if got := dirBytes(t, dir); got > maxBytes/2 || len(entryFiles(t, dir)) != 1 {
			t.Errorf("after reopening with half the bound: %d bytes in %d files", got, len(entryFiles(t, dir)))
		}
		wantHit(t, c2, "src", "9", bigResult("9", payload))
	})
	t.Run("lowering the bound evicts", func(t *testing.T) {
		dir := t.TempDir()
		clk := newClock()
		c := newCache(t, Options{TTL: time.Hour, MaxEntries: 100, MaxBytes: maxBytes, Dir: dir, Now: clk.Now})
		for _, q := range []string{"a", "b", "c"} {
			c.Put("src", q, bigResult(q, payload))
			c.Flush()
			clk.Advance(time.Second)
		}
		if err := c.SetLimits(time.Hour, 100, one); err != nil {
			t.Fatal(err)
		}
		if c.Len() != 1 || c.Bytes() > one || len(entryFiles(t, dir)) != 1 {
			t.Fatalf("Len %d, Bytes %d, %d files; want one entry and one file", c.Len(), c.Bytes(), len(entryFiles(t, dir)))
		}
		wantHit(t, c, "src", "c", bigResult("c", payload))
		if err := c.SetLimits(time.Hour, 100, 0); err == nil || !strings.Contains(err.Error(), "maxBytes") {
			t.Errorf("SetLimits with maxBytes 0: %v, want an error naming maxBytes", err)
		}
	})
}

// dirBytes sums the sizes of the result files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		n += e.Size
	}
	return n
}

func TestCacheOptionsForAndDir(t *testing.T) {
	n := int32(7)
	maxBytes := resource.MustParse("1Mi")
	for _, tc := range []struct {
		name string
		spec v1alpha1.CacheSpec
		want Options
	}{
		{"unset fields take the CRD defaults", v1alpha1.CacheSpec{}, Options{TTL: 5 * time.Minute, MaxEntries: 1000, MaxBytes: 64 << 20, Dir: "/d"}},
		{"set fields are kept", v1alpha1.CacheSpec{TTL: &metav1.Duration{Duration: time.Second}, MaxEntries: &n, MaxBytes: &maxBytes}, Options{TTL: time.Second, MaxEntries: 7, MaxBytes: 1 << 20, Dir: "/d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OptionsFor(tc.spec, "/d")
			if got.TTL != tc.want.TTL || got.MaxEntries != tc.want.MaxEntries || got.MaxBytes != tc.want.MaxBytes || got.Dir != tc.want.Dir {
				t.Errorf("OptionsFor = %+v, want %+v", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		base, ns, router, want string
	}{
		{"/var/cache/contextrouter", "team-a", "support", "/var/cache/contextrouter/http/team-a_support"},
		{"/c", "", "default", "/c/http/default"},
		{"/c", "", "../evil/x", "/c/http/_evil_x"},
		{"/c", "", "", "/c/http/_"},
	} {
		if got := Dir(tc.base, tc.ns, tc.router); got != tc.want {
			t.Errorf("Dir(%q, %q, %q) = %q, want %q", tc.base, tc.ns, tc.router, got, tc.want)
		}
	}
	if got := Dir("", "", "r"); !strings.HasSuffix(got, filepath.Join("contextrouter", "http", "r")) {
		t.Errorf("Dir with the default base = %q, want .../contextrouter/http/r", got)
	}
}

// TestConcurrentUse runs readers and writers over overlapping keys, with the
// disk tier, under -race: no answer may belong to another key, and both tiers
// stay within their bounds.
func TestCacheConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	const maxEntries = 16
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: maxEntries, MaxBytes: 1 << 20, Dir: dir})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				q := fmt.Sprintf("q%d", (i*7+w)%40)
				src := fmt.Sprintf("s%d", i%2)
				if got, ok := c.Get(src, q); ok {
					if len(got) != 1 || got[0].Content != "answer to "+src+"/"+q {
						select {
						case errs <- fmt.Sprintf("Get(%s, %s) = %+v", src, q, got):
						default:
						}
						return
					}
					continue
				}
				c.Put(src, q, []sources.Chunk{{Content: "answer to " + src + "/" + q}})
				if i%97 == 0 && w == 0 {
					if err := c.Clear(); err != nil {
						errs <- err.Error()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	c.Flush()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if c.Len() > maxEntries {
		t.Errorf("Len = %d, over %d", c.Len(), maxEntries)
	}
	if n := len(entryFiles(t, dir)); n > maxEntries {
		t.Errorf("%d files, over %d", n, maxEntries)
	}
	if h, m := c.Stats(); h+m != 8*300 {
		t.Errorf("hits %d + misses %d != %d Gets", h, m, 8*300)
	}
}
