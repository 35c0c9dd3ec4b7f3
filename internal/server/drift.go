package server

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
)

// maxStatusPending bounds the pending tools /v1/status lists per source
// (pending_tools counts them all): a catalog switched to Manual without
// approvals holds back every tool, up to 10,000.
const maxStatusPending = 100

// maxLoggedPending bounds the tools one log line names.
const maxLoggedPending = 10

var pendingApprovalDesc = prometheus.NewDesc(metricsNamespace+"_tools_pending_approval",
	"Tools a source holds back under approval Manual: new or changed since their approved digest (api.md §10.9).", []string{"source"}, nil)

// collectPending reports, per source under approval Manual, how many tools
// it holds back (0 included, so that an alert can see the source).
func collectPending(ch chan<- prometheus.Metric, src *engine.SourceStatus) {
	if src.Approval == v1alpha1.ToolApprovalManual {
		ch <- prometheus.MustNewConstMetric(pendingApprovalDesc, prometheus.GaugeValue, float64(len(src.Pending)), src.Name)
	}
}

// setPending fills the approval fields of a source's status.
func setPending(ss *SourceStatus, src *engine.SourceStatus) {
	ss.ToolsDigest, ss.Approval = src.ToolsDigest, string(src.Approval)
	if src.Approval != v1alpha1.ToolApprovalManual || src.ToolsDigest == "" {
		return
	}
	n := len(src.Pending)
	ss.PendingTools = &n
	ss.Pending = src.Pending[:min(n, maxStatusPending)]
}

// newlyPending are, per source in name order, the tools the snapshot of cur
// holds back (each at its digest) that the one of old did not: what a log
// line and an Event announce once.
func newlyPending(old, cur *state) []sourcePending {
	before := map[string]bool{}
	if old != nil {
		for _, src := range old.snap.Sources() {
			for _, p := range src.Pending {
				before[src.Name+"\x00"+p.ID+"\x00"+p.Digest] = true
			}
		}
	}
	var out []sourcePending
	for _, src := range cur.snap.Sources() {
		sp := sourcePending{source: src.Name, pending: len(src.Pending)}
		for _, p := range src.Pending {
			if !before[src.Name+"\x00"+p.ID+"\x00"+p.Digest] {
				sp.fresh = append(sp.fresh, p)
			}
		}
		if len(sp.fresh) > 0 {
			out = append(out, sp)
		}
	}
	return out
}

// sourcePending are the tools one source newly holds back, and how many it
// holds back in all.
type sourcePending struct {
	source  string
	pending int
	fresh   []engine.PendingTool
}

// describePending says what a held-back tool is: "id (New)" or
// "id (Changed: description, inputSchema)".
func describePending(p engine.PendingTool) string {
	what := p.Change
	if len(p.Fields) > 0 {
		what += ": " + strings.Join(p.Fields, ", ")
	}
	return fmt.Sprintf("%s (%s)", p.ID, what)
}

// logPending is the log line of tools held back: one warning per source
// whose snapshot holds back a tool (or a digest of it) the serving one did
// not, naming the first of them and what changed.
func (s *Server) logPending(fresh []sourcePending) {
	for _, sp := range fresh {
		var names []string
		for _, p := range sp.fresh[:min(len(sp.fresh), maxLoggedPending)] {
			names = append(names, describePending(p))
		}
		shown := strings.Join(names, ", ")
		if len(sp.fresh) > maxLoggedPending {
			shown += fmt.Sprintf(", and %d more", len(sp.fresh)-maxLoggedPending)
		}
		s.log.Warn("tools held back pending approval: not served until the approved-tools annotation holds their digests",
			"source", sp.source, "reason", "ToolsPendingApproval", "new_pending", len(sp.fresh), "pending", sp.pending, "tools", shown)
	}
}
