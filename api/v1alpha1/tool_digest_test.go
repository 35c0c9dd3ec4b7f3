package v1alpha1

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func digestTool() *Tool {
	return &Tool{
		Name: "create_invoice", Namespace: "billing",
		Description: "Create an invoice & send it <by e-mail>.",
		InputSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type": "object", "properties": {"amount": {"type": "number", "minimum": 1.0}}}`)},
		Examples:    []string{"bill ACME 300 euros"},
		Tags:        []string{"billing"},
		SideEffects: SideEffectsWrite,
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestToolDigestDefinition computes a digest from api.md §10.9's
// definition, written out here as literal JSON texts: the code must agree
// with the document, byte for byte.
func TestToolDigestDefinition(t *testing.T) {
	desc := sha(`"Create an invoice & send it <by e-mail>."`)
	schema := sha(`{"properties":{"amount":{"minimum":1.0,"type":"number"}},"type":"object"}`)
	ann := sha(`{"costHint":"","latencyHint":"","safetyTags":[],"sideEffects":"Write","tags":["billing"]}`)
	ex := sha(`{"antiPatterns":[],"examples":["bill ACME 300 euros"]}`)
	whole := sha(fmt.Sprintf(`{"annotations":%q,"description":%q,"examples":%q,"id":"billing.create_invoice","inputSchema":%q,"v":1}`, ann, desc, ex, schema))
	want := whole[:24] + "." + desc[:4] + schema[:4] + ann[:4] + ex[:4]
	if got := ToolDigest(digestTool()); got != want {
		t.Fatalf("ToolDigest = %s, want %s", got, want)
	}
	if len(want) != ToolDigestLength || !toolDigestPattern.MatchString(want) {
		t.Fatalf("digest %q does not have the documented form", want)
	}
}

// TestToolDigestCoversWhatItSays: a change to each part changes the digest
// and names that part only; what is not a change (key order, white space,
// a default written out, an empty list) keeps it.
func TestToolDigestCoversWhatItSays(t *testing.T) {
	base := ToolDigest(digestTool())
	same := []struct {
		name   string
		mutate func(*Tool)
	}{
		{"schema keys reordered, white space", func(x *Tool) {
			x.InputSchema.Raw = []byte("{\"properties\":{\"amount\":{\"minimum\":1.0,\n \"type\":\"number\"}},\"type\":\"object\"}")
		}},
		{"empty lists", func(x *Tool) { x.AntiPatterns, x.SafetyTags = []string{}, []string{} }},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			x := digestTool()
			tc.mutate(x)
			if got := ToolDigest(x); got != base {
				t.Errorf("digest %s, want %s unchanged", got, base)
			}
		})
	}
	// Unset and the default are one digest.
	a, b := digestTool(), digestTool()
	a.SideEffects, b.SideEffects = "", SideEffectsDestructive
	a.InputSchema, b.InputSchema = nil, &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}
	if ToolDigest(a) != ToolDigest(b) {
		t.Errorf("unset sideEffects and inputSchema: %s, defaults written out: %s", ToolDigest(a), ToolDigest(b))
	}

	changed := []struct {
		name   string
		mutate func(*Tool)
		parts  []string
	}{
		{"description", func(x *Tool) { x.Description += " Also pays it." }, []string{"description"}},
		{"schema number as written", func(x *Tool) {
			x.InputSchema.Raw = []byte(`{"type":"object","properties":{"amount":{"type":"number","minimum":1}}}`)
		}, []string{"inputSchema"}},
		{"schema property", func(x *Tool) {
			x.InputSchema.Raw = []byte(`{"type":"object","properties":{"amount":{"type":"number","minimum":1.0},"to":{"type":"string"}}}`)
		}, []string{"inputSchema"}},
		{"side effects", func(x *Tool) { x.SideEffects = SideEffectsDestructive }, []string{"annotations"}},
		{"safety tag", func(x *Tool) { x.SafetyTags = []string{"financial"} }, []string{"annotations"}},
		{"tags", func(x *Tool) { x.Tags = nil }, []string{"annotations"}},
		{"cost hint", func(x *Tool) { x.CostHint = "low" }, []string{"annotations"}},
		{"anti-pattern", func(x *Tool) { x.AntiPatterns = []string{"show invoices"} }, []string{"examples"}},
		{"example", func(x *Tool) { x.Examples = append(x.Examples, "invoice Initech") }, []string{"examples"}},
		{"description and schema", func(x *Tool) {
			x.Description = "Delete all invoices."
			x.InputSchema = nil
		}, []string{"description", "inputSchema"}},
		// The id is in the digest, in no part: a renamed tool is another tool.
		{"namespace", func(x *Tool) { x.Namespace = "billing2" }, []string{}},
	}
	for _, tc := range changed {
		t.Run(tc.name, func(t *testing.T) {
			x := digestTool()
			tc.mutate(x)
			got := ToolDigest(x)
			if got[:24] == base[:24] {
				t.Fatalf("digest %s: the tool part did not change", got)
			}
			if parts := ChangedParts(base, got); !slices.Equal(parts, tc.parts) || parts == nil {
				t.Errorf("ChangedParts = %#v, want %#v", parts, tc.parts)
			}
		})
	}
	if parts := ChangedParts(base, base); parts != nil {
		t.Errorf("ChangedParts of equal digests = %#v, want nil", parts)
	}
}

