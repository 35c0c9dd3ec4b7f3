package packaging_test

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// The Argo CD health checks are tested (in test/argocd) against objects in
// config/argocd/*/*/testdata; those must be objects the API really has, so
// that a renamed status field breaks this test rather than the checks in a
// user's Argo CD.
func TestArgoCDTestdataAreRealObjects(t *testing.T) {
	kinds := map[string]func() any{
		"ContextRouter":   func() any { return &v1alpha1.ContextRouter{} },
		"ContextRoute":    func() any { return &v1alpha1.ContextRoute{} },
		"ContextSource":   func() any { return &v1alpha1.ContextSource{} },
		"AgentPermission": func() any { return &v1alpha1.AgentPermission{} },
	}
	for kind, newObj := range kinds {
		t.Run(kind, func(t *testing.T) {
			files, err := filepath.Glob(repo("config", "argocd", v1alpha1.GroupVersion.Group, kind, "testdata", "*.yaml"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no testdata for %s: %v", kind, err)
			}
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := yaml.UnmarshalStrict(data, newObj()); err != nil {
					t.Errorf("%s: %v", filepath.Base(f), err)
				}
			}
		})
	}
}
