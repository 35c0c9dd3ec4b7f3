package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// checkGraph verifies the invariants of a choice graph: fan-out at most
// MaxFanout, every allowed tool exactly once and no other, non-empty
// labels unique among siblings, no empty group. It returns the depth.
func checkGraph(t *testing.T, ix *Index, root *Node, allowed []bool) int {
	t.Helper()
	seen := make([]int, ix.Len())
	var walk func(n *Node, path string, depth int) int
	walk = func(n *Node, path string, depth int) int {
		if n.Label == "" {
			t.Errorf("%s: empty label", path)
		}
		if fan := len(n.Children) + len(n.Tools); fan > MaxFanout {
			t.Errorf("%s: fan-out %d", path, fan)
		} else if fan == 0 && depth > 0 {
			t.Errorf("%s: empty group", path)
		}
		labels := map[string]bool{}
		deepest := depth
		for _, c := range n.Children {
			if labels[c.Label] {
				t.Errorf("%s: two children labelled %q", path, c.Label)
			}
			labels[c.Label] = true
			deepest = max(deepest, walk(c, path+"/"+c.Label, depth+1))
		}
		for _, i := range n.Tools {
			seen[i]++
		}
		return deepest
	}
	depth := walk(root, root.Label, 0)
	for i, n := range seen {
		want := 1
		if allowed != nil && !allowed[i] {
			want = 0
		}
		if n != want {
			t.Errorf("tool %d (%s) appears %d times, want %d", i, ix.Entry(i).Tool.ID(), n, want)
		}
	}
	return depth
}

// dump renders a graph with its tools, to compare two builds.
func dump(ix *Index, n *Node) string {
	var b strings.Builder
	var walk func(*Node, string)
	walk = func(n *Node, indent string) {
		fmt.Fprintf(&b, "%s%s\n", indent, n.Label)
		for _, c := range n.Children {
			walk(c, indent+"  ")
		}
		for _, i := range n.Tools {
			fmt.Fprintf(&b, "%s  - %s/%s\n", indent, ix.Entry(i).Source, ix.Entry(i).Tool.ID())
		}
	}
	walk(n, "")
	return b.String()
}

func flat(n int, desc func(i int) string) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{Source: "s", Tool: v1alpha1.Tool{Name: fmt.Sprintf("tool_%04d", i), Description: desc(i)}}
	}
	return out
}

func TestGraphInvariants(t *testing.T) {
	big := genCatalog(10000, 1)
	sparse := make([]bool, len(big))
	for i := range sparse {
		sparse[i] = i%100 == 0
	}
	for _, tt := range []struct {
		name     string
		entries  []Entry
		allowed  []bool
		maxDepth int
	}{
		{"empty", nil, nil, 0},
		{"five flat tools", flat(5, func(int) string { return "Do a thing." }), nil, 0},
		{"exactly MaxFanout flat tools", flat(MaxFanout, func(i int) string { return fmt.Sprintf("Thing %d.", i) }), nil, 0},
		{"one over MaxFanout", flat(MaxFanout+1, func(i int) string { return fmt.Sprintf("Thing number%d.", i) }), nil, 3},
		{"identical descriptions fall back to ranges", flat(1000, func(int) string { return "Same words." }), nil, 3},
		{"no words at all", flat(450, func(int) string { return "—" }), nil, 3},
		{"all denied", flat(30, func(int) string { return "x" }), make([]bool, 30), 0},
		{"generated 500", genCatalog(500, 2), nil, 8},
		{"generated 10,000", big, nil, 12},
		{"generated 10,000, 1% allowed", big, sparse, 8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ix := NewIndex(tt.entries, Options{})
			g := ix.Graph(tt.allowed)
			if depth := checkGraph(t, ix, g, tt.allowed); depth > tt.maxDepth {
				t.Errorf("depth %d, want at most %d", depth, tt.maxDepth)
			}
			// Deterministic: a second index over the same entries gives the
			// same graph, tools included.
			if a, b := dump(ix, g), dump(NewIndex(tt.entries, Options{}), NewIndex(tt.entries, Options{}).Graph(tt.allowed)); a != b {
				t.Errorf("two builds differ")
			}
		})
	}
}

func TestGraphGroupsByNamespace(t *testing.T) {
	ix := NewIndex(billing, Options{})
	got := dump(ix, ix.Graph(nil))
	want := `tools
  billing
    invoices
      - src/billing.invoices.create_invoice
      - src/billing.invoices.list_invoices
    payments
      - src/billing.payments.refundPayment
  crm
    contacts
      - src/crm.contacts.get-contact
  - src/web_search
`
	if got != want {
		t.Errorf("graph:\n%s\nwant:\n%s", got, want)
	}
	// Denied tools leave no trace, not even their namespace.
	g := ix.Graph([]bool{true, true, false, true, false})
	if d := dump(ix, g); strings.Contains(d, "payments") || strings.Contains(d, "crm") {
		t.Errorf("graph shows namespaces of denied tools:\n%s", d)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"label":"tools","children":[{"label":"billing","children":[{"label":"invoices"}]}]}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

func TestGraphSplitsBySimilarity(t *testing.T) {
	// 40 tools in one namespace about two subjects: the split keeps each
	// subject together and names the groups by their words.
	var entries []Entry
	for i := range 20 {
		entries = append(entries,
			tool("ops", fmt.Sprintf("pod_tool_%02d", i), fmt.Sprintf("Restart a kubernetes pod in cluster %d.", i)),
			tool("ops", fmt.Sprintf("mail_tool_%02d", i), fmt.Sprintf("Send an email newsletter to list %d.", i)))
	}
	ix := NewIndex(entries, Options{})
	g := ix.Graph(nil)
	checkGraph(t, ix, g, nil)
	ops := g.Children[0]
	if ops.Label != "ops" || len(ops.Tools) != 0 {
		t.Fatalf("ops node: %s", dump(ix, ops))
	}
	subject := func(i int) string { return ix.Entry(i).Tool.Name[:3] }
	var labels []string
	for _, c := range ops.Children {
		labels = append(labels, c.Label)
		var walk func(*Node) []int
		walk = func(n *Node) []int {
			out := slices.Clone(n.Tools)
			for _, c := range n.Children {
				out = append(out, walk(c)...)
			}
			return out
		}
		tools := walk(c)
		for _, i := range tools {
			if subject(i) != subject(tools[0]) {
				t.Errorf("group %q mixes %s and %s", c.Label, ix.Entry(tools[0]).Tool.Name, ix.Entry(i).Tool.Name)
			}
		}
	}
	joined := strings.Join(labels, " | ")
	for _, w := range []string{"pod", "email"} {
		if !strings.Contains(joined, w) {
			t.Errorf("labels %q lack %q", joined, w)
		}
	}
}

func TestRangeLabel(t *testing.T) {
	for _, tt := range []struct {
		first, last, want string
	}{
		{"apple", "fig", "a–f"},
		{"create_a", "create_m", "create_a–create_m"},
		{"same", "same", "same"},
		{"ab", "abc", "ab–abc"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			if got := rangeLabel([]member{{key: tt.first}, {key: tt.last}}); got != tt.want {
				t.Errorf("rangeLabel(%s, %s) = %q, want %q", tt.first, tt.last, got, tt.want)
			}
		})
	}
}
