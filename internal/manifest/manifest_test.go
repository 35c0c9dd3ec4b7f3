package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// writeFiles writes name -> content under dir, creating folders.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustLoad(t *testing.T, paths ...string) *Set {
	t.Helper()
	s, err := Load(paths...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func loadError(t *testing.T, err error) problem.List {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got none")
	}
	var le problem.List
	if !errors.As(err, &le) {
		t.Fatalf("error is %T, want a problem.List: %v", err, err)
	}
	return le
}

func names[T any](objs []T, name func(*T) string) []string {
	var out []string
	for i := range objs {
		out = append(out, name(&objs[i]))
	}
	return out
}

func sourceNames(s []v1alpha1.ContextSource) []string {
	return names(s, func(o *v1alpha1.ContextSource) string { return o.Name })
}
func routeNames(s []v1alpha1.ContextRoute) []string {
	return names(s, func(o *v1alpha1.ContextRoute) string { return o.Name })
}
func permissionNames(s []v1alpha1.AgentPermission) []string {
	return names(s, func(o *v1alpha1.AgentPermission) string { return o.Name })
}

const multiDoc = `---
# the system prompt
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata:
  name: prompt
spec:
  type: Inline
  inline:
    content: |
      Be helpful.
      --- not a separator: indented inside the block scalar
---
---
# only a comment
---

apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: always}
spec:
  sources: [{name: prompt}]
...
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata:
  name: everyone
spec:
  agents: ["*"]
`

func TestParseMultiDocument(t *testing.T) {
	s, err := Parse("m.yaml", []byte(multiDoc))
	if err != nil {
		t.Fatal(err)
	}
	if got := sourceNames(s.Sources); !reflect.DeepEqual(got, []string{"prompt"}) {
		t.Errorf("sources = %v", got)
	}
	if got := s.Sources[0].Spec.Inline.Content; !strings.Contains(got, "--- not a separator") {
		t.Errorf("block scalar was cut: %q", got)
	}
	if got := routeNames(s.Routes); !reflect.DeepEqual(got, []string{"always"}) {
		t.Errorf("routes = %v", got)
	}
	if got := permissionNames(s.Permissions); !reflect.DeepEqual(got, []string{"everyone"}) {
		t.Errorf("permissions = %v", got)
	}
	for _, tc := range []struct {
		kind, name string
		want       Origin
	}{
		{"ContextSource", "prompt", Origin{File: "m.yaml", Line: 3, Doc: 1}},
		{"ContextRoute", "always", Origin{File: "m.yaml", Line: 18, Doc: 2}},
		{"AgentPermission", "everyone", Origin{File: "m.yaml", Line: 25, Doc: 3}},
	} {
		got, ok := s.Origin(tc.kind, tc.name)
		if !ok || got != tc.want {
			t.Errorf("Origin(%s, %s) = %+v, %v; want %+v", tc.kind, tc.name, got, ok, tc.want)
		}
	}
	if _, ok := s.Origin("ContextSource", "nope"); ok {
		t.Error("Origin of a missing object reported ok")
	}
	// Loaded objects carry their type and are defaulted.
	src := s.Sources[0]
	if src.Kind != "ContextSource" || src.APIVersion != "contextrouter.dev/v1alpha1" {
		t.Errorf("type meta = %+v", src.TypeMeta)
	}
	if src.Spec.Sensitivity != v1alpha1.SensitivityInternal || src.Spec.Chunking.MaxChunkTokens != 512 {
		t.Errorf("source not defaulted: %+v", src.Spec)
	}
	if p := s.Permissions[0].Spec; p.Default != v1alpha1.AccessDeny || p.SensitivityAction != v1alpha1.SensitivityActionDrop {
		t.Errorf("permission not defaulted: %+v", p)
	}
}

