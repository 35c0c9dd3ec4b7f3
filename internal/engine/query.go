package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/index"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/tools"
	"github.com/contextrouter/contextrouter/internal/topk"
)

// Request is one question (API.md "Query API").
type Request struct {
	Text     string            `json:"text"`
	Agent    string            `json:"agent,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// MaxTokens can only lower the router's budget.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxChunks caps the number of chunks (0 = no cap); an extension for
	// callers that want a top-k list, such as retrieval evaluation.
	MaxChunks int `json:"max_chunks,omitempty"`
	// MaxTools is the number of tool cards to shortlist (0 = the router's
	// spec.tools.topK; at most MaxToolsPerRequest).
	MaxTools int `json:"max_tools,omitempty"`
	// Detect names classifiers to run and report even when no condition
	// reads them ("*" = all); see api.md §6.1.
	Detect []string `json:"detect,omitempty"`
	// Explain adds to every tool card why it scored and is trusted as it
	// is (api.md §10.3).
	Explain bool `json:"explain,omitempty"`
	// Format asks POST /v1/tools for the cards as a provider's tool
	// definitions too (api.md §10.8); "" for cards only.
	Format string `json:"format,omitempty"`
	// Learned is the agent's learned outcomes (Snapshot.LearnedFor), which
	// re-rank the tools it may use; nil: none.
	Learned *tools.Learned `json:"-"`
}

// Response is the assembled context (API.md "Query API").
type Response struct {
	Chunks        []Chunk  `json:"chunks"`
	Text          string   `json:"text"`
	TotalTokens   int      `json:"total_tokens"`
	WasTruncated  bool     `json:"was_truncated"`
	MatchedRoutes []string `json:"matched_routes"`
	// RouteMatches says how each route of MatchedRoutes came to serve, in the same order.
	RouteMatches  []RouteMatch    `json:"route_matches"`
	DeniedSources []string        `json:"denied_sources"`
	FailedSources []SourceFailure `json:"failed_sources"`
	RouteErrors   []RouteError    `json:"route_errors"`
	// Warnings say why an answer is emptier than the caller may expect: an
	// agent that no AgentPermission names, shut out by defaultAccess: Deny.
	Warnings []string `json:"warnings"`
	// Tools are the shortlisted tool cards (api.md §10.3); [] when no
	// matched route names a tool source.
	Tools []ToolCard `json:"tools"`
	// RankingFailures are the ranking endpoints that did not help this
	// query (Warnings says why); the server counts them.
	RankingFailures []RankingFailure `json:"-"`
	// Detection is set when the query ran detection (api.md §6.2).
	Detection        *Detection `json:"detection,omitempty"`
	Stats            Stats      `json:"stats"`
	EvaluationTimeMS float64    `json:"evaluation_time_ms"`
}

// Chunk is one piece of the assembled context.
type Chunk struct {
	Content        string        `json:"content"`
	Source         string        `json:"source"`
	Title          string        `json:"title"`
	Path           string        `json:"path"`
	RelevanceScore float64       `json:"relevance_score"`
	TokenCount     int           `json:"token_count"`
	Metadata       ChunkMetadata `json:"metadata"`
}

// ChunkMetadata says where a chunk came from.
type ChunkMetadata struct {
	// Chunk is the chunk's position within its document.
	Chunk int `json:"chunk"`
	// Commit is the git commit the chunk was read from.
	Commit string `json:"commit,omitempty"`
	// MTime is the document's modification time (RFC 3339, UTC).
	MTime string `json:"mtime,omitempty"`
	// Redacted is set when the content was replaced under sensitivityAction: Redact.
	Redacted bool `json:"redacted,omitempty"`
	// AgeSeconds and Stale are set for the chunks of a source with
	// spec.freshness whose content time is known (api.md §4.7).
	AgeSeconds *int64 `json:"age_seconds,omitempty"`
	Stale      *bool  `json:"stale,omitempty"`
}

// SourceFailure reports a source that could not answer.
type SourceFailure struct {
	Source string `json:"source"`
	Error  string `json:"error"`
	// Reason is FailureTimeout when a route's timeout ended the fetch, and
	// Route that route; both are empty otherwise.
	Reason string `json:"reason,omitempty"`
	Route  string `json:"route,omitempty"`
}

// FailureTimeout is the SourceFailure.Reason of a fetch a route's timeout ended.
const FailureTimeout = "timeout"

// RouteMatch says how a route came to serve a query (api.md §6.2).
type RouteMatch struct {
	Route string `json:"route"`
	// MatchedBy is MatchedByCondition, MatchedByFallback or MatchedByAlternate.
	MatchedBy string `json:"matched_by"`
	// AlternateFor is the route whose sources all failed (MatchedByAlternate only).
	AlternateFor string `json:"alternate_for,omitempty"`
}

// RouteError reports a condition that failed at query time (counted as no match).
type RouteError struct {
	Route string `json:"route"`
	Error string `json:"error"`
}

// Stats accounts for every candidate: Included + sum(Dropped) == Candidates.
type Stats struct {
	Candidates int `json:"candidates"`
	Included   int `json:"included"`
	Redacted   int `json:"redacted"`
	// PinnedDropped counts Inline chunks of matched routes that did not fit
	// although they are taken first (api.md §5.5); they are in Dropped.Budget too.
	PinnedDropped int `json:"pinned_dropped"`
	// NoTermMatch counts the searched (Directory, GitRepo) sources of matched
	// routes of which no chunk shares a term with the question.
	NoTermMatch int `json:"no_term_match"`
	// NoMatchFallback counts the candidates that spec.ranking.onNoMatch added.
	NoMatchFallback int     `json:"no_match_fallback"`
	Dropped         Dropped `json:"dropped"`
	// Tools accounts for the tool candidates; tools never count against the budget.
	Tools ToolStats `json:"tools"`
	// Routes counts the gates used (api.md §1.2).
	Routes RouteStats `json:"routes"`
}

// RouteStats counts the routes that served as a fallback, and the routes
// whose alternate was called.
type RouteStats struct {
	Fallback  int `json:"fallback"`
	Alternate int `json:"alternate"`
}

// Dropped counts candidates left out, by reason.
type Dropped struct {
	Budget      int `json:"budget"`
	PathDenied  int `json:"path_denied"`
	Sensitivity int `json:"sensitivity"`
	Duplicate   int `json:"duplicate"`
	// Stale counts chunks older than their source's freshness.maxAge under staleAction: Drop.
	Stale int `json:"stale"`
}

// ErrBadRequest marks request errors (HTTP 400).
var ErrBadRequest = errors.New("bad request")

// RedactedContent replaces the content of a chunk above the agent's clearance
// under sensitivityAction: Redact.
func RedactedContent(source string, s v1alpha1.Sensitivity) string {
	return fmt.Sprintf("[redacted: %s content from source %s]", s, source)
}

// candidate is a chunk on its way through the pipeline.
type candidate struct {
	chunk    sources.Chunk
	doc      int64 // index doc id, or -1 for fetched chunks
	score    float64
	tokens   int
	priority int32
	terms    []uint32 // for near-duplicate detection; nil until needed for fetched chunks
	redacted bool
	// pinned: an Inline chunk, taken before every other candidate.
	pinned bool
	// aged: the source sets freshness and the content time is known; stale:
	// older than its maxAge. (Bools fill the padding: no bigger candidate.)
	aged, stale bool
}

// Query runs the pipeline (api.md §5): a short driver over its steps, which
// pass the query along in a queryScope. Request errors (wrapping
// ErrBadRequest) and a context that ends while route conditions are
// evaluated (*StoppedError) are returned; failing routes and sources are
// reported in the response.
func (s *Snapshot) Query(ctx context.Context, req Request) (*Response, error) {
	start := time.Now()
	// 1. Request checks.
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	if err := queryFormat(req.Format); err != nil {
		return nil, err
	}
	if err := s.checkDetect(req.Detect); err != nil {
		return nil, err
	}
	q := s.newQueryScope(&req)
	// 2. Routes, and the detection they or the request ask for.
	if err := s.routeQuery(ctx, q); err != nil {
		return nil, err
	}
	// 3. Permissions; per-query sources start fetching while the index is searched.
	s.gatherSources(ctx, q)
	// 4. Candidates: index hits, dense hits, onNoMatch, pinned Inline chunks, fetched results.
	s.searchIndex(q)
	s.searchDenseCandidates(ctx, q)
	s.addNoMatchFallback(q)
	s.addPinned(q)
	s.addFetched(q)
	s.scoreCandidates(q)
	// 5. Path, freshness and sensitivity filters: the one chunk visibility rule.
	q.cands = s.admitCandidates(q.cands, q.access, q.now, &q.resp.Stats.Dropped)
	// 6-7. Normalise, rank, drop near-duplicates, fill the budget.
	s.rankAndFill(ctx, q)
	// 8. Assemble.
	assemble(q.resp, start)
	return q.resp, nil
}

// queryScope carries one query from step to step of Query.
type queryScope struct {
	// req is a copy of the request: pointing at Query's own would move it to the heap.
	req    Request
	resp   *Response
	access *Access
	// det runs detection for the conditions that read it (nil: none does).
	det *detector
	rt  routing
	g   gathering
	// terms is the question as the index scores it; hits are its BM25 (or
	// Keyword) hits over the allowed static sources, in doc order.
	terms *index.Query
	hits  []index.Hit
	cands []candidate
	// searched counts the candidates from Directory and GitRepo sources.
	searched int
	// dq is the dense side of the query (nil: not ranked with vectors).
	dq *denseQuery
	// strategy ranks this query: the router's, or the one onNoMatch chose.
	strategy v1alpha1.RankingStrategy
	// now is the query's one clock reading, for the freshness of its chunks
	// (zero when no source sets freshness).
	now time.Time
}

func (s *Snapshot) newQueryScope(req *Request) *queryScope {
	q := &queryScope{req: *req, strategy: s.strategy, access: s.accessFor(req.Agent)}
	q.resp = &Response{
		// One allocation for the route matches of most queries.
		Chunks: []Chunk{}, MatchedRoutes: []string{}, RouteMatches: make([]RouteMatch, 0, min(len(s.routes), 4)), DeniedSources: []string{},
		FailedSources: []SourceFailure{}, RouteErrors: []RouteError{}, Warnings: []string{}, Tools: []ToolCard{},
	}
	q.g.allowed = make([]bool, len(s.byGroup))
	if s.hasAlternates {
		q.g.outcome = make([]uint8, len(s.byGroup))
	}
	if s.hasFreshness {
		q.now = s.now()
	}
	return q
}

// routeQuery evaluates the routes (route), then runs the detection the
// request asks for or a condition started.
func (s *Snapshot) routeQuery(ctx context.Context, q *queryScope) error {
	q.det = s.queryDetector(ctx, &q.req)
	rt, err := s.route(ctx, &q.req, q.resp, q.det)
	if err != nil {
		return err
	}
	q.rt = rt
	if det := q.det; det != nil && (det.done || len(q.req.Detect) > 0) {
		det.run()
		if err := det.stopped(""); err != nil {
			return err
		}
		q.resp.Detection = &det.detection
	}
	return nil
}

// gatherSources sorts the serving routes' sources by what the agent may do
// with them and starts the fetches. A route whose sources all failed calls
// its alternate, whose sources go through the same steps once the first
// fetches are in.
func (s *Snapshot) gatherSources(ctx context.Context, q *queryScope) {
	g, resp := &q.g, q.resp
	s.admitSources(q.rt.srcNames, q.access, resp, g)
	s.startFetches(ctx, q.req.Text, q.rt.caps, g)
	if s.hasAlternates && len(q.rt.served) > 0 {
		g.wg.Wait()
		s.reportFetchFailures(resp, g)
		if alt := s.alternates(&q.rt, g.outcome, resp); len(alt) > 0 {
			s.admitSources(alt, q.access, resp, g)
			s.startFetches(ctx, q.req.Text, q.rt.caps, g)
		}
	}
	if len(resp.DeniedSources) > 0 && agentUnnamed(q.access) {
		resp.Warnings = append(resp.Warnings, unnamedAgentWarning(q.req.Agent))
	}
}

// searchIndex scores the allowed static sources' chunks (BM25, or Keyword
// under that scorer) and counts the searched sources of which no chunk
// shares a term with the question.
func (s *Snapshot) searchIndex(q *queryScope) {
	q.terms = s.ix.NewQuery(q.req.Text, s.scorer == v1alpha1.ScorerKeyword)
	if s.scorer == v1alpha1.ScorerKeyword {
		q.hits = s.ix.Keyword(nil, q.terms, q.g.allowed)
	} else {
		q.hits = s.ix.BM25(nil, q.terms, q.g.allowed)
	}
	q.cands = make([]candidate, 0, len(q.hits)+8)
	for _, h := range q.hits {
		c := s.staticCandidate(h.Doc, h.Score)
		if !c.pinned {
			q.searched++
		}
		q.cands = append(q.cands, c)
	}
	for _, st := range s.byGroup {
		if q.silent(st) {
			q.resp.Stats.NoTermMatch++
		}
	}
}

// silent reports whether st is an allowed searched source of which no chunk
// shares a term with the question. A source's docs are contiguous and hits
// are in doc order: no per-query map.
func (q *queryScope) silent(st *sourceState) bool {
	return q.g.allowed[st.group] && st.typ != v1alpha1.SourceInline && st.chunks > 0 &&
		!hitIn(q.hits, st.first, st.first+uint32(st.chunks))
}

// searchDenseCandidates adds the chunks nearest to the question to the
// index hits, under the Embedding and Hybrid strategies.
func (s *Snapshot) searchDenseCandidates(ctx context.Context, q *queryScope) {
	if s.strategy != v1alpha1.RankingEmbedding && s.strategy != v1alpha1.RankingHybrid {
		return
	}
	if q.dq = s.searchDense(ctx, q.req.Text, q.g.allowed, q.access, q.now, max(denseTopK, q.req.MaxChunks), q.resp); q.dq == nil {
		return
	}
	for _, h := range q.dq.hits {
		if !hasDoc(q.hits, h.Row) {
			q.cands = append(q.cands, s.staticCandidate(h.Row, 0))
			q.searched++
		}
	}
}

// addNoMatchFallback lets onNoMatch decide, and rank the query, when no
// searched chunk shares a term with the question.
func (s *Snapshot) addNoMatchFallback(q *queryScope) {
	if q.searched > 0 || q.resp.Stats.NoTermMatch == 0 || (s.onNoMatch != v1alpha1.NoMatchRecent && s.onNoMatch != v1alpha1.NoMatchPriority) {
		return
	}
	for _, st := range s.byGroup {
		if !q.silent(st) {
			continue
		}
		for d := st.first; d < st.first+uint32(st.chunks); d++ {
			q.cands = append(q.cands, s.staticCandidate(d, 0))
		}
		q.resp.Stats.NoMatchFallback += st.chunks
	}
	q.strategy = v1alpha1.RankingManual
	if s.onNoMatch == v1alpha1.NoMatchRecent {
		q.strategy = v1alpha1.RankingRecency
	}
}

// addPinned adds the Inline chunks of the allowed sources: Inline text
// reaches every query its routes match, even without a shared term.
func (s *Snapshot) addPinned(q *queryScope) {
	for _, st := range s.byGroup {
		if !q.g.allowed[st.group] || len(st.always) == 0 {
			continue
		}
		for _, d := range st.always {
			if !hasDoc(q.hits, d) {
				q.cands = append(q.cands, s.staticCandidate(d, 0))
			}
		}
	}
}

// addFetched waits for the fetches, reports those that failed and adds the
// results of the others, scored like the index's chunks.
func (s *Snapshot) addFetched(q *queryScope) {
	g := &q.g
	g.wg.Wait()
	s.reportFetchFailures(q.resp, g)
	for i, st := range g.fetch {
		if g.results[i].err != nil {
			continue
		}
		for _, c := range g.results[i].chunks {
			c.Source = st.name
			var score float64
			if s.scorer == v1alpha1.ScorerKeyword {
				score = index.KeywordText(q.terms, c.Title, c.Content)
			} else {
				score = s.ix.BM25Text(q.terms, c.Title, c.Content)
			}
			q.cands = append(q.cands, candidate{chunk: c, doc: -1, score: score, tokens: s.est.Count(c.Content), priority: s.sources[st.name].priority})
		}
	}
}

// scoreCandidates rescores the candidates with the dense ranks when the
// query has them, counts the candidates, and shortlists the tools.
func (s *Snapshot) scoreCandidates(q *queryScope) {
	if q.dq != nil {
		s.rescoreDense(q.cands, q.dq)
	}
	q.resp.Stats.Candidates = len(q.cands)
	if q.g.hasTools {
		q.resp.Tools, q.resp.Stats.Tools = s.selectTools(&q.req, q.access, q.g.toolSrcs)
	}
	s.setToolsReason(&q.resp.Stats.Tools, q.g.hasTools, q.g.toolSrcs, q.resp.FailedSources)
}

// rankAndFill normalises the scores to 0..1, reranks when the router says
// so, and fills the budget in rank order.
func (s *Snapshot) rankAndFill(ctx context.Context, q *queryScope) {
	normalize(q.cands)
	limit := s.maxTokens
	if q.req.MaxTokens > 0 && q.req.MaxTokens < limit {
		limit = q.req.MaxTokens
	}
	limit = max(limit-s.reserveTokens, 0)
	less := lessFunc(q.strategy)
	if s.dense != nil && s.dense.reranker != nil && q.strategy == s.strategy {
		s.rerank(ctx, q.req.Text, q.cands, less, q.resp)
		normalize(q.cands)
	}
	s.fill(q.resp, q.cands, limit, q.req.MaxChunks, less, q.now)
}

// assemble joins the included chunks into the answer's text and totals.
func assemble(resp *Response, start time.Time) {
	parts := make([]string, len(resp.Chunks))
	for i, c := range resp.Chunks {
		parts[i] = c.Content
		resp.TotalTokens += c.TokenCount
	}
	resp.Text = strings.Join(parts, "\n\n")
	resp.Stats.Included = len(resp.Chunks)
	resp.EvaluationTimeMS = math.Round(float64(time.Since(start).Microseconds())) / 1000
}

// StoppedError is returned by Query when its context ends (deadline or
// cancellation) while route conditions are evaluated or entities extracted:
// the answer would depend on work that was not done, so there is none.
type StoppedError struct {
	// Route is the route whose condition was stopped or was next; "" when
	// the entities a request's detect asked for were being extracted.
	Route string
	// Err is the context's error (context.DeadlineExceeded or context.Canceled).
	Err error
}

// stage says what the query was doing when it stopped.
func (e *StoppedError) stage() string {
	if e.Route == "" {
		return "extracting the entities of detect"
	}
	return fmt.Sprintf("evaluating the condition of route %q", e.Route)
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped while %s: %v", e.stage(), e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// TimeoutMessage is how the server and the CLI report a query stopped by its timeout.
func (e *StoppedError) TimeoutMessage(timeout time.Duration) string {
	return fmt.Sprintf("query exceeded the %s timeout while %s", timeout, e.stage())
}

// matchRoutes evaluates the route conditions (route) and returns the
// sources of the serving routes, deduplicated, in route order. det runs
// detection for the conditions that read it (nil: none does).
func (s *Snapshot) matchRoutes(ctx context.Context, req *Request, resp *Response, det *detector) ([]string, error) {
	rt, err := s.route(ctx, req, resp, det)
	return rt.srcNames, err
}

// route evaluates every route condition and records matches and errors in
// resp; when no route matched, the fallback routes' conditions follow. It
// stops with a *StoppedError when ctx ends: between routes, and inside a
// condition's comprehensions.
func (s *Snapshot) route(ctx context.Context, req *Request, resp *Response, det *detector) (routing, error) {
	act := newActivation(req, s.vars)
	act.det = det
	if s.wordsOnText {
		act.question.register(req.Text)
		defer act.question.unregister()
	}
	done := ctx.Done()
	var rt routing
	for _, fallbacks := range [2]bool{false, true} {
		if fallbacks && (!s.hasFallback || !fallbacksServe(resp.RouteMatches)) {
			break
		}
		for i := range s.routes {
			r := &s.routes[i]
			if r.fallback != fallbacks {
				continue
			}
			if r.cond != nil {
				select {
				case <-done:
					return routing{}, &StoppedError{Route: r.name, Err: ctx.Err()}
				default:
				}
				ok, err := r.cond.eval(ctx, act)
				if err := det.stopped(r.name); err != nil {
					// Detection stopped: even a condition that got past its
					// error value would have read partial entities.
					return routing{}, err
				}
				if err != nil {
					if ctx.Err() != nil {
						// Interrupted (or failed as the deadline passed): not a "no match".
						return routing{}, &StoppedError{Route: r.name, Err: ctx.Err()}
					}
					resp.RouteErrors = append(resp.RouteErrors, RouteError{Route: r.name, Error: err.Error()})
					continue
				}
				if !ok {
					continue
				}
			}
			matchedBy := MatchedByCondition
			switch {
			case fallbacks:
				matchedBy = MatchedByFallback
				resp.Stats.Routes.Fallback++
			case r.cond == nil:
				matchedBy = MatchedByAlways
			}
			s.serve(i, matchedBy, "", resp, &rt)
		}
	}
	return rt, nil
}

// gathering holds the sources of one query on their way to candidates.
type gathering struct {
	allowed  []bool // by group: static sources to search
	fetch    []*sourceState
	results  []fetched // by fetch position
	reported int       // fetch results already reported
	toolSrcs []*sourceState
	hasTools bool
	// outcome is each source's outcome by group, kept only when a route has an alternate.
	outcome []uint8
	wg      sync.WaitGroup
}

type fetched struct {
	chunks []sources.Chunk
	err    error
	// capRoute is the route whose timeout bounded the fetch ("" = none did),
	// capTimeout that timeout.
	capRoute   string
	capTimeout time.Duration
}

// admitSources sorts sources by what the agent may do with them: denied,
// failed to load, to fetch, or to search.
func (s *Snapshot) admitSources(names []string, access *Access, resp *Response, g *gathering) {
	for _, n := range names {
		st := s.sources[n]
		outcome := outcomeAnswered
		switch {
		case st.tool != nil:
			g.hasTools = true
			if !toolReadable(access, st) {
				outcome = outcomeDenied
			} else if !toolsServing(st) {
				outcome = outcomeFailed
			}
			g.toolSrcs = s.routeToolSource(st, access, resp, g.toolSrcs)
		case !access.SourceAllowed(n):
			resp.DeniedSources = append(resp.DeniedSources, n)
			outcome = outcomeDenied
		case st.loadErr != nil:
			resp.FailedSources = append(resp.FailedSources, SourceFailure{Source: n, Error: st.loadErr.Error()})
			g.allowed[st.group] = st.stale // its last good chunks still answer
			if !st.stale {
				outcome = outcomeFailed
			}
		case st.query != nil:
			g.fetch = append(g.fetch, st)
			outcome = outcomeNone // known once fetched
		default:
			g.allowed[st.group] = true
		}
		if g.outcome != nil {
			if outcome == outcomeAnswered && st.fixed {
				outcome = outcomeFixed
			}
			g.outcome[st.group] = outcome
		}
	}
}

// startFetches fetches the sources admitted since the last call, each under
// the deadline its routes set. A cached answer replaces the fetch; only
// successful fetches are cached.
func (s *Snapshot) startFetches(ctx context.Context, text string, caps []fetchCap, g *gathering) {
	from := len(g.results)
	g.results = append(g.results, make([]fetched, len(g.fetch)-from)...)
	for i := from; i < len(g.fetch); i++ {
		st := g.fetch[i]
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			cached := s.cache != nil && st.cacheKey != ""
			if cached {
				if chunks, ok := s.cache.Get(st.cacheKey, text); ok {
					g.results[i] = fetched{chunks: chunks}
					st.fresh.observeChunks(chunks)
					return
				}
			}
			// The source enforces its own timeout with a precise message; this is a backstop.
			timeout, capRoute := st.timeout+time.Second, ""
			if caps != nil {
				if c := caps[st.group]; c.timeout > 0 && c.timeout < st.timeout {
					// The route's timeout ends first; the failure names the route and
					// its timeout ("timeout after 100ms").
					timeout, capRoute = c.timeout, c.route
				}
			}
			fctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			chunks, err := st.query.Fetch(fctx, text)
			if err == nil {
				// An answer is as old as its fetch, unless a result carries its own
				// date (timeField); a cached one keeps that time.
				at := time.Now()
				for j := range chunks {
					chunks[j].Fetched = at.UnixNano()
				}
				st.fresh.observeChunks(chunks)
			}
			if err == nil && cached {
				s.cache.Put(st.cacheKey, text, chunks)
			}
			results := fetched{chunks: chunks, err: err}
			if err != nil && capRoute != "" && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				results.capRoute, results.capTimeout = capRoute, timeout
			}
			g.results[i] = results
		}()
	}
}

// reportFetchFailures lists the failed fetches not yet reported, in fetch
// order; the fetches must be done.
func (s *Snapshot) reportFetchFailures(resp *Response, g *gathering) {
	for i := g.reported; i < len(g.fetch); i++ {
		st, res := g.fetch[i], &g.results[i]
		if g.outcome != nil {
			g.outcome[st.group] = outcomeAnswered
		}
		if res.err == nil {
			continue
		}
		f := SourceFailure{Source: st.name, Error: redact.String(res.err.Error())}
		if res.capRoute != "" {
			// The route's timeout, not what was left of it when the fetch
			// started (a busy machine starts fetches late).
			f.Error = "timeout after " + res.capTimeout.String()
			f.Reason, f.Route = FailureTimeout, res.capRoute
		}
		resp.FailedSources = append(resp.FailedSources, f)
		if g.outcome != nil {
			g.outcome[st.group] = outcomeFailed
		}
	}
	g.reported = len(g.fetch)
}

func (s *Snapshot) staticCandidate(doc uint32, score float64) candidate {
	d := &s.docs[doc]
	st := s.byGroup[s.ix.Group(doc)]
	return candidate{chunk: d.chunk, doc: int64(doc), score: score, tokens: d.tokens, priority: st.priority, pinned: st.typ == v1alpha1.SourceInline}
}

func hasDoc(hits []index.Hit, d uint32) bool {
	lo := lowerBound(hits, d)
	return lo < len(hits) && hits[lo].Doc == d
}

// hitIn reports whether a hit falls in the docs [from, to).
func hitIn(hits []index.Hit, from, to uint32) bool {
	lo := lowerBound(hits, from)
	return lo < len(hits) && hits[lo].Doc < to
}

// lowerBound is the position of the first hit with a doc ≥ d (hits are in doc order).
func lowerBound(hits []index.Hit, d uint32) int {
	lo, hi := 0, len(hits)
	for lo < hi {
		m := (lo + hi) / 2
		if hits[m].Doc < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

const maxCachedAgents = 4096

// AccessFor is what agent may read under this snapshot's router (§3 of
// api.md): session packs apply its sensitivity floor to session items.
func (s *Snapshot) AccessFor(agent string) Access { return *s.accessFor(agent) }

func (s *Snapshot) accessFor(agent string) *Access {
	if a, ok := s.access.Load(agent); ok {
		return a.(*Access)
	}
	a := ResolveAccess(s.perms, agent, s.defaultAccess)
	if s.nAccess.Load() < maxCachedAgents {
		if _, loaded := s.access.LoadOrStore(agent, &a); !loaded {
			s.nAccess.Add(1)
		}
	}
	return &a
}

// minUsefulTokens is the smallest truncated chunk worth including.
const minUsefulTokens = 8

// fill pops candidates in rank order: a near-duplicate of an included chunk is
// dropped, a chunk that fits is included, one that does not is dropped (Drop,
// or a redacted chunk under any mode) or cut to the remaining budget
// (TruncateEnd/TruncateMiddle), after which the budget is full. Whatever is left when the budget or max_chunks is exhausted
// counts as dropped for budget.
func (s *Snapshot) fill(resp *Response, cands []candidate, limit, maxChunks int, less func(a, b *candidate) bool, now time.Time) {
	// The heap orders candidate positions, so its swaps move ints, not chunks.
	idx := make([]int32, len(cands))
	for i := range idx {
		idx[i] = int32(i)
	}
	h := topk.NewHeap(idx, func(a, b int32) bool { return less(&cands[a], &cands[b]) })
	remaining := limit
	minTokens := math.MaxInt
	pinned := 0 // pinned candidates not yet popped
	for _, c := range cands {
		minTokens = min(minTokens, c.tokens)
		if c.pinned {
			pinned++
		}
	}
	var included []*candidate
	extra := map[string]uint32{}
	dedup := index.NewNearDuplicates(s.dedup)
	full := false
	for h.Len() > 0 {
		// Stop when nothing more can go in: the budget is full, no candidate fits
		// whole and none can be cut (Drop, or too little room left to cut into),
		// or max_chunks is reached. The rest is counted as dropped for budget.
		cannotFit := remaining < minTokens && (s.truncation == v1alpha1.TruncationDrop || remaining < minUsefulTokens)
		if full || cannotFit || (maxChunks > 0 && len(included) >= maxChunks) {
			resp.Stats.Dropped.Budget += h.Len()
			resp.Stats.PinnedDropped += pinned
			resp.WasTruncated = true
			break
		}
		c := cands[h.Pop()]
		if c.pinned {
			pinned--
		}
		if s.dedup > 0 && !c.redacted {
			if c.terms == nil {
				if c.doc >= 0 {
					c.terms = s.ix.DocTerms(uint32(c.doc))
				} else {
					c.terms = s.ix.TermIDs(c.chunk.Title+"\n"+c.chunk.Content, extra)
				}
			}
			if dedup.Duplicate(c.terms) {
				resp.Stats.Dropped.Duplicate++
				continue
			}
		}
		if c.tokens > remaining {
			resp.WasTruncated = true
			// A redaction placeholder is whole or absent: a cut one would misreport its source
			// or sensitivity, so it is dropped like under Drop and filling continues.
			if s.truncation == v1alpha1.TruncationDrop || remaining < minUsefulTokens || c.redacted {
				resp.Stats.Dropped.Budget++
				if c.pinned {
					resp.Stats.PinnedDropped++
				}
				continue
			}
			var out string
			var tokens int
			var ok bool
			if s.truncation == v1alpha1.TruncationTruncateMiddle {
				out, tokens, ok = budget.TruncateMiddle(c.chunk.Content, remaining, s.est)
			} else {
				out, tokens, ok = budget.TruncateEnd(c.chunk.Content, remaining, s.est)
			}
			if !ok {
				resp.Stats.Dropped.Budget++
				if c.pinned {
					resp.Stats.PinnedDropped++
				}
				continue
			}
			c.chunk.Content, c.tokens = out, tokens
			full = true
		}
		remaining -= c.tokens
		if c.redacted {
			resp.Stats.Redacted++
		}
		cc := c
		if s.dedup > 0 && !c.redacted {
			dedup.Add(c.terms)
		}
		included = append(included, &cc)
		resp.Chunks = append(resp.Chunks, toChunk(&cc, now))
	}
}

// normalize divides every score by the highest, so the best is 1; all 0 stay 0.
func normalize(cands []candidate) {
	var maxScore float64
	for _, c := range cands {
		maxScore = math.Max(maxScore, c.score)
	}
	if maxScore > 0 {
		for i := range cands {
			cands[i].score /= maxScore
		}
	}
}

// toChunk makes the answer's chunk; now is the query's clock reading (zero
// when no source sets freshness).
func toChunk(c *candidate, now time.Time) Chunk {
	md := ChunkMetadata{Chunk: c.chunk.Index, Commit: c.chunk.Commit, Redacted: c.redacted}
	if c.aged {
		// One allocation for both fields; the caller owns them.
		age, _ := Staleness(ContentTime(&c.chunk), now, 0)
		a := &struct {
			age   int64
			stale bool
		}{age, c.stale}
		md.AgeSeconds, md.Stale = &a.age, &a.stale
	}
	if !c.chunk.ModTime.IsZero() {
		md.MTime = c.chunk.ModTime.UTC().Format(time.RFC3339)
	}
	return Chunk{
		Content: c.chunk.Content, Source: c.chunk.Source, Title: c.chunk.Title, Path: c.chunk.Path,
		RelevanceScore: math.Round(c.score*1e4) / 1e4, TokenCount: c.tokens, Metadata: md,
	}
}

// lessFunc orders candidates for a ranking strategy. Pinned (Inline) chunks
// come first; ties are broken by source priority, source name, path and chunk
// index, so output is stable.
func lessFunc(strategy v1alpha1.RankingStrategy) func(a, b *candidate) bool {
	switch strategy {
	case v1alpha1.RankingRecency:
		return func(a, b *candidate) bool {
			if a.pinned != b.pinned {
				return a.pinned
			}
			if !a.chunk.ModTime.Equal(b.chunk.ModTime) {
				return a.chunk.ModTime.After(b.chunk.ModTime)
			}
			if a.score != b.score {
				return a.score > b.score
			}
			return tieLess(a, b)
		}
	case v1alpha1.RankingManual:
		return func(a, b *candidate) bool {
			if a.pinned != b.pinned {
				return a.pinned
			}
			if a.priority != b.priority {
				return a.priority > b.priority
			}
			if a.score != b.score {
				return a.score > b.score
			}
			return tieLess(a, b)
		}
	default:
		return func(a, b *candidate) bool {
			if a.pinned != b.pinned {
				return a.pinned
			}
			if a.score != b.score {
				return a.score > b.score
			}
			return tieLess(a, b)
		}
	}
}

// tieLess breaks ties under every strategy.
func tieLess(a, b *candidate) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.chunk.Source != b.chunk.Source {
		return a.chunk.Source < b.chunk.Source
	}
	if a.chunk.Path != b.chunk.Path {
		return a.chunk.Path < b.chunk.Path
	}
	return a.chunk.Index < b.chunk.Index
}

// unnamedAgentWarning says that no permission names the agent and the
// router's defaultAccess denied its sources. It names no other agent: the
// response goes to the caller, who need not learn who else may read what.
func unnamedAgentWarning(agent string) string {
	if agent == "" {
		return `no agent was given and no AgentPermission names "*", so the router's defaultAccess: Deny denies every source`
	}
	return fmt.Sprintf("no AgentPermission names agent %q, so the router's defaultAccess: Deny denies every source", agent)
}

// KnownAgents lists the agents the router's permissions name ("*" left out),
// sorted: for a local user (query) who mistyped one.
func (s *Snapshot) KnownAgents() []string {
	var out []string
	for i := range s.perms {
		for _, a := range s.perms[i].Spec.Agents {
			if a != "*" {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
