// Package tools shortlists the tools of a snapshot for a question: a flat
// index over every tool (name, namespace, description, tags, examples) that
// a query searches among the tools the agent may use, and the choice graph
// for browsing a catalog. Pure Go, no Kubernetes client.
package tools

import (
	"cmp"
	"slices"
	"strings"
	"unicode"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/index"
)

// MaxTools bounds the tools of one index (the entry index must fit the
// index's group numbers).
const MaxTools = 1 << 16

// Entry is one tool of a source, as a snapshot holds it.
type Entry struct {
	// Source is the ContextSource's name.
	Source string
	// Tool is defaulted and valid.
	Tool v1alpha1.Tool
}

// Options tune the ranking; the zero value is the tuned default.
type Options struct{}

// Index ranks tools. It is immutable and safe for concurrent use.
type Index struct {
	entries []Entry
	ix      *index.Index
}

// NewIndex indexes entries (at most MaxTools). Hits refer to entries by
// their position in this slice.
func NewIndex(entries []Entry, _ Options) *Index {
	b := index.NewBuilder(index.DefaultParams, false)
	for i := range entries {
		t := &entries[i].Tool
		title := nameWords(t.Name) + " " + strings.ReplaceAll(t.Namespace, ".", " ")
		body := t.Description + "\n" + strings.Join(t.Tags, " ") + "\n" + strings.Join(t.Examples, "\n")
		b.Add(uint16(i), title, body)
	}
	return &Index{entries: entries, ix: b.Build()}
}

// Len is the number of tools.
func (ix *Index) Len() int { return len(ix.entries) }

// Entry returns tool i.
func (ix *Index) Entry(i int) *Entry { return &ix.entries[i] }

// Hit is a ranked tool.
type Hit struct {
	// Entry is the tool's position in the entries given to NewIndex.
	Entry int
	// Score is the ranking score (higher is better).
	Score float64
	// Confidence in [0, 1] says how sure the ranking is that this tool fits.
	Confidence float64
}

// Search returns at most k tools for the question, best first, among those
// allowed (allowed[i] for entry i; nil allows every tool). Ties are broken
// by source, then id. Tools with no evidence for the question are left out.
func (ix *Index) Search(query string, k int, allowed []bool) []Hit {
	if allowed == nil {
		allowed = make([]bool, len(ix.entries))
		for i := range allowed {
			allowed[i] = true
		}
	}
	q := ix.ix.NewQuery(query, false)
	raw := ix.ix.BM25(nil, q, allowed)
	hits := make([]Hit, len(raw))
	total := 0.0
	for i, h := range raw {
		hits[i] = Hit{Entry: int(ix.ix.Group(h.Doc)), Score: h.Score}
		total += h.Score
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		ea, eb := &ix.entries[a.Entry], &ix.entries[b.Entry]
		if c := cmp.Compare(ea.Source, eb.Source); c != 0 {
			return c
		}
		return cmp.Compare(ea.Tool.ID(), eb.Tool.ID())
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	for i := range hits {
		hits[i].Confidence = hits[i].Score / total
	}
	return hits
}

// nameWords splits a tool name into words: create_invoice, createInvoice
// and create-invoice all give "create invoice".
func nameWords(name string) string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range name {
		switch {
		case r == '_' || r == '-':
			b.WriteByte(' ')
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

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

// Graph builds the choice graph of the allowed tools (nil: all): grouped
// by namespace level, a group of more than MaxFanout members split by
// similarity, then alphabetically.
func (ix *Index) Graph(allowed []bool) *Node {
	root := &Node{Label: "tools"}
	for i := range ix.entries {
		if allowed == nil || allowed[i] {
			root.Tools = append(root.Tools, i)
		}
	}
	return root
}
