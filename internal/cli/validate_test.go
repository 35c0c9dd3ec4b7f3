package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/redact/redacttest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// TestValidateReportsEveryProblemOnce: one run reports every independent
// problem of every file — an unknown field, a condition that does not
// compile, a route to a missing source, an enum value in the wrong case, a
// folder that cannot be read, a warning — each once, on one line, at its
// file and line, in file order; and nothing that only follows from another
// (the route to the source that did not decode is not "not found", the
// engine does not repeat the enum in its own words).
func TestValidateReportsEveryProblemOnce(t *testing.T) {
	dir := filepath.Join("testdata", "every-problem")
	f := func(name string) string { return filepath.Join(dir, name) }
	want := []string{
		f("a-unknown-field.yaml") + `:8: ContextSource/docs: spec.inlne: unknown field (did you mean "inline"?)`,
		f("b-broken-cel.yaml") + `:8:24: ContextRoute/broken: spec.when: Invalid value: "text.contains(": ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>' expecting`,
		f("c-missing-source.yaml") + `:6: ContextRoute/missing: spec.sources[0].name: ContextSource "handbok" not found (did you mean "handbook"?)`,
		f("c-missing-source.yaml") + `:14: ContextSource/handbook: directory "no-such-folder"`,
		f("d-enum-case.yaml") + `:7: ContextRouter/acme: spec.ranking.scorer: Unsupported value: "keyword": supported values: "BM25", "Keyword" (did you mean "Keyword"?)`,
		"warning: " + f("d-enum-case.yaml") + `:15: AgentPermission/support: spec.allowSources[0]: ContextSource "faq" not found`,
	}
	for _, args := range [][]string{{"-f", dir}, {"-f", f("d-enum-case.yaml"), "-f", dir}} {
		out, _, code := run(t, append([]string{"validate"}, args...)...)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if args[1] != dir {
			// The file named first is read first.
			want = append(want[4:], want[:4]...)
		}
		if len(lines) != len(want) {
			t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d:\n got %s\nwant %s…", i+1, lines[i], w)
			}
		}
		if strings.Contains(out, `ContextSource "docs" not found`) || strings.Contains(out, "must be BM25 or Keyword") {
			t.Errorf("a consequence was reported:\n%s", out)
		}
	}
}

// A git server that refuses the credentials and echoes them (as sent,
// URL-encoded and decoded) in its 403 body: validate reports the source
// with the server's text on one line, and shows no encoding of the token, on
// stdout or in the log (at debug). (validate does not call HTTP APIs.)
func TestValidateEchoedCredentials(t *testing.T) {
	const token = "ghp_Val1dateEch0Token42"
	git := httptest.NewServer(redacttest.EchoHandler(http.StatusForbidden, "Authorization"))
	defer git.Close()
	t.Setenv(sources.SecretEnvVar("wiki", "token"), token)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sources.yaml"), fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec:
  type: GitRepo
  gitRepo: {url: %q, auth: {secretRef: {name: wiki}}}
`, git.URL+"/org/wiki.git"))
	out, stderr, code := run(t, "--log-level", "debug", "validate", "-f", dir, "--secrets-dir", "", "--cache-dir", t.TempDir())
	if code != 1 || !strings.Contains(out, "authorization failed: access denied. Authorization: Basic ***; encoded: Basic+***; you sent x-access-token:***\n") {
		t.Errorf("exit %d, want 1 and the git server's text, masked:\n%s", code, out)
	}
	forms := redacttest.BasicForms("x-access-token", token)
	for what, text := range map[string]string{"stdout": out, "the log": stderr} {
		if leaks := redacttest.Leaks(text, forms); len(leaks) > 0 {
			t.Errorf("%s shows %q:\n%s", what, leaks, text)
		}
	}
}
