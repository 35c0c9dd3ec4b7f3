package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// Learning from outcomes (api.md §10.10): who may report, and the overlay a
// query of an agent ranks with.

// ErrLearningOff: the router's spec.tools.learning.scope is Off.
var ErrLearningOff = errors.New("learning from outcomes is off (spec.tools.learning.scope: Off)")

// OutcomeRefusal is an outcome the router refuses for who sends it or
// what it names; Reason is the metric's ("not_usable", "not_teacher").
type OutcomeRefusal struct {
	Reason string
	Msg    string
}

func (e *OutcomeRefusal) Error() string { return e.Msg }

// LearningScope is the router's spec.tools.learning.scope.
func (s *Snapshot) LearningScope() v1alpha1.ToolLearningScope { return s.tools.learning }

// OutcomeRecord settles an outcome of agent for a tool (source "" = the
// first tool source, by name, that has it, as describe_tool): the tool
// must be one the agent may use, and under scope Shared the agent must be
// allowed to teach. It returns the record to learn (owner, agent, source,
// tool, text, outcome) or why it is refused; nothing is stored here.
func (s *Snapshot) OutcomeRecord(agent, source, tool, text, outcome string) (learning.Record, error) {
	scope := s.tools.learning
	if scope == v1alpha1.ToolLearningOff {
		return learning.Record{}, ErrLearningOff
	}
	e, ok := s.DescribeTool(agent, source, tool)
	if !ok {
		where := ""
		if source != "" {
			where = fmt.Sprintf(" of source %q", source)
		}
		return learning.Record{}, &OutcomeRefusal{"not_usable", fmt.Sprintf("tool %q%s is not a tool agent %q may use; nothing was learned", tool, where, agent)}
	}
	owner := agent
	if scope == v1alpha1.ToolLearningShared {
		if !s.accessFor(agent).Tools.Teach {
			return learning.Record{}, &OutcomeRefusal{"not_teacher", fmt.Sprintf("agent %q may not teach: spec.tools.learning.scope is Shared and no AgentPermission of the agent sets tools.teach; nothing was learned", agent)}
		}
		owner = learning.Shared
	}
	return learning.Record{Owner: owner, Agent: agent, Source: e.Source, Tool: e.Tool.ID(), Text: text, Outcome: outcome}, nil
}

type cachedOverlay struct {
	version uint64
	l       *tools.Learned
}

// LearnedFor is the overlay of the outcomes that re-rank agent's
// shortlists: its own (scope Agent), its own and the shared ones (Shared),
// none (Off). It is cached per agent until the store's version changes.
func (s *Snapshot) LearnedFor(ctx context.Context, store learning.Store, agent string) (*tools.Learned, error) {
	if store == nil || s.toolIx == nil || s.tools.learning == v1alpha1.ToolLearningOff {
		return nil, nil
	}
	v, err := store.OutcomesVersion(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := s.learned.Load(agent); ok && c.(cachedOverlay).version == v {
		return c.(cachedOverlay).l, nil
	}
	owners := []string{agent}
	if s.tools.learning == v1alpha1.ToolLearningShared {
		owners = append(owners, learning.Shared)
	}
	recs, err := store.Outcomes(ctx, owners...)
	if err != nil {
		return nil, err
	}
	l := learning.Overlay(s.toolIx, recs, func(source, tool string) (int, bool) {
		st := s.sources[source]
		if st == nil || !st.isToolSource() {
			return 0, false
		}
		return s.findTool(st, tool)
	})
	if _, loaded := s.learned.Load(agent); loaded || s.nLearned.Load() < maxCachedAgents {
		if _, loaded := s.learned.Swap(agent, cachedOverlay{v, l}); !loaded {
			s.nLearned.Add(1)
		}
	}
	return l, nil
}
