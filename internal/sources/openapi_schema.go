package sources

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// The input schema of an operation's tool (api.md §10.1): an object whose
// properties are the operation's parameters, by name, and its request body,
// as "body". Schemas become JSON Schema draft 2020-12; a reference is copied
// in where it stands, or, for recursion and when copying makes the schema
// too large, goes under the schema's $defs.

// bodyProperty is the property of the request body.
const bodyProperty = "body"

// maxInlineNodes bounds the values copying references in may make: a schema
// referring to another twice, which refers to another twice, and so on,
// doubles with every level. Past it, references go under $defs, which holds
// each once.
const maxInlineNodes = MaxInputSchemaBytes / 4

// inputProperty is one property of an input schema before conversion.
type inputProperty struct {
	key         string
	schema      any // the OpenAPI schema, as JSON
	description string
	required    bool
}

// inputSchema is the operation's input schema, as JSON; cut reports that
// referenced schemas were left out to fit it.
func (d *openAPIDoc) inputSchema(x *openAPIOperation) (raw []byte, cut bool, err error) {
	props := d.inputProperties(x)
	c := &schemaConverter{d: d, inline: true}
	if b, err := c.convert(props); err == nil && !c.over {
		if raw, err := b.write(nil); err == nil && schemaFits(raw) {
			return raw, false, nil
		}
	}
	c = &schemaConverter{d: d}
	b, err := c.convert(props)
	if err != nil {
		return nil, false, err
	}
	if raw, err = b.write(nil); err != nil || schemaFits(raw) {
		return raw, false, err
	}
	raw, err = b.cut(c.names)
	return raw, true, err
}

func schemaFits(raw []byte) bool {
	return len(raw) <= MaxInputSchemaBytes && !jsonTooDeep(raw, MaxInputSchemaDepth)
}

// inputProperties lists the parameters (the path item's, then the
// operation's, which replace one of the same name and location) and the
// request body. A name that two of them share is prefixed with the
// location: path_id, query_id. kin-openapi says what each is; their schemas
// are read from the document as written, $ref and the keywords beside it.
func (d *openAPIDoc) inputProperties(x *openAPIOperation) []inputProperty {
	type param struct {
		p   *openapi3.Parameter
		raw map[string]any
	}
	var params []param
	index := map[[2]string]int{}
	rawItem := d.follow(lookup(d.val, "paths", x.path))
	rawOp := d.follow(lookup(rawItem, strings.ToLower(x.method)))
	for _, l := range []struct {
		list openapi3.Parameters
		raw  any
	}{{x.item.Parameters, lookup(rawItem, "parameters")}, {x.op.Parameters, lookup(rawOp, "parameters")}} {
		raws, _ := l.raw.([]any)
		for i, pr := range l.list {
			if pr.Value == nil || i >= len(raws) {
				continue
			}
			rp, _ := d.follow(raws[i]).(map[string]any)
			k := [2]string{pr.Value.In, pr.Value.Name}
			if j, ok := index[k]; ok {
				params[j] = param{pr.Value, rp}
				continue
			}
			index[k] = len(params)
			params = append(params, param{pr.Value, rp})
		}
	}
	var body *openapi3.RequestBody
	if x.op.RequestBody != nil {
		body = x.op.RequestBody.Value
	}
	uses := map[string]int{}
	for _, p := range params {
		uses[p.p.Name]++
	}
	if body != nil {
		uses[bodyProperty]++
	}
	var out []inputProperty
	for _, p := range params {
		key := p.p.Name
		if uses[key] > 1 {
			key = p.p.In + "_" + p.p.Name
		}
		schema, ok := p.raw["schema"]
		if !ok {
			schema = d.mediaSchema(p.raw["content"])
		}
		out = append(out, inputProperty{key: key, schema: orAny(schema), description: p.p.Description, required: p.p.Required || p.p.In == openapi3.ParameterInPath})
	}
	if body != nil {
		rawBody := d.follow(lookup(rawOp, "requestBody"))
		out = append(out, inputProperty{key: bodyProperty, schema: orAny(d.mediaSchema(lookup(rawBody, "content"))), description: body.Description, required: body.Required})
	}
	return out
}

