package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// parser accumulates objects and problems over one or more files.
type parser struct {
	set      *Set
	problems []Problem
	// nsOrigin is where the set's namespace was first given.
	nsOrigin string
}

func newParser() *parser { return &parser{set: &Set{}} }

func (p *parser) problem(pr Problem) {
	if pr.File != "" && !slices.Contains(p.set.files, pr.File) {
		// A file that could not be read still has its place in the order.
		p.set.files = append(p.set.files, pr.File)
	}
	if pr.File != "" {
		p.set.fill(pr.File) // its problem says what is wrong, not "empty"
	}
	p.problems = append(p.problems, pr)
}

// finish gives objects without a namespace the set's namespace and returns
// the set with every problem found (sorted by file, then line).
func (p *parser) finish() (*Set, error) {
	for _, ns := range p.set.namespaces() {
		if *ns == "" {
			*ns = p.set.Namespace
		}
	}
	problems := problem.List(p.problems)
	problems.Sort(p.set.fileRank)
	return p.set, problems.Err()
}

// document is one YAML document or JSON value of a file.
type document struct {
	file string
	// index is the 1-based position among the file's non-empty documents.
	index int
	// line is the document's first content line; lineOffset is added to
	// the 1-based line numbers of text to make them absolute.
	line, lineOffset int
	text             []byte
	isJSON           bool
}

func (d *document) origin(line int) Origin {
	if line <= 0 {
		line = d.line
	}
	return Origin{File: d.file, Line: line, Doc: d.index}
}

func (p *parser) parseFile(name string, data []byte) {
	p.set.files = append(p.set.files, name)
	// YAML reads a lone CR as a line break too (old Mac files); the document
	// split and every line number count LFs.
	data = []byte(sources.NormalizeNewlines(string(data)))
	if strings.EqualFold(filepath.Ext(name), ".json") {
		p.parseJSONStream(name, data)
		return
	}
	index := 0
	for _, c := range splitYAML(data) {
		first := firstContentLine(c.text)
		if first == 0 {
			continue // blank or comments only
		}
		index++
		p.document(&document{file: name, index: index, line: c.firstLine + first - 1,
			lineOffset: c.firstLine - 1, text: c.text})
	}
}

// chunk is the text of one YAML document; firstLine is the absolute line of its first line.
type chunk struct {
	firstLine int
	text      []byte
}

// splitYAML cuts a YAML stream at document markers ("---" and "...") at the
// start of a line. YAML forbids such lines inside any scalar, so this is exact
// and, unlike a YAML decoder, tells where each document starts.
func splitYAML(data []byte) []chunk {
	var chunks []chunk
	start, startLine := 0, 1
	lineNo := 1
	for off := 0; off < len(data); lineNo++ {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		line := bytes.TrimRight(data[off:next], "\r\n")
		if isMarker(line, "---") || isMarker(line, "...") {
			chunks = append(chunks, chunk{startLine, data[start:off]})
			rest := bytes.TrimSpace(line[3:])
			if string(line[:3]) == "---" && len(rest) > 0 && rest[0] != '#' {
				// "--- value": the document starts on the marker's line.
				start, startLine = off+3, lineNo
			} else {
				start, startLine = next, lineNo+1
			}
		}
		off = next
	}
	return append(chunks, chunk{startLine, data[start:]})
}

func isMarker(line []byte, marker string) bool {
	return bytes.HasPrefix(line, []byte(marker)) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

// firstContentLine returns the 1-based line of text's first line that is not
// blank, a comment or a directive, or 0 if there is none.
func firstContentLine(text []byte) int {
	for i, line := range bytes.Split(text, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' && t[0] != '%' {
			return i + 1
		}
	}
	return 0
}

// parseJSONStream reads a JSON file: one value, or several one after another.
func (p *parser) parseJSONStream(name string, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for index := 1; ; index++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		if err != nil {
			p.set.fill(name)
			line, col := lineCol(data, jsonErrorOffset(err, dec))
			p.problem(Problem{Location: problem.Location{File: name, Line: line},
				Message: fmt.Sprintf("invalid JSON at column %d: %s", col, strings.TrimPrefix(err.Error(), "json: "))})
			return
		}
		// InputOffset is the end of raw; whitespace before it was skipped.
		startOff := int(dec.InputOffset()) - len(raw)
		line, _ := lineCol(data, startOff)
		p.document(&document{file: name, index: index, line: line, lineOffset: line - 1, text: raw, isJSON: true})
	}
}

func jsonErrorOffset(err error, dec *json.Decoder) int {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return int(se.Offset) - 1 // Offset counts the offending byte
	}
	return int(dec.InputOffset())
}

