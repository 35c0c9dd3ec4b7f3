package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// The test documents: the Petstore is the example's (examples/openapi), an
// OpenAPI 3.0 document of the public Swagger Petstore's 19 operations.
const (
	petstoreDoc  = "../../examples/openapi/api/petstore.yaml"
	incidentsDoc = "testdata/openapi/incidents-3.1.json"
)

// readTestDoc reads a test document as a file named by its base name.
func readTestDoc(t testing.TB, path string) Chunk {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Chunk{Path: filepath.Base(path), Content: string(b)}
}

func toolsByID(tools []v1alpha1.Tool) map[string]v1alpha1.Tool {
	out := map[string]v1alpha1.Tool{}
	for _, t := range tools {
		out[t.ID()] = t
	}
	return out
}

func ids(tools []v1alpha1.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.ID())
	}
	return out
}

// schemaOf decodes a tool's input schema.
func schemaOf(t *testing.T, tool v1alpha1.Tool) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(tool.InputSchema.Raw, &m); err != nil {
		t.Fatalf("%s: %v", tool.ID(), err)
	}
	return m
}

// at walks a decoded JSON value by object keys.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestOpenAPIPetstore reads the Petstore (OpenAPI 3.0): one tool per
// operation, named by operationId, described by summary, description and
// method and path, with parameters and body as the input schema and side
// effects from the method.
func TestOpenAPIPetstore(t *testing.T) {
	tools, err := ParseOpenAPI([]Chunk{readTestDoc(t, petstoreDoc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"addPet", "createUser", "createUsersWithListInput", "deleteOrder", "deletePet", "deleteUser",
		"findPetsByStatus", "findPetsByTags", "getInventory", "getOrderById", "getPetById", "getUserByName",
		"loginUser", "logoutUser", "placeOrder", "updatePet", "updatePetWithForm", "updateUser", "uploadFile"}
	if got := ids(tools); !slices.Equal(got, want) {
		t.Fatalf("tools = %q\nwant %q", got, want)
	}
	byID := toolsByID(tools)
	for _, tl := range tools {
		if err := CheckInputSchema(tl.InputSchema.Raw); err != nil {
			t.Errorf("%s: input schema: %v", tl.ID(), err)
		}
		if len(tl.Tags) != 1 {
			t.Errorf("%s: tags %q, want its one tag", tl.ID(), tl.Tags)
		}
	}

	se := map[string]v1alpha1.SideEffects{"findPetsByStatus": v1alpha1.SideEffectsRead, "addPet": v1alpha1.SideEffectsWrite,
		"updatePet": v1alpha1.SideEffectsWrite, "deletePet": v1alpha1.SideEffectsDestructive, "logoutUser": v1alpha1.SideEffectsRead}
	for id, w := range se {
		if got := byID[id].SideEffects; got != w {
			t.Errorf("%s: side effects %s, want %s", id, got, w)
		}
	}

	f := byID["findPetsByStatus"]
	if f.Description != "Find pets by status\n\nSeveral status values can be given, separated by commas.\n\nGET /pet/findByStatus" || !slices.Equal(f.Tags, []string{"pet"}) {
		t.Errorf("findPetsByStatus: %q %q", f.Description, f.Tags)
	}
	if got := jsonText(schemaOf(t, f)); got != `{"properties":{"status":{"default":"available","description":"Status values to filter by","enum":["available","pending","sold"],"type":"string"}},"type":"object"}` {
		t.Errorf("findPetsByStatus schema = %s", got)
	}

	// Path-level parameters join the operation's; path parameters are required.
	d := schemaOf(t, byID["deletePet"])
	if jsonText(at(d, "required")) != `["petId"]` || at(d, "properties", "petId", "type") != "integer" || at(d, "properties", "api_key", "type") != "string" {
		t.Errorf("deletePet schema = %s", jsonText(d))
	}

	// A request body by reference, required, its schema's references copied in
	// (Category, Tag), OpenAPI's xml dropped, example become examples.
	a := schemaOf(t, byID["addPet"])
	body := at(a, "properties", "body")
	if jsonText(at(a, "required")) != `["body"]` || at(body, "description") != "Pet object that needs to be added to the store" ||
		jsonText(at(body, "required")) != `["name","photoUrls"]` || at(body, "properties", "category", "properties", "name", "type") != "string" ||
		at(body, "properties", "tags", "items", "properties", "id", "format") != "int64" || jsonText(at(body, "properties", "name", "examples")) != `["doggie"]` {
		t.Errorf("addPet schema = %s", jsonText(a))
	}
	if s := string(byID["addPet"].InputSchema.Raw); strings.Contains(s, "xml") || strings.Contains(s, "$ref") || strings.Contains(s, `"example"`) {
		t.Errorf("addPet schema keeps OpenAPI's own words or a reference: %s", s)
	}

	// JSON is the body's media type before XML and forms; another type when it is the only one.
	if at(schemaOf(t, byID["placeOrder"]), "properties", "body", "properties", "status", "enum") == nil {
		t.Errorf("placeOrder body = %s", byID["placeOrder"].InputSchema.Raw)
	}
	u := schemaOf(t, byID["uploadFile"])
	if at(u, "properties", "body", "format") != "binary" || at(u, "properties", "additionalMetadata", "type") != "string" || jsonText(at(u, "required")) != `["petId"]` {
		t.Errorf("uploadFile schema = %s", jsonText(u))
	}
	if got := string(byID["getInventory"].InputSchema.Raw); got != `{"type":"object"}` {
		t.Errorf("getInventory schema = %s, want an object without properties", got)
	}
}

// TestOpenAPI31 reads an OpenAPI 3.1 document (JSON): JSON Schema 2020-12
// kept as is, $ref with keywords beside it, recursion under $defs, names
// without operationId, parameter names shared by two locations, the
// x-contextrouter extension, deprecated operations and webhooks left out.
func TestOpenAPI31(t *testing.T) {
	tools, err := ParseOpenAPI([]Chunk{readTestDoc(t, incidentsDoc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"get_incidents_id", "incidents.comment", "incidents.list", "incidents.open", "incidents.resolve", "incidents.search"}
	if got := ids(tools); !slices.Equal(got, want) {
		t.Fatalf("tools = %q\nwant %q (deprecated delete and the webhook left out)", got, want)
	}
	byID := toolsByID(tools)

	l := schemaOf(t, byID["incidents.list"])
	if jsonText(at(l, "properties", "severity")) != `{"enum":["sev1","sev2","sev3",null],"type":["string","null"]}` ||
		at(l, "properties", "limit", "exclusiveMinimum") != float64(0) ||
		jsonText(at(l, "properties", "team")) != `{"description":"Only this team's incidents","examples":["payments","platform"],"type":"string"}` {
		t.Errorf("incidents.list schema = %s", jsonText(l))
	}

	g := schemaOf(t, byID["get_incidents_id"])
	if at(g, "properties", "path_id", "pattern") != "^INC-[0-9]+$" || at(g, "properties", "query_id", "description") != "Another incident to compare with" ||
		jsonText(at(g, "required")) != `["path_id"]` {
		t.Errorf("get_incidents_id schema = %s", jsonText(g))
	}

	// A JSON media type other than application/json wins over text/plain.
	o := byID["incidents.open"]
	if at(schemaOf(t, o), "properties", "body", "properties", "severity", "const") != "sev1" {
		t.Errorf("incidents.open schema = %s", o.InputSchema.Raw)
	}
	if o.SideEffects != v1alpha1.SideEffectsWrite || !slices.Equal(o.SafetyTags, []string{"paging"}) || o.CostHint != "pages a human" ||
		!slices.Equal(o.Examples, []string{"the checkout service is down, page someone"}) {
		t.Errorf("incidents.open from x-contextrouter: %+v", o)
	}
	if c := byID["incidents.comment"]; c.SideEffects != v1alpha1.SideEffectsNone || !slices.Equal(c.Tags, []string{"incidents", "timeline"}) {
		t.Errorf("incidents.comment: side effects %s, tags %q", c.SideEffects, c.Tags)
	}

	// 3.1: the keywords beside a $ref apply too.
	r := schemaOf(t, byID["incidents.resolve"])
	if at(r, "properties", "body", "description") != "How it ended" || at(r, "properties", "body", "allOf") == nil {
		t.Errorf("incidents.resolve schema = %s", jsonText(r))
	}

	// A recursive schema: copied in once, the recursion a $ref into $defs.
	c := byID["incidents.comment"]
	cs := schemaOf(t, c)
	if at(cs, "properties", "body", "properties", "replies", "items", "$ref") != "#/$defs/Comment" ||
		at(cs, "$defs", "Comment", "properties", "replies", "items", "$ref") != "#/$defs/Comment" {
		t.Errorf("incidents.comment schema = %s", c.InputSchema.Raw)
	}
	if err := CheckInputSchema(c.InputSchema.Raw); err != nil {
		t.Errorf("recursive schema: %v", err)
	}
}

// TestOpenAPIOptions: namespace, include and exclude by tag and glob,
// deprecated operations, and overrides after x-contextrouter.
func TestOpenAPIOptions(t *testing.T) {
	sel := func(tags []string, ops ...string) *v1alpha1.OperationSelector {
		return &v1alpha1.OperationSelector{Tags: tags, Operations: ops}
	}
	tests := []struct {
		name  string
		opts  v1alpha1.OpenAPITools
		want  []string
		check func(t *testing.T, byID map[string]v1alpha1.Tool)
	}{
		{name: "namespace", opts: v1alpha1.OpenAPITools{Namespace: "oncall", Include: sel(nil, "incidents.list")},
			want: []string{"oncall.incidents.list"}},
		{name: "include by tag", opts: v1alpha1.OpenAPITools{Include: sel([]string{"timeline", "search"})},
			want: []string{"incidents.comment", "incidents.search"}},
		{name: "include by glob over dotted names", opts: v1alpha1.OpenAPITools{Include: sel(nil, "incidents.*")},
			want: []string{"incidents.comment", "incidents.list", "incidents.open", "incidents.resolve", "incidents.search"}},
		{name: "a glob stays within a level", opts: v1alpha1.OpenAPITools{Include: sel(nil, "incidents*")}, want: nil},
		{name: "exclude after include", opts: v1alpha1.OpenAPITools{Include: sel([]string{"incidents"}), Exclude: sel(nil, "incidents.{open,resolve}", "get_*")},
			want: []string{"incidents.comment", "incidents.list"}},
		{name: "deprecated kept and tagged", opts: v1alpha1.OpenAPITools{IncludeDeprecated: true, Include: sel(nil, "delete_*")},
			want: []string{"delete_incidents_id"},
			check: func(t *testing.T, byID map[string]v1alpha1.Tool) {
				if d := byID["delete_incidents_id"]; !slices.Equal(d.Tags, []string{"incidents", "deprecated"}) || d.SideEffects != v1alpha1.SideEffectsDestructive {
					t.Errorf("deprecated tool: %+v", d)
				}
			}},
		{name: "overrides in order, after the document's extension", opts: v1alpha1.OpenAPITools{Overrides: []v1alpha1.OperationOverride{
			{OperationSelector: *sel(nil, "incidents.search"), SideEffects: v1alpha1.SideEffectsRead},
			{OperationSelector: *sel([]string{"incidents"}), SafetyTags: []string{"oncall", "paging"}},
			{OperationSelector: *sel(nil, "incidents.comment"), SideEffects: v1alpha1.SideEffectsWrite},
		}},
			want: []string{"get_incidents_id", "incidents.comment", "incidents.list", "incidents.open", "incidents.resolve", "incidents.search"},
			check: func(t *testing.T, byID map[string]v1alpha1.Tool) {
				if s := byID["incidents.search"]; s.SideEffects != v1alpha1.SideEffectsRead || len(s.SafetyTags) != 0 {
					t.Errorf("search: %s %q", s.SideEffects, s.SafetyTags)
				}
				if o := byID["incidents.open"]; !slices.Equal(o.SafetyTags, []string{"paging", "oncall"}) {
					t.Errorf("open safety tags = %q, want the document's and the override's, once each", o.SafetyTags)
				}
				if c := byID["incidents.comment"]; c.SideEffects != v1alpha1.SideEffectsWrite {
					t.Errorf("comment: %s, want the override over x-contextrouter's None", c.SideEffects)
				}
			}},
	}
	doc := readTestDoc(t, incidentsDoc)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := ParseOpenAPI([]Chunk{doc}, &tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(tools); !slices.Equal(got, tt.want) {
				t.Fatalf("tools = %q, want %q", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, toolsByID(tools))
			}
		})
	}
}

// minimalDoc is an OpenAPI 3.0 document with the given paths and
// components (YAML, indented by four and by two spaces).
func minimalDoc(paths, components string) string {
	doc := "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n" + paths
	if components != "" {
		doc += "components:\n" + components
	}
	return doc
}

// TestOpenAPIErrors: a document that cannot become tools is refused whole,
// each problem named by file, line and place.
func TestOpenAPIErrors(t *testing.T) {
	ok := "  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n"
	tests := []struct {
		name, file, data string
		want             []string
	}{
		{"yaml syntax", "api.yaml", "openapi: 3.0.3\ninfo: {title: t, version: '1'\npaths: {}\n", []string{"api.yaml:3: invalid YAML: did not find expected ',' or '}'"}},
		{"json syntax", "api.json", "{\"openapi\": \"3.1.0\",\n \"info\": }", []string{"api.json:2: invalid JSON at column"}},
		{"two yaml documents", "api.yaml", minimalDoc(ok, "") + "---\nopenapi: 3.0.3\n", []string{"api.yaml:9: an OpenAPI document is one YAML document, not several"}},
		{"swagger 2.0", "api.json", "{\n  \"swagger\": \"2.0\",\n  \"info\": {\"title\": \"t\", \"version\": \"1\"}, \"paths\": {}}",
			[]string{"api.json:2: Swagger 2.0 is not supported; convert the document to OpenAPI 3.0 or 3.1"}},
		{"no openapi field", "api.yaml", "info: {title: t, version: '1'}\npaths: {}\n", []string{"api.yaml:1: not an OpenAPI document: the openapi field is missing"}},
		{"not an object", "api.yaml", "- openapi\n", []string{"api.yaml:1: not an OpenAPI document: an object is, not a list"}},
		{"openapi 3.2", "api.yaml", "info: {title: t, version: '1'}\nopenapi: 3.2.0\npaths: {}\n", []string{"api.yaml:2: openapi: OpenAPI 3.2.0 is not supported; 3.0.x and 3.1.x are"}},
		{"openapi 2", "api.yaml", "openapi: 2\ninfo: {title: t, version: '1'}\npaths: {}\n", []string{"api.yaml:1: openapi: OpenAPI 2 is not supported"}},
		{"external reference", "api.yaml", minimalDoc("  /a:\n    get:\n      parameters:\n      - $ref: 'common.yaml#/Limit'\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml:7: paths[/a].get.parameters[0].$ref: "common.yaml#/Limit" refers to another document; only references inside the document (#/…) are followed`}},
		{"url reference", "api.yaml", minimalDoc(ok, "  schemas:\n    X: {$ref: 'https://example.com/x.json'}\n"),
			[]string{`api.yaml:10: components.schemas.X.$ref: "https://example.com/x.json" refers to another document`}},
		{"reference that does not resolve", "api.yaml", minimalDoc("  /a:\n    post:\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: '#/components/schemas/Missing'}\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml:9: paths[/a].post.requestBody.content[application/json].schema.$ref: "#/components/schemas/Missing" does not resolve`}},
		{"invalid by the specification", "api.yaml", minimalDoc(ok+"  /b:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml: invalid OpenAPI document: invalid paths: operations "GET /a" and "GET /b" have the same operation id "a"`}},
		{"no responses", "api.yaml", minimalDoc("  /a:\n    get: {operationId: a}\n", ""), []string{"api.yaml: invalid OpenAPI document:", "responses"}},
		{"duplicate key", "api.yaml", minimalDoc(ok, "") + "info: {title: u, version: '2'}\n", []string{"api.yaml:8: info: duplicate field"}},
		{"extension unknown field", "api.yaml", minimalDoc("  /a:\n    get:\n      operationId: a\n      x-contextrouter:\n        sideEfects: Read\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml:8: paths[/a].get.x-contextrouter.sideEfects: unknown field (did you mean "sideEffects"?)`}},
		{"extension value of the wrong type", "api.yaml", minimalDoc("  /a:\n    get:\n      operationId: a\n      x-contextrouter:\n        examples: one\n      responses: {'200': {description: ok}}\n", ""),
			[]string{"api.yaml:8: paths[/a].get.x-contextrouter.examples: must be a list"}},
		{"extension breaking a rule", "api.yaml", minimalDoc("  /a:\n    get:\n      operationId: a\n      x-contextrouter:\n        sideEffects: Harmless\n        costHint: '"+strings.Repeat("x", 65)+"'\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml:8: paths[/a].get.x-contextrouter.sideEffects: Unsupported value: "Harmless"`,
				"api.yaml:9: paths[/a].get.x-contextrouter.costHint: Too long: may not be more than 64 characters"}},
		{"extension not an object", "api.yaml", minimalDoc("  /a:\n    get:\n      operationId: a\n      x-contextrouter: Read\n      responses: {'200': {description: ok}}\n", ""),
			[]string{"api.yaml:7: paths[/a].get.x-contextrouter: must be an object, not a string"}},
		{"two operations, one tool name", "api.yaml", minimalDoc("  /a:\n    get:\n      operationId: list items\n      responses: {'200': {description: ok}}\n  /b:\n    get:\n      operationId: list_items\n      responses: {'200': {description: ok}}\n", ""),
			[]string{`api.yaml:9: paths[/b].get.name: duplicate tool id "list_items": api.yaml:5 (paths[/a].get) has it too`}},
		{"aliases that expand past the bound", "api.yaml", minimalDoc(ok, "") + laughs(8), []string{"api.yaml: invalid YAML: aliases expand the document past 5242880 values"}},
		{"too large", "api.yaml", minimalDoc(ok, "") + "# " + strings.Repeat("x", MaxOpenAPIDocumentBytes), []string{"api.yaml: 10485", "bytes; an OpenAPI document is at most 10485760"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := ParseOpenAPI([]Chunk{{Path: tt.file, Content: tt.data}}, nil)
			var ce *CatalogError
			if !errors.As(err, &ce) || tools != nil {
				t.Fatalf("tools %q, error %v; want no tools and a *CatalogError", ids(tools), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestOpenAPISchemas: OpenAPI 3.0 schemas become JSON Schema 2020-12;
// references are copied in, or under $defs for recursion and when copying
// grows too large; a schema too large even so leaves out the referenced
// schemas farthest from the operation, saying so.
func TestOpenAPISchemas(t *testing.T) {
	post := func(schema string) string {
		return "  /a:\n    post:\n      operationId: a\n      requestBody:\n        content:\n          application/json:\n            schema: " + schema +
			"\n      responses: {'200': {description: ok}}\n"
	}
	tests := []struct {
		name, paths, components string
		body                    string   // the body property's schema, as JSON ("" = not checked)
		contains, absent        []string // substrings of the whole input schema
	}{
		{name: "3.0 words", paths: post(`{type: object, properties: {num: {type: integer, minimum: 3, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false, nullable: true, example: 4},
                  e: {type: string, enum: [a, b], nullable: true}, d: {type: string, deprecated: true}}, discriminator: {propertyName: num}, xml: {name: a}, externalDocs: {url: 'https://x.example.com'}, x-internal: true}`),
			body: `{"properties":{"d":{"deprecated":true,"type":"string"},"e":{"enum":["a","b",null],"type":["string","null"]},"num":{"examples":[4],"exclusiveMinimum":3,"maximum":9,"type":["integer","null"]}},"type":"object"}`},
		{name: "YAML 1.2: keys y, n, on, off stay words; merge keys and anchors apply", paths: post(`{$ref: '#/components/schemas/Switch'}`),
			components: "  schemas:\n    Base: &base {type: object, required: [on]}\n    Switch:\n      <<: *base\n      properties: {on: {type: boolean, default: off}, y: {type: integer, minimum: 0x10}, n: {type: number, maximum: 1e3}}\n",
			body:       `{"properties":{"n":{"maximum":1000,"type":"number"},"on":{"default":"off","type":"boolean"},"y":{"minimum":16,"type":"integer"}},"required":["on"],"type":"object"}`},
		{name: "3.0 ignores the keywords beside a $ref", paths: post(`{$ref: '#/components/schemas/S', description: ignored}`), components: "  schemas:\n    S: {type: string}\n",
			body: `{"type":"string"}`},
		{name: "a reference used twice is copied twice", paths: post(`{type: object, properties: {a: {$ref: '#/components/schemas/S'}, b: {$ref: '#/components/schemas/S'}}}`),
			components: "  schemas:\n    S: {type: string, format: uuid}\n",
			body:       `{"properties":{"a":{"format":"uuid","type":"string"},"b":{"format":"uuid","type":"string"}},"type":"object"}`},
		{name: "mutual recursion", paths: post(`{$ref: '#/components/schemas/A'}`),
			components: "  schemas:\n    A: {type: object, properties: {b: {$ref: '#/components/schemas/B'}}}\n    B: {type: object, properties: {a: {$ref: '#/components/schemas/A'}}}\n",
			body:       `{"properties":{"b":{"properties":{"a":{"$ref":"#/$defs/A"}},"type":"object"}},"type":"object"}`,
			contains:   []string{`"$defs":{"A":{"properties":{"b":{"properties":{"a":{"$ref":"#/$defs/A"}},"type":"object"}},"type":"object"}}`}},
		{name: "copies that double at every level go under $defs", paths: post(`{$ref: '#/components/schemas/L0'}`), components: "  schemas:\n" + doublingSchemas(20),
			body: `{"$ref":"#/$defs/L0"}`, contains: []string{`"L19":{"properties":{"x":{"$ref":"#/$defs/L20"},"y":{"$ref":"#/$defs/L20"}},"type":"object"}`, `"L20":{"type":"string"}`}},
		{name: "schemas too large together: the farthest are left out", paths: post(`{$ref: '#/components/schemas/C0'}`), components: "  schemas:\n" + chainOfLargeSchemas(12, 8000),
			body:     `{"$ref":"#/$defs/C0"}`,
			contains: []string{`"C0":`, `"C6":`, `"description":"omitted: #/components/schemas/C`, "(the input schema is limited to 64 KiB)"}, absent: []string{`"C11":`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := ParseOpenAPI([]Chunk{{Path: "api.yaml", Content: minimalDoc(tt.paths, tt.components)}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			raw := tools[0].InputSchema.Raw
			if err := CheckInputSchema(raw); err != nil {
				t.Fatalf("input schema: %v", err)
			}
			if tt.body != "" {
				if got := jsonText(at(schemaOf(t, tools[0]), "properties", "body")); got != tt.body {
					t.Errorf("body = %s\nwant   %s", got, tt.body)
				}
			}
			for _, c := range tt.contains {
				if !strings.Contains(string(raw), c) {
					t.Errorf("schema does not contain %s\n%.2000s", c, raw)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(string(raw), a) {
					t.Errorf("schema contains %s", a)
				}
			}
		})
	}

	// A schema too large without any reference cannot be fitted: an error
	// naming the operation and the way out.
	big := post(`{type: object, description: '` + strings.Repeat("x", MaxInputSchemaBytes) + `'}`)
	_, err := ParseOpenAPI([]Chunk{{Path: "api.yaml", Content: minimalDoc(big, "")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "api.yaml:5: paths[/a].post: inputSchema: ") || !strings.Contains(err.Error(), "leave the operation out with spec.tools.openAPI.exclude") {
		t.Errorf("error = %v", err)
	}
}

// laughs is an extension whose aliases expand to 10^levels values.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("x-laughs:\n  l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "  l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	return b.String()
}

// doublingSchemas are schemas L0 … Ln, each referring twice to the next:
// copied in, L0 would be 2^n copies of Ln.
func doublingSchemas(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "    L%d: {type: object, properties: {x: {$ref: '#/components/schemas/L%d'}, y: {$ref: '#/components/schemas/L%d'}}}\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "    L%d: {type: string}\n", n)
	return b.String()
}

// chainOfLargeSchemas are schemas C0 … Cn-1 of about size bytes each, each
// referring to the next.
func chainOfLargeSchemas(n, size int) string {
	var b strings.Builder
	for i := range n {
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(", next: {$ref: '#/components/schemas/C%d'}", i+1)
		}
		fmt.Fprintf(&b, "    C%d: {type: object, description: '%s', properties: {v: {type: string}%s}}\n", i, strings.Repeat("d", size), next)
	}
	return b.String()
}

func TestOpenAPIToolName(t *testing.T) {
	tests := []struct{ opID, method, path, want string }{
		{"findPetsByStatus", "GET", "/pet/findByStatus", "findPetsByStatus"},
		{"issues.list", "GET", "/issues", "issues.list"},
		{"list issues (v2)", "GET", "/issues", "list_issues__v2_"},
		{"a..b.", "GET", "/", "a.b"},
		{"...", "GET", "/pet/{petId}", "get_pet_petId"},
		{"", "DELETE", "/store/order/{orderId}", "delete_store_order_orderId"},
		{"", "GET", "/", "get"},
		{"", "PATCH", "/v1/é/x.y", "patch_v1___x.y"},
		{strings.Repeat("a", 200), "GET", "/", strings.Repeat("a", 128)},
		{strings.Repeat("a", 127) + ".b", "GET", "/", strings.Repeat("a", 127)},
	}
	for _, tt := range tests {
		got := openAPIToolName(tt.opID, tt.method, tt.path)
		if got != tt.want {
			t.Errorf("openAPIToolName(%q, %s %s) = %q, want %q", tt.opID, tt.method, tt.path, got, tt.want)
		}
		if errs := v1alpha1.ValidateTool(nil, &v1alpha1.Tool{Name: got, Description: "d", SideEffects: v1alpha1.SideEffectsRead}); len(errs) > 0 {
			t.Errorf("%q breaks the tool name rule: %v", got, errs)
		}
	}
}

// platformResources are the resources of a generated cloud platform API:
// a larger, realistic document (shared components, path parameters,
// paging, bodies by reference) than the Petstore.
var platformResources = []struct{ plural, singular, about string }{
	{"clusters", "cluster", "a Kubernetes cluster with its node pools"},
	{"nodePools", "nodePool", "a group of nodes of one machine type in a cluster"},
	{"deployments", "deployment", "a rolled-out version of a service"},
	{"services", "service", "a long-running workload behind a load balancer"},
	{"secrets", "secret", "an encrypted value such as a password or an API key"},
	{"certificates", "certificate", "a TLS certificate for a domain"},
	{"domains", "domain", "a DNS domain and its records"},
	{"buckets", "bucket", "an object storage bucket"},
	{"databases", "database", "a managed PostgreSQL database"},
	{"backups", "backup", "a point-in-time copy of a database"},
	{"alerts", "alert", "a monitoring rule that pages when a metric crosses a threshold"},
	{"dashboards", "dashboard", "a page of charts over metrics"},
	{"users", "user", "a person with access to the organization"},
	{"teams", "team", "a group of users who share permissions"},
	{"apiKeys", "apiKey", "a key that lets a program call this API"},
	{"invoices", "invoice", "a monthly bill for the organization's usage"},
	{"quotas", "quota", "a limit on how much of a resource a project may use"},
	{"projects", "project", "a container for resources, billing and permissions"},
	{"firewallRules", "firewallRule", "a rule that allows or blocks network traffic"},
	{"volumes", "volume", "a block storage disk attached to a machine"},
}

// platformAPI writes the platform API as OpenAPI 3.0 YAML: five operations
// per resource.
func platformAPI() string {
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: Platform, version: '1'}\npaths:\n")
	title := func(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
	for _, r := range platformResources {
		fmt.Fprintf(&b, "  /v1/%s:\n    get:\n      operationId: list%s\n      tags: [%s]\n      summary: List %s\n      description: Page through every %s - %s.\n",
			r.plural, title(r.plural), r.plural, r.plural, r.singular, r.about)
		b.WriteString("      parameters: [{$ref: '#/components/parameters/PageSize'}, {$ref: '#/components/parameters/PageToken'}]\n")
		b.WriteString("      responses: {'200': {description: A page.}}\n")
		fmt.Fprintf(&b, "    post:\n      operationId: create%s\n      tags: [%s]\n      summary: Create a %s\n      description: Create %s.\n", title(r.singular), r.plural, r.singular, r.about)
		fmt.Fprintf(&b, "      requestBody: {required: true, content: {application/json: {schema: {$ref: '#/components/schemas/%s'}}}}\n", title(r.singular))
		b.WriteString("      responses: {'201': {description: Created.}}\n")
		fmt.Fprintf(&b, "  /v1/%s/{id}:\n    parameters: [{$ref: '#/components/parameters/ID'}]\n", r.plural)
		for _, op := range []struct{ method, verb, summary string }{
			{"get", "get", "Get a %s"}, {"patch", "update", "Update a %s"}, {"delete", "delete", "Delete a %s"},
		} {
			fmt.Fprintf(&b, "    %s:\n      operationId: %s%s\n      tags: [%s]\n      summary: %s\n", op.method, op.verb, title(r.singular), r.plural, fmt.Sprintf(op.summary, r.singular))
			if op.method == "patch" {
				fmt.Fprintf(&b, "      requestBody: {content: {application/merge-patch+json: {schema: {$ref: '#/components/schemas/%s'}}}}\n", title(r.singular))
			}
			b.WriteString("      responses: {'200': {description: Done.}}\n")
		}
	}
	b.WriteString("components:\n  parameters:\n")
	b.WriteString("    ID: {name: id, in: path, required: true, description: The resource's id, schema: {type: string, format: uuid}}\n")
	b.WriteString("    PageSize: {name: pageSize, in: query, schema: {type: integer, minimum: 1, maximum: 1000, default: 50}}\n")
	b.WriteString("    PageToken: {name: pageToken, in: query, description: The token of the previous page's end, schema: {type: string}}\n")
	b.WriteString("  schemas:\n    Labels: {type: object, additionalProperties: {type: string}, description: Key-value pairs}\n")
	b.WriteString("    Meta: {type: object, properties: {id: {type: string, readOnly: true}, created: {type: string, format: date-time, readOnly: true}, labels: {$ref: '#/components/schemas/Labels'}}}\n")
	for _, r := range platformResources {
		fmt.Fprintf(&b, "    %s:\n      description: %s\n      allOf:\n      - $ref: '#/components/schemas/Meta'\n      - type: object\n        required: [name]\n        properties:\n          name: {type: string, maxLength: 63}\n          project: {type: string, nullable: true}\n",
			title(r.singular), r.about)
	}
	return b.String()
}

// TestOpenAPIGeneratedPlatform reads a larger generated document: 100
// operations over 20 resources, with shared parameters and schemas.
func TestOpenAPIGeneratedPlatform(t *testing.T) {
	doc := platformAPI()
	tools, err := ParseOpenAPI([]Chunk{{Path: "platform.yaml", Content: doc}}, &v1alpha1.OpenAPITools{Namespace: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 5*len(platformResources) {
		t.Fatalf("%d tools, want %d", len(tools), 5*len(platformResources))
	}
	byID := toolsByID(tools)
	c := byID["platform.createDatabase"]
	cs := schemaOf(t, c)
	if c.SideEffects != v1alpha1.SideEffectsWrite || !slices.Equal(c.Tags, []string{"databases"}) ||
		at(cs, "properties", "body", "allOf") == nil || !strings.Contains(string(c.InputSchema.Raw), `"project":{"type":["string","null"]}`) ||
		!strings.Contains(string(c.InputSchema.Raw), `"labels":{"additionalProperties":{"type":"string"},"description":"Key-value pairs","type":"object"}`) {
		t.Errorf("createDatabase: %s %q %s", c.SideEffects, c.Tags, c.InputSchema.Raw)
	}
	l := schemaOf(t, byID["platform.listSecrets"])
	if at(l, "properties", "pageSize", "default") != float64(50) || at(l, "required") != nil {
		t.Errorf("listSecrets schema = %s", jsonText(l))
	}
	d := byID["platform.deleteVolume"]
	if d.SideEffects != v1alpha1.SideEffectsDestructive || jsonText(at(schemaOf(t, d), "required")) != `["id"]` {
		t.Errorf("deleteVolume: %s %s", d.SideEffects, d.InputSchema.Raw)
	}
	if u := schemaOf(t, byID["platform.updateTeam"]); at(u, "properties", "body", "allOf") == nil || jsonText(at(u, "required")) != `["id"]` {
		t.Errorf("updateTeam schema = %s", jsonText(u))
	}
}

// manyOperations is an OpenAPI 3.1 document (JSON) of n GET operations
// without parameters, op<from> to op<from+n-1>.
func manyOperations(from, n int) string {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {`)
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `"/r%d": {"get": {"operationId": "op%d", "responses": {"200": {"description": "ok"}}}}`, i, i)
	}
	b.WriteString("}}")
	return b.String()
}

// BenchmarkParseOpenAPI: the time to make a catalog of a document, by
// document (docs/benchmarks.md).
func BenchmarkParseOpenAPI(b *testing.B) {
	docs := []struct {
		name string
		doc  Chunk
	}{
		{"petstore-19ops", readTestDoc(b, petstoreDoc)},
		{"platform-100ops", Chunk{Path: "platform.yaml", Content: platformAPI()}},
		{"flat-10000ops", Chunk{Path: "flat.json", Content: manyOperations(0, MaxCatalogTools)}},
	}
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc.Content)))
			for b.Loop() {
				if _, err := ParseOpenAPI([]Chunk{d.doc}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOpenAPIOperationLimit: a source holds at most MaxCatalogTools tools,
// operations counted over all its documents.
func TestOpenAPIOperationLimit(t *testing.T) {
	doc := manyOperations
	files := []Chunk{{Path: "a.json", Content: doc(0, MaxCatalogTools/2)}, {Path: "b.json", Content: doc(MaxCatalogTools/2, MaxCatalogTools/2)}}
	tools, err := ParseOpenAPI(files, nil)
	if err != nil || len(tools) != MaxCatalogTools {
		t.Fatalf("at the limit: %d tools, %v", len(tools), err)
	}
	files[1].Content = doc(MaxCatalogTools/2, MaxCatalogTools/2+1)
	_, err = ParseOpenAPI(files, nil)
	if err == nil || !strings.Contains(err.Error(), "b.json:") || !strings.Contains(err.Error(), "more than 10000 tools in the catalog") {
		t.Errorf("past the limit: %v", err)
	}
}

// TestOpenAPIDepthLimit: a document nested deeper than MaxOpenAPIDepth is
// refused before it is read further, at the line of the first value past
// the bound, aliases followed.
func TestOpenAPIDepthLimit(t *testing.T) {
	// The schema Deep sits at the fourth level (the document, components,
	// schemas, Deep); nestedSchema(k) takes 2k+1 levels, so its deepest
	// value is at 2k+4.
	deep := func(k int) string {
		return "{\"openapi\": \"3.1.0\", \"info\": {\"title\": \"t\", \"version\": \"1\"}, \"paths\": {},\n" +
			"\"components\": {\"schemas\": {\"Deep\":\n" + string(nestedSchema(k, `{"type": "string"}`)) + "}}}"
	}
	// An anchor 101 levels deep is shallow where it stands (levels 2 to
	// 102), and 30 levels deeper where an alias repeats it.
	alias := "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\nx-anchor: &deep " + string(nestedSchema(50, `{"type": "string"}`)) + "\n" +
		"x-use: " + strings.Repeat("[", 30) + "*deep" + strings.Repeat("]", 30) + "\n"
	tests := []struct {
		name, file, data, want string
	}{
		{"at the bound", "api.json", deep((MaxOpenAPIDepth - 4) / 2), ""},
		{"past the bound", "api.json", deep((MaxOpenAPIDepth-4)/2 + 1),
			"api.json:3: components.schemas.Deep.properties.a.properties.a.properties.a.properties.a.properties…: nested more than 128 levels deep (objects and arrays); an input schema may nest 64"},
		{"past the bound through an alias", "api.yaml", alias, "api.yaml:5: x-use[0][0][0][0][0][0][0][0][0][0][0]…: nested more than 128 levels deep"},
		{"far past the bound", "api.json", deep(4500), "api.json:3: components.schemas.Deep.properties.a."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOpenAPI([]Chunk{{Path: tt.file, Content: tt.data}}, nil)
			if tt.want == "" {
				if err != nil {
					t.Errorf("error = %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant %q", err, tt.want)
			}
		})
	}
}
