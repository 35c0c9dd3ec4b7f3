package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/eval"
)

// toolSet writes a three-tool BEIR set whose answers are known: q1 and q2
// name their tool's words, q3 only an example's.
func toolSet(t *testing.T) string {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "corpus.jsonl"), strings.Join([]string{
		`{"_id": "billing.invoices.create", "title": "invoices_create", "text": "Create an invoice for a customer."}`,
		`{"_id": "billing.invoices.list", "title": "invoices_list", "text": "List the invoices of a customer."}`,
		`{"_id": "WebSearch", "title": "WebSearch", "text": "Search the web for pages."}`,
	}, "\n")+"\n")
	write(t, filepath.Join(dir, "queries.jsonl"), strings.Join([]string{
		`{"_id": "q1", "text": "list my invoices"}`,
		`{"_id": "q2", "text": "web search for cats"}`,
		`{"_id": "q3", "text": "charge ACME for March"}`,
	}, "\n")+"\n")
	write(t, filepath.Join(dir, "qrels", "dev.tsv"), "query-id\tcorpus-id\tscore\nq1\tbilling.invoices.list\t1\nq2\tWebSearch\t1\nq3\tbilling.invoices.create\t1\n")
	write(t, filepath.Join(dir, "examples.jsonl"), `{"text": "bill ACME 300 euros for March", "tool": "billing.invoices.create"}`+"\n")
	return dir
}

func TestEvalToolsOnGeneratedDataset(t *testing.T) {
	dir := toolSet(t)
	for _, tt := range []struct {
		name     string
		args     []string
		recall   float64 // at every depth
		examples int
	}{
		{"without examples", nil, 0.6667, 0},
		{"with examples", []string{"--examples", filepath.Join(dir, "examples.jsonl")}, 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"eval", "tools", "--dataset", dir, "--split", "dev", "-o", "json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep eval.ToolReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Dataset != filepath.Base(dir) || rep.Split != "dev" || rep.Queries != 3 || rep.Tools != 3 || rep.Examples != tt.examples {
				t.Errorf("labels: %+v", rep)
			}
			for k, v := range map[string]float64{"recall@1": rep.Recall1, "recall@3": rep.Recall3, "recall@5": rep.Recall5, "recall@10": rep.Recall10} {
				if v != tt.recall {
					t.Errorf("%s = %v, want %v", k, v, tt.recall)
				}
			}
			var raw map[string]any
			_ = json.Unmarshal([]byte(out), &raw)
			for _, k := range []string{"recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "latency_us", "calibration"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("JSON lacks %q:\n%s", k, out)
				}
			}
		})
	}
	t.Run("text", func(t *testing.T) {
		out, stderr, code := run(t, "eval", "tools", "--dataset", dir, "--split", "dev")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{"split dev", "3 (0 examples)", "0.6667  0.6667  0.6667  0.6667", "latency (µs):", "[0.9, 1.0]"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		write(t, filepath.Join(dir, "bad.jsonl"), `{"text": "x", "tool": "nope"}`+"\n")
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--split", "dev", "-o", "yaml"}, `--output: must be text or json, not "yaml"`},
			{[]string{"--split", "tset"}, "available splits: dev"},
			{[]string{"--split", "dev", "--examples", filepath.Join(dir, "bad.jsonl")}, `bad.jsonl:1: tool "nope" is not in the corpus`},
		} {
			_, stderr, code := run(t, append([]string{"eval", "tools", "--dataset", dir}, tt.args...)...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tt.args, code, stderr, tt.want)
			}
		}
	})
}

// sharedEval finds the shared evaluation data: $CONTEXTROUTER_EVAL_DIR, or
// ../shared/eval beside the repository (or beside a worktree's parent).
func sharedEval(t *testing.T, set string) string {
	t.Helper()
	if d := os.Getenv("CONTEXTROUTER_EVAL_DIR"); d != "" {
		return filepath.Join(d, set)
	}
	for _, up := range []string{"../../../shared/eval", "../../../../shared/eval"} {
		if _, err := os.Stat(filepath.Join(up, set, "corpus.jsonl")); err == nil {
			return filepath.Join(up, set)
		}
	}
	t.Skipf("%s not found in ../shared/eval beside the repository (set CONTEXTROUTER_EVAL_DIR to the folder holding %s/)", set, set)
	return ""
}

// TestEvalToolsPublicSets guards the tool selection quality reported in
// docs/benchmarks.md on the public test splits (never tuned on).
func TestEvalToolsPublicSets(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode")
	}
	metatool := sharedEval(t, "metatool")
	cwGold := sharedEval(t, "cw-gold")
	examples := filepath.Join(metatool, "examples.jsonl")
	for _, tt := range []struct {
		name    string
		args    []string
		queries int
		recall5 float64
	}{
		// Measured (docs/benchmarks.md): 0.6570, 0.9413, 0.7329, 0.9157, 0.8525.
		{"metatool test", []string{"--dataset", metatool, "--split", "test"}, 3000, 0.65},
		{"metatool test with examples", []string{"--dataset", metatool, "--split", "test", "--examples", examples}, 3000, 0.93},
		{"metatool test-multi", []string{"--dataset", metatool, "--split", "test-multi"}, 249, 0.73},
		{"metatool test-multi with examples", []string{"--dataset", metatool, "--split", "test-multi", "--examples", examples}, 249, 0.90},
		{"cw-gold test", []string{"--dataset", cwGold, "--split", "test"}, 200, 0.85},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"eval", "tools", "-o", "json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep eval.ToolReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Queries != tt.queries || rep.Recall5 < tt.recall5 {
				t.Errorf("%d queries, recall@5 %.4f; want %d and >= %.2f", rep.Queries, rep.Recall5, tt.queries, tt.recall5)
			}
		})
	}
}