func TestCatalogDigest(t *testing.T) {
	a := map[string]string{"b.x": "1", "a.y": "2"}
	want := "sha256:" + sha("a.y=2\nb.x=1\n")
	if got := CatalogDigest(a); got != want {
		t.Errorf("CatalogDigest = %s, want %s", got, want)
	}
	if got := CatalogDigest(map[string]string{"b.x": "1", "a.y": "3"}); got == want {
		t.Error("a changed tool digest keeps the catalog digest")
	}
	if got := CatalogDigest(nil); got != "sha256:"+sha("") {
		t.Errorf("empty catalog: %s", got)
	}
}

func TestParseApprovedTools(t *testing.T) {
	d1, d2 := ToolDigest(digestTool()), strings.Repeat("0", 24)+"."+strings.Repeat("f", 16)
	got, err := ParseApprovedTools(fmt.Sprintf(" billing.create_invoice=%s,\nweb_search=%s\n", d1, d2))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["billing.create_invoice"] != d1 || got["web_search"] != d2 {
		t.Errorf("parsed %v", got)
	}
	if round, _ := ParseApprovedTools(FormatApprovedTools(got, "\n")); len(round) != 2 || round["web_search"] != d2 {
		t.Errorf("round trip: %v", round)
	}
	if s := FormatApprovedTools(got, ","); s != "billing.create_invoice="+d1+",web_search="+d2 {
		t.Errorf("one line: %q", s)
	}
	if s := FormatApprovedTools(got, "\n"); s != "billing.create_invoice="+d1+"\nweb_search="+d2+"\n" {
		t.Errorf("lines: %q", s)
	}
	for _, tc := range []struct{ value, msg string }{
		{"web_search", `entry 1 ("web_search"): want ID=DIGEST`},
		{"a=" + d1 + " bad..id=" + d1, `entry 2 ("bad..id=`},
		{"a=" + strings.ToUpper(d1), "the digest must be 24 hex digits, a dot and 16 hex digits (41 characters, lower case)"},
		{"a=sha256:" + d1, "the digest must be"},
		{"a=" + d1 + ",a=" + d2, `tool "a" is approved twice`},
		{strings.Repeat("x=1 ", MaxCatalogTools+1), "10001 entries; a source has at most 10000 tools"},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			_, err := ParseApprovedTools(tc.value)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %q", err, tc.msg)
			}
		})
	}
	if got, err := ParseApprovedTools(" \n"); err != nil || len(got) != 0 {
		t.Errorf("blank value: %v, %v", got, err)
	}
}

