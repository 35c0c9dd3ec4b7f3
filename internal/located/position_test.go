package located

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitYAML(t *testing.T) {
	data := "a: 1\n--- # comment\nb: 2\n...\n# between\n--- {c: 3}\n---\t\nd: |\n  ---not a marker\n  text\n----\n"
	var got []string
	var lines []int
	for _, c := range SplitYAML([]byte(data)) {
		got = append(got, strings.TrimSpace(string(c.Text)))
		lines = append(lines, c.FirstLine)
	}
	want := []string{"a: 1", "b: 2", "# between", "{c: 3}", "d: |\n  ---not a marker\n  text\n----"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %q\nwant     %q", got, want)
	}
	if wantLines := []int{1, 3, 5, 6, 8}; !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("first lines = %v, want %v", lines, wantLines)
	}
}

func TestLineOf(t *testing.T) {
	root := ParseNode([]byte(`spec:
  sources:
  - name: a
  - name: b
  deployment:
    resources:
      limits:
        cpu: 1
  dup: 1
  dup: 2
`), 10)
	tests := []struct {
		path string
		last bool
		want int
	}{
		{"", false, 11},
		{"spec", false, 11},
		{"spec.sources[1].name", false, 14},
		{"spec.sources[1]", false, 14},
		{"spec.sources[7].name", false, 12}, // deepest existing: the sources key
		{"spec.deployment.resources.limits[cpu]", false, 18},
		{"spec.deployment.resources.requests[cpu]", false, 16},
		{"spec.dup", false, 19},
		{"spec.dup", true, 20},
	}
	for _, tt := range tests {
		if got := LineOf(root, tt.path, tt.last); got != tt.want {
			t.Errorf("LineOf(%q, %v) = %d, want %d", tt.path, tt.last, got, tt.want)
		}
	}
	if got := LineOf(nil, "spec", false); got != 0 {
		t.Errorf("LineOf(nil) = %d", got)
	}
	if got := DuplicateKeys(root, ""); !reflect.DeepEqual(got, []DupKey{{Path: "spec.dup", Line: 20}}) {
		t.Errorf("DuplicateKeys = %+v", got)
	}
}

func TestClosest(t *testing.T) {
	cands := []string{"include", "exclude", "path", "maxFileSize", "volume"}
	for in, want := range map[string]string{
		"includ":      "include",
		"Include":     "include",
		"pth":         "path",
		"maxfilesize": "maxFileSize",
		"volmue":      "volume",
		"color":       "",
		"x":           "",
	} {
		if got := Closest(in, cands); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}