func TestParseEdgeDocuments(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		data      string
		wantNames []string
	}{
		{"empty file", "e.yaml", "", nil},
		{"comments only", "e.yaml", "# nothing\n---\n# still nothing\n", nil},
		{"null document", "e.yaml", "---\n~\n---\n", nil},
		{"lone CR line breaks", "m.yaml", "apiVersion: contextrouter.dev/v1alpha1\rkind: ContextSource\rmetadata: {name: a}\rspec: {type: Inline, inline: {content: x}}\r---\rapiVersion: contextrouter.dev/v1alpha1\rkind: ContextSource\rmetadata: {name: b}\rspec: {type: Inline, inline: {content: yy}}\r", []string{"a", "b"}},
		{"CRLF and BOM", "w.yaml", "\xef\xbb\xbf---\r\napiVersion: contextrouter.dev/v1alpha1\r\nkind: ContextSource\r\nmetadata: {name: a}\r\nspec: {type: Inline, inline: {content: x}}\r\n", []string{"a"}},
		{"JSON object", "a.json", `{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource",
			"metadata": {"name": "a"}, "spec": {"type": "Inline", "inline": {"content": "x"}}}`, []string{"a"}},
		{"JSON stream", "a.json", `{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource", "metadata": {"name": "a"}, "spec": {"type": "Inline", "inline": {"content": "x"}}}
{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource", "metadata": {"name": "b"}, "spec": {"type": "Inline", "inline": {"content": "y"}}}`, []string{"a", "b"}},
		{"v1 List in JSON", "l.json", `{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource", "metadata": {"name": "a"}, "spec": {"type": "Inline", "inline": {"content": "x"}}},
  {"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource", "metadata": {"name": "b"}, "spec": {"type": "Inline", "inline": {"content": "y"}}}]}`, []string{"a", "b"}},
		{"typed list in YAML, items without kind", "l.yaml", `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSourceList
items:
- metadata: {name: a}
  spec: {type: Inline, inline: {content: x}}
- metadata: {name: b}
  spec: {type: Inline, inline: {content: yy}}
`, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.file, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if got := sourceNames(s.Sources); !reflect.DeepEqual(got, tt.wantNames) {
				t.Errorf("sources = %v, want %v", got, tt.wantNames)
			}
			for _, src := range s.Sources {
				if src.Kind != v1alpha1.KindContextSource {
					t.Errorf("%s: kind = %q", src.Name, src.Kind)
				}
			}
		})
	}

	// Items of a list are located at their own lines.
	s, err := Parse("l.yaml", []byte(tests[len(tests)-1].data))
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Origin("ContextSource", "b"); o.Line != 6 {
		t.Errorf("list item b at line %d, want 6", o.Line)
	}
}

