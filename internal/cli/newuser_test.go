package cli

import (
	"encoding/json"
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

// promptAndRoute is an inline prompt that one route sends to every query.
const promptAndRoute = `---
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

const twoRouters = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: staff}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: members}
` + promptAndRoute

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

// skippingSource is a Directory source that leaves three files out: two too
// large, one binary.
func skippingSource(t *testing.T) string {
	t.Helper()
	dir := writeManifests(t, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec:
  type: Directory
  directory: {path: docs, include: ["**/*"], maxFileSize: "1Ki"}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: wiki}]
`)
	docs := filepath.Join(dir, "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"bees.md":  "# Bees\n\nBees make honey.\n",
		"big.md":   strings.Repeat("word ", 400),
		"huge.md":  strings.Repeat("word ", 500),
		"logo.png": "\x89PNG\r\n\x1a\n\x00\x00",
	} {
		if err := os.WriteFile(filepath.Join(docs, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSkippedFilesAreListed: files left out at load are listed by validate
// (a warning per source with counts, reasons and paths) and counted in
// serve's /v1/status (counts only: no file names), without --log-level info.
func TestSkippedFilesAreListed(t *testing.T) {
	dir := skippingSource(t)
	out, stderr, code := run(t, "validate", "-f", dir)
	want := "warning: " + filepath.Join(dir, "m.yaml") + ":1: ContextSource/wiki: skipped 3 files: 1 not UTF-8 text (binary or other encoding), 2 file larger than maxFileSize (big.md, huge.md, logo.png); run with --log-level info to see each file"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "; 1 warnings") {
		t.Errorf("validate: exit %d\n%s%s\nwant the line %s", code, out, stderr, want)
	}

	s := startServe(t, "-f", dir)
	var status struct {
		Sources []struct {
			Name    string `json:"name"`
			Chunks  int    `json:"chunks"`
			Skipped *struct {
				Files    int            `json:"files"`
				Reasons  map[string]int `json:"reasons"`
				Examples []string       `json:"examples"`
			} `json:"skipped"`
		} `json:"sources"`
	}
	if err := json.Unmarshal([]byte(s.get(t, "/v1/status")), &status); err != nil {
		t.Fatal(err)
	}
	if len(status.Sources) != 1 || status.Sources[0].Skipped == nil {
		t.Fatalf("status sources = %+v, want wiki with skipped files", status.Sources)
	}
	sk := status.Sources[0].Skipped
	if sk.Files != 3 || sk.Reasons["too_large"] != 2 || sk.Reasons["not_utf8"] != 1 || len(sk.Reasons) != 2 ||
		sk.Examples != nil || status.Sources[0].Chunks != 1 {
		t.Errorf("status of wiki = %+v, skipped %+v", status.Sources[0], *sk)
	}
}

const deniedAgent = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: club}
spec: {defaultAccess: Deny}
` + promptAndRoute + `---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: staff}
spec: {agents: [staff_bot, admin_bot], allowSources: [prompt]}
`

// TestUnnamedAgentIsTold: a query by an agent that no permission names, under
// defaultAccess: Deny, says so: query on stderr (with the known agents, for
// the local user), serve in the response's warnings (without them).
func TestUnnamedAgentIsTold(t *testing.T) {
	dir := writeManifests(t, deniedAgent)
	out, stderr, code := run(t, "query", "-f", dir, "-a", "member_bot", "hello")
	for _, want := range []string{
		`warning: no AgentPermission names agent "member_bot", so the router's defaultAccess: Deny denies every source`,
		"warning: known agents: admin_bot, staff_bot (-a/--agent)",
	} {
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("query: exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	if !strings.Contains(out, "denied sources:  prompt") {
		t.Errorf("query output:\n%s", out)
	}
	if _, stderr, _ := run(t, "query", "-f", dir, "-a", "staff_bot", "hello"); strings.Contains(stderr, "warning") {
		t.Errorf("a named agent got warnings:\n%s", stderr)
	}

	s := startServe(t, "-f", dir)
	code, body := s.post(t, `{"text": "hello", "agent": "member_bot"}`)
	var resp struct {
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(body, &resp); err != nil || code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], `no AgentPermission names agent "member_bot"`) {
		t.Errorf("warnings = %q", resp.Warnings)
	}
	if strings.Contains(string(body), "staff_bot") {
		t.Errorf("the response names another agent: %s", body)
	}
}
