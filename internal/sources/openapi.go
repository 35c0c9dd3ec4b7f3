package sources

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/getkin/kin-openapi/openapi3"
	yamlv3 "go.yaml.in/yaml/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// OpenAPI documents as tool catalogs (api.md §10.1): every operation of an
// OpenAPI 3.0 or 3.1 document is a tool. kin-openapi reads and checks the
// document; the tools are made here, their input schemas from the document's
// own JSON (openapi_schema.go), so that they are JSON Schema draft 2020-12.

// MaxOpenAPIDocumentBytes bounds one OpenAPI document, read from a file or
// fetched.
const MaxOpenAPIDocumentBytes = 10 << 20

// MaxOpenAPIDepth bounds how deeply a document nests objects and arrays:
// twice an input schema's bound, so every schema that could fit one is
// read. It is checked before kin-openapi reads the document, which reads a
// schema again at each level of it: 1,000 levels took seconds, 5,000 minutes.
const MaxOpenAPIDepth = 2 * MaxInputSchemaDepth

// openAPIExtension is the operation's x-contextrouter object: what the
// document's author says of the operation's tool beyond OpenAPI's words.
type openAPIExtension struct {
	SideEffects  v1alpha1.SideEffects `json:"sideEffects,omitempty"`
	SafetyTags   []string             `json:"safetyTags,omitempty"`
	Examples     []string             `json:"examples,omitempty"`
	AntiPatterns []string             `json:"antiPatterns,omitempty"`
	CostHint     string               `json:"costHint,omitempty"`
	LatencyHint  string               `json:"latencyHint,omitempty"`
}

const openAPIExtensionKey = "x-contextrouter"

var extensionType = reflect.TypeFor[openAPIExtension]()

// extensionFields are the tool fields x-contextrouter sets (its JSON names):
// a problem in one of them is at the extension, not at the operation.
var extensionFields = []string{"sideEffects", "safetyTags", "examples", "antiPatterns", "costHint", "latencyHint"}

// openAPIMethods are the operations of a path item, in the order tools of
// one path are made.
var openAPIMethods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

// openAPIDoc is one document being read: its text, its node tree (for
// lines) and its JSON value (for references and schemas).
type openAPIDoc struct {
	file string
	data []byte
	root *yamlv3.Node
	val  any
	v30  bool
	// nested is the document's text weighted by depth, as far as it was
	// weighed (MaxOpenAPINestedBytes).
	nested int
	// expanded is the work of making the input schemas so far
	// (MaxOpenAPIExpandedBytes).
	expanded int
	// defsCache are the converted $defs of input schemas, tooLargeInline
	// the references too large to copy in (openapi_schema.go).
	defsCache      map[defsKey]*cachedDefs
	tooLargeInline map[string]bool
}

// line is the line of a field path of the document, else of the document.
func (d *openAPIDoc) line(path string) int {
	if l := located.LineOf(d.root, path, false); l > 0 {
		return l
	}
	return 1
}

// parseOpenAPIFile reads one OpenAPI document into catalog entries. A
// document with a problem yields none: its problems, each at its line.
func parseOpenAPIFile(name string, data []byte, o *v1alpha1.OpenAPITools) ([]catalogEntry, []CatalogProblem) {
	if len(data) > MaxOpenAPIDocumentBytes {
		return nil, []CatalogProblem{{File: name, Message: fmt.Sprintf("%d bytes; an OpenAPI document is at most %d", len(data), MaxOpenAPIDocumentBytes)}}
	}
	d, problems := decodeOpenAPIDoc(name, data)
	if len(problems) > 0 {
		return nil, problems
	}
	if problems = d.checkVersion(); len(problems) > 0 {
		return nil, problems
	}
	if problems = d.checkRefs(); len(problems) > 0 {
		return nil, problems
	}
	if problems = d.checkReach(); len(problems) > 0 {
		return nil, problems
	}
	doc, err := d.load()
	if err != nil {
		return nil, []CatalogProblem{{File: name, Message: "invalid OpenAPI document: " + err.Error()}}
	}
	return d.operations(doc, o)
}