// A file is empty when it holds no document at all; one whose objects fail
// to decode is not, and is not warned about as empty on top of its errors.
func TestEmptyFiles(t *testing.T) {
	const src = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: s}\n"
	tests := []struct {
		name, file, data string
		empty            bool
	}{
		{"nothing", "a.yaml", "", true},
		{"comments and markers", "a.yaml", "# moved\n---\n# gone\n...\n", true},
		{"null documents", "a.yaml", "---\n~\n---\nnull\n", true},
		{"blank JSON", "a.json", " \n\t", true},
		{"an object", "a.yaml", src + "spec: {type: Inline, inline: {content: x}}\n", false},
		{"invalid YAML", "a.yaml", "    0:\n    0", false},
		{"invalid JSON", "a.json", "{\"kind\": ", false},
		{"a kind of another API", "a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: docs}\n", false},
		{"an object that does not decode", "a.yaml", src + "spec: {type: Inline, inlin: {content: x}}\n", false},
		{"not an object", "a.yaml", "- a\n", false},
		{"JSON null", "a.json", "null", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tt.file)
			writeFiles(t, dir, map[string]string{tt.file: tt.data})
			s, _ := Load(path)
			var want []string
			if tt.empty {
				want = []string{path}
			}
			if got := s.EmptyFiles(); !reflect.DeepEqual(got, want) {
				t.Errorf("EmptyFiles() = %v, want %v", got, want)
			}
			warned := slices.ContainsFunc(s.Check(), func(p Problem) bool { return p.Message == EmptyFileMessage })
			if warned != tt.empty {
				t.Errorf("Check warns the file is empty: %v, want %v", warned, tt.empty)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	const src = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\n"
	tests := []struct {
		name  string
		files map[string]string
		// want are substrings of the error, one slice per expected problem line.
		want [][]string
	}{
		{
			name: "unknown field",
			files: map[string]string{"docs.yaml": "# docs\n" + src + `metadata:
  name: docs
spec:
  type: Directory
  directory:
    path: docs
    includ: ["**/*.md"]
`},
			want: [][]string{{"docs.yaml:10: ContextSource/docs: spec.directory.includ: unknown field", `did you mean "include"?`}},
		},
		{
			name: "explicit zero where the API requires at least 1",
			files: map[string]string{"z.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: z}
spec:
  budget:
    maxTokens: 0
`},
			want: [][]string{{"z.yaml:6: ContextRouter/z: spec.budget.maxTokens: must be at least 1"}},
		},
		{
			name: "unknown field in a list item, JSON",
			files: map[string]string{"r.json": `{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextRoute",
 "metadata": {"name": "r"},
 "spec": {"sources": [{"name": "a"},
                      {"nmae": "b"}]}}`},
			want: [][]string{{"r.json:4: ContextRoute/r: spec.sources[1].nmae: unknown field", `did you mean "name"?`}},
		},
		{
			name: "case matters",
			files: map[string]string{"r.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: acme}
spec:
  budget:
    MaxTokens: 100
`},
			want: [][]string{{"r.yaml:6: ContextRouter/acme: spec.budget.MaxTokens: unknown field", `did you mean "maxTokens"?`}},
		},
		{
			name: "duplicate field in YAML",
			files: map[string]string{"d.yaml": src + `metadata:
  name: docs
spec:
  type: Directory
  directory:
    path: a
    path: b
`},
			want: [][]string{{"d.yaml:9: ContextSource/docs: spec.directory.path: duplicate field"}},
		},
		{
			name: "duplicate field in JSON",
			files: map[string]string{"d.json": `{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource",
 "metadata": {"name": "docs"},
 "spec": {"type": "Inline", "inline": {"content": "x"},
          "priority": 1,
          "priority": 2}}`},
			want: [][]string{{"d.json:5: ContextSource/docs: spec.priority: duplicate field"}},
		},
		{
			name: "problems of a file in line order",
			files: map[string]string{"o.yaml": src + `metadata: {name: o}
spec:
  type: Directory
  directory:
    includ: []
    path: a
    path: b
`},
			want: [][]string{{"o.yaml:7: ContextSource/o: spec.directory.includ: unknown field"}, {"o.yaml:9: ContextSource/o: spec.directory.path: duplicate field"}},
		},
		{
			name:  "unknown kind",
			files: map[string]string{"k.yaml": "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextSrc\nmetadata: {name: x}\n"},
			want:  [][]string{{"k.yaml:3: ContextSrc/x: kind: unknown kind \"ContextSrc\"", "did you mean ContextSource?"}},
		},
		{
			name:  "wrong apiVersion",
			files: map[string]string{"v.yaml": "apiVersion: contextrouter.dev/v1\nkind: ContextRoute\nmetadata: {name: x}\n"},
			want:  [][]string{{"v.yaml:1: ContextRoute/x: apiVersion: unsupported apiVersion \"contextrouter.dev/v1\"", "want contextrouter.dev/v1alpha1"}},
		},
		{
			name:  "foreign kind",
			files: map[string]string{"f.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"},
			want:  [][]string{{"f.yaml:2: Deployment/web: kind: apps/v1 Deployment is not a contextrouter.dev/v1alpha1 kind"}},
		},
		{
			name:  "missing kind",
			files: map[string]string{"m.yaml": "metadata: {name: web}\n"},
			want:  [][]string{{"m.yaml:1: kind: missing"}},
		},
		{
			name:  "not an object",
			files: map[string]string{"l.yaml": "- a\n- b\n"},
			want:  [][]string{{"l.yaml:1: a manifest must be an object with apiVersion and kind, not a list"}},
		},
		{
			name:  "YAML syntax error at its absolute line",
			files: map[string]string{"s.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: ok}\nspec: {sources: [{name: a}]}\n---\na: 1\n\tb: 2\n"},
			want:  [][]string{{"s.yaml:7: invalid YAML: found a tab character"}},
		},
		{
			name:  "YAML syntax error at the end of a file without a final newline",
			files: map[string]string{"e.yaml": "# a comment\n---\n    0:\n    0"},
			want:  [][]string{{"e.yaml:4: invalid YAML: could not find expected ':'"}},
		},
		{
			name:  "YAML alias without its anchor at the alias",
			files: map[string]string{"a.yaml": "# aliases\n---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: a}\nspec:\n  variables:\n    x: &one 1\n    y: *two\n"},
			want:  [][]string{{"a.yaml:9: invalid YAML: unknown anchor 'two' referenced"}},
		},
		{
			// YAML 1.1 reads the key y as true: the problem is at that key, with the hint.
			name:  "a key read as a boolean",
			files: map[string]string{"b.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: b}\nspec:\n  budget: {maxTokens: 100}\n  variables:\n    x: 1\n  y: 2\n"},
			want:  [][]string{{"b.yaml:8: ContextRouter/b: spec.true: unknown field (put it in quotes"}},
		},
		{
			// encoding/json leaves list indexes out of a type error's path.
			name:  "type error inside a list at its element",
			files: map[string]string{"t.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: tools}\nspec:\n  type: Tools\n  tools:\n    catalog:\n    - name: a\n      description: x\n    - name: b\n      description: y\n"},
			want:  [][]string{{"t.yaml:11: ContextSource/tools: spec.tools.catalog[1].description: must be a string, not bool (put it in quotes"}},
		},
		{
			// go-yaml's parser errors name the line before; scanner errors do not.
			name:  "YAML indentation error at the offending line",
			files: map[string]string{"i.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata:\n  name: s\nspec:\n  type: Inline\n  inline:\n    content: hello\n   sensitivity: Public\n"},
			want:  [][]string{{"i.yaml:9: invalid YAML: did not find expected key"}},
		},
		{
			name:  "YAML list item out of line, in a later document",
			files: map[string]string{"l.yaml": "# first\n---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: r}\nspec:\n  sources:\n  - name: a\n - name: b\n"},
			want:  [][]string{{"l.yaml:9: invalid YAML: did not find expected key"}},
		},
		{
			name:  "YAML scanner error keeps its line",
			files: map[string]string{"m.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata:\n  name: s\nspec:\n  type: Inline\n   inline:\n    content: hello\n"},
			want:  [][]string{{"m.yaml:7: invalid YAML: mapping values are not allowed in this context"}},
		},
		{
			name:  "lone CR line breaks count as lines",
			files: map[string]string{"c.yaml": "# old Mac file\r---\rapiVersion: contextrouter.dev/v1alpha1\rkind: ContextSource\rmetadata: {name: c}\rspec: {type: Inline, inlin: {content: x}}\r"},
			want:  [][]string{{"c.yaml:6: ContextSource/c: spec.inlin: unknown field"}},
		},
		{
			name:  "JSON null",
			files: map[string]string{"n.json": "null"},
			want:  [][]string{{"n.json:1: a manifest must be an object with apiVersion and kind, not null"}},
		},
		{
			name:  "JSON syntax error",
			files: map[string]string{"s.json": "{\"apiVersion\": \"contextrouter.dev/v1alpha1\",\n \"kind\": }"},
			want:  [][]string{{"s.json:2: invalid JSON at column 10"}},
		},
		{
			name:  "type error",
			files: map[string]string{"t.yaml": src + "metadata: {name: t}\nspec:\n  type: Inline\n  priority: high\n  inline: {content: x}\n"},
			want:  [][]string{{"t.yaml:6: ContextSource/t: spec.priority: must be an integer, not string"}},
		},
		{
			name:  "YAML 1.1 boolean where a string belongs",
			files: map[string]string{"y.yaml": src + "metadata: {name: yy}\nspec:\n  type: Inline\n  inline:\n    content: yes\n"},
			want:  [][]string{{"y.yaml:7: ContextSource/yy: spec.inline.content: must be a string, not bool (put it in quotes"}},
		},
		{
			name:  "YAML 1.1 boolean as a name",
			files: map[string]string{"b.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata:\n  name: no\n"},
			want:  [][]string{{"b.yaml:4: ContextRoute: metadata.name: must be a string, not bool (put it in quotes"}},
		},
		{
			name:  "number where a string belongs",
			files: map[string]string{"n.yaml": "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: nn}\nspec:\n  ranking:\n    dedupThreshold: 0.9\n"},
			want:  [][]string{{"n.yaml:6: ContextRouter/nn: spec.ranking.dedupThreshold: must be a string, not number (put it in quotes)"}},
		},
		{
			name:  "duration given as a number",
			files: map[string]string{"h.yaml": src + "metadata: {name: h}\nspec:\n  type: HTTPAPI\n  httpAPI:\n    url: https://kb/s\n    textField: t\n    timeout: 5\n"},
			want:  [][]string{{"h.yaml:9: ContextSource/h: spec.httpAPI.timeout: invalid duration 5: want a number with a unit"}},
		},
		{
			name:  "bad duration",
			files: map[string]string{"g.yaml": src + "metadata: {name: g}\nspec:\n  type: GitRepo\n  gitRepo:\n    url: https://h/r.git\n    interval: 5 minutes\n"},
			want:  [][]string{{"g.yaml:8: ContextSource/g: spec.gitRepo.interval: invalid duration \"5 minutes\""}},
		},
		{
			name:  "bad quantity",
			files: map[string]string{"q.yaml": src + "metadata: {name: q}\nspec:\n  type: Directory\n  directory:\n    maxFileSize: lots\n"},
			want:  [][]string{{"q.yaml:7: ContextSource/q: spec.directory.maxFileSize: invalid quantity \"lots\""}},
		},
		{
			name: "two namespaces",
			files: map[string]string{
				"a.yaml": src + "metadata: {name: a, namespace: team-a}\nspec: {type: Inline, inline: {content: x}}\n",
				"b.yaml": src + "metadata: {name: b, namespace: team-b}\nspec: {type: Inline, inline: {content: x}}\n",
			},
			want: [][]string{{"b.yaml:3: ContextSource/b: metadata.namespace: namespace \"team-b\" differs from \"team-a\" of ContextSource \"a\" at ", "a.yaml:1: standalone manifests share one namespace"}},
		},
		{
			name: "problems of several files are all reported",
			files: map[string]string{
				"a.yaml": "apiVersion: x/v1\nkind: Foo\n",
				"b.yaml": src + "metadata: {name: b}\nspec: {typo: 1}\n",
			},
			want: [][]string{{"a.yaml:2: Foo: kind:"}, {"b.yaml:4: ContextSource/b: spec.typo: unknown field"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tt.files)
			_, err := Load(dir)
			le := loadError(t, err)
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) || len(le) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(le), len(tt.want), err)
			}
			for i, subs := range tt.want {
				for _, sub := range subs {
					if !strings.Contains(lines[i], sub) {
						t.Errorf("problem %d = %q\nwant it to contain %q", i, lines[i], sub)
					}
				}
				// Messages name the file the way it was found.
				if !strings.HasPrefix(lines[i], dir+string(filepath.Separator)) {
					t.Errorf("problem %d does not start with the file path: %q", i, lines[i])
				}
			}
		})
	}
}

