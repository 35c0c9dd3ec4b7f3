// Package learningtest is the conformance test every learning.Store
// passes: the embedded store and the Redis store run the same table.
package learningtest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/contextrouter/contextrouter/internal/learning"
)

var ctx = context.Background()

func rec(owner, agent, tool, text, outcome string) learning.Record {
	return learning.Record{Owner: owner, Agent: agent, Source: "ops", Tool: tool, Text: text, Outcome: outcome}
}

func mustLearn(t *testing.T, s learning.Store, r learning.Record, b learning.Bounds) learning.Record {
	t.Helper()
	r, err := learning.Learn(ctx, s, r, b)
	if err != nil {
		t.Fatalf("Learn(%+v): %v", r, err)
	}
	return r
}

func reason(err error) string {
	var le *learning.LimitError
	if errors.As(err, &le) {
		return le.Reason
	}
	return fmt.Sprint(err)
}

// Run runs every case against fresh, empty stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) learning.Store) {
	b := learning.DefaultBounds
	t.Run("add, list by owner and by reporter, replace by the same question", func(t *testing.T) {
		s := newStore(t)
		v0, _ := s.OutcomesVersion(ctx)
		a := mustLearn(t, s, rec("alice", "alice", "weather", "umbrella in Lisbon?", learning.Success), b)
		mustLearn(t, s, rec(learning.Shared, "bob", "weather", "rain tomorrow?", learning.Success), b)
		if v1, _ := s.OutcomesVersion(ctx); v1 == v0 {
			t.Errorf("version did not change: %d", v1)
		}
		got, err := s.Outcomes(ctx, "alice")
		if err != nil || len(got) != 1 || got[0].ID != a.ID || got[0].Text != "umbrella in Lisbon?" || got[0].Agent != "alice" {
			t.Fatalf("Outcomes(alice) = %+v, %v", got, err)
		}
		if got, _ := s.Outcomes(ctx, "alice", learning.Shared); len(got) != 2 {
			t.Errorf("Outcomes(alice, shared) = %d records, want 2", len(got))
		}
		// The same question again replaces: a failure now, one record.
		mustLearn(t, s, rec("alice", "alice", "weather", "umbrella in Lisbon?", learning.Failure), b)
		got, _ = s.Outcomes(ctx, "alice")
		if len(got) != 1 || got[0].Outcome != learning.Failure {
			t.Errorf("after the same question: %+v, want one failure", got)
		}
		if l, _ := s.ListOutcomes(ctx, learning.Filter{Agent: "bob"}); len(l) != 1 || l[0].Owner != learning.Shared {
			t.Errorf("ListOutcomes(bob) = %+v", l)
		}
	})
	t.Run("bounds: per tool, per agent, total; a refused record changes nothing", func(t *testing.T) {
		s := newStore(t)
		small := learning.Bounds{PerTool: 2, PerAgent: 3, Total: 4}
		mustLearn(t, s, rec("alice", "alice", "weather", "q1", learning.Success), small)
		mustLearn(t, s, rec("alice", "alice", "weather", "q2", learning.Success), small)
		v, _ := s.OutcomesVersion(ctx)
		if _, err := learning.Learn(ctx, s, rec("alice", "alice", "weather", "q3", learning.Success), small); reason(err) != "tool_limit" {
			t.Errorf("third of a tool: %v, want tool_limit", err)
		}
		if v2, _ := s.OutcomesVersion(ctx); v2 != v {
			t.Errorf("a refused record changed the version")
		}
		// Replacing one of the two still fits.
		mustLearn(t, s, rec("alice", "alice", "weather", "q2", learning.Failure), small)
		mustLearn(t, s, rec("alice", "alice", "flights", "q4", learning.Success), small)
		if _, err := learning.Learn(ctx, s, rec("alice", "alice", "hotels", "q5", learning.Success), small); reason(err) != "agent_limit" {
			t.Errorf("fourth of an agent: %v, want agent_limit", err)
		}
		mustLearn(t, s, rec("bob", "bob", "hotels", "q6", learning.Success), small)
		if _, err := learning.Learn(ctx, s, rec("carol", "carol", "hotels", "q7", learning.Success), small); reason(err) != "store_full" {
			t.Errorf("fifth of the store: %v, want store_full", err)
		}
		if got, _ := s.Outcomes(ctx, "alice", "bob", "carol"); len(got) != 4 {
			t.Errorf("%d records, want 4", len(got))
		}
	})
	t.Run("delete one, a tool's, the reporter's only", func(t *testing.T) {
		s := newStore(t)
		a := mustLearn(t, s, rec("alice", "alice", "weather", "q1", learning.Success), b)
		mustLearn(t, s, rec("alice", "alice", "weather", "q2", learning.Success), b)
		mustLearn(t, s, rec("alice", "alice", "flights", "q3", learning.Success), b)
		mustLearn(t, s, rec("bob", "bob", "weather", "q1", learning.Success), b)
		if n, err := s.DeleteOutcomes(ctx, learning.Filter{Agent: "alice", ID: a.ID}); n != 1 || err != nil {
			t.Errorf("delete one: %d, %v", n, err)
		}
		if n, _ := s.DeleteOutcomes(ctx, learning.Filter{Agent: "alice", Source: "ops", Tool: "weather"}); n != 1 {
			t.Errorf("delete a tool's: %d, want 1", n)
		}
		if got, _ := s.Outcomes(ctx, "alice", "bob"); len(got) != 2 {
			t.Errorf("left: %+v, want flights of alice and weather of bob", got)
		}
		if n, _ := s.DeleteOutcomes(ctx, learning.Filter{Agent: "carol"}); n != 0 {
			t.Errorf("carol deleted %d", n)
		}
		// The counts follow deletes: the tool has room again.
		small := learning.Bounds{PerTool: 1, PerAgent: 10, Total: 10}
		mustLearn(t, s, rec("alice", "alice", "weather", "q9", learning.Success), small)
	})
}
