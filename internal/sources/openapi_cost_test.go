package sources

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Documents that cost the most to read per byte, the worst cases of
// MaxOpenAPINestedBytes, MaxOpenAPIReachedValues and MaxOpenAPIExpandedBytes
// (docs/benchmarks.md "OpenAPI catalogs").

// deepSchemasDoc: component schemas nested levels deep (object in object),
// as many as fit size bytes, and one operation using the first.
func deepSchemasDoc(levels, size int) string {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"post": {"operationId": "a", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/D0"}}}}, "responses": {"200": {"description": "ok"}}}}},` + "\n" + `"components": {"schemas": {`)
	for i := 0; b.Len() < size-20000; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `"D%d": %s`, i, nestedSchema(levels, `{"type": "string", "description": "leaf value"}`))
	}
	b.WriteString("}}}")
	return b.String()
}

// bodyRefOperations begins a document (JSON) of ops operations whose
// bodies refer to the component schema name; the paths are left open.
func bodyRefOperations(ops int, name string) *strings.Builder {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {`)
	for i := range ops {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `"/r%d": {"post": {"operationId": "op%d", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/%s"}}}}, "responses": {"200": {"description": "ok"}}}}`, i, i, name)
	}
	return &b
}

// fanOutDoc: schemas L0 … Ln each referring twice to the next, and ops
// operations whose bodies refer to L0.
func fanOutDoc(n, ops int) string {
	b := bodyRefOperations(ops, "L0")
	b.WriteString(`}, "components": {"schemas": {`)
	for i := range n {
		fmt.Fprintf(b, `"L%d": {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/L%d"}, "y": {"$ref": "#/components/schemas/L%d"}}},`+"\n", i, i+1, i+1)
	}
	fmt.Fprintf(b, `"L%d": {"type": "string"}}}}`, n)
	return b.String()
}

// bigTextDoc: ops operations whose bodies refer to one schema of a
// description of size bytes.
func bigTextDoc(ops, size int) string {
	b := bodyRefOperations(ops, "Big")
	fmt.Fprintf(b, `}, "components": {"schemas": {"Big": {"type": "object", "description": "%s"}}}}`, strings.Repeat("d", size))
	return b.String()
}

// manyDefsDoc: ops operations whose bodies refer to a schema with n
// properties, each a reference to its own schema of size bytes: too large
// together, cut for every operation.
func manyDefsDoc(ops, n, size int) string {
	b := bodyRefOperations(ops, "Root")
	b.WriteString(`}, "components": {"schemas": {"Root": {"type": "object", "properties": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, `"p%d": {"$ref": "#/components/schemas/S%d"}`, i, i)
	}
	b.WriteString(`}}`)
	for i := range n {
		fmt.Fprintf(b, `,
"S%d": {"type": "object", "description": "%s", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}`, i, strings.Repeat("d", size))
	}
	b.WriteString(`}}}`)
	return b.String()
}

// wrappedDefsDoc is manyDefsDoc with each operation's body referring to
// its own schema, which refers to Root: no two operations share $defs.
func wrappedDefsDoc(ops, n, size int) string {
	doc := manyDefsDoc(ops, n, size)
	var w strings.Builder
	for i := range ops {
		doc = strings.Replace(doc, `"operationId": "op`+strconv.Itoa(i)+`", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Root"}}}}`,
			`"operationId": "op`+strconv.Itoa(i)+`", "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/W`+strconv.Itoa(i)+`"}}}}`, 1)
		fmt.Fprintf(&w, `"W%d": {"$ref": "#/components/schemas/Root"}, `, i)
	}
	return strings.Replace(doc, `"components": {"schemas": {`, `"components": {"schemas": {`+w.String(), 1)
}

// chainDoc: component schemas C0 … Cn, each referring to the next.
func chainDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}, "components": {"schemas": {`)
	for i := range n {
		fmt.Fprintf(&b, `"C%d": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/C%d"}}},`+"\n", i, i+1)
	}
	fmt.Fprintf(&b, `"C%d": {"type": "string"}}}}`, n)
	return b.String()
}