func TestLoadPaths(t *testing.T) {
	dir := t.TempDir()
	inline := func(name string) string {
		return "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: " + name +
			"}\nspec: {type: Inline, inline: {content: x}}\n"
	}
	writeFiles(t, dir, map[string]string{
		"b.yaml":             inline("b"),
		"a/z.yml":            inline("az"),
		"a/y/deep.json":      `{"apiVersion": "contextrouter.dev/v1alpha1", "kind": "ContextSource", "metadata": {"name": "deep"}, "spec": {"type": "Inline", "inline": {"content": "x"}}}`,
		"a.yaml":             inline("a"),
		"c.YAML":             inline("c"),
		"notes.md":           "# not a manifest",
		".git/config.yaml":   "not: [valid",
		".hidden.yaml":       "not: [valid",
		"cm/..data/x.yaml":   inline("cm"),
		"other/.secret.yaml": inline("explicit"),
	})
	// A mounted ConfigMap exposes each key as a link into the hidden ..data folder.
	if err := os.Symlink(filepath.Join("..data", "x.yaml"), filepath.Join(dir, "cm", "x.yaml")); err != nil {
		t.Fatal(err)
	}
	// A link to a directory is not followed (no cycles).
	if err := os.Symlink(dir, filepath.Join(dir, "a", "loop")); err != nil {
		t.Fatal(err)
	}

	s := mustLoad(t, dir)
	// WalkDir order: lexical per directory, depth first (like kubectl -R).
	want := []string{"deep", "az", "a", "b", "c", "cm"}
	if got := sourceNames(s.Sources); !reflect.DeepEqual(got, want) {
		t.Errorf("walk order = %v, want %v", got, want)
	}

	// A link to a directory given as the path is walked.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(dir, "a"), link); err != nil {
		t.Fatal(err)
	}
	s = mustLoad(t, link)
	if got := sourceNames(s.Sources); !reflect.DeepEqual(got, []string{"deep", "az"}) {
		t.Errorf("linked directory = %v", got)
	}
	if o, _ := s.Origin("ContextSource", "az"); o.File != filepath.Join(link, "z.yml") {
		t.Errorf("file through a link = %q, want %q", o.File, filepath.Join(link, "z.yml"))
	}

	// An explicit file is read even when hidden; a file named twice is read once.
	s = mustLoad(t, filepath.Join(dir, "other", ".secret.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "b.yaml"))
	if got := sourceNames(s.Sources); !reflect.DeepEqual(got, []string{"explicit", "b"}) {
		t.Errorf("explicit files = %v", got)
	}

	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"missing path", []string{filepath.Join(dir, "nope.yaml")}, "nope.yaml: no such file or directory"},
		{"directory without manifests", []string{filepath.Join(dir, "a", "y", "..")}, ""},
		{"no paths", nil, "no manifest files or directories given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.paths...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if le := loadError(t, err); !strings.Contains(le.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", le, tc.want)
			}
		})
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "holds no *.yaml, *.yml or *.json files") {
		t.Errorf("empty directory: err = %v", err)
	}
}