// orAny is a schema, or {} (any value) for none.
func orAny(s any) any {
	if s == nil {
		return map[string]any{}
	}
	return s
}

// lookup walks members of JSON objects; nil when one is missing.
func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// maxRefHops bounds a chain of references (a $ref to a $ref …), which a
// document could make a cycle of.
const maxRefHops = 32

// follow resolves a value that is a reference (a parameter, a request body,
// a path item written as {"$ref": …}) to what it refers to.
func (d *openAPIDoc) follow(v any) any {
	for range maxRefHops {
		ref, ok := lookup(v, "$ref").(string)
		if !ok {
			return v
		}
		if v, ok = resolvePointer(d.val, ref); !ok {
			return nil
		}
	}
	return nil
}

// mediaSchema is the schema, as written, of the media type of a content map
// a client would send: application/json, else another JSON type, else a
// form, else the first by name.
func (d *openAPIDoc) mediaSchema(content any) any {
	m, _ := d.follow(content).(map[string]any)
	if len(m) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(m))
	rank := func(mt string) int {
		base, _, _ := strings.Cut(strings.ToLower(mt), ";")
		base = strings.TrimSpace(base)
		switch {
		case base == "application/json":
			return 0
		case strings.HasSuffix(base, "+json") || strings.HasSuffix(base, "/json"):
			return 1
		case base == "application/x-www-form-urlencoded" || base == "multipart/form-data":
			return 2
		}
		return 3
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	return lookup(d.follow(m[names[0]]), "schema")
}

// schemaConverter turns OpenAPI schemas into JSON Schema draft 2020-12.
// With inline, a reference is copied in unless it is being copied already
// (recursion); otherwise, and for recursion, it becomes a $ref into the
// input schema's $defs, which holds each referenced schema once.
type schemaConverter struct {
	d      *openAPIDoc
	inline bool
	// open are the references being copied in.
	open map[string]bool
	// names are the $defs names of references, queue the references in
	// the order of their first use (nearest the operation first).
	names map[string]string
	taken map[string]bool
	queue []string
	nodes int
	over  bool // copying passed maxInlineNodes
}

// built is an input schema before it is written: the object's own parts
// and its $defs in queue order.
type built struct {
	root map[string]any
	defs []string // names, in queue order
	vals map[string]any
}

// convert converts the properties into an input schema and the schemas
// its references name.
func (c *schemaConverter) convert(props []inputProperty) (*built, error) {
	c.open, c.names, c.taken = map[string]bool{}, map[string]string{}, map[string]bool{}
	properties := map[string]any{}
	var required []string
	for _, p := range props {
		properties[p.key] = withDescription(c.schema(p.schema), p.description)
		if p.required {
			required = append(required, p.key)
		}
	}
	root := map[string]any{"type": "object"}
	if len(properties) > 0 {
		root["properties"] = properties
	}
	if len(required) > 0 {
		root["required"] = required
	}
	b := &built{root: root, vals: map[string]any{}}
	for i := 0; i < len(c.queue); i++ {
		ref := c.queue[i]
		target, ok := resolvePointer(c.d.val, ref)
		if !ok {
			return nil, fmt.Errorf("%q does not resolve", ref)
		}
		c.open = map[string]bool{ref: true}
		name := c.names[ref]
		b.defs = append(b.defs, name)
		b.vals[name] = c.schema(target)
	}
	return b, nil
}

// write writes the schema; the $defs named in omit are left out and
// references to them replaced by a description saying so.
func (b *built) write(omit map[string]string) ([]byte, error) {
	root := b.root
	if len(b.defs) > 0 {
		defs := map[string]any{}
		for _, name := range b.defs {
			if _, gone := omit[name]; !gone {
				defs[name] = b.vals[name]
			}
		}
		root = maps.Clone(root)
		if len(defs) > 0 {
			root["$defs"] = defs
		}
	}
	var v any = root
	if len(omit) > 0 {
		v = omitRefs(root, omit)
	}
	return json.Marshal(v)
}

