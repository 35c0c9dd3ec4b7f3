// Package docs runs the examples of the README and docs/*.md so that they
// cannot drift from the code.
//
// Every fenced block of the documents in docFiles is one subtest:
//
//   - ```sh blocks: each `contextrouter …` or `bin/contextrouter …` command
//     runs in-process from the repository root (query, validate, tools and
//     every other standalone command) and must exit 0, unless an output block
//     follows. `make demo` runs the Makefile's demo query. A `serve` command
//     starts the server on a free 127.0.0.1 port, and the `curl` lines of the
//     block are sent to it in-process. kubectl, helm and the other cluster
//     and build commands are not run: each repository path they name must
//     exist, and the subtest reports them as checked, not run.
//   - an output block (```text, ```json, ```jsonc or a bare ```) right after a
//     one-command sh block is that command's expected output; a bare block
//     whose first line is `$ contextrouter …` holds the command and its
//     output. Text is compared line by line: "…" in a line matches any
//     characters and a line of only "…" any number of lines. JSON is compared
//     by structure: a string with "…" matches as text does, an array matches
//     the first elements of the output's (all of them, unless a
//     `// … N more` comment says how many more there are), and the volatile
//     evaluation_time_ms and mtime only need the right type.
//   - ```yaml blocks must parse; those that hold contextrouter objects must
//     also decode strictly (no unknown fields). ```json blocks must parse
//     (a fragment as the members of an object; "…," stands for members left
//     out).
//   - `<!-- doc-test: skip REASON -->` on the line before a block skips it,
//     visibly, with its reason.
//   - `<!-- doc-test: run against contextrouter serve ARGS -->` on the line
//     before a ```go or ```python block runs it as a program against that
//     serve, started on a free 127.0.0.1 port: "http://localhost:8080" in
//     the program is that server's address. A go block is a main package,
//     run with `go run` inside the module (its dependencies are the
//     module's); a python block runs with python3, and is skipped, visibly,
//     where python3 is missing. It must exit 0; an output block right after
//     it is its expected standard output.
//   - a `curl` to /mcp in a sh block that started `serve` runs the real curl
//     (skipped, visibly, without one) with its own flags and headers: the
//     answer must be 2xx and, when it has a body, a JSON-RPC result that is
//     not an error (nor a tool error).
package docs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/internal/cli"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// docFiles are the documents whose examples are tested, from the repository root.
func docFiles(t *testing.T) []string {
	files := []string{"README.md", "examples/quickstart/README.md", "config/samples/README.md"}
	more, err := filepath.Glob("docs/*.md")
	if err != nil || len(more) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append(files, more...)
}

// block is one fenced code block.
type block struct {
	file      string
	line      int // of the opening fence
	lang      string
	body      []string
	skip      string // the reason of a skip marker
	serve     string // the serve arguments of a run marker
	output    *block // the expected output of a sh block
	isOutput  bool   // this block is another's output
	processed bool
}

var (
	fenceRE  = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
	markerRE = regexp.MustCompile(`^<!-- doc-test: skip (.+?) -->$`)
	runRE    = regexp.MustCompile(`^<!-- doc-test: run against contextrouter serve (.+?) -->$`)
)

func parseBlocks(t *testing.T, file string) []*block {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []*block
	prevEnd := -10 // line index of the previous block's closing fence
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent := m[1]
		b := &block{file: file, line: i + 1, lang: m[2]}
		j := i + 1
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			b.body = append(b.body, strings.TrimPrefix(lines[j], indent))
		}
		if i > 0 {
			if mm := markerRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); mm != nil {
				b.skip = mm[1]
			}
			if mm := runRE.FindStringSubmatch(strings.TrimSpace(lines[i-1])); mm != nil {
				b.serve = mm[1]
			}
		}
		// An output block follows its command block (or program) with only blank lines between.
		if n := len(out); n > 0 && hasOutput(out[n-1]) && isOutputLang(b.lang) && b.skip == "" && blankBetween(lines, prevEnd+1, i) {
			out[n-1].output = b
			b.isOutput = true
		}
		out = append(out, b)
		prevEnd = j
		i = j
	}
	return out
}