func TestApprovalValidate(t *testing.T) {
	base := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("gh"), Spec: ContextSourceSpec{Type: SourceMCP, MCP: &MCPSource{URL: "https://mcp.example.com/mcp"}}}
		s.Default()
		s.Annotations = map[string]string{AnnotationApprovedTools: "github.search=" + ToolDigest(digestTool())}
		return s
	}
	if base().Spec.MCP.Approval != ToolApprovalAuto {
		t.Fatalf("approval defaults to %q", base().Spec.MCP.Approval)
	}
	at := "metadata.annotations[" + AnnotationApprovedTools + "]"
	runValidation(t, base, (*ContextSource).Validate, []validCase[ContextSource]{
		{"approval enum", func(s *ContextSource) { s.Spec.MCP.Approval = "Never" }, "spec.mcp.approval", `Unsupported value: "Never"`},
		{"bad entry", func(s *ContextSource) { s.Annotations[AnnotationApprovedTools] += " nope" }, at, `entry 2 ("nope"): want ID=DIGEST`},
		{"not a tool source", func(s *ContextSource) {
			s.Spec = ContextSourceSpec{Type: SourceInline, Inline: &InlineSource{Content: "x"}}
			s.Default()
		}, at, "tool approvals apply to Tools and MCP sources only (type is Inline)"},
		{"annotations over 256 KiB", func(s *ContextSource) {
			s.Annotations["note"] = strings.Repeat("x", 256<<10)
		}, "metadata.annotations", "may not be more than 262144 bytes"},
	})
	tools := &ContextSource{ObjectMeta: meta("t"), Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{Catalog: []Tool{*digestTool()}}}}
	tools.Default()
	if tools.Spec.ToolApprovalMode() != ToolApprovalAuto {
		t.Errorf("tools approval defaults to %q", tools.Spec.ToolApprovalMode())
	}
	tools.Spec.Tools.Approval = "manual"
	if errs := tools.Validate(); len(errs) != 1 || errs[0].Field != "spec.tools.approval" {
		t.Errorf("spec.tools.approval manual: %v", errs)
	}
}

// BenchmarkToolDigest10k digests a catalog of 10,000 tools with small input
// schemas, as every snapshot build with tool sources does.
func BenchmarkToolDigest10k(b *testing.B) {
	catalog := make([]Tool, 10000)
	for i := range catalog {
		catalog[i] = Tool{
			Name: fmt.Sprintf("tool_%d", i), Namespace: "bench.ns",
			Description: fmt.Sprintf("Tool number %d does something useful with records of kind %d and reports back.", i, i%97),
			InputSchema: &apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf(
				`{"type":"object","properties":{"id":{"type":"string","description":"the record %d"},"limit":{"type":"integer","minimum":1,"maximum":100},"tags":{"type":"array","items":{"type":"string"}}},"required":["id"]}`, i))},
			Tags: []string{"bench"}, Examples: []string{"do the useful thing"}, SideEffects: SideEffectsRead,
		}
	}
	b.Run("digest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range catalog {
				ToolDigest(&catalog[i])
			}
		}
	})
	// The input schemas alone, written by hand and the way the definition
	// says (decode, encode with encoding/json): what the hand-written
	// encoder saves.
	b.Run("schemas", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			for i := range catalog {
				buf = appendCanonicalJSON(buf[:0], catalog[i].InputSchema.Raw)
			}
		}
	})
	b.Run("schemas-encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range catalog {
				referenceCanonical(catalog[i].InputSchema.Raw)
			}
		}
	})
}

// referenceCanonical is the canonical JSON as its definition says: decode
// (numbers as written), encode with encoding/json, HTML escaping off.
func referenceCanonical(raw []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

var canonicalCases = []string{
	`{"type":"object"}`,
	` { "b" : 1 , "a" : [ 1.0 , -2e3 , true , false , null ] } `,
	`{"z":{"y":{"x":[{"b":1,"a":2}]}},"a":"<&>"}`,
	`{"a":1,"a":2}`,
	`{"b":1,"a":2,"b":3}`,
	`{"\u0041":1,"A\"q":2,"@":3}`,
	`{"s":"tab\there \u2028 \u00e9 \ud83d\ude00 \/ \u0001"}`,
	"{\"s\":\"raw \u2028 line sep\"}",
	`{"s":"\ud800 lone surrogate"}`,
	`[]`, `{}`, `[{}]`, `"x"`, `12`,
	`{"a":}`, `{"a":1,}`, `[1 2]`, `{"a" 1}`, `tru`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`, `"unterminated`,
}

// TestCanonicalJSONMatchesDefinition holds the hand-written canonical JSON
// to what encoding/json gives, on documents that do and do not parse.
func TestCanonicalJSONMatchesDefinition(t *testing.T) {
	for _, doc := range canonicalCases {
		t.Run(doc, func(t *testing.T) { checkCanonical(t, []byte(doc)) })
	}
	for _, depth := range []int{10000, 10001} {
		t.Run(fmt.Sprintf("nested %d", depth), func(t *testing.T) {
			checkCanonical(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
		})
	}
}

func checkCanonical(t *testing.T, raw []byte) {
	got := appendCanonicalJSON([]byte("prefix"), raw)
	want, ok := referenceCanonical(raw)
	if !ok {
		want = raw // a document that does not parse is hashed as it is
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Errorf("canonical(%q)\n got %q\nwant %q", raw, got, want)
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, doc := range canonicalCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkCanonical(t, raw) })
}
