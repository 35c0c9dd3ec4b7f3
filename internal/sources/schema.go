package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/internal/located"
)

// jsonTooDeep reports whether raw, a JSON text, nests objects and arrays
// more than limit levels deep. One pass, strings skipped: it runs before
// anything whose cost grows with the depth.
func jsonTooDeep(raw []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// schemaKeyword is where a keyword whose value holds schemas goes in a
// jsonschema.Schema.
type schemaKeyword struct {
	field reflect.StructField
	// list or named: an array of schemas or an object of them; else one.
	list, named bool
}

// schemaKeywords are read from the library's own fields (their JSON names),
// so that a keyword it learns is not missed here. "items" (one schema or an
// array of them) and "dependencies" (schemas or lists of names) have no
// JSON name there; decodeSchema handles them itself.
var schemaKeywords = func() map[string]schemaKeyword {
	one := reflect.TypeFor[*jsonschema.Schema]()
	list := reflect.TypeFor[[]*jsonschema.Schema]()
	named := reflect.TypeFor[map[string]*jsonschema.Schema]()
	out := map[string]schemaKeyword{}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[jsonschema.Schema]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch f.Type {
		case one, list, named:
			out[name] = schemaKeyword{field: f, list: f.Type == list, named: f.Type == named}
		}
	}
	return out
}()

// schemaError is a problem at a place in an input schema; field is its
// path from the tool ("inputSchema.properties[q].items").
type schemaError struct {
	field string
	msg   string
}

func (e *schemaError) Error() string { return e.msg }

// inputSchemaPath is the path of a tool's input schema, under which
// decodeSchema names the place of a problem.
var inputSchemaPath = field.NewPath("inputSchema")

// decodeSchema reads a JSON Schema in time linear in its size. The library's
// own decoding hands every level its whole subtree again (and decodes it
// twice, once into a generic map), which is quadratic in the depth. Here the
// text is decoded once; each schema's own keywords (those that hold no
// schemas) go through the library's decoding, so their meaning is the
// library's, and the subschemas, built first, are set in place.
func decodeSchema(raw []byte) (*jsonschema.Schema, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers reach the library as written
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON after the schema")
	}
	return buildSchema(v, inputSchemaPath)
}

// buildSchema builds the schema v found at p.
func buildSchema(v any, p *field.Path) (*jsonschema.Schema, error) {
	s := new(jsonschema.Schema)
	obj, ok := v.(map[string]any)
	if !ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, &schemaError{p.String(), "a schema is an object or a boolean, not " + kindOf(v)}
		}
		// true and false mean what the library makes of them.
		return s, json.Unmarshal([]byte(strconv.FormatBool(b)), s)
	}
	own := make(map[string]any, len(obj))
	var subs []string // keywords holding schemas
	for k, val := range obj {
		_, holdsSchemas := schemaKeywords[k]
		switch {
		case val == nil && k == "items":
			// The library reads it as false (its decoder of a schema takes
			// null for a boolean); so does this.
			subs = append(subs, k)
			obj[k] = false
		case val == nil && (holdsSchemas || k == "dependencies"):
			// A null keyword is its absence, as the library reads it.
		case holdsSchemas || k == "items":
			subs = append(subs, k)
		case k == "dependencies":
			// Schemas, or lists of property names (the library's reading).
			deps, ok := val.(map[string]any)
			if !ok {
				return nil, &schemaError{p.Child(k).String(), "must be an object, not " + kindOf(val)}
			}
			names := map[string]any{}
			for name, d := range deps {
				if d == nil {
					d = false // as "items": null
				}
				if _, isList := d.([]any); isList {
					names[name] = d
					continue
				}
				sub, err := buildSchema(d, p.Child(k).Key(name))
				if err != nil {
					return nil, err
				}
				if s.DependencySchemas == nil {
					s.DependencySchemas = map[string]*jsonschema.Schema{}
				}
				s.DependencySchemas[name] = sub
			}
			if len(names) > 0 {
				own[k] = names
			}
		default:
			own[k] = val
		}
	}
	if len(own) > 0 {
		b, err := json.Marshal(own)
		if err == nil {
			err = json.Unmarshal(b, s)
		}
		if err != nil {
			return nil, &schemaError{p.String(), "not a JSON Schema: " + strings.TrimPrefix(err.Error(), "json: ")}
		}
	}
	sv := reflect.ValueOf(s).Elem()
	for _, k := range subs {
		val, kp := obj[k], p.Child(k)
		if k == "items" {
			if list, ok := val.([]any); ok {
				items, err := buildSchemas(list, kp)
				if err != nil {
					return nil, err
				}
				s.ItemsArray = items
				continue
			}
			sub, err := buildSchema(val, kp)
			if err != nil {
				return nil, err
			}
			s.Items = sub
			continue
		}
		kw := schemaKeywords[k]
		f := sv.FieldByIndex(kw.field.Index)
		switch {
		case kw.list:
			list, ok := val.([]any)
			if !ok {
				return nil, &schemaError{kp.String(), "must be a list of schemas, not " + kindOf(val)}
			}
			subs, err := buildSchemas(list, kp)
			if err != nil {
				return nil, err
			}
			f.Set(reflect.ValueOf(subs))
		case kw.named:
			m, ok := val.(map[string]any)
			if !ok {
				return nil, &schemaError{kp.String(), "must be an object of schemas, not " + kindOf(val)}
			}
			out := make(map[string]*jsonschema.Schema, len(m))
			for name, e := range m {
				sub, err := buildSchema(e, kp.Key(name))
				if err != nil {
					return nil, err
				}
				out[name] = sub
			}
			f.Set(reflect.ValueOf(out))
		default:
			sub, err := buildSchema(val, kp)
			if err != nil {
				return nil, err
			}
			f.Set(reflect.ValueOf(sub))
		}
	}
	return s, nil
}

func buildSchemas(list []any, p *field.Path) ([]*jsonschema.Schema, error) {
	out := make([]*jsonschema.Schema, len(list))
	for i, e := range list {
		sub, err := buildSchema(e, p.Index(i))
		if err != nil {
			return nil, err
		}
		out[i] = sub
	}
	return out, nil
}

// kindOf names the JSON type of a decoded value (only errors ask).
func kindOf(v any) string {
	b, _ := json.Marshal(v)
	return located.JSONValueKind(b)
}
