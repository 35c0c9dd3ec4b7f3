package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/index"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/sources"
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
	// Tools are the shortlisted tool cards (api.md §10.3); [] when no
	// matched route names a tool source.
	Tools            []ToolCard `json:"tools"`
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
	Candidates int     `json:"candidates"`
	Included   int     `json:"included"`
	Redacted   int     `json:"redacted"`
	Dropped    Dropped `json:"dropped"`
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
}

// Query runs the pipeline. Request errors (wrapping ErrBadRequest) and a
// context that ends while route conditions are evaluated (*StoppedError) are
// returned; failing routes and sources are reported in the response.
func (s *Snapshot) Query(ctx context.Context, req Request) (*Response, error) {
	start := time.Now()
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	resp := &Response{
		// One allocation for the route matches of most queries.
		Chunks: []Chunk{}, MatchedRoutes: []string{}, RouteMatches: make([]RouteMatch, 0, min(len(s.routes), 4)), DeniedSources: []string{},
		FailedSources: []SourceFailure{}, RouteErrors: []RouteError{}, Tools: []ToolCard{},
	}

	// 1. Routes: every matching route contributes its sources, in route order.
	rt, err := s.route(ctx, &req, resp)
	if err != nil {
		return nil, err
	}

	// 2-3. Permissions, then fetch per-query sources concurrently, while the
	// index is scored. A route whose sources all failed calls its alternate,
	// whose sources go through the same steps once the first fetches are in.
	g := gathering{allowed: make([]bool, len(s.byGroup))}
	if s.hasAlternates {
		g.outcome = make([]uint8, len(s.byGroup))
	}
	access := s.accessFor(req.Agent)
	s.admit(rt.srcNames, access, resp, &g)
	s.startFetches(ctx, req.Text, rt.caps, &g)
	if s.hasAlternates && len(rt.served) > 0 {
		g.wg.Wait()
		s.reportFetchFailures(resp, &g)
		if alt := s.alternates(&rt, g.outcome, resp); len(alt) > 0 {
			s.admit(alt, access, resp, &g)
			s.startFetches(ctx, req.Text, rt.caps, &g)
		}
	}
	allowed, hasTools := g.allowed, g.hasTools

	q := s.ix.NewQuery(req.Text, s.scorer == v1alpha1.ScorerKeyword)
	var hits []index.Hit
	if s.scorer == v1alpha1.ScorerKeyword {
		hits = s.ix.Keyword(nil, q, allowed)
	} else {
		hits = s.ix.BM25(nil, q, allowed)
	}
	cands := make([]candidate, 0, len(hits)+8)
	for _, h := range hits {
		cands = append(cands, s.staticCandidate(h.Doc, h.Score))
	}
	// Inline text reaches every query its routes match, even without a shared term.
	for _, st := range s.byGroup {
		if !allowed[st.group] || len(st.always) == 0 {
			continue
		}
		for _, d := range st.always {
			if !hasDoc(hits, d) {
				cands = append(cands, s.staticCandidate(d, 0))
			}
		}
	}
	g.wg.Wait()
	s.reportFetchFailures(resp, &g)
	for i, st := range g.fetch {
		if g.results[i].err != nil {
			continue
		}
		for _, c := range g.results[i].chunks {
			c.Source = st.name
			var score float64
			if s.scorer == v1alpha1.ScorerKeyword {
				score = index.KeywordText(q, c.Title, c.Content)
			} else {
				score = s.ix.BM25Text(q, c.Title, c.Content)
			}
			cands = append(cands, candidate{chunk: c, doc: -1, score: score, tokens: s.est.Count(c.Content), priority: s.sources[st.name].priority})
		}
	}
	resp.Stats.Candidates = len(cands)
	if hasTools {
		resp.Tools, resp.Stats.Tools = s.selectTools(&req, access, g.toolSrcs)
	}

	// 4. Path and sensitivity filters.
	kept := cands[:0]
	for _, c := range cands {
		if access.PathDenied(c.chunk.Path) {
			resp.Stats.Dropped.PathDenied++
			continue
		}
		st := s.sources[c.chunk.Source]
		if !access.Cleared(st.sensitivity) {
			if access.SensitivityAction != v1alpha1.SensitivityActionRedact {
				resp.Stats.Dropped.Sensitivity++
				continue
			}
			c.chunk.Content = RedactedContent(st.name, st.sensitivity)
			c.tokens = s.est.Count(c.chunk.Content)
			c.redacted = true
			c.doc = -1
			c.terms = []uint32{}
		}
		kept = append(kept, c)
	}
	cands = kept

	// 5. Scores are normalised to 0..1 per query.
	var maxScore float64
	for _, c := range cands {
		maxScore = math.Max(maxScore, c.score)
	}
	if maxScore > 0 {
		for i := range cands {
			cands[i].score /= maxScore
		}
	}

	// 6-7. Rank, drop near-duplicates, fill the budget.
	limit := s.maxTokens
	if req.MaxTokens > 0 && req.MaxTokens < limit {
		limit = req.MaxTokens
	}
	limit -= s.reserveTokens
	if limit < 0 {
		limit = 0
	}
	s.fill(resp, cands, limit, req.MaxChunks)

	// 8. Assemble.
	parts := make([]string, len(resp.Chunks))
	for i, c := range resp.Chunks {
		parts[i] = c.Content
		resp.TotalTokens += c.TokenCount
	}
	resp.Text = strings.Join(parts, "\n\n")
	resp.Stats.Included = len(resp.Chunks)
	resp.EvaluationTimeMS = math.Round(float64(time.Since(start).Microseconds())) / 1000
	return resp, nil
}

