package session

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/internal/jsonpath"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// Drill-down of an artifact (api.md §11.4): bounded views of a tool result
// the firewall took out of the prompt.

// Drill-down views.
const (
	ViewHead    = "head"
	ViewLines   = "lines"
	ViewGrep    = "grep"
	ViewJSON    = "json"
	ViewCSV     = "csv"
	ViewColumns = "columns"
)

// Drill-down bounds: whatever the artifact, an answer stays small.
const (
	// A request's lines is 1 to MaxDrillLines; 0 (or none) is
	// DefaultDrillLines (DrillLinesRule says it, CheckDrillLines holds it).
	DefaultDrillLines = 20
	MaxDrillLines     = 200
	// MaxDrillLineRunes cuts each line (and each CSV cell) of an answer.
	MaxDrillLineRunes = 500
	// MaxDrillValueBytes bounds the value of the json view; a larger one is
	// answered by its shape.
	MaxDrillValueBytes = 64 << 10
	// MaxPathBytes and MaxPathSteps bound a json path.
	MaxPathBytes = jsonpath.MaxBytes
	MaxPathSteps = jsonpath.MaxSteps
	// MaxDrillColumns bounds the columns listed.
	MaxDrillColumns = 256
)

// DrillRequest asks for one view. A parameter of another view is refused.
type DrillRequest struct {
	View string
	// Lines: lines of head, rows of csv (0: DefaultDrillLines).
	Lines int
	// Path selects a value in the json view (ParsePath).
	Path string
	// From and To are the range of the lines view: line numbers from 1,
	// negative ones from the end (-1 the last line); nil: from 1, to
	// from+DefaultDrillLines-1.
	From, To *int
	// Pattern is what the grep view looks for: RE2, or a plain string when
	// Literal. Context lines go around each match (nil: 0); Max bounds the
	// matches (nil: DefaultGrepMatches).
	Pattern      string
	Literal      bool
	Context, Max *int
}

