package tools

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/internal/index"
)

// Node is a node of the choice graph: a labelled group of tools and
// subgroups.
type Node struct {
	Label    string  `json:"label"`
	Children []*Node `json:"children,omitempty"`
	// Tools are entries of the index.
	Tools []int `json:"-"`
}

// MaxFanout bounds the children plus tools of a graph node.
const MaxFanout = 20

// labelTerms is how many words a similarity group's label has.
const labelTerms = 2

// Graph builds the choice graph of the allowed tools (nil: all): grouped
// by namespace level, a group of more than MaxFanout members split by
// similarity, then alphabetically. Every allowed tool is in exactly one
// node; children are ordered by label, tools by name.
func (ix *Index) Graph(allowed []bool) *Node {
	root := &Node{Label: "tools"}
	type ns struct {
		node *Node
		kids map[string]*ns
	}
	top := &ns{node: root, kids: map[string]*ns{}}
	for i := range ix.entries {
		if allowed != nil && (i >= len(allowed) || !allowed[i]) {
			continue
		}
		at := top
		if n := ix.entries[i].Tool.Namespace; n != "" {
			for _, seg := range strings.Split(n, ".") {
				next, ok := at.kids[seg]
				if !ok {
					next = &ns{node: &Node{Label: seg}, kids: map[string]*ns{}}
					at.kids[seg] = next
					at.node.Children = append(at.node.Children, next.node)
				}
				at = next
			}
		}
		at.node.Tools = append(at.node.Tools, i)
	}
	ix.bound(root)
	return root
}

// member is a tool or a subgroup of a node being split.
type member struct {
	node *Node // nil for a tool
	tool int
	key  string   // sort key: the name or label, lower-cased
	set  []uint32 // sorted term ids
}

// bound sorts a node's members and splits the node, bottom up, until no
// node has more than MaxFanout of them.
func (ix *Index) bound(n *Node) {
	for _, c := range n.Children {
		ix.bound(c)
	}
	ms := make([]member, 0, len(n.Children)+len(n.Tools))
	for _, c := range n.Children {
		ms = append(ms, member{node: c, key: strings.ToLower(c.Label)})
	}
	for _, t := range n.Tools {
		ms = append(ms, member{tool: t, key: strings.ToLower(ix.entries[t].Tool.Name)})
	}
	ix.sortMembers(ms)
	if len(ms) > MaxFanout {
		// Subgroups are namespaces: people find them by name, so they are
		// cut into alphabetical ranges; tools are grouped by similarity.
		// Tools get at least half the places when there are both.
		var groups, tools []member
		for _, m := range ms {
			if m.node != nil {
				groups = append(groups, m)
			} else {
				m.set = ix.ix.set(m.tool)
				tools = append(tools, m)
			}
		}
		tools = ix.partition(tools, MaxFanout-min(len(groups), MaxFanout/2), false)
		groups = ix.partition(groups, MaxFanout-len(tools), true)
		ms = append(groups, tools...)
		ix.sortMembers(ms)
	}
	n.Children, n.Tools = n.Children[:0], n.Tools[:0]
	for _, m := range ms {
		if m.node != nil {
			n.Children = append(n.Children, m.node)
		} else {
			n.Tools = append(n.Tools, m.tool)
		}
	}
	uniqueLabels(n.Children)
}

// sortMembers orders members by key, then tools before groups, then by
// (source, id).
func (ix *Index) sortMembers(ms []member) {
	slices.SortStableFunc(ms, func(a, b member) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		if (a.node == nil) != (b.node == nil) {
			if a.node == nil {
				return -1
			}
			return 1
		}
		if a.node == nil {
			return cmp.Compare(ix.tie[a.tool], ix.tie[b.tool])
		}
		return 0
	})
}

// partition groups sorted members into at most limit members: by
// similarity (farthest-first seeds, nearest assignment by Jaccard of term
// sets) unless that leaves one group with most of them, otherwise (or
// when byName) into alphabetical ranges. A group becomes a node, split
// again while it has more than MaxFanout members; a group of one stays a
// member.
func (ix *Index) partition(ms []member, limit int, byName bool) []member {
	if len(ms) <= limit {
		return ms
	}
	var groups [][]member
	if !byName {
		groups = similarGroups(ms, min(limit, max(2, int(math.Ceil(math.Sqrt(float64(len(ms))))))))
	}
	if groups == nil {
		byName = true
		groups = ranges(ms, limit)
	}
	out := make([]member, 0, len(groups))
	for _, g := range groups {
		if len(g) == 1 {
			out = append(out, g[0])
			continue
		}
		label := rangeLabel(g)
		if !byName {
			label = ix.similarLabel(g, ms)
		}
		node := &Node{Label: label}
		for _, m := range ix.partition(g, MaxFanout, byName) {
			if m.node != nil {
				node.Children = append(node.Children, m.node)
			} else {
				node.Tools = append(node.Tools, m.tool)
			}
		}
		uniqueLabels(node.Children)
		out = append(out, member{node: node, key: strings.ToLower(label)})
	}
	ix.sortMembers(out)
	return out
}

