// Package lru is a bounded least-recently-used cache for process-wide
// memos (compiled CEL programs, trained classifiers): at its bound it
// drops the entry used longest ago, never everything, so a configuration
// that passes the bound by one entry does not recompute all it had (a
// cache that empties itself at its bound did; issue 23).
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values, keeping at most its bound. It is safe for
// concurrent use; values are shared, so they must be immutable.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	bound int
	order *list.List // of *entry[K, V], most recently used first
	index map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// New returns a cache of at most bound entries (at least 1).
func New[K comparable, V any](bound int) *Cache[K, V] {
	return &Cache[K, V]{bound: max(1, bound), order: list.New(), index: map[K]*list.Element{}}
}

// Get returns the value of key and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*entry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// Add sets the value of key, marks it used and, past the bound, drops the
// entry used longest ago.
func (c *Cache[K, V]) Add(key K, val V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[key]; ok {
		e.Value.(*entry[K, V]).val = val
		c.order.MoveToFront(e)
		return
	}
	c.index[key] = c.order.PushFront(&entry[K, V]{key, val})
	if c.order.Len() > c.bound {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.index, oldest.Value.(*entry[K, V]).key)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Purge drops every entry.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.index)
}
