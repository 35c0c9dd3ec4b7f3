package sources

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/located"
)

// MaxCatalogTools bounds the tools of one source (catalog files, an MCP
// listing); MaxInputSchemaBytes and MaxInputSchemaDepth a tool's input
// schema. The API package holds the rules of a catalog entry, for inline
// catalogs and files alike.
const (
	MaxCatalogTools     = v1alpha1.MaxCatalogTools
	MaxInputSchemaBytes = v1alpha1.MaxInputSchemaBytes
	MaxInputSchemaDepth = v1alpha1.MaxInputSchemaDepth
)

// ToolProblem is what is wrong with entry Index of a catalog; Field is
// relative to the entry ("name", "inputSchema", "examples[3]").
type ToolProblem struct {
	Index   int
	Field   string
	Message string
}

// CheckTools reports what the API schema cannot check of defaulted catalog
// entries: an input schema that is not a valid JSON Schema of an object, and
// duplicate ids (naming the earlier entry through where; Validate reports
// those of an inline catalog first, so a hand-built one fails here too). With
// all (entries read from files or listed by a server, which no Validate has
// seen), it also checks each entry's rules (v1alpha1.ValidateTool).
func CheckTools(tools []v1alpha1.Tool, all bool, where func(i int) string) []ToolProblem {
	var out []ToolProblem
	seen := make(map[string]int, len(tools))
	entry := field.NewPath("entry")
	// The input schemas checked, by hash: the operations of an OpenAPI
	// document often share one, and the check costs a microsecond a byte.
	checked := map[[sha256.Size]byte]error{}
	for i := range tools {
		t := &tools[i]
		add := func(field, msg string) { out = append(out, ToolProblem{Index: i, Field: field, Message: msg}) }
		if all {
			for _, e := range v1alpha1.ValidateTool(entry, t) {
				add(strings.TrimPrefix(e.Field, "entry."), e.ErrorBody())
			}
		}
		if t.InputSchema != nil {
			h := sha256.Sum256(t.InputSchema.Raw)
			err, done := checked[h]
			if !done {
				err = CheckInputSchema(t.InputSchema.Raw)
				checked[h] = err
			}
			if err != nil {
				at := inputSchemaPath.String()
				var se *schemaError
				if errors.As(err, &se) {
					at = se.field
				}
				add(at, err.Error())
			}
		}
		id := t.ID()
		if first, dup := seen[id]; dup {
			add("name", fmt.Sprintf("duplicate tool id %q: %s has it too", id, where(first)))
			continue
		}
		seen[id] = i
	}
	return out
}

// CheckInputSchema reports why raw is not a tool's input schema: at most
// MaxInputSchemaBytes of JSON nested at most MaxInputSchemaDepth levels, a
// JSON Schema that resolves (draft 2020-12, or the draft its $schema names;
// no remote references), of type object. Its time is linear in the size:
// the bounds are checked first, in one pass, and decodeSchema reads the
// schema in one more. A problem at a place inside is a *schemaError, whose
// field names the place.
func CheckInputSchema(raw []byte) error {
	if len(raw) > MaxInputSchemaBytes {
		return fmt.Errorf("%d bytes; at most %d", len(raw), MaxInputSchemaBytes)
	}
	if jsonTooDeep(raw, MaxInputSchemaDepth) {
		return fmt.Errorf("nested more than %d levels deep (objects and arrays); a nested part can move under $defs, referenced with $ref", MaxInputSchemaDepth)
	}
	s, err := decodeSchema(raw)
	var se *schemaError
	switch {
	case errors.As(err, &se):
		return err
	case err != nil:
		return fmt.Errorf("not a JSON Schema: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if s.Type != "object" && !slices.Equal(s.Types, []string{"object"}) {
		got := s.Type
		if got == "" {
			got = strings.Join(s.Types, ", ")
		}
		if got == "" {
			return errors.New(`type must be "object" (the arguments of a tool are an object)`)
		}
		return fmt.Errorf(`type must be "object", not %q (the arguments of a tool are an object)`, got)
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("invalid JSON Schema: %s", err)
	}
	return nil
}

// CatalogProblem is a problem of a catalog file, at a line (0 when the file
// as a whole is meant).
type CatalogProblem struct {
	File    string
	Line    int
	Field   string
	Message string
}

func (p CatalogProblem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// CatalogError lists the problems of a catalog, in file and line order.
type CatalogError struct{ Problems []CatalogProblem }

// maxShownProblems bounds the problems an error message lists; the rest are counted.
const maxShownProblems = 5

func (e *CatalogError) Error() string {
	var parts []string
	for i, p := range e.Problems {
		if i == maxShownProblems {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-i))
			break
		}
		parts = append(parts, p.String())
	}
	return "invalid tool catalog: " + strings.Join(parts, "; ")
}

