package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const theaiosConfig = `version: "1.0"
metadata: {name: acme}
sources:
  prompt: {type: inline, content: "Be brief."}
  docs:
    type: directory
    path: docs
    patterns: ["*.md"]
routes:
  - name: always
    sources: [prompt]
  - name: policies
    when: 'text contains "policy"'
    sources: [docs]
  - name: old
    enabled: false
    sources: [docs]
permissions:
  - agent: "*"
    deny_paths: ["**/secrets/**"]
`

// convert writes manifests that validate accepts and query answers from;
// notes go to stderr; a bad file exits 1 with located errors and writes nothing.
func TestConvertCommand(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs", "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"context-router.yaml":  theaiosConfig,
		"docs/leave.md":        "# Leave policy\n\nTwenty days a year.\n",
		"docs/secrets/keys.md": "# Key policy\n\nThe key is hunter2.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := filepath.Join(dir, "context-router.yaml")
	out := filepath.Join(dir, "manifests")

	stdout, stderr, code := run(t, "convert", "--from", "theaios", in, "-o", out)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if want := "note: " + in + ":16: routes[2].enabled: a disabled route never matches; it is left out\n"; stderr != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	for _, f := range []string{"router.yaml", "sources.yaml", "routes.yaml", "permissions.yaml"} {
		data, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# Converted by `contextrouter convert --from theaios` from "+in+".\n") {
			t.Errorf("%s has no header:\n%s", f, data)
		}
	}
	stdout, stderr, code = run(t, "validate", "-f", out)
	if code != 0 || stdout != "valid: 1 routers, 2 routes, 2 sources, 1 permissions\n" {
		t.Fatalf("validate: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, "query", "-f", out, "--full", "What is the leave policy?")
	if code != 0 || !strings.Contains(stdout, "Twenty days a year.") || strings.Contains(stdout, "hunter2") || !strings.Contains(stdout, "Be brief.") {
		t.Errorf("query: exit %d\n%s%s", code, stdout, stderr)
	}

	// stdout: one stream, the same objects.
	stdout, _, code = run(t, "convert", "--from", "theaios", in)
	if code != 0 || strings.Count(stdout, "\n---\n") != 5 || !strings.Contains(stdout, "kind: AgentPermission") {
		t.Errorf("stream: exit %d\n%s", code, stdout)
	}

	// A bad file: every error, located; the output folder is left as it was.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("rotues: []\nsources:\n  d: {type: inline, content: x}\nroutes:\n  - when: text includes \"x\"\n    sources: [d]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = run(t, "convert", "--from", "theaios", bad, "-o", out)
	want := "error: " + bad + `:1: rotues: unknown key (did you mean "routes"?)` + "\n" +
		"error: " + bad + `:5:16: routes[0].when: unknown operator "includes" (known: and, or, not, ==, !=, <, <=, >, >=, contains, starts_with, ends_with, matches, in, not in)` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d\nstderr: %s\nwant:   %s", code, stderr, want)
	}
	if _, _, code := run(t, "validate", "-f", out); code != 0 {
		t.Error("a failed conversion changed the output folder")
	}
	if _, stderr, code := run(t, "convert", "--from", "langchain", in); code != 1 || !strings.Contains(stderr, `--from "langchain": supported formats: theaios`) {
		t.Errorf("--from langchain: exit %d, %s", code, stderr)
	}
}
