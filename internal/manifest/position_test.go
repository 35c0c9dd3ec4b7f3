package manifest

import "testing"

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
