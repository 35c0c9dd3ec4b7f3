package sources

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
)

// quickstartDocs returns the markdown documents of examples/quickstart.
func quickstartDocs(t testing.TB) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("../../examples/quickstart/docs", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".md" {
			return err
		}
		data, err := os.ReadFile(p)
		out = append(out, string(data))
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("reading the quickstart documents: %d found, %v", len(out), err)
	}
	return out
}

// FuzzSplitDocument chunks arbitrary text with arbitrary settings and checks
// what holds for every document: chunks are numbered in order, none is
// blank, none is over maxChunkTokens unless it is a single word, together
// they hold every non-space character of the text in order (only a preamble
// of nothing but "# " headings may be left out, as its H1 is in the titles),
// and every title is the document's or made of text of the document.
func FuzzSplitDocument(f *testing.F) {
	for i, doc := range quickstartDocs(f) {
		f.Add(doc, uint16(i*37), uint8(i))
	}
	f.Add("# T\n\n```\n## not a heading\n\n```\n## A ##\nx\r\ny\r\n", uint16(0), uint8(1))
	f.Add("\ufeff## \n"+strings.Repeat("word ", 200)+"\n\n"+strings.Repeat("x", 300), uint16(16), uint8(4))

	estimators := append([]v1alpha1.TokenEstimator{""}, v1alpha1.TokenEstimators()...)
	f.Fuzz(func(t *testing.T, content string, maxTokens uint16, mode uint8) {
		opts := ChunkOptions{Strategy: v1alpha1.ChunkingMarkdownSections}
		if mode&1 == 1 {
			opts.Strategy = v1alpha1.ChunkingWholeFile
		}
		if maxTokens > 0 {
			opts.MaxTokens = v1alpha1.MinChunkTokens + int(maxTokens)%2048
		}
		est, err := budget.New(estimators[int(mode>>1)%len(estimators)])
		if err != nil {
			t.Fatal(err)
		}
		opts.CountTokens = est.Count
		limit := opts.MaxTokens
		if limit == 0 {
			limit = DefaultMaxChunkTokens
		}
		doc := Document{Source: "src", Path: "dir/doc.md", Title: "doc.md", Content: content,
			ModTime: time.Unix(1700000000, 0), Commit: "abc"}

		chunks := SplitDocument(doc, opts)
		if again := SplitDocument(doc, opts); !reflect.DeepEqual(chunks, again) {
			t.Fatal("two splits of one document differ")
		}

		text := strings.TrimPrefix(content, "\ufeff")
		text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
		var joined strings.Builder
		for i, c := range chunks {
			if c.Index != i || c.Source != doc.Source || c.Path != doc.Path || !c.ModTime.Equal(doc.ModTime) || c.Commit != doc.Commit {
				t.Fatalf("chunk %d does not carry its position and the document's metadata: %+v", i, c)
			}
			if strings.TrimSpace(c.Content) == "" {
				t.Fatalf("chunk %d is blank: %q", i, c.Content)
			}
			if opts.Strategy != v1alpha1.ChunkingWholeFile {
				if n := est.Count(c.Content); n > limit && len(strings.Fields(c.Content)) > 1 {
					t.Errorf("chunk %d has %d tokens, more than %d, and is not a single word: %q", i, n, limit, c.Content)
				}
			}
			checkTitle(t, c.Title, doc.Title, text)
			// Per chunk: joined raw, two stray bytes of invalid UTF-8 at a cut
			// would read as one character.
			joined.WriteString(withoutSpace(c.Content))
		}
		if opts.Strategy == v1alpha1.ChunkingWholeFile && len(chunks) > 1 {
			t.Fatalf("WholeFile made %d chunks", len(chunks))
		}

		got, all := joined.String(), withoutSpace(text)
		if got == all {
			return
		}
		dropped, ok := strings.CutSuffix(all, got)
		if !ok || opts.Strategy == v1alpha1.ChunkingWholeFile || !isHeadingPreamble(text, dropped) {
			t.Fatalf("chunks do not hold the text in order:\n got %q\nwant %q", got, all)
		}
	})
}