// lineCol converts a byte offset to a 1-based line and column.
func lineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = off - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// lines is the number of lines of the document's text.
func (d *document) lines() int {
	n := bytes.Count(d.text, []byte("\n"))
	if len(d.text) > 0 && d.text[len(d.text)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// yamlLineRE finds the document-relative line numbers in go-yaml errors.
var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlProblems turns a go-yaml error into problems at absolute lines.
func (d *document) yamlProblems(err error, kind, name string) []Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var out []Problem
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok {
		for _, l := range strings.Split(rest, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, d.yamlProblem(l, kind, name))
			}
		}
		return out
	}
	return []Problem{d.yamlProblem(msg, kind, name)}
}

func (d *document) yamlProblem(msg, kind, name string) Problem {
	line := 0
	if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
		rel, _ := strconv.Atoi(msg[m[2]:m[3]])
		// go-yaml counts the end of a text without a final newline as the
		// line after it; the problem is on the document's last line.
		line = min(rel, d.lines()) + d.lineOffset
		// "line 3: x" -> "x": the location goes in front.
		msg = strings.TrimPrefix(strings.TrimSpace(msg[m[1]:]), ": ")
	}
	return Problem{Location: loc(d.origin(line)), Kind: kind, Name: name, Message: "invalid YAML: " + msg}
}

// readHeader reads apiVersion, kind, metadata.name and metadata.namespace,
// explaining the first that is not a string.
func readHeader(j []byte) (h header, field, msg string) {
	var raw struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
		Metadata   any `json:"metadata"`
	}
	if err := json.Unmarshal(j, &raw); err != nil {
		return h, "", "not an object: " + err.Error()
	}
	str := func(path string, v any, dst *string) bool {
		switch v := v.(type) {
		case nil:
		case string:
			*dst = v
		default:
			field, msg = path, "must be a string, not "+jsonKindOf(v)
			if _, ok := v.(bool); ok {
				msg += yamlBoolHint
			}
			return false
		}
		return true
	}
	if !str("apiVersion", raw.APIVersion, &h.APIVersion) || !str("kind", raw.Kind, &h.Kind) {
		return h, field, msg
	}
	switch m := raw.Metadata.(type) {
	case nil:
	case map[string]any:
		if !str("metadata.name", m["name"], &h.Metadata.Name) || !str("metadata.namespace", m["namespace"], &h.Metadata.Namespace) {
			return h, field, msg
		}
	default:
		return h, "metadata", "must be an object, not " + jsonKindOf(m)
	}
	return h, "", ""
}

const yamlBoolHint = " (put it in quotes: YAML reads unquoted yes, no, on, off, y and n as booleans)"

func jsonKindOf(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case string:
		return "string"
	}
	return "null"
}

// header is what is read before the kind is known.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (p *parser) document(d *document) {
	j := d.text
	if !d.isJSON {
		var err error
		if j, err = yaml.YAMLToJSON(d.text); err != nil {
			p.set.fill(d.file)
			for _, pr := range d.yamlProblems(err, "", "") {
				p.problem(pr)
			}
			return
		}
		if string(bytes.TrimSpace(j)) == "null" {
			return // "~" or "null" only
		}
	}
	p.set.fill(d.file)
	root := parseNode(d.text, d.lineOffset)
	if root == nil && !d.isJSON {
		// Positions are unavailable; still refuse duplicate keys.
		if _, err := yaml.YAMLToJSONStrict(d.text); err != nil {
			var h header
			_ = json.Unmarshal(j, &h)
			for _, pr := range d.yamlProblems(err, h.Kind, h.Metadata.Name) {
				p.problem(pr)
			}
		}
	}
	p.object(d, j, root, d.line, "")
}

// parseNode parses text for positions, with lines made absolute; nil if it
// does not parse (the JSON conversion reports real syntax errors).
func parseNode(text []byte, lineOffset int) *yamlv3.Node {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(text, &doc); err != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	shiftLines(doc.Content[0], lineOffset)
	return doc.Content[0]
}

func shiftLines(n *yamlv3.Node, off int) {
	n.Line += off
	for _, c := range n.Content {
		shiftLines(c, off)
	}
}

// listItemKinds maps typed list kinds to their item kind.
var listItemKinds = map[string]string{
	v1alpha1.KindContextRouter + "List":   v1alpha1.KindContextRouter,
	v1alpha1.KindContextRoute + "List":    v1alpha1.KindContextRoute,
	v1alpha1.KindContextSource + "List":   v1alpha1.KindContextSource,
	v1alpha1.KindAgentPermission + "List": v1alpha1.KindAgentPermission,
}

