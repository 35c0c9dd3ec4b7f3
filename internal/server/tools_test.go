package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// toolManifests is a router with an inline tool catalog and a catalog folder
// (./catalog), both routed to every question, and a permission that keeps
// the support bot away from destructive and financial tools.
const toolManifests = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: tools}
spec:
  defaultAccess: Allow
  tools: {topK: 3}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: billing-tools}
spec:
  type: Tools
  tools:
    catalog:
    - name: create_invoice
      namespace: billing.invoices
      description: Create an invoice for a customer and send it by e-mail.
      inputSchema: {type: object, properties: {customer: {type: string}}, required: [customer]}
      sideEffects: Write
      safetyTags: [financial]
    - name: list_invoices
      namespace: billing.invoices
      description: List the invoices of a customer.
      sideEffects: Read
    - name: delete_invoice
      namespace: billing.invoices
      description: Delete a draft invoice of a customer.
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: file-tools}
spec:
  type: Tools
  tools:
    directory: {path: ./catalog}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: tools}
spec:
  sources: [{name: billing-tools}, {name: file-tools}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: support}
spec:
  agents: [support-bot]
  default: Allow
  tools: {maxSideEffects: Write, denySafetyTags: [financial]}
`

func toolsServer(t *testing.T, opts Options) (*testServer, string) {
	t.Helper()
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), toolManifests)
	if err := os.MkdirAll(filepath.Join(dir, "catalog"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "catalog", "crm.yaml"), "- {name: find_customer, namespace: crm, description: Find a customer by name., sideEffects: Read}\n")
	opts.Paths = []string{dir}
	ts := startServer(t, opts)
	ts.waitReady()
	return ts, dir
}

func postTools(t *testing.T, ts *testServer, body string) (int, engine.ToolsResponse, string) {
	t.Helper()
	code, b := ts.do(http.MethodPost, "/v1/tools", strings.NewReader(body), nil)
	var resp engine.ToolsResponse
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &resp); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	return code, resp, string(b)
}

func TestToolsEndpoint(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	code, resp, raw := postTools(t, ts, `{"text": "create an invoice for a customer", "max_tools": 2}`)
	if code != 200 || len(resp.Tools) != 2 || resp.Tools[0].Name != "create_invoice" {
		t.Fatalf("%d %s", code, raw)
	}
	// Only the tool part of an answer, and never a schema.
	var fields map[string]json.RawMessage
	_ = json.Unmarshal([]byte(raw), &fields)
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"denied_sources", "failed_sources", "matched_routes", "route_errors", "stats", "tools"}; !slices.Equal(keys, want) {
		t.Errorf("fields %q, want %q", keys, want)
	}
	if strings.Contains(raw, "inputSchema") || strings.Contains(raw, `"required"`) {
		t.Errorf("a card holds the schema: %s", raw)
	}
	if string(fields["stats"]) != `{"tools":{"candidates":4,"denied":0,"below_threshold":0,"below_cut":0,"returned":2}}` {
		t.Errorf("stats = %s", fields["stats"])
	}
	// The same shortlist as /v1/query.
	q := ts.query(engine.Request{Text: "create an invoice for a customer", MaxTools: 2})
	if !sameCards(q.Tools, resp.Tools) || q.Stats.Tools != resp.Stats.Tools {
		t.Errorf("query tools %+v, tools endpoint %+v", q.Tools, resp.Tools)
	}
	if v, ok := ts.metric("contextrouter_tools_returned"); !ok || v != 2 {
		t.Errorf("tools_returned observations = %v, %v; want 2 (one per answer)", v, ok)
	}
	// A query whose route names a tool source is observed even when its
	// shortlist is empty: the zeros are what the histogram is for.
	if q := ts.query(engine.Request{Text: "xyzzy plugh"}); len(q.Tools) != 0 || q.Stats.Tools.Reason != engine.ToolsNoMatch {
		t.Fatalf("tools %+v, stats %+v; want none, no_match", q.Tools, q.Stats.Tools)
	}
	if v, _ := ts.metric("contextrouter_tools_returned"); v != 3 {
		t.Errorf("tools_returned observations = %v after an empty shortlist; want 3", v)
	}

	// The agent's tool rules apply.
	_, resp, raw = postTools(t, ts, `{"text": "invoice customer", "agent": "support-bot", "max_tools": 10}`)
	for _, c := range resp.Tools {
		if c.Name == "create_invoice" || c.Name == "delete_invoice" {
			t.Errorf("support-bot got %s: %s", c.Name, raw)
		}
	}
	if resp.Stats.Tools.Denied != 2 {
		t.Errorf("stats.tools = %+v, want 2 denied", resp.Stats.Tools)
	}

	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"text": "x", "max_tools": 101}`, 400, "bad request: max_tools is 101; it must be between 0 and 100"},
		{`{"text": "x", "max_tools": -1}`, 400, "max_tools is -1"},
		{`{"text": ""}`, 400, "text must not be empty"},
		{`{"text": "x", "bogus": 1}`, 400, `unknown field \"bogus\"`},
	} {
		if code, b := ts.do(http.MethodPost, "/v1/tools", strings.NewReader(tc.body), nil); code != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.body, code, b, tc.code, tc.want)
		}
	}
	if code, b := ts.do(http.MethodGet, "/v1/tools", nil, nil); code != 405 || !strings.Contains(string(b), "use POST") {
		t.Errorf("GET /v1/tools: %d %s", code, b)
	}
}

