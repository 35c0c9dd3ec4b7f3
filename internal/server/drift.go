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
	"Tools a source holds back under approval Manual: new or changed since their approved digest (api.md §10.8).", []string{"source"}, nil)

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

// logPending is the event of a tool held back: one warning per source whose
// snapshot holds back a tool (or a digest of it) the serving one did not,
// naming the first of them and what changed.
func (s *Server) logPending(old, cur *state) {
	before := map[string]bool{}
	if old != nil {
		for _, src := range old.snap.Sources() {
			for _, p := range src.Pending {
				before[src.Name+"\x00"+p.ID+"\x00"+p.Digest] = true
			}
		}
	}
	for _, src := range cur.snap.Sources() {
		var fresh []string
		for _, p := range src.Pending {
			if before[src.Name+"\x00"+p.ID+"\x00"+p.Digest] {
				continue
			}
			what := p.Change
			if len(p.Fields) > 0 {
				what += ": " + strings.Join(p.Fields, ", ")
			}
			fresh = append(fresh, fmt.Sprintf("%s (%s)", p.ID, what))
		}
		if len(fresh) == 0 {
			continue
		}
		shown := strings.Join(fresh[:min(len(fresh), maxLoggedPending)], ", ")
		if len(fresh) > maxLoggedPending {
			shown += fmt.Sprintf(", and %d more", len(fresh)-maxLoggedPending)
		}
		s.log.Warn("tools held back pending approval: not served until the approved-tools annotation holds their digests",
			"source", src.Name, "reason", "ToolsPendingApproval", "new_pending", len(fresh), "pending", len(src.Pending), "tools", shown)
	}
}