// object decodes one object (or a list of them) from JSON. node locates its
// fields; line is where it starts; itemKind is the kind of a typed list's
// items, which may leave apiVersion and kind out.
func (p *parser) object(d *document, j []byte, node *yamlv3.Node, line int, itemKind string) {
	o := d.origin(line)
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		p.problem(Problem{Location: loc(o), Message: fmt.Sprintf(
			"a manifest must be an object with apiVersion and kind, not %s", jsonValueKind(t))})
		return
	}
	h, field, msg := readHeader(j)
	if msg != "" {
		p.problem(Problem{Location: loc(d.origin(lineOf(node, field, false))), Kind: h.Kind, Name: h.Metadata.Name, Field: field, Message: msg})
		p.set.markBroken(h.Kind, h.Metadata.Name)
		return
	}
	if itemKind != "" && h.APIVersion == "" && h.Kind == "" {
		h.APIVersion, h.Kind = v1alpha1.GroupVersion.String(), itemKind
	}
	kind, name := h.Kind, h.Metadata.Name
	pr := func(field, msg string) Problem {
		return Problem{Location: loc(d.origin(lineOf(node, field, false))), Kind: kind, Name: name, Field: field, Message: msg}
	}

	// Lists: kubectl's "v1 List" and the typed lists of this API.
	if (h.Kind == "List" && (h.APIVersion == "v1" || h.APIVersion == "")) ||
		(h.APIVersion == v1alpha1.GroupVersion.String() && listItemKinds[h.Kind] != "") {
		p.list(d, j, node, o, h.Kind, listItemKinds[h.Kind])
		return
	}

	if msg, field := checkTypeMeta(h.APIVersion, h.Kind); msg != "" {
		p.problem(pr(field, msg))
		p.set.markBroken(kind, name)
		return
	}

	if !d.isJSON && node != nil {
		for _, dup := range duplicateKeys(node, "") {
			p.problem(Problem{Location: loc(d.origin(dup.line)), Kind: kind, Name: name, Field: dup.path, Message: "duplicate field"})
		}
	}

	var obj interface {
		Default()
		GetNamespace() string
		GetObjectKind() schema.ObjectKind
	}
	switch kind {
	case v1alpha1.KindContextRouter:
		obj = &v1alpha1.ContextRouter{}
	case v1alpha1.KindContextRoute:
		obj = &v1alpha1.ContextRoute{}
	case v1alpha1.KindContextSource:
		obj = &v1alpha1.ContextSource{}
	case v1alpha1.KindAgentPermission:
		obj = &v1alpha1.AgentPermission{}
	}
	if !p.decode(d, j, node, obj, pr) {
		p.set.markBroken(kind, name)
		return
	}
	// Items of typed lists may leave apiVersion and kind out.
	obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	// Defaulting cannot tell an explicit 0 from a missing field; the API
	// server would refuse these zeros (minimum 1), so the loader does too.
	for _, f := range explicitZeros(kind, j) {
		p.problem(pr(f, "must be at least 1 (leave the field out for the default)"))
	}
	obj.Default()
	p.namespace(obj.GetNamespace(), pr, describe(kind, name), o)

	s := p.set
	switch v := obj.(type) {
	case *v1alpha1.ContextRouter:
		s.Routers = append(s.Routers, *v)
	case *v1alpha1.ContextRoute:
		s.Routes = append(s.Routes, *v)
	case *v1alpha1.ContextSource:
		s.Sources = append(s.Sources, *v)
	case *v1alpha1.AgentPermission:
		s.Permissions = append(s.Permissions, *v)
	}
	s.place(kind, name, placement{origin: o, node: node})
}

// positiveFields are integer fields with a default and a minimum of 1.
var positiveFields = map[string][]string{
	v1alpha1.KindContextRouter: {"spec.budget.maxTokens"},
	v1alpha1.KindContextSource: {"spec.chunking.maxChunkTokens", "spec.httpAPI.maxResults"},
}

// explicitZeros returns the positiveFields of kind that the document sets to 0.
func explicitZeros(kind string, j []byte) []string {
	var doc map[string]any
	if len(positiveFields[kind]) == 0 || json.Unmarshal(j, &doc) != nil {
		return nil
	}
	var out []string
	for _, path := range positiveFields[kind] {
		var v any = doc
		for _, seg := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[seg]
		}
		if n, ok := v.(float64); ok && n == 0 {
			out = append(out, path)
		}
	}
	return out
}

