// Package located decodes YAML and JSON documents strictly and says where
// a problem is: the document a YAML stream's line starts, the line of a
// field path in the node tree, and a message for a decoding error that
// names the field (unknown fields with "did you mean" suggestions, type
// mismatches, durations and quantities). The manifest loader and the tool
// catalog reader share it.
package located

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// Doc is the text of one YAML document; FirstLine is the absolute line of its first line.
type Doc struct {
	FirstLine int
	Text      []byte
}

// SplitYAML cuts a YAML stream at document markers ("---" and "...") at the
// start of a line. YAML forbids such lines inside any scalar, so this is exact
// and, unlike a YAML decoder, tells where each document starts.
func SplitYAML(data []byte) []Doc {
	var chunks []Doc
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
			chunks = append(chunks, Doc{startLine, data[start:off]})
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
	return append(chunks, Doc{startLine, data[start:]})
}

func isMarker(line []byte, marker string) bool {
	return bytes.HasPrefix(line, []byte(marker)) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

// FirstContentLine returns the 1-based line of text's first line that is not
// blank, a comment or a directive, or 0 if there is none.
func FirstContentLine(text []byte) int {
	for i, line := range bytes.Split(text, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' && t[0] != '%' {
			return i + 1
		}
	}
	return 0
}

func JSONErrorOffset(err error, dec *json.Decoder) int {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return int(se.Offset) - 1 // Offset counts the offending byte
	}
	return int(dec.InputOffset())
}

// LineCol converts a byte offset to a 1-based line and column.
func LineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = off - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

const YAMLBoolHint = " (put it in quotes: YAML reads unquoted yes, no, on, off, y and n as booleans)"

// ParseNode parses text for positions, with lines made absolute; nil if it
// does not parse (the JSON conversion reports real syntax errors).
func ParseNode(text []byte, lineOffset int) *yamlv3.Node {
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

func StrictPath(err error) string {
	var fe sigsjson.FieldError
	if errors.As(err, &fe) {
		return fe.FieldPath()
	}
	return ""
}

// StrictKind is "unknown field" or "duplicate field": the message without its path.
func StrictKind(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ` "`); i > 0 {
		return msg[:i]
	}
	return msg
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	durationType        = reflect.TypeFor[metav1.Duration]()
	quantityType        = reflect.TypeFor[resource.Quantity]()
	timeType            = reflect.TypeFor[metav1.Time]()
)