// sameTopic is the Jaccard similarity from which a member is taken to be
// about a seed's subject: no seed is chosen that close to another.
const sameTopic = 0.5

// similarGroups splits sorted members into at most k groups: seeds chosen
// farthest first (the member with the most terms, then each time the
// member least like every seed so far, while it is less than sameTopic
// like them; ties to the earlier member), every other member joined to the
// seed it is most like. It returns nil when the split does
// not divide the members: fewer than two distinct seeds, or one group with
// more than half of them (and more than MaxFanout).
func similarGroups(ms []member, k int) [][]member {
	first := 0
	for i := range ms {
		if len(ms[i].set) > len(ms[first].set) {
			first = i
		}
	}
	seeds := []int{first}
	isSeed := make([]bool, len(ms))
	isSeed[first] = true
	nearest := make([]float64, len(ms)) // best Jaccard to a seed so far
	owner := make([]int, len(ms))       // that seed's group
	for i := range ms {
		nearest[i] = index.Jaccard(ms[i].set, ms[first].set)
	}
	for len(seeds) < k {
		next := -1
		for i := range ms {
			if !isSeed[i] && (next < 0 || nearest[i] < nearest[next]) {
				next = i
			}
		}
		if next < 0 || nearest[next] >= sameTopic {
			break // what is left is like a seed already: no new subject
		}
		seeds = append(seeds, next)
		isSeed[next] = true
		g := len(seeds) - 1
		for i := range ms {
			if j := index.Jaccard(ms[i].set, ms[next].set); j > nearest[i] {
				nearest[i], owner[i] = j, g
			}
		}
	}
	if len(seeds) < 2 {
		return nil
	}
	groups := make([][]member, len(seeds))
	for g, s := range seeds {
		owner[s] = g
	}
	for i := range ms {
		groups[owner[i]] = append(groups[owner[i]], ms[i])
	}
	for _, g := range groups {
		if len(g) > MaxFanout && 2*len(g) > len(ms) {
			return nil
		}
	}
	return groups
}

// ranges cuts sorted members into runs of equal size: as few runs of at
// most MaxFanout as fit in limit, at least two.
func ranges(ms []member, limit int) [][]member {
	parts := min(limit, max(2, (len(ms)+MaxFanout-1)/MaxFanout))
	size := (len(ms) + parts - 1) / parts
	var out [][]member
	for lo := 0; lo < len(ms); lo += size {
		out = append(out, ms[lo:min(lo+size, len(ms))])
	}
	return out
}

// rangeLabel names a run of sorted members by its first and last keys,
// cut one character past their common prefix: "a–f", "cre–del".
func rangeLabel(g []member) string {
	a, b := []rune(g[0].key), []rune(g[len(g)-1].key)
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	if p == len(a) && p == len(b) {
		return string(a)
	}
	return string(a[:min(p+1, len(a))]) + "–" + string(b[:min(p+1, len(b))])
}

// similarLabel names a similarity group by its most distinctive terms:
// frequent in the group, rare among all the members being split.
func (ix *Index) similarLabel(g, all []member) string {
	inAll := map[uint32]int{}
	for _, m := range all {
		for _, t := range m.set {
			inAll[t]++
		}
	}
	// Name words count twice: they say what a tool does most directly.
	inGroup := map[uint32]int{}
	var names []uint32
	for _, m := range g {
		for _, t := range m.set {
			inGroup[t]++
		}
		names = ix.ix.queryTerms(names[:0], nameWords(ix.entries[m.tool].Tool.Name), nil)
		for _, t := range names {
			inGroup[t]++
		}
	}
	type scored struct {
		word  string
		score float64
	}
	var cand []scored
	for t, c := range inGroup {
		if c < 2 {
			continue // a word of one member says nothing of the group
		}
		idf := math.Log(float64(len(all)) / float64(max(inAll[t], 1)))
		cand = append(cand, scored{ix.ix.surface[t], float64(c) * idf})
	}
	slices.SortFunc(cand, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.word, b.word)
	})
	var words []string
	for _, c := range cand {
		if c.score <= 0 || slices.Contains(words, c.word) {
			continue
		}
		words = append(words, c.word)
		if len(words) == labelTerms {
			break
		}
	}
	if len(words) == 0 {
		return rangeLabel(g)
	}
	return strings.Join(words, ", ")
}

// uniqueLabels numbers siblings that share a label: "invoice, refund (2)".
func uniqueLabels(nodes []*Node) {
	seen := map[string]int{}
	for _, n := range nodes {
		seen[n.Label]++
		if c := seen[n.Label]; c > 1 {
			n.Label = fmt.Sprintf("%s (%d)", n.Label, c)
		}
	}
}