// cut fits a schema whose $defs make it too large: it keeps the $defs
// nearest the operation that fit and leaves the others out, saying so where
// they were referenced. Fewer $defs make a smaller schema, so the most that
// fit are found by bisection. names maps references to their $defs names.
func (b *built) cut(names map[string]string) ([]byte, error) {
	from := make(map[string]string, len(names))
	for ref, name := range names {
		from[name] = ref
	}
	omitting := func(keep int) map[string]string {
		omit := map[string]string{}
		for _, name := range b.defs[keep:] {
			omit[name] = from[name]
		}
		return omit
	}
	var err error
	keep := sort.Search(len(b.defs)+1, func(k int) bool {
		// true from the first count that does not fit on
		raw, werr := b.write(omitting(k))
		if werr != nil {
			err = werr
			return true
		}
		return !schemaFits(raw)
	}) - 1
	if err != nil {
		return nil, err
	}
	if keep < 0 {
		raw, _ := b.write(omitting(0))
		return nil, fmt.Errorf("inputSchema: %d bytes even without the schemas it refers to; at most %d bytes nested at most %d levels deep (leave the operation out with spec.tools.openAPI.exclude)",
			len(raw), MaxInputSchemaBytes, MaxInputSchemaDepth)
	}
	return b.write(omitting(keep))
}

// schema converts one schema.
func (c *schemaConverter) schema(v any) any {
	c.nodes++
	if c.inline && c.nodes > maxInlineNodes {
		c.over = true
		return map[string]any{}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v // a boolean schema, or not a schema (which the check of input schemas names)
	}
	if ref, ok := m["$ref"].(string); ok {
		return c.ref(ref, m)
	}
	return c.object(m)
}

// ref converts a reference: copied in, or a $ref into $defs. OpenAPI 3.1
// (JSON Schema) applies the keywords beside a $ref as well; 3.0 ignores them.
func (c *schemaConverter) ref(ref string, m map[string]any) any {
	var out any
	if c.inline && !c.open[ref] {
		target, _ := resolvePointer(c.d.val, ref) // checkRefs found each
		c.open[ref] = true
		out = c.schema(target)
		delete(c.open, ref)
	} else {
		out = map[string]any{"$ref": "#/$defs/" + c.defName(ref)}
	}
	if c.d.v30 || len(m) == 1 {
		return out
	}
	sib := maps.Clone(m)
	delete(sib, "$ref")
	conv := c.object(sib)
	all, _ := conv["allOf"].([]any)
	conv["allOf"] = append([]any{out}, all...)
	return conv
}

