package sources

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

const goodCatalogYAML = `# billing tools
- name: create_invoice
  namespace: billing.invoices
  description: Create an invoice for a customer.
  inputSchema:
    type: object
    properties: {customer: {type: string}, amount: {type: number}}
    required: [customer, amount]
  sideEffects: Write
---
- name: list_invoices
  namespace: billing.invoices
  description: List the invoices of a customer.
  sideEffects: Read
  examples: ["show me last month's invoices"]
`

func TestParseCatalog(t *testing.T) {
	tests := []struct {
		name, file, data string
		// want are substrings of the error ("" = no error).
		want []string
		ids  []string
	}{
		{name: "yaml documents", file: "b.yaml", data: goodCatalogYAML,
			ids: []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices"}},
		{name: "json", file: "t.json", data: `[{"name": "web_search", "description": "Search the web."}]`, ids: []string{"web_search"}},
		{name: "json stream", file: "t.json", data: "[{\"name\": \"a\", \"description\": \"A.\"}]\n[{\"name\": \"b\", \"description\": \"B.\"}]", ids: []string{"a", "b"}},
		{name: "empty yaml", file: "e.yaml", data: "# nothing yet\n", ids: nil},
		{name: "unknown field", file: "u.yaml", data: "- name: a\n  description: A.\n  sideEffect: Read\n",
			want: []string{"u.yaml:3: [0].sideEffect: unknown field", `did you mean "sideEffects"`}},
		{name: "unknown field in a later document", file: "u.yaml", data: "- {name: a, description: A.}\n---\n- name: b\n  description: B.\n- name: c\n  descripton: C.\n",
			want: []string{"u.yaml:6: [1].descripton: unknown field"}},
		{name: "wrong type", file: "w.yaml", data: "- name: a\n  description: A.\n  tags: billing\n",
			want: []string{"w.yaml:3: [0].tags: must be a list"}},
		{name: "duplicate key", file: "d.yaml", data: "- name: a\n  description: A.\n  name: b\n",
			want: []string{"d.yaml:3: [0].name: duplicate field"}},
		{name: "duplicate key json", file: "d.json", data: "[{\"name\": \"a\",\n \"description\": \"A.\",\n \"name\": \"b\"}]",
			want: []string{"d.json:", "[0].name: duplicate field"}},
		{name: "not a list", file: "n.yaml", data: "name: a\ndescription: A.\n",
			want: []string{"n.yaml:1: a tool catalog must be a list of tools, not an object"}},
		{name: "entry not an object", file: "n.yaml", data: "- {name: a, description: A.}\n- just text\n",
			want: []string{"n.yaml:2: [1]: a tool must be an object, not a string"}},
		{name: "yaml syntax", file: "s.yaml", data: "- name: a\n  description: [unclosed\n",
			want: []string{"s.yaml:", "invalid YAML"}},
		{name: "json syntax", file: "s.json", data: "[{\"name\": \"a\",\n \"description\": }]",
			want: []string{"s.json:2: invalid JSON at column"}},
		{name: "schema not an object", file: "x.yaml", data: "- name: a\n  description: A.\n  inputSchema: {type: string}\n",
			want: []string{"x.yaml:1: [0].inputSchema: type must be \"object\", not \"string\""}},
		{name: "schema without type", file: "x.yaml", data: "- name: a\n  description: A.\n  inputSchema: {properties: {q: {type: string}}}\n",
			want: []string{`[0].inputSchema: type must be "object"`}},
		{name: "schema does not resolve", file: "x.yaml", data: "- name: a\n  description: A.\n  inputSchema: {type: object, properties: {q: {$ref: '#/$defs/missing'}}}\n",
			want: []string{"[0].inputSchema: invalid JSON Schema"}},
		{name: "schema with a bad keyword value", file: "x.yaml", data: "- name: a\n  description: A.\n  inputSchema: {type: object, required: 3}\n",
			want: []string{"[0].inputSchema: not a JSON Schema"}},
		{name: "rules of 10.1", file: "r.yaml", data: "- name: 'has space'\n  namespace: 'a..b'\n  description: ''\n  sideEffects: Maybe\n  costHint: '" + strings.Repeat("x", 65) + "'\n",
			want: []string{`[0].name: Invalid value: "has space"`, `[0].namespace: Invalid value: "a..b"`, "[0].description: Required value",
				`[0].sideEffects: Unsupported value: "Maybe"`, "[0].costHint: Too long: may not be more than 64 characters"}},
		{name: "duplicate ids", file: "dup.yaml", data: "- {name: x, namespace: a, description: X.}\n- {name: y, description: Y.}\n- {name: x, namespace: a, description: X again.}\n",
			want: []string{`dup.yaml:3: [2].name: duplicate tool id "a.x": dup.yaml:1 (entry 0) has it too`}},
		{name: "name of dots only", file: "d.yaml", data: "- {name: a, description: A.}\n- {name: '.', description: Dots.}\n",
			want: []string{`d.yaml:2: [1].name: Invalid value: ".": must be dotted words of letters, digits, '_' and '-' with at least one letter or digit`}},
		{name: "schema nested too deep", file: "deep.json", data: `[{"name": "a", "description": "A.", "inputSchema": ` + string(nestedSchema(490, `{"type":"object"}`)) + `}]`,
			want: []string{"deep.json:1: [0].inputSchema: nested more than 64 levels deep (objects and arrays)"}},
		{name: "a subschema that is not one", file: "x.yaml", data: "- name: a\n  description: A.\n  inputSchema: {type: object, properties: {q: 3}}\n",
			want: []string{"x.yaml:1: [0].inputSchema.properties[q]: a schema is an object or a boolean, not a number"}},
		{name: "too large schema", file: "big.json", data: `[{"name": "a", "description": "A.", "inputSchema": {"type": "object", "description": "` + strings.Repeat("x", MaxInputSchemaBytes) + `"}}]`,
			want: []string{"[0].inputSchema: 65", "bytes; at most 65536"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := ParseCatalog(tt.file, []byte(tt.data))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("error: %v", err)
				}
				var ids []string
				for _, tl := range tools {
					ids = append(ids, tl.ID())
					if tl.SideEffects == "" {
						t.Errorf("%s: not defaulted", tl.ID())
					}
				}
				if !slices.Equal(ids, tt.ids) {
					t.Errorf("ids = %q, want %q", ids, tt.ids)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			var ce *CatalogError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T, want *CatalogError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestCatalogDefaultsSideEffects(t *testing.T) {
	tools, err := ParseCatalog("t.yaml", []byte("- {name: a, description: A.}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tools[0].SideEffects != v1alpha1.SideEffectsDestructive {
		t.Errorf("sideEffects = %q, want Destructive (the default)", tools[0].SideEffects)
	}
}

func TestCheckInlineCatalog(t *testing.T) {
	schema := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	tools := []v1alpha1.Tool{
		{Name: "a", Description: "A.", InputSchema: schema(`{"type": "object"}`)},
		{Name: "b", Description: "B.", InputSchema: schema(`{"type": "array"}`)},
		{Name: "a", Description: "A again."},
	}
	got := CheckInlineCatalog(tools)
	want := []CatalogProblem{
		{Field: "spec.tools.catalog[1].inputSchema", Message: `type must be "object", not "array" (the arguments of a tool are an object)`},
		{Field: "spec.tools.catalog[2].name", Message: `duplicate tool id "a": spec.tools.catalog[0] has it too`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems =\n%+v\nwant\n%+v", got, want)
	}
	spec := toolsSpec("inline", &v1alpha1.ToolsSource{Catalog: tools})
	if _, err := New(spec, Env{}); err == nil || !strings.HasPrefix(err.Error(), "spec.tools.catalog[1].inputSchema: ") {
		t.Errorf("factory error = %v, want the first problem with its field path", err)
	}
}

func toolsSpec(name string, ts *v1alpha1.ToolsSource) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceTools, Tools: ts},
	}
}

func loadToolIDs(t *testing.T, src Source) ([]string, error) {
	t.Helper()
	ts, ok := src.(ToolSource)
	if !ok {
		t.Fatalf("%T is not a ToolSource", src)
	}
	tools, err := ts.LoadTools(context.Background())
	var ids []string
	for _, tl := range tools {
		ids = append(ids, tl.ID())
	}
	return ids, err
}

func TestToolsInline(t *testing.T) {
	src, err := New(toolsSpec("inline", &v1alpha1.ToolsSource{Catalog: []v1alpha1.Tool{
		{Name: "zeta", Description: "Z."}, {Name: "alpha", Namespace: "x", Description: "A."},
	}}), Env{})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, []string{"x.alpha", "zeta"}) {
		t.Fatalf("ids = %q, %v; want sorted by id", ids, err)
	}
	if _, ok := src.(Syncer); ok {
		t.Error("an inline catalog is not a Syncer")
	}
}

func TestToolsDirectory(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "billing/invoices.yaml", goodCatalogYAML)
	writeTestFile(t, root, "web.json", `[{"name": "web_search", "description": "Search the web.", "sideEffects": "Read"}]`)
	writeTestFile(t, root, "README.md", "not a catalog: not included")
	src, err := New(toolsSpec("tools", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root}}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices", "web_search"}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("ids = %q, %v; want %q", ids, err, want)
	}

	// A bad edit keeps the last good catalog, with an error naming the file, line and field.
	writeTestFile(t, root, "web.json", "[{\"name\": \"web_search\",\n \"description\": \"Search.\", \"sideEfects\": \"Read\"}]")
	ids, err = loadToolIDs(t, src)
	var stale *StaleError
	if !errors.As(err, &stale) || !slices.Equal(ids, want) {
		t.Fatalf("after a bad edit: ids = %q, err = %v; want the last good catalog and a StaleError", ids, err)
	}
	if msg := err.Error(); !strings.Contains(msg, `web.json:2: [0].sideEfects: unknown field (did you mean "sideEffects"?)`) || !strings.Contains(msg, "serving the content last read") {
		t.Errorf("stale error = %q", msg)
	}

	// A duplicate id across files names both entries.
	writeTestFile(t, root, "web.json", `[{"name": "create_invoice", "namespace": "billing.invoices", "description": "Again."}]`)
	_, err = loadToolIDs(t, src)
	if err == nil || !strings.Contains(err.Error(), `web.json:1: [0].name: duplicate tool id "billing.invoices.create_invoice": billing/invoices.yaml:2 (entry 0) has it too`) {
		t.Errorf("duplicate across files: %v", err)
	}

	// A fixed catalog serves again.
	writeTestFile(t, root, "web.json", `[{"name": "web_fetch", "description": "Fetch a page."}]`)
	ids, err = loadToolIDs(t, src)
	if want := []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices", "web_fetch"}; err != nil || !slices.Equal(ids, want) {
		t.Errorf("after the fix: ids = %q, %v; want %q", ids, err, want)
	}

	// The folder vanishing serves the last good catalog too.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	ids, err = loadToolIDs(t, src)
	if !errors.As(err, &stale) || len(ids) != 3 {
		t.Errorf("folder gone: ids = %q, err = %v", ids, err)
	}
}

