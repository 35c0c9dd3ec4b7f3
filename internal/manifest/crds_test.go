package manifest_test

// Tests of the CRDs `make manifests` generates into config/crd/bases: what
// kubectl shows (printer columns, short names, categories, `kubectl explain`
// descriptions) and that the API server defaults objects exactly like the
// standalone loader does (v1alpha1 Default), so a manifest means the same in
// both places.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

const crdDir = "../../config/crd/bases"

// readCRDs returns the generated CRDs by kind.
func readCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(crdDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crds := make(map[string]*apiextensionsv1.CustomResourceDefinition)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := crd.Spec.Names.Plural + "." + v1alpha1.GroupVersion.Group; crd.Name != want {
			t.Errorf("%s: CRD name %q, want %q", f, crd.Name, want)
		}
		crds[crd.Spec.Names.Kind] = crd
	}
	return crds
}

// version returns the one version of a CRD.
func version(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: %d versions, want 1", crd.Name, len(crd.Spec.Versions))
	}
	v := &crd.Spec.Versions[0]
	if v.Name != v1alpha1.GroupVersion.Version || !v.Served || !v.Storage {
		t.Fatalf("%s: version %s served=%v storage=%v, want %s served and stored", crd.Name, v.Name, v.Served, v.Storage, v1alpha1.GroupVersion.Version)
	}
	return v
}

func TestCRDs(t *testing.T) {
	crds := readCRDs(t)
	tests := []struct {
		kind      string
		plural    string
		shortName string
		columns   []string
	}{
		{v1alpha1.KindContextRouter, "contextrouters", "ctxrouter", []string{"Ready", "Routes", "Sources", "Replicas", "Age"}},
		{v1alpha1.KindContextRoute, "contextroutes", "ctxroute", []string{"Ready", "When", "Age"}},
		{v1alpha1.KindContextSource, "contextsources", "ctxsrc", []string{"Type", "Sensitivity", "Ready", "Age"}},
		{v1alpha1.KindAgentPermission, "agentpermissions", "agentperm", []string{"Agents", "Default", "Ready", "Resolved", "Age"}},
		{v1alpha1.KindContextClassifier, "contextclassifiers", "ctxclassifier", []string{"Ready", "Labels", "Accuracy", "Age"}},
	}
	if len(crds) != len(tests) {
		t.Errorf("%s holds %d CRDs, want %d", crdDir, len(crds), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			crd, ok := crds[tt.kind]
			if !ok {
				t.Fatalf("no CRD for %s", tt.kind)
			}
			n := crd.Spec.Names
			if crd.Spec.Group != v1alpha1.GroupVersion.Group || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("group %q scope %q, want %q Namespaced", crd.Spec.Group, crd.Spec.Scope, v1alpha1.GroupVersion.Group)
			}
			if n.Plural != tt.plural || !slices.Equal(n.ShortNames, []string{tt.shortName}) || !slices.Equal(n.Categories, []string{"contextrouting"}) {
				t.Errorf("plural %q short names %q categories %q, want %q [%q] [contextrouter]", n.Plural, n.ShortNames, n.Categories, tt.plural, tt.shortName)
			}
			v := version(t, crd)
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Error("no status subresource")
			}
			var columns []string
			for _, c := range v.AdditionalPrinterColumns {
				columns = append(columns, c.Name)
				if c.Name == "Ready" && !strings.HasPrefix(c.JSONPath, ".status.conditions[?(@.type==") {
					t.Errorf("Ready column reads %s, want a condition status", c.JSONPath)
				}
			}
			if !slices.Equal(columns, tt.columns) {
				t.Errorf("printer columns %q, want %q", columns, tt.columns)
			}
		})
	}
}

// TestCRDDescriptions makes `kubectl explain` useful: every field of spec and
// status says what it is, and every CEL rule has a message for people.
func TestCRDDescriptions(t *testing.T) {
	crds := readCRDs(t)
	kinds := make([]string, 0, len(crds))
	for kind := range crds {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	for _, kind := range kinds {
		crd := crds[kind]
		t.Run(kind, func(t *testing.T) {
			root := version(t, crd).Schema.OpenAPIV3Schema
			if root.Description == "" {
				t.Errorf("%s has no description", kind)
			}
			for _, top := range []string{"spec", "status"} {
				s, ok := root.Properties[top]
				if !ok {
					t.Errorf("no %s in the schema", top)
					continue
				}
				walkSchema(top, &s, func(path string, s *apiextensionsv1.JSONSchemaProps) {
					if strings.TrimSpace(s.Description) == "" {
						t.Errorf("%s has no description", path)
					}
					for _, r := range s.XValidations {
						if r.Rule == "" || r.Message == "" {
							t.Errorf("%s: CEL rule %q has no message", path, r.Rule)
						}
					}
				})
			}
		})
	}
	when := version(t, crds[v1alpha1.KindContextRoute]).Schema.OpenAPIV3Schema.Properties["spec"].Properties["when"]
	if !strings.Contains(when.Description, "CEL expression") {
		t.Errorf("kubectl explain contextroute.spec.when shows %q, want it to name the CEL expression", when.Description)
	}
}

// walkSchema calls fn for s and every schema below it, in a fixed order.
func walkSchema(path string, s *apiextensionsv1.JSONSchemaProps, fn func(string, *apiextensionsv1.JSONSchemaProps)) {
	fn(path, s)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		walkSchema(path+"."+name, &p, fn)
	}
	// Items and map values are described by their list or map field.
	if s.Items != nil && s.Items.Schema != nil {
		walkChildren(path+"[]", s.Items.Schema, fn)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkChildren(path+"{}", s.AdditionalProperties.Schema, fn)
	}
}

