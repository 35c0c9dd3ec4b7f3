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

// maxDefsNodes bounds the values of an input schema with $defs: every value
// is written as at least 2 bytes, so past it the schema cannot fit in
// MaxInputSchemaBytes and the $defs still to convert would be cut anyway.
const maxDefsNodes = MaxInputSchemaBytes / 2

// MaxOpenAPIExpandedBytes bounds the work of making one document's input
// schemas, over all its operations: the schema text converted, references
// followed (a value counts its text, at least nodeBytes), and the input
// schemas written, every try of an operation counted (references copied in,
// then $defs, cut to fit). Converted $defs are shared by the operations
// that refer to the same, so operations of one large resource cost little
// more than their input schemas; without the bound, 10,000 operations each
// referring to a schema of 60 KB took 37 s and 1.6 GB, 10,000 referring to
// schemas doubling 20 times 115 s. The Kubernetes core API takes 4.7 MB.
const MaxOpenAPIExpandedBytes = 32 << 20

// MaxOpenAPIToolSchemaBytes bounds the input schemas of one document's
// tools together: checking them costs up to a microsecond a byte (a
// schema shared by operations is checked once), and the catalog holds them.
// The Kubernetes core API's come to 2.2 MB.
const MaxOpenAPIToolSchemaBytes = 8 << 20

// nodeBytes is what a value of a schema counts towards the bounds of the
// text it makes, whatever its own text: a value costs its conversion.
const nodeBytes = 8

// inputProperty is one property of an input schema before conversion.
type inputProperty struct {
	key         string
	schema      any // the OpenAPI schema, as JSON
	description string
	required    bool
}

// inputSchema is the operation's input schema, as JSON; cut reports that
// referenced schemas were left out to fit it. What it converts and writes
// counts to the document's expanded bytes (MaxOpenAPIExpandedBytes).
func (d *openAPIDoc) inputSchema(x *openAPIOperation) (raw []byte, cut bool, err error) {
	props := d.inputProperties(x)
	c := &schemaConverter{d: d, inline: true, maxNodes: maxInlineNodes}
	b, err := c.convert(props)
	d.expanded += c.spent + c.size
	if err == nil && !c.over {
		raw, err := b.write(nil)
		d.expanded += len(raw)
		if err == nil && schemaFits(raw) {
			return raw, false, nil
		}
	}
	c = &schemaConverter{d: d, maxNodes: maxDefsNodes}
	b, err = c.convert(props)
	d.expanded += c.spent + c.size
	if err != nil {
		return nil, false, err
	}
	if len(b.dropped) == 0 {
		raw, err = b.write(nil)
		d.expanded += len(raw)
		if err != nil || schemaFits(raw) {
			return raw, false, err
		}
	}
	raw, err = b.cut(c.names, &d.expanded)
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
	// nodes and size are the values converted and their text (at least
	// nodeBytes a value); past maxNodes or MaxInputSchemaBytes of text the
	// schema cannot fit, and conversion stops (over).
	nodes, size int
	maxNodes    int
	over        bool
	// spent is the text converted before the counts were reset (the
	// input schema's own properties, before its $defs).
	spent int
}

// defsKey names the $defs an input schema's own properties refer to, in
// order: the $defs, their names and what fits of them follow from it.
type defsKey string

// cachedDefs are the converted $defs of a defsKey, kept for the document's
// other operations that refer to the same: operations of one resource
// refer to one large schema, each of which would convert it anew.
type cachedDefs struct {
	defs, dropped []string
	vals          map[string]any
	names         map[string]string
	// keep is how many $defs the last cut kept, -1 before one.
	keep int
}

// built is an input schema before it is written: the object's own parts
// and its $defs in queue order.
type built struct {
	root map[string]any
	defs []string // names, in queue order
	vals map[string]any
	// dropped are the names of $defs not converted: past the bounds, they
	// could not be kept.
	dropped []string
	// cache holds them for other operations (nil: not cached).
	cache *cachedDefs
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
	if c.inline {
		return b, c.convertDefs(b)
	}
	if c.over {
		return nil, fmt.Errorf("inputSchema: more than %d bytes even without the schemas it refers to; at most %d bytes nested at most %d levels deep (leave the operation out with spec.tools.openAPI.exclude)",
			MaxInputSchemaBytes, MaxInputSchemaBytes, MaxInputSchemaDepth)
	}
	key := defsKey(strings.Join(c.queue, "\x00"))
	if cd, ok := c.d.defsCache[key]; ok {
		b.defs, b.dropped, b.vals, b.cache = cd.defs, cd.dropped, cd.vals, cd
		c.names = cd.names
		return b, nil
	}
	// The $defs are bounded by themselves, whatever the properties take,
	// so that they are the same for every operation of the same key.
	c.spent, c.nodes, c.size = c.size, 0, 0
	if err := c.convertDefs(b); err != nil {
		return nil, err
	}
	cd := &cachedDefs{defs: b.defs, dropped: b.dropped, vals: b.vals, names: c.names, keep: -1}
	if c.d.defsCache == nil {
		c.d.defsCache = map[defsKey]*cachedDefs{}
	}
	c.d.defsCache[key] = cd
	b.cache = cd
	return b, nil
}