// StoppedError is returned by Query when its context ends (deadline or
// cancellation) while route conditions are evaluated: the answer would depend
// on conditions that were not evaluated, so there is none.
type StoppedError struct {
	// Route is the route whose condition was stopped or was next.
	Route string
	// Err is the context's error (context.DeadlineExceeded or context.Canceled).
	Err error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped while evaluating the condition of route %q: %v", e.Route, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// TimeoutMessage is how the server and the CLI report a query stopped by its timeout.
func (e *StoppedError) TimeoutMessage(timeout time.Duration) string {
	return fmt.Sprintf("query exceeded the %s timeout while evaluating the condition of route %q", timeout, e.Route)
}

// matchRoutes evaluates the route conditions (route) and returns the
// sources of the serving routes, deduplicated, in route order.
func (s *Snapshot) matchRoutes(ctx context.Context, req *Request, resp *Response) ([]string, error) {
	rt, err := s.route(ctx, req, resp)
	return rt.srcNames, err
}

// route evaluates every route condition and records matches and errors in
// resp; when no route matched, the fallback routes' conditions follow. It
// stops with a *StoppedError when ctx ends: between routes, and inside a
// condition's comprehensions.
func (s *Snapshot) route(ctx context.Context, req *Request, resp *Response) (routing, error) {
	act := newActivation(req, s.vars)
	if s.wordsOnText {
		act.question.register(req.Text)
		defer act.question.unregister()
	}
	done := ctx.Done()
	var rt routing
	for _, fallbacks := range [2]bool{false, true} {
		if fallbacks && (!s.hasFallback || len(resp.MatchedRoutes) > 0) {
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
			if fallbacks {
				matchedBy = MatchedByFallback
				resp.Stats.Routes.Fallback++
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
	// capRoute is the route whose timeout bounded the fetch ("" = none did).
	capRoute string
}

// admit sorts sources by what the agent may do with them: denied, failed to
// load, to fetch, or to search.
func (s *Snapshot) admit(names []string, access *Access, resp *Response, g *gathering) {
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
					return
				}
			}
			// The source enforces its own timeout with a precise message; this is a backstop.
			timeout, capRoute := st.timeout+time.Second, ""
			if caps != nil {
				if c := caps[st.group]; c.timeout > 0 && c.timeout < st.timeout {
					// The route's timeout ends first; the source reports it as its own
					// ("timeout after 100ms"), and the failure names the route.
					timeout, capRoute = c.timeout, c.route
				}
			}
			fctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			chunks, err := st.query.Fetch(fctx, text)
			if err == nil && cached {
				s.cache.Put(st.cacheKey, text, chunks)
			}
			results := fetched{chunks: chunks, err: err}
			if err != nil && capRoute != "" && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				results.capRoute = capRoute
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
	return candidate{chunk: d.chunk, doc: int64(doc), score: score, tokens: d.tokens, priority: s.byGroup[s.ix.Group(doc)].priority}
}

func hasDoc(hits []index.Hit, d uint32) bool {
	// hits are in doc order.
	lo, hi := 0, len(hits)
	for lo < hi {
		m := (lo + hi) / 2
		if hits[m].Doc < d {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(hits) && hits[lo].Doc == d
}

const maxCachedAgents = 4096

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
func (s *Snapshot) fill(resp *Response, cands []candidate, limit, maxChunks int) {
	h := &rankHeap{c: cands, idx: make([]int32, len(cands)), less: s.lessFunc()}
	for i := range h.idx {
		h.idx[i] = int32(i)
	}
	heap.Init(h)
	remaining := limit
	minTokens := math.MaxInt
	for _, c := range cands {
		minTokens = min(minTokens, c.tokens)
	}
	var included []*candidate
	extra := map[string]uint32{}
	dedup := dedupSet{t: s.dedup}
	full := false
	for h.Len() > 0 {
		// Stop when nothing more can go in: the budget is full, no candidate fits
		// whole and none can be cut (Drop, or too little room left to cut into),
		// or max_chunks is reached. The rest is counted as dropped for budget.
		cannotFit := remaining < minTokens && (s.truncation == v1alpha1.TruncationDrop || remaining < minUsefulTokens)
		if full || cannotFit || (maxChunks > 0 && len(included) >= maxChunks) {
			resp.Stats.Dropped.Budget += h.Len()
			resp.WasTruncated = true
			break
		}
		c := cands[heap.Pop(h).(int32)]
		if s.dedup > 0 && !c.redacted {
			if c.terms == nil {
				if c.doc >= 0 {
					c.terms = s.ix.DocTerms(uint32(c.doc))
				} else {
					c.terms = s.ix.TermIDs(c.chunk.Title+"\n"+c.chunk.Content, extra)
				}
			}
			if dedup.duplicate(c.terms) {
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
			dedup.add(c.terms)
		}
		included = append(included, &cc)
		resp.Chunks = append(resp.Chunks, toChunk(&cc))
	}
}

// dedupSet holds the term sets of included chunks. Few sets are compared
// pairwise (JaccardAtLeast rejects most pairs in a few steps); past
// pairwiseLimit an inverted map of prefix terms (see index.PrefixLen) picks
// the only sets worth verifying.
type dedupSet struct {
	t        float64
	sets     [][]uint32
	prefixes map[uint32][]int32
}

const pairwiseLimit = 32

func (d *dedupSet) duplicate(terms []uint32) bool {
	if d.prefixes == nil {
		for _, o := range d.sets {
			if index.JaccardAtLeast(terms, o, d.t) {
				return true
			}
		}
		return false
	}
	for _, r := range terms[:index.PrefixLen(len(terms), d.t)] {
		for _, pos := range d.prefixes[r] {
			if index.JaccardAtLeast(terms, d.sets[pos], d.t) {
				return true
			}
		}
	}
	return false
}

func (d *dedupSet) add(terms []uint32) {
	d.sets = append(d.sets, terms)
	switch {
	case len(d.sets) == pairwiseLimit:
		d.prefixes = make(map[uint32][]int32, pairwiseLimit*16)
		for i, set := range d.sets {
			d.index(set, i)
		}
	case len(d.sets) > pairwiseLimit:
		d.index(terms, len(d.sets)-1)
	}
}

func (d *dedupSet) index(terms []uint32, pos int) {
	for _, r := range terms[:index.PrefixLen(len(terms), d.t)] {
		d.prefixes[r] = append(d.prefixes[r], int32(pos))
	}
}

func toChunk(c *candidate) Chunk {
	md := ChunkMetadata{Chunk: c.chunk.Index, Commit: c.chunk.Commit, Redacted: c.redacted}
	if !c.chunk.ModTime.IsZero() {
		md.MTime = c.chunk.ModTime.UTC().Format(time.RFC3339)
	}
	return Chunk{
		Content: c.chunk.Content, Source: c.chunk.Source, Title: c.chunk.Title, Path: c.chunk.Path,
		RelevanceScore: math.Round(c.score*1e4) / 1e4, TokenCount: c.tokens, Metadata: md,
	}
}

// lessFunc orders candidates for the router's strategy. Ties are broken by
// source priority, source name, path and chunk index, so output is stable.
func (s *Snapshot) lessFunc() func(a, b *candidate) bool {
	tie := func(a, b *candidate) bool {
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
	switch s.strategy {
	case v1alpha1.RankingRecency:
		return func(a, b *candidate) bool {
			if !a.chunk.ModTime.Equal(b.chunk.ModTime) {
				return a.chunk.ModTime.After(b.chunk.ModTime)
			}
			if a.score != b.score {
				return a.score > b.score
			}
			return tie(a, b)
		}
	case v1alpha1.RankingManual:
		return func(a, b *candidate) bool {
			if a.priority != b.priority {
				return a.priority > b.priority
			}
			if a.score != b.score {
				return a.score > b.score
			}
			return tie(a, b)
		}
	default:
		return func(a, b *candidate) bool {
			if a.score != b.score {
				return a.score > b.score
			}
			return tie(a, b)
		}
	}
}

// rankHeap orders candidate positions, so swaps move ints, not chunks.
type rankHeap struct {
	c    []candidate
	idx  []int32
	less func(a, b *candidate) bool
}

func (h *rankHeap) Len() int           { return len(h.idx) }
func (h *rankHeap) Less(i, j int) bool { return h.less(&h.c[h.idx[i]], &h.c[h.idx[j]]) }
func (h *rankHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *rankHeap) Push(x any)         { h.idx = append(h.idx, x.(int32)) }
func (h *rankHeap) Pop() any {
	n := len(h.idx) - 1
	x := h.idx[n]
	h.idx = h.idx[:n]
	return x
}