// hasOutput reports whether a block may be followed by its expected output:
// a sh block, or a program run against a serve.
func hasOutput(b *block) bool {
	return b.lang == "sh" || (b.serve != "" && programLang(b.lang))
}

func programLang(lang string) bool { return lang == "go" || lang == "python" }

func isOutputLang(lang string) bool {
	return slices.Contains([]string{"text", "json", "jsonc", ""}, lang)
}

func blankBetween(lines []string, from, to int) bool {
	for k := from; k < to; k++ {
		if strings.TrimSpace(lines[k]) != "" {
			return false
		}
	}
	return true
}

// TestDocExamples runs or checks every example block of the documents.
func TestDocExamples(t *testing.T) {
	t.Chdir("../..")
	counts := map[string]int{}
	for _, file := range docFiles(t) {
		for _, b := range parseBlocks(t, file) {
			if b.isOutput {
				continue // tested with its command
			}
			name := fmt.Sprintf("%s:%d", file, b.line)
			if b.skip != "" {
				counts["skipped"]++ // t.Skip ends the subtest before it could count
			}
			t.Run(name, func(t *testing.T) {
				kind := checkBlock(t, b)
				counts[kind]++
			})
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range counts {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	t.Logf("doc example blocks: %s", strings.Join(parts, ", "))
	if counts["run"] == 0 {
		t.Error("no example was run")
	}
}

// checkBlock tests one block and says how: "run", "parsed" (YAML, JSON),
// "not run, paths checked" (cluster and build commands) or "skipped".
func checkBlock(t *testing.T, b *block) string {
	if b.skip != "" {
		t.Skip("marked not runnable: " + b.skip)
		return "skipped"
	}
	switch b.lang {
	case "sh":
		return checkShell(t, b)
	case "yaml", "yml":
		checkYAML(t, b)
		return "parsed"
	case "json":
		checkJSONSyntax(t, b)
		return "parsed"
	case "go", "python":
		if b.serve != "" {
			runProgram(t, b)
			return "run"
		}
	case "", "text":
		if len(b.body) > 0 && strings.HasPrefix(b.body[0], "$ contextrouter ") {
			args := splitCommand(t, strings.TrimPrefix(b.body[0], "$ contextrouter "))
			out, _ := runCLIExit(t, args)
			compareText(t, strings.Join(b.body[1:], "\n"), out)
			return "run"
		}
		if len(b.body) > 0 && strings.HasPrefix(b.body[0], "$ ") {
			checkExternal(t, strings.TrimPrefix(b.body[0], "$ "))
			return "not run, paths checked"
		}
	}
	t.Errorf("%s:%d: a %q block that is neither run nor checked: mark it <!-- doc-test: skip REASON --> or give it a command", b.file, b.line, b.lang)
	return "unknown"
}

// commands joins continued lines and drops comments and blank lines.
func commands(body []string) []string {
	var out []string
	cur := ""
	for _, l := range body {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if before, ok := strings.CutSuffix(strings.TrimRight(l, " "), "\\"); ok {
			cur += before + " "
			continue
		}
		cur += l
		if strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur)) // splitCommand drops a trailing comment
		}
		cur = ""
	}
	return out
}

func checkShell(t *testing.T, b *block) string {
	cmds := commands(b.body)
	if len(cmds) == 0 {
		t.Fatalf("%s:%d: empty sh block", b.file, b.line)
	}
	if b.output != nil && len(cmds) != 1 {
		t.Fatalf("%s:%d: an output block follows a block of %d commands; want one", b.file, b.line, len(cmds))
	}
	kind := "not run, paths checked"
	var server string // base URL of a serve started by this block
	for _, line := range cmds {
		words := splitCommand(t, line)
		if slices.ContainsFunc(words, func(w string) bool { return w == "|" || w == ">" }) {
			checkExternal(t, line) // a pipeline or redirect: not one of ours
			continue
		}
		for _, args := range pipeline(words) {
			c := strings.Join(args, " ")
			kind = runOne(t, b, args, c, &server, kind)
		}
	}
	return kind
}