// catalogEntry is a tool read from a file, with where it was.
type catalogEntry struct {
	tool  v1alpha1.Tool
	file  string
	line  int
	index int // position in its document's list
	// at is the place of an OpenAPI operation's tool (paths[/pets].get);
	// locate gives the field path and line of a field of its tool.
	at     string
	locate func(field string) (string, int)
	// cut: referenced schemas were left out of the input schema to fit it.
	cut bool
}

func (e *catalogEntry) where() string {
	if e.at != "" {
		return fmt.Sprintf("%s:%d (%s)", e.file, e.line, e.at)
	}
	return fmt.Sprintf("%s:%d (entry %d)", e.file, e.line, e.index)
}

// place is the field path and line of a field of the entry's tool.
func (e *catalogEntry) place(field string) (string, int) {
	if e.locate != nil {
		return e.locate(field)
	}
	return fmt.Sprintf("[%d].%s", e.index, field), e.line
}

// ParseCatalog reads one catalog file: a JSON list of tools (or several
// lists one after another), or YAML documents each holding a list. Decoding
// is strict: an unknown or duplicate field, a value of the wrong type, or an
// entry breaking a rule of api.md §10.1 is a problem at its line. Tools are
// defaulted; their ids are not checked for duplicates (see ParseCatalogs).
func ParseCatalog(name string, data []byte) ([]v1alpha1.Tool, error) {
	entries, problems := parseCatalogFile(name, data)
	problems = append(problems, checkEntries(entries, true)...)
	if len(problems) > 0 {
		return nil, &CatalogError{Problems: problems}
	}
	return entryTools(entries), nil
}

// ParseCatalogs reads the files of a catalog (path and content) and returns
// their tools sorted by id; a problem in any file, or a duplicate id, fails
// them all.
func ParseCatalogs(files []Chunk) ([]v1alpha1.Tool, error) {
	tools, _, err := parseCatalogs(files, nil)
	return tools, err
}

// ParseOpenAPI reads OpenAPI documents (path and content) into a catalog as
// ParseCatalogs reads catalog files: every operation o selects is a tool.
func ParseOpenAPI(files []Chunk, o *v1alpha1.OpenAPITools) ([]v1alpha1.Tool, error) {
	if o == nil {
		o = &v1alpha1.OpenAPITools{}
	}
	tools, _, err := parseCatalogs(files, o)
	return tools, err
}

// parseCatalogs reads catalog files, or OpenAPI documents when o is set.
// cut lists the operations whose input schemas were cut to fit.
func parseCatalogs(files []Chunk, o *v1alpha1.OpenAPITools) (tools []v1alpha1.Tool, cut []string, err error) {
	var entries []catalogEntry
	var problems []CatalogProblem
	for _, f := range files {
		var e []catalogEntry
		var p []CatalogProblem
		if o != nil {
			e, p = parseOpenAPIFile(f.Path, []byte(f.Content), o)
		} else {
			e, p = parseCatalogFile(f.Path, []byte(f.Content))
		}
		entries = append(entries, e...)
		problems = append(problems, p...)
	}
	if len(entries) > MaxCatalogTools {
		problems = append(problems, CatalogProblem{File: entries[MaxCatalogTools].file, Line: entries[MaxCatalogTools].line,
			Message: fmt.Sprintf("more than %d tools in the catalog", MaxCatalogTools)})
	}
	problems = append(problems, checkEntries(entries, true)...)
	if len(problems) > 0 {
		slices.SortStableFunc(problems, func(a, b CatalogProblem) int {
			return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
		})
		return nil, nil, &CatalogError{Problems: problems}
	}
	for i := range entries {
		if entries[i].cut {
			cut = append(cut, entries[i].where())
		}
	}
	tools = entryTools(entries)
	SortTools(tools)
	return tools, cut, nil
}

// SortTools sorts a catalog by id, the order LoadTools returns.
func SortTools(tools []v1alpha1.Tool) {
	slices.SortFunc(tools, func(a, b v1alpha1.Tool) int { return strings.Compare(a.ID(), b.ID()) })
}

func entryTools(entries []catalogEntry) []v1alpha1.Tool {
	tools := make([]v1alpha1.Tool, len(entries))
	for i := range entries {
		tools[i] = entries[i].tool
	}
	return tools
}

func checkEntries(entries []catalogEntry, all bool) []CatalogProblem {
	tools := entryTools(entries)
	var out []CatalogProblem
	for _, p := range CheckTools(tools, all, func(i int) string { return entries[i].where() }) {
		e := &entries[p.Index]
		field, line := e.place(p.Field)
		out = append(out, CatalogProblem{File: e.file, Line: line, Field: field, Message: p.Message})
	}
	return out
}