// convertDefs converts the queued references into b's $defs, in queue
// order (nearest the operation first), until they cannot fit: the rest
// are dropped.
func (c *schemaConverter) convertDefs(b *built) error {
	for i := 0; i < len(c.queue); i++ {
		ref := c.queue[i]
		name := c.names[ref]
		if c.over {
			// Nearer $defs already fill the schema: this one is cut.
			b.dropped = append(b.dropped, name)
			continue
		}
		target, ok := resolvePointer(c.d.val, ref)
		if !ok {
			return fmt.Errorf("%q does not resolve", ref)
		}
		c.open = map[string]bool{ref: true}
		v := c.schema(target)
		if c.over {
			b.dropped = append(b.dropped, name)
			continue
		}
		b.defs = append(b.defs, name)
		b.vals[name] = v
	}
	return nil
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
// fit are found by bisection; $defs another operation cut keep as many as
// it kept if they fit (an operation's own properties differ little). names
// maps references to their $defs names; the bytes written are added to
// written.
func (b *built) cut(names map[string]string, written *int) ([]byte, error) {
	from := make(map[string]string, len(names))
	for ref, name := range names {
		from[name] = ref
	}
	omitting := func(keep int) map[string]string {
		omit := map[string]string{}
		for _, name := range append(b.defs[keep:len(b.defs):len(b.defs)], b.dropped...) {
			omit[name] = from[name]
		}
		return omit
	}
	var err error
	var last []byte // the last schema written
	fits := func(k int) bool {
		raw, werr := b.write(omitting(k))
		*written += len(raw)
		if werr != nil {
			err = werr
		}
		last = raw
		return werr == nil && schemaFits(raw)
	}
	if b.cache != nil && b.cache.keep >= 0 && fits(b.cache.keep) {
		// As many as another operation of the same $defs kept: one write.
		return last, nil
	}
	// true from the first count that does not fit on
	keep := sort.Search(len(b.defs)+1, func(k int) bool { return !fits(k) }) - 1
	if err != nil {
		return nil, err
	}
	if keep < 0 {
		raw, _ := b.write(omitting(0))
		return nil, fmt.Errorf("inputSchema: %d bytes even without the schemas it refers to; at most %d bytes nested at most %d levels deep (leave the operation out with spec.tools.openAPI.exclude)",
			len(raw), MaxInputSchemaBytes, MaxInputSchemaDepth)
	}
	if b.cache != nil {
		b.cache.keep = keep
	}
	raw, err := b.write(omitting(keep))
	*written += len(raw)
	return raw, err
}

// count counts a value of text bytes; false once the schema cannot fit.
func (c *schemaConverter) count(text int) bool {
	c.nodes++
	c.size += max(text, nodeBytes)
	if c.past() {
		c.over = true
	}
	return !c.over
}

// past reports whether the values counted cannot fit an input schema: too
// many, or their text too long — the text counted (size less nodeBytes a
// value at most) and 2 bytes a value at least (braces, quotes and colon
// around a keyword, or a schema's braces) that the count leaves out.
func (c *schemaConverter) past() bool {
	return c.nodes > c.maxNodes || c.size > MaxInputSchemaBytes+(nodeBytes-2)*c.nodes
}

// schema converts one schema.
func (c *schemaConverter) schema(v any) any {
	if c.over || !c.count(0) {
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
		top := len(c.open) == 0
		if top && c.d.tooLargeInline[ref] {
			c.over = true
			return map[string]any{}
		}
		// A reference from the properties themselves is counted alone
		// first: copied in, is it alone past the bound, in every operation?
		nodes, size := c.nodes, c.size
		if top {
			c.nodes, c.size = 0, 0
		}
		target, _ := resolvePointer(c.d.val, ref) // checkRefs found each
		c.open[ref] = true
		out = c.schema(target)
		delete(c.open, ref)
		if top {
			if c.over {
				if c.d.tooLargeInline == nil {
					c.d.tooLargeInline = map[string]bool{}
				}
				c.d.tooLargeInline[ref] = true
			}
			c.nodes, c.size = c.nodes+nodes, c.size+size
			c.over = c.over || c.past()
		}
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
				c.size += len(name)
				conv[name] = c.schema(s)
			}
			out[k] = conv
		default:
			c.count(len(k) + textSize(v, MaxInputSchemaBytes))
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

// textSize is the length of the text of a JSON value's strings, keys and
// scalars, counted up to limit: less than its JSON.
func textSize(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		switch x := v.(type) {
		case string:
			n += len(x)
		case map[string]any:
			for k, e := range x {
				n += len(k)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		default:
			n++
		}
	}
	walk(v)
	return n
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
