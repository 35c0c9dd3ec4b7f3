package cache

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/sources"
)

// entryFiles lists the result files in dir, sorted.
func entryFiles(t testing.TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if isEntryName(de.Name()) {
			out = append(out, de.Name())
		}
	}
	return out
}

func filesOf(source string, queries ...string) []string {
	out := make([]string, len(queries))
	for i, q := range queries {
		out[i] = fileName(key{source, q})
	}
	slices.Sort(out)
	return out
}

func TestCacheDiskRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "http", "default")
	clk := newClock()
	want := []sources.Chunk{
		{Source: "kb", Title: "Vacation <policy> & more", Path: "hr/vacation.md", Content: "Ünïcode\n\tand \"quotes\"", Index: 3,
			ModTime: time.Date(2025, 12, 24, 8, 30, 0, 123456789, time.UTC), Commit: "0123abcd"},
		{Source: "kb", Content: "second", Index: 0},
	}
	const query = "a private question xyzzy"
	c1 := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now})
	c1.Put("sha256:src", query, want)
	c1.Flush()

	files := entryFiles(t, dir)
	if len(files) != 1 || files[0] != fileName(key{"sha256:src", query}) {
		t.Fatalf("files = %v, want the one result file", files)
	}
	data, err := os.ReadFile(filepath.Join(dir, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("xyzzy")) {
		t.Error("the result file holds the query text")
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, files[0]): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, mode)
		}
	}

	// A new process finds the result on disk and keeps it in memory after.
	c2 := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now})
	if c2.Len() != 0 {
		t.Fatalf("a new cache starts with %d entries in memory", c2.Len())
	}
	wantHit(t, c2, "sha256:src", query, want)
	if c2.Len() != 1 {
		t.Errorf("Len = %d after a disk hit, want 1", c2.Len())
	}
	wantMiss(t, c2, "sha256:other", query)
	if h, m := c2.Stats(); h != 1 || m != 1 {
		t.Errorf("Stats = %d, %d; want 1 hit (from disk), 1 miss", h, m)
	}
}

func TestCacheDiskCorruptionIsAMiss(t *testing.T) {
	other, err := encodeEntry(&entry{key: key{"sha256:other", "q"}, chunks: result("q", 2), created: newClock().Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		corrupt func(data []byte) []byte
	}{
		{"truncated in the chunks", func(d []byte) []byte { return d[:len(d)-20] }},
		{"truncated in the header", func(d []byte) []byte { return d[:10] }},
		{"header line only", func(d []byte) []byte { return d[:bytes.IndexByte(d, '\n')+1] }},
		{"empty", func([]byte) []byte { return nil }},
		{"not JSON", func([]byte) []byte { return []byte("\x00\x01binary\nstuff") }},
		{"another format version", func(d []byte) []byte { return bytes.Replace(d, []byte(`"version":1`), []byte(`"version":2`), 1) }},
		{"chunk count does not match", func(d []byte) []byte { return bytes.Replace(d, []byte(`"chunks":2`), []byte(`"chunks":3`), 1) }},
		{"data after the chunks", func(d []byte) []byte { return append(d, "[]"...) }},
		{"the file of another source key", func([]byte) []byte { return other }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := newClock()
			o := Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now, Logger: slog.New(slog.DiscardHandler)}
			c0 := newCache(t, o)
			c0.Put("sha256:src", "q", result("q", 2))
			c0.Flush()
			path := filepath.Join(dir, fileName(key{"sha256:src", "q"}))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.corrupt(data), 0o600); err != nil {
				t.Fatal(err)
			}

			c := newCache(t, o) // opening the folder is not an error
			wantMiss(t, c, "sha256:src", "q")
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the bad file is still there (%v)", err)
			}
			c.Put("sha256:src", "q", result("q", 1))
			c.Flush()
			wantHit(t, newCache(t, o), "sha256:src", "q", result("q", 1))
		})
	}
}

