// Package funclen finds long functions, for tests that keep a package's
// functions short: a function past the limit becomes a short driver over
// named steps, as bundle.Build and the router reconciler are (issue 23).
//
// A package opts in with one test:
//
//	func TestFunctionLength(t *testing.T) { funclen.Check(t, ".", funclen.Limit) }
//
// or, for it and every package below it (a new subpackage is covered
// without a test of its own), CheckTree.
package funclen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Limit is the most lines a function of a package that opts in may have.
const Limit = 120

// Check fails t for every function of the package in dir longer than
// limit lines (Over), naming each.
func Check(t testing.TB, dir string, limit int) {
	t.Helper()
	long, err := Over(dir, limit)
	report(t, long, err, limit)
}

// CheckTree is Check for the package in root and every package below it
// (testdata and directories starting with . or _ left out, as the go
// command leaves them out).
func CheckTree(t testing.TB, root string, limit int) {
	t.Helper()
	long, err := OverTree(root, limit)
	report(t, long, err, limit)
}

// report fails t with err, or once for each function of long.
func report(t testing.TB, long []Func, err error, limit int) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s; at most %d are allowed: make it a short driver over named steps", f, limit)
	}
}

// OverTree is Over for root and every package directory below it; a
// Func's File is its path from root.
func OverTree(root string, limit int) ([]Func, error) {
	var out []Func
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		long, err := Over(path, limit)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, f := range long {
			f.File = filepath.Join(rel, f.File)
			out = append(out, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortLongestFirst(out)
	return out, nil
}

// Func is a function (or method) and its length in lines, from the line
// of its func keyword to the line of its closing brace.
type Func struct {
	// Name is the function's name, or Type.Name for a method.
	Name  string
	File  string
	Line  int
	Lines int
}

func (f Func) String() string {
	return fmt.Sprintf("%s:%d: %s is %d lines", f.File, f.Line, f.Name, f.Lines)
}

// Over lists the functions of the non-test Go files in dir (not its
// subdirectories) longer than limit lines, longest first. Function
// literals count as part of the function that holds them.
func Over(dir string, limit int) ([]Func, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []Func
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Type.Func), fset.Position(fd.Body.Rbrace)
			if n := end.Line - start.Line + 1; n > limit {
				out = append(out, Func{Name: funcName(fd), File: name, Line: start.Line, Lines: n})
			}
		}
	}
	sortLongestFirst(out)
	return out, nil
}

// sortLongestFirst orders fs longest first, then by file and name.
func sortLongestFirst(fs []Func) {
	slices.SortFunc(fs, func(a, b Func) int {
		if c := cmp.Compare(b.Lines, a.Lines); c != 0 {
			return c
		}
		return cmp.Compare(a.File+a.Name, b.File+b.Name)
	})
}

// funcName is Name, or Type.Name for a method (pointer or not, type
// parameters left out).
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
