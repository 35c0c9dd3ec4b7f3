package sources

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// nestedSchema is an object schema whose property "a" is an object schema
// whose property "a" is ... levels deep: each level nests the JSON two
// deeper (the schema, its properties), so its JSON depth is 2*levels+1.
// leaf is the innermost schema.
func nestedSchema(levels int, leaf string) []byte {
	var b strings.Builder
	for range levels {
		b.WriteString(`{"type":"object","properties":{"a":`)
	}
	b.WriteString(leaf)
	for range levels {
		b.WriteString(`}}`)
	}
	return []byte(b.String())
}

func TestCheckInputSchemaBounds(t *testing.T) {
	half := MaxInputSchemaDepth / 2
	for _, c := range []struct {
		name   string
		schema []byte
		want   string // "" = accepted
	}{
		{"at the depth limit", nestedSchema(half-1, `{"type":"object","required":["a"]}`), ""},
		{"one level past it", nestedSchema(half-1, `{"type":"object","properties":{"b":{}}}`), "nested more than 64 levels deep"},
		{"490 levels", nestedSchema(490, `{"type":"object"}`), "nested more than 64 levels deep"},
		{"brackets in strings do not count", []byte(`{"type":"object","description":"` + strings.Repeat(`[{\"`, 100) + `"}`), ""},
		{"size", []byte(`{"type":"object","description":"` + strings.Repeat("x", MaxInputSchemaBytes) + `"}`), "bytes; at most 65536"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckInputSchema(c.schema)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestDecodeSchemaReadsAsTheLibrary holds decodeSchema to the library's own
// decoding: the same schemas accepted and refused, the same schema built.
func TestDecodeSchemaReadsAsTheLibrary(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		wantErr      string // of decodeSchema, when the library refuses too
	}{
		{"scalars", `{"type":"object","title":"T","description":"D","minProperties":1,"maxProperties":3.0,"required":["a"],"$comment":"c","default":{"b":1,"a":[2]}}`, ""},
		{"types", `{"type":["object","null"],"properties":{"n":{"type":"number","minimum":-1.5,"exclusiveMaximum":1e3,"multipleOf":0.5}}}`, ""},
		{"every keyword holding schemas", `{"type":"object",
			"$defs":{"d":{"type":"string","pattern":"^a"},"e":true},
			"properties":{"p":{"$ref":"#/$defs/d"},"l":{"type":"array","items":{"type":"integer"},"prefixItems":[{"const":1},false],"contains":{"minimum":3},"minContains":1,"unevaluatedItems":false}},
			"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":{"type":"boolean"},"propertyNames":{"maxLength":8},
			"unevaluatedProperties":false,"dependentSchemas":{"p":{"required":["l"]}},"dependentRequired":{"l":["p"]},
			"allOf":[{"minProperties":0}],"anyOf":[true,{"required":["p"]}],"oneOf":[{"required":["l"]},{"not":{"required":["l"]}}],
			"if":{"required":["p"]},"then":{"required":["l"]},"else":{"maxProperties":2},
			"contentSchema":{"type":"string"},"contentMediaType":"application/json","enum":[{"p":"x"}],"const":null}`, ""},
		{"items as a list and dependencies of both kinds", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
			"properties":{"t":{"type":"array","items":[{"type":"string"},{"type":"number"}],"additionalItems":false}},
			"dependencies":{"a":["b"],"c":{"required":["d"]}}}`, ""},
		{"unknown keywords are kept", `{"type":"object","x-order":[1,2],"nullable":true,"properties":{"a":{"examples":[1],"deprecated":true}}}`, ""},
		{"null schema keywords are absent", `{"type":"object","not":null,"properties":null,"allOf":null,"dependentSchemas":null}`, ""},
		{"null items and dependencies are false", `{"type":"object","items":null,"dependencies":{"a":null}}`, ""},
		{"definitions", `{"type":"object","definitions":{"e":{"type":"string"}},"properties":{"p":{"$ref":"#/definitions/e"}}}`, ""},
		{"booleans", `{"type":"object","properties":{"t":true,"f":false}}`, ""},
		{"a property schema that is a number", `{"type":"object","properties":{"q":3}}`, "inputSchema.properties[q]: a schema is an object or a boolean, not a number"},
		{"a null property schema", `{"type":"object","properties":{"q":{"items":[null]}}}`, "inputSchema.properties[q].items[0]: a schema is an object or a boolean, not null"},
		{"properties as a list", `{"type":"object","properties":[{}]}`, "inputSchema.properties: must be an object of schemas, not a list"},
		{"allOf as an object", `{"type":"object","allOf":{}}`, "inputSchema.allOf: must be a list of schemas, not an object"},
		{"a bad keyword value deep down", `{"type":"object","properties":{"a":{"properties":{"b":{"minLength":"x"}}}}}`, "inputSchema.properties[a].properties[b]: not a JSON Schema"},
		{"a bad type", `{"type":3}`, "inputSchema: not a JSON Schema"},
		{"a null type", `{"type":null}`, "inputSchema: not a JSON Schema"},
		{"not an object", `[1]`, "inputSchema: a schema is an object or a boolean, not a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var lib jsonschema.Schema
			libErr := json.Unmarshal([]byte(c.schema), &lib)
			if libErr == nil {
				_, libErr = lib.Resolve(nil) // a nil subschema is refused here
			}
			got, err := decodeSchema([]byte(c.schema))
			if err == nil {
				_, err = got.Resolve(nil)
			}
			if (err == nil) != (libErr == nil) {
				t.Fatalf("decodeSchema: %v; the library: %v", err, libErr)
			}
			if c.wantErr != "" {
				var se *schemaError
				if err == nil || !errorsAs(err, &se) || !strings.Contains(se.field+": "+se.msg, c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if g, w := schemaJSON(t, got), schemaJSON(t, &lib); !reflect.DeepEqual(g, w) {
				t.Errorf("decoded\n%v\nthe library\n%v", g, w)
			}
		})
	}
}

func errorsAs(err error, se **schemaError) bool {
	e, ok := err.(*schemaError)
	*se = e
	return ok
}

// schemaJSON is a schema as the library writes it, decoded generically, so
// that key order and spacing in raw values do not count.
func schemaJSON(t *testing.T, s *jsonschema.Schema) any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// BenchmarkCheckInputSchema checks schemas nested as deep as the limit
// allows, with the rest of the 64 KiB in the innermost schema (the worst
// case of a reading that decodes each level's subtree again), and a flat
// one of the same size.
func BenchmarkCheckInputSchema(b *testing.B) {
	levels := MaxInputSchemaDepth/2 - 1
	fill := func(prefix []byte) string {
		return strings.Repeat("x", MaxInputSchemaBytes-len(prefix)-64)
	}
	deep := nestedSchema(levels, `{"type":"object","description":"%s"}`)
	deep = fmt.Appendf(nil, string(deep), fill(deep))
	var props strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&props, `"p%d":{"type":"string","maxLength":%d},`, i, i)
	}
	flat := []byte(`{"type":"object","properties":{` + strings.TrimSuffix(props.String(), ",") + `}}`)
	for _, c := range []struct {
		name   string
		schema []byte
	}{{"deep", deep}, {"flat", flat}} {
		if err := CheckInputSchema(c.schema); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.schema)))
			for b.Loop() {
				if err := CheckInputSchema(c.schema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeSchema compares the library's decoding of a schema with
// decodeSchema's as the nesting grows (the limit is 31 levels; 490 is what
// a server could send before there was one).
func BenchmarkDecodeSchema(b *testing.B) {
	for _, levels := range []int{31, 490} {
		raw := nestedSchema(levels, `{"type":"object"}`)
		b.Run(fmt.Sprintf("levels=%d/library", levels), func(b *testing.B) {
			for b.Loop() {
				var s jsonschema.Schema
				if err := json.Unmarshal(raw, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("levels=%d/linear", levels), func(b *testing.B) {
			for b.Loop() {
				if _, err := decodeSchema(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
