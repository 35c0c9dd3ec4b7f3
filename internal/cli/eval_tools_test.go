package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
		// The same line reported as a success through the learning path.
		{"with outcomes", []string{"--outcomes", filepath.Join(dir, "examples.jsonl"), "--outcomes-per-tool", "1"}, 1, 0},
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
			if rep.Dataset != filepath.Base(dir) || rep.Split != "dev" || rep.Queries != 3 || rep.Tools != 3 || rep.Examples != tt.examples || rep.Outcomes != outcomes(tt.args) {
				t.Errorf("labels: %+v", rep)
			}
			for k, v := range map[string]float64{"recall@1": rep.Recall1, "recall@3": rep.Recall3, "recall@5": rep.Recall5, "recall@10": rep.Recall10} {
				if v != tt.recall {
					t.Errorf("%s = %v, want %v", k, v, tt.recall)
				}
			}
			var raw map[string]any
			_ = json.Unmarshal([]byte(out), &raw)
			for _, k := range []string{"recall@1", "recall@3", "recall@5", "recall@10", "ndcg@5", "latency_us", "calibration",
				"reliability_correlation", "high_confidence_queries", "high_confidence_right", "oracle"} {
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
	t.Run("off-topic, copies and settings", func(t *testing.T) {
		write(t, filepath.Join(dir, "offtopic.jsonl"), `{"text": "what is the capital of peru"}`+"\n"+`{"text": "tell me a joke about cats"}`+"\n")
		out, stderr, code := run(t, "eval", "tools", "--dataset", dir, "--split", "dev", "-o", "json", "--offtopic", filepath.Join(dir, "offtopic.jsonl"),
			"--copies", "9", "--min-confidence", "0.3", "--adaptive-rule", "Relative", "--recall-weight", "3", "--relative-cut", "0.2", "--top-k", "3")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rep eval.ToolReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		// Copies never count as relevant, and collapse into their tool's card.
		if rep.Tools != 9 || rep.Recall1 != 0.6667 || rep.MinConfidence != 0.3 || rep.Returned.TopK != 3 || rep.Returned.Rule != "Relative" || rep.Returned.RecallWeight != 3 || rep.Returned.RelativeCut != 0.2 {
			t.Errorf("report %+v", rep)
		}
		if o := rep.Offtopic; o == nil || o.Queries != 2 || o.BelowMinConfidence != 1 {
			t.Errorf("off-topic %+v: neither question shares a word with a tool", o)
		}
		text, _, _ := run(t, "eval", "tools", "--dataset", dir, "--split", "dev", "--offtopic", filepath.Join(dir, "offtopic.jsonl"))
		for _, want := range []string{"ECE (10 bins):", "confidence correlation:", "right first cards kept:", "adaptive shortlist:", "over bands", "confidence >= 0.8", "oracle prefix:", "off-topic:               2 questions, 1.0000 under minConfidence"} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		write(t, filepath.Join(dir, "bad.jsonl"), `{"text": "x", "tool": "nope"}`+"\n")
		write(t, filepath.Join(dir, "badoff.jsonl"), `{"text": ""}`+"\n")
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--split", "dev", "-o", "yaml"}, `--output: must be text or json, not "yaml"`},
			{[]string{"--split", "tset"}, "available splits: dev"},
			{[]string{"--split", "dev", "--examples", filepath.Join(dir, "bad.jsonl")}, `bad.jsonl:1: tool "nope" is not in the corpus`},
			{[]string{"--split", "dev", "--offtopic", filepath.Join(dir, "badoff.jsonl")}, `badoff.jsonl:1: empty "text"`},
			{[]string{"--split", "dev", "--min-confidence", "1.5"}, `--min-confidence: "1.5" must be a decimal number from 0 to 1`},
			{[]string{"--split", "dev", "--collapse", "x"}, `--collapse: "x" must be a decimal number from 0 to 1`},
			{[]string{"--split", "dev", "--top-k", "0"}, "--top-k: 0 must be between 1 and 100"},
			{[]string{"--split", "dev", "--adaptive-rule", "utility"}, `--adaptive-rule: "utility" supported values: "Utility", "Relative" (did you mean "Utility"?)`},
			{[]string{"--split", "dev", "--recall-weight", "-0.5"}, `--recall-weight: "-0.5" must be a decimal number of at least 0`},
			// The flags follow the fields' validation: NaN and infinities,
			// which ParseFloat takes, would reach the JSON report (and fail
			// it) or the cut; an exponent the field refuses is refused too.
			{[]string{"--split", "dev", "--recall-weight", "NaN"}, `--recall-weight: "NaN" must be a decimal number of at least 0`},
			{[]string{"--split", "dev", "--recall-weight", "Inf"}, `--recall-weight: "Inf" must be a decimal number of at least 0`},
			{[]string{"--split", "dev", "--recall-weight", "1e3"}, `--recall-weight: "1e3" must be a decimal number of at least 0`},
			{[]string{"--split", "dev", "--relative-cut", "NaN"}, `--relative-cut: "NaN" must be a decimal number from 0 to 1`},
			{[]string{"--split", "dev", "--min-confidence", "nan"}, `--min-confidence: "nan" must be a decimal number from 0 to 1`},
			{[]string{"--split", "dev", "--collapse", "5e-1"}, `--collapse: "5e-1" must be a decimal number from 0 to 1`},
			{[]string{"--split", "dev", "--copies", "-1"}, "--copies: -1 must be between 0 and 65536"},
			{[]string{"--split", "dev", "--outcomes", filepath.Join(dir, "examples.jsonl"), "--outcomes-per-tool", "65"}, "--outcomes-per-tool: 65 must be between 1 and 64"},
			{[]string{"--split", "dev", "--outcomes", filepath.Join(dir, "bad.jsonl")}, `bad.jsonl:1: tool "nope" is not in the corpus`},
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
	// The project's own off-topic questions, never fitted on.
	offtopicTest := filepath.Join("..", "..", "hack", "toolcal", "offtopic-test.jsonl")
	some := someToolsExamples(t, examples)
	for _, tt := range []struct {
		name    string
		args    []string
		queries int
		recall5 float64
		// maxECE of the first card and, with --offtopic, the least share
		// of off-topic questions under the default minConfidence (0: not
		// checked).
		maxECE, offtopic float64
	}{
		// Measured (docs/benchmarks.md): recall@5 0.6570, 0.9413, 0.7329,
		// 0.9157, 0.8525, 0.8675; ECE 0.0369, 0.0267; off-topic 0.86, 0.79.
		{"metatool test", []string{"--dataset", metatool, "--split", "test", "--offtopic", offtopicTest}, 3000, 0.65, 0.05, 0.8},
		{"metatool test with examples", []string{"--dataset", metatool, "--split", "test", "--examples", examples, "--offtopic", offtopicTest}, 3000, 0.93, 0.04, 0.75},
		{"metatool test-multi", []string{"--dataset", metatool, "--split", "test-multi"}, 249, 0.73, 0, 0},
		// Learning from outcomes: the first 5 train questions of each tool
		// reported as successes (measured 0.7563, 0.7163 before session 26;
		// the 0.85 is not met); and of the 113 tools whose name has
		// an even length only, which must not bury the others (measured
		// 0.6997; 0.5733 before session 26, under the 0.657 of no learning).
		{"metatool test with 5 outcomes per tool", []string{"--dataset", metatool, "--split", "test", "--outcomes", examples, "--outcomes-per-tool", "5"}, 3000, 0.75, 0, 0},
		{"metatool test with 5 outcomes for some tools", []string{"--dataset", metatool, "--split", "test", "--outcomes", some, "--outcomes-per-tool", "5"}, 3000, 0.69, 0, 0},
		{"metatool test-multi with examples", []string{"--dataset", metatool, "--split", "test-multi", "--examples", examples}, 249, 0.90, 0, 0},
		{"cw-gold test", []string{"--dataset", cwGold, "--split", "test"}, 200, 0.85, 0, 0},
		// The reference router's 1000-tool catalog: its synthetic copies
		// share their tool's card.
		{"cw-gold test, 1000 tools", []string{"--dataset", cwGold, "--split", "test", "--copies", "1000"}, 200, 0.85, 0, 0},
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
			if tt.maxECE > 0 && rep.ECE > tt.maxECE {
				t.Errorf("ECE %.4f, want <= %.2f", rep.ECE, tt.maxECE)
			}
			if tt.offtopic > 0 && (rep.Offtopic == nil || rep.Offtopic.BelowMinConfidence < tt.offtopic) {
				t.Errorf("off-topic %+v, want >= %.2f under minConfidence", rep.Offtopic, tt.offtopic)
			}
		})
	}
}

// someToolsExamples writes the lines of the examples file whose tool's name
// has an even length (113 of MetaTool's 199 tools) and returns the file.
func someToolsExamples(t *testing.T, examples string) string {
	data, err := os.ReadFile(examples)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.SplitAfter(string(data), "\n") {
		var e eval.ToolExample
		if json.Unmarshal([]byte(line), &e) == nil && len(e.Tool)%2 == 0 {
			out = append(out, line...)
		}
	}
	path := filepath.Join(t.TempDir(), "some.jsonl")
	write(t, path, string(out))
	return path
}

// outcomes is the number of outcomes the generated set's args learn.
func outcomes(args []string) int {
	if slices.Contains(args, "--outcomes") {
		return 1
	}
	return 0
}
