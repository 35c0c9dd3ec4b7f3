// Package topk orders candidates by rank without sorting them all: Heap
// hands them out best first, one at a time (a query pops chunks until its
// budget is full), and Best keeps the k best of a stream in O(n log k).
// The rankers of chunks, vectors and tools share it (issue 23).
package topk

// Heap is a binary heap under before: Pop returns the item that before
// puts ahead of all others. before must be a strict weak order.
type Heap[T any] struct {
	items  []T
	before func(a, b T) bool
	// last turns the order around: the item before puts last comes first
	// (Best keeps its worst on top without a closure to allocate).
	last bool
}

// NewHeap arranges items, which it takes over, into a heap in O(n).
func NewHeap[T any](items []T, before func(a, b T) bool) *Heap[T] {
	h := &Heap[T]{items: items, before: before}
	h.init()
	return h
}

func (h *Heap[T]) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Len is the number of items held.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	n := len(h.items)
	if n == cap(h.items) {
		h.grow()
	}
	// Reslicing, not append, keeps escape analysis from moving what h
	// holds (before's closure) to the heap: a caller's Best stays on its
	// stack.
	h.items = h.items[:n+1]
	h.items[n] = x
	h.up(n)
}

// grow doubles the capacity of items.
func (h *Heap[T]) grow() {
	items := make([]T, len(h.items), max(8, 2*cap(h.items)))
	copy(items, h.items)
	h.items = items
}

// Top is the first item, without removing it; the heap must not be empty.
func (h *Heap[T]) Top() T { return h.items[0] }

// Pop removes and returns the first item; the heap must not be empty.
func (h *Heap[T]) Pop() T {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	var zero T
	h.items[n] = zero // let go of what a pointer item holds
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	return top
}

// ReplaceTop puts x in place of the first item and restores the order: a
// Pop and a Push for the price of one sift.
func (h *Heap[T]) ReplaceTop(x T) {
	h.items[0] = x
	h.down(0)
}

// ahead reports whether a comes out of the heap before b.
func (h *Heap[T]) ahead(a, b T) bool {
	if h.last {
		a, b = b, a
	}
	return h.before(a, b) // one call, so ahead inlines into the sifts
}

func (h *Heap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.ahead(h.items[i], h.items[p]) {
			return
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *Heap[T]) down(i int) {
	n := len(h.items)
	for {
		first, l := i, 2*i+1
		if l >= n {
			return
		}
		if h.ahead(h.items[l], h.items[first]) {
			first = l
		}
		if r := l + 1; r < n && h.ahead(h.items[r], h.items[first]) {
			first = r
		}
		if first == i {
			return
		}
		h.items[i], h.items[first] = h.items[first], h.items[i]
		i = first
	}
}

// Best keeps the k best items pushed to it by better: a heap of at most k
// with the worst kept at its top, so a candidate is compared with the
// worst once and most are turned away at that cost.
type Best[T any] struct {
	k      int
	better func(a, b T) bool
	h      Heap[T]
}

// Reset empties b to keep the k best by better (a strict weak order: a
// ranks ahead of b), in buf's array while it has room (buf may be nil). A
// Best keeps nothing until it is Reset.
func (b *Best[T]) Reset(k int, better func(a, b T) bool, buf []T) {
	b.k, b.better = k, better
	b.h = Heap[T]{items: buf[:0], before: better, last: true}
}

// Len is the number of items kept (at most k).
func (b *Best[T]) Len() int { return b.h.Len() }

// Push offers x: it is kept while fewer than k are, or when it is better
// than the worst kept, which it replaces.
func (b *Best[T]) Push(x T) {
	switch {
	case b.k <= 0:
	case len(b.h.items) < b.k:
		b.h.Push(x)
	case b.better(x, b.h.items[0]):
		b.h.ReplaceTop(x)
	}
}

// Worst is the worst item kept once b holds k (full true): Push turns
// away any item that is not better. A caller with many candidates checks
// it first with its own (inlined) comparison, saving Push's call for the
// few that enter.
func (b *Best[T]) Worst() (worst T, full bool) {
	if len(b.h.items) < b.k || b.k <= 0 {
		return worst, b.k <= 0
	}
	return b.h.items[0], true
}

// Items are the items kept, in no useful order (heap order).
func (b *Best[T]) Items() []T { return b.h.items }

// Sorted empties b and returns the items it kept, best first, in its
// array: a heap sort, no allocation.
func (b *Best[T]) Sorted() []T {
	n := len(b.h.items)
	for i := n - 1; i > 0; i-- {
		last := b.h.popKeep()
		b.h.items[:i+1][i] = last // the slot popKeep freed
	}
	out := b.h.items[:n]
	b.h.items = b.h.items[:0]
	return out
}

// popKeep is Pop without clearing the freed slot, which Sorted fills.
func (h *Heap[T]) popKeep() T {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	if n > 0 {
		h.down(0)
	}
	return top
}