func TestCacheDiskBoundAndExpiry(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	o := Options{TTL: 5 * time.Minute, MaxEntries: 3, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now}
	c := newCache(t, o)
	for _, q := range []string{"a", "b", "c", "d"} {
		c.Put("src", q, result(q, 1))
		c.Flush()
		clk.Advance(time.Minute)
	}
	// now = t0+4m; files of b (t0+1m), c (t0+2m), d (t0+3m).
	if got, want := entryFiles(t, dir), filesOf("src", "b", "c", "d"); !slices.Equal(got, want) {
		t.Fatalf("after 4 Puts with maxEntries 3: files %v, want b, c, d: %v", got, want)
	}

	// Writing drops expired files from the old end: at t0+6m30s b is 5m30s old.
	clk.Advance(2*time.Minute + 30*time.Second)
	c.Put("src", "e", result("e", 1))
	c.Flush()
	if got, want := entryFiles(t, dir), filesOf("src", "c", "d", "e"); !slices.Equal(got, want) {
		t.Fatalf("files %v, want c, d, e: %v", got, want)
	}

	// Opening the folder removes expired files (c is 5m30s old at t0+7m30s)
	// and keeps the newest ones within a lower bound.
	clk.Advance(time.Minute)
	o.MaxEntries = 1
	c2 := newCache(t, o)
	if got, want := entryFiles(t, dir), filesOf("src", "e"); !slices.Equal(got, want) {
		t.Fatalf("after reopening: files %v, want e: %v", got, want)
	}
	wantHit(t, c2, "src", "e", result("e", 1))

	// An expired file met on Get is removed.
	clk.Advance(5 * time.Minute)
	c3 := newCache(t, Options{TTL: time.Hour, MaxEntries: 3, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now}) // indexes e as fresh
	if err := c3.SetLimits(5*time.Minute, 3, 1<<20); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, c3, "src", "e")
	if got := entryFiles(t, dir); len(got) != 0 {
		t.Errorf("files %v after an expired Get, want none", got)
	}
}

func TestCacheDiskLeftoversAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		m := time.Now().Add(-age)
		if err := os.Chtimes(p, m, m); err != nil {
			t.Fatal(err)
		}
	}
	write(".tmp-crashed", "{", 2*time.Minute)
	write(".tmp-writing", "{", 0)
	write("README", "not ours", time.Hour)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	newCache(t, Options{TTL: time.Minute, MaxEntries: 5, MaxBytes: 1 << 20, Dir: dir})
	var names []string
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		names = append(names, de.Name())
	}
	if want := []string{".tmp-writing", "README", "sub"}; !slices.Equal(names, want) {
		t.Errorf("folder holds %v, want %v (only the crashed write removed)", names, want)
	}
}

func TestCacheReadDirAndPurge(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	t0 := clk.Now()
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir, Now: clk.Now})
	c.Put("sha256:b", "late", result("late", 3))
	clk.Advance(-time.Minute) // a file dated earlier lists first
	c.Put("sha256:a", "early", result("early", 1))
	c.Flush()
	broken := filepath.Join(dir, strings.Repeat("0", 64)+".json")
	if err := os.WriteFile(broken, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-x"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	entries, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Source     string
		Created    time.Time
		Chunks     int
		Unreadable bool
	}
	var got []row
	var total int64
	for _, e := range entries {
		got = append(got, row{e.Source, e.Created, e.Chunks, e.Unreadable})
		st, err := os.Stat(filepath.Join(dir, e.Name))
		if err != nil || st.Size() != e.Size {
			t.Errorf("%s: Size %d, file has %d (%v)", e.Name, e.Size, st.Size(), err)
		}
		total += e.Size
	}
	want := []row{
		{"sha256:a", t0.Add(-time.Minute), 1, false},
		{"sha256:b", t0, 3, false},
		{"", time.Time{}, 0, true},
	}
	if !slices.EqualFunc(got, want, func(a, b row) bool {
		return a.Source == b.Source && a.Created.Equal(b.Created) && a.Chunks == b.Chunks && a.Unreadable == b.Unreadable
	}) {
		t.Errorf("ReadDir:\n got %+v\nwant %+v", got, want)
	}

	n, size, err := Purge(dir)
	if err != nil || n != 3 || size != total {
		t.Errorf("Purge = %d files, %d bytes, %v; want 3, %d, nil", n, size, err, total)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 || des[0].Name() != "notes.txt" {
		t.Errorf("after Purge the folder holds %v, want only notes.txt", des)
	}
	// The running cache notices the files are gone.
	wantMiss(t, c.withEmptyMemory(), "sha256:a", "early")

	missing := filepath.Join(dir, "nope")
	if entries, err := ReadDir(missing); entries != nil || err != nil {
		t.Errorf("ReadDir of a missing folder = %v, %v; want nil, nil", entries, err)
	}
	if n, _, err := Purge(missing); n != 0 || err != nil {
		t.Errorf("Purge of a missing folder = %d, %v; want 0, nil", n, err)
	}
}

