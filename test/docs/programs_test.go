package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// docServer is the address the examples that call a router name; the
// tests point it at the serve they start.
const docServer = "http://localhost:8080"

// programTimeout bounds one example program: a first `go run` compiles the
// MCP SDK, which takes a while on a busy machine.
const programTimeout = 5 * time.Minute

// runProgram runs a go or python block against the serve of its run marker
// and compares its standard output with the output block after it.
func runProgram(t *testing.T, b *block) {
	t.Helper()
	bin := map[string]string{"go": "go", "python": "python3"}[b.lang]
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Skipf("%s is not installed here: the %s example of %s:%d is not run", bin, b.lang, b.file, b.line)
	}
	base := startServe(t, splitCommand(t, b.serve))
	src := strings.ReplaceAll(strings.Join(b.body, "\n")+"\n", docServer, base)
	if !strings.Contains(src, base) {
		t.Fatalf("%s:%d: the example names no %s to point at the server", b.file, b.line, docServer)
	}
	var args []string
	switch b.lang {
	case "go":
		// Inside the module, so that the program builds with its go.mod;
		// "." keeps the folder out of ./... patterns.
		dir, err := os.MkdirTemp("test/docs", ".example-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{"run", "./" + dir}
	case "python":
		file := filepath.Join(t.TempDir(), "example.py")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{file}
	}
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s:%d: %s %s: %v\n%s%s", b.file, b.line, bin, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if b.output != nil {
		compareOutput(t, b.output, stdout.String())
	}
}

// mcpCurl runs a block's curl to /mcp with the real curl, the URL (args[i])
// pointed at the block's server, and checks the answer: 2xx, and a body,
// when there is one, that is a JSON-RPC result and not a tool error.
func mcpCurl(t *testing.T, base string, args []string, i int, url string) {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed here: the curl examples to /mcp are not run")
	}
	args = slices.Clone(args)
	args[i] = url
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The status follows the body on a line of its own.
	out, err := exec.CommandContext(ctx, path, append(args, "-w", "\n%{http_code}")...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", strings.Join(args, " "), err)
	}
	s := string(out)
	cut := strings.LastIndex(s, "\n")
	body, status := s[:cut], s[cut+1:]
	if !strings.HasPrefix(status, "2") {
		t.Fatalf("curl %s: HTTP %s\n%s", strings.Join(args, " "), status, body)
	}
	if body == "" {
		return // a notification: 202 without a body
	}
	var answer struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.JSONRPC != "2.0" || answer.Result == nil || answer.Error != nil {
		t.Fatalf("curl %s: want a JSON-RPC result, got %s (%v)", strings.Join(args, " "), body, err)
	}
	var result struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(answer.Result, &result); result.IsError {
		t.Errorf("curl %s: a tool error: %s", strings.Join(args, " "), body)
	}
	t.Logf("ran: curl %s: HTTP %s, %d bytes", strings.Join(args, " "), status, len(body))
}