func TestToolsDirectoryFirstLoadInvalid(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "t.yaml", "- {name: a}\n")
	src, err := New(toolsSpec("tools", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root}}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	var stale *StaleError
	if err == nil || errors.As(err, &stale) || ids != nil {
		t.Fatalf("ids = %q, err = %v; want no catalog and a plain error", ids, err)
	}
	if !strings.Contains(err.Error(), "t.yaml:1: [0].description: Required value") {
		t.Errorf("error = %v", err)
	}
}

func TestToolsDirectoryLimits(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "big.yaml", "- {name: a, description: '"+strings.Repeat("x", 2000)+"'}\n")
	writeTestFile(t, root, "small.yaml", "- {name: b, description: B.}\n")
	max := resource.MustParse("1Ki")
	src, err := New(toolsSpec("tools", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root, MaxFileSize: &max}}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, []string{"b"}) {
		t.Errorf("ids = %q, %v; want the file over maxFileSize skipped", ids, err)
	}
}

func TestToolsFactoryErrors(t *testing.T) {
	_, err := New(toolsSpec("t", &v1alpha1.ToolsSource{GitRepo: &v1alpha1.GitRepoSource{URL: "https://example.com/r.git", Ref: "bad..ref"}}), Env{})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.tools.gitRepo.ref: ") {
		t.Errorf("git ref error = %v, want it under spec.tools.gitRepo", err)
	}
	_, err = New(toolsSpec("t", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{}}), Env{})
	if err == nil || !strings.HasPrefix(err.Error(), "spec.tools.directory.path: ") {
		t.Errorf("directory error = %v, want it under spec.tools.directory", err)
	}
}