// parseCatalogFile decodes the documents of one file.
func parseCatalogFile(name string, data []byte) ([]catalogEntry, []CatalogProblem) {
	data = []byte(NormalizeNewlines(string(data)))
	var entries []catalogEntry
	var problems []CatalogProblem
	if strings.EqualFold(filepath.Ext(name), ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if err == io.EOF {
				break
			}
			if err != nil {
				line, col := located.LineCol(data, located.JSONErrorOffset(err, dec))
				problems = append(problems, CatalogProblem{File: name, Line: line,
					Message: fmt.Sprintf("invalid JSON at column %d: %s", col, strings.TrimPrefix(err.Error(), "json: "))})
				break
			}
			line, _ := located.LineCol(data, int(dec.InputOffset())-len(raw))
			// A JSON text is YAML too: its node tree gives every entry's line.
			e, p := decodeCatalogDoc(name, raw, raw, line-1, true)
			entries, problems = append(entries, e...), append(problems, p...)
		}
		return entries, problems
	}
	for _, d := range located.SplitYAML(data) {
		if located.FirstContentLine(d.Text) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(d.Text)
		if err != nil {
			for _, e := range located.YAMLErrors(err, d.Text, d.FirstLine-1) {
				problems = append(problems, CatalogProblem{File: name, Line: e.Line, Message: "invalid YAML: " + e.Message})
			}
			continue
		}
		e, p := decodeCatalogDoc(name, d.Text, j, d.FirstLine-1, false)
		entries, problems = append(entries, e...), append(problems, p...)
	}
	return entries, problems
}

var toolType = reflect.TypeFor[v1alpha1.Tool]()

// decodeCatalogDoc decodes one document (text, as JSON j) whose first line
// is absolute line lineOffset+1.
func decodeCatalogDoc(file string, text, j []byte, lineOffset int, isJSON bool) ([]catalogEntry, []CatalogProblem) {
	t := bytes.TrimSpace(j)
	if bytes.Equal(t, []byte("null")) {
		return nil, nil // "~" or "null" only
	}
	root := located.ParseNode(text, lineOffset)
	docLine := lineOffset + 1 + max(located.FirstContentLine(text)-1, 0)
	var problems []CatalogProblem
	at := func(path string, last bool) int {
		if l := located.LineOf(root, path, last); l > 0 {
			return l
		}
		return docLine
	}
	if len(t) == 0 || t[0] != '[' {
		return nil, []CatalogProblem{{File: file, Line: docLine, Message: "a tool catalog must be a list of tools, not " + located.JSONValueKind(t)}}
	}
	if !isJSON && root != nil {
		for _, dup := range located.DuplicateKeys(root, "") {
			problems = append(problems, CatalogProblem{File: file, Line: dup.Line, Field: dup.Path, Message: "duplicate field"})
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(j, &items); err != nil {
		return nil, append(problems, CatalogProblem{File: file, Line: docLine, Message: "a tool catalog must be a list of tools"})
	}
	var entries []catalogEntry
	for i, item := range items {
		prefix := fmt.Sprintf("[%d]", i)
		var tool v1alpha1.Tool
		if it := bytes.TrimSpace(item); len(it) == 0 || it[0] != '{' {
			problems = append(problems, CatalogProblem{File: file, Line: at(prefix, false), Field: prefix, Message: "a tool must be an object, not " + located.JSONValueKind(it)})
			continue
		}
		strict, err := sigsjson.UnmarshalStrict(item, &tool)
		if err != nil {
			field, msg := located.ExplainDecodeError(err, item, toolType)
			path := located.JoinIndex(prefix, field)
			problems = append(problems, CatalogProblem{File: file, Line: at(path, false), Field: path, Message: msg})
			continue
		}
		bad := false
		for _, e := range strict {
			field, what := located.StrictPath(e), located.StrictKind(e)
			if what == "duplicate field" && !isJSON {
				continue // reported from the node tree, at the duplicate's line
			}
			if what == "unknown field" {
				if s := located.SuggestField(toolType, field); s != "" {
					what += fmt.Sprintf(" (did you mean %q?)", s)
				}
			}
			path := located.JoinIndex(prefix, field)
			problems = append(problems, CatalogProblem{File: file, Line: at(path, what == "duplicate field"), Field: path, Message: what})
			bad = true
		}
		if bad {
			continue
		}
		tool.Default()
		entries = append(entries, catalogEntry{tool: tool, file: file, line: at(prefix, false), index: i})
	}
	return entries, problems
}