// runOne runs or checks one command of a sh block and returns the block's kind.
func runOne(t *testing.T, b *block, args []string, c string, server *string, kind string) string {
	switch {
	case args[0] == "contextrouter" || args[0] == "bin/contextrouter":
		if len(args) > 1 && args[1] == "serve" {
			*server = startServe(t, args[2:])
			return "run"
		}
		out, code := runCLIExit(t, args[1:])
		if b.output != nil {
			compareOutput(t, b.output, out)
		} else if code != 0 {
			t.Errorf("%s: exit %d:\n%s", c, code, out)
		}
		return "run"
	case len(args) == 2 && args[0] == "make" && args[1] == "demo":
		out, code := runCLIExit(t, append([]string{"query"}, demoArgs(t)...))
		if b.output != nil {
			compareOutput(t, b.output, out)
		} else if code != 0 {
			t.Errorf("make demo: exit %d:\n%s", code, out)
		}
		return "run"
	case args[0] == "curl" && *server != "":
		curl(t, *server, args[1:])
		return kind
	}
	checkExternal(t, c)
	return kind
}

// externalTools are the commands examples may name but the test does not run.
var externalTools = map[string]string{
	"kubectl": "needs a cluster", "helm": "needs a cluster", "make": "a build target (make test runs it)",
	"go": "a Go build or benchmark", "curl": "needs a running router", "openssl": "needs a cluster",
	"base64": "needs a cluster", "CONTEXTROUTER_SCALE=1": "a Go benchmark", "bin/benchstat": "compares benchmark runs",
}

// checkExternal checks a command the test does not run: a known tool, and
// every repository path it names exists.
func checkExternal(t *testing.T, c string) {
	for _, args := range pipeline(splitCommand(t, c)) {
		why, ok := externalTools[args[0]]
		if !ok {
			t.Errorf("unknown command %q in an example: run it here, or mark the block skipped with a reason", args[0])
			continue
		}
		for _, a := range args[1:] {
			if isRepoPath(a) {
				if _, err := os.Stat(a); err != nil {
					t.Errorf("%s: %v", c, err)
				}
			}
		}
		t.Logf("not run (%s), paths checked: %s", why, strings.Join(args, " "))
	}
}