func TestToolsGitRepo(t *testing.T) {
	u := newGitUpstream(t, "main")
	u.commit("tools", map[string]string{"tools/billing.yaml": goodCatalogYAML, "docs/readme.md": "# not a catalog"})
	env, _ := gitEnv(t, nil)
	src, err := New(toolsSpec("git-tools", &v1alpha1.ToolsSource{GitRepo: &v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main"}}), env)
	if err != nil {
		t.Fatal(err)
	}
	sy, ok := src.(Syncer)
	if !ok {
		t.Fatalf("%T is not a Syncer", src)
	}
	want := []string{"billing.invoices.create_invoice", "billing.invoices.list_invoices"}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, want) {
		t.Fatalf("ids = %q, %v; want %q", ids, err, want)
	}

	// A bad commit: the sync succeeds, the catalog keeps its last good version.
	u.commit("typo", map[string]string{"tools/web.yaml": "- name: web_search\n  description: Search.\n  sideEffects: Sometimes\n"})
	if changed, err := sy.Sync(context.Background()); err != nil || !changed {
		t.Fatalf("sync: changed=%v err=%v", changed, err)
	}
	ids, err = loadToolIDs(t, src)
	var stale *StaleError
	if !errors.As(err, &stale) || !slices.Equal(ids, want) {
		t.Fatalf("after a bad commit: ids = %q, err = %v", ids, err)
	}
	if !strings.Contains(err.Error(), `tools/web.yaml:1: [0].sideEffects: Unsupported value: "Sometimes"`) {
		t.Errorf("error = %v", err)
	}

	u.commit("fix", map[string]string{"tools/web.yaml": "- name: web_search\n  description: Search.\n  sideEffects: Read\n"})
	if _, err := sy.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids, err = loadToolIDs(t, src)
	if want := append(want, "web_search"); err != nil || !slices.Equal(ids, want) {
		t.Errorf("after the fix: ids = %q, %v; want %q", ids, err, want)
	}
	if st := src.(interface{ Status() GitStatus }).Status(); st.Commit == "" {
		t.Error("status has no commit")
	}
}

func TestToolsDirectoryFilesStayWhole(t *testing.T) {
	// A catalog file is parsed whole, however the source would chunk documents.
	root := t.TempDir()
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString("- {name: tool" + strings.Repeat("x", i%3) + strconv.Itoa(i) + ", description: 'Tool number " + strconv.Itoa(i) + " does a thing.'}\n")
	}
	writeTestFile(t, root, "many.yaml", "## looks like a heading\n"+b.String())
	spec := toolsSpec("tools", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: filepath.Join(root)}})
	spec.Spec.Chunking.MaxChunkTokens = 16
	src, err := New(spec, Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || len(ids) != 200 {
		t.Errorf("%d tools, %v; want 200", len(ids), err)
	}
}

func discardTestLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestToolsCatalogSizeLimit: catalog files holding more than MaxCatalogTools
// tools fail the source.
func TestToolsCatalogSizeLimit(t *testing.T) {
	root := t.TempDir()
	for f := range 2 {
		var b strings.Builder
		for i := range MaxCatalogTools/2 + f { // 10,001 in all
			b.WriteString("- {name: t" + strconv.Itoa(f) + "_" + strconv.Itoa(i) + ", description: D.}\n")
		}
		writeTestFile(t, root, "part"+strconv.Itoa(f)+".yaml", b.String())
	}
	max := resource.MustParse("10Mi")
	src, err := New(toolsSpec("tools", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root, MaxFileSize: &max}}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err == nil || ids != nil || !strings.Contains(err.Error(), "part1.yaml:5001: more than 10000 tools in the catalog") {
		t.Errorf("%d tools, err = %v", len(ids), err)
	}
}