// decodeOpenAPIDoc parses the text: JSON for a .json file, else YAML (one
// document, read as YAML 1.2 reads it, as OpenAPI asks: a key y or on is a
// string). Syntax errors and duplicate keys are problems at their lines.
func decodeOpenAPIDoc(name string, data []byte) (*openAPIDoc, []CatalogProblem) {
	data = []byte(NormalizeNewlines(string(data)))
	d := &openAPIDoc{file: name, data: data}
	if strings.EqualFold(filepath.Ext(name), ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // numbers reach the input schemas as written
		err := dec.Decode(&d.val)
		if err == nil {
			if _, tail := dec.Token(); tail == nil {
				err = errors.New("more than one JSON value")
			}
		}
		if err != nil {
			line, col := located.LineCol(data, located.JSONErrorOffset(err, dec))
			return nil, []CatalogProblem{{File: name, Line: line, Message: fmt.Sprintf("invalid JSON at column %d: %s", col, strings.TrimPrefix(err.Error(), "json: "))}}
		}
		d.root = located.ParseNode(data, 0)
	} else {
		var docs []located.Doc
		for _, doc := range located.SplitYAML(data) {
			if located.FirstContentLine(doc.Text) > 0 {
				docs = append(docs, doc)
			}
		}
		if len(docs) > 1 {
			return nil, []CatalogProblem{{File: name, Line: docs[1].FirstLine, Message: "an OpenAPI document is one YAML document, not several"}}
		}
		if d.root = located.ParseNode(data, 0); d.root == nil {
			return nil, yamlProblems(name, data)
		}
		budget := maxYAMLValues
		v, err := yamlValue(d.root, &budget)
		if err != nil {
			return nil, []CatalogProblem{{File: name, Message: "invalid YAML: " + err.Error()}}
		}
		d.val = v
	}
	// Before anything walks the tree by path, which costs the square of
	// the depth.
	if p := d.checkDepth(); len(p) > 0 {
		return nil, p
	}
	var out []CatalogProblem
	if d.root != nil {
		for _, dup := range located.DuplicateKeys(d.root, "") {
			out = append(out, CatalogProblem{File: name, Line: dup.Line, Field: dup.Path, Message: "duplicate field"})
		}
	}
	return d, out
}

// yamlProblems are the syntax errors of a YAML text that does not parse,
// at their lines.
func yamlProblems(name string, data []byte) []CatalogProblem {
	_, err := yaml.YAMLToJSON(data)
	if err == nil {
		return []CatalogProblem{{File: name, Line: 1, Message: "invalid YAML"}}
	}
	var out []CatalogProblem
	for _, e := range located.YAMLErrors(err, data, 0) {
		out = append(out, CatalogProblem{File: name, Line: e.Line, Message: "invalid YAML: " + e.Message})
	}
	return out
}

// maxYAMLValues bounds the values a YAML document may expand to: aliases
// can repeat a part of the document many times over (a "billion laughs").
const maxYAMLValues = MaxOpenAPIDocumentBytes / 2

// yamlValue is the JSON value of a YAML node: mappings with string keys
// (a key 200 is "200"), merge keys applied, aliases expanded within budget,
// numbers as written.
func yamlValue(n *yamlv3.Node, budget *int) (any, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("aliases expand the document past %d values", maxYAMLValues)
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], budget)
	case yamlv3.AliasNode:
		if n.Alias == nil {
			return nil, nil
		}
		return yamlValue(n.Alias, budget)
	case yamlv3.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(c, budget)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yamlv3.MappingNode:
		return yamlMapping(n, budget)
	}
	return yamlScalar(n), nil
}

