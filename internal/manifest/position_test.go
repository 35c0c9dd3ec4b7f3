package manifest

import (
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

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

// TestCELErrorLocation: a CEL error is reported at the line and column of
// the character the compiler points at, in every scalar style, not at the
// object or the `when:` line with a column into the folded string. Validate
// (every router compiled too) prints it once.
func TestCELErrorLocation(t *testing.T) {
	const head = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata:\n  name: r\nspec:\n  sources: [{name: s}]\n"
	const source = "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: s}\nspec: {type: Inline, inline: {content: x}}\n"
	tests := []struct {
		name, when string
		want       string // the location prefix of the problem line
	}{
		{"plain", "  when: text == 'a' && foo(1)\n", "r.yaml:7:27: ContextRoute/r: spec.when:"},
		{"folded", "  when: >\n    containsAnyWord(text, [\"a\"]) &&\n    metadata.role == \"x\" && foo(1)\n", "r.yaml:9:32: ContextRoute/r: spec.when:"},
		{"literal", "  when: |\n    text == \"a\" &&\n      foo(1)\n", "r.yaml:9:10: ContextRoute/r: spec.when:"},
		{"double-quoted over two lines", "  when: \"text == 'a' &&\n    foo(1)\"\n", "r.yaml:8:8: ContextRoute/r: spec.when:"},
		{"syntax error at the end", "  when: 'text == \"a\" &&'\n", "r.yaml:7:24: ContextRoute/r: spec.when:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"r.yaml": head + tt.when + source})
			_, problems := Validate(t.Context(), []string{dir + "/r.yaml"}, "", engine.Options{CacheDir: t.TempDir()})
			if len(problems) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(problems), problems)
			}
			got := strings.TrimPrefix(problems[0].Error(), dir+"/")
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("problem = %q\nwant it to start with %q", got, tt.want)
			}
		})
	}
}

// TestValidateWarnsUnguardedMetadata: a condition that reads a metadata key
// without has() fails on every request without the key; validate says so
// at the `when:` line instead of leaving it to query time, and stays valid.
func TestValidateWarnsUnguardedMetadata(t *testing.T) {
	const src = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: s}\nspec: {type: Inline, inline: {content: x}}\n"
	tests := []struct {
		name, when string
		want       []string
	}{
		{"unguarded", `'metadata.role == "admin"'`, []string{`warning r.yaml:10: ContextRoute/r: spec.when: reads metadata key "role" without has()`}},
		{"has()", `'has(metadata.role) && metadata.role == "admin"'`, nil},
		{"optional", `'metadata[?"role"].orValue("") == "admin"'`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"r.yaml": src + "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: r}\nspec:\n  when: " + tt.when + "\n  sources: [{name: s}]\n"})
			_, problems := Validate(t.Context(), []string{dir + "/r.yaml"}, "", engine.Options{CacheDir: t.TempDir()})
			var got []string
			for _, p := range problems {
				got = append(got, p.Severity.String()+" "+strings.TrimPrefix(p.Error(), dir+"/"))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}
