package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// Issue 20's routing stumbles as a new user meets them in validate and query.

const issue20Sources = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt}
spec: {type: Inline, inline: {title: System prompt, content: "You are the help desk assistant."}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: faq}
spec: {type: Inline, inline: {title: FAQ, content: "Printers are on the second floor."}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: handbook}
spec: {type: Inline, inline: {title: Handbook, content: "The handbook covers everything else."}}
`

// issue20Route is a route document; extra holds more spec lines.
func issue20Route(name, extra string) string {
	return "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: " + name + "}\nspec:\n" + extra
}

// TestPinnedContextAndFallbackInQuery: an always-route's system prompt and a
// fallback answer an unmatched question together.
func TestPinnedContextAndFallbackInQuery(t *testing.T) {
	dir := writeManifests(t, issue20Sources+
		issue20Route("system", "  sources: [{name: prompt}]\n")+
		issue20Route("printers", "  when: 'containsAnyWord(text, [\"printer\"])'\n  sources: [{name: faq}]\n")+
		issue20Route("everything", "  fallback: true\n  sources: [{name: handbook}]\n"))
	for _, tt := range []struct{ question, routes string }{
		{"What is for lunch?", "matched routes:  system, everything (fallback)"},
		{"Where is the printer?", "matched routes:  system, printers\n"},
	} {
		out, stderr, code := run(t, "query", "-f", dir, "--full", tt.question)
		if code != 0 || !strings.Contains(out, tt.routes) || !strings.Contains(out, "You are the help desk assistant.") {
			t.Errorf("query %q: exit %d, want %q and the system prompt:\n%s%s", tt.question, code, tt.routes, out, stderr)
		}
	}
}

// TestValidateGateWarnings: a fallback that can never serve and an alternate
// that can never serve are warnings at their field's line.
func TestValidateGateWarnings(t *testing.T) {
	dir := writeManifests(t, issue20Sources+
		issue20Route("system", "  when: 'true'\n  sources: [{name: prompt}]\n")+
		issue20Route("printers", "  when: 'containsAnyWord(text, [\"printer\"])'\n  sources: [{name: prompt}, {name: faq}]\n  alternate: everything\n")+
		issue20Route("everything", "  fallback: true\n  sources: [{name: handbook}]\n"))
	out, _, code := run(t, "validate", "-f", dir)
	file := filepath.Join(dir, "m.yaml")
	for _, want := range []string{
		"warning: " + file + `:29: ContextRoute/printers: spec.alternate: this alternate can never serve: every source of the route (prompt, faq) is Inline or an inline tool catalog, which cannot fail, and an alternate serves only when every source of the route that can fail failed`,
		"warning: " + file + `:35: ContextRoute/everything: spec.fallback: this fallback can never serve: the condition of ContextRoute "system" holds for every query (when: "true"), and a fallback serves only when no route matched by its condition; leave that route's when empty to make it apply to every query without counting as a match`,
		"valid: 1 routers, 3 routes, 3 sources, 0 permissions (implied default router); 2 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate lacks\n%s\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d, want 0 (warnings only)", code)
	}
}

// TestUnknownLabelEveryRun: a misspelt label is an error with the labels and
// the nearest one, in validate (beside an error in another file) and query.
func TestUnknownLabelEveryRun(t *testing.T) {
	const classifier = `---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextClassifier
metadata: {name: intent}
spec:
  labels:
  - {name: it_help, examples: [my laptop does not start, reset my password, the vpn is down]}
  - {name: billing, examples: [where is my invoice, I was charged twice]}
  - {name: other, examples: [what is for lunch, tell me a joke]}
  outOfScopeLabel: other
  threshold: "0.5"
`
	dir := writeManifests(t, issue20Sources+classifier+
		issue20Route("it", "  when: 'detected.intent.label == \"it-help\"'\n  sources: [{name: faq}]\n")) // when: at line 31
	file := filepath.Join(dir, "m.yaml")
	want := file + `:31: ContextRoute/it: spec.when: detected.intent.label compared with "it-help", which is not a label of ContextClassifier intent (did you mean "it_help"?); its labels are "billing", "it_help", "other"`

	// Another file with an error of its own: both are reported in one run.
	write(t, filepath.Join(dir, "z-broken.yaml"), "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: broken}\nspec: {type: Inline, inlne: {content: x}}\n")
	out, _, code := run(t, "validate", "-f", dir)
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, `ContextSource/broken: spec.inlne: unknown field (did you mean "inline"?)`) {
		t.Errorf("validate: exit %d, want 1 with\n%s\nand the other file's error:\n%s", code, want, out)
	}

	// query refuses to answer, with the same line.
	dir = writeManifests(t, issue20Sources+classifier+
		issue20Route("it", "  when: 'detected.intent.label == \"it-help\"'\n  sources: [{name: faq}]\n"))
	want = strings.ReplaceAll(want, filepath.Dir(file), dir)
	out, stderr, code := run(t, "query", "-f", dir, "my laptop does not start")
	if code != 1 || !strings.Contains(stderr, "error: "+want) {
		t.Errorf("query: exit %d, want 1 with the error\n%s\nstdout:\n%s\nstderr:\n%s", code, want, out, stderr)
	}
}