// yamlMapping is a mapping's value: its own keys, then what its merge keys
// (<<) bring that it does not set.
func yamlMapping(n *yamlv3.Node, budget *int) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	var merges []*yamlv3.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		val, err := yamlValue(v, budget)
		if err != nil {
			return nil, err
		}
		out[k.Value] = val
	}
	for _, m := range merges {
		val, err := yamlValue(m, budget)
		if err != nil {
			return nil, err
		}
		list, ok := val.([]any)
		if !ok {
			list = []any{val}
		}
		for _, item := range list {
			mm, _ := item.(map[string]any)
			for k, v := range mm {
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	return out, nil
}

// yamlScalar is a scalar's value by its resolved tag: null, a boolean, a
// number (json.Number, as written when JSON can write it so), else the text.
func yamlScalar(n *yamlv3.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int", "!!float":
		if json.Valid([]byte(n.Value)) {
			return json.Number(n.Value)
		}
		var f float64
		if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return n.Value
}

// maxDepthPathSteps: the steps of the path to a value nested too deep that
// an error shows; the rest are "…".
const maxDepthPathSteps = 12

// MaxOpenAPINestedBytes bounds a document's text weighted by depth: each
// scalar's and key's bytes (and 2 for its quotes or separator) counted once
// per object or array around it, and nestedBase times more. kin-openapi
// decodes a value again at each level it is nested, so its time is the
// text times its depth, and reading the text costs time of its own: 2 MiB
// of schemas nested 62 levels (weighing 116 Mi) took 10 s of CPU, 8 MiB
// nested 8 levels (74 Mi) 7.8 s. At the bound a document costs about 4 s;
// the Kubernetes core API's 1.6 MB weigh 13 Mi.
const MaxOpenAPINestedBytes = 40 << 20

// nestedBase is what a byte weighs besides its depth: the cost of reading
// text at all, about four levels' worth.
const nestedBase = 4

// checkDepth refuses a document nested deeper than MaxOpenAPIDepth, or
// weighing more than MaxOpenAPINestedBytes by depth, naming the first value
// past the bound in document order (aliases followed, as they are read).
func (d *openAPIDoc) checkDepth() []CatalogProblem {
	if d.root == nil {
		return nil
	}
	var keys []string // the path to the node being walked
	// walk returns the line of the first value past a bound: where it
	// stands, or where the outermost alias to it does.
	var walk func(n *yamlv3.Node, depth, aliasLine int) int
	weigh := func(n *yamlv3.Node, depth, aliasLine int) int {
		if d.nested += (depth + nestedBase) * (len(n.Value) + 2); d.nested > MaxOpenAPINestedBytes {
			return cmp.Or(aliasLine, n.Line)
		}
		return 0
	}
	walk = func(n *yamlv3.Node, depth, aliasLine int) int {
		if n.Kind == yamlv3.AliasNode && n.Alias != nil {
			if aliasLine == 0 {
				aliasLine = n.Line
			}
			n = n.Alias
		}
		if n.Kind != yamlv3.MappingNode && n.Kind != yamlv3.SequenceNode {
			return weigh(n, depth, aliasLine)
		}
		if depth++; depth > MaxOpenAPIDepth {
			return cmp.Or(aliasLine, n.Line)
		}
		for i, c := range n.Content {
			if n.Kind == yamlv3.MappingNode {
				if i%2 == 0 {
					if line := weigh(c, depth, aliasLine); line > 0 {
						return line
					}
					continue
				}
				keys = append(keys, n.Content[i-1].Value)
			} else {
				keys = append(keys, fmt.Sprintf("[%d]", i))
			}
			if line := walk(c, depth, aliasLine); line > 0 {
				return line
			}
			keys = keys[:len(keys)-1]
		}
		return 0
	}
	line := walk(d.root, 0, 0)
	if line == 0 {
		return nil
	}
	path, shown := "", keys
	if len(shown) > maxDepthPathSteps {
		shown = shown[:maxDepthPathSteps]
	}
	for _, k := range shown {
		if strings.HasPrefix(k, "[") {
			path += k
		} else {
			path = openAPIPath(path, k)
		}
	}
	if len(shown) < len(keys) {
		path += "…"
	}
	msg := fmt.Sprintf("nested more than %d levels deep (objects and arrays); an input schema may nest %d", MaxOpenAPIDepth, MaxInputSchemaDepth)
	if d.nested > MaxOpenAPINestedBytes {
		msg = fmt.Sprintf("the document's text weighted by depth passes %d bytes here (each byte counted once per object or array around it, and %d times more); at most %d: nest less, or split the document",
			MaxOpenAPINestedBytes, nestedBase, MaxOpenAPINestedBytes)
	}
	return []CatalogProblem{{File: d.file, Line: line, Field: path, Message: msg}}
}

// MaxOpenAPIReachedValues bounds the values a document's operations and
// components reach, summed over them: each one's own and those of the
// components it refers to, each reference followed once per operation or
// component (an operation's own include its path's parameters).
// kin-openapi resolves and checks what each of them reaches anew: 10,000
// operations referring to one schema of 2,000 properties took minutes, a
// chain of 8,000 schemas each referring to the next 36 s of CPU. A million
// values cost kin-openapi 0.2–0.5 s; the Kubernetes core API reaches 200,000.
const MaxOpenAPIReachedValues = 4_000_000

// checkReach refuses a document whose operations and components reach more
// than MaxOpenAPIReachedValues values, naming the one that passes it. It
// runs before kin-openapi reads the document; its own cost is bounded by
// the same count.
func (d *openAPIDoc) checkReach() []CatalogProblem {
	if _, at := d.reached(MaxOpenAPIReachedValues); at != "" {
		return []CatalogProblem{{File: d.file, Line: d.line(at), Field: at, Message: fmt.Sprintf(
			"the operations and components up to here reach more than %d values, each one's own and those of the components it refers to; at most %d per document",
			MaxOpenAPIReachedValues, MaxOpenAPIReachedValues)}}
	}
	return nil
}

// reached counts the values the operations and components reach, up to
// just past limit, and the field path of the one that passed it ("" if
// none did).
func (d *openAPIDoc) reached(limit int) (total int, at string) {
	var seen map[string]bool
	var walk func(v any)
	walk = func(v any) {
		if total > limit {
			return
		}
		total++
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && !seen[ref] {
				seen[ref] = true
				if target, ok := resolvePointer(d.val, ref); ok {
					walk(target)
				}
			}
			for k, e := range x {
				if k != "$ref" {
					walk(e)
				}
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	// Each operation of the paths and webhooks, then each component, in
	// the order kin-openapi checks them, anew.
	for _, field := range []string{"paths", "webhooks"} {
		items, _ := lookup(d.val, field).(map[string]any)
		for _, path := range slices.Sorted(maps.Keys(items)) {
			item, _ := d.follow(items[path]).(map[string]any)
			for _, method := range openAPIMethods {
				op, ok := item[strings.ToLower(method)]
				if !ok {
					continue
				}
				seen = map[string]bool{}
				walk(op)
				walk(item["parameters"])
				if total > limit {
					return total, openAPIPath(openAPIPath(field, path), strings.ToLower(method))
				}
			}
		}
	}
	components, _ := lookup(d.val, "components").(map[string]any)
	for _, kind := range slices.Sorted(maps.Keys(components)) {
		named, _ := components[kind].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(named)) {
			seen = map[string]bool{}
			walk(named[name])
			if total > limit {
				return total, openAPIPath(openAPIPath("components", kind), name)
			}
		}
	}
	return total, ""
}

// checkVersion refuses what is not an OpenAPI 3.0 or 3.1 document, saying
// what it is.
func (d *openAPIDoc) checkVersion() []CatalogProblem {
	obj, ok := d.val.(map[string]any)
	if !ok {
		return []CatalogProblem{{File: d.file, Line: 1, Message: "not an OpenAPI document: an object is, not " + kindOf(d.val)}}
	}
	if _, ok := obj["swagger"]; ok {
		return []CatalogProblem{{File: d.file, Line: d.line("swagger"), Message: "Swagger 2.0 is not supported; convert the document to OpenAPI 3.0 or 3.1"}}
	}
	raw, ok := obj["openapi"]
	if !ok {
		return []CatalogProblem{{File: d.file, Line: 1, Message: "not an OpenAPI document: the openapi field is missing"}}
	}
	v, _ := raw.(string)
	switch {
	case strings.HasPrefix(v, "3.0.") || v == "3.0":
		d.v30 = true
	case strings.HasPrefix(v, "3.1.") || v == "3.1":
	default:
		if v == "" {
			v = fmt.Sprint(raw)
		}
		return []CatalogProblem{{File: d.file, Line: d.line("openapi"), Field: "openapi",
			Message: fmt.Sprintf("OpenAPI %s is not supported; 3.0.x and 3.1.x are", v)}}
	}
	return nil
}

// checkRefs finds, at their lines, the references the tools cannot follow:
// to another document (never fetched, as an input schema's) or to a place
// the document does not have. Values that are data (examples, defaults,
// enums, extensions) are not read for references.
func (d *openAPIDoc) checkRefs() []CatalogProblem {
	var out []CatalogProblem
	// names: the keys of the mapping n are names (of properties, schemas,
	// media types), not keywords.
	var walk func(n *yamlv3.Node, path string, names bool)
	walk = func(n *yamlv3.Node, path string, names bool) {
		if n == nil || len(out) > maxShownProblems {
			return
		}
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i].Value, n.Content[i+1]
				p := openAPIPath(path, k)
				switch {
				case names:
					walk(v, p, false)
				case k == "$ref" && v.Kind == yamlv3.ScalarNode:
					if msg := d.refProblem(v.Value); msg != "" {
						out = append(out, CatalogProblem{File: d.file, Line: n.Content[i].Line, Field: p, Message: msg})
					}
				case isDataKey(k, v):
				default:
					walk(v, p, nameMaps[k] && v.Kind == yamlv3.MappingNode)
				}
			}
		case yamlv3.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), false)
			}
		}
	}
	walk(d.root, "", false)
	return out
}

