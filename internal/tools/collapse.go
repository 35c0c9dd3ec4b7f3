package tools

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/internal/index"
)

// MaxAlso bounds the near-duplicates a card lists.
const MaxAlso = 20

// groups are the catalog's near-duplicate groups: tools linked by a chain
// of pairs at least as alike as the threshold.
type groups struct {
	of      []int32    // entry -> group, -1 for a tool alike no other
	members [][]uint32 // group -> entries, in (source, id) order
}

// group returns entry i's group, or -1.
func (g *groups) group(i uint32) int32 {
	if g.of == nil {
		return -1
	}
	return g.of[i]
}

// newGroups groups the tools whose term sets (sets, per entry) are at
// least t alike, exactly: identical sets first, by their bytes; then the
// pairs prefix filtering leaves (index.PrefixLen, rarest terms first),
// verified by index.JaccardAtLeast. A tool with no terms is never a
// near-duplicate. tie orders the members.
func newGroups(sets flatSets, t float64, tie []uint32) groups {
	n := len(sets.off) - 1
	// Rank terms rarest first: few tools share a prefix.
	var nTerms int
	for _, id := range sets.ids {
		nTerms = max(nTerms, int(id)+1)
	}
	df := make([]uint32, nTerms)
	for _, id := range sets.ids {
		df[id]++
	}
	order := make([]uint32, nTerms)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		if c := cmp.Compare(df[a], df[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	rank := make([]uint32, nTerms)
	for r, id := range order {
		rank[id] = uint32(r)
	}
	ranked := make([]uint32, len(sets.ids))
	for i, id := range sets.ids {
		ranked[i] = rank[id]
	}
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = int32(i)
	}
	find := func(i int32) int32 {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int32) {
		if ra, rb := find(a), find(b); ra != rb {
			parent[max(ra, rb)] = min(ra, rb)
		}
	}
	same := map[string]int32{}
	posted := make([][]int32, nTerms) // rank -> tools with it in their prefix
	var key []byte
	for i := range n {
		set := ranked[sets.off[i]:sets.off[i+1]]
		if len(set) == 0 {
			continue
		}
		slices.Sort(set)
		key = key[:0]
		for _, r := range set {
			key = binary.LittleEndian.AppendUint32(key, r)
		}
		if j, ok := same[string(key)]; ok {
			union(int32(i), j)
			continue
		}
		same[string(key)] = int32(i)
		prefix := set[:index.PrefixLen(len(set), t)]
		for _, r := range prefix {
			for _, j := range posted[r] {
				if find(int32(i)) != find(j) && index.JaccardAtLeast(set, ranked[sets.off[j]:sets.off[j+1]], t) {
					union(int32(i), j)
				}
			}
		}
		for _, r := range prefix {
			posted[r] = append(posted[r], int32(i))
		}
	}
	size := make([]int32, n)
	for i := range n {
		size[find(int32(i))]++
	}
	g := groups{of: make([]int32, n)}
	byRoot := map[int32]int32{}
	for i := range n {
		g.of[i] = -1
		r := find(int32(i))
		if size[r] < 2 {
			continue
		}
		gi, ok := byRoot[r]
		if !ok {
			gi = int32(len(g.members))
			byRoot[r] = gi
			g.members = append(g.members, nil)
		}
		g.of[i] = gi
		g.members[gi] = append(g.members[gi], uint32(i))
	}
	if len(g.members) == 0 {
		return groups{}
	}
	for _, m := range g.members {
		slices.SortFunc(m, func(a, b uint32) int { return cmp.Compare(tie[a], tie[b]) })
	}
	return g
}

// notNumber returns whether a term id is not made of digits only: version
// and variant numbers do not make a tool another tool.
func (b *builder) notNumber() func(id uint32) bool {
	number := make([]bool, b.n)
	for t, id := range b.dict {
		number[id] = strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }) < 0
	}
	return func(id uint32) bool { return !number[id] }
}
