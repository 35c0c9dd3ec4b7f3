package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// The pin rule's pure parts: the task, items written pinned, and what a
// handoff pins (api.md §11.2).
func TestPinRule(t *testing.T) {
	items := []Item{
		{ID: "p0", Kind: KindPolicy, Text: "be kind"},
		{ID: "u1", Kind: KindUserTurn, Text: "the task"},
		{ID: "open", Kind: KindPlanState, Text: "step 1", Metadata: map[string]string{"status": "in progress"}},
		{ID: "nostatus", Kind: KindPlanState, Text: "step 2"},
		{ID: "done", Kind: KindPlanState, Text: "step 0", Metadata: map[string]string{"status": " Done "}},
		{ID: "cancelled", Kind: KindPlanState, Text: "step x", Metadata: map[string]string{"status": "CANCELLED"}},
		{ID: "tagged", Kind: KindAgentMessage, Text: "we use the blue cluster", Tags: []string{"infra", "decision"}},
		{ID: "meta", Kind: KindMemoryFact, Text: "rollback first", Metadata: map[string]string{"decision": "yes"}},
		{ID: "emptymeta", Kind: KindMemoryFact, Text: "x", Metadata: map[string]string{"decision": ""}},
		{ID: "written", Kind: KindDocSnippet, Text: "keep me", Pinned: true},
		{ID: "c1", Kind: KindToolCall, Text: "logs()"},
		{ID: "r1", Kind: KindToolResult, ParentID: "c1", Text: "big"},
	}
	for i := range 8 {
		kind := KindUserTurn
		if i%2 == 1 {
			kind = KindAgentMessage
		}
		items = append(items, Item{ID: fmt.Sprint("t", i), Kind: kind, Text: "turn"})
		if i == 5 {
			items = append(items, Item{ID: "late-call", Kind: KindToolCall, Text: "x()"})
		}
	}
	// In a handoff: r1 is shown as an artifact; t2..t7 are the last six turns.
	handoff := map[string]bool{"u1": true, "open": true, "nostatus": true, "tagged": true, "meta": true, "written": true, "r1": true,
		"t2": true, "t3": true, "t4": true, "t5": true, "t6": true, "t7": true}
	other := map[string]bool{"u1": true, "written": true}
	for _, c := range []struct {
		name    string
		handoff bool
		want    map[string]bool
	}{{"answer", false, other}, {"handoff", true, handoff}} {
		t.Run(c.name, func(t *testing.T) {
			r := newPinRule(items, c.handoff)
			for i := range items {
				it := &items[i]
				if got := r.pinned(i, it, it.ID == "r1"); got != c.want[it.ID] {
					t.Errorf("%s pinned %v, want %v", it.ID, got, c.want[it.ID])
				}
			}
		})
	}
	// No user turn: no task; fewer turns than six: all of them.
	r := newPinRule([]Item{{ID: "a", Kind: KindAgentMessage}, {ID: "p", Kind: KindPolicy}}, true)
	if r.task != -1 || r.lastTurns != 0 {
		t.Errorf("task %d, last turns from %d; want -1, 0", r.task, r.lastTurns)
	}
}

// The evidence rule: in interpret and answer a tool result's recency is its
// place among the tool results; elsewhere, among all items.
func TestEvidenceRule(t *testing.T) {
	items := []Item{
		{ID: "r1", Kind: KindToolResult}, {ID: "u", Kind: KindUserTurn}, {ID: "r2", Kind: KindToolResult},
		{ID: "a", Kind: KindAgentMessage}, {ID: "b", Kind: KindAgentMessage},
	}
	for _, c := range []struct {
		phase Phase
		want  []float64
	}{
		{PhaseAnswer, []float64{0.5, 0.4, 1, 0.8, 1}},
		{PhaseInterpret, []float64{0.5, 0.4, 1, 0.8, 1}},
		{PhaseCall, []float64{0.2, 0.4, 0.6, 0.8, 1}},
		{PhaseRoute, []float64{0.2, 0.4, 0.6, 0.8, 1}},
		{PhaseHandoff, []float64{0.2, 0.4, 0.6, 0.8, 1}},
	} {
		r := newEvidenceRule(items, c.phase)
		for i := range items {
			if got := r.recency(i, items[i].Kind); got != c.want[i] {
				t.Errorf("%s: recency of %s %v, want %v", c.phase, items[i].ID, got, c.want[i])
			}
		}
	}
}

// A word verbatim says is its own term, as relevance assumes; one of
// letters only is not always.
func TestVerbatimTerms(t *testing.T) {
	for _, c := range []struct {
		word     string
		verbatim bool
	}{{"0042", true}, {"7", true}, {"v2", true}, {"x86", true}, {"café", true}, {"running", false}, {"the", false}} {
		if got := verbatim([]byte(c.word)); got != c.verbatim {
			t.Errorf("verbatim(%q) = %v", c.word, got)
		}
		if term, ok := tokenize.Term(c.word); c.verbatim && (!ok || term != c.word) {
			t.Errorf("tokenize.Term(%q) = %q, %v; want the word itself", c.word, term, ok)
		}
	}
	// The relevance of a text is that of its terms, numbers included, and
	// of the terms shown of it.
	var b packBuild
	if err := b.init(&Session{}, Options{Phase: PhaseAnswer, Query: "error 0042 running"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text, shown string
		want        float64
	}{
		{"migration 0042 failed", "", 1.0 / 3},
		{"ERROR: 0042 is still RUNNING", "", 1},
		{"nothing here 42", "", 0},
		{"nothing here 42", "an error summary", 1.0 / 3},
		{"the job is running", "errors: 1; code 0042", 1},
		{"Émile ran", "", 0},
	} {
		if got := b.relevance(c.text, b.termIDs(c.shown)); got != c.want {
			t.Errorf("relevance(%q, shown %q) = %v, want %v", c.text, c.shown, got, c.want)
		}
	}
}

// relevance passes over a word whose first byte no query term has: a term starts
// with its word's first byte. Words whose stems change most, and the
// stemmer's special forms.
func TestTermFirstByte(t *testing.T) {
	words := strings.Fields(`skies dying lying tying idly gently ugly early only singly news howe atlas cosmos bias andes
		yearly youth yelling caused remedy remedies happily generously relational conditional agreed feed bled sing
		ties dies cries flies apply applying yttrium ypsilanti ionization eclipse aaron zzz café naïve über 2026 x86 v2`)
	for _, w := range words {
		if term, ok := tokenize.Term(w); ok && term[0] != w[0] {
			t.Errorf("tokenize.Term(%q) = %q: its first byte differs", w, term)
		}
	}
}
