package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// countLines is the number of lines of a file (0 when it does not exist).
func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
	}
	return n
}

// TestServeAuditLog: serve --audit-log writes one line per query and, on
// SIGHUP after the file was moved away (log rotation), opens a new file.
func TestServeAuditLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startServe(t, "-f", quickstart, "--audit-log", logPath)
	query := `{"text": "How many vacation days do I get?", "agent": "hr-assistant"}`
	if code, body := s.post(t, query); code != 200 {
		t.Fatalf("query: %d %s", code, body)
	}
	// Lines are written by the audit writer, after the answer.
	deadline := time.Now().Add(10 * time.Second)
	for countLines(t, logPath) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := countLines(t, logPath); n != 1 {
		t.Fatalf("%d audit lines after one query, want 1", n)
	}
	data, _ := os.ReadFile(logPath)
	if !strings.Contains(string(data), `"type":"contextrouter.audit.v1"`) || strings.Contains(string(data), "vacation") {
		t.Errorf("audit line %s: want a record without the question", data)
	}

	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reopen happens on serve's signal goroutine: ask until a line lands in the new file.
	deadline = time.Now().Add(10 * time.Second)
	for countLines(t, logPath) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no line in the reopened file:\n%s", s.stderr.String())
		}
		s.post(t, query)
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(s.stderr.String(), "SIGHUP: audit log reopened") {
		t.Errorf("no log line about the reopen:\n%s", s.stderr.String())
	}
	if n := countLines(t, logPath+".1"); n < 1 {
		t.Errorf("the rotated file holds %d lines", n)
	}
}

// TestServeAuditLogCannotOpen: a file that cannot be created stops serve
// with the flag and the path.
func TestServeAuditLogCannotOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "audit.jsonl")
	_, stderr, code := run(t, "serve", "-f", quickstart, "--listen", "127.0.0.1:0", "--audit-log", path)
	if code != 1 || !strings.Contains(stderr, "audit log (--audit-log): open "+path) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
