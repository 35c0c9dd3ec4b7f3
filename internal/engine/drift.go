package engine

import (
	"fmt"
	"io"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// PendingTool is a tool a source holds back under approval Manual
// (api.md §10.9); the same in /v1/status and in the source's status.
type PendingTool = v1alpha1.PendingTool

// toolReview is what a tool source's approval made of its catalog.
type toolReview struct {
	approval v1alpha1.ToolApproval
	// approved are the annotation's digests by id (nil without one).
	approved map[string]string
	// digest is the catalog digest of the catalog as read, pending tools
	// included; "" when no catalog was read.
	digest  string
	pending []PendingTool
}

// review digests a tool source's catalog, and under Manual keeps the tools
// whose digest the annotation approves: the others are pending, in id order
// (the catalog's). The catalog digest and the pending tools go into the
// snapshot hash, so that a change of either swaps the snapshot in.
func (r *toolReview) review(catalog []v1alpha1.Tool, h io.Writer) []v1alpha1.Tool {
	digests := make(map[string]string, len(catalog))
	served := catalog[:0:0]
	r.pending = nil
	for i := range catalog {
		t := &catalog[i]
		id, d := t.ID(), v1alpha1.ToolDigest(t)
		digests[id] = d
		if r.approval != v1alpha1.ToolApprovalManual {
			continue
		}
		switch old, ok := r.approved[id]; {
		case !ok:
			r.pending = append(r.pending, PendingTool{ID: id, Digest: d, Change: v1alpha1.ToolNew})
		case old != d:
			r.pending = append(r.pending, PendingTool{ID: id, Digest: d, Change: v1alpha1.ToolChanged, Fields: v1alpha1.ChangedParts(old, d)})
		default:
			served = append(served, *t)
		}
	}
	r.digest = v1alpha1.CatalogDigest(digests)
	fmt.Fprintf(h, "tools digest\x00%s\x00pending\x00%d\x00", r.digest, len(r.pending))
	if r.approval != v1alpha1.ToolApprovalManual {
		return catalog
	}
	return served
}