// withEmptyMemory drops the memory tier so the next Get goes to disk.
func (c *Cache) withEmptyMemory() *Cache {
	c.mu.Lock()
	c.lru.Init()
	clear(c.items)
	c.mu.Unlock()
	return c
}

func TestCacheClearRemovesBothTiers(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir})
	c.Put("src", "a", result("a", 1))
	c.Put("src", "b", result("b", 1))
	wantHit(t, c, "src", "a", result("a", 1))
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 || len(entryFiles(t, dir)) != 0 {
		t.Fatalf("after Clear: Len %d, files %v", c.Len(), entryFiles(t, dir))
	}
	wantMiss(t, c, "src", "a")
	if h, m := c.Stats(); h != 1 || m != 1 {
		t.Errorf("Stats = %d, %d; Clear keeps the counters (1, 1)", h, m)
	}
	c.Put("src", "a", result("a", 2))
	c.Flush()
	wantHit(t, c.withEmptyMemory(), "src", "a", result("a", 2))
}

// syncBuffer is a log sink that tests may read while the cache writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCacheDiskWriteFailureKeepsServingFromMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "http")
	var logs syncBuffer
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// A file where the folder was makes every write fail, even for root.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a", "b", "c"} {
		c.Put("src", q, result(q, 1))
		c.Flush()
		wantHit(t, c, "src", q, result(q, 1))
	}
	if n := strings.Count(logs.String(), "cannot write result files"); n != 1 {
		t.Errorf("the write failure was logged %d times, want once:\n%s", n, logs.String())
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c.Put("src", "d", result("d", 1))
	c.Flush()
	if !strings.Contains(logs.String(), "writing result files again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
	if got := entryFiles(t, dir); !slices.Equal(got, filesOf("src", "d")) {
		t.Errorf("files %v, want d's", got)
	}
}

func TestCacheFileNamesAreUnambiguous(t *testing.T) {
	if fileName(key{"ab", "c"}) == fileName(key{"a", "bc"}) {
		t.Error(`("ab","c") and ("a","bc") share a file`)
	}
	if !isEntryName(fileName(key{"s", "q"})) {
		t.Error("fileName does not produce an entry name")
	}
	for _, n := range []string{"x.json", strings.Repeat("A", 64) + ".json", strings.Repeat("0", 64) + ".tmp", ".tmp-1"} {
		if isEntryName(n) {
			t.Errorf("isEntryName(%q) = true", n)
		}
	}
}

// TestBusyDiskDoesNotHoldUpPut: with every write slot taken (a slow disk),
// Put returns at once and the result is served from memory only.
func TestCacheBusyDiskDoesNotHoldUpPut(t *testing.T) {
	dir := t.TempDir()
	c := newCache(t, Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir})
	for range cap(c.disk.writes) {
		c.disk.writes <- struct{}{}
	}
	done := make(chan struct{})
	go func() {
		c.Put("src", "q", result("q", 1))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Put waited for the disk")
	}
	for range cap(c.disk.writes) {
		<-c.disk.writes
	}
	c.Flush()
	wantHit(t, c, "src", "q", result("q", 1))
	if got := entryFiles(t, dir); len(got) != 0 {
		t.Errorf("files %v, want none (the write was skipped)", got)
	}
}
