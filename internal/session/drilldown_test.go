package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const (
	drillJSON = `{"employee": "e-1", "items": [{"name": "a", "days": 1, "ok": true}, {"name": "b", "days": 2.5, "note": null}], "a.b": {"c": [10, 20, 30]}}`
	drillCSV  = "name,days,ok\nann,1,true\nbob,2.5,false\ncy,,true\n"
)

func TestDrillDown(t *testing.T) {
	lines := strings.Repeat("line\n", 30) + "last"
	tests := []struct {
		name    string
		content string
		req     DrillRequest
		want    string // JSON of the fields checked
		err     string
	}{
		{"head default", lines, DrillRequest{View: ViewHead}, `"lines":31,"head":["line",` + strings.TrimSuffix(strings.Repeat(`"line",`, 19), ",") + `],"truncated":true`, ""},
		{"head lines", "a\nb\nc", DrillRequest{View: ViewHead, Lines: 2}, `"head":["a","b"],"truncated":true`, ""},
		{"head all", "a\r\nb", DrillRequest{View: ViewHead, Lines: 5}, `"head":["a","b"]}`, ""},
		{"head cuts long lines", strings.Repeat("é", MaxDrillLineRunes+5), DrillRequest{View: ViewHead}, `"head":["` + strings.Repeat("é", MaxDrillLineRunes) + `…"],"truncated":true`, ""},
		{"lines past the bound", "a", DrillRequest{View: ViewHead, Lines: MaxDrillLines + 1}, "", "lines is 201; it must be between 1 and 200 (0 or none: the default, 20)"},
		{"negative lines", "a", DrillRequest{View: ViewHead, Lines: -1}, "", "lines is -1; it must be between 1 and 200 (0 or none: the default, 20)"},
		{"lines at the bound", strings.Repeat("x\n", 300), DrillRequest{View: ViewHead, Lines: MaxDrillLines}, `"lines":300,"head":["x",`, ""},
		{"json whole", `{"a": [1, 2]}`, DrillRequest{View: ViewJSON}, `"path":".","value":{"a":[1,2]}`, ""},
		{"json path", drillJSON, DrillRequest{View: ViewJSON, Path: ".items[1].days"}, `"path":".items[1].days","value":2.5`, ""},
		{"json last element", drillJSON, DrillRequest{View: ViewJSON, Path: ".items[-1].name"}, `"value":"b"`, ""},
		{"json quoted key", drillJSON, DrillRequest{View: ViewJSON, Path: `.["a.b"].c[2]`}, `"path":".[\"a.b\"].c[2]","value":30`, ""},
		{"json bracket key", drillJSON, DrillRequest{View: ViewJSON, Path: `["employee"]`}, `"path":".employee","value":"e-1"`, ""},
		{"json object keeps key order", drillJSON, DrillRequest{View: ViewJSON, Path: ".items[0]"}, `"value":{"name":"a","days":1,"ok":true}`, ""},
		{"json missing key", drillJSON, DrillRequest{View: ViewJSON, Path: ".nope"}, "", `path .nope: no key "nope"; the object has a.b, employee, items`},
		{"json index out of range", drillJSON, DrillRequest{View: ViewJSON, Path: ".items[5]"}, "", "path .items[5]: index out of range: the array has 2 elements"},
		{"json index into an object", drillJSON, DrillRequest{View: ViewJSON, Path: "[0]"}, "", "path [0]: not an array (a object)"},
		{"json bad path", drillJSON, DrillRequest{View: ViewJSON, Path: ".items[x]"}, "", `path ".items[x]": an index or a quoted name is missing at byte 7`},
		{"json of text", "hello", DrillRequest{View: ViewJSON}, "", "view=json: the artifact is not JSON (text/plain)"},
		{"json value too large", `[` + strings.Repeat(`"xxxxxxxxxx",`, 7000) + `1]`, DrillRequest{View: ViewJSON}, `"path":".","summary":"JSON array of 7001 elements, the first string","truncated":true`, ""},
		{"csv", drillCSV, DrillRequest{View: ViewCSV, Lines: 2}, `"rows":3,"columns":[{"name":"name","type":"string"},{"name":"days","type":"number"},{"name":"ok","type":"boolean"}],"first_rows":[["ann","1","true"],["bob","2.5","false"]],"truncated":true`, ""},
		{"tsv", "a\tb\n1\tx\n", DrillRequest{View: ViewCSV}, `"rows":1,"columns":[{"name":"a","type":"integer"},{"name":"b","type":"string"}],"first_rows":[["1","x"]]`, ""},
		{"csv of text", "just words", DrillRequest{View: ViewCSV}, "", "the artifact is not CSV: its first line has one field"},
		{"columns of csv", drillCSV, DrillRequest{View: ViewColumns}, `"rows":3,"columns":[{"name":"name","type":"string"},{"name":"days","type":"number"},{"name":"ok","type":"boolean"}]}`, ""},
		{"columns of a JSON array", drillJSON, DrillRequest{View: ViewColumns, Path: ".items"}, `"path":".items","rows":2,"columns":[{"name":"name","type":"string"},{"name":"days","type":"number"},{"name":"ok","type":"boolean"},{"name":"note","type":"null"}]}`, ""},
		{"columns of a JSON object", drillJSON, DrillRequest{View: ViewColumns, Path: ".employee"}, "", "view=columns: the value at .employee is not an array of objects"},
		{"columns of text", "one two", DrillRequest{View: ViewColumns}, "", "neither CSV nor a JSON array of objects"},
		{"path on head", drillJSON, DrillRequest{View: ViewHead, Path: ".a"}, "", "path applies to view=json and view=columns only"},
		{"unknown view", drillJSON, DrillRequest{View: "tail"}, "", `unknown view "tail": want head, lines, grep, json, csv or columns`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DrillDown("sha256:x", tc.content, tc.req)
			if tc.err != "" {
				var de *DrillError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &de) {
					t.Fatalf("error %v, want a DrillError with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(d)
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("got %s\nwant it to hold %s", b, tc.want)
			}
			if len(b) > MaxDrillValueBytes+MaxDrillLines*MaxDrillLineRunes*4+4096 {
				t.Fatalf("answer of %d bytes", len(b))
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct{ in, canon, err string }{
		{"", ".", ""},
		{".", ".", ""},
		{".a.b_c-d$[0][12]", ".a.b_c-d$[0][12]", ""},
		{`.["x y"]["é"]`, `.["x y"].["é"]`, ""},
		{`[-1]`, `[-1]`, ""},
		{"a", "", `unexpected 'a' at byte 0`},
		{".a.", "", "a name is missing at byte 3"},
		{".a[1", "", "']' is missing at byte 4"},
		{`.["x]`, "", "a JSON string is malformed"},
		{"[1234567890]", "", "an index or a quoted name is missing"},
		{strings.Repeat(".a", MaxPathSteps+1), "", "more than 64 steps"},
		{strings.Repeat("a", MaxPathBytes+1), "", "path is 1025 bytes; it is limited to 1024 bytes"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			steps, err := ParsePath(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || FormatPath(steps) != tc.canon {
				t.Fatalf("%q → %q (%v), want %q", tc.in, FormatPath(steps), err, tc.canon)
			}
		})
	}
}

// FuzzJSONPath: any path parses or is refused with a DrillError, a parsed
// path prints back to one that parses to the same steps, and selecting it
// in a document never panics.
func FuzzJSONPath(f *testing.F) {
	for _, p := range []string{"", ".", ".items[0].name", `.["a.b"].c[-1]`, "[", `.["\u00e9\\"]`, ".a[99999999]"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		steps, err := ParsePath(p)
		if err != nil {
			var de *DrillError
			if !errors.As(err, &de) {
				t.Fatalf("%q: %T %v", p, err, err)
			}
			return
		}
		again, err := ParsePath(FormatPath(steps))
		if err != nil || !reflect.DeepEqual(again, steps) && !(len(again) == 0 && len(steps) == 0) {
			t.Fatalf("%q → %q → %v (%v), want %v", p, FormatPath(steps), again, err, steps)
		}
		d, err := DrillDown("r", drillJSON, DrillRequest{View: ViewJSON, Path: p})
		if err == nil && !json.Valid(d.Value) {
			t.Fatalf("%q: value %s", p, d.Value)
		}
		_ = fmt.Sprint(d)
	})
}

// TestParseDrillLines: a query parameter's lines, with the one statement
// of the bound (1 to 200, 0 or none the default).
func TestParseDrillLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  string
	}{
		{"", 0, ""},
		{"0", 0, ""},
		{"1", 1, ""},
		{"200", 200, ""},
		{"201", 0, "lines is 201; it must be between 1 and 200 (0 or none: the default, 20)"},
		{"-3", 0, "lines is -3; it must be between 1 and 200 (0 or none: the default, 20)"},
		{"ten", 0, `lines is "ten"; it must be between 1 and 200 (0 or none: the default, 20)`},
		{"99999999999999999999", 0, `lines is "99999999999999999999"; it must be between 1 and 200`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, err := ParseDrillLines(tc.in)
			if tc.err == "" {
				if err != nil || n != tc.want {
					t.Fatalf("ParseDrillLines(%q) = %d, %v; want %d", tc.in, n, err, tc.want)
				}
				return
			}
			var de *DrillError
			if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), tc.err) {
				t.Fatalf("ParseDrillLines(%q) = %d, %v; want a DrillError %q", tc.in, n, err, tc.err)
			}
		})
	}
}
