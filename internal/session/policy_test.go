package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// The API's list of kindPriorities keys is the item kinds in the order of
// Kinds (the order of a kindWeights row), then episode; the list of
// spec.phases.*.kinds those and fact, in the order of entryKind.
func TestSessionEntryKinds(t *testing.T) {
	want := make([]string, 0, len(Kinds)+1)
	for _, k := range Kinds {
		want = append(want, string(k))
	}
	want = append(want, "episode")
	if strings.Join(v1alpha1.SessionEntryKinds, ",") != strings.Join(want, ",") {
		t.Errorf("v1alpha1.SessionEntryKinds = %v, want %v", v1alpha1.SessionEntryKinds, want)
	}
	if len(kindWeights[0]) != len(want) || weightEpisode != len(want)-1 || slices.Index(Kinds, KindMemoryFact) != weightMemoryFact || slices.Index(Kinds, KindDocSnippet) != weightDocSnippet {
		t.Errorf("a kindWeights row has %d weights (episode at %d) for %d kinds", len(kindWeights[0]), weightEpisode, len(want))
	}
	want = append(want, "fact")
	if strings.Join(v1alpha1.PhaseEntryKinds, ",") != strings.Join(want, ",") || int(kindFact) != len(want)-1 || numEntryKinds != len(want) {
		t.Errorf("v1alpha1.PhaseEntryKinds = %v (fact at %d of %d), want %v", v1alpha1.PhaseEntryKinds, kindFact, numEntryKinds, want)
	}
}

// Phases are the API's phase names, with a budget, a kind priority row
// and default kinds each.
func TestPhases(t *testing.T) {
	var names []string
	for _, p := range Phases {
		names = append(names, string(p))
	}
	if strings.Join(names, ",") != strings.Join(v1alpha1.PhaseNames, ",") || len(Phases) != numPhases || len(v1alpha1.DefaultPhaseBudgets) != numPhases {
		t.Fatalf("Phases %v (%d), the API's %v with %d budgets", names, numPhases, v1alpha1.PhaseNames, len(v1alpha1.DefaultPhaseBudgets))
	}
	for i, p := range Phases {
		if DefaultBudget(p) != int(v1alpha1.DefaultPhaseBudgets[i]) {
			t.Errorf("%s: budget %d", p, DefaultBudget(p))
		}
	}
	if _, err := ParsePhase("plan"); err == nil || err.Error() != `unknown phase "plan": want route, call, interpret, answer or handoff` {
		t.Errorf("ParsePhase: %v", err)
	}
	// The default kinds (api.md §11.2).
	all := []entryKind{weightUserTurn, weightAgentMessage, weightToolCall, weightToolResult, weightDocSnippet, weightMemoryFact, weightPlanState, weightPolicy, weightEpisode, kindFact}
	for _, c := range []struct {
		phase Phase
		out   []entryKind // the kinds it does not take
	}{
		{PhaseRoute, []entryKind{weightToolCall, weightToolResult, weightDocSnippet}},
		{PhaseCall, []entryKind{weightEpisode}},
		{PhaseInterpret, []entryKind{weightEpisode}},
		{PhaseAnswer, nil},
		{PhaseHandoff, nil},
	} {
		set := defaultKinds[slices.Index(Phases, c.phase)]
		for _, k := range all {
			if takes := set&(1<<k) != 0; takes == slices.Contains(c.out, k) {
				t.Errorf("%s takes %s: %v", c.phase, v1alpha1.PhaseEntryKinds[k], takes)
			}
		}
	}
}

