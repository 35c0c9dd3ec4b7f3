package engine

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// ToolInfo describes a tool for an agent choosing one: never its input
// schema, which the agent asks for when it wants to call the tool.
type ToolInfo struct {
	Name        string               `json:"name"`
	Namespace   string               `json:"namespace"`
	Source      string               `json:"source"`
	Description string               `json:"description"`
	SideEffects v1alpha1.SideEffects `json:"side_effects"`
	SafetyTags  []string             `json:"safety_tags,omitempty"`
	CostHint    string               `json:"cost_hint,omitempty"`
}

// ToolCard is a shortlisted tool (api.md §10.3).
type ToolCard struct {
	ToolInfo
	// Score is the ranking score, 4 decimals.
	Score float64 `json:"score"`
	// Confidence in [0, 1], 4 decimals: the calibrated chance that the
	// tool is one the question needs; what minConfidence compares.
	Confidence float64 `json:"confidence"`
	// Also are the tool's near-duplicates the agent may use, which take no
	// card of their own.
	Also []ToolRef `json:"also,omitempty"`
	// Fallback marks a card the confidence gate added.
	Fallback bool `json:"fallback,omitempty"`
	// Explain says why the card scored and is trusted as it is (the
	// request's explain).
	Explain *tools.Explanation `json:"explain,omitempty"`
}

// ToolRef names a tool: its id (<namespace>.<name>) and source.
type ToolRef struct {
	ID     string `json:"id"`
	Source string `json:"source"`
}

// ToolStats accounts for the tools of a query.
type ToolStats struct {
	// Candidates are the tools of the matched routes' tool sources the agent may read.
	Candidates int `json:"candidates"`
	// Denied are candidates a tool rule removed.
	Denied int `json:"denied"`
	// BelowThreshold are shortlisted cards under minScore, left out.
	BelowThreshold int `json:"below_threshold"`
	// BelowCut are shortlisted cards spec.tools.adaptive left out.
	BelowCut int `json:"below_cut"`
	// Returned is len(tools).
	Returned int `json:"returned"`
	// Reason says why tools is empty (api.md §10.3); "" when there are cards.
	Reason string `json:"reason,omitempty"`
}

// ToolsResponse is the answer of FindTools (POST /v1/tools): the tool part
// of a query's answer; no document is read.
type ToolsResponse struct {
	Tools         []ToolCard         `json:"tools"`
	MatchedRoutes []string           `json:"matched_routes"`
	DeniedSources []string           `json:"denied_sources"`
	FailedSources []SourceFailure    `json:"failed_sources"`
	RouteErrors   []RouteError       `json:"route_errors"`
	Stats         ToolsResponseStats `json:"stats"`
	// Definitions are the cards in the request's format (api.md §10.8).
	Definitions *ToolDefinitions `json:"definitions,omitempty"`
}

// ToolsResponseStats holds the tool stats of a ToolsResponse.
type ToolsResponseStats struct {
	Tools ToolStats `json:"tools"`
}

// ToolNode is a node of the choice graph (GET /v1/tools/tree).
type ToolNode struct {
	Label    string     `json:"label"`
	Children []ToolNode `json:"children"`
	Tools    []ToolInfo `json:"tools"`
}

// toolSettings are the router's spec.tools.
type toolSettings struct {
	topK          int
	minScore      float64
	minConfidence float64
	fallback      []v1alpha1.ToolReference
	expansion     v1alpha1.ToolExpansion
	collapse      float64
	adaptive      bool
	cut           tools.Cut
	learning      v1alpha1.ToolLearningScope
}

// toolEntries are the index positions [lo, hi) of a tool source's tools.
type toolEntries struct{ lo, hi int }

// isToolSource reports whether a source yields tools rather than chunks.
func (st *sourceState) isToolSource() bool { return st.tool != nil }

// toolReadable reports whether the agent may read a tool source: allowed
// (§3) and within its clearance. Tools have no redacted form, so a source
// above the clearance is not read at all.
func toolReadable(access *Access, st *sourceState) bool {
	return access.SourceAllowed(st.name) && access.Cleared(st.sensitivity)
}

// toolsServing reports whether a tool source has a catalog to answer with:
// loaded, or stale with its last good one.
func toolsServing(st *sourceState) bool { return st.loadErr == nil || st.stale }

