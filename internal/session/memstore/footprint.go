package memstore

import (
	"container/list"
	"math/bits"
	"unsafe"

	"github.com/contextrouter/contextrouter/internal/session"
)

// The embedded store's MaxBytes bounds the heap its sessions take, not the
// bytes of their texts: an item of one character costs some 160 bytes of
// heap (its struct in the session's slice, its strings), one with 32
// metadata pairs 3 KiB (a Go map of 64 slots). Counting only the texts let a
// store take 30 to 70 times its bound (issue 22). The estimate below follows
// Go's layout: struct sizes, every string and slice backing array rounded as
// the allocator rounds it, maps by their groups of slots, and the store's own
// per-session bookkeeping. TestMemStoreHeapWithinMaxBytes holds it to the
// heap measured after a GC.

var (
	itemSize      = int64(unsafe.Sizeof(session.Item{}))
	factSize      = int64(unsafe.Sizeof(session.Fact{}))
	episodeSize   = int64(unsafe.Sizeof(session.Episode{}))
	stringSize    = int64(unsafe.Sizeof(""))
	memSessionSz  = int64(unsafe.Sizeof(memSession{}))
	listElemSize  = int64(unsafe.Sizeof(list.Element{}))
	stringMapSlot = 2 * stringSize // a metadata entry: key and value headers
)

const (
	// refSlot is an entry of memSession.refs: a SHA-256 digest and an int32.
	refSlot = 32 + 4
	// ptrMapSlot is an entry of the store's indexes: a session id and a pointer.
	ptrMapSlot = 16 + 8
	// mapHeader is a map's own struct; mapTable the table and directory a
	// map of more than 8 entries adds.
	mapHeader = 48
	mapTable  = 64
)

// allocBytes is the heap block the allocator gives a request of n bytes:
// small ones rounded up to a size class (8-byte steps to 16, 16-byte steps
// to 128, then 8 classes per doubling, as Go's classes are spaced), large
// ones to 8 KiB pages.
func allocBytes(n int64) int64 {
	roundUp := func(n, step int64) int64 { return (n + step - 1) / step * step }
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return roundUp(n, 8)
	case n <= 128:
		return roundUp(n, 16)
	case n <= 32<<10:
		return roundUp(n, 1<<(bits.Len64(uint64(n-1))-4))
	}
	return roundUp(n, 8<<10)
}

// mapBytes is a Go map of n entries of slot bytes each, grown by inserts:
// up to 8 entries one group of 8 slots; past that, tables of a power of two
// slots kept at most 7/8 full. A group is its slots and an 8-byte control word.
func mapBytes(n, slot int64) int64 {
	if n <= 8 {
		return mapHeader + allocBytes(8+8*slot)
	}
	slots := int64(16)
	for slots*7/8 < n {
		slots *= 2
	}
	return mapHeader + mapTable + allocBytes(slots/8*(8+8*slot))
}

// itemHeap is what an item holds apart from its struct, which is counted
// with the slice holding it: its strings (a decoder allocates each, the kind
// too), tags and metadata. Strings under 16 bytes share 16-byte blocks in
// Go's allocator, so rounding them to 8 bytes errs on the safe side.
func itemHeap(it *session.Item) int64 {
	n := allocBytes(int64(len(it.ID))) + allocBytes(int64(len(it.Kind))) + allocBytes(int64(len(it.Text))) +
		allocBytes(int64(len(it.ParentID))) + allocBytes(int64(len(it.Sensitivity)))
	if len(it.Tags) > 0 {
		// commit clips the backing array to the tags.
		n += allocBytes(int64(len(it.Tags)) * stringSize)
		for _, t := range it.Tags {
			n += allocBytes(int64(len(t)))
		}
	}
	if it.Metadata != nil {
		n += mapBytes(int64(len(it.Metadata)), stringMapSlot)
		for k, v := range it.Metadata {
			n += allocBytes(int64(len(k))) + allocBytes(int64(len(v)))
		}
	}
	return n
}

// heapUse is the heap a stored session takes, as the store counts it
// against MaxBytes.
type heapUse struct {
	total int64
	// items and episodes are the own heap (itemHeap) of the items and
	// episodes held, without the slices holding them: both only grow by
	// appending, so a write counts its new entries alone.
	items, episodes int64
	// results counts tool results: each may be an entry of the session's
	// digest index (a repeated text is one entry; counting it twice errs on
	// the safe side).
	results int64
}

// grown is u after the session old of id and owner became next (Merge's
// result on old: items and episodes appended; facts, which a write may
// replace, are counted anew).
func (u heapUse) grown(id, owner string, old, next *session.Session) heapUse {
	for i := len(old.Items); i < len(next.Items); i++ {
		it := &next.Items[i]
		u.items += itemHeap(it)
		if it.Kind == session.KindToolResult {
			u.results++
		}
	}
	for _, e := range next.Episodes[len(old.Episodes):] {
		u.episodes += allocBytes(int64(len(e.ID))) + allocBytes(int64(len(e.Text)))
	}
	var facts int64
	for _, f := range next.Facts {
		facts += allocBytes(int64(len(f.Key))) + allocBytes(int64(len(f.Value)))
	}
	u.total = sessionOverhead(id, owner) +
		allocBytes(int64(cap(next.Items))*itemSize) + u.items +
		allocBytes(int64(cap(next.Facts))*factSize) + facts +
		allocBytes(int64(cap(next.Episodes))*episodeSize) + u.episodes
	if u.results > 0 {
		u.total += mapBytes(u.results, refSlot)
	}
	return u
}

// sessionOverhead is the store's bookkeeping of one session: its
// memSession, its place in the idle list, its entries in the two indexes
// (sessions by id and by agent; a map entry costs about twice its slot,
// tables being half to 7/8 full), the by-agent map its owner may have for
// it alone, and its id and owner strings.
func sessionOverhead(id, owner string) int64 {
	return allocBytes(memSessionSz) + allocBytes(listElemSize) + 2*2*ptrMapSlot + mapBytes(1, ptrMapSlot) +
		allocBytes(int64(len(id))) + allocBytes(int64(len(owner)))
}
