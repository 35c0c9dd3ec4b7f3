package session

import (
	"context"
	"errors"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// Request asks a compiled router for the pack of a session: what the CLI's
// `session build`, the HTTP API and the Go API send.
type Request struct {
	Phase     Phase
	Query     string
	Agent     string
	Tags      []string
	MaxTokens int
}

// QueryRequest is the query a pack request runs for its knowledge: the
// question for the agent, bounded by the phase budget.
func (r *Request) QueryRequest() engine.Request {
	q := engine.Request{Text: r.Query, Agent: r.Agent, Tags: r.Tags, MaxTokens: DefaultBudget(r.Phase)}
	if r.MaxTokens > 0 {
		q.MaxTokens = min(q.MaxTokens, r.MaxTokens)
	}
	return q
}

// QueryError is a failure of the query a pack request ran (a timeout, a
// cancelled request), as opposed to an invalid session.
type QueryError struct{ Err error }

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// BuildFor builds the pack of s with a compiled router: the agent's merged
// permissions set the sensitivity floor, the router's estimator counts
// tokens, and with a query the router's query pipeline runs for the agent
// (its chunks become the knowledge; in the route phase its tool cards the
// pack's tools). The query's response is returned too (nil without a query)
// for its warnings. An invalid session or request is an *Error or a plain
// error; a failed query a *QueryError.
func BuildFor(ctx context.Context, snap *engine.Snapshot, s *Session, req Request) (*Pack, *engine.Response, error) {
	if _, err := ParsePhase(string(req.Phase)); err != nil {
		return nil, nil, err
	}
	access := snap.AccessFor(req.Agent)
	opts := Options{Phase: req.Phase, Query: req.Query, Tags: req.Tags, MaxTokens: req.MaxTokens,
		Access: &access, Estimator: snap.Estimator()}
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
