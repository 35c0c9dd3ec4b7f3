package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

const quickstart = "../../examples/quickstart"

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func queryJSON(t *testing.T, args ...string) engine.Response {
	t.Helper()
	out, stderr, code := run(t, append([]string{"query", "-f", quickstart, "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var resp engine.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out)
	}
	d := resp.Stats.Dropped
	if resp.Stats.Included+d.Budget+d.Duplicate+d.PathDenied+d.Sensitivity != resp.Stats.Candidates {
		t.Errorf("stats do not add up: %+v", resp.Stats)
	}
	if resp.TotalTokens > 1400 {
		t.Errorf("total_tokens %d over the quickstart budget (1500 - 100 reserved)", resp.TotalTokens)
	}
	return resp
}

func TestQueryTextOutput(t *testing.T) {
	out, stderr, code := run(t, "query", "-f", quickstart, "-a", "hr-assistant", "How many vacation days do I get?")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"router:          acme",
		"matched routes:  always, hr-policies",
		"denied sources:  (none)",
		"[1] Acme Assist system prompt",
		"hr-docs:pto.md",
		"Annual vacation allowance",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "finance") {
		t.Errorf("hr-assistant output mentions finance:\n%s", out)
	}
}

func TestQueryJSONScenarios(t *testing.T) {
	t.Run("vacation question finds the PTO policy first", func(t *testing.T) {
		resp := queryJSON(t, "-a", "hr-assistant", "How many vacation days do I get?")
		if len(resp.Chunks) < 2 || resp.Chunks[0].Source != "system-prompt" || resp.Chunks[1].Path != "pto.md" {
			t.Fatalf("chunks: %+v", titles(resp))
		}
		if resp.Chunks[1].RelevanceScore != 1 {
			t.Errorf("best document score = %v, want 1", resp.Chunks[1].RelevanceScore)
		}
		if resp.Chunks[1].Metadata.MTime == "" {
			t.Errorf("directory chunk has no mtime: %+v", resp.Chunks[1].Metadata)
		}
	})
	t.Run("engineering question by eng assistant", func(t *testing.T) {
		resp := queryJSON(t, "-a", "eng-assistant", "How do I roll back a failed deploy?")
		found := false
		for _, c := range resp.Chunks[:min(4, len(resp.Chunks))] {
			found = found || (c.Path == "deploy-runbook.md" && strings.Contains(c.Title, "Rolling back"))
		}
		if !contains(resp.MatchedRoutes, "engineering") || !found {
			t.Errorf("routes %v; the rollback section is not in the top 3 documents: %v", resp.MatchedRoutes, titles(resp))
		}
	})
	t.Run("finance source is denied to the hr assistant", func(t *testing.T) {
		resp := queryJSON(t, "-a", "hr-assistant", "What is the Q2 budget?")
		if !contains(resp.MatchedRoutes, "finance") || !contains(resp.DeniedSources, "finance-docs") {
			t.Errorf("routes %v denied %v", resp.MatchedRoutes, resp.DeniedSources)
		}
		for _, c := range resp.Chunks {
			if c.Source == "finance-docs" {
				t.Errorf("denied source in output: %+v", c)
			}
		}
	})
	t.Run("salary bands are path-denied for the finance analyst", func(t *testing.T) {
		resp := queryJSON(t, "-a", "finance-analyst", "What are the salary compensation bands?")
		if resp.Stats.Dropped.PathDenied == 0 {
			t.Errorf("no path_denied drops: %+v", resp.Stats)
		}
		for _, c := range resp.Chunks {
			if strings.HasPrefix(c.Path, "salaries/") {
				t.Errorf("denied path in output: %s", c.Path)
			}
		}
	})
	t.Run("near-duplicate exception sections are dropped", func(t *testing.T) {
		resp := queryJSON(t, "-a", "hr-assistant", "How do I request an exception to the remote work or travel expense policy?")
		if resp.Stats.Dropped.Duplicate == 0 {
			t.Errorf("no duplicate dropped: %+v %v", resp.Stats, titles(resp))
		}
	})
	t.Run("unknown agent gets only what everyone may read", func(t *testing.T) {
		resp := queryJSON(t, "-a", "intruder", "How many vacation days do I get?")
		if len(resp.Chunks) != 1 || resp.Chunks[0].Source != "system-prompt" || !contains(resp.DeniedSources, "hr-docs") {
			t.Errorf("chunks %v denied %v", titles(resp), resp.DeniedSources)
		}
	})
	t.Run("max tokens lowers the budget", func(t *testing.T) {
		resp := queryJSON(t, "-a", "hr-assistant", "--max-tokens", "300", "vacation")
		if resp.TotalTokens > 200 || !resp.WasTruncated {
			t.Errorf("total_tokens %d truncated %v", resp.TotalTokens, resp.WasTruncated)
		}
	})
}

func TestQueryErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no text", []string{"query", "-f", quickstart}, "requires at least 1 arg"},
		{"no files", []string{"query", "hello"}, `required flag(s) "filename" not set`},
		{"bad metadata", []string{"query", "-f", quickstart, "-m", "novalue", "hi"}, `--metadata "novalue": want KEY=VALUE`},
		{"bad output", []string{"query", "-f", quickstart, "-o", "yaml", "hi"}, "--output: must be text or json"},
		{"missing path", []string{"query", "-f", "does/not/exist", "hi"}, "does/not/exist"},
		{"invalid object", []string{"query", "-f", "testdata/invalid-glob.yaml", "hi"}, "spec.denyPaths[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, tt.args...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q, want it to contain %q", code, stderr, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	out, _, code := run(t, "validate", "-f", quickstart)
	if code != 0 || !strings.Contains(out, "valid: 1 routers, 6 routes, 5 sources, 4 permissions, 1 classifiers") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	dir := t.TempDir()
	write(t, filepath.Join(dir, "bad.yaml"), `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata:
  name: broken
spec:
  when: 'containsAnyWord(txt, ["a"])'
  sources: [{name: missing}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata:
  name: docs
spec:
  type: Directory
  directory: {path: nowhere}
`)
	out, _, code = run(t, "validate", "-f", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		`ContextRoute/broken: spec.when: Invalid value: "containsAnyWord(txt, [\"a\"])": ERROR: <input>:1:17: undeclared reference to 'txt'`,
		`ContextRoute/broken: spec.sources[0].name`,
		"bad.yaml:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}

	write(t, filepath.Join(dir, "bad.yaml"), "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: docs}\nspec:\n  type: Inline\n  inline: {content: hi, colour: red}\n")
	out, _, code = run(t, "validate", "-f", dir)
	if code != 1 || !strings.Contains(out, "bad.yaml:6: ContextSource/docs") || !strings.Contains(out, "spec.inline.colour") {
		t.Errorf("unknown field: exit %d:\n%s", code, out)
	}
}

func TestEvalRetrievalOnGeneratedDataset(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "corpus.jsonl"), strings.Join([]string{
		`{"_id": "d1", "title": "Vacation policy", "text": "Employees get 28 vacation days."}`,
		`{"_id": "d2", "title": "Deploy runbook", "text": "Roll back a deploy with the pipeline."}`,
		`{"_id": "d3", "title": "Expenses", "text": "Submit receipts within 30 days."}`,
	}, "\n")+"\n")
	write(t, filepath.Join(dir, "queries.jsonl"), `{"_id": "q1", "text": "how many vacation days"}`+"\n"+`{"_id": "q2", "text": "roll back deploy"}`+"\n")
	write(t, filepath.Join(dir, "qrels", "test.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
	for _, scorer := range []string{"bm25", "keyword"} {
		out, stderr, code := run(t, "eval", "retrieval", "--dataset", dir, "--scorer", scorer, "-o", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", scorer, code, stderr)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"ndcg@10", "recall@5", "recall@100", "p@1", "mrr@10"} {
			if rep[k] != 1.0 {
				t.Errorf("%s: %s = %v, want 1", scorer, k, rep[k])
			}
		}
		if rep["queries"] != 2.0 || rep["latency_us"] == nil {
			t.Errorf("%s: report %v", scorer, rep)
		}
	}
}

// TestEvalSciFact guards the retrieval quality reported in docs/benchmarks.md
// on the public SciFact test split (never tuned on).
func TestEvalSciFact(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "eval", "scifact")
	if d := os.Getenv("CONTEXTROUTER_EVAL_DIR"); d != "" {
		dir = filepath.Join(d, "scifact")
	}
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); err != nil {
		t.Skipf("SciFact not found at %s (set CONTEXTROUTER_EVAL_DIR to the folder holding scifact/): %v", dir, err)
	}
	if testing.Short() {
		t.Skip("skipped in -short mode")
	}
	out, stderr, code := run(t, "eval", "retrieval", "--dataset", dir, "--split", "test", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Queries int     `json:"queries"`
		NDCG    float64 `json:"ndcg@10"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Queries != 300 || rep.NDCG < 0.66 {
		t.Errorf("SciFact test: %d queries, nDCG@10 %.4f; want 300 and >= 0.66", rep.Queries, rep.NDCG)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func titles(r engine.Response) []string {
	var out []string
	for _, c := range r.Chunks {
		out = append(out, c.Source+":"+c.Path+":"+c.Title)
	}
	return out
}
