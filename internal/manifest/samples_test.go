package manifest_test

// Tests of config/samples, the quickstart adapted for a cluster: the files
// must be what `kubectl apply -n NS -f config/samples/` accepts, compile like
// any manifests, stay in step with examples/quickstart, and answer questions
// exactly like it once the ConfigMaps are mounted the way the kubelet does.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

const (
	samplesDir    = "../../config/samples"
	quickstartDir = "../../examples/quickstart"
	sampleRouter  = "acme"
	// keySeparator stands for "/" in the keys of the document ConfigMaps (see hack/samples).
	keySeparator = "--"
)

// samples is config/samples split the way the tests need it.
type samples struct {
	// files hold the four kinds.
	files []string
	// configMaps by name.
	configMaps map[string]corev1.ConfigMap
}

// readSamples reads config/samples like `kubectl apply -f` does: every *.yaml,
// *.yml and *.json file of the folder (not below), each document sent to the
// API server. A file holds either ConfigMaps only or none.
func readSamples(t *testing.T) samples {
	t.Helper()
	entries, err := os.ReadDir(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	s := samples{configMaps: make(map[string]corev1.ConfigMap)}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		file := filepath.Join(samplesDir, e.Name())
		docs := yamlDocuments(t, file)
		if len(docs) == 0 {
			t.Errorf("%s: no objects", file)
			continue
		}
		var configMaps int
		for i, doc := range docs {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: document %d: %v", file, i+1, err)
			}
			// `kubectl apply -n NS` refuses an object that names another namespace.
			if meta.Metadata.Namespace != "" {
				t.Errorf("%s: %s %q sets metadata.namespace %q; samples are applied with -n", file, meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace)
			}
			if meta.APIVersion != "v1" || meta.Kind != "ConfigMap" {
				continue
			}
			configMaps++
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
				t.Fatalf("%s: ConfigMap %q: %v", file, meta.Metadata.Name, err)
			}
			if _, dup := s.configMaps[cm.Name]; dup {
				t.Errorf("%s: ConfigMap %q is defined twice", file, cm.Name)
			}
			s.configMaps[cm.Name] = cm
		}
		switch configMaps {
		case 0:
			s.files = append(s.files, file)
		case len(docs):
		default:
			t.Errorf("%s mixes ConfigMaps with other objects; keep them in files of their own", file)
		}
	}
	return s
}

// yamlDocuments splits a file into its non-empty YAML documents.
func yamlDocuments(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var docs [][]byte
	for {
		var node yamlv3.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(node.Content) == 0 || node.Content[0].Kind != yamlv3.MappingNode {
			continue
		}
		out, err := yamlv3.Marshal(&node)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, out)
	}
}

func loadSamples(t *testing.T, s samples) *manifest.Set {
	t.Helper()
	set, err := manifest.Load(s.files...)
	if err != nil {
		t.Fatalf("loading %s: %v", strings.Join(s.files, ", "), err)
	}
	return set
}

