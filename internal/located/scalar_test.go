package located

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestScalarPosition follows a position in a `when:` value back to the file,
// for every YAML scalar style: the character "X" in the value must map to the
// "X" of the source.
func TestScalarPosition(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// wantLine and wantCol are where X is in the file (the document starts
		// at file line 11).
		wantLine, wantCol int
	}{
		{"plain", "spec:\n  when: text == 'a' && X(1)\n", 12, 24},
		{"plain, folded over lines", "spec:\n  when: text == 'a' &&\n    tags.size() > 0 &&\n\n    X(1)\n", 15, 5},
		{"single-quoted with doubled quotes", "spec:\n  when: 'text == ''it''''s'' &&\n    X(1)'\n", 13, 5},
		{"double-quoted with escapes", "spec:\n  when: \"text == \\\"a\\tb\\\" &&\\\n    \\\n  X(1)\"\n", 14, 3},
		{"literal block", "spec:\n  when: |\n    text == \"é\" &&\n      X(1)\n", 14, 7},
		{"literal block with indentation indicator", "spec:\n  when: |2\n      text == 'a' &&\n    X(1)\n", 14, 5},
		{"folded block", "spec:\n  when: >-\n    text == \"a\" &&\n    tags.size() > 0 && X(1)\n", 14, 24},
		{"folded block, more indented line", "spec:\n  when: >\n    text == \"a\" &&\n      (X(1))\n", 14, 8},
		{"flow mapping", "spec: {when: 'text == \"a\" || X(1)', sources: []}\n", 11, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := []byte(tt.yaml)
			root := ParseNode(src, 10)
			n := Lookup(root, "spec.when")
			if n == nil {
				t.Fatal("no spec.when")
			}
			// The position of X in the value, as CEL counts: 1-based line and character column.
			i := strings.IndexByte(n.Value, 'X')
			before := n.Value[:i]
			line := strings.Count(before, "\n") + 1
			col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
			gotLine, gotCol, ok := ScalarPosition(src, 10, n, line, col)
			if !ok || gotLine != tt.wantLine || gotCol != tt.wantCol {
				t.Errorf("value %q: X at %d:%d maps to %d:%d (ok %v), want %d:%d", n.Value, line, col, gotLine, gotCol, ok, tt.wantLine, tt.wantCol)
			}
			// The expectation itself: the file has X there.
			lines := strings.Split(tt.yaml, "\n")
			if l := []rune(lines[tt.wantLine-11]); tt.wantCol > len(l) || l[tt.wantCol-1] != 'X' {
				t.Fatalf("bad test: line %d of the file is %q", tt.wantLine, string(l))
			}
		})
	}
}

func TestScalarPositionEnd(t *testing.T) {
	// A syntax error at the end of the expression points just after it.
	src := []byte("spec:\n  when: \"text &&\"\n")
	n := Lookup(ParseNode(src, 0), "spec.when")
	if l, c, ok := ScalarPosition(src, 0, n, 1, 8); !ok || l != 2 || c != 17 {
		t.Errorf("end = %d:%d (ok %v), want 2:17", l, c, ok)
	}
	// A position the value does not have.
	if _, _, ok := ScalarPosition(src, 0, n, 3, 1); ok {
		t.Error("line 3 of a one-line value was mapped")
	}
}
