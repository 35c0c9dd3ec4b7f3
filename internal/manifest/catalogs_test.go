package manifest

import (
	"strings"
	"testing"
)

// TestCatalogFolderInsideManifests: the catalog folder of a Tools source may
// sit among the manifests; its files are not manifests. A list anywhere else
// still is a mistake.
func TestCatalogFolderInsideManifests(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"sources.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: tools}
spec:
  type: Tools
  tools:
    directory: {path: ./catalog}
`,
		"catalog/billing.yaml":   "- {name: refund, description: Refund a payment.}\n",
		"catalog/sub/crm.json":   `[{"name": "find", "description": "Find a customer."}]`,
		"elsewhere/mistake.yaml": "- {name: x}\n",
	})
	_, err := Load(dir)
	ps := loadError(t, err)
	if len(ps) != 1 || !strings.HasSuffix(ps[0].File, "mistake.yaml") || !strings.Contains(ps[0].Message, "a manifest must be an object") {
		t.Fatalf("problems = %v; want only the list outside the catalog folder", ps)
	}
	writeFiles(t, dir, map[string]string{"elsewhere/mistake.yaml": "# nothing\n"})
	s, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, f := range s.EmptyFiles() {
		if strings.Contains(f, "catalog") {
			t.Errorf("catalog file %s reported as an empty manifest", f)
		}
	}
	if len(s.Sources) != 1 {
		t.Errorf("sources = %d", len(s.Sources))
	}
}