func TestNamespace(t *testing.T) {
	s, err := Parse("n.yaml", []byte(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: a}
spec: {type: Inline, inline: {content: x}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: r, namespace: team-a}
spec: {sources: [{name: a}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace != "team-a" || s.Sources[0].Namespace != "team-a" || s.Routes[0].Namespace != "team-a" {
		t.Errorf("namespace = %q, source in %q, route in %q", s.Namespace, s.Sources[0].Namespace, s.Routes[0].Namespace)
	}
	cfg, err := s.Config("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Router.Namespace != "team-a" {
		t.Errorf("implied router namespace = %q", cfg.Router.Namespace)
	}

	s, err = Parse("n.yaml", []byte("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: r}\nspec: {sources: [{name: a}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace != "" || s.Routes[0].Namespace != "" {
		t.Errorf("no namespace given, got %q", s.Namespace)
	}
}

// configFixture is a set of files with two routers, routes and permissions
// attached in every way, and sources in two folders.
func configFixture(t *testing.T, withRouters bool) (dir string, s *Set) {
	dir = t.TempDir()
	files := map[string]string{
		"sources/docs.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {path: docs}
`,
		"prompt.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt}
spec: {type: Inline, inline: {content: Be brief.}}
`,
		"routes.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everywhere}
spec: {sources: [{name: prompt}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: only-a}
spec: {parentRefs: [{name: a}], sources: [{name: docs}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: only-b}
spec: {parentRefs: [{name: b}], sources: [{name: docs}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: a-and-b}
spec: {parentRefs: [{name: b}, {name: a}], sources: [{name: docs}]}
`,
		"perms.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: all-routers}
spec: {agents: ["*"], allowSources: [prompt]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: for-b}
spec: {parentRefs: [{name: b}], agents: [bot]}
`,
	}
	if withRouters {
		files["routers.yaml"] = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: a}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: b}
spec: {budget: {maxTokens: 100}}
`
	}
	writeFiles(t, dir, files)
	return dir, mustLoad(t, dir)
}

func TestConfig(t *testing.T) {
	dir, s := configFixture(t, true)

	// Two routers: a name is required.
	_, err := s.Config("")
	if err == nil || !strings.Contains(err.Error(), `2 ContextRouters ("a", "b")`) || !strings.Contains(err.Error(), "choose one with --router, such as --router a") {
		t.Errorf("Config(\"\") with two routers: err = %v", err)
	}
	if _, err := s.Config("c"); err == nil || !strings.Contains(err.Error(), `ContextRouter "c" not found: the manifests define "a", "b"`) {
		t.Errorf("Config(c): err = %v", err)
	}

	tests := []struct {
		router          string
		wantRoutes      []string
		wantPermissions []string
		wantMaxTokens   int32
	}{
		{"a", []string{"everywhere", "only-a", "a-and-b"}, []string{"all-routers"}, 8000},
		{"b", []string{"everywhere", "only-b", "a-and-b"}, []string{"all-routers", "for-b"}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.router, func(t *testing.T) {
			cfg, err := s.Config(tt.router)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Router.Name != tt.router || cfg.Router.Spec.Budget.MaxTokens != tt.wantMaxTokens {
				t.Errorf("router = %s with maxTokens %d", cfg.Router.Name, cfg.Router.Spec.Budget.MaxTokens)
			}
			if cfg.Router.Spec.DefaultAccess != v1alpha1.AccessDeny {
				t.Errorf("explicit router defaultAccess = %q, want the Deny default", cfg.Router.Spec.DefaultAccess)
			}
			if got := routeNames(cfg.Routes); !reflect.DeepEqual(got, tt.wantRoutes) {
				t.Errorf("routes = %v, want %v", got, tt.wantRoutes)
			}
			if got := permissionNames(cfg.Permissions); !reflect.DeepEqual(got, tt.wantPermissions) {
				t.Errorf("permissions = %v, want %v", got, tt.wantPermissions)
			}
			if got := sourceNames(cfg.Sources); !reflect.DeepEqual(got, []string{"prompt", "docs"}) {
				t.Errorf("sources = %v", got)
			}
			wantDirs := map[string]string{"docs": filepath.Join(dir, "sources"), "prompt": dir}
			if !reflect.DeepEqual(cfg.BaseDirs, wantDirs) {
				t.Errorf("BaseDirs = %v, want %v", cfg.BaseDirs, wantDirs)
			}
			for _, d := range cfg.BaseDirs {
				if !filepath.IsAbs(d) {
					t.Errorf("BaseDir %q is not absolute", d)
				}
			}
			if got, want := cfg.Origin("ContextRoute", tt.wantRoutes[1]).String(), filepath.Join(dir, "routes.yaml"); !strings.HasPrefix(got, want+":") {
				t.Errorf("route origin = %q, want %s:<line>", got, want)
			}
			if got := cfg.Origin("ContextSource", "docs").String(); got != filepath.Join(dir, "sources", "docs.yaml")+":1" {
				t.Errorf("source origin = %q", got)
			}
			if got := cfg.Origin("ContextRouter", tt.router).String(); !strings.HasPrefix(got, filepath.Join(dir, "routers.yaml")+":") {
				t.Errorf("router origin = %q", got)
			}
		})
	}

	// The config holds copies: changing it leaves the set alone.
	cfg, err := s.Config("a")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sources[1].Spec.Directory.Include[0] = "changed"
	if s.Sources[1].Spec.Directory.Include[0] != "**/*.md" {
		t.Error("Config shares memory with the Set")
	}
}

func TestConfigImpliedRouter(t *testing.T) {
	_, s := configFixture(t, false)
	for _, name := range []string{"", "default"} {
		cfg, err := s.Config(name)
		if err != nil {
			t.Fatalf("Config(%q): %v", name, err)
		}
		if cfg.Router.Name != "default" || cfg.Router.Spec.DefaultAccess != v1alpha1.AccessAllow {
			t.Errorf("Config(%q): router %q with defaultAccess %q, want default/Allow", name, cfg.Router.Name, cfg.Router.Spec.DefaultAccess)
		}
		if cfg.Router.Spec.Budget.MaxTokens != 8000 || cfg.Router.Spec.Ranking.DedupThreshold != "0.85" {
			t.Errorf("implied router not defaulted: %+v", cfg.Router.Spec)
		}
		// Only routes and permissions without parentRefs attach to it.
		if got := routeNames(cfg.Routes); !reflect.DeepEqual(got, []string{"everywhere"}) {
			t.Errorf("routes = %v", got)
		}
		if got := permissionNames(cfg.Permissions); !reflect.DeepEqual(got, []string{"all-routers"}) {
			t.Errorf("permissions = %v", got)
		}
		if _, ok := cfg.Origins["ContextRouter/default"]; ok {
			t.Error("the implied router has an origin")
		}
	}
	if _, err := s.Config("a"); err == nil || !strings.Contains(err.Error(), `the implied one is named "default"`) {
		t.Errorf("Config(a) without routers: err = %v", err)
	}
}

func TestConfigSingleRouter(t *testing.T) {
	s, err := Parse("r.yaml", []byte(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: acme}
spec: {defaultAccess: Deny}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: r}
spec: {parentRefs: [{name: acme}], sources: [{name: s}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Router.Name != "acme" || cfg.Router.Spec.DefaultAccess != v1alpha1.AccessDeny {
		t.Errorf("router = %s/%s, want the declared acme/Deny", cfg.Router.Name, cfg.Router.Spec.DefaultAccess)
	}
	if got := routeNames(cfg.Routes); !reflect.DeepEqual(got, []string{"r"}) {
		t.Errorf("routes = %v", got)
	}
	if _, err := s.Config("default"); err == nil {
		t.Error(`Config("default") succeeded although the manifests declare a router`)
	}
	// Parse without a folder resolves against the working directory.
	wd, _ := os.Getwd()
	s, err = Parse("inline.yaml", []byte("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: d}\nspec: {type: Directory, directory: {path: x}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = s.Config("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BaseDirs["d"] != wd {
		t.Errorf("BaseDirs[d] = %q, want %q", cfg.BaseDirs["d"], wd)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: r}
spec:
  parentRefs:
  - name: default
  sources:
  - name: doc
  - name: docs
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: lost}
spec:
  parentRefs: [{name: acme}]
  sources: [{name: docs}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory:
    path: docs
    include:
    - "**/*.md"
    - "[oops"
`,
		"b.yaml": `apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: p}
spec:
  agents: [bot]
  allowSources: [docs, finance]
  denySources: [payroll]
  sourceDenyPaths: [{source: docs, paths: ["a/**"]}, {source: wikki, paths: ["b/**"]}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec: {type: Inline, inline: {content: x}}
`,
	})
	s := mustLoad(t, dir)
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	want := []struct {
		text    string
		warning bool
	}{
		{a + `:8: ContextRoute/r: spec.sources[0].name: ContextSource "doc" not found (did you mean "docs"?)`, false},
		{a + `:15: ContextRoute/lost: spec.parentRefs[0].name: ContextRouter "acme" not found (no ContextRouter is declared; the implied one is named "default"); the route does not attach to it`, true},
		{a + `:27: ContextSource/docs: spec.directory.include[1]: Invalid value: "[oops": is not a valid doublestar glob`, false},
		{b + `:6: AgentPermission/p: spec.allowSources[1]: ContextSource "finance" not found`, true},
		{b + `:7: AgentPermission/p: spec.denySources[0]: ContextSource "payroll" not found`, true},
		{b + `:8: AgentPermission/p: spec.sourceDenyPaths[1].source: ContextSource "wikki" not found`, true},
		{b + `:12: ContextSource/docs: metadata.name: defined more than once: first at ` + a + `:18`, false},
	}
	got := s.Check()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), got.Error())
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w.text) {
			t.Errorf("problem %d = %q\nwant prefix    %q", i, got[i].Error(), w.text)
		}
		if got[i].IsWarning() != w.warning {
			t.Errorf("problem %d warning = %v, want %v", i, got[i].IsWarning(), w.warning)
		}
	}

	// Config refuses duplicates.
	if _, err := s.Config(""); err == nil || !strings.Contains(err.Error(), `ContextSource "docs" is defined more than once`) {
		t.Errorf("Config with duplicate sources: err = %v", err)
	}
}

