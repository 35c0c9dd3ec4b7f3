package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeManifests writes one manifest file into a new folder and returns the folder.
func writeManifests(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const twoRouters = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: staff}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: members}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt}
spec: {type: Inline, inline: {content: "Be brief."}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: always}
spec: {sources: [{name: prompt}]}
`

// TestTwoRoutersNameTheFlag: a command that needs one router of several says
// which flag picks it and lists them.
func TestTwoRoutersNameTheFlag(t *testing.T) {
	dir := writeManifests(t, twoRouters)
	for _, args := range [][]string{
		{"query", "-f", dir, "hello"},
		{"tools", "-f", dir, "hello"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, stderr, code := run(t, args...)
			want := `the manifests define 2 ContextRouters ("staff", "members"): choose one with --router, such as --router staff`
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
			}
		})
	}
	if out, stderr, code := run(t, "query", "-f", dir, "--router", "staff", "hello"); code != 0 || !strings.Contains(out, "router:          staff") {
		t.Errorf("with --router: exit %d\n%s%s", code, out, stderr)
	}
}