// pipeline cuts a command's words at the shell operators (|, &, &&, >) into
// commands; the word after > is a file written, not a command.
func pipeline(words []string) [][]string {
	var out [][]string
	var cur []string
	for i := 0; i < len(words); i++ {
		switch words[i] {
		case "|", "&":
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
		case ">":
			i++ // the output file
		default:
			cur = append(cur, words[i])
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// isRepoPath reports whether an argument names a file of this repository.
func isRepoPath(a string) bool {
	for _, dir := range []string{"config/", "charts/", "examples/", "internal/", "hack/", "docs/", "./internal/", "./hack/"} {
		if strings.HasPrefix(a, dir) && !strings.ContainsAny(a, "<>*") {
			return true
		}
	}
	return false
}

// splitCommand splits a shell command line into words, honouring single and
// double quotes (no expansions) and ending at a comment.
func splitCommand(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	var q rune
	for _, r := range s {
		switch {
		case q != 0:
			if r == q {
				q = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			q, inWord = r, true
		case r == '#' && !inWord:
			return finish(t, s, out, q)
		case r == ' ' || r == '\t' || r == '|' || r == '&' || r == '>':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
			if r != ' ' && r != '\t' {
				// A shell operator is a word of its own ("&&" is two).
				out = append(out, string(r))
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return finish(t, s, out, q)
}

// finish checks a command's words: quotes closed, at least one word.
func finish(t *testing.T, s string, words []string, q rune) []string {
	if q != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if len(words) == 0 {
		t.Fatalf("empty command %q", s)
	}
	return words
}

// demoArgs reads DEMO_ARGS from the Makefile: `make demo` is `query $(DEMO_ARGS)`.
func demoArgs(t *testing.T) []string {
	data, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "DEMO_ARGS ?= "); ok {
			return splitCommand(t, v)
		}
	}
	t.Fatal("no DEMO_ARGS in the Makefile")
	return nil
}

// runCLIExit runs the CLI in-process; the output is stdout, then stderr.
func runCLIExit(t *testing.T, args []string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Execute(args, &out, &errOut)
	return out.String() + errOut.String(), code
}

// startServe runs `serve` on a free loopback port until the test ends and
// returns its base URL once it is ready.
func startServe(t *testing.T, args []string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for i, a := range args {
		if a == "--listen" && i+1 < len(args) {
			args[i+1] = addr
		}
	}
	if !slices.Contains(args, addr) {
		args = append(args, "--listen", addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var logs bytes.Buffer
	go func() {
		defer close(done)
		cmd := cli.NewRootCommand()
		cmd.SetArgs(append([]string{"serve"}, args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(&logs)
		_ = cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + addr
	for i := 0; i < 300; i++ {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-done:
			t.Fatalf("serve %s ended:\n%s", strings.Join(args, " "), logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve %s not ready", strings.Join(args, " "))
	return ""
}

// curl sends `curl -s [-X METHOD] URL -d BODY` to the block's server: a
// query must answer chunks, any other call 2xx. A curl to /mcp runs the
// real curl (mcpCurl).
func curl(t *testing.T, base string, args []string) {
	t.Helper()
	for i, a := range args {
		if j := strings.Index(a, "/mcp"); j >= 0 && !strings.HasPrefix(a, "-") {
			mcpCurl(t, base, args, i, base+a[j:])
			return
		}
	}
	var url, body string
	method := http.MethodPost
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-s":
		case a == "-d" && i+1 < len(args):
			body = args[i+1]
			i++
		case a == "-X" && i+1 < len(args):
			method = args[i+1]
			i++
		default:
			url = a
		}
	}
	if i := strings.Index(url, "/v1/"); i >= 0 {
		url = base + url[i:]
	} else {
		t.Fatalf("curl to %q: want a /v1/ path", url)
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if !strings.HasSuffix(url, "/v1/query") {
		if resp.StatusCode/100 != 2 {
			t.Errorf("%s %s %s: %s\n%s", method, url, body, resp.Status, data)
		}
		return
	}
	var r struct {
		Chunks []json.RawMessage `json:"chunks"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &r) != nil || len(r.Chunks) == 0 {
		t.Errorf("POST %s %s: %s\n%s", url, body, resp.Status, data)
	}
}

func compareOutput(t *testing.T, want *block, got string) {
	t.Helper()
	switch want.lang {
	case "json", "jsonc":
		compareJSON(t, want, got)
	default:
		compareText(t, strings.Join(want.body, "\n"), got)
	}
}

// textPattern turns an expected text into a regular expression: "…" matches
// any characters of a line, a line of only "…" any lines.
func textPattern(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A`)
	for _, line := range strings.Split(strings.TrimRight(want, "\n"), "\n") {
		line = strings.TrimRight(line, " ")
		if strings.TrimSpace(line) == "…" {
			b.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		parts := strings.Split(line, "…")
		for i, p := range parts {
			if i > 0 {
				b.WriteString(`[^\n]*`)
			}
			b.WriteString(regexp.QuoteMeta(p))
		}
		b.WriteString(` *\n`)
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// stringPattern matches a JSON string of an example: "…" stands for any text.
func stringPattern(want string) *regexp.Regexp {
	parts := strings.Split(want, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
}

func compareText(t *testing.T, want, got string) {
	t.Helper()
	got = strings.TrimRight(got, "\n") + "\n"
	if !textPattern(want).MatchString(got) {
		t.Errorf("the output does not match the example.\n--- example:\n%s\n--- output:\n%s", want, got)
	}
}

func checkYAML(t *testing.T, b *block) {
	text := strings.Join(b.body, "\n") + "\n"
	dec := yamlv3.NewDecoder(strings.NewReader(text))
	objects := false
	for {
		var v map[string]any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s:%d: YAML does not parse: %v", b.file, b.line, err)
		}
		if v["apiVersion"] == "contextrouter.dev/v1alpha1" {
			objects = true
		}
	}
	if objects {
		if _, err := manifest.Parse(fmt.Sprintf("%s:%d.yaml", b.file, b.line), []byte(text)); err != nil {
			t.Errorf("the example's objects do not decode:\n%v", err)
		}
	}
}

// elidedRE is a "…" standing for left-out members or elements of a JSON example.
var elidedRE = regexp.MustCompile(`…\s*,\s*|,\s*…(\s*[}\]])`)

func checkJSONSyntax(t *testing.T, b *block) {
	text := elidedRE.ReplaceAllString(strings.Join(b.body, "\n"), "$1")
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		if err := json.Unmarshal([]byte("{"+text+"}"), &v); err != nil {
			t.Errorf("%s:%d: JSON does not parse: %v", b.file, b.line, err)
		}
	}
}

// moreRE is the comment that says how many array elements an example leaves out.
var moreRE = regexp.MustCompile(`^//\s*…\s*(\d+) more\b`)

// parseJSONC parses an example with // comments. A "// … N more" comment
// becomes the string "…more:N" at the end of its array.
func parseJSONC(t *testing.T, lines []string) any {
	var b strings.Builder
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if m := moreRE.FindStringSubmatch(s); m != nil {
			b.WriteString(`, "…more:` + m[1] + `"` + "\n")
			continue
		}
		if strings.HasPrefix(s, "//") {
			continue
		}
		b.WriteString(l + "\n")
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(b.String()))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("the example does not parse as JSON: %v\n%s", err, b.String())
	}
	return v
}

// volatile are fields whose value changes from run to run or checkout to checkout.
var volatile = map[string]bool{"evaluation_time_ms": true, "mtime": true}

func compareJSON(t *testing.T, want *block, got string) {
	t.Helper()
	w := parseJSONC(t, want.body)
	var g any
	dec := json.NewDecoder(strings.NewReader(got))
	dec.UseNumber()
	if err := dec.Decode(&g); err != nil {
		t.Fatalf("the output is not JSON: %v\n%s", err, got)
	}
	for _, d := range diffJSON("", w, g) {
		t.Error(d)
	}
}

func diffJSON(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: example has an object, output %T", path, got)}
		}
		var out []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range g {
				if !yield(k) {
					return
				}
			}
		}) {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: in the output, not in the example", path, k))
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: in the example, not in the output", path, k))
				continue
			}
			if volatile[k] {
				if fmt.Sprintf("%T", wv) != fmt.Sprintf("%T", gv) {
					out = append(out, fmt.Sprintf("%s.%s: %T in the example, %T in the output", path, k, wv, gv))
				}
				continue
			}
			out = append(out, diffJSON(path+"."+k, wv, gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: example has a list, output %T", path, got)}
		}
		n := len(w)
		wantLen := n
		if n > 0 {
			if s, ok := w[n-1].(string); ok && strings.HasPrefix(s, "…more:") {
				more, _ := strconv.Atoi(strings.TrimPrefix(s, "…more:"))
				n--
				wantLen = n + more
			}
		}
		if len(g) != wantLen {
			return []string{fmt.Sprintf("%s: %d elements in the output, the example says %d", path, len(g), wantLen)}
		}
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	case string:
		g, ok := got.(string)
		if !ok || !stringPattern(w).MatchString(g) {
			return []string{fmt.Sprintf("%s: example %q, output %q", path, w, got)}
		}
		return nil
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: example %v, output %v", path, want, got)}
		}
		return nil
	}
}