// checkTypeMeta explains an apiVersion/kind pair this loader does not read.
func checkTypeMeta(apiVersion, kind string) (msg, field string) {
	want := v1alpha1.GroupVersion.String()
	known := false
	for _, k := range kinds {
		known = known || k == kind
	}
	switch {
	case kind == "":
		return fmt.Sprintf("missing: every manifest needs apiVersion: %s and one of the kinds %s", want, strings.Join(kinds, ", ")), "kind"
	case apiVersion == "":
		return "missing: want " + want, "apiVersion"
	case known && apiVersion != want:
		return fmt.Sprintf("unsupported apiVersion %q for %s: want %s", apiVersion, kind, want), "apiVersion"
	case !known && apiVersion == want:
		msg := fmt.Sprintf("unknown kind %q: want one of %s", kind, strings.Join(kinds, ", "))
		if s := closest(kind, kinds); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return msg, "kind"
	case !known:
		return fmt.Sprintf("%s %s is not a %s kind: manifests hold %s only", apiVersion, kind, want, strings.Join(kinds, ", ")), "kind"
	}
	return "", ""
}

// list decodes the items of a List.
func (p *parser) list(d *document, j []byte, node *yamlv3.Node, o Origin, kind, itemKind string) {
	var l struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ListMeta   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	strict, err := sigsjson.UnmarshalStrict(j, &l)
	if err != nil {
		p.problem(Problem{Location: loc(o), Kind: kind, Field: "items", Message: "must be a list of objects"})
		return
	}
	for _, e := range strict {
		p.problem(Problem{Location: loc(o), Kind: kind, Field: strictPath(e), Message: strictKind(e)})
	}
	items := lookup(node, "items")
	for i, item := range l.Items {
		var itemNode *yamlv3.Node
		line := o.Line
		if items != nil && items.Kind == yamlv3.SequenceNode && i < len(items.Content) {
			itemNode = items.Content[i]
			line = itemNode.Line
		}
		p.object(d, item, itemNode, line, itemKind)
	}
}

// namespace records an object's namespace; all objects must share one.
func (p *parser) namespace(ns string, pr func(field, msg string) Problem, what string, o Origin) {
	switch {
	case ns == "":
	case p.set.Namespace == "":
		p.set.Namespace, p.nsOrigin = ns, what+" at "+o.String()
	case ns != p.set.Namespace:
		p.problem(pr("metadata.namespace", fmt.Sprintf(
			"namespace %q differs from %q of %s: standalone manifests share one namespace",
			ns, p.set.Namespace, p.nsOrigin)))
	}
}

// decode strictly decodes j into obj, reporting every unknown or duplicate
// field, or the first type error, at the field's line.
func (p *parser) decode(d *document, j []byte, node *yamlv3.Node, obj any, pr func(field, msg string) Problem) bool {
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		field, msg := explainDecodeError(err, j, reflect.TypeOf(obj).Elem())
		p.problem(pr(field, msg))
		return false
	}
	for _, e := range strict {
		path, what := strictPath(e), strictKind(e)
		if what == "unknown field" {
			if s := suggestField(reflect.TypeOf(obj).Elem(), path); s != "" {
				what += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		pb := pr(path, what)
		// A duplicate's own line is its second occurrence.
		pb.Location = loc(d.origin(lineOf(node, path, what == "duplicate field")))
		p.problem(pb)
	}
	return len(strict) == 0
}

func strictPath(err error) string {
	var fe sigsjson.FieldError
	if errors.As(err, &fe) {
		return fe.FieldPath()
	}
	return ""
}

// strictKind is "unknown field" or "duplicate field": the message without its path.
func strictKind(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ` "`); i > 0 {
		return msg[:i]
	}
	return msg
}

func jsonValueKind(t []byte) string {
	switch {
	case len(t) == 0:
		return "nothing"
	case t[0] == '[':
		return "a list"
	case t[0] == '"':
		return "a string"
	case bytes.Equal(t, []byte("true")) || bytes.Equal(t, []byte("false")):
		return "a boolean"
	case bytes.Equal(t, []byte("null")):
		return "null"
	default:
		return "a number"
	}
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	durationType        = reflect.TypeFor[metav1.Duration]()
	quantityType        = reflect.TypeFor[resource.Quantity]()
	timeType            = reflect.TypeFor[metav1.Time]()
)