func TestSamplesCompile(t *testing.T) {
	s := readSamples(t)
	set := loadSamples(t, s)
	for _, p := range set.Check() {
		t.Errorf("check: %v", p)
	}
	if set.Namespace != "" {
		t.Errorf("samples set namespace %q; they must be namespace-less", set.Namespace)
	}
	cfg, err := set.Config(sampleRouter)
	if err != nil {
		t.Fatal(err)
	}
	// What the operator and the webhook do: compile everything, read nothing.
	snap, err := engine.Compile(context.Background(), cfg, engine.Options{SkipLoad: true})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if got, want := snap.Routes(), []string{"always", "hr-policies", "engineering", "finance", "incident-help", "handbook"}; !slices.Equal(got, want) {
		t.Errorf("routes = %q, want %q", got, want)
	}
	if got := len(cfg.Permissions); got != 4 {
		t.Errorf("%d permissions apply to %q, want 4", got, sampleRouter)
	}

	// Every Directory source reads a ConfigMap of the samples, and nothing else does.
	referenced := make(map[string]bool)
	for _, src := range set.Sources {
		t.Run(src.Name, func(t *testing.T) {
			d := src.Spec.Directory
			if src.Spec.Type != v1alpha1.SourceDirectory {
				return
			}
			if d.Path != "" {
				t.Errorf("directory.path = %q; in a cluster the volume's default mount point must apply", d.Path)
			}
			if d.Volume == nil || d.Volume.ConfigMap == nil {
				t.Fatalf("directory.volume.configMap is not set")
			}
			name := d.Volume.ConfigMap.Name
			referenced[name] = true
			if _, ok := s.configMaps[name]; !ok {
				t.Errorf("ConfigMap %q is not among the samples", name)
			}
		})
	}
	for name := range s.configMaps {
		if !referenced[name] {
			t.Errorf("ConfigMap %q is read by no source", name)
		}
	}
}

// TestSamplesMatchQuickstart keeps the samples in step with the standalone
// quickstart: the objects are the same but for the listed cluster changes.
func TestSamplesMatchQuickstart(t *testing.T) {
	cluster := loadSamples(t, readSamples(t))
	standalone, err := manifest.Load(quickstartDir)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("routers", func(t *testing.T) {
		assertSameObjects(t, standalone.Routers, cluster.Routers,
			func(o *v1alpha1.ContextRouter) string { return o.Name },
			func(o *v1alpha1.ContextRouter) any { return o.Spec }, nil)
	})
	t.Run("routes", func(t *testing.T) {
		assertSameObjects(t, standalone.Routes, cluster.Routes,
			func(o *v1alpha1.ContextRoute) string { return o.Name },
			func(o *v1alpha1.ContextRoute) any { return o.Spec }, nil)
	})
	t.Run("permissions", func(t *testing.T) {
		assertSameObjects(t, standalone.Permissions, cluster.Permissions,
			func(o *v1alpha1.AgentPermission) string { return o.Name },
			func(o *v1alpha1.AgentPermission) any { return o.Spec },
			func(o *v1alpha1.AgentPermission) {
				// A ConfigMap volume is flat: salaries/ becomes the salaries--* keys.
				if o.Name == "finance-analyst" && slices.Equal(o.Spec.DenyPaths, []string{"salaries/**"}) {
					o.Spec.DenyPaths = []string{"salaries" + keySeparator + "*"}
				}
			})
	})
	t.Run("sources", func(t *testing.T) {
		assertSameObjects(t, standalone.Sources, cluster.Sources,
			func(o *v1alpha1.ContextSource) string { return o.Name },
			func(o *v1alpha1.ContextSource) any { return o.Spec },
			func(o *v1alpha1.ContextSource) {
				if d := o.Spec.Directory; d != nil {
					// A folder becomes a ConfigMap of the source's name.
					d.Path = ""
					d.Volume = &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: o.Name}}
				}
				if o.Name == "finance-docs" {
					o.Spec.Description = strings.Replace(o.Spec.Description, "(under salaries/)", "(in the salaries--* files)", 1)
				}
			})
	})
}

// assertSameObjects compares the standalone objects, turned into their
// cluster form by adapt, with the cluster ones: same names in the same order,
// equal specs.
func assertSameObjects[T any](t *testing.T, standalone, cluster []T, name func(*T) string, spec func(*T) any, adapt func(*T)) {
	t.Helper()
	var wantNames, gotNames []string
	for i := range standalone {
		wantNames = append(wantNames, name(&standalone[i]))
	}
	for i := range cluster {
		gotNames = append(gotNames, name(&cluster[i]))
	}
	if !slices.Equal(gotNames, wantNames) {
		t.Fatalf("samples hold %q, the quickstart %q", gotNames, wantNames)
	}
	for i := range standalone {
		want := standalone[i]
		if adapt != nil {
			adapt(&want)
		}
		if got := spec(&cluster[i]); !equality.Semantic.DeepEqual(got, spec(&want)) {
			gotY, _ := yaml.Marshal(got)
			wantY, _ := yaml.Marshal(spec(&want))
			t.Errorf("%s: spec differs from the quickstart's (adapted for a cluster)\ngot:\n%s\nwant:\n%s", name(&want), gotY, wantY)
		}
	}
}

