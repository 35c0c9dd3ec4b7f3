package convert

import (
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/internal/manifest"
)

// Strings that YAML 1.1 (the manifest loader's) reads as booleans are quoted,
// so names, tags and texts such as "on", "y" and "no" stay strings.
func TestOutputKeepsStringsThatLookLikeBooleans(t *testing.T) {
	in := `sources:
  "y": {type: inline, tags: ["on", "yes", "1.5", "null"], content: "no"}
routes:
  - {name: "off", sources: ["y"]}
permissions:
  - {agent: "n", allow_sources: ["y"]}
`
	res, err := Theaios("f.yaml", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Parse("out.yaml", res.Stream())
	if err != nil {
		t.Fatalf("the output does not load: %v\n%s", err, res.Stream())
	}
	if len(set.Sources) != 1 || set.Sources[0].Name != "y" || set.Sources[0].Spec.Inline.Content != "no" ||
		!slices.Equal(set.Sources[0].Spec.Tags, []string{"on", "yes", "1.5", "null"}) {
		t.Errorf("sources = %+v", set.Sources)
	}
	if len(set.Routes) != 1 || set.Routes[0].Name != "off" || len(set.Permissions) != 1 || !slices.Equal(set.Permissions[0].Spec.Agents, []string{"n"}) {
		t.Errorf("routes %+v, permissions %+v", set.Routes, set.Permissions)
	}
}
