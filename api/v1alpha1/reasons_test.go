package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// declaredReasons parses this package's files and returns every constant
// declared with type ConditionReason, by name, with its value.
func declaredReasons(t *testing.T) map[string]ConditionReason {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]ConditionReason{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ConditionReason" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: %s is not a string literal", e.Name(), name.Name)
					}
					out[name.Name] = ConditionReason(strings.Trim(lit.Value, "\"`"))
				}
			}
		}
	}
	return out
}

// TestEveryReasonBelongsToAKind keeps ConditionReasons complete: a new reason
// constant must be listed for the kinds whose status carries it, which makes
// the Argo CD health check tests (test/argocd) demand a case for it.
func TestEveryReasonBelongsToAKind(t *testing.T) {
	declared := declaredReasons(t)
	if len(declared) < 10 {
		t.Fatalf("found only %d ConditionReason constants; the parser misses some", len(declared))
	}
	listed := map[ConditionReason]bool{}
	for _, kind := range []string{KindContextRouter, KindContextRoute, KindContextSource, KindAgentPermission} {
		rs := ConditionReasons(kind)
		if len(rs) == 0 {
			t.Errorf("%s lists no reasons", kind)
		}
		if sorted := slices.Sorted(slices.Values(rs)); len(slices.Compact(sorted)) != len(rs) {
			t.Errorf("%s lists a reason twice: %v", kind, rs)
		}
		for _, r := range rs {
			listed[r] = true
		}
	}
	for name, value := range declared {
		if !listed[value] {
			t.Errorf("%s (%q) is not listed for any kind in conditionReasons", name, value)
		}
	}
	values := map[ConditionReason]string{}
	for name, value := range declared {
		if other, ok := values[value]; ok {
			t.Errorf("%s and %s share the value %q", name, other, value)
		}
		values[value] = name
	}
	for r := range listed {
		if _, ok := values[r]; !ok {
			t.Errorf("%q is listed but not declared as a constant", r)
		}
	}
}
