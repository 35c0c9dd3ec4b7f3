package budget

import "math/bits"

// vocab maps token bytes to ranks. Counting is mostly lookups of short pieces in a table of 100k to
// 200k tokens, far larger than a CPU cache, so each lookup should touch one cache line: tokens of
// up to shortMax bytes (most of what text splits into) are packed with their length into a uint64
// and kept in an open-addressing table; longer ones go to a map.
type vocab struct {
	slots []vocabSlot // len is a power of two; key 0 marks an empty slot (a packed key never is 0)
	shift uint        // 64 - log2(len(slots))
	long  map[string]uint32
}

type vocabSlot struct {
	key  uint64
	rank uint32
}

const shortMax = 7

// newVocab makes room for short tokens of at most shortMax bytes and long ones.
func newVocab(short, long int) *vocab {
	// At most two thirds full, so that a probe ends within a slot or two.
	size := 1 << bits.Len(uint(short*3/2))
	return &vocab{
		slots: make([]vocabSlot, size),
		shift: uint(64 - bits.TrailingZeros(uint(size))),
		long:  make(map[string]uint32, long),
	}
}

// pack puts a token of at most shortMax bytes and its length into one word.
func pack(tok string) uint64 {
	k := uint64(len(tok)) << 56
	for i := range len(tok) {
		k |= uint64(tok[i]) << (8 * i)
	}
	return k
}

func (v *vocab) home(k uint64) uint64 { return (k * 0x9e3779b97f4a7c15) >> v.shift }

func (v *vocab) add(tok string, rank uint32) {
	if len(tok) > shortMax {
		v.long[tok] = rank
		return
	}
	k := pack(tok)
	mask := uint64(len(v.slots) - 1)
	for h := v.home(k); ; h = (h + 1) & mask {
		if v.slots[h].key == 0 || v.slots[h].key == k {
			v.slots[h] = vocabSlot{k, rank}
			return
		}
	}
}

func (v *vocab) lookup(tok string) (uint32, bool) {
	if len(tok) == 0 {
		return 0, false
	}
	if len(tok) > shortMax {
		r, ok := v.long[tok]
		return r, ok
	}
	k := pack(tok)
	mask := uint64(len(v.slots) - 1)
	for h := v.home(k); ; h = (h + 1) & mask {
		switch v.slots[h].key {
		case k:
			return v.slots[h].rank, true
		case 0:
			return 0, false
		}
	}
}

// size is the number of tokens held.
func (v *vocab) size() int {
	n := len(v.long)
	for _, s := range v.slots {
		if s.key != 0 {
			n++
		}
	}
	return n
}
