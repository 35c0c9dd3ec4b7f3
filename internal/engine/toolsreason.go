package engine

import (
	"fmt"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Why a query's tools are empty: stats.tools.reason (api.md §10.3). The
// values are stable; clients and scripts compare them.
const (
	ToolsNoToolSource  = "no_tool_source"
	ToolsSourcesDenied = "sources_denied"
	ToolsSourcesFailed = "sources_failed"
	ToolsEmptyCatalog  = "empty_catalog"
	ToolsAllDenied     = "all_denied"
	ToolsNoMatch       = "no_match"
	ToolsBelowMinScore = "below_min_score"
)

// toolsReasonText says what each reason means, for people (the CLI).
var toolsReasonText = map[string]string{
	ToolsNoToolSource:  "no matched route names a tool source",
	ToolsSourcesDenied: "the agent may read none of the matched routes' tool sources",
	ToolsSourcesFailed: "no tool source of the matched routes has a catalog (see failed sources)",
	ToolsEmptyCatalog:  "the tool sources of the matched routes hold no tools",
	ToolsAllDenied:     "the agent's tool rules deny every candidate",
	ToolsNoMatch:       "no tool the agent may use shares a word with the question",
	ToolsBelowMinScore: "every card scored below spec.tools.minScore",
}

// ToolsReasons lists the reasons in the order they are decided.
func ToolsReasons() []string {
	return []string{ToolsNoToolSource, ToolsSourcesDenied, ToolsSourcesFailed, ToolsEmptyCatalog, ToolsAllDenied, ToolsNoMatch, ToolsBelowMinScore}
}

// ToolsReasonText says what a reason means; "" for none.
func ToolsReasonText(reason string) string { return toolsReasonText[reason] }

// toolFacts is what a query found on its way to the tool cards.
type toolFacts struct {
	// routed: a matched route names a tool source.
	routed bool
	// serving counts those the agent may read that have a catalog.
	serving int
	// failed: one the agent may read has no catalog (failed to load).
	failed bool
	stats  ToolStats
}

// toolsReason decides why the tools of an answer are empty ("" when there
// are cards): the first cause that holds, from the routes down to minScore.
// minConfidence only adds cards, so it is never the reason.
func toolsReason(f toolFacts) string {
	switch {
	case f.stats.Returned > 0:
		return ""
	case !f.routed:
		return ToolsNoToolSource
	case f.serving == 0 && f.failed:
		return ToolsSourcesFailed
	case f.serving == 0:
		return ToolsSourcesDenied
	case f.stats.Candidates == 0:
		return ToolsEmptyCatalog
	case f.stats.Denied == f.stats.Candidates:
		return ToolsAllDenied
	case f.stats.BelowThreshold > 0:
		// The best card is always kept by the other cuts, so an empty
		// shortlist that had cards lost them all to minScore.
		return ToolsBelowMinScore
	default:
		return ToolsNoMatch
	}
}

// setToolsReason fills stats.tools.reason of an answer: routed says whether
// a matched route named a tool source, serving are the ones whose tools
// were candidates, failed the answer's failed sources.
func (s *Snapshot) setToolsReason(st *ToolStats, routed bool, serving []*sourceState, failed []SourceFailure) {
	f := toolFacts{routed: routed, serving: len(serving), stats: *st}
	for _, sf := range failed {
		// Only readable tool sources reach failed_sources; a stale one still serves.
		if src := s.sources[sf.Source]; src != nil && src.isToolSource() && !toolsServing(src) {
			f.failed = true
		}
	}
	st.Reason = toolsReason(f)
}

// agentUnnamed reports whether the router's defaultAccess alone decides
// for the agent: no AgentPermission names it, and the default denies.
func agentUnnamed(access *Access) bool {
	return len(access.Permissions) == 0 && access.Default != v1alpha1.AccessAllow
}

// ToolWarnings are the warnings of a tool answer (the CLI's tools command):
// as a query's (§6.2 warnings), when the agent's tool sources were denied
// because no permission names it.
func (s *Snapshot) ToolWarnings(agent string, deniedSources int) []string {
	if deniedSources > 0 && agentUnnamed(s.accessFor(agent)) {
		return []string{unnamedAgentWarning(agent)}
	}
	return nil
}

// ToolTreeWarnings are the warnings of the choice graph of an agent: a
// query's warning when no permission names it and a tool source is denied
// to it, and a word when it may use none of the router's tools.
func (s *Snapshot) ToolTreeWarnings(agent string, tree ToolNode) []string {
	access := s.accessFor(agent)
	denied := 0
	for _, st := range s.byGroup {
		if st.isToolSource() && !toolReadable(access, st) {
			denied++
		}
	}
	var out []string
	if denied > 0 && agentUnnamed(access) {
		out = append(out, unnamedAgentWarning(agent))
	}
	if n := s.Tools(); n > 0 && len(tree.Children) == 0 && len(tree.Tools) == 0 {
		who := fmt.Sprintf("agent %q", agent)
		if agent == "" {
			who = "no agent was given, and an agent without a name"
		}
		out = append(out, fmt.Sprintf("%s may use none of the router's %d tools", who, n))
	}
	return out
}