// explainDecodeError turns a decoding error into a field path and a message.
// Type errors carry their path; errors of custom unmarshalers (durations,
// quantities) do not, so the value that fails is found by decoding the
// document's leaves one by one.
func explainDecodeError(err error, j []byte, t reflect.Type) (field, msg string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		// Errors of custom unmarshalers get their path too; explain them by
		// the field's type (a duration, a quantity), not by the JSON they read.
		if ft := typeAt(t, te.Field); ft != nil && (ft == durationType || ft == quantityType || ft == timeType) {
			var raw any
			if json.Unmarshal(j, &raw) == nil {
				return te.Field, explainValueError(raw, te.Field, ft, err)
			}
		}
		return te.Field, typeMismatch(te)
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if dec.Decode(&raw) == nil {
		if path, ft, ferr, ok := findBadValue(raw, t, ""); ok {
			return path, explainValueError(raw, path, ft, ferr)
		}
	}
	return "", strings.TrimPrefix(err.Error(), "json: ")
}

func explainValueError(raw any, path string, t reflect.Type, err error) string {
	v := valueAt(raw, path)
	switch t {
	case durationType:
		return fmt.Sprintf("invalid duration %s: want a number with a unit, such as \"30s\", \"5m\" or \"1h\"", v)
	case quantityType:
		return fmt.Sprintf("invalid quantity %s: want a number with an optional suffix, such as \"512Ki\" or \"1Mi\"", v)
	case timeType:
		return fmt.Sprintf("invalid time %s: want RFC 3339, such as \"2026-01-02T15:04:05Z\"", v)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return typeMismatch(te)
	}
	return err.Error()
}

func typeMismatch(te *json.UnmarshalTypeError) string {
	msg := fmt.Sprintf("must be %s, not %s", jsonTypeName(te.Type), te.Value)
	if te.Type.Kind() == reflect.String {
		switch {
		case te.Value == "bool":
			msg += yamlBoolHint
		case strings.HasPrefix(te.Value, "number"):
			msg += " (put it in quotes)"
		}
	}
	return msg
}

// findBadValue walks raw alongside the Go type t and returns the path of the
// first value (in sorted key order) that t's custom unmarshaler refuses.
func findBadValue(raw any, t reflect.Type, path string) (string, reflect.Type, error, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		b, err := json.Marshal(raw)
		if err != nil {
			return "", nil, nil, false
		}
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			return path, t, err, true
		}
		return "", nil, nil, false
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := raw.(map[string]any)
		if !ok {
			return "", nil, nil, false
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			if ft, ok := fields[k]; ok {
				if r, rt, err, ok := findBadValue(m[k], ft, joinPath(path, k)); ok {
					return r, rt, err, true
				}
			}
		}
	case reflect.Map:
		m, ok := raw.(map[string]any)
		if !ok {
			return "", nil, nil, false
		}
		for _, k := range sortedKeys(m) {
			if r, rt, err, ok := findBadValue(m[k], t.Elem(), joinPath(path, k)); ok {
				return r, rt, err, true
			}
		}
	case reflect.Slice, reflect.Array:
		l, ok := raw.([]any)
		if !ok {
			return "", nil, nil, false
		}
		for i, v := range l {
			if r, rt, err, ok := findBadValue(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); ok {
				return r, rt, err, true
			}
		}
	}
	return "", nil, nil, false
}

// valueAt renders the JSON value at path for messages.
func valueAt(raw any, path string) string {
	v := raw
	for _, seg := range splitPath(path) {
		switch c := v.(type) {
		case map[string]any:
			v = c[seg.key]
		case []any:
			if seg.index < 0 || seg.index >= len(c) {
				return "?"
			}
			v = c[seg.index]
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return string(b)
}

func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Slice, reflect.Array:
		return "a list"
	default:
		return "an object"
	}
}

// jsonFields maps the JSON names of t's fields to their types, flattening
// embedded and inline structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" && f.Anonymous {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// typeAt returns the Go type (pointers removed) of the field at path, or nil.
func typeAt(t reflect.Type, path string) reflect.Type {
	for _, seg := range splitPath(path) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := jsonFields(t)[seg.key]
			if !ok {
				return nil
			}
			t = ft
		case reflect.Map, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// suggestField returns the known field closest to the last segment of an
// unknown field's path, or "".
func suggestField(t reflect.Type, path string) string {
	segs := splitPath(path)
	if len(segs) == 0 {
		return ""
	}
	parent := t
	if i := strings.LastIndexAny(path, ".["); i > 0 {
		parent = typeAt(t, path[:i])
	}
	if parent == nil || parent.Kind() != reflect.Struct {
		return ""
	}
	return closest(segs[len(segs)-1].key, sortedKeys(jsonFields(parent)))
}

// closest returns the candidate nearest to s by case-insensitive edit
// distance, if it is near enough to be a plausible typo.
func closest(s string, candidates []string) string {
	best, bestD := "", -1
	ls := strings.ToLower(s)
	for _, c := range candidates {
		d := editDistance(ls, strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > max(1, len(s)/3) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours ("nmae") cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