// defName is the name of a reference under $defs: the last step of its
// pointer, made of characters a pointer need not escape, unique.
func (c *schemaConverter) defName(ref string) string {
	if n, ok := c.names[ref]; ok {
		return n
	}
	steps := strings.Split(ref, "/")
	base := strings.Map(func(r rune) rune {
		if isAlnum(r) || r == '_' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, unescapePointerStep(steps[len(steps)-1]))
	if base == "" {
		base = "schema"
	}
	name := base
	for i := 2; c.taken[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	c.names[ref], c.taken[name] = name, true
	c.queue = append(c.queue, ref)
	return name
}

// Keywords of OpenAPI schemas that JSON Schema does not have, or that an
// input schema cannot keep: OpenAPI's own, and those that change how
// references resolve (every reference is rewritten into the input schema's
// own $defs).
var droppedKeywords = map[string]bool{
	"discriminator": true, "xml": true, "externalDocs": true, "nullable": true,
	"$schema": true, "$id": true, "$anchor": true, "$dynamicAnchor": true, "$dynamicRef": true,
	"$comment": true, "$defs": true, "definitions": true,
}

// Keywords whose value is a schema, a list of schemas, or an object of them.
var (
	oneSchemaKeywords = map[string]bool{"items": true, "not": true, "additionalProperties": true, "contains": true,
		"propertyNames": true, "if": true, "then": true, "else": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contentSchema": true, "additionalItems": true}
	listSchemaKeywords  = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	namedSchemaKeywords = map[string]bool{"properties": true, "patternProperties": true, "dependentSchemas": true}
)

// object converts a schema object's keywords.
func (c *schemaConverter) object(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch {
		case droppedKeywords[k] || strings.HasPrefix(k, "x-"):
		case k == "example":
			if _, has := m["examples"]; !has {
				out["examples"] = []any{v}
			}
		case (k == "exclusiveMinimum" || k == "exclusiveMaximum") && isBool(v):
			// OpenAPI 3.0: a flag on minimum or maximum; JSON Schema: the bound.
			bound := map[string]string{"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}[k]
			if v == true && m[bound] != nil {
				out[k] = m[bound]
			}
		case (k == "minimum" || k == "maximum") && m["exclusive"+strings.ToUpper(k[:1])+k[1:]] == true:
			// Moved to exclusiveMinimum or exclusiveMaximum above.
		case oneSchemaKeywords[k] && !(k == "items" && isList(v)):
			out[k] = c.schema(v)
		case listSchemaKeywords[k] || (k == "items" && isList(v)):
			list, _ := v.([]any)
			conv := make([]any, len(list))
			for i, s := range list {
				conv[i] = c.schema(s)
			}
			out[k] = conv
		case namedSchemaKeywords[k]:
			named, _ := v.(map[string]any)
			conv := make(map[string]any, len(named))
			for name, s := range named {
				conv[name] = c.schema(s)
			}
			out[k] = conv
		default:
			c.nodes++
			out[k] = v
		}
	}
	if m["nullable"] == true {
		addNull(out)
	}
	return out
}

// addNull lets a schema of OpenAPI 3.0 with nullable: true take null: in
// its type and, if it has one, its enum.
func addNull(s map[string]any) {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []any{t, "null"}
	case []any:
		if !slices.Contains(t, any("null")) {
			s["type"] = append(t, "null")
		}
	}
	if e, ok := s["enum"].([]any); ok && !slices.Contains(e, nil) {
		s["enum"] = append(e, nil)
	}
}

func isBool(v any) bool { _, ok := v.(bool); return ok }
func isList(v any) bool { _, ok := v.([]any); return ok }

// withDescription gives a property the description of its parameter or
// body, unless its schema has its own.
func withDescription(s any, desc string) any {
	desc = strings.TrimSpace(desc)
	if desc == "" {
		return s
	}
	switch v := s.(type) {
	case map[string]any:
		if _, has := v["description"]; !has {
			v = maps.Clone(v)
			v["description"] = desc
		}
		return v
	case bool:
		if v {
			return map[string]any{"description": desc}
		}
	}
	return s
}

// omitRefs copies v with every reference to a name of omit replaced by a
// description of what was left out.
func omitRefs(v any, omit map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if from, gone := omit[strings.TrimPrefix(ref, "#/$defs/")]; gone && strings.HasPrefix(ref, "#/$defs/") {
				out := map[string]any{"description": "omitted: " + from + " (the input schema is limited to 64 KiB)"}
				for k, s := range x {
					if k != "$ref" {
						out[k] = omitRefs(s, omit)
					}
				}
				return out
			}
		}
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[k] = omitRefs(s, omit)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = omitRefs(s, omit)
		}
		return out
	}
	return v
}

// resolvePointer finds a reference inside a JSON value: "#" is the value,
// "#/a/b~1c" the member b/c of the member a. Steps are percent-decoded
// (a URI fragment), then ~1 and ~0 unescaped.
func resolvePointer(doc any, ref string) (any, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return doc, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false // a named anchor, which documents cannot declare here
	}
	cur := doc
	for _, step := range strings.Split(frag[1:], "/") {
		step = unescapePointerStep(step)
		switch v := cur.(type) {
		case map[string]any:
			if cur, ok = v[step]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func unescapePointerStep(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}