// ExplainDecodeError turns a decoding error into a field path and a message.
// Type errors carry their path; errors of custom unmarshalers (durations,
// quantities) do not, so the value that fails is found by decoding the
// document's leaves one by one.
func ExplainDecodeError(err error, j []byte, t reflect.Type) (field, msg string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		te.Field = withIndexes(j, te.Field, te.Value)
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

// withIndexes puts the list indexes encoding/json leaves out of a type
// error's path back in ("spec.tools.catalog.description" is
// "spec.tools.catalog[1].description"): the first element whose value at
// the rest of the path has the JSON kind the error names (its Value:
// "bool", "number …", "string", "array", "object"). The path is kept when
// no element fits.
func withIndexes(j []byte, path, value string) string {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if dec.Decode(&raw) != nil {
		return path
	}
	kind, _, _ := strings.Cut(value, " ")
	var walk func(v any, segs []string, prefix string) (string, bool)
	walk = func(v any, segs []string, prefix string) (string, bool) {
		if l, ok := v.([]any); ok {
			for i, e := range l {
				if p, ok := walk(e, segs, fmt.Sprintf("%s[%d]", prefix, i)); ok {
					return p, true
				}
			}
			return "", false
		}
		if len(segs) == 0 {
			return prefix, jsonKind(v) == kind
		}
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		e, ok := m[segs[0]]
		if !ok {
			return "", false
		}
		return walk(e, segs[1:], joinPath(prefix, segs[0]))
	}
	if p, ok := walk(raw, strings.Split(path, "."), ""); ok {
		return p
	}
	return path
}

// jsonKind names a decoded JSON value as encoding/json's type errors do.
func jsonKind(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
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
			msg += YAMLBoolHint
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
		for _, k := range slices.Sorted(maps.Keys(m)) {
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
		for _, k := range slices.Sorted(maps.Keys(m)) {
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

// SuggestField returns the known field Closest to the last segment of an
// unknown field's path, or "".
func SuggestField(t reflect.Type, path string) string {
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
	return Closest(segs[len(segs)-1].key, slices.Sorted(maps.Keys(jsonFields(parent))))
}

// Closest returns the candidate nearest to s by case-insensitive edit
// distance, if it is near enough to be a plausible typo.
func Closest(s string, candidates []string) string {
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

// Lines is the number of lines of a text (at least 1).
func Lines(text []byte) int {
	n := bytes.Count(text, []byte("\n"))
	if len(text) > 0 && text[len(text)-1] != '\n' {
		n++
	}
	return max(n, 1)
}

// unknownAnchorRE is go-yaml's error for an alias whose anchor is not defined.
var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '([^']+)' referenced$`)

// yamlLineRE finds the document-relative line numbers in go-yaml errors.
var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlParserProblems are the problems go-yaml's parser (not its scanner)
// reports: indentation that ends a block early, a missing "-" or key.
var yamlParserProblems = []string{
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected node content",
	"did not find expected <document start>",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

func isYAMLParserProblem(rest string) bool {
	rest = strings.TrimPrefix(strings.TrimSpace(rest), ": ")
	return slices.Contains(yamlParserProblems, rest)
}

// YAMLError is one problem of a go-yaml error, at an absolute line (0 when
// the error names none).
type YAMLError struct {
	Line    int
	Message string
}

// YAMLErrors splits a go-yaml error about text (whose line 1 is absolute line
// lineOffset+1) into its problems, each at its absolute line, the "line N:"
// prefix moved out of the message.
func YAMLErrors(err error, text []byte, lineOffset int) []YAMLError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	one := func(msg string) YAMLError {
		line := 0
		if m := yamlLineRE.FindStringSubmatchIndex(msg); m != nil {
			rel, _ := strconv.Atoi(msg[m[2]:m[3]])
			if isYAMLParserProblem(msg[m[1]:]) {
				// go-yaml v2 (under sigs.k8s.io/yaml) prints a parser error's
				// 0-based line; only scanner errors get the 1-based one.
				rel++
			}
			// go-yaml counts the end of a text without a final newline as the
			// line after it; the problem is on the document's last line.
			line = min(rel, Lines(text)) + lineOffset
			// "line 3: x" -> "x": the location goes in front.
			msg = strings.TrimPrefix(strings.TrimSpace(msg[m[1]:]), ": ")
		} else if a := unknownAnchorRE.FindStringSubmatch(msg); a != nil {
			// go-yaml names no line for an alias without its anchor: find the alias.
			if i := bytes.Index(text, []byte("*"+a[1])); i >= 0 {
				l, _ := LineCol(text, i)
				line = l + lineOffset
			}
		}
		return YAMLError{Line: line, Message: msg}
	}
	rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n")
	if !ok {
		return []YAMLError{one(msg)}
	}
	var out []YAMLError
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, one(l))
		}
	}
	return out
}

// JSONValueKind names the kind of a JSON value for messages: "an object", "a
// list", "a string", "a boolean", "null", "a number", or "nothing".
func JSONValueKind(t []byte) string {
	t = bytes.TrimSpace(t)
	switch {
	case len(t) == 0:
		return "nothing"
	case t[0] == '{':
		return "an object"
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

// JoinIndex prefixes a field path with a list position: "[2]" and "name"
// give "[2].name", "[2]" and "" give "[2]".
func JoinIndex(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}
