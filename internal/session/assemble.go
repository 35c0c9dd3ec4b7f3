package session

import (
	"github.com/contextrouter/contextrouter/internal/engine"
)

// QueryRequest is the query pipeline's request for a pack's Query: the
// agent's question under the phase budget (lowered by MaxTokens).
func QueryRequest(opts *Options, agent string) engine.Request {
	req := engine.Request{Text: opts.Query, Agent: agent, Tags: opts.Tags, MaxTokens: DefaultBudget(opts.Phase)}
	if opts.MaxTokens > 0 {
		req.MaxTokens = min(req.MaxTokens, opts.MaxTokens)
	}
	return req
}

// Assemble builds the pack of s for opts, the way `session build` and
// POST /v1/sessions/{id}/context both do: when opts.Query is set, query runs
// the normal pipeline for it first (QueryRequest); its chunks become the
// knowledge candidates and, in the route phase, its tool cards the pack's
// tools. A query error is returned as query returned it, with a nil pack;
// resp is the query's answer (nil without a query).
func Assemble(s *Session, opts Options, agent string, query func(engine.Request) (*engine.Response, error)) (pack *Pack, resp *engine.Response, err error) {
	if opts.Query != "" {
		if resp, err = query(QueryRequest(&opts, agent)); err != nil {
			return nil, nil, err
		}
		opts.Knowledge = resp.Chunks
	}
	if pack, err = Build(s, opts); err != nil {
		return nil, resp, err
	}
	if resp != nil {
		if resp.Chunks != nil {
			pack.Chunks = resp.Chunks
		}
		if opts.Phase == PhaseRoute && resp.Tools != nil {
			pack.Tools = resp.Tools
		}
	}
	return pack, resp, nil
}