// nameMaps are the keys whose value maps names to objects: schema
// properties, components, media types and the like.
var nameMaps = map[string]bool{
	"properties": true, "patternProperties": true, "dependentSchemas": true, "$defs": true, "definitions": true,
	"paths": true, "webhooks": true, "schemas": true, "parameters": true, "requestBodies": true, "responses": true,
	"headers": true, "examples": true, "links": true, "callbacks": true, "securitySchemes": true, "pathItems": true,
	"content": true, "encoding": true,
}

// isDataKey reports whether the value of key k is data rather than part of
// the document's structure: an example (a list of them under examples is
// data; a map of Example Objects is not), a default, an enum, a const, an
// extension.
func isDataKey(k string, v *yamlv3.Node) bool {
	switch k {
	case "example", "value", "default", "enum", "const":
		return true
	case "examples":
		return v.Kind == yamlv3.SequenceNode
	}
	return strings.HasPrefix(k, "x-")
}

// openAPIPath appends key k to a field path, in brackets when it holds
// characters a path cannot show otherwise ("paths[/pets/{id}]").
func openAPIPath(path, k string) string {
	if strings.ContainsAny(k, "./[]{} ") || k == "" {
		return path + "[" + k + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// refProblem says why a reference cannot be followed, or "".
func (d *openAPIDoc) refProblem(ref string) string {
	if !strings.HasPrefix(ref, "#") {
		return fmt.Sprintf("%q refers to another document; only references inside the document (#/…) are followed", ref)
	}
	if _, ok := resolvePointer(d.val, ref); !ok {
		return fmt.Sprintf("%q does not resolve", ref)
	}
	return ""
}

// load reads and checks the document with kin-openapi, from the value
// read here (so that both read the same YAML alike): references resolve
// inside the document only, and the document must be valid by the
// specification — but not its examples, defaults, patterns and formats,
// which tools do not use and third-party documents often get wrong.
func (d *openAPIDoc) load() (*openapi3.T, error) {
	j, err := json.Marshal(d.val)
	if err != nil {
		return nil, err
	}
	doc := &openapi3.T{}
	if err := json.Unmarshal(j, doc); err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	if err := loader.ResolveRefsIn(doc, nil); err != nil {
		return nil, err
	}
	err = doc.Validate(context.Background(),
		openapi3.DisableExamplesValidation(),
		openapi3.DisableSchemaDefaultsValidation(),
		openapi3.DisableSchemaPatternValidation(),
		openapi3.DisableSchemaFormatValidation(),
	)
	return doc, err
}

// operations makes the tools of the document's operations, in path and
// method order.
func (d *openAPIDoc) operations(doc *openapi3.T, o *v1alpha1.OpenAPITools) ([]catalogEntry, []CatalogProblem) {
	if o == nil {
		o = &v1alpha1.OpenAPITools{}
	}
	var entries []catalogEntry
	var problems []CatalogProblem
	if doc.Paths == nil {
		return nil, nil
	}
	paths := doc.Paths.Map()
	lines := d.operationLines()
	schemas := 0 // the bytes of the input schemas made
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item := paths[path]
		for _, method := range openAPIMethods {
			op := item.GetOperation(method)
			if op == nil || (op.Deprecated && !o.IncludeDeprecated) {
				continue
			}
			at := openAPIPath(openAPIPath("paths", path), strings.ToLower(method))
			line, ok := lines[at]
			if !ok {
				line = d.line(at)
			}
			e, p := d.operation(&openAPIOperation{method: method, path: path, at: at, line: line, item: item, op: op}, o)
			problems = append(problems, p...)
			if e != nil {
				entries = append(entries, *e)
				if schemas += len(e.tool.InputSchema.Raw); schemas > MaxOpenAPIToolSchemaBytes {
					return nil, append(problems, CatalogProblem{File: d.file, Line: line, Field: at, Message: fmt.Sprintf(
						"the input schemas of the operations up to here come to more than %d bytes; at most %d per document (leave operations out with spec.tools.openAPI.exclude)",
						MaxOpenAPIToolSchemaBytes, MaxOpenAPIToolSchemaBytes)})
				}
			}
			if d.expanded > MaxOpenAPIExpandedBytes {
				return nil, append(problems, CatalogProblem{File: d.file, Line: line, Field: at, Message: fmt.Sprintf(
					"making the input schemas of the operations up to here converts and writes more than %d bytes of schema text, references followed; at most %d per document (leave operations out with spec.tools.openAPI.exclude)",
					MaxOpenAPIExpandedBytes, MaxOpenAPIExpandedBytes)})
			}
		}
	}
	return entries, problems
}

// operationLines are the lines of the operations (paths[/pets].get), read
// in one pass: a lookup per operation would read the paths once each.
func (d *openAPIDoc) operationLines() map[string]int {
	out := map[string]int{}
	paths := located.Lookup(d.root, "paths")
	if paths == nil || paths.Kind != yamlv3.MappingNode {
		return out
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		at, item := openAPIPath("paths", paths.Content[i].Value), paths.Content[i+1]
		if item.Kind != yamlv3.MappingNode {
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			out[openAPIPath(at, item.Content[j].Value)] = item.Content[j].Line
		}
	}
	return out
}

// openAPIOperation is one operation with where it is.
type openAPIOperation struct {
	method, path string
	at           string // its field path: paths[/pets].get
	line         int
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

// operation makes the tool of one operation, or nil when the selectors
// leave it out.
func (d *openAPIDoc) operation(x *openAPIOperation, o *v1alpha1.OpenAPITools) (*catalogEntry, []CatalogProblem) {
	op := x.op
	tool := v1alpha1.Tool{
		Name:        openAPIToolName(op.OperationID, x.method, x.path),
		Namespace:   o.Namespace,
		Description: openAPIDescription(op, x.method, x.path),
		Tags:        openAPITags(op),
		SideEffects: methodSideEffects(x.method),
	}
	if (o.Include != nil && !selects(o.Include, op, tool.Name)) || (o.Exclude != nil && selects(o.Exclude, op, tool.Name)) {
		return nil, nil
	}
	line := x.line
	e := &catalogEntry{file: d.file, line: line, at: x.at}
	e.locate = func(f string) (string, int) {
		if slices.Contains(extensionFields, strings.SplitN(strings.SplitN(f, "[", 2)[0], ".", 2)[0]) {
			p := x.at + "." + openAPIExtensionKey + "." + f
			return p, d.line(p)
		}
		return x.at + "." + f, line
	}
	if p := d.applyExtension(&tool, x); len(p) > 0 {
		return nil, p
	}
	for i := range o.Overrides {
		ov := &o.Overrides[i]
		if !selects(&ov.OperationSelector, op, tool.Name) {
			continue
		}
		if ov.SideEffects != "" {
			tool.SideEffects = ov.SideEffects
		}
		for _, t := range ov.SafetyTags {
			if !slices.Contains(tool.SafetyTags, t) {
				tool.SafetyTags = append(tool.SafetyTags, t)
			}
		}
	}
	schema, cut, err := d.inputSchema(x)
	if err != nil {
		return nil, []CatalogProblem{{File: d.file, Line: line, Field: x.at, Message: err.Error()}}
	}
	e.cut = cut
	tool.InputSchema = &apiextensionsv1.JSON{Raw: schema}
	tool.Default()
	e.tool = tool
	return e, nil
}

// applyExtension sets what the operation's x-contextrouter says, decoded
// strictly (an unknown field is a problem at its line).
func (d *openAPIDoc) applyExtension(tool *v1alpha1.Tool, x *openAPIOperation) []CatalogProblem {
	raw, ok := x.op.Extensions[openAPIExtensionKey]
	if !ok {
		return nil
	}
	at := x.at + "." + openAPIExtensionKey
	j, err := json.Marshal(raw)
	if err != nil || !bytes.HasPrefix(bytes.TrimSpace(j), []byte("{")) {
		return []CatalogProblem{{File: d.file, Line: d.line(at), Field: at, Message: "must be an object, not " + located.JSONValueKind(j)}}
	}
	var ext openAPIExtension
	strict, err := sigsjson.UnmarshalStrict(j, &ext)
	if err != nil {
		f, msg := located.ExplainDecodeError(err, j, extensionType)
		p := at + "." + f
		return []CatalogProblem{{File: d.file, Line: d.line(p), Field: p, Message: msg}}
	}
	var out []CatalogProblem
	for _, e := range strict {
		f, what := located.StrictPath(e), located.StrictKind(e)
		if what == "unknown field" {
			if s := located.SuggestField(extensionType, f); s != "" {
				what += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		p := at + "." + f
		out = append(out, CatalogProblem{File: d.file, Line: d.line(p), Field: p, Message: what})
	}
	if len(out) > 0 {
		return out
	}
	if ext.SideEffects != "" {
		tool.SideEffects = ext.SideEffects
	}
	tool.SafetyTags = ext.SafetyTags
	tool.Examples, tool.AntiPatterns = ext.Examples, ext.AntiPatterns
	tool.CostHint, tool.LatencyHint = ext.CostHint, ext.LatencyHint
	return nil
}

// openAPIToolName is the tool name of an operation: its operationId with
// the characters a tool name cannot have made '_' and empty dotted words
// dropped, or "<method>_<path>" without one (GET /pet/{petId} is
// get_pet_petId); at most 128 characters.
func openAPIToolName(opID, method, path string) string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			if r < utf8.RuneSelf && (r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return r
			}
			return '_'
		}, s)
		words := slices.DeleteFunc(strings.Split(s, "."), func(w string) bool { return w == "" })
		s = strings.Join(words, ".")
		if len(s) > maxToolName {
			s = strings.TrimRight(s[:maxToolName], ".")
		}
		return s
	}
	if name := clean(opID); strings.IndexFunc(name, isAlnum) >= 0 {
		return name
	}
	words := []string{strings.ToLower(method)}
	for _, seg := range strings.Split(path, "/") {
		if seg = strings.Trim(seg, "{}"); seg != "" {
			words = append(words, seg)
		}
	}
	return clean(strings.Join(words, "_"))
}

