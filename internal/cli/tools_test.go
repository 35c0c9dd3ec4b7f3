package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

func TestToolsCommand(t *testing.T) {
	out, stderr, code := run(t, "tools", "-f", quickstart, "-a", "finance-analyst", "-o", "json", "roll back the bad deploy of fleet-api")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var resp engine.ToolsResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// finance-analyst may not read eng-tools: the source is denied.
	if !slices.Equal(resp.DeniedSources, []string{"eng-tools"}) || len(resp.Tools) != 0 {
		t.Errorf("finance-analyst: denied %q, tools %+v", resp.DeniedSources, resp.Tools)
	}
	if strings.Contains(out, `"chunks"`) {
		t.Errorf("the tools answer holds documents:\n%s", out)
	}

	// eng-assistant may use the tools up to Write without paging people: no rollback, no incident.
	out, stderr, code = run(t, "tools", "-f", quickstart, "-a", "eng-assistant", "-o", "json", "roll back the bad deploy of fleet-api")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	resp = engine.ToolsResponse{}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range resp.Tools {
		names = append(names, c.Name)
	}
	if len(names) == 0 || names[0] != "deploy_status" || slices.Contains(names, "rollback_deploy") || slices.Contains(names, "open_incident") {
		t.Errorf("eng-assistant cards = %q", names)
	}
	if st := resp.Stats.Tools; st.Candidates != 5 || st.Denied != 2 || st.Returned != len(names) {
		t.Errorf("stats.tools = %+v", st)
	}
	if strings.Contains(out, "inputSchema") || strings.Contains(out, "properties") {
		t.Errorf("a card holds the schema:\n%s", out)
	}

	out, stderr, code = run(t, "tools", "-f", quickstart, "-a", "eng-assistant", "--max-tools", "1", "who is oncall for the platform team")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"matched routes:  always",
		"tools:           1 of 5 candidates (2 denied by tool rules)",
		"(1) oncall.who_is_on_call  (score ",
		"Read)\n    eng-tools\n    Tell who is on call now for a team",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-tools", "101", "x"}, "max_tools is 101; it must be between 0 and 100"},
		{[]string{"-o", "yaml", "x"}, `--output: must be text or json, not "yaml"`},
		{[]string{"-m", "novalue", "x"}, `--metadata "novalue": want KEY=VALUE`},
	} {
		_, stderr, code := run(t, append([]string{"tools", "-f", quickstart}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestToolsTreeCommand(t *testing.T) {
	out, stderr, code := run(t, "tools", "tree", "-f", quickstart, "-a", "eng-assistant")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"deploys.deploy_status  (Read, eng-tools)", "incidents.list_incidents", "oncall.who_is_on_call"} {
		if !strings.Contains(out, want) {
			t.Errorf("tree lacks %q:\n%s", want, out)
		}
	}
	for _, hidden := range []string{"rollback_deploy", "open_incident"} {
		if strings.Contains(out, hidden) {
			t.Errorf("tree shows %s, which eng-assistant may not use:\n%s", hidden, out)
		}
	}
	out, _, code = run(t, "tools", "tree", "-f", quickstart, "-a", "hr-assistant", "-o", "json")
	var tree struct {
		Root engine.ToolNode `json:"root"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &tree) != nil || len(tree.Root.Tools) != 0 || len(tree.Root.Children) != 0 {
		t.Errorf("hr-assistant may read no tool source: exit %d\n%s", code, out)
	}
	if _, stderr, code := run(t, "tools", "tree", "-f", quickstart, "extra"); code == 0 || !strings.Contains(stderr, "unknown command") && !strings.Contains(stderr, "accepts 0 arg") {
		t.Errorf("tree with an argument: exit %d %s", code, stderr)
	}
}

func TestQueryMaxTools(t *testing.T) {
	resp := queryJSON(t, "-a", "eng-assistant", "--max-tools", "1", "list the open incidents and recent deploys")
	if len(resp.Tools) != 1 || resp.Stats.Tools.Returned != 1 || resp.Tools[0].Name != "list_incidents" {
		t.Errorf("tools = %+v, stats %+v", resp.Tools, resp.Stats.Tools)
	}
	if len(resp.Chunks) == 0 {
		t.Error("no chunks next to the tools")
	}
	out, _, code := run(t, "query", "-f", quickstart, "-a", "eng-assistant", "list the open incidents and recent deploys")
	if code != 0 || !strings.Contains(out, "tools:           2 of 5 candidates (2 denied by tool rules)\n\n(1) incidents.list_incidents") {
		t.Errorf("query text output lacks the tools:\n%s", out)
	}
	// A question no route with tools matches has no tools section.
	out, _, _ = run(t, "query", "-f", quickstart, "-a", "hr-assistant", "How many vacation days do I get?")
	if strings.Contains(out, "tools:") {
		t.Errorf("tools section without tool sources:\n%s", out)
	}
}

// TestToolsEmptyAnswerSaysWhy: an answer without cards says why, in the
// tools and query text and in -o json (issue 20 item 4).
func TestToolsEmptyAnswerSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the tools line
	}{
		{"no route names a tool source", []string{"tools", "-a", "eng-assistant", "What's for lunch on Thursday?"},
			"tools:           0 of 0 candidates; reason: no_tool_source (no matched route names a tool source)\n"},
		{"the agent may not read the tool source", []string{"tools", "-a", "hr-assistant", "roll back the bad deploy of fleet-api"},
			"tools:           0 of 0 candidates; reason: sources_denied (the agent may read none of the matched routes' tool sources)\n"},
		{"query prints the line when a tool route matched", []string{"query", "-a", "hr-assistant", "roll back the bad deploy of fleet-api"},
			"\ntools:           0 of 0 candidates; reason: sources_denied (the agent may read none of the matched routes' tool sources)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{tc.args[0], "-f", quickstart}, tc.args[1:]...)
			out, stderr, code := run(t, args...)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, stderr %q; output lacks %q:\n%s", code, stderr, tc.want, out)
			}
		})
	}
	out, _, code := run(t, "tools", "-f", quickstart, "-a", "hr-assistant", "-o", "json", "roll back the bad deploy of fleet-api")
	var resp engine.ToolsResponse
	if code != 0 || json.Unmarshal([]byte(out), &resp) != nil || resp.Stats.Tools.Reason != engine.ToolsSourcesDenied {
		t.Errorf("-o json: exit %d, want stats.tools.reason %q:\n%s", code, engine.ToolsSourcesDenied, out)
	}
}

// TestToolsTreeWarns: tools tree without an agent warns on stderr as query
// does, with the agents the permissions name.
func TestToolsTreeWarns(t *testing.T) {
	out, stderr, code := run(t, "tools", "tree", "-f", quickstart)
	want := "warning: no agent was given, and an agent without a name may use none of the router's 5 tools\n" +
		"warning: known agents: eng-assistant, finance-analyst, hr-assistant (-a/--agent)\n"
	if code != 0 || out != "tools/\n" || stderr != want {
		t.Errorf("exit %d\nstdout %q\nstderr %q\nwant stderr %q", code, out, stderr, want)
	}
	// Under defaultAccess: Deny with no permission for "*", the query's own warning comes first.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "all.yaml"), denyAllTools)
	_, qErr, _ := run(t, "query", "-f", dir, "open the incident")
	_, tErr, code := run(t, "tools", "tree", "-f", dir)
	first := `warning: no agent was given and no AgentPermission names "*", so the router's defaultAccess: Deny denies every source` + "\n"
	if code != 0 || !strings.HasPrefix(qErr, first) || !strings.HasPrefix(tErr, first) || !strings.Contains(tErr, "known agents: ops-bot") {
		t.Errorf("query stderr %q\ntree stderr %q\nboth want %q first", qErr, tErr, first)
	}
	if _, stderr, _ := run(t, "tools", "tree", "-f", quickstart, "-a", "eng-assistant"); stderr != "" {
		t.Errorf("a named agent with tools: stderr %q", stderr)
	}
}

// denyAllTools is a router that denies agents no permission names, with one
// route to a tool source.
const denyAllTools = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: r}
spec: {defaultAccess: Deny}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  parentRefs: [{name: r}]
  sources: [{name: ops-tools}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: ops-tools}
spec:
  type: Tools
  tools:
    catalog:
    - {name: open_incident, description: Open an incident., sideEffects: Write}
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: ops}
spec:
  parentRefs: [{name: r}]
  agents: [ops-bot]
  allowSources: [ops-tools]
`

// TestToolsExplainAndAlso prints why a card won and the near-duplicates it
// stands for.
func TestToolsExplainAndAlso(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "router.yaml"), `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: ops}
spec: {defaultAccess: Allow}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: ops-tools}
spec:
  type: Tools
  tools:
    catalog:
    - {name: restart_service, namespace: ops, description: Restart the pods of a service., examples: [bounce the checkout pods]}
    - {name: restart_service_v2, namespace: ops, description: Restart the pods of a service (2).}
    - {name: query_logs, namespace: ops, description: Search the logs of a service.}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: ops}
spec:
  sources: [{name: ops-tools}]
`)
	out, stderr, code := run(t, "tools", "-f", dir, "--explain", "restart the checkout pods")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"(1) ops.restart_service  (score ",
		"    also: ops.restart_service_v2 (ops-tools)\n",
		"    words: restart [name, description] ",
		"    closest example (0.",
		"): bounce the checkout pods\n",
		"    score = (words ",
		" before calibration, ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "restart_service") != 2 {
		t.Errorf("a near-duplicate took a card:\n%s", out)
	}
	plain, _, _ := run(t, "tools", "-f", dir, "restart the checkout pods")
	if strings.Contains(plain, "words:") || strings.Contains(plain, "before calibration") {
		t.Errorf("explained without --explain:\n%s", plain)
	}
}