// TestSampleConfigMapsHoldQuickstartDocs fails when examples/quickstart/docs
// changed without `make samples`.
func TestSampleConfigMapsHoldQuickstartDocs(t *testing.T) {
	s := readSamples(t)
	cfg := standaloneConfig(t)
	for _, src := range cfg.Sources {
		if src.Spec.Type != v1alpha1.SourceDirectory {
			continue
		}
		t.Run(src.Name, func(t *testing.T) {
			cm, ok := s.configMaps[src.Name]
			if !ok {
				t.Fatalf("no ConfigMap %q in the samples", src.Name)
			}
			root := filepath.Join(cfg.BaseDirs[src.Name], src.Spec.Directory.Path)
			want := make(map[string]string)
			err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return err
				}
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				b, err := os.ReadFile(p)
				want[strings.ReplaceAll(filepath.ToSlash(rel), "/", keySeparator)] = string(b)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("%s holds no documents", root)
			}
			for key, content := range want {
				got, ok := cm.Data[key]
				switch {
				case !ok:
					t.Errorf("key %q is missing: run `make samples`", key)
				case got != content:
					t.Errorf("key %q differs from %s: run `make samples`", key, root)
				}
			}
			for key := range cm.Data {
				if _, ok := want[key]; !ok {
					t.Errorf("key %q has no document in %s: run `make samples`", key, root)
				}
			}
			if len(cm.BinaryData) > 0 {
				t.Errorf("binaryData is set; the documents are text")
			}
		})
	}
}