// maxToolName is api.md §10.1's limit, to which a name is cut (the rest
// of the rules: v1alpha1.ValidateTool).
const maxToolName = 128

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// openAPIDescription is the summary, the description and "METHOD /path",
// in paragraphs, cut at the catalog's limit.
func openAPIDescription(op *openapi3.Operation, method, path string) string {
	var parts []string
	summary, desc := strings.TrimSpace(op.Summary), strings.TrimSpace(op.Description)
	if summary != "" {
		parts = append(parts, summary)
	}
	if desc != "" && desc != summary {
		parts = append(parts, desc)
	}
	parts = append(parts, method+" "+path)
	return textutil.CutRunes(strings.Join(parts, "\n\n"), maxToolDescription, "")
}

// Bounds of a tool's tags (api.md §10.1), to which an operation's are cut:
// they are the document author's, whom the router's operator cannot correct.
const (
	maxOpenAPITags   = 32
	maxOpenAPITagLen = 63
)

// openAPITags are the operation's tags, the first 32 cut at 63 characters,
// and "deprecated" for a deprecated operation.
func openAPITags(op *openapi3.Operation) []string {
	var out []string
	tags := op.Tags
	if op.Deprecated {
		tags = append(slices.Clone(tags), "deprecated")
	}
	for _, t := range tags {
		t = textutil.CutRunes(strings.TrimSpace(t), maxOpenAPITagLen, "")
		if t == "" || slices.Contains(out, t) {
			continue
		}
		if len(out) == maxOpenAPITags {
			break
		}
		out = append(out, t)
	}
	return out
}

// methodSideEffects is what an HTTP method does by its definition (RFC
// 9110): the safe methods read; DELETE destroys; the others write.
func methodSideEffects(method string) v1alpha1.SideEffects {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return v1alpha1.SideEffectsRead
	case "DELETE":
		return v1alpha1.SideEffectsDestructive
	}
	return v1alpha1.SideEffectsWrite
}

// selects reports whether the selector takes the operation: one of its
// tags, or a glob matching the tool name ("." separating levels).
func selects(s *v1alpha1.OperationSelector, op *openapi3.Operation, name string) bool {
	for _, t := range s.Tags {
		if slices.Contains(op.Tags, t) {
			return true
		}
	}
	p := v1alpha1.ToolPath(name)
	for _, g := range s.Operations {
		if ok, _ := doublestar.Match(v1alpha1.ToolPath(g), p); ok {
			return true
		}
	}
	return false
}