// withoutSpace drops the white space the chunker may add, drop or replace.
func withoutSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// isHeadingPreamble reports whether dropped (without white space) is the
// text of the document's first lines, all of them blank or "# " headings.
func isHeadingPreamble(text, dropped string) bool {
	acc := ""
	for _, line := range strings.Split(text, "\n") {
		if acc == dropped {
			return true
		}
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case strings.TrimSpace(line) == "":
		case len(line)-len(trimmed) <= 3 && strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "##"):
			acc += withoutSpace(line)
		default:
			return false
		}
	}
	return acc == dropped
}

// checkTitle fails unless a title is the document's own or made of one or
// two pieces of its text ("H1 - section").
func checkTitle(t *testing.T, title, docTitle, text string) {
	t.Helper()
	if title == docTitle {
		return
	}
	if strings.Contains(title, "\n") || title == "" {
		t.Fatalf("title %q is empty or spans lines", title)
	}
	if strings.Contains(text, title) {
		return
	}
	for i := 0; ; {
		j := strings.Index(title[i:], " - ")
		if j < 0 {
			break
		}
		head, tail := title[:i+j], title[i+j+3:]
		if strings.Contains(text, head) && strings.Contains(text, tail) {
			return
		}
		i += j + 1
	}
	t.Fatalf("title %q is neither %q nor text of the document", title, docTitle)
}

// FuzzHTTPAPIResponse maps arbitrary response bodies with arbitrary field
// paths, directly and through Fetch against a real server sending the body.
// Whatever the input: nothing panics; a body that is not one JSON value is
// an error; at most maxResults chunks come back, none blank, in result
// order, with trimmed titles and clean relative paths; a body over
// maxResponseSize is refused, and any other gets the same answer either way.
func FuzzHTTPAPIResponse(f *testing.F) {
	f.Add([]byte(httpOneResult), "", "text", "", "", uint16(0), uint16(0))
	f.Add([]byte(`{"data":[{"hits":{"items":[{"doc":{"body":{"text":"a"}},"title":" T ","path":"/docs/../../x/./a.md"},{"doc":{"body":{"text":7}}}]}}]}`),
		"data.0.hits.items", "doc.body.text", "title", "path", uint16(1), uint16(0))
	f.Add([]byte(`{"results":[{"text":"one"},{"text":"  "},{"text":true},{"text":null},{"text":1e400},{"text":["x"]}]}`),
		"results", "text", "text", "text", uint16(3), uint16(64))
	f.Add([]byte(`{"0":[{"1":"x"}],"items":{"0":{"t":"y"}}} `), "0", "1", "0", "1", uint16(999), uint16(20))
	f.Add([]byte("\xef\xbb\xbf[{\"text\":\"\\ud800\"}] trailing"), "", "text", "", "", uint16(0), uint16(0))

	var body atomic.Pointer[[]byte]
	srv, _ := newHTTPTestServer(f, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*body.Load())
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	f.Fuzz(func(t *testing.T, data []byte, respPath, textField, titleField, pathField string, maxResults, maxSize uint16) {
		spec := v1alpha1.HTTPAPISource{
			URL: srv.URL + "/search?q={{query}}", ResponsePath: respPath,
			TextField: textField, TitleField: titleField, PathField: pathField,
			Timeout: httpDurPtr(10 * time.Second),
		}
		if maxResults > 0 {
			spec.MaxResults = int32(1 + int(maxResults)%v1alpha1.MaxHTTPAPIResults)
		}
		if maxSize > 0 {
			spec.MaxResponseSize = resource.NewQuantity(int64(maxSize), resource.DecimalSI)
		}
		// As every loader does: Validate first; the factory trusts its input.
		cs := httpTestSpec("kb", spec)
		cs.Default()
		if errs := cs.Validate(); len(errs) > 0 {
			return
		}
		src, err := New(cs, Env{Logger: quiet})
		if err != nil {
			if !strings.Contains(err.Error(), "spec.httpAPI.") {
				t.Fatalf("spec error does not name the field: %v", err)
			}
			return
		}
		h := src.(*HTTPAPI)

		direct, derr := h.chunks(data)
		checkHTTPChunks(t, h, data, direct, derr)

		body.Store(&data)
		fetched, ferr := h.Fetch(context.Background(), "q")
		if int64(len(data)) > h.maxSize {
			if ferr == nil || !strings.Contains(ferr.Error(), "response larger than") {
				t.Fatalf("a %d-byte body over maxResponseSize %d: Fetch error %v", len(data), h.maxSize, ferr)
			}
			return
		}
		if (derr == nil) != (ferr == nil) || (derr != nil && derr.Error() != ferr.Error()) {
			t.Fatalf("Fetch error %v, mapping the body gives %v", ferr, derr)
		}
		if !reflect.DeepEqual(fetched, direct) {
			t.Fatalf("Fetch returned %+v, mapping the body gives %+v", fetched, direct)
		}
	})
}

