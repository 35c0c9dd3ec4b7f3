// Package cache keeps the answers of per-query sources (httpAPI) so that the
// same question does not ask the same API twice within a router's
// spec.cache.ttl. Entries live in an in-memory LRU bounded by
// spec.cache.maxEntries and spec.cache.maxBytes and, when a folder is given,
// in files under it that outlive the process (a second tier, bounded the same
// way). A result larger than maxBytes is not cached.
//
// A key is a source key and the query text. The source key must identify the
// source's spec (engine.SourceFingerprint), so an edited source never serves
// results fetched with its old spec. Failures are never cached: callers Put
// only successful fetches.
package cache

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// Options configure a Cache.
type Options struct {
	// TTL is how long a result stays fresh after it was fetched. It must be
	// positive unless the cache is disabled.
	TTL time.Duration
	// MaxEntries bounds the in-memory entries and, separately, the files
	// under Dir. 0 disables the cache: Get always misses, Put keeps nothing
	// and Dir is not touched.
	MaxEntries int
	// MaxBytes bounds the size of the in-memory entries (as estimated by
	// entrySize) and, separately, of the files under Dir. It must be
	// positive unless the cache is disabled.
	MaxBytes int64
	// Dir holds the on-disk tier ("" = memory only). Use Dir(...) to name
	// the folder of a router, so the CLI finds it.
	Dir string
	// Now is the clock (nil = time.Now); tests move it.
	Now func() time.Time
	// Logger receives disk errors (nil = slog.Default()).
	Logger *slog.Logger
}

// OptionsFor turns a router's spec.cache into Options, applying the API
// defaults to fields left unset (standalone manifests are defaulted by the
// loader, but a hand-built spec may not be).
func OptionsFor(spec v1alpha1.CacheSpec, dir string) Options {
	r := v1alpha1.ContextRouter{Spec: v1alpha1.ContextRouterSpec{Cache: *spec.DeepCopy()}}
	r.Default()
	c := r.Spec.Cache
	return Options{TTL: c.TTL.Duration, MaxEntries: int(*c.MaxEntries), MaxBytes: c.MaxBytes.Value(), Dir: dir}
}

// Dir names the on-disk folder of one router's cache:
// <base>/http/<namespace>_<router> (or <base>/http/<router> without a
// namespace). base "" is the default of the CLI's --cache-dir for git clones:
// <user cache dir>/contextrouter, or <tmp>/contextrouter without one.
// serve and `contextrouter cache` both name the folder this way.
func Dir(base, namespace, router string) string {
	base = Base(base)
	label := router
	if namespace != "" {
		label = namespace + "_" + router
	}
	return filepath.Join(base, "http", safeName(label))
}

// Base is the folder of --cache-dir base: base itself, or for "" the
// default, <user cache dir>/contextrouter (<tmp>/contextrouter without one).
func Base(base string) string {
	if base != "" {
		return base
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "contextrouter")
	}
	return filepath.Join(os.TempDir(), "contextrouter")
}

// safeName keeps a folder name to portable characters; Kubernetes names
// already are, but standalone manifests are not validated by an API server.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := strings.TrimLeft(b.String(), ".")
	if out == "" {
		out = "_"
	}
	return out
}

// key is what a result is cached under. A struct of two strings hashes
// without building a joined string on every Get.
type key struct {
	source string
	query  string
}

type entry struct {
	key     key
	chunks  []sources.Chunk
	created time.Time
	size    int64 // entrySize
}

// Sizes of the bookkeeping that entrySize counts beside the strings: a list
// element, a map slot and the entry (a generous round figure), and a chunk.
const (
	entryOverhead = 256
	chunkOverhead = int64(unsafe.Sizeof(sources.Chunk{}))
)

// entrySize estimates the memory an entry holds: its strings, chunk headers
// and bookkeeping. Strings shared between chunks are counted each time, so
// the estimate errs high.
func entrySize(k key, chunks []sources.Chunk) int64 {
	n := int64(entryOverhead + len(k.source) + len(k.query))
	for i := range chunks {
		c := &chunks[i]
		n += chunkOverhead + int64(len(c.Source)+len(c.Title)+len(c.Path)+len(c.Content)+len(c.Commit))
	}
	return n
}

// Cache is a TTL'd LRU of fetch results with an optional on-disk tier. It is
// safe for concurrent use. The zero value is not usable; a nil *Cache is a
// disabled cache.
type Cache struct {
	now func() time.Time
	log *slog.Logger
	dir string

	mu       sync.Mutex // guards the fields below
	ttl      time.Duration
	max      int
	maxBytes int64
	bytes    int64      // sum of the entries' sizes
	lru      *list.List // of *entry, most recently used first
	items    map[key]*list.Element

	disk *disk // nil without Dir; has its own lock

	hits, misses atomic.Uint64
}

