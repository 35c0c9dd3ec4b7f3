package lru

import (
	"fmt"
	"sync"
	"testing"
)

// TestEvictsLeastRecentlyUsed: filling past the bound drops the entry used
// longest ago, one at a time, never everything; Get and Add count as use.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](3)
	c.Add("a", 1)
	c.Add("b", 2)
	c.Add("c", 3)
	if _, ok := c.Get("a"); !ok { // a is now the most recent; b the oldest
		t.Fatal("a missing below the bound")
	}
	c.Add("d", 4)
	if _, ok := c.Get("b"); ok {
		t.Error("b, the least recently used, was kept past the bound")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s was dropped; only the least recently used should be", k)
		}
	}
	if c.Len() != 3 {
		t.Errorf("Len %d, want 3", c.Len())
	}
	c.Add("c", 30) // an update is a use, and replaces the value
	c.Add("e", 5)  // drops a: used before d, c
	if v, ok := c.Get("c"); !ok || v != 30 {
		t.Errorf("c = %v, %v; want 30", v, ok)
	}
	if _, ok := c.Get("a"); ok {
		t.Error("a was kept; it was the least recently used")
	}
	c.Purge()
	if _, ok := c.Get("d"); ok || c.Len() != 0 {
		t.Errorf("after Purge: Len %d", c.Len())
	}
}

// TestBoundHolds: a long run of distinct keys keeps exactly the last bound.
func TestBoundHolds(t *testing.T) {
	c := New[int, string](64)
	for i := range 1000 {
		c.Add(i, fmt.Sprint(i))
	}
	if c.Len() != 64 {
		t.Fatalf("Len %d, want 64", c.Len())
	}
	for i := 1000 - 64; i < 1000; i++ {
		if v, ok := c.Get(i); !ok || v != fmt.Sprint(i) {
			t.Fatalf("recent key %d: %q, %v", i, v, ok)
		}
	}
	if _, ok := c.Get(1000 - 65); ok {
		t.Error("an old key was kept")
	}
	if New[int, int](0).bound != 1 {
		t.Error("a bound below 1 is not raised to 1")
	}
}

func TestConcurrent(t *testing.T) {
	c := New[int, int](16)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				c.Add((w*500+i)%40, i)
				c.Get(i % 40)
			}
		}()
	}
	wg.Wait()
	if c.Len() != 16 {
		t.Errorf("Len %d, want 16", c.Len())
	}
}