func standaloneConfig(t *testing.T) *engine.Config {
	t.Helper()
	set, err := manifest.Load(quickstartDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := set.Config(sampleRouter)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mountConfigMap lays out a ConfigMap the way the kubelet mounts it: the files
// in a timestamped hidden folder, "..data" linking to it, and every key a
// link through "..data".
func mountConfigMap(t *testing.T, dir string, cm corev1.ConfigMap) {
	t.Helper()
	const version = "..2026_01_02_03_04_05.000000001"
	if err := os.MkdirAll(filepath.Join(dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(version, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for key, content := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, version, key), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSamplesAnswerLikeQuickstart mounts the sample ConfigMaps like the
// kubelet and asks the README's questions of both setups: the answers must be
// the same, chunk paths aside (salaries/x.md is salaries--x.md in a cluster).
func TestSamplesAnswerLikeQuickstart(t *testing.T) {
	ctx := context.Background()
	s := readSamples(t)
	cfg, err := loadSamples(t, s).Config(sampleRouter)
	if err != nil {
		t.Fatal(err)
	}
	mounts := t.TempDir()
	for i := range cfg.Sources {
		d := cfg.Sources[i].Spec.Directory
		if d == nil {
			continue
		}
		// The router reads /var/run/contextrouter/sources/<source>; here, a temporary folder.
		d.Path = filepath.Join(mounts, cfg.Sources[i].Name)
		mountConfigMap(t, d.Path, s.configMaps[d.Volume.ConfigMap.Name])
	}
	clusterSnap, err := engine.Compile(ctx, cfg, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	standaloneSnap, err := engine.Compile(ctx, standaloneConfig(t), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range clusterSnap.Sources() {
		if st.Error != "" || (st.Type == v1alpha1.SourceDirectory && st.Chunks == 0) {
			t.Errorf("source %s: %d chunks, error %q", st.Name, st.Chunks, st.Error)
		}
	}

	tests := []struct {
		name string
		req  engine.Request
		// check asserts what the README promises about the answer.
		check func(t *testing.T, r *engine.Response)
	}{{
		name: "hr question",
		req:  engine.Request{Agent: "hr-assistant", Text: "How many vacation days do I get, and can I carry them over?"},
		check: func(t *testing.T, r *engine.Response) {
			if !hasChunk(r, "hr-docs", "pto.md") {
				t.Error("no chunk of hr-docs pto.md")
			}
		},
	}, {
		name: "engineering question",
		req:  engine.Request{Agent: "eng-assistant", Text: "How do I roll back a bad deploy of fleet-api?"},
		check: func(t *testing.T, r *engine.Response) {
			if !hasChunk(r, "engineering-docs", "deploy-runbook.md") {
				t.Error("no chunk of engineering-docs deploy-runbook.md")
			}
		},
	}, {
		name: "source not allowed",
		req:  engine.Request{Agent: "hr-assistant", Text: "What is the engineering budget this quarter?"},
		check: func(t *testing.T, r *engine.Response) {
			if !slices.Contains(r.DeniedSources, "finance-docs") {
				t.Errorf("denied sources %q, want finance-docs among them", r.DeniedSources)
			}
		},
	}, {
		name: "salary bands hidden by denyPaths",
		req:  engine.Request{Agent: "finance-analyst", Text: "What are the salary bands for a senior engineer?"},
		check: func(t *testing.T, r *engine.Response) {
			if r.Stats.Dropped.PathDenied == 0 {
				t.Error("no chunk was dropped as path denied")
			}
			for _, c := range r.Chunks {
				if strings.Contains(c.Path, "salaries") {
					t.Errorf("chunk %s:%s is included", c.Source, c.Path)
				}
			}
			if !hasChunk(r, "finance-docs", "budget-2026-q2.md") {
				t.Error("the rest of finance-docs is not readable")
			}
		},
	}, {
		name: "metadata and duplicates",
		req: engine.Request{Agent: "eng-assistant", Text: "How do I request an exception to the remote work policy?",
			Metadata: map[string]string{"department": "engineering"}},
		check: func(t *testing.T, r *engine.Response) {
			if r.Stats.Dropped.Duplicate == 0 {
				t.Error("no chunk was dropped as a duplicate")
			}
		},
	}, {
		name: "unknown agent",
		req:  engine.Request{Agent: "sales-bot", Text: "How many vacation days do I get?"},
		check: func(t *testing.T, r *engine.Response) {
			if len(r.Chunks) != 1 || r.Chunks[0].Source != "system-prompt" {
				t.Errorf("chunks %v, want the system prompt only", chunkKeys(r))
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clusterSnap.Query(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := standaloneSnap.Query(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
			normalize(got)
			normalize(want)
			for i := range want.Chunks {
				want.Chunks[i].Path = strings.ReplaceAll(want.Chunks[i].Path, "/", keySeparator)
			}
			if !reflect.DeepEqual(got, want) {
				gotY, _ := yaml.Marshal(got)
				wantY, _ := yaml.Marshal(want)
				t.Errorf("the cluster samples answer differently from the quickstart\ncluster:\n%s\nquickstart:\n%s", gotY, wantY)
			}
		})
	}
}

// normalize clears what legitimately differs between two setups: timing and
// file modification times.
func normalize(r *engine.Response) {
	r.EvaluationTimeMS = 0
	for i := range r.Chunks {
		r.Chunks[i].Metadata.MTime = ""
	}
}

func hasChunk(r *engine.Response, source, path string) bool {
	return slices.ContainsFunc(r.Chunks, func(c engine.Chunk) bool { return c.Source == source && c.Path == path })
}

func chunkKeys(r *engine.Response) []string {
	var out []string
	for _, c := range r.Chunks {
		out = append(out, c.Source+":"+c.Path)
	}
	return out
}
