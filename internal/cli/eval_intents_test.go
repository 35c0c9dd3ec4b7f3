package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/eval"
)

// intentSet writes a small intent set: three intents with distinct words,
// out-of-scope chatter in train, val and test.
func intentSet(t *testing.T, withVal bool) string {
	dir := t.TempDir()
	words := map[string][]string{
		"refund":   {"refund", "money back", "reimburse", "return payment"},
		"shipping": {"parcel", "package", "delivery", "tracking"},
		"account":  {"password", "login", "account", "sign in"},
	}
	lines := func(n, offset int, oos []string) string {
		var b strings.Builder
		for _, intent := range []string{"account", "refund", "shipping"} {
			for i := range n {
				w := words[intent][(i+offset)%4]
				fmt.Fprintf(&b, "{\"text\": \"please help with my %s number %d\", \"label\": %q}\n", w, i+offset, intent)
			}
		}
		for _, o := range oos {
			fmt.Fprintf(&b, "{\"text\": %q, \"label\": \"oos\"}\n", o)
		}
		return b.String()
	}
	write(t, filepath.Join(dir, "train.jsonl"), lines(12, 0, []string{"tell me a joke", "what is the weather", "play jazz music", "who won the game"}))
	if withVal {
		write(t, filepath.Join(dir, "val.jsonl"), lines(4, 1, []string{"sing me a song", "how tall is everest"}))
	}
	write(t, filepath.Join(dir, "test.jsonl"), lines(2, 2, []string{"tell me a funny joke", "what is the weather like"}))
	return dir
}

func TestEvalIntentsOnGeneratedDataset(t *testing.T) {
	for _, tc := range []struct {
		name    string
		withVal bool
		val     int
	}{
		{"with val", true, 14},
		{"without val", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := intentSet(t, tc.withVal)
			out, stderr, code := run(t, "eval", "intents", "--dataset", dir, "--split", "test", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep eval.IntentReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Dataset != filepath.Base(dir) || rep.Split != "test" || rep.Labels != 4 || rep.TrainExamples != 40 ||
				rep.ValExamples != tc.val || rep.Examples != 8 || rep.InScope != 6 || rep.OutOfScope != 2 || rep.ECEBins != 15 {
				t.Errorf("counts: %+v", rep)
			}
			if rep.InScopeAccuracy != 1 || rep.OOSRecall == nil || *rep.OOSRecall != 1 || rep.Accuracy != 1 || rep.MacroF1 != 1 {
				t.Errorf("a separable set is not learned: %s", out)
			}
			if rep.Latency.P50 <= 0 || rep.Temperature <= 0 {
				t.Errorf("latency or temperature missing: %s", out)
			}
			var raw map[string]any
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"accuracy", "in_scope_accuracy", "oos_recall", "oos_precision", "macro_f1", "ece", "latency_us", "train_seconds"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("json lacks %q: %s", k, out)
				}
			}
			text, _, code := run(t, "eval", "intents", "--dataset", dir)
			if code != 0 || !strings.Contains(text, "in-scope accuracy:") || !strings.Contains(text, "oos recall / precision:") {
				t.Errorf("text output (exit %d):\n%s", code, text)
			}
		})
	}
}

func TestEvalIntentsBadInput(t *testing.T) {
	dir := intentSet(t, true)
	bad := t.TempDir()
	write(t, filepath.Join(bad, "train.jsonl"), "{\"text\": \"hi\", \"label\": \"a\"}\n{\"text\": \"yo\"}\n")
	write(t, filepath.Join(bad, "test.jsonl"), "{\"text\": \"hi\", \"label\": \"a\"}\n")
	unknown := intentSet(t, true)
	write(t, filepath.Join(unknown, "val.jsonl"), "{\"text\": \"hi there\", \"label\": \"weather\"}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing split", []string{"--dataset", dir, "--split", "dev"}, "dev.jsonl"},
		{"missing label", []string{"--dataset", bad}, "train.jsonl:2: missing \"label\""},
		{"val label unknown to train", []string{"--dataset", unknown}, `validation: example 1 (label "weather")`},
		{"empty oos label", []string{"--dataset", dir, "--oos-label", ""}, "--oos-label"},
		{"bad output", []string{"--dataset", dir, "-o", "yaml"}, "--output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := run(t, append([]string{"eval", "intents"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want an error naming %q", code, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "dev.jsonl")); err == nil {
		t.Fatal("fixture has dev.jsonl")
	}
}
