package session

import (
	"context"
	"errors"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// Request asks a compiled router for the pack of a session: what the CLI's
// `session build`, the HTTP API and the Go API send.
type Request struct {
	Phase Phase
	Query string
	Agent string
	Tags  []string
	// MaxTokens, when > 0, is the budget: lower than the phase's, or higher
	// up to its ceiling (Policy.Limit; above it BuildFor refuses).
	MaxTokens int
	// Explain lists the entries left out and why (Pack.DroppedItems).
	Explain bool
	// Policy is the router's (NewPolicy of the snapshot's spec); nil:
	// BuildFor makes it. Callers that serve many packs from one snapshot
	// make it once.
	Policy *Policy
}

// QueryRequest is the query a pack request runs for its knowledge: the
// question for the agent, bounded by the pack's budget (Policy.Limit of the
// policy, or of the defaults; the phase's budget if MaxTokens is refused).
func (r *Request) QueryRequest() engine.Request {
	pol := r.Policy
	if pol == nil {
		pol = &defaultPolicy
	}
	budget, err := pol.Limit(r.Phase, r.MaxTokens)
	if err != nil {
		budget = pol.Budget(r.Phase)
	}
	return engine.Request{Text: r.Query, Agent: r.Agent, Tags: r.Tags, MaxTokens: budget}
}

// QueryError is a failure of the query a pack request ran (a timeout, a
// cancelled request), as opposed to an invalid session.
type QueryError struct{ Err error }

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// BuildFor builds the pack of s with a compiled router: the agent's merged
// permissions set the sensitivity floor, the router's estimator counts
// tokens, its spec.phases and firewall bound apply (req.Policy), and with a
// query the router's query pipeline runs for the agent
// (its chunks become the knowledge; in the route phase its tool cards the
// pack's tools). The query's response is returned too (nil without a query)
// for its warnings. An invalid session or request is an *Error or a plain
// error; a failed query a *QueryError.
func BuildFor(ctx context.Context, snap *engine.Snapshot, s *Session, req Request) (*Pack, *engine.Response, error) {
	if _, err := ParsePhase(string(req.Phase)); err != nil {
		return nil, nil, err
	}
	if req.Policy == nil {
		p, err := NewPolicy(snap.RouterSpec())
		if err != nil {
			return nil, nil, err
		}
		req.Policy = p
	}
	// A budget past the ceiling must not cost a query either.
	if _, err := req.Policy.Limit(req.Phase, req.MaxTokens); err != nil {
		return nil, nil, err
	}
	access := snap.AccessFor(req.Agent)
	opts := Options{Phase: req.Phase, Query: req.Query, Tags: req.Tags, MaxTokens: req.MaxTokens,
		Access: &access, Estimator: snap.Estimator(), Policy: req.Policy, Explain: req.Explain}
	var resp *engine.Response
	if req.Query != "" {
		// Check the session first: a bad one must not cost a query.
		if err := Validate(s); err != nil {
			return nil, nil, err
		}
		var err error
		if resp, err = snap.Query(ctx, req.QueryRequest()); err != nil {
			return nil, nil, &QueryError{err}
		}
		opts.Knowledge = resp.Chunks
	}
	pack, err := Build(s, opts)
	if err != nil {
		return nil, nil, err
	}
	if resp != nil {
		pack.Chunks = resp.Chunks
		if req.Phase == PhaseRoute {
			pack.Tools = resp.Tools
		}
	}
	return pack, resp, nil
}

// IsQueryError reports whether err is the failure of a pack's query.
func IsQueryError(err error) bool {
	var q *QueryError
	return errors.As(err, &q)
}
