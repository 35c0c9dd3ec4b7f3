package funclen

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// body is a function body of n lines in all, braces and func line included.
func body(n int) string {
	return " {\n" + strings.Repeat("\t_ = 1\n", n-2) + "}\n"
}

func TestOver(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.go": "package p\n\ntype T struct{}\n\ntype G[K any] struct{}\n\n" +
			"func short()" + body(10) +
			"func atLimit()" + body(20) +
			"func overLimit()" + body(21) +
			"func (t *T) method()" + body(30) +
			"func (g G[K]) generic()" + body(25) +
			"func withLiteral() {\n\tf := func() {\n" + strings.Repeat("\t\t_ = 1\n", 20) + "\t}\n\tf()\n}\n",
		// Tests and other directories are not the package's code.
		"a_test.go":    "package p\n\nfunc longTest()" + body(200),
		"sub/b.go":     "package sub\n\nfunc long()" + body(200),
		"notes.txt":    "func notGo()" + body(200),
		"generated.go": "package p\n\nfunc declared()\n",
	}
	writeFiles(t, dir, files)
	got, err := Over(dir, 20)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, fmt.Sprintf("%s:%d", f.Name, f.Lines))
	}
	// Longest first; a function literal counts in the function holding it.
	want := []string{"T.method:30", "G.generic:25", "withLiteral:25", "overLimit:21"}
	if !slices.Equal(names, want) {
		t.Errorf("Over = %v, want %v", names, want)
	}
	if s := got[0].String(); s != "a.go:58: T.method is 30 lines" {
		t.Errorf("String() = %q", s)
	}
	if _, err := Over(filepath.Join(dir, "missing"), 20); err == nil {
		t.Error("a missing directory gave no error")
	}
}

// Check reports each long function as a test failure.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package p\n\nfunc long()"+body(5)), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	Check(rec, dir, 4)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "long is 5 lines; at most 4") {
		t.Errorf("Check reported %q", rec.errors)
	}
	rec = &recorder{}
	Check(rec, dir, 5)
	if len(rec.errors) != 0 {
		t.Errorf("Check at the limit reported %q", rec.errors)
	}
}

type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}

// TestOverTree: the package in root and every package below it, each
// function named by its path from root; testdata and . or _ directories
// left out, as the go command leaves them.
func TestOverTree(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.go":                 "package p\n\nfunc top()" + body(30),
		"sub/b.go":             "package sub\n\nfunc inSub()" + body(40) + "func shortSub()" + body(5),
		"sub/deeper/c.go":      "package deeper\n\nfunc deep()" + body(25),
		"testdata/d.go":        "package d\n\nfunc data()" + body(200),
		"_skipped/e.go":        "package e\n\nfunc underscored()" + body(200),
		".hidden/f.go":         "package f\n\nfunc hidden()" + body(200),
		"sub/deeper/c_test.go": "package deeper\n\nfunc longTest()" + body(200),
	})
	got, err := OverTree(dir, 20)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, fmt.Sprintf("%s %s:%d", f.File, f.Name, f.Lines))
	}
	want := []string{"sub/b.go inSub:40", "a.go top:30", "sub/deeper/c.go deep:25"}
	if !slices.Equal(names, want) {
		t.Errorf("OverTree = %v, want %v", names, want)
	}
	rec := &recorder{}
	CheckTree(rec, dir, 30)
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "sub/b.go:3: inSub is 40 lines; at most 30") {
		t.Errorf("CheckTree reported %q", rec.errors)
	}
}

// writeFiles writes files (path from dir: text), making their directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