func TestCheckRouters(t *testing.T) {
	s, err := Parse("c.yaml", []byte(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: acme}
spec:
  budget:
    maxTokens: 100
    reserveTokens: 100
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: r}
spec:
  parentRefs: [{name: default}]
  sources: [{name: s}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: s}
spec: {type: Inline, inline: {content: x}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Check()
	want := []string{
		"c.yaml:1: ContextRouter/acme: " + NoRoutesMessage,
		"c.yaml:7: ContextRouter/acme: spec.budget.reserveTokens: Invalid value: 100: must be less than maxTokens (100)",
		`c.yaml:13: ContextRoute/r: spec.parentRefs[0].name: ContextRouter "default" not found (declared: "acme"); the route does not attach to it`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), got.Error())
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("problem %d = %q\nwant          %q", i, got[i].Error(), want[i])
		}
	}
	if !got[0].IsWarning() || got[1].IsWarning() || !got[2].IsWarning() {
		t.Errorf("warnings = %v, %v, %v; want true, false, true", got[0].IsWarning(), got[1].IsWarning(), got[2].IsWarning())
	}

	// A valid set has no problems; a hand-built set is defaulted before validation.
	hand := &Set{Sources: []v1alpha1.ContextSource{{}}}
	hand.Sources[0].Name = "h"
	hand.Sources[0].Spec = v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{Content: "x"}}
	hand.Routes = []v1alpha1.ContextRoute{{Spec: v1alpha1.ContextRouteSpec{Sources: []v1alpha1.LocalObjectReference{{Name: "h"}}}}}
	hand.Routes[0].Name = "r"
	if probs := hand.Check(); len(probs) != 0 {
		t.Errorf("hand-built set: %v", probs)
	}
}