// Limit is the one place max_tokens becomes a budget.
func TestLimit(t *testing.T) {
	pol, err := NewPolicy(&v1alpha1.ContextRouterSpec{Phases: &v1alpha1.PhasesSpec{
		Answer: &v1alpha1.PhaseSpec{MaxBudget: ptr[int32](9000)}, Call: &v1alpha1.PhaseSpec{Budget: ptr[int32](500), MaxBudget: ptr[int32](800)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pol       *Policy
		phase     Phase
		maxTokens int
		want      int
		err       string
	}{
		{&defaultPolicy, PhaseAnswer, 0, 6000, ""},
		{&defaultPolicy, PhaseAnswer, 1500, 1500, ""},
		{&defaultPolicy, PhaseAnswer, 6000, 6000, ""},
		{&defaultPolicy, PhaseAnswer, 6001, 0, "max_tokens 6001 is above the answer phase's ceiling 6000 (spec.phases.answer.maxBudget)"},
		{&defaultPolicy, PhaseHandoff, 0, 4000, ""},
		{pol, PhaseAnswer, 9000, 9000, ""},
		{pol, PhaseAnswer, 9001, 0, "max_tokens 9001 is above the answer phase's ceiling 9000 (spec.phases.answer.maxBudget)"},
		{pol, PhaseCall, 0, 500, ""},
		{pol, PhaseCall, 700, 700, ""},
		{pol, PhaseCall, 801, 0, "max_tokens 801 is above the call phase's ceiling 800 (spec.phases.call.maxBudget)"},
		{pol, PhaseAnswer, MaxBudget + 1, 0, "max_tokens is 1000001; it must be between 0 and 1000000"},
		{pol, PhaseAnswer, -1, 0, "max_tokens is -1; it must be between 0 and 1000000"},
		{pol, "plan", 0, 0, `unknown phase "plan"`},
	} {
		got, err := c.pol.Limit(c.phase, c.maxTokens)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s %d: %d, %v; want %d", c.phase, c.maxTokens, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %d: %d, %v; want an error %q", c.phase, c.maxTokens, got, err, c.err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPolicy(t *testing.T) {
	// A policy that weighs plan_state above agent_message changes which
	// item wins a tight budget.
	s := &Session{Items: []Item{
		{ID: "p1", Kind: KindPlanState, Text: "step 2 of 3: compare the fares of the two airlines"},
		{ID: "a1", Kind: KindAgentMessage, Text: "please book the flight to Lisbon on Friday morning"},
	}}
	spec := &v1alpha1.ContextRouterSpec{
		Sessions: v1alpha1.SessionsSpec{Firewall: v1alpha1.FirewallSpec{MaxChars: 150}, DedupThreshold: "0.5"},
		Phases: &v1alpha1.PhasesSpec{Answer: &v1alpha1.PhaseSpec{Budget: ptr[int32](30),
			KindPriorities: map[string]v1alpha1.KindPriority{"agent_message": "0.1", "plan_state": "1"}}},
	}
	pol, err := NewPolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	if pol.Budget(PhaseAnswer) != 30 || pol.Budget(PhaseRoute) != DefaultBudget(PhaseRoute) || pol.FirewallMaxChars() != 150 || pol.DedupThreshold() != 0.5 {
		t.Fatalf("budgets answer %d, route %d, firewall %d, dedup %v", pol.Budget(PhaseAnswer), pol.Budget(PhaseRoute), pol.FirewallMaxChars(), pol.DedupThreshold())
	}
	if def, _ := v1alpha1.ParseSessionDedupThreshold(""); def != DefaultDedupThreshold || defaultPolicy.DedupThreshold() != DefaultDedupThreshold {
		t.Errorf("the API's default threshold is %v, the package's %v", def, DefaultDedupThreshold)
	}
	build := func(t *testing.T, s *Session, o Options) *Pack {
		t.Helper()
		p, err := Build(s, o)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := func(o Options) string {
		p := build(t, s, o)
		if len(p.Items) != 1 {
			t.Fatalf("%d items fit; want 1 (budget %d)", len(p.Items), p.Budget)
		}
		return p.Items[0].ID
	}
	// The defaults (answer: agent_message 0.8, plan_state 0.6) with the same budget.
	if got := first(Options{Phase: PhaseAnswer, MaxTokens: 30}); got != "a1" {
		t.Errorf("default weights: %s fits, want a1", got)
	}
	if got := first(Options{Phase: PhaseAnswer, Policy: pol}); got != "p1" {
		t.Errorf("policy weights: %s fits, want p1", got)
	}
	// The policy's firewall bound applies; the option still wins.
	big := &Session{Items: []Item{{ID: "c", Kind: KindToolCall, Text: "x"}, {ID: "r", Kind: KindToolResult, ParentID: "c", Text: strings.Repeat("line of output\n", 20)}}}
	if p := build(t, big, Options{Phase: PhaseInterpret, Policy: pol}); p.Stats.Firewalled != 1 {
		t.Errorf("a 300-character result under a 150 bound: firewalled %d, want 1", p.Stats.Firewalled)
	}
	if p := build(t, big, Options{Phase: PhaseInterpret}); p.Stats.Firewalled != 0 {
		t.Errorf("under the default bound: firewalled %d, want 0", p.Stats.Firewalled)
	}
	// The threshold applies to near-duplicates and is reported.
	near := &Session{Items: []Item{
		{ID: "a", Kind: KindAgentMessage, Text: "restart the payment service in staging now"},
		{ID: "b", Kind: KindAgentMessage, Text: "restart the payment service in production now"},
	}}
	if p := build(t, near, Options{Phase: PhaseAnswer}); p.Stats.Dropped.Duplicate != 0 || p.Stats.Dedup.Threshold != 0.9 {
		t.Errorf("at 0.9: %+v", p.Stats)
	}
	if p := build(t, near, Options{Phase: PhaseAnswer, Policy: pol, MaxTokens: 30}); p.Stats.Dropped.Duplicate != 1 || p.Stats.Dedup.Threshold != 0.5 {
		t.Errorf("at 0.5: %+v", p.Stats)
	}
	for _, c := range []struct {
		name string
		ph   v1alpha1.PhaseSpec
		want string
	}{
		{"budget", v1alpha1.PhaseSpec{Budget: ptr[int32](0)}, "spec.phases.call.budget: Invalid value: 0: must be between 1 and 1000000"},
		{"kind", v1alpha1.PhaseSpec{KindPriorities: map[string]v1alpha1.KindPriority{"thought": "1"}}, `spec.phases.call.kindPriorities[thought]: Unsupported value: "thought"`},
		{"weight", v1alpha1.PhaseSpec{KindPriorities: map[string]v1alpha1.KindPriority{"policy": "2"}}, `spec.phases.call.kindPriorities[policy]: Invalid value: "2": must be a decimal number from 0 to 1`},
		{"ceiling", v1alpha1.PhaseSpec{MaxBudget: ptr[int32](2999)}, "spec.phases.call.maxBudget: Invalid value: 2999: must be at least the phase's budget, 3000"},
		{"phase kind", v1alpha1.PhaseSpec{Kinds: []v1alpha1.PhaseKind{"chunk"}}, `spec.phases.call.kinds[0]: Unsupported value: "chunk"`},
		{"limit", v1alpha1.PhaseSpec{MaxItemsPerKind: map[string]v1alpha1.KindLimit{"fact": -2}}, "spec.phases.call.maxItemsPerKind[fact]: Invalid value: -2: must be at least 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewPolicy(&v1alpha1.ContextRouterSpec{Phases: &v1alpha1.PhasesSpec{Call: &c.ph}})
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	if _, err := NewPolicy(&v1alpha1.ContextRouterSpec{Sessions: v1alpha1.SessionsSpec{DedupThreshold: "0"}}); err == nil || err.Error() != `spec.sessions.dedupThreshold: "0" is not a decimal greater than 0 and at most 1` {
		t.Errorf("threshold 0: %v", err)
	}
}