func sameCards(a, b []engine.ToolCard) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// treeIDs lists the tool ids of a tree, depth first.
func treeIDs(n engine.ToolNode) []string {
	var out []string
	for _, c := range n.Tools {
		id := c.Name
		if c.Namespace != "" {
			id = c.Namespace + "." + c.Name
		}
		out = append(out, id)
	}
	for _, ch := range n.Children {
		out = append(out, treeIDs(ch)...)
	}
	return out
}

func getTree(t *testing.T, ts *testServer, query string) (int, []string, string) {
	t.Helper()
	code, b := ts.get("/v1/tools/tree" + query)
	var tree struct {
		Root *engine.ToolNode `json:"root"`
	}
	if code == http.StatusOK {
		if err := json.Unmarshal(b, &tree); err != nil || tree.Root == nil {
			t.Fatalf("%v: %s", err, b)
		}
		ids := treeIDs(*tree.Root)
		slices.Sort(ids)
		return code, ids, string(b)
	}
	return code, nil, string(b)
}

func TestToolTreeEndpoint(t *testing.T) {
	ts, _ := toolsServer(t, Options{})
	all := []string{"billing.invoices.create_invoice", "billing.invoices.delete_invoice", "billing.invoices.list_invoices", "crm.find_customer"}
	code, ids, raw := getTree(t, ts, "")
	if code != 200 || !slices.Equal(ids, all) {
		t.Fatalf("%d %q: %s", code, ids, raw)
	}
	if strings.Contains(raw, `"score"`) || strings.Contains(raw, "inputSchema") {
		t.Errorf("tree cards carry a score or a schema: %s", raw)
	}
	if _, ids, raw = getTree(t, ts, "?agent=support-bot"); !slices.Equal(ids, []string{"billing.invoices.list_invoices", "crm.find_customer"}) {
		t.Errorf("support-bot: %q: %s", ids, raw)
	}
	for _, tc := range []struct {
		query string
		code  int
		want  string
	}{
		{"?agent=" + strings.Repeat("a", 254), 400, "agent is 254 bytes; it is limited to 253 bytes"},
		{"?agnet=x", 400, `unknown query parameter \"agnet\"`},
	} {
		if code, _, raw := getTree(t, ts, tc.query); code != tc.code || !strings.Contains(raw, tc.want) {
			t.Errorf("%s: %d %s", tc.query, code, raw)
		}
	}
	if code, b := ts.do(http.MethodPost, "/v1/tools/tree", nil, nil); code != 405 {
		t.Errorf("POST tree: %d %s", code, b)
	}
}

func TestToolsPinnedAgent(t *testing.T) {
	ts, _ := toolsServer(t, Options{Agent: "support-bot"})
	want := []string{"billing.invoices.list_invoices", "crm.find_customer"}
	if code, ids, raw := getTree(t, ts, ""); code != 200 || !slices.Equal(ids, want) {
		t.Errorf("tree of the pinned agent: %d %q %s", code, ids, raw)
	}
	if code, ids, _ := getTree(t, ts, "?agent=support-bot"); code != 200 || !slices.Equal(ids, want) {
		t.Errorf("naming the pinned agent: %d %q", code, ids)
	}
	if code, _, raw := getTree(t, ts, "?agent=admin"); code != 403 || !strings.Contains(raw, `agent \"admin\" is not allowed`) {
		t.Errorf("another agent's tree: %d %s", code, raw)
	}
	if code, _, raw := postTools(t, ts, `{"text": "invoice", "agent": "admin"}`); code != 403 {
		t.Errorf("another agent's tools: %d %s", code, raw)
	}
	_, resp, _ := postTools(t, ts, `{"text": "delete the invoice", "max_tools": 10}`)
	for _, c := range resp.Tools {
		if c.Name == "delete_invoice" {
			t.Error("the pinned agent got a destructive tool")
		}
	}
}

// TestServeKeepsLastGoodCatalog: a catalog file edited into something
// invalid keeps its last good tools serving, and says why in
// failed_sources; the fix is picked up.
func TestServeKeepsLastGoodCatalog(t *testing.T) {
	ts, dir := toolsServer(t, Options{})
	file := filepath.Join(dir, "catalog", "crm.yaml")
	hash := ts.status().SnapshotHash
	writeAtomic(t, file, "- {name: find_customer, namespace: crm, description: Find a customer by name., sideEffects: Sometimes}\n")
	eventually(t, 10*time.Second, "a reload after the bad edit", func() bool { return ts.status().SnapshotHash != hash })
	_, resp, raw := postTools(t, ts, `{"text": "find a customer by name"}`)
	if len(resp.Tools) == 0 || resp.Tools[0].Name != "find_customer" {
		t.Fatalf("the last good catalog does not answer: %s", raw)
	}
	if len(resp.FailedSources) != 1 || resp.FailedSources[0].Source != "file-tools" ||
		!strings.Contains(resp.FailedSources[0].Error, `crm.yaml:1: [0].sideEffects: Unsupported value: "Sometimes"`) {
		t.Errorf("failed_sources = %+v", resp.FailedSources)
	}
	writeAtomic(t, file, "- {name: lookup_customer, namespace: crm, description: Find a customer by name., sideEffects: Read}\n")
	eventually(t, 10*time.Second, "the fixed catalog", func() bool {
		_, resp, _ := postTools(t, ts, `{"text": "find a customer by name"}`)
		return len(resp.FailedSources) == 0 && len(resp.Tools) > 0 && resp.Tools[0].Name == "lookup_customer"
	})
	if st := ts.status(); !slices.ContainsFunc(st.Sources, func(s SourceStatus) bool { return s.Name == "file-tools" && s.Tools == 1 }) {
		t.Errorf("status sources = %+v", st.Sources)
	}
}