// New builds a cache. With a Dir and MaxEntries > 0 it creates the folder
// (0700: results may be confidential) and indexes the files already there,
// removing expired and unreadable ones.
func New(opts Options) (*Cache, error) {
	if err := checkLimits(opts.TTL, opts.MaxEntries, opts.MaxBytes); err != nil {
		return nil, err
	}
	c := &Cache{
		now: opts.Now, log: opts.Logger, dir: opts.Dir,
		ttl: opts.TTL, max: opts.MaxEntries, maxBytes: opts.MaxBytes,
		lru: list.New(), items: map[key]*list.Element{},
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.dir != "" {
		c.disk = newDisk(c.dir, c.log, c.now)
		if c.max > 0 {
			if err := c.disk.open(c.ttl, c.max, c.maxBytes); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func checkLimits(ttl time.Duration, maxEntries int, maxBytes int64) error {
	if maxEntries < 0 {
		return fmt.Errorf("cache maxEntries: must be >= 0 (0 disables the cache), got %d", maxEntries)
	}
	if maxEntries > 0 && ttl <= 0 {
		return fmt.Errorf("cache ttl: must be positive, got %s", ttl)
	}
	if maxEntries > 0 && maxBytes <= 0 {
		return fmt.Errorf("cache maxBytes: must be positive, got %d", maxBytes)
	}
	return nil
}

// fresh reports whether a result fetched at created may still be served. An
// entry dated in the future (the wall clock moved back, or a file from
// another machine) is trusted no longer than ttl either.
func fresh(created, now time.Time, ttl time.Duration) bool {
	age := now.Sub(created)
	return age < ttl && age > -ttl
}

// Get returns the fresh result for a source key and query, from memory or
// else from disk. The chunks are shared with the cache: do not modify them.
func (c *Cache) Get(source, query string) ([]sources.Chunk, bool) {
	if c == nil {
		return nil, false
	}
	k := key{source, query}
	now := c.now()
	c.mu.Lock()
	if c.max == 0 {
		c.mu.Unlock()
		return nil, false
	}
	ttl := c.ttl
	if el, ok := c.items[k]; ok {
		e := el.Value.(*entry)
		if fresh(e.created, now, ttl) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			c.hits.Add(1)
			return e.chunks, true
		}
		// Its file, if any, has the same date: the disk lookup removes it.
		c.remove(el)
	}
	c.mu.Unlock()

	if c.disk != nil {
		if chunks, created, ok := c.disk.get(k, now, ttl); ok {
			c.mu.Lock()
			// A Put may have raced ahead with a newer result; keep that one.
			if _, ok := c.items[k]; !ok && c.max > 0 {
				c.insert(&entry{key: k, chunks: chunks, created: created, size: entrySize(k, chunks)})
			}
			c.mu.Unlock()
			c.hits.Add(1)
			return chunks, true
		}
	}
	c.misses.Add(1)
	return nil, false
}

// Put stores a successful result. The slice is copied; the chunks' strings
// are immutable and shared. The file of the disk tier is written in the
// background (see Flush). A result larger than MaxBytes is not stored, and
// an older result for the same key is dropped.
func (c *Cache) Put(source, query string, chunks []sources.Chunk) {
	if c == nil {
		return
	}
	k := key{source, query}
	e := &entry{key: k, chunks: slices.Clone(chunks), created: c.now(), size: entrySize(k, chunks)}
	if e.chunks == nil {
		e.chunks = []sources.Chunk{}
	}
	c.mu.Lock()
	maxEntries, maxBytes, ttl := c.max, c.maxBytes, c.ttl
	if maxEntries == 0 {
		c.mu.Unlock()
		return
	}
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	if e.size > maxBytes {
		c.mu.Unlock()
		return
	}
	c.insert(e)
	c.mu.Unlock()

	if c.disk != nil {
		c.disk.put(e, ttl, maxEntries, maxBytes)
	}
}

// insert adds e as the most recently used entry and evicts the least
// recently used beyond the limits. c.mu must be held.
func (c *Cache) insert(e *entry) {
	if e.size > c.maxBytes {
		return
	}
	c.items[e.key] = c.lru.PushFront(e)
	c.bytes += e.size
	c.evict()
}

// evict removes the least recently used entries until both limits hold.
// c.mu must be held.
func (c *Cache) evict() {
	for c.lru.Len() > c.max || c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

// remove drops one entry. c.mu must be held.
func (c *Cache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.items, e.key)
	c.bytes -= e.size
}

// Stats returns how many Gets were answered (from memory or disk) and how
// many were not, since New. A disabled cache counts nothing.
func (c *Cache) Stats() (hits, misses uint64) {
	if c == nil {
		return 0, 0
	}
	return c.hits.Load(), c.misses.Load()
}

// Len is the number of entries in memory (expired ones included until they
// are looked up or evicted).
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Bytes is the estimated size of the entries in memory, which MaxBytes bounds.
func (c *Cache) Bytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Clear drops every entry, in memory and on disk (every result file in Dir,
// including those of other processes sharing it), after the writes in
// flight. The counters are kept.
func (c *Cache) Clear() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.lru.Init()
	c.items = map[key]*list.Element{}
	c.bytes = 0
	c.mu.Unlock()
	if c.disk != nil {
		return c.disk.clear()
	}
	return nil
}

// Flush waits for the disk writes in flight (Put writes in the background).
// Tests call it before looking at the folder; serve may call it on exit.
func (c *Cache) Flush() {
	if c != nil && c.disk != nil {
		c.disk.flush()
	}
}

// SetLimits applies a changed spec.cache (the server calls it on reload).
// The TTL applies to existing entries at once: freshness is judged when an
// entry is read. Lowering MaxEntries or MaxBytes evicts the least recently
// used entries and the oldest files; MaxEntries 0 disables the cache and
// empties the memory tier but leaves the files, which a later enable picks
// up if still fresh.
func (c *Cache) SetLimits(ttl time.Duration, maxEntries int, maxBytes int64) error {
	if c == nil {
		return errors.New("cache: SetLimits on a nil cache")
	}
	if err := checkLimits(ttl, maxEntries, maxBytes); err != nil {
		return err
	}
	c.mu.Lock()
	c.ttl, c.max, c.maxBytes = ttl, maxEntries, maxBytes
	c.evict()
	c.mu.Unlock()
	if c.disk != nil && maxEntries > 0 {
		return c.disk.open(ttl, maxEntries, maxBytes)
	}
	return nil
}