func walkChildren(path string, s *apiextensionsv1.JSONSchemaProps, fn func(string, *apiextensionsv1.JSONSchemaProps)) {
	walkSchema(path, s, func(p string, c *apiextensionsv1.JSONSchemaProps) {
		if c != s {
			fn(p, c)
		}
	})
}

// applySchemaDefaults sets the default of every absent field that has one, and
// recurses into what is present afterwards, the defaults included: the API
// server's structural defaulting, for the schema features the CRDs use.
func applySchemaDefaults(v any, s *apiextensionsv1.JSONSchemaProps) {
	switch v := v.(type) {
	case map[string]any:
		for name, prop := range s.Properties {
			if _, ok := v[name]; !ok && prop.Default != nil {
				var d any
				if err := json.Unmarshal(prop.Default.Raw, &d); err != nil {
					panic(err)
				}
				v[name] = d
			}
			if child, ok := v[name]; ok {
				applySchemaDefaults(child, &prop)
			}
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			for name, child := range v {
				if _, declared := s.Properties[name]; !declared {
					applySchemaDefaults(child, s.AdditionalProperties.Schema)
				}
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, item := range v {
				applySchemaDefaults(item, s.Items.Schema)
			}
		}
	}
}

// TestCRDDefaultsMatchDefault: an object created in a cluster (defaulted by
// the CRD schema) and the same object read by the standalone CLI (defaulted
// by v1alpha1 Default) must come out equal.
func TestCRDDefaultsMatchDefault(t *testing.T) {
	crds := readCRDs(t)
	type defaulter interface{ Default() }
	tests := []struct {
		name string
		kind string
		// spec is the minimal object's spec as a user writes it.
		spec   string
		newObj func() defaulter
	}{
		{"router empty", v1alpha1.KindContextRouter, `{}`, func() defaulter { return &v1alpha1.ContextRouter{} }},
		{"router partial", v1alpha1.KindContextRouter, `{"budget":{"maxTokens":100},"ranking":{"strategy":"Manual"},"deployment":{"image":"x"}}`,
			func() defaulter { return &v1alpha1.ContextRouter{} }},
		{"route", v1alpha1.KindContextRoute, `{"sources":[{"name":"a"}]}`, func() defaulter { return &v1alpha1.ContextRoute{} }},
		{"inline source", v1alpha1.KindContextSource, `{"type":"Inline","inline":{"content":"x"}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"directory source", v1alpha1.KindContextSource, `{"type":"Directory","directory":{"volume":{"configMap":{"name":"docs"}}}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"git source", v1alpha1.KindContextSource, `{"type":"GitRepo","gitRepo":{"url":"https://example.com/r.git"}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"http source", v1alpha1.KindContextSource, `{"type":"HTTPAPI","httpAPI":{"url":"https://example.com/search","textField":"text","headers":[{"name":"A","value":"b"}]}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"permission", v1alpha1.KindAgentPermission, `{"agents":["*"]}`, func() defaulter { return &v1alpha1.AgentPermission{} }},
		{"tool catalog", v1alpha1.KindContextSource, `{"type":"Tools","tools":{"catalog":[{"name":"a","description":"d"}]}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"tool catalog files", v1alpha1.KindContextSource, `{"type":"Tools","tools":{"gitRepo":{"url":"https://example.com/t.git"}}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
		{"mcp source", v1alpha1.KindContextSource, `{"type":"MCP","mcp":{"url":"https://example.com/mcp"}}`,
			func() defaulter { return &v1alpha1.ContextSource{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd, ok := crds[tt.kind]
			if !ok {
				t.Fatalf("no CRD for %s", tt.kind)
			}
			obj := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": tt.kind, "metadata": map[string]any{"name": "x"}}
			var spec any
			if err := json.Unmarshal([]byte(tt.spec), &spec); err != nil {
				t.Fatal(err)
			}
			obj["spec"] = spec
			applySchemaDefaults(obj, version(t, crd).Schema.OpenAPIV3Schema)
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			byCRD := tt.newObj()
			if err := json.Unmarshal(data, byCRD); err != nil {
				t.Fatalf("decoding the CRD-defaulted object: %v", err)
			}

			// The same object as the user wrote it, defaulted in Go.
			byGo := tt.newObj()
			raw := `{"apiVersion":"` + v1alpha1.GroupVersion.String() + `","kind":"` + tt.kind + `","metadata":{"name":"x"},"spec":` + tt.spec + `}`
			if err := json.Unmarshal([]byte(raw), byGo); err != nil {
				t.Fatal(err)
			}
			byGo.Default()

			// Include depends on what the files are (documents or tool
			// catalogs), which no marker can say: Default fills it, the
			// schema leaves it unset. Everything else must agree.
			for _, o := range []defaulter{byCRD, byGo} {
				if s, ok := o.(*v1alpha1.ContextSource); ok {
					if d, _ := s.DirectoryBlock(); d != nil {
						d.Include = nil
					}
					if g, _ := s.GitRepoBlock(); g != nil {
						g.Include = nil
					}
				}
			}
			if !equality.Semantic.DeepEqual(byCRD, byGo) {
				crdY, _ := yaml.Marshal(byCRD)
				goY, _ := yaml.Marshal(byGo)
				t.Errorf("defaults differ\nCRD schema:\n%s\nv1alpha1 Default:\n%s", crdY, goY)
			}
		})
	}
}
