package session_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

func policy(t *testing.T, spec *v1alpha1.ContextRouterSpec) *session.Policy {
	t.Helper()
	p, err := session.NewPolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func phases(ph session.Phase, s *v1alpha1.PhaseSpec) *v1alpha1.ContextRouterSpec {
	ps := &v1alpha1.PhasesSpec{}
	*[]**v1alpha1.PhaseSpec{&ps.Route, &ps.Call, &ps.Interpret, &ps.Answer, &ps.Handoff}[slices.Index(session.Phases, ph)] = s
	return &v1alpha1.ContextRouterSpec{Phases: ps}
}

// explained builds with Explain and returns the pack and its reasons by id.
func explained(t *testing.T, s *session.Session, o session.Options) (*session.Pack, map[string]string) {
	t.Helper()
	o.Explain = true
	p := build(t, s, o)
	why := map[string]string{}
	for _, d := range p.DroppedItems {
		why[d.ID] = d.Reason
	}
	return p, why
}

// expectReason checks that each of ids was left out for reason.
func expectReason(t *testing.T, why map[string]string, reason string, ids []string) {
	t.Helper()
	for _, id := range ids {
		if why[id] != reason {
			t.Errorf("%s: reason %q, want %s", id, why[id], reason)
		}
	}
}

// toolSession: a task, a tool call and its result, an agent message about
// the result, a doc snippet, a fact and an episode.
func toolSession() *session.Session {
	return &session.Session{
		Facts:    []session.Fact{{Key: "region", Value: "eu-west-1"}},
		Episodes: []session.Episode{{ID: "e1", Text: "last week the user asked about backups"}},
		Items: []session.Item{
			{ID: "u1", Kind: session.KindUserTurn, Text: "restore yesterday's backup of the orders database"},
			{ID: "c1", Kind: session.KindToolCall, Text: "backups.list(db=orders)"},
			{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: "orders-2026-03-13 (41 GB), orders-2026-03-12 (40 GB)"},
			{ID: "a1", Kind: session.KindAgentMessage, ParentID: "r1", Text: "The latest backup is orders-2026-03-13."},
			{ID: "d1", Kind: session.KindDocSnippet, Text: "Restores run in a maintenance window."},
			{ID: "p1", Kind: session.KindPlanState, Text: "1. pick the backup 2. restore"},
		},
	}
}

// Each phase takes its default kinds; what it does not take is left out by
// policy, and what hangs off it by closure (api.md §11.2, §11.3 steps 3, 8).
func TestPhaseKinds(t *testing.T) {
	cases := []struct {
		phase        session.Phase
		policy, clos []string // ids left out by policy, by closure
	}{
		{session.PhaseRoute, []string{"c1", "r1", "d1"}, []string{"a1"}},
		{session.PhaseCall, []string{"episode:e1"}, nil},
		{session.PhaseInterpret, []string{"episode:e1"}, nil},
		{session.PhaseAnswer, nil, nil},
		{session.PhaseHandoff, nil, nil},
	}
	for _, c := range cases {
		t.Run(string(c.phase), func(t *testing.T) {
			p, why := explained(t, toolSession(), session.Options{Phase: c.phase})
			expectReason(t, why, "policy", c.policy)
			expectReason(t, why, "closure", c.clos)
			if p.Stats.Dropped.Policy != len(c.policy) || p.Stats.Dropped.Closure != len(c.clos) || len(p.DroppedItems) != len(c.policy)+len(c.clos) {
				t.Errorf("stats %+v, dropped items %+v", p.Stats.Dropped, p.DroppedItems)
			}
		})
	}
	// A router's kinds replace the default; chunks count as doc_snippet.
	spec := phases(session.PhaseRoute, &v1alpha1.PhaseSpec{Kinds: []v1alpha1.PhaseKind{"user_turn", "doc_snippet"}})
	chunks := []engine.Chunk{{Source: "runbooks", Path: "restore.md", Title: "Restore", Content: "restore steps", RelevanceScore: 0.9}}
	p, why := explained(t, toolSession(), session.Options{Phase: session.PhaseRoute, Policy: policy(t, spec), Knowledge: chunks})
	got := ids(p)
	for _, id := range []string{"u1", "d1", "chunk:runbooks:restore.md#0"} {
		if _, ok := got[id]; !ok {
			t.Errorf("%s left out (%s)", id, why[id])
		}
	}
	if len(got) != 3 || why["fact:region"] != "policy" || why["p1"] != "policy" {
		t.Errorf("included %v, reasons %v", got, why)
	}
	// Without a query a route pack has no knowledge by default.
	if p, why := explained(t, toolSession(), session.Options{Phase: session.PhaseRoute, Knowledge: chunks}); p.Sections[4].Items != 0 || why["chunk:runbooks:restore.md#0"] != "policy" {
		t.Errorf("route took a chunk: %+v", p.Sections[4])
	}
}

// maxItemsPerKind keeps the pinned entries first, then the best scored; a
// limit of 0 leaves the kind out; the children of what it left out go by
// closure.
func TestMaxItemsPerKind(t *testing.T) {
	s := &session.Session{Items: []session.Item{{ID: "u0", Kind: session.KindUserTurn, Text: "compare the three quotes"}}}
	for i := range 4 {
		s.Items = append(s.Items,
			session.Item{ID: fmt.Sprint("c", i), Kind: session.KindToolCall, Text: fmt.Sprintf("quotes.get(%d)", i)},
			session.Item{ID: fmt.Sprint("r", i), Kind: session.KindToolResult, ParentID: fmt.Sprint("c", i), Text: fmt.Sprintf("quote %d: %d EUR", i, 100+i), Pinned: i == 0})
	}
	cases := []struct {
		name   string
		limits map[string]v1alpha1.KindLimit
		in     []string
		policy []string
		clos   []string
	}{
		{"two results: the pinned one and the latest", map[string]v1alpha1.KindLimit{"tool_result": 2}, []string{"r0", "r3", "c0", "c3"}, []string{"r1", "r2"}, nil},
		{"no calls: no results either", map[string]v1alpha1.KindLimit{"tool_call": 0}, []string{"u0"}, []string{"c0", "c1", "c2", "c3"}, []string{"r0", "r1", "r2", "r3"}},
		// r0 is pinned, but its call c0 is past the limit: closure.
		{"one call: its result only", map[string]v1alpha1.KindLimit{"tool_call": 1}, []string{"c3", "r3"}, []string{"c0", "c1", "c2"}, []string{"r0", "r1", "r2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pol := policy(t, phases(session.PhaseAnswer, &v1alpha1.PhaseSpec{MaxItemsPerKind: c.limits}))
			p, why := explained(t, s, session.Options{Phase: session.PhaseAnswer, Policy: pol})
			got := ids(p)
			for _, id := range c.in {
				if _, ok := got[id]; !ok {
					t.Errorf("%s left out (%s)", id, why[id])
				}
			}
			expectReason(t, why, "policy", c.policy)
			expectReason(t, why, "closure", c.clos)
		})
	}
}

// A pinned entry of a kind the phase does not take is left out by policy,
// and a pinned child of it by closure.
func TestPinnedChainLeftOutByPolicy(t *testing.T) {
	s := items(
		session.Item{ID: "c0", Kind: session.KindToolCall, Text: "a()"},
		session.Item{ID: "r0", Kind: session.KindToolResult, ParentID: "c0", Text: "1", Pinned: true},
		session.Item{ID: "a0", Kind: session.KindAgentMessage, ParentID: "r0", Text: "it is 1", Pinned: true},
	)
	p, why := explained(t, s, session.Options{Phase: session.PhaseRoute})
	if why["c0"] != "policy" || why["r0"] != "policy" || why["a0"] != "closure" || p.Stats.Included != 0 {
		t.Errorf("reasons %v, stats %+v", why, p.Stats)
	}
}

// The task and items written pinned stay in every phase that takes their
// kind, with their parent chain, exempt from near-duplicate removal and the
// memory cap; a pin that does not fit is counted.
func TestPinned(t *testing.T) {
	filler := filler(120)
	task := session.Item{ID: "task", Kind: session.KindUserTurn, Text: "migrate the billing database to the new cluster before Friday"}
	s := &session.Session{Items: append([]session.Item{task,
		{ID: "c", Kind: session.KindToolCall, Text: "db.size(billing)"},
		{ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: "412 GB"},
		{ID: "note", Kind: session.KindAgentMessage, ParentID: "r", Text: "The database is 412 GB; the copy takes about 3 hours.", Pinned: true},
		{ID: "mem", Kind: session.KindMemoryFact, Text: strings.Repeat("the user prefers a dry run first ", 20), Pinned: true},
		{ID: "dup", Kind: session.KindUserTurn, Text: "Migrate the billing database to the new cluster before Friday!", Pinned: true},
	}, filler...)}
	for _, ph := range session.Phases {
		t.Run(string(ph), func(t *testing.T) {
			p, why := explained(t, s, session.Options{Phase: ph, MaxTokens: 400})
			got := ids(p)
			for _, id := range []string{"task", "mem", "dup"} {
				if it, ok := got[id]; !ok || !it.Pinned {
					t.Errorf("%s: %+v, %v (%s)", id, it, ok, why[id])
				}
			}
			_, hasNote := got["note"]
			if takesResults := ph != session.PhaseRoute; hasNote != takesResults {
				t.Errorf("note included %v (%s)", hasNote, why["note"])
			}
			if hasNote && (!got["c"].Closure || !got["r"].Closure || got["r"].Pinned) {
				t.Errorf("the note's chain: %+v %+v", got["c"], got["r"])
			}
			if mem := got["mem"].Tokens; mem <= p.Stats.MemoryCap {
				t.Errorf("the pinned memory takes %d tokens, under the cap %d: the case proves nothing", mem, p.Stats.MemoryCap)
			}
			if p.Stats.Dropped.Duplicate != 0 || p.Stats.PinnedDropped != 0 {
				t.Errorf("stats %+v", p.Stats)
			}
		})
	}
	// Pins past the budget: the first ones fit, the others are counted.
	p, why := explained(t, s, session.Options{Phase: session.PhaseAnswer, MaxTokens: 40})
	if got := ids(p); len(got) != 2 || !got["task"].Pinned || !got["dup"].Pinned || p.Stats.PinnedDropped != 2 || why["note"] != "budget" || why["mem"] != "budget" {
		t.Errorf("included %v, reasons %v, stats %+v", ids(p), why, p.Stats)
	}
}

// max_tokens raises a budget up to the phase's ceiling and no further.
func TestMaxTokensCeiling(t *testing.T) {
	s := &session.Session{Items: filler(600)}
	pol := policy(t, phases(session.PhaseAnswer, &v1alpha1.PhaseSpec{MaxBudget: ptr[int32](9000)}))
	p := build(t, s, session.Options{Phase: session.PhaseAnswer, Policy: pol, MaxTokens: 9000})
	if p.Budget != 9000 || p.TotalTokens <= session.DefaultBudget(session.PhaseAnswer) {
		t.Errorf("budget %d, %d tokens; want 9000 used past 6000", p.Budget, p.TotalTokens)
	}
	for _, o := range []session.Options{{Phase: session.PhaseAnswer, Policy: pol, MaxTokens: 9001}, {Phase: session.PhaseAnswer, MaxTokens: 6001}} {
		if _, err := session.Build(s, o); err == nil || !strings.Contains(err.Error(), "is above the answer phase's ceiling") {
			t.Errorf("max_tokens %d: %v", o.MaxTokens, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Explain lists every candidate left out, in candidate order, with its
// reason and tokens; bounded; absent without it.
func TestExplain(t *testing.T) {
	s := sessiontest.Bench()
	o := session.Options{Phase: session.PhaseRoute, Query: "invoice status", MaxTokens: 500,
		Access: &engine.Access{MaxSensitivity: v1alpha1.SensitivityInternal, SensitivityAction: v1alpha1.SensitivityActionDrop}}
	s.Items[6].Sensitivity = v1alpha1.SensitivityRestricted
	p, why := explained(t, s, o)
	st := p.Stats.Dropped
	if len(p.DroppedItems) != st.Total() || st.Policy == 0 || st.Budget == 0 || st.Sensitivity == 0 || p.DroppedItemsTruncated {
		t.Fatalf("%d dropped items, stats %+v", len(p.DroppedItems), st)
	}
	count := map[string]int{}
	prev := -1
	order := map[string]int{}
	for i, it := range s.Items {
		order[it.ID] = i
	}
	for _, d := range p.DroppedItems {
		count[d.Reason]++
		if d.Tokens <= 0 {
			t.Errorf("%+v has no tokens", d)
		}
		if i, ok := order[d.ID]; ok {
			if i < prev {
				t.Errorf("%s out of session order", d.ID)
			}
			prev = i
		}
	}
	if want := map[string]int{"budget": st.Budget, "policy": st.Policy, "sensitivity": st.Sensitivity, "duplicate": st.Duplicate, "memory_cap": st.MemoryCap, "closure": st.Closure}; !mapsEqual(count, want) {
		t.Errorf("reasons %v, stats %v", count, want)
	}
	if why[s.Items[6].ID] != "sensitivity" {
		t.Errorf("%s: %q", s.Items[6].ID, why[s.Items[6].ID])
	}
	// Without explain: no list, and no key in the JSON.
	plain := build(t, s, o)
	raw, _ := json.Marshal(plain)
	if plain.DroppedItems != nil || strings.Contains(string(raw), "dropped_items") {
		t.Errorf("dropped_items without explain: %s", raw)
	}
	// Explained and nothing left out: an empty list, not an absent one.
	p, _ = explained(t, items(session.Item{ID: "u", Kind: session.KindUserTurn, Text: "hi"}), session.Options{Phase: session.PhaseAnswer})
	if raw, _ := json.Marshal(p); !strings.Contains(string(raw), `"dropped_items":[]`) || strings.Contains(string(raw), "truncated") {
		t.Errorf("nothing dropped: %s", raw)
	}
	// Past the bound the list stops and says so; the counts stay whole.
	p, _ = explained(t, &session.Session{Items: filler(1500)}, session.Options{Phase: session.PhaseAnswer, MaxTokens: 100})
	if len(p.DroppedItems) != session.MaxDroppedItems || !p.DroppedItemsTruncated || p.Stats.Dropped.Total() <= session.MaxDroppedItems {
		t.Errorf("%d dropped items (truncated %v), %d dropped", len(p.DroppedItems), p.DroppedItemsTruncated, p.Stats.Dropped.Total())
	}
}

func mapsEqual(a, b map[string]int) bool {
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// On random sessions, phases, budgets, policies and clearances, the stats
// account for every candidate (included + dropped == candidates), the
// explained list agrees with them, and every included item has its chain.
func TestPackInvariantsRandom(t *testing.T) {
	kinds := session.Kinds
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 18))
		s := &session.Session{}
		for i := range r.IntN(60) {
			it := session.Item{ID: fmt.Sprint("i", i), Kind: kinds[r.IntN(len(kinds))], Pinned: r.IntN(8) == 0,
				Text: strings.Repeat(fmt.Sprintf("word%d topic%d ", r.IntN(30), r.IntN(5)), 1+r.IntN(40))}
			if i > 0 && r.IntN(3) == 0 {
				it.ParentID = fmt.Sprint("i", r.IntN(i))
			}
			if r.IntN(6) == 0 {
				it.Sensitivity = v1alpha1.SensitivityRestricted
			}
			if it.Kind == session.KindPlanState && r.IntN(2) == 0 {
				it.Metadata = map[string]string{"status": "done"}
			}
			s.Items = append(s.Items, it)
		}
		for i := range r.IntN(5) {
			s.Facts = append(s.Facts, session.Fact{Key: fmt.Sprint("k", i), Value: strings.Repeat("fact value ", 1+r.IntN(20))})
			s.Episodes = append(s.Episodes, session.Episode{ID: fmt.Sprint("e", i), Text: strings.Repeat("episode text ", 1+r.IntN(20))})
		}
		ph := session.Phases[r.IntN(len(session.Phases))]
		spec := &v1alpha1.PhaseSpec{MaxBudget: ptr[int32](20000)}
		if r.IntN(2) == 0 {
			spec.MaxItemsPerKind = map[string]v1alpha1.KindLimit{v1alpha1.PhaseEntryKinds[r.IntN(10)]: v1alpha1.KindLimit(r.IntN(4))}
		}
		if r.IntN(3) == 0 {
			spec.Kinds = []v1alpha1.PhaseKind{v1alpha1.PhaseKind(v1alpha1.PhaseEntryKinds[r.IntN(10)]), "user_turn"}
			if spec.Kinds[0] == "user_turn" {
				spec.Kinds = spec.Kinds[:1]
			}
		}
		o := session.Options{Phase: ph, MaxTokens: []int{0, 50, 300, 12000}[r.IntN(4)], Query: fmt.Sprintf("word%d topic%d", r.IntN(30), r.IntN(5)),
			Policy: policy(t, phases(ph, spec)), Explain: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			o.Access = &engine.Access{MaxSensitivity: v1alpha1.SensitivityConfidential, SensitivityAction: v1alpha1.SensitivityActionRedact}
		}
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			p := build(t, s, o)
			st := p.Stats
			if o.Explain != (p.DroppedItems != nil) || o.Explain && len(p.DroppedItems) != st.Dropped.Total() {
				t.Errorf("explain %v: %d dropped items, %d dropped", o.Explain, len(p.DroppedItems), st.Dropped.Total())
			}
			got := ids(p)
			parent := map[string]string{}
			for _, it := range s.Items {
				parent[it.ID] = it.ParentID
			}
			for id := range got {
				for p := parent[id]; p != ""; p = parent[p] {
					if _, ok := got[p]; !ok {
						t.Errorf("%s included without %s", id, p)
					}
				}
			}
		})
	}
}