func checkHTTPChunks(t *testing.T, h *HTTPAPI, data []byte, chunks []Chunk, err error) {
	t.Helper()
	if err != nil {
		if chunks != nil {
			t.Errorf("chunks %+v returned with error %v", chunks, err)
		}
		// Errors quote at most an excerpt of the body.
		if n := len(err.Error()); n > 300+6*len(h.respPath.String()) {
			t.Errorf("error of %d bytes: %.200q", n, err)
		}
		return
	}
	if !json.Valid(data) {
		t.Fatalf("body %q is not one JSON value, yet it mapped to %d chunks", data, len(chunks))
	}
	if len(chunks) > h.maxResults {
		t.Fatalf("%d chunks, maxResults is %d", len(chunks), h.maxResults)
	}
	last := -1
	for _, c := range chunks {
		if c.Index <= last {
			t.Errorf("chunk index %d after %d: results out of order", c.Index, last)
		}
		last = c.Index
		if c.Source != "kb" || strings.TrimSpace(c.Content) == "" || c.Title != strings.TrimSpace(c.Title) {
			t.Errorf("chunk %+v: want source kb, content that is not blank and a trimmed title", c)
		}
		if p := c.Path; p != "" && (path.Clean(p) != p || path.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "../")) {
			t.Errorf("chunk path %q is not clean and relative", p)
		}
	}
	if h.titlePath.isEmpty() {
		for _, c := range chunks {
			if c.Title != "" {
				t.Errorf("title %q without a titleField", c.Title)
			}
		}
	}
	if h.pathPath.isEmpty() {
		for _, c := range chunks {
			if c.Path != "" {
				t.Errorf("path %q without a pathField", c.Path)
			}
		}
	}
}

// FuzzParseCatalog reads arbitrary catalog files, as JSON and as YAML, and
// checks what holds for every file: it never panics; a catalog it accepts
// holds defaulted tools that keep every rule of api.md §10.1 (a second
// check finds nothing) with distinct ids; one it refuses is a *CatalogError
// whose every problem names the file and a line of it.
func FuzzParseCatalog(f *testing.F) {
	f.Add(goodCatalogYAML, false)
	f.Add(`[{"name": "web_search", "description": "Search the web.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}]`, true)
	f.Add("- name: a\n  description: A.\n  name: b\n---\n- [nested]\n", false)
	f.Add("- {name: x, description: X., inputSchema: {type: object, $defs: {a: {$ref: '#/$defs/a'}}}}\n", false)
	f.Fuzz(func(t *testing.T, data string, isJSON bool) {
		name := "catalog.yaml"
		if isJSON {
			name = "catalog.json"
		}
		tools, err := ParseCatalog(name, []byte(data))
		if err != nil {
			var ce *CatalogError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %T %v: want a *CatalogError with problems", err, err)
			}
			lines := strings.Count(NormalizeNewlines(data), "\n") + 1
			for _, p := range ce.Problems {
				if p.File != name || p.Line < 0 || p.Line > lines || p.Message == "" {
					t.Fatalf("problem %+v: want file %s, a line in 0..%d and a message", p, name, lines)
				}
			}
			return
		}
		for i := range tools {
			if tools[i].SideEffects == "" {
				t.Fatalf("tool %d not defaulted", i)
			}
		}
		if ps := CheckTools(tools, true, func(i int) string { return strconv.Itoa(i) }); len(ps) > 0 {
			t.Fatalf("accepted a catalog with problems: %+v", ps)
		}
	})
}
