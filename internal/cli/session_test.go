package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// writeSession writes a session file: a fact, an episode, a conversation
// with an oversized JSON tool result, and extra lines.
func writeSession(t *testing.T, extra ...string) string {
	t.Helper()
	rows := make([]map[string]any, 300)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("deploy-%d", i), "ok": i%2 == 0}
	}
	big, _ := json.Marshal(map[string]any{"status": "done", "deploys": rows})
	lines := []string{
		`{"fact": {"key": "team", "value": "platform"}}`,
		`{"episode": {"id": "e1", "text": "Last week the user rolled back the billing service."}}`,
		`{"id": "u1", "kind": "user_turn", "text": "How many vacation days do I get, and roll back the last deploy"}`,
		`{"id": "c1", "kind": "tool_call", "text": "deploys.list(service=billing)"}`,
		fmt.Sprintf(`{"id": "r1", "kind": "tool_result", "parent_id": "c1", "text": %q}`, big),
		`{"id": "m1", "kind": "memory_fact", "text": "salary band 7", "sensitivity": "Restricted"}`,
	}
	path := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(append(lines, extra...), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildPack runs session build with -o json and decodes the pack.
func buildPack(t *testing.T, args ...string) session.Pack {
	t.Helper()
	out, stderr, code := run(t, append([]string{"session", "build", "-f", quickstart, "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p session.Pack
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return p
}

func TestSessionBuild(t *testing.T) {
	file := writeSession(t)
	t.Run("json with a query", func(t *testing.T) {
		p := buildPack(t, "--items", file, "--phase", "answer", "--query", "How many vacation days do I get?", "-a", "hr-assistant")
		st := p.Stats
		if st.Included+st.Dropped.Total() != st.Candidates || st.Dropped.Sensitivity != 1 {
			t.Errorf("stats %+v", st)
		}
		if len(p.Chunks) == 0 || st.SectionTokens[session.SectionKnowledge] == 0 || !strings.Contains(p.Text, "28 working days") {
			t.Errorf("no knowledge from the query: %d chunks, text:\n%s", len(p.Chunks), p.Text)
		}
		if len(p.Artifacts) != 1 || p.Artifacts[0].ItemID != "r1" || strings.Contains(p.Text, "deploy-299") {
			t.Errorf("the tool result was not firewalled: %d artifacts", len(p.Artifacts))
		}
		if p.Budget != 6000 || p.TotalTokens > p.Budget || len(p.Tools) != 0 {
			t.Errorf("budget %d, total %d, %d tools", p.Budget, p.TotalTokens, len(p.Tools))
		}
		if b, _ := json.Marshal(p); strings.Contains(string(b), "salary band") {
			t.Error("a Restricted item reached the output")
		}
	})
	t.Run("route phase adds tool cards", func(t *testing.T) {
		p := buildPack(t, "--items", file, "--phase", "route", "--query", "roll back the last deploy", "-a", "eng-assistant")
		if len(p.Tools) == 0 || p.Budget != 2000 {
			t.Fatalf("%d tools, budget %d", len(p.Tools), p.Budget)
		}
	})
	t.Run("text", func(t *testing.T) {
		out, stderr, code := run(t, "session", "build", "-f", quickstart, "--items", file, "--phase", "interpret", "--max-tokens", "500")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{"phase:           interpret (budget 500 tokens, memory cap 125)", "1 brought by closure", "artifact:        sha256:",
			"## Tool results\ntool call c1: deploys.list(service=billing)\ntool result r1: [", "deploys (array of 300)"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("explain", func(t *testing.T) {
		out, stderr, code := run(t, "session", "build", "-f", quickstart, "--items", file, "--phase", "route", "--explain")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{"dropped: 1 sensitivity, 2 policy", "dropped:         c1 (tool_call, policy, ", "dropped:         r1 (tool_result, policy, ",
			"dropped:         m1 (memory_fact, sensitivity, "} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		p := buildPack(t, "--items", file, "--phase", "route", "--explain")
		if len(p.DroppedItems) != 3 || p.DroppedItems[0].ID != "c1" || p.DroppedItems[0].Reason != "policy" {
			t.Errorf("dropped_items %+v", p.DroppedItems)
		}
		if p := buildPack(t, "--items", file, "--phase", "route"); p.DroppedItems != nil {
			t.Errorf("dropped_items without --explain: %+v", p.DroppedItems)
		}
	})
	t.Run("handoff", func(t *testing.T) {
		p := buildPack(t, "--items", file, "--phase", "handoff")
		if p.Phase != session.PhaseHandoff || p.Budget != 4000 || len(p.Artifacts) != 1 {
			t.Fatalf("phase %s, budget %d, %d artifacts", p.Phase, p.Budget, len(p.Artifacts))
		}
	})
	t.Run("same input, same bytes", func(t *testing.T) {
		args := []string{"session", "build", "-f", quickstart, "--items", file, "--phase", "answer", "--query", "vacation", "-o", "json"}
		a, _, _ := run(t, args...)
		b, _, _ := run(t, args...)
		if a != b || a == "" {
			t.Fatal("two runs differ")
		}
	})
}

func TestSessionBuildErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"id\":\"a\",\"kind\":\"user_turn\"}\n\n{\"id\":\"b\",\"kind\":\"tool_result\",\"parent_id\":\"zz\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := writeSession(t)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown parent", []string{"--items", bad, "--phase", "answer"}, bad + `:3: parent_id: no item has id "zz"`},
		{"cycle", []string{"--items", writeSession(t, `{"id":"x","kind":"user_turn","parent_id":"y"}`, `{"id":"y","kind":"user_turn","parent_id":"x"}`), "--phase", "answer"}, ":7: parent_id: parent chain loops: x → y → x"},
		{"unknown phase", []string{"--items", good, "--phase", "plan"}, `--phase: unknown phase "plan"`},
		{"max tokens past the limit", []string{"--items", good, "--phase", "call", "--max-tokens", "2000000"}, "--max-tokens: 2000000 must be between 0 and 1000000"},
		{"max tokens above the ceiling", []string{"--items", good, "--phase", "answer", "--max-tokens", "9000"}, "--max-tokens: max_tokens 9000 is above the answer phase's ceiling 6000 (spec.phases.answer.maxBudget)"},
		{"missing file", []string{"--items", filepath.Join(dir, "none.jsonl"), "--phase", "answer"}, "--items: open"},
		{"no phase", []string{"--items", good}, `required flag(s) "phase" not set`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := run(t, append([]string{"session", "build", "-f", quickstart}, c.args...)...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want %q", code, stderr, c.want)
			}
		})
	}
}

// quickstartWithSpec is a copy of the quickstart whose router's spec
// starts with the given fields (YAML indented by two spaces).
func quickstartWithSpec(t *testing.T, spec string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(quickstart)); err != nil {
		t.Fatal(err)
	}
	router := filepath.Join(dir, "router.yaml")
	raw, err := os.ReadFile(router)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(router, []byte(strings.Replace(string(raw), "spec:\n", "spec:\n"+spec, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSessionBuildRouterPolicy: the router's spec.phases and firewall bound
// apply to session build, as on serve.
func TestSessionBuildRouterPolicy(t *testing.T) {
	dir := quickstartWithSpec(t, "  sessions:\n    dedupThreshold: \"0.5\"\n    firewall: {maxChars: 100000}\n  phases:\n    answer: {budget: 5000, maxBudget: 7000, kindPriorities: {episode: \"0\"}}\n")
	file := writeSession(t)
	pack := func(dir string, args ...string) session.Pack {
		out, stderr, code := run(t, append([]string{"session", "build", "-f", dir, "-o", "json", "--items", file, "--phase", "answer", "--query", "vacation days"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var p session.Pack
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	def, custom := pack(quickstart), pack(dir)
	if def.Budget != 6000 || len(def.Artifacts) != 1 {
		t.Fatalf("quickstart: budget %d, %d artifacts; want the defaults 6000 and 1", def.Budget, len(def.Artifacts))
	}
	if custom.Budget != 5000 || len(custom.Artifacts) != 0 || custom.Stats.Firewalled != 0 || custom.Stats.Dedup.Threshold != 0.5 || def.Stats.Dedup.Threshold != 0.9 {
		t.Errorf("with spec.phases: budget %d, %d artifacts, dedup %v; want 5000, none (maxChars 100000), 0.5", custom.Budget, len(custom.Artifacts), custom.Stats.Dedup.Threshold)
	}
	if p := pack(dir, "--max-tokens", "7000"); p.Budget != 7000 {
		t.Errorf("--max-tokens 7000 under the router's ceiling: budget %d", p.Budget)
	}
	for _, it := range custom.Items {
		if it.Kind == "episode" && it.Score != 0 {
			t.Errorf("episode weighed 0 scores %v", it.Score)
		}
	}
}

// TestSessionBuildKeep: the router's spec.sessions.firewall.keep applies
// to session build (the same session.NewPolicy serve and the Go API use),
// and a bad rule is refused naming the file and the field.
func TestSessionBuildKeep(t *testing.T) {
	file := writeSession(t)
	good := quickstartWithSpec(t, "  sessions:\n    firewall:\n      keep:\n        - tools: [\"deploys.*\"]\n          paths: [\".status\", \".deploys[-1].name\"]\n")
	out, stderr, code := run(t, "session", "build", "-f", good, "-o", "json", "--items", file, "--phase", "answer")
	var p session.Pack
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || len(p.Artifacts) != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(p.Artifacts[0].Summary, "\nkeep: .status = \"done\"\nkeep: .deploys[-1].name = \"deploy-299\"\n") {
		t.Errorf("summary without the kept paths:\n%s", p.Artifacts[0].Summary)
	}
	bad := quickstartWithSpec(t, "  sessions:\n    firewall:\n      keep:\n        - tools: [\"deploys.*\"]\n          paths: [\"status\"]\n")
	_, stderr, code = run(t, "session", "build", "-f", bad, "--items", file, "--phase", "answer")
	if code != 1 || !strings.Contains(stderr, "router.yaml") || !strings.Contains(stderr, `spec.sessions.firewall.keep[0].paths[0]: Invalid value: "status": path "status": unexpected 's' at byte 0`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestSessionBuildMasksSecrets: a session file's secrets are masked as
// serve masks a write (spec.sessions.secrets: Mask by default).
func TestSessionBuildMasksSecrets(t *testing.T) {
	const key = "AKIA" + "P9O8I7U6Y5T4R3E2"
	file := writeSession(t, `{"id": "u2", "kind": "user_turn", "text": "my AWS key is `+key+`"}`)
	p := buildPack(t, "--items", file, "--phase", "answer")
	if strings.Contains(p.Text, key) || !strings.Contains(p.Text, "[secret:aws-access-key]") || p.Stats.SecretsMasked != 1 {
		t.Errorf("pack text holds the key or no mask (secrets_masked %d):\n%s", p.Stats.SecretsMasked, p.Text)
	}
}
