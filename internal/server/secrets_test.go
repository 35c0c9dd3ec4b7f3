package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// fakeSecrets are secrets in real formats, made at test time (no real
// credential is ever committed): an AWS access key id, a GitHub token, a
// database URL's password and a PEM private key.
type fakeSecrets struct {
	aws, github, dbPassword, pemKey string
}

func newFakeSecrets(t *testing.T) fakeSecrets {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return fakeSecrets{
		aws:        "AKIA" + "Z7Q2X4B9K1M3N5P8",
		github:     "ghp_" + strings.Repeat("aB3dE6gH9j", 3) + "K2mN5p",
		dbPassword: "S3cr3t-Passw0rd-42",
		pemKey:     string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
	}
}

// envDump is the tool result of the issue: an environment dump holding
// every kind of secret above, and values that must stay.
func (f fakeSecrets) envDump() string {
	return "HOME=/home/app\n" +
		"AWS_ACCESS_KEY_ID=" + f.aws + "\n" +
		"GITHUB_TOKEN=" + f.github + "\n" +
		"DATABASE_URL=postgres://app:" + f.dbPassword + "@db.internal:5432/orders\n" +
		"GIT_COMMIT=4f1c9e2a7b3d5f6e8a9b0c1d2e3f4a5b6c7d8e9f\n" +
		"TLS_KEY=" + strings.ReplaceAll(f.pemKey, "\n", "\\n") + "\n" +
		"LOG_LEVEL=info\n"
}

func (f fakeSecrets) values() []string {
	body := strings.Split(strings.TrimSpace(f.pemKey), "\n")[1] // a line of the key's base64
	return []string{f.aws, f.github, f.dbPassword, body}
}

// TestSessionSecretsMasked: a session written over HTTP holds no secret in
// any answer that reads it back (the write answer, GET, a pack, drill-down
// views), the masks are counted in the write answer, the pack stats and the
// metric; with spec.sessions.secrets: Off the text is stored as written.
func TestSessionSecretsMasked(t *testing.T) {
	f := newFakeSecrets(t)
	dump := f.envDump()
	write := func(ts *testServer, id string) string {
		t.Helper()
		return ts.mustCall(200, "POST", "/v1/sessions/"+id+"/items", sessionItems{Agent: "hr-assistant", Items: []session.Item{
			{ID: "u1", Kind: session.KindUserTurn, Text: "Why can the app not reach the database? I set password=" + f.dbPassword + " as told."},
			{ID: "c1", Kind: session.KindToolCall, Text: "shell.run(\"env\")"},
			{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: dump + strings.Repeat("PATH_ENTRY=/usr/local/bin\n", 100),
				Metadata: map[string]string{"api_key": "k-" + f.github[4:20]}},
		}}, nil)
	}

	t.Run("Mask", func(t *testing.T) {
		ts := startServer(t, Options{Paths: []string{quickstart}})
		ts.waitReady()
		ans := write(ts, "s1")
		if !strings.Contains(ans, `"secrets_masked":6`) {
			t.Errorf("write answer %s: want secrets_masked 6 (the password, the aws key, the github token, the url password, the pem key, the api_key metadata)", ans)
		}
		ts.mustCall(200, "PUT", "/v1/sessions/s1/facts/db_password", map[string]string{"agent": "hr-assistant", "value": f.dbPassword}, nil)
		got := ts.mustCall(200, "GET", "/v1/sessions/s1?agent=hr-assistant", nil, nil)
		pack := ts.mustCall(200, "POST", "/v1/sessions/s1/context", map[string]any{"agent": "hr-assistant", "phase": "answer", "query": "database password"}, nil)
		p := decodePack(t, pack)
		if len(p.Artifacts) != 1 {
			t.Fatalf("want the env dump firewalled: %+v", p.Artifacts)
		}
		ref := url.PathEscape(p.Artifacts[0].Ref)
		lines := ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?agent=hr-assistant&view=lines&from=1&to=10", nil, nil)
		grep := ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?agent=hr-assistant&view=grep&pattern=secret&literal=true", nil, nil)
		for name, out := range map[string]string{"write": ans, "GET": got, "pack": pack, "lines": lines, "grep": grep} {
			for _, v := range f.values() {
				if strings.Contains(out, v) {
					t.Errorf("%s answer holds the secret %q:\n%s", name, v, out)
				}
			}
		}
		for _, want := range []string{"AWS_ACCESS_KEY_ID=[secret:aws-access-key]", "GITHUB_TOKEN=[secret:github-token]",
			"postgres://app:[secret:url-password]@db.internal:5432/orders", "[secret:private-key]", "GIT_COMMIT=4f1c9e2a7b3d5f6e8a9b0c1d2e3f4a5b6c7d8e9f"} {
			if !strings.Contains(lines, want) {
				t.Errorf("drill-down lines lack %q:\n%s", want, lines)
			}
		}
		if !strings.Contains(got, `"api_key":"[secret:`) || !strings.Contains(got, `"value":"[secret:`) {
			t.Errorf("GET: metadata or fact value not masked:\n%s", got)
		}
		if p.Stats.SecretsMasked == 0 || p.Stats.SecretsMasked != strings.Count(p.Text, "[secret:") {
			t.Errorf("pack stats secrets_masked %d, text holds %d masks", p.Stats.SecretsMasked, strings.Count(p.Text, "[secret:"))
		}
		if v, _ := ts.metric("contextrouter_session_secrets_masked_total", "rule", "aws-access-key"); v != 1 {
			t.Errorf("secrets_masked_total{rule=aws-access-key} = %v, want 1", v)
		}
		if v, _ := ts.metric("contextrouter_session_secrets_masked_total", "rule", "password"); v != 2 {
			t.Errorf("secrets_masked_total{rule=password} = %v, want 2 (the user turn's password= and the fact)", v)
		}
	})

	t.Run("Off", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(quickstart)); err != nil {
			t.Fatal(err)
		}
		router := filepath.Join(dir, "router.yaml")
		raw, err := os.ReadFile(router)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(router, append(raw, "  sessions:\n    secrets: \"Off\"\n"...), 0o600); err != nil {
			t.Fatal(err)
		}
		ts := startServer(t, Options{Paths: []string{dir}})
		ts.waitReady()
		if ans := write(ts, "s1"); strings.Contains(ans, "secrets_masked") {
			t.Errorf("secrets: Off answered %s", ans)
		}
		got := ts.mustCall(200, "GET", "/v1/sessions/s1?agent=hr-assistant", nil, nil)
		if !strings.Contains(got, f.aws) || strings.Contains(got, "[secret:") {
			t.Errorf("secrets: Off changed the text:\n%s", got)
		}
	})
}
