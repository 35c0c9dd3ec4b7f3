package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"HOST": "git.example.com", "EMPTY": "", "TOKEN": "s3cr3t"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		unset    []string
	}{
		{"plain", "plain", nil},
		{"https://${HOST}/wiki.git", "https://git.example.com/wiki.git", nil},
		{"${HOST}${HOST}", "git.example.com" + "git.example.com", nil},
		{"empty: [${EMPTY}]", "empty: []", nil},
		{"literal $${HOST} and ${HOST}", "literal ${HOST} and git.example.com", nil},
		{"costs $5 and ${ not a ref", "costs $5 and ${ not a ref", nil},
		{"${1X} ${a-b} ${}", "${1X} ${a-b} ${}", nil},
		{"echo ${MISSING} ${OTHER} ${MISSING}", "echo   ", []string{"MISSING", "OTHER"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, unset := ExpandEnv(tc.in, lookup)
			if !slices.Equal(unset, tc.unset) {
				t.Fatalf("unset = %v, want %v", unset, tc.unset)
			}
			if tc.unset == nil && got != tc.want {
				t.Errorf("ExpandEnv(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestLoadExpandsEnv: ${NAME} is replaced at load in paths, URLs and inline
// text; an unset variable is a located problem naming the object, the field
// and the variable, never a value; header values are left for the request.
func TestLoadExpandsEnv(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt}
spec:
  type: Inline
  inline:
    content: "You work for ${CR_TEST_COMPANY}. Shell: $${HOME}."
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory:
    path: ${CR_TEST_DOCS}/hr
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: kb}
spec:
  type: HTTPAPI
  httpAPI:
    url: https://${CR_TEST_HOST}/search?q={{query}}
    textField: text
    headers:
    - name: X-Tenant
      value: "${CR_TEST_TENANT}"
`
	file := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CR_TEST_COMPANY": "Acme", "CR_TEST_DOCS": "/srv/docs", "CR_TEST_HOST": "kb.example.com", "CR_TEST_TENANT": "t1"}
	set, err := LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, file)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range set.Sources {
		switch {
		case s.Spec.Inline != nil:
			got["inline"] = s.Spec.Inline.Content
		case s.Spec.Directory != nil:
			got["path"] = s.Spec.Directory.Path
		case s.Spec.HTTPAPI != nil:
			got["url"] = s.Spec.HTTPAPI.URL
			got["header"] = *s.Spec.HTTPAPI.Headers[0].Value
		}
	}
	want := map[string]string{
		"inline": "You work for Acme. Shell: ${HOME}.", "path": "/srv/docs/hr",
		"url": "https://kb.example.com/search?q={{query}}", "header": "${CR_TEST_TENANT}",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	delete(env, "CR_TEST_HOST")
	env["CR_TEST_COMPANY"] = "secret-value"
	delete(env, "CR_TEST_DOCS")
	unset, err := LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, file)
	if err == nil {
		t.Fatal("an unset variable loaded")
	}
	// The field is reported once, as the unset variable: the check of the
	// objects (validate) does not add "must start with http://" for ${...}.
	for _, p := range unset.Check() {
		if p.Name == "kb" && p.Field == "spec.httpAPI.url" || p.Name == "docs" && p.Field == "spec.directory.path" {
			t.Errorf("unexpanded field reported again by Check: %s", p.Message)
		}
	}
	msg := err.Error()
	for _, w := range []string{
		file + ":15: ContextSource/docs: spec.directory.path: environment variable CR_TEST_DOCS is not set (write $${CR_TEST_DOCS} for a literal ${CR_TEST_DOCS})",
		file + ":23: ContextSource/kb: spec.httpAPI.url: environment variable CR_TEST_HOST is not set",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, "secret-value") {
		t.Errorf("error shows a variable's value:\n%s", msg)
	}
	if n := strings.Count(msg, "\n") + 1; n != 2 {
		t.Errorf("%d problems, want 2:\n%s", n, msg)
	}

	// Expansion off: the text stays as written.
	set, err = LoadEnv(nil, file)
	if err != nil {
		t.Fatal(err)
	}
	if p := set.Sources[1].Spec.Directory.Path; p != "${CR_TEST_DOCS}/hr" {
		t.Errorf("without expansion path = %q", p)
	}
}

// TestLoadReadsTheProcessEnvironment: Load (what query, validate and serve
// use) expands from the process environment.
func TestLoadReadsTheProcessEnvironment(t *testing.T) {
	t.Setenv("CR_TEST_PROMPT_COMPANY", "Acme")
	file := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: p}\nspec:\n  type: Inline\n  inline: {content: \"Hello ${CR_TEST_PROMPT_COMPANY}\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Sources[0].Spec.Inline.Content; got != "Hello Acme" {
		t.Errorf("content = %q, want %q", got, "Hello Acme")
	}
}