// usableTools returns, per index entry, whether the agent's tool rules let it
// use the tool; nil when the rules restrict nothing. It is cached per agent.
func (s *Snapshot) usableTools(agent string, access *Access) []bool {
	if !access.Tools.Restricts() || s.toolIx == nil {
		return nil
	}
	if u, ok := s.toolUsable.Load(agent); ok {
		return u.([]bool)
	}
	u := make([]bool, s.toolIx.Len())
	for i := range u {
		u[i] = access.Tools.Usable(&s.toolIx.Entry(i).Tool)
	}
	if s.nToolUsable.Load() < maxCachedAgents {
		if _, loaded := s.toolUsable.LoadOrStore(agent, u); !loaded {
			s.nToolUsable.Add(1)
		}
	}
	return u
}

// selectTools shortlists the tools of srcs (tool sources of matched routes
// that the agent may read and that serve a catalog) for the question.
func (s *Snapshot) selectTools(req *Request, access *Access, srcs []*sourceState) ([]ToolCard, ToolStats) {
	var stats ToolStats
	cards := []ToolCard{}
	if s.toolIx == nil {
		return cards, stats
	}
	usable := s.usableTools(req.Agent, access)
	allowed := make([]bool, s.toolIx.Len())
	n := 0
	for _, st := range srcs {
		for i := st.tools.lo; i < st.tools.hi; i++ {
			stats.Candidates++
			if usable != nil && !usable[i] {
				stats.Denied++
				continue
			}
			allowed[i] = true
			n++
		}
	}
	k := s.tools.topK
	if req.MaxTools > 0 {
		k = req.MaxTools
	}
	best := 0.0
	if n > 0 {
		hits := s.toolIx.SearchLearned(req.Text, k, allowed, req.Learned)
		if s.tools.adaptive {
			all := len(hits)
			hits = s.tools.cut.Keep(hits)
			stats.BelowCut = all - len(hits)
		}
		scored := len(hits)
		hits = slices.DeleteFunc(hits, func(h tools.Hit) bool { return h.Score < s.tools.minScore })
		stats.BelowThreshold = scored - len(hits)
		var exps []tools.Explanation
		if req.Explain {
			exps = s.toolIx.ExplainLearned(req.Text, hits, allowed, req.Learned)
		}
		for i, h := range hits {
			// The gate compares the best card's confidence: cards left out do not count.
			best = math.Max(best, h.Confidence)
			c := s.toolCard(h.Entry, h.Score, h.Confidence)
			for _, o := range h.Also {
				c.Also = append(c.Also, ToolRef{ID: s.toolIx.Entry(o).Tool.ID(), Source: s.toolIx.Entry(o).Source})
			}
			if exps != nil {
				c.Explain = &exps[i]
			}
			cards = append(cards, c)
		}
	}
	if best < s.tools.minConfidence {
		cards = s.addFallback(cards, req.Agent, access, usable)
	}
	stats.Returned = len(cards)
	return cards, stats
}

// addFallback adds the router's fallback tools that the agent may use and
// that are not already shortlisted.
func (s *Snapshot) addFallback(cards []ToolCard, agent string, access *Access, usable []bool) []ToolCard {
	for _, ref := range s.tools.fallback {
		st := s.sources[ref.Source]
		if st == nil || !st.isToolSource() || !toolsServing(st) || !toolReadable(access, st) {
			continue
		}
		i, ok := s.findTool(st, ref.Name)
		if !ok || (usable != nil && !usable[i]) {
			continue
		}
		if slices.ContainsFunc(cards, func(c ToolCard) bool { return c.Source == st.name && toolID(c.Namespace, c.Name) == ref.Name }) {
			continue
		}
		c := s.toolCard(i, 0, 0)
		c.Fallback = true
		cards = append(cards, c)
	}
	return cards
}

func toolID(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// findTool finds a tool of a source by id; a source's entries are sorted by id.
func (s *Snapshot) findTool(st *sourceState, id string) (int, bool) {
	lo, hi := st.tools.lo, st.tools.hi
	i, found := slices.BinarySearchFunc(s.toolEntries[lo:hi], id, func(e tools.Entry, id string) int {
		return strings.Compare(e.Tool.ID(), id)
	})
	return lo + i, found
}

func (s *Snapshot) toolInfo(i int) ToolInfo {
	e := s.toolIx.Entry(i)
	t := &e.Tool
	return ToolInfo{
		Name: t.Name, Namespace: t.Namespace, Source: e.Source, Description: t.Description,
		SideEffects: t.SideEffects, SafetyTags: t.SafetyTags, CostHint: t.CostHint,
	}
}

func (s *Snapshot) toolCard(i int, score, confidence float64) ToolCard {
	return ToolCard{ToolInfo: s.toolInfo(i), Score: round4(score), Confidence: round4(confidence)}
}

func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }

// routeToolSource takes a tool source of a matched route: one the agent may
// not read goes to denied_sources, one without a good catalog to
// failed_sources (a stale one still answers); srcs gains the sources whose
// tools are candidates.
func (s *Snapshot) routeToolSource(st *sourceState, access *Access, resp *Response, srcs []*sourceState) []*sourceState {
	if !toolReadable(access, st) {
		resp.DeniedSources = append(resp.DeniedSources, st.name)
		return srcs
	}
	if st.loadErr != nil {
		resp.FailedSources = append(resp.FailedSources, SourceFailure{Source: st.name, Error: st.loadErr.Error()})
	}
	if toolsServing(st) {
		srcs = append(srcs, st)
	}
	return srcs
}

// FindTools shortlists tools as Query does, without reading any document:
// routes, permissions and the tool sources of the matched routes only.
func (s *Snapshot) FindTools(ctx context.Context, req Request) (*ToolsResponse, error) {
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	if err := s.checkDetect(req.Detect); err != nil {
		return nil, err
	}
	r := &Response{MatchedRoutes: []string{}, RouteErrors: []RouteError{}, DeniedSources: []string{}, FailedSources: []SourceFailure{}}
	srcNames, err := s.matchRoutes(ctx, &req, r, s.queryDetector(ctx, &req))
	if err != nil {
		return nil, err
	}
	access := s.accessFor(req.Agent)
	var srcs []*sourceState
	hasTools := false
	for _, n := range srcNames {
		if st := s.sources[n]; st.isToolSource() {
			hasTools = true
			srcs = s.routeToolSource(st, access, r, srcs)
		}
	}
	resp := &ToolsResponse{
		Tools: []ToolCard{}, MatchedRoutes: r.MatchedRoutes, RouteErrors: r.RouteErrors,
		DeniedSources: r.DeniedSources, FailedSources: r.FailedSources,
	}
	// As in Query: no route naming a tool source, no cards (not even fallbacks).
	if hasTools {
		resp.Tools, resp.Stats.Tools = s.selectTools(&req, access, srcs)
	}
	s.setToolsReason(&resp.Stats.Tools, hasTools, srcs, resp.FailedSources)
	if req.Format != "" {
		resp.Definitions = s.toolDefinitions(req.Format, resp.Tools)
	}
	return resp, nil
}

// DescribeTool returns the full entry of the tool id of a source ("" = the
// first tool source, by name, that has it) if the agent may use it: the
// source readable and serving, the tool allowed by the tool rules.
func (s *Snapshot) DescribeTool(agent, source, id string) (tools.Entry, bool) {
	if s.toolIx == nil {
		return tools.Entry{}, false
	}
	access := s.accessFor(agent)
	usable := s.usableTools(agent, access)
	for _, st := range s.byGroup {
		if !st.isToolSource() || (source != "" && st.name != source) || !toolsServing(st) || !toolReadable(access, st) {
			continue
		}
		if i, ok := s.findTool(st, id); ok && (usable == nil || usable[i]) {
			return *s.toolIx.Entry(i), true
		}
	}
	return tools.Entry{}, false
}

// ToolTree is the choice graph of every tool the agent may use in the
// router's tool sources (no route is evaluated).
func (s *Snapshot) ToolTree(agent string) ToolNode {
	if s.toolIx == nil {
		return ToolNode{Label: "tools", Children: []ToolNode{}, Tools: []ToolInfo{}}
	}
	access := s.accessFor(agent)
	usable := s.usableTools(agent, access)
	allowed := make([]bool, s.toolIx.Len())
	for _, st := range s.byGroup {
		if !st.isToolSource() || !toolsServing(st) || !toolReadable(access, st) {
			continue
		}
		for i := st.tools.lo; i < st.tools.hi; i++ {
			allowed[i] = usable == nil || usable[i]
		}
	}
	return s.toolNode(s.toolIx.Graph(allowed))
}

func (s *Snapshot) toolNode(n *tools.Node) ToolNode {
	out := ToolNode{Label: n.Label, Children: make([]ToolNode, 0, len(n.Children)), Tools: make([]ToolInfo, 0, len(n.Tools))}
	for _, c := range n.Children {
		out.Children = append(out.Children, s.toolNode(c))
	}
	for _, i := range n.Tools {
		out.Tools = append(out.Tools, s.toolInfo(i))
	}
	return out
}

// Tools is the number of tools of the snapshot's tool sources.
func (s *Snapshot) Tools() int { return len(s.toolEntries) }
