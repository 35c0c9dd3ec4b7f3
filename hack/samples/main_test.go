package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadFolder(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		exclude []string
		want    map[string]string
		wantErr string
	}{{
		name:    "nested paths are flattened, other files skipped",
		files:   map[string]string{"a.md": "A", "sub/deeper/b.md": "B", "notes.txt": "N", "x/skip.md": "S"},
		exclude: []string{"x/**"},
		want:    map[string]string{"a.md": "A", "sub--deeper--b.md": "B"},
	}, {
		name:    "separator in a name",
		files:   map[string]string{"a--b.md": "A"},
		wantErr: `"--" in a file or folder name is reserved`,
	}, {
		name:    "separator in a nested name",
		files:   map[string]string{"a-/-b.md": "1", "a/--b.md": "2"},
		wantErr: "reserved",
	}, {
		name:    "collision without a reserved name",
		files:   map[string]string{"a-/b.md": "1", "a/-b.md": "2"},
		wantErr: `both become key "a---b.md"`,
	}, {
		name:    "invalid key",
		files:   map[string]string{"a b.md": "1"},
		wantErr: `"a b.md" is not a valid ConfigMap key`,
	}, {
		name:    "binary file",
		files:   map[string]string{"a.md": "\xff\xfe"},
		wantErr: "not UTF-8 text",
	}, {
		name:    "too large",
		files:   map[string]string{"a.md": strings.Repeat("x", maxConfigMapData)},
		wantErr: "more than a ConfigMap can hold",
	}, {
		name:    "nothing matches",
		files:   map[string]string{"a.txt": "1"},
		wantErr: "no files match",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tt.files)
			got, err := readFolder(folder{root: root, include: []string{"**/*.md"}, exclude: tt.exclude})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("keys %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("key %q = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestRunWritesConfigMaps(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"quickstart/sources.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {path: docs, include: ["**/*.md"]}
`,
		"quickstart/docs/intro.md":       "# Intro\n\nTrailing spaces   \n\n  indented\n",
		"quickstart/docs/team/people.md": "# People\nno final newline",
		"samples/sources.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {volume: {configMap: {name: docs-cm}}}
`,
		// Written by an earlier run for a source that is gone: removed.
		"samples/configmap-gone.yaml": header + "kind: ConfigMap\n",
		// Hand-written: kept.
		"samples/configmap-mine.yaml": "# mine\nkind: ConfigMap\n",
	})
	out := filepath.Join(dir, "samples")
	if err := run(filepath.Join(dir, "quickstart"), filepath.Join(out, "sources.yaml"), out); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), "configmap-docs-cm.yaml configmap-mine.yaml sources.yaml"; got != want {
		t.Errorf("files %q, want %q", got, want)
	}
	data, err := os.ReadFile(filepath.Join(out, "configmap-docs-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), header) {
		t.Errorf("no generated-file header:\n%s", data)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "docs-cm" || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Namespace != "" {
		t.Errorf("object %s %s/%s %q, want a namespace-less v1 ConfigMap docs-cm", cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
	}
	want := map[string]string{
		"intro.md":        "# Intro\n\nTrailing spaces   \n\n  indented\n",
		"team--people.md": "# People\nno final newline",
	}
	if len(cm.Data) != len(want) {
		t.Errorf("data keys %v, want %v", cm.Data, want)
	}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("data[%q] = %q, want %q", k, cm.Data[k], v)
		}
	}

	// A second run changes nothing.
	if err := run(filepath.Join(dir, "quickstart"), filepath.Join(out, "sources.yaml"), out); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(out, "configmap-docs-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Errorf("output changed between runs:\n%s\n---\n%s", data, again)
	}
}

func TestRunRefusesUnknownSource(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"quickstart/router.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: r}\n",
		"samples/sources.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {volume: {configMap: {name: docs}}}
`,
	})
	out := filepath.Join(dir, "samples")
	err := run(filepath.Join(dir, "quickstart"), filepath.Join(out, "sources.yaml"), out)
	if err == nil || !strings.Contains(err.Error(), `ContextSource "docs" reads ConfigMap "docs"`) {
		t.Fatalf("error %v, want one naming the source and its ConfigMap", err)
	}
}
