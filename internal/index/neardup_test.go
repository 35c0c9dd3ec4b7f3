package index

import (
	"fmt"
	"testing"
)

func TestNearDuplicates(t *testing.T) {
	// n sets of 10 ids each, disjoint: set k is {10k, …, 10k+9}.
	set := func(k int, change int) []uint32 {
		s := make([]uint32, 10)
		for i := range s {
			s[i] = uint32(10*k + i)
		}
		for i := 0; i < change; i++ {
			s[9-i] = uint32(100000 + 10*k + i) // replace the last ids by new ones
		}
		return s
	}
	// Below pairwiseLimit sets are compared pairwise; past it, through the prefix map.
	for _, n := range []int{3, pairwiseLimit + 8} {
		for _, c := range []struct {
			t      float64
			change int
			dup    bool
		}{
			{1, 0, true},     // the same set
			{1, 1, false},    // J = 9/11
			{0.8, 1, true},   // 0.818 >= 0.8
			{0.85, 1, false}, // 0.818 < 0.85
			{0.5, 3, true},   // J = 7/13 = 0.538
			{0.6, 3, false},
		} {
			t.Run(fmt.Sprintf("%d sets/t=%g/change=%d", n, c.t, c.change), func(t *testing.T) {
				d := NewNearDuplicates(c.t)
				for k := range n {
					d.Add(set(k, 0))
				}
				for _, k := range []int{0, n / 2, n - 1} {
					if got := d.Duplicate(set(k, c.change)); got != c.dup {
						t.Errorf("set %d: duplicate = %v, want %v", k, got, c.dup)
					}
				}
				if d.Duplicate(set(n+5, 0)) || d.Duplicate(nil) {
					t.Error("a new set or an empty one is a duplicate")
				}
			})
		}
	}
}
