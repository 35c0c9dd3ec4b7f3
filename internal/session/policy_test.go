package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// The API's list of kindPriorities keys is the item kinds in the order of
// Kinds (the order of a kindWeights row), then episode.
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
}

func ptr[T any](v T) *T { return &v }

func TestPolicy(t *testing.T) {
	// Two facts compete for the answer phase's memory; a policy that weighs
	// plan_state above user_turn changes which item wins a tight budget.
	s := &Session{Items: []Item{
		{ID: "u1", Kind: KindUserTurn, Text: "please book the flight to Lisbon on Friday morning"},
		{ID: "p1", Kind: KindPlanState, Text: "step 2 of 3: compare the fares of the two airlines"},
	}}
	spec := &v1alpha1.ContextRouterSpec{
		Sessions: v1alpha1.SessionsSpec{Firewall: v1alpha1.FirewallSpec{MaxChars: 150}},
		Phases: &v1alpha1.PhasesSpec{Answer: &v1alpha1.PhaseSpec{Budget: ptr[int32](30),
			KindPriorities: map[string]v1alpha1.KindPriority{"user_turn": "0.1", "plan_state": "1"}}},
	}
	pol, err := NewPolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	if pol.Budget(PhaseAnswer) != 30 || pol.Budget(PhaseRoute) != DefaultBudget(PhaseRoute) || pol.FirewallMaxChars() != 150 {
		t.Fatalf("budgets answer %d, route %d, firewall %d", pol.Budget(PhaseAnswer), pol.Budget(PhaseRoute), pol.FirewallMaxChars())
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
	// The defaults (answer: user_turn 1.0, plan_state 0.6) with the same budget.
	if got := first(Options{Phase: PhaseAnswer, MaxTokens: 30}); got != "u1" {
		t.Errorf("default weights: %s fits, want u1", got)
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
	for _, c := range []struct {
		name string
		ph   v1alpha1.PhaseSpec
		want string
	}{
		{"budget", v1alpha1.PhaseSpec{Budget: ptr[int32](0)}, "spec.phases.call.budget: 0 must be between 1 and 1000000"},
		{"kind", v1alpha1.PhaseSpec{KindPriorities: map[string]v1alpha1.KindPriority{"thought": "1"}}, `spec.phases.call.kindPriorities: unknown kind "thought"`},
		{"weight", v1alpha1.PhaseSpec{KindPriorities: map[string]v1alpha1.KindPriority{"policy": "2"}}, `spec.phases.call.kindPriorities[policy]: "2" is not a decimal from 0 to 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewPolicy(&v1alpha1.ContextRouterSpec{Phases: &v1alpha1.PhasesSpec{Call: &c.ph}})
			if err == nil || err.Error() != c.want {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
