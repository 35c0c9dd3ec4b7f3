package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// validate reports classifiers and their bad input with file, line, object and field.
func TestValidateClassifiers(t *testing.T) {
	const head = "apiVersion: contextrouter.dev/v1alpha1\n"
	const source = head + "kind: ContextSource\nmetadata: {name: docs}\nspec: {type: Inline, inline: {content: hello}}\n" +
		"---\n" + head + "kind: ContextSource\nmetadata: {name: examples}\nspec: {type: Directory, directory: {path: data, include: ['**/*.md']}}\n"
	classifier := func(extra string) string {
		return "---\n" + head + "kind: ContextClassifier\nmetadata: {name: intent}\nspec:\n" +
			"  labels:\n  - name: refund\n    examples: [money back, refund my order]\n  - name: deploy\n    examples: [roll out the release]\n" + extra
	}
	route := func(when string) string {
		return "---\n" + head + "kind: ContextRoute\nmetadata: {name: r}\nspec:\n  when: '" + when + "'\n  sources: [{name: docs}]\n"
	}
	tests := []struct {
		name string
		yaml string
		code int
		want []string // substrings of the output, {dir} standing for the folder
	}{
		{"valid, with the classifier listed", source + classifier("") + route(`detected.intent.label == "refund"`), 0, []string{
			"classifier intent: 2 labels (deploy 1, refund 2), training accuracy ",
			"valid: 1 routers, 1 routes, 2 sources, 0 permissions, 1 classifiers"}},
		{"unknown label: an error naming the labels and the nearest", source + classifier("") + route(`detected.intent.label == "refnd"`), 1, []string{
			`{dir}/m.yaml:25: ContextRoute/r: spec.when: detected.intent.label compared with "refnd", which is not a label of ContextClassifier intent (did you mean "refund"?); its labels are "deploy", "refund"`}},
		{"no out-of-scope examples: a warning naming the classifier", source + classifier("") + route(`detected.intent.label == "refund"`), 0, []string{
			`warning: {dir}/m.yaml:14: ContextClassifier/intent: spec.outOfScopeLabel: no out-of-scope examples: a question none of the labels covers still gets the nearest label, often with high confidence; set outOfScopeLabel (such as "other") and give that label examples of questions the routes should not take`,
			"; 1 warnings"}},
		{"an out-of-scope label without examples: a warning at its line", source + classifier("  outOfScopeLabel: other\n") + route(`detected.intent.label == "refund"`), 0, []string{
			`warning: {dir}/m.yaml:20: ContextClassifier/intent: spec.outOfScopeLabel: label "other" has no examples: `,
			"; 1 warnings"}},
		{"unknown classifier: an error", source + classifier("") + route(`detected.intnt.label == "refund"`), 1, []string{
			`{dir}/m.yaml:25: ContextRoute/r: spec.when: detected.intnt: no ContextClassifier "intnt" attaches to router default (known: "intent")`}},
		{"label without examples", source + strings.Replace(classifier(""), "examples: [roll out the release]", "examples: []", 1), 1, []string{
			`{dir}/m.yaml:19: ContextClassifier/intent: spec.labels[1].examples: Required value: a label needs at least one example`}},
		{"pattern that does not compile", source + classifier("  entities:\n  - {type: ticket, pattern: '([A-Z'}\n"), 1, []string{
			`{dir}/m.yaml:21: ContextClassifier/intent: spec.entities[0].pattern: Invalid value: "([A-Z": error parsing regexp: missing closing ]`}},
		{"pattern past the instruction limit (issue 22)", source + classifier("  entities:\n  - {type: run, pattern: '(?:a|aa){1,995}b'}\n"), 1, []string{
			`{dir}/m.yaml:21: ContextClassifier/intent: spec.entities[0].pattern: Invalid value: "(?:a|aa){1,995}b": compiles to 4977 instructions; patterns are limited to 1000`}},
		{"examples file missing", source + classifier("  examplesFrom: {source: examples, path: intents/missing.jsonl}\n"), 1, []string{
			`ContextClassifier/intent: spec.examplesFrom: intents/missing.jsonl: file not found in ContextSource "examples"`}},
		{"examples file malformed", source + classifier("  examplesFrom: {source: examples, path: intents/bad.jsonl}\n"), 1, []string{
			`ContextClassifier/intent: spec.examplesFrom: intents/bad.jsonl:2: invalid JSON`}},
		{"example past the byte limit", source + strings.Replace(classifier(""), "roll out the release", strings.Repeat("x", 1025), 1), 1, []string{
			`ContextClassifier/intent: spec.labels[1].examples[0]: Invalid value: "xxxx`, "1025 bytes; examples are limited to 1024 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "m.yaml"), tc.yaml)
			if err := os.MkdirAll(filepath.Join(dir, "data", "intents"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "data", "intents", "bad.jsonl"), `{"text": "ok", "label": "a"}`+"\n"+`{"text": `+"\n")
			out, _, code := run(t, "validate", "-f", filepath.Join(dir, "m.yaml"))
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "{dir}", dir); !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}
