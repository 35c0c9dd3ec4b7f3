package cli

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// A question whose route conditions outlast --query-timeout is an error that
// says so, not an answer with those routes missing.
func TestQueryTimeout(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: notes}
spec:
  type: Inline
  inline: {title: Notes, content: "Deploy checklists."}
`)
	for i := range 20 {
		fmt.Fprintf(&b, `---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: slow-%d}
spec:
  when: 'text.split(" ").exists(w, w == "zz") || text.split(" ").exists(w, w == "yy")'
  sources: [{name: notes}]
`, i)
	}
	write(t, filepath.Join(dir, "router.yaml"), b.String())
	question := strings.Repeat("a ", engine.MaxTextBytes/2)

	_, stderr, code := run(t, "query", "-f", dir, "--query-timeout", "20ms", question)
	want := regexp.MustCompile(`^error: query exceeded the 20ms timeout while evaluating the condition of route "slow-\d+" \(--query-timeout\)\n$`)
	if code == 0 || !want.MatchString(stderr) {
		t.Errorf("exit %d, stderr %q; want %s", code, stderr, want)
	}
	if _, stderr, code := run(t, "query", "-f", dir, "--query-timeout", "0s", "hi"); code == 0 || !strings.Contains(stderr, "--query-timeout: 0s must be positive") {
		t.Errorf("zero timeout: exit %d, stderr %q", code, stderr)
	}
	// With the default timeout the same question is answered.
	out, stderr, code := run(t, "query", "-f", dir, question)
	if code != 0 || !strings.Contains(out, "matched routes:  (none)") {
		t.Errorf("default timeout: exit %d, stderr %q, output:\n%.300s", code, stderr, out)
	}
}
