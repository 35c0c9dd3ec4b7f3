package engine

import (
	"fmt"
	"slices"

	celast "github.com/google/cel-go/common/ast"
)

// UnguardedMetadataKeys returns, sorted, the metadata keys a condition reads
// with metadata.key or metadata["key"] without a has(metadata.key) or
// "key" in metadata anywhere in it. A request without such a key makes the
// condition fail at query time ("no such key"), so the route does not match
// and the response lists it under route_errors; `validate` warns about it.
// The optional forms metadata[?"key"] and metadata.?key are safe. The check
// is syntactic: a guard anywhere in the condition counts, whether or not it
// protects the access. A condition that does not compile has none. The keys
// are found while compiling, so asking costs a cache look-up.
func UnguardedMetadataKeys(expr string) []string {
	c, _ := compileCached(expr)
	if c == nil {
		return nil
	}
	return c.unguarded
}

// metadataReads collects, over a condition's expressions, the metadata keys
// read and the keys whose presence is tested.
type metadataReads struct {
	read    []string
	guarded map[string]bool
}

func (m *metadataReads) visit(e celast.Expr) {
	isMetadata := func(e celast.Expr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == "metadata"
	}
	guard := func(k string) {
		if m.guarded == nil {
			m.guarded = map[string]bool{}
		}
		m.guarded[k] = true
	}
	switch e.Kind() {
	case celast.SelectKind:
		sel := e.AsSelect()
		if !isMetadata(sel.Operand()) {
			return
		}
		if sel.IsTestOnly() {
			guard(sel.FieldName())
		} else {
			m.read = append(m.read, sel.FieldName())
		}
	case celast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if len(args) != 2 {
			return
		}
		switch call.FunctionName() {
		case "_[_]":
			if k, ok := stringLit(args[1]); ok && isMetadata(args[0]) {
				m.read = append(m.read, k)
			}
		case "@in":
			if k, ok := stringLit(args[0]); ok && isMetadata(args[1]) {
				guard(k)
			}
		}
	}
}

// unguarded returns the keys read and never tested, sorted.
func (m *metadataReads) unguarded() []string {
	var out []string
	for _, k := range m.read {
		if !m.guarded[k] && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// UnguardedMetadataMessage is the warning for a key UnguardedMetadataKeys found.
func UnguardedMetadataMessage(key string) string {
	return fmt.Sprintf("reads metadata key %q without has(): a request without it fails the condition "+
		"(route_errors: \"no such key: %s\") and the route does not match; guard it with %s or read it "+
		"with metadata[?%q].orValue(\"\")", key, key, guardOf(key), key)
}

// guardOf is the presence test of a key: has(metadata.key) for a key that
// is an identifier, else "key" in metadata.
func guardOf(key string) string {
	ident := key != ""
	for i, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			ident = false
		}
	}
	if ident {
		return "has(metadata." + key + ")"
	}
	return fmt.Sprintf("%q in metadata", key)
}
