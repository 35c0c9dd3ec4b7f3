package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// approvalConfig is toolsConfig with billing-tools under approval Manual,
// its annotation approving the given digests; web_search (the router's
// fallback) is in billing-tools too, so that a held-back fallback shows.
func approvalConfig(mode v1alpha1.ToolApproval, approved map[string]string) *Config {
	cfg := toolsConfig(func(r *v1alpha1.ContextRouterSpec) {
		r.Tools.MinConfidence = "1"
		r.Tools.Fallback = []v1alpha1.ToolReference{{Source: "billing-tools", Name: "billing.refund_payment"}}
	})
	src := &cfg.Sources[1]
	src.Spec.Tools.Approval = mode
	if approved != nil {
		src.Annotations = map[string]string{v1alpha1.AnnotationApprovedTools: v1alpha1.FormatApprovedTools(approved, "\n")}
	}
	return cfg
}

// TestManualApprovalHoldsBackTools: under Manual, a tool whose digest the
// annotation does not hold (a new tool, one changed since its approval) is
// served nowhere — shortlist, fallback, describe, tree — and is listed as
// pending with what changed; the approved tools serve. Under Auto every tool
// serves, with the same catalog digest.
func TestManualApprovalHoldsBackTools(t *testing.T) {
	digests := map[string]string{}
	for i := range billingCatalog {
		digests[billingCatalog[i].ID()] = v1alpha1.ToolDigest(&billingCatalog[i])
	}
	approved := map[string]string{}
	for id, d := range digests {
		approved[id] = d
	}
	// create_invoice was approved with another description and schema;
	// refund_payment was never approved.
	old := billingCatalog[0]
	old.Description = "Create an invoice."
	old.InputSchema = nil
	approved["billing.invoices.create_invoice"] = v1alpha1.ToolDigest(&old)
	delete(approved, "billing.refund_payment")
	// An approval of a tool the catalog no longer holds changes nothing.
	approved["billing.gone"] = digests["crm.find_customer"]

	manual := compile(t, approvalConfig(v1alpha1.ToolApprovalManual, approved))
	auto := compile(t, approvalConfig(v1alpha1.ToolApprovalAuto, approved))

	ctx := context.Background()
	q := Request{Text: "Create an invoice for ACME and refund the payment"}
	for name, tc := range map[string]struct {
		snap *Snapshot
		want bool
	}{"Manual": {manual, false}, "Auto": {auto, true}} {
		t.Run(name, func(t *testing.T) {
			resp, err := tc.snap.FindTools(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			ids := cardIDs(resp.Tools)
			for _, id := range []string{"billing.invoices.create_invoice", "billing.refund_payment"} {
				if got := slices.Contains(ids, id) || slices.Contains(ids, id+"(fallback)"); got != tc.want {
					t.Errorf("%s in the cards %v: %v, want %v", id, ids, got, tc.want)
				}
				if _, got := tc.snap.DescribeTool("", "billing-tools", id); got != tc.want {
					t.Errorf("describe %s: %v, want %v", id, got, tc.want)
				}
			}
			if !slices.Contains(ids, "billing.invoices.list_invoices") {
				t.Errorf("cards %v: the approved list_invoices is missing", ids)
			}
			tree := treeIDs(tc.snap.ToolTree(""))
			if got := slices.Contains(tree, "billing.refund_payment"); got != tc.want {
				t.Errorf("refund_payment in the tree %v: %v", tree, got)
			}
		})
	}

	status := sourceStatus(t, manual, "billing-tools")
	if status.Approval != v1alpha1.ToolApprovalManual || status.Tools != len(billingCatalog)-2 {
		t.Errorf("status approval %q, tools %d", status.Approval, status.Tools)
	}
	want := []PendingTool{
		{ID: "billing.invoices.create_invoice", Digest: digests["billing.invoices.create_invoice"], Change: v1alpha1.ToolChanged, Fields: []string{"description", "inputSchema"}},
		{ID: "billing.refund_payment", Digest: digests["billing.refund_payment"], Change: v1alpha1.ToolNew},
	}
	if !sameJSON(status.Pending, want) {
		t.Errorf("pending %+v\nwant    %+v", status.Pending, want)
	}
	autoStatus := sourceStatus(t, auto, "billing-tools")
	if autoStatus.ToolsDigest != v1alpha1.CatalogDigest(digests) || status.ToolsDigest != autoStatus.ToolsDigest {
		t.Errorf("catalog digests: Manual %s, Auto %s, want %s", status.ToolsDigest, autoStatus.ToolsDigest, v1alpha1.CatalogDigest(digests))
	}
	if autoStatus.Pending != nil || autoStatus.Tools != len(billingCatalog) {
		t.Errorf("Auto: pending %v, tools %d", autoStatus.Pending, autoStatus.Tools)
	}
	// Approving the current digests serves everything, and is another snapshot.
	all := compile(t, approvalConfig(v1alpha1.ToolApprovalManual, digests))
	if st := sourceStatus(t, all, "billing-tools"); st.Pending != nil || st.Tools != len(billingCatalog) {
		t.Errorf("all approved: pending %v, tools %d", st.Pending, st.Tools)
	}
	if all.Hash() == manual.Hash() {
		t.Error("approving changed nothing in the snapshot hash")
	}
	// Without an annotation everything is new.
	none := compile(t, approvalConfig(v1alpha1.ToolApprovalManual, nil))
	if st := sourceStatus(t, none, "billing-tools"); len(st.Pending) != len(billingCatalog) || st.Tools != 0 {
		t.Errorf("no annotation: %d pending, %d tools", len(st.Pending), st.Tools)
	}
	// A source of another kind has no digest; SkipLoad reads no catalog.
	if st := sourceStatus(t, manual, "prompt"); st.ToolsDigest != "" || st.Approval != "" {
		t.Errorf("inline source status %+v", st)
	}
	skip, err := Compile(ctx, approvalConfig(v1alpha1.ToolApprovalManual, nil), Options{SkipLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := sourceStatus(t, skip, "billing-tools"); st.ToolsDigest != "" || st.Pending != nil {
		t.Errorf("SkipLoad status %+v", st)
	}
}

func sourceStatus(t *testing.T, s *Snapshot, name string) SourceStatus {
	t.Helper()
	for _, st := range s.Sources() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no source %s", name)
	return SourceStatus{}
}

func treeIDs(n ToolNode) []string {
	var out []string
	for _, c := range n.Children {
		out = append(out, treeIDs(c)...)
	}
	for _, t := range n.Tools {
		out = append(out, toolID(t.Namespace, t.Name))
	}
	return out
}
