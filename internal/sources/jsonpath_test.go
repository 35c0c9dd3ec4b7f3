package sources

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseFieldPath(t *testing.T) {
	tests := []struct {
		in      string
		want    []pathSeg
		wantErr string
	}{
		{in: "", want: nil},
		{in: "text", want: []pathSeg{{"text", -1}}},
		{in: "data.0.items", want: []pathSeg{{"data", -1}, {"0", 0}, {"items", -1}}},
		{in: "a.12.b c", want: []pathSeg{{"a", -1}, {"12", 12}, {"b c", -1}}},
		{in: "a.-1", want: []pathSeg{{"a", -1}, {"-1", -1}}},
		{in: "a.99999999999999999999999", want: []pathSeg{{"a", -1}, {"99999999999999999999999", -1}}},
		{in: "a..b", wantErr: `empty segment 2 in "a..b"`},
		{in: ".a", wantErr: `empty segment 1 in ".a"`},
		{in: "a.", wantErr: `empty segment 2 in "a."`},
		{in: ".", wantErr: `empty segment 1 in "."`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := parseFieldPath(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.segs, tt.want) {
				t.Errorf("segs = %#v, want %#v", p.segs, tt.want)
			}
			if p.String() != tt.in {
				t.Errorf("String() = %q, want %q", p.String(), tt.in)
			}
		})
	}
}

func TestFieldPathLookup(t *testing.T) {
	const doc = `{
		"data": [{"items": [{"t": "first"}, {"t": "second"}]}],
		"byNumber": {"0": "zero key"},
		"n": 1.50,
		"yes": false,
		"nothing": null,
		"s": "str"
	}`
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path      string
		wantText  string
		wantFound bool
		wantKind  string
	}{
		{path: "data.0.items.1.t", wantText: "second", wantFound: true, wantKind: "a string"},
		{path: "data.0.items", wantFound: true, wantKind: "a list"},
		{path: "data.0", wantFound: true, wantKind: "an object"},
		{path: "byNumber.0", wantText: "zero key", wantFound: true, wantKind: "a string"},
		{path: "n", wantText: "1.50", wantFound: true, wantKind: "a number"},
		{path: "yes", wantText: "false", wantFound: true, wantKind: "a boolean"},
		{path: "nothing", wantFound: true, wantKind: "null"},
		{path: "data.1", wantFound: false},
		{path: "data.x", wantFound: false},
		{path: "s.0", wantFound: false},
		{path: "missing.t", wantFound: false},
		{path: "data.0.items.-1", wantFound: false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p, err := parseFieldPath(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			got, found := p.lookup(v)
			if found != tt.wantFound {
				t.Fatalf("found = %v, want %v (value %v)", found, tt.wantFound, got)
			}
			if !found {
				return
			}
			if k := jsonKind(got); k != tt.wantKind {
				t.Errorf("kind = %q, want %q", k, tt.wantKind)
			}
			text, ok := scalarText(got)
			if ok != (tt.wantText != "") || text != tt.wantText {
				t.Errorf("scalarText = %q, %v; want %q", text, ok, tt.wantText)
			}
		})
	}

	t.Run("empty path is the value", func(t *testing.T) {
		p, _ := parseFieldPath("")
		got, found := p.lookup(v)
		if !found || !reflect.DeepEqual(got, v) || !p.isEmpty() {
			t.Errorf("lookup(\"\") = %v, %v", got, found)
		}
	})
}