// Drill is a view of an artifact.
type Drill struct {
	Ref       string `json:"ref"`
	View      string `json:"view"`
	MediaType string `json:"media_type"`
	Bytes     int    `json:"bytes"`
	Lines     int    `json:"lines"`
	// Head: the first lines (head view).
	Head []string `json:"head,omitempty"`
	// From, To, Content, Next and Note (lines view): the range answered,
	// its lines, the range to ask for next (nil at the end) and what the
	// request's range had past either end.
	From    int        `json:"from,omitempty"`
	To      int        `json:"to,omitempty"`
	Content []string   `json:"content,omitempty"`
	Next    *LineRange `json:"next,omitempty"`
	Note    string     `json:"note,omitempty"`
	// Matches and TotalMatches (grep view): the matches answered, and how
	// many lines match in all.
	Matches      []GrepMatch `json:"matches,omitzero"`
	TotalMatches *int        `json:"total_matches,omitempty"`
	// Path and Value (json view); Summary stands for a value over
	// MaxDrillValueBytes.
	Path    string          `json:"path,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Summary string          `json:"summary,omitempty"`
	// Rows, Columns and FirstRows (csv and columns views).
	Rows      int        `json:"rows,omitempty"`
	Columns   []Column   `json:"columns,omitempty"`
	FirstRows [][]string `json:"first_rows,omitempty"`
	// Truncated: the view left something out (lines cut, rows or columns
	// past the bounds, a value too large).
	Truncated bool `json:"truncated,omitempty"`
}

// Column is a column of a table: a CSV header or a key of a JSON array of
// objects, with the type its values share: integer, number, boolean,
// string, null, object, array, or mixed; empty when it has no values.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// DrillError is a view that does not apply to the artifact or a bad
// request (HTTP 400).
type DrillError struct{ Msg string }

func (e *DrillError) Error() string { return e.Msg }

func drillErrorf(format string, args ...any) error {
	return &DrillError{Msg: fmt.Sprintf(format, args...)}
}

// DrillLinesRule is the bound of a drill-down's lines as every message and
// the MCP tool's schema say it.
var DrillLinesRule = fmt.Sprintf("between 1 and %d (0 or none: the default, %d)", MaxDrillLines, DefaultDrillLines)

// CheckDrillLines is the one check of a drill-down's lines: 0 to
// MaxDrillLines, 0 meaning DefaultDrillLines.
func CheckDrillLines(n int) error {
	if n < 0 || n > MaxDrillLines {
		return drillErrorf("lines is %d; it must be %s", n, DrillLinesRule)
	}
	return nil
}

// ParseDrillLines reads lines as a query parameter carries it ("" is 0,
// the default) and checks it (CheckDrillLines).
func ParseDrillLines(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, drillErrorf("lines is %q; it must be %s", textutil.CutBytes(s, 32, textutil.Ellipsis), DrillLinesRule)
	}
	return n, CheckDrillLines(n)
}

// DrillDown answers one view of an artifact's content.
func DrillDown(ref, content string, req DrillRequest) (*Drill, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	if req.Lines == 0 {
		req.Lines = DefaultDrillLines
	}
	d := &Drill{Ref: ref, View: req.View, MediaType: "text/plain", Bytes: len(content), Lines: countLines(content)}
	isJSON := json.Valid([]byte(content))
	if isJSON {
		d.MediaType = "application/json"
	}
	switch req.View {
	case ViewLines:
		if err := linesView(d, content, req); err != nil {
			return nil, err
		}
		return d, nil
	case ViewGrep:
		if err := grepView(d, content, req); err != nil {
			return nil, err
		}
		return d, nil
	case ViewHead:
		rest := content
		for n := 0; n < req.Lines && rest != ""; n++ {
			line, after, _ := strings.Cut(rest, "\n")
			rest = after
			cut := textutil.CutRunes(strings.TrimRight(line, "\r"), MaxDrillLineRunes, textutil.Ellipsis)
			d.Truncated = d.Truncated || len(cut) != len(strings.TrimRight(line, "\r"))
			d.Head = append(d.Head, cut)
		}
		d.Truncated = d.Truncated || rest != ""
		return d, nil
	case ViewJSON:
		if !isJSON {
			return nil, drillErrorf("view=json: the artifact is not JSON (%s)", d.MediaType)
		}
		steps, v, err := selectString(content, req.Path)
		if err != nil {
			return nil, err
		}
		d.Path = FormatPath(steps)
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return nil, drillErrorf("view=json: %v", err)
		}
		if buf.Len() > MaxDrillValueBytes {
			d.Truncated = true
			d.Summary, _, _ = jsonSummary(buf.String())
			return d, nil
		}
		d.Value = buf.Bytes()
		return d, nil
	case ViewCSV:
		if err := csvView(d, content, req.Lines, true); err != nil {
			return nil, err
		}
		return d, nil
	case ViewColumns:
		if isJSON {
			steps, v, err := selectString(content, req.Path)
			if err != nil {
				return nil, err
			}
			if err := jsonColumns(d, string(v)); err == nil {
				if len(steps) > 0 {
					d.Path = FormatPath(steps)
				}
				return d, nil
			}
			if len(steps) > 0 {
				return nil, drillErrorf("view=columns: the value at %s is not an array of objects", FormatPath(steps))
			}
		} else if req.Path != "" {
			return nil, drillErrorf("view=columns: path applies to JSON artifacts; this one is %s", d.MediaType)
		}
		if err := csvView(d, content, 0, false); err != nil {
			return nil, drillErrorf("view=columns: the artifact is neither CSV nor a JSON array of objects (%s)", strings.TrimPrefix(err.Error(), "view=csv: "))
		}
		return d, nil
	}
	return nil, drillErrorf("unknown view %q: want head, lines, grep, json, csv or columns", req.View)
}

// check refuses a parameter of another view and a bound past its range.
func (req *DrillRequest) check() error {
	v := req.View
	for _, p := range [...]struct {
		name  string
		given bool
		views []string
	}{
		{"lines", req.Lines != 0, []string{ViewHead, ViewCSV}},
		{"path", req.Path != "", []string{ViewJSON, ViewColumns}},
		{"from", req.From != nil, []string{ViewLines}},
		{"to", req.To != nil, []string{ViewLines}},
		{"pattern", req.Pattern != "", []string{ViewGrep}},
		{"literal", req.Literal, []string{ViewGrep}},
		{"context", req.Context != nil, []string{ViewGrep}},
		{"max", req.Max != nil, []string{ViewGrep}},
	} {
		if p.given && !slices.Contains(p.views, v) && slices.Contains(drillViews, v) {
			return drillErrorf("%s applies to view=%s only", p.name, strings.Join(p.views, " and view="))
		}
	}
	return CheckDrillLines(req.Lines)
}

// drillViews are the views DrillDown answers.
var drillViews = []string{ViewHead, ViewLines, ViewGrep, ViewJSON, ViewCSV, ViewColumns}

// csvView reads content as CSV (tab-separated when its first line has tabs
// and no commas), the first record being the header.
func csvView(d *Drill, content string, rows int, withRows bool) error {
	first, _, _ := strings.Cut(content, "\n")
	r := csv.NewReader(strings.NewReader(content))
	if strings.Contains(first, "\t") && !strings.Contains(first, ",") {
		r.Comma = '\t'
	}
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return drillErrorf("view=csv: the artifact is not CSV: %v", err)
	}
	if len(header) < 2 {
		return drillErrorf("view=csv: the artifact is not CSV: its first line has one field")
	}
	n := min(len(header), MaxDrillColumns)
	d.Truncated = len(header) > n
	types := make([]string, n)
	d.Columns = make([]Column, n)
	for i := range n {
		d.Columns[i].Name = textutil.CutRunes(header[i], MaxDrillLineRunes, textutil.Ellipsis)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return drillErrorf("view=csv: the artifact is not CSV: %v", err)
		}
		d.Rows++
		for i := 0; i < n && i < len(rec); i++ {
			types[i] = mergeType(types[i], cellType(rec[i]))
		}
		if withRows && len(d.FirstRows) < rows {
			row := make([]string, min(len(rec), n))
			for i := range row {
				row[i] = textutil.CutRunes(rec[i], MaxDrillLineRunes, textutil.Ellipsis)
			}
			d.FirstRows = append(d.FirstRows, row)
		}
	}
	if withRows && d.Rows > len(d.FirstRows) {
		d.Truncated = true
	}
	for i := range n {
		d.Columns[i].Type = types[i]
	}
	return nil
}

// cellType is the type of a CSV cell; "" for an empty one.
func cellType(s string) string {
	switch {
	case s == "":
		return ""
	case s == "true" || s == "false":
		return "boolean"
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return "integer"
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return "number"
	}
	return "string"
}

// mergeType is the type of a column that had type a and sees b.
func mergeType(a, b string) string {
	switch {
	case a == "" || a == b:
		return b
	case b == "":
		return a
	case (a == "integer" && b == "number") || (a == "number" && b == "integer"):
		return "number"
	}
	return "mixed"
}

// jsonColumns lists the keys of a JSON array of objects, in first-seen
// order, with the types of their values.
func jsonColumns(d *Drill, content string) error {
	notTable := errors.New("not an array of objects")
	dec := json.NewDecoder(strings.NewReader(content))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return notTable
	}
	var order []string
	types := map[string]string{}
	rows := 0
	for dec.More() {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return notTable
		}
		rows++
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if _, seen := types[k]; !seen {
				order = append(order, k)
			}
			types[k] = mergeType(types[k], rawType(v))
		}
		if _, err := dec.Token(); err != nil { // '}'
			return err
		}
	}
	if rows == 0 {
		return notTable
	}
	d.Rows = rows
	n := min(len(order), MaxDrillColumns)
	d.Truncated = len(order) > n
	for _, k := range order[:n] {
		d.Columns = append(d.Columns, Column{Name: textutil.CutRunes(k, MaxDrillLineRunes, textutil.Ellipsis), Type: types[k]})
	}
	return nil
}

// rawType is the type of a JSON value.
func rawType(v json.RawMessage) string {
	s := bytes.TrimSpace(v)
	if len(s) == 0 {
		return ""
	}
	switch s[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(s, ".eE") {
		return "number"
	}
	return "integer"
}

// PathStep is one step of a json path (api.md §11.9; package jsonpath).
type PathStep = jsonpath.Step

// ParsePath reads a json path; its error is a DrillError.
func ParsePath(p string) ([]PathStep, error) {
	steps, err := jsonpath.Parse(p)
	if err != nil {
		return nil, &DrillError{Msg: err.Error()}
	}
	return steps, nil
}

// FormatPath writes steps back in the canonical form ParsePath reads.
func FormatPath(steps []PathStep) string { return jsonpath.Format(steps) }

// selectString parses path and selects it in the JSON document content.
func selectString(content, path string) ([]PathStep, json.RawMessage, error) {
	steps, err := ParsePath(path)
	if err != nil {
		return nil, nil, err
	}
	v, err := selectPath(json.RawMessage(content), steps)
	return steps, v, err
}

// selectPath follows steps into v, decoding one level at a time so the
// value found keeps its bytes (and its keys their order).
func selectPath(v json.RawMessage, steps []PathStep) (json.RawMessage, error) {
	for k, s := range steps {
		at := FormatPath(steps[:k+1])
		if s.IsIndex {
			var arr []json.RawMessage
			if err := json.Unmarshal(v, &arr); err != nil {
				return nil, drillErrorf("path %s: not an array (a %s)", at, kindOf(v))
			}
			i := s.Index
			if i < 0 {
				i += len(arr)
			}
			if i < 0 || i >= len(arr) {
				return nil, drillErrorf("path %s: index out of range: the array has %d elements", at, len(arr))
			}
			v = arr[i]
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil || obj == nil {
			return nil, drillErrorf("path %s: not an object (a %s)", at, kindOf(v))
		}
		next, ok := obj[s.Key]
		if !ok {
			keys := make([]string, 0, len(obj))
			for key := range obj {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			if len(keys) > 16 {
				keys = append(keys[:16], "…")
			}
			return nil, drillErrorf("path %s: no key %q; the object has %s", at, s.Key, strings.Join(keys, ", "))
		}
		v = next
	}
	return v, nil
}

func kindOf(v json.RawMessage) string {
	if t := rawType(v); t != "" {
		return t
	}
	return "nothing"
}