// TestOpenAPICostLimits: a document just past a bound on the cost of
// reading it is refused before the cost is paid, naming the file, the
// place and the bound.
func TestOpenAPICostLimits(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		// 2 MiB nested 128 levels weigh 116 Mi: refused where the weight
		// passes 40 Mi (it took 10 s of CPU to read).
		{"text weighted by depth", deepSchemasDoc(62, 2<<20), []string{
			"api.json:", ": components.schemas.D", "…: the document's text weighted by depth passes 41943040 bytes here (each byte counted once per object or array around it, and 4 times more)",
			"at most 41943040"}},
		// 240 operations each reaching a schema of 2,000 properties, each
		// its own schema: 4.5 M values.
		{"values reached by the operations", manyDefsDoc(240, 2000, 10), []string{
			"api.json:", ": paths[/r", "].post: the operations and components up to here reach more than 4000000 values", "at most 4000000 per document"}},
		// 3,000 schemas each referring to the next: 18 M values.
		{"values reached by the components", chainDoc(3000), []string{
			"api.json:", ": components.schemas.C", ": the operations and components up to here reach more than 4000000 values"}},
		// 600 operations each copying in a schema of 60 KB: 36 MB.
		{"input schemas together", bigTextDoc(600, 60000), []string{
			"api.json:", ": paths[/r", "].post: the input schemas of the operations up to here come to more than 8388608 bytes",
			"at most 8388608 per document"}},
		// 700 operations each referring to its own schema that refers to
		// 100 schemas of 1 KB, cut to 64 KiB anew for each.
		{"schema text converted and written", wrappedDefsDoc(700, 100, 1000), []string{
			"api.json:", "].post: making the input schemas of the operations up to here converts and writes more than 33554432 bytes of schema text",
			"at most 33554432 per document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOpenAPI([]Chunk{{Path: "api.json", Content: tt.doc}}, nil)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error = %.600v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// kubernetesCoreDoc is the Kubernetes core API (v1) as OpenAPI 3.0, as
// client-go's tests hold it: a large real document (1.6 MB, 245
// operations, schemas referring to each other deeply).
func kubernetesCoreDoc(t testing.TB) Chunk {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/client-go").Output()
	if err != nil {
		t.Fatalf("go list k8s.io/client-go: %v", err)
	}
	return readTestDoc(t, filepath.Join(strings.TrimSpace(string(out)), "openapi", "openapitest", "testdata", "api__v1_openapi.json"))
}

// TestOpenAPIKubernetes: a large real document stays well inside the
// bounds on the cost of reading it, and reads whole.
func TestOpenAPIKubernetes(t *testing.T) {
	c := kubernetesCoreDoc(t)
	d, problems := decodeOpenAPIDoc(c.Path, []byte(c.Content))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if reached, at := d.reached(MaxOpenAPIReachedValues); at != "" || d.nested > MaxOpenAPINestedBytes/3 || reached > MaxOpenAPIReachedValues/3 {
		t.Errorf("weighted by depth %d, reached %d (%s): within a third of the bounds, want", d.nested, reached, at)
	}
	tools, err := ParseOpenAPI([]Chunk{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := toolsByID(tools)
	pod, ok := byID["createCoreV1NamespacedPod"]
	if len(tools) != 245 || !ok {
		t.Fatalf("%d tools, createCoreV1NamespacedPod %v", len(tools), ok)
	}
	if s := string(pod.InputSchema.Raw); !strings.Contains(s, `"namespace"`) || !strings.Contains(s, `"body"`) || len(s) > MaxInputSchemaBytes {
		t.Errorf("createCoreV1NamespacedPod: %.300s", s)
	}
}

// BenchmarkParseOpenAPIWorst: the documents that cost the most to read,
// just inside each bound (read) and past it (refused); docs/benchmarks.md
// "OpenAPI catalogs". Each takes seconds: run with -benchtime 1x.
func BenchmarkParseOpenAPIWorst(b *testing.B) {
	docs := []struct {
		name    string
		doc     func() string
		refused bool
	}{
		{"nested-700KiB-128levels", func() string { return deepSchemasDoc(62, 700<<10) }, false},
		{"nested-4MiB-8levels", func() string { return deepSchemasDoc(3, 4<<20) }, false},
		{"reach-200ops-2000props", func() string { return manyDefsDoc(200, 2000, 10) }, false},
		{"reach-chain-1400", func() string { return chainDoc(1400) }, false},
		{"doubling-700ops", func() string { return fanOutDoc(20, 700) }, false},
		{"schemas-60KB-135ops", func() string { return bigTextDoc(135, 60000) }, false},
		{"expanded-wrapped-50ops", func() string { return wrappedDefsDoc(50, 100, 1000) }, false},
		{"kubernetes-core", func() string { return kubernetesCoreDoc(b).Content }, false},
		{"past-nested-10MiB-128levels", func() string { return deepSchemasDoc(62, 10<<20) }, true},
		{"past-reach-10000ops-2000props", func() string { return manyDefsDoc(MaxCatalogTools, 2000, 10) }, true},
		{"past-reach-chain-8000", func() string { return chainDoc(8000) }, true},
		{"past-doubling-10000ops", func() string { return fanOutDoc(20, MaxCatalogTools) }, true},
		{"past-schemas-60KB-10000ops", func() string { return bigTextDoc(MaxCatalogTools, 60000) }, true},
		{"past-expanded-wrapped-2000ops", func() string { return wrappedDefsDoc(2000, 100, 1000) }, true},
	}
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			doc := Chunk{Path: "api.json", Content: d.doc()}
			b.SetBytes(int64(len(doc.Content)))
			cpu := processCPU()
			for b.Loop() {
				if _, err := ParseOpenAPI([]Chunk{doc}, nil); (err != nil) != d.refused {
					b.Fatalf("refused %v, want %v: %.300v", err != nil, d.refused, err)
				}
			}
			// The machine is shared: CPU time is the steadier measure.
			b.ReportMetric((processCPU()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
