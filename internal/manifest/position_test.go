package manifest

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplitYAML(t *testing.T) {
	data := "a: 1\n--- # comment\nb: 2\n...\n# between\n--- {c: 3}\n---\t\nd: |\n  ---not a marker\n  text\n----\n"
	var got []string
	var lines []int
	for _, c := range splitYAML([]byte(data)) {
		got = append(got, strings.TrimSpace(string(c.text)))
		lines = append(lines, c.firstLine)
	}
	want := []string{"a: 1", "b: 2", "# between", "{c: 3}", "d: |\n  ---not a marker\n  text\n----"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks = %q\nwant     %q", got, want)
	}
	if wantLines := []int{1, 3, 5, 6, 8}; !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("first lines = %v, want %v", lines, wantLines)
	}
}

func TestMarkerLineDocument(t *testing.T) {
	s, err := Parse("i.yaml", []byte("# header\n--- {apiVersion: contextrouter.dev/v1alpha1, kind: ContextSource, metadata: {name: a}, spec: {type: Inline, inline: {content: x}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Origin("ContextSource", "a"); o.Line != 2 || o.Doc != 1 {
		t.Errorf("origin = %+v, want line 2, doc 1", o)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	s, err := Parse("m.yaml", []byte(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: acme}
spec:
  variables:
    eu: &region {name: eu, tier: 1}
    eu2:
      <<: *region
      tier: 2
`))
	if err != nil {
		t.Fatalf("merge keys must not count as duplicates: %v", err)
	}
	if got := string(s.Routers[0].Spec.Variables["eu2"].Raw); got != `{"name":"eu","tier":2}` {
		t.Errorf("merged variable = %s", got)
	}
}

func TestLineOf(t *testing.T) {
	root := parseNode([]byte(`spec:
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
		if got := lineOf(root, tt.path, tt.last); got != tt.want {
			t.Errorf("lineOf(%q, %v) = %d, want %d", tt.path, tt.last, got, tt.want)
		}
	}
	if got := lineOf(nil, "spec", false); got != 0 {
		t.Errorf("lineOf(nil) = %d", got)
	}
	if got := duplicateKeys(root, ""); !reflect.DeepEqual(got, []dupKey{{path: "spec.dup", line: 20}}) {
		t.Errorf("duplicateKeys = %+v", got)
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
		if got := closest(in, cands); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}
