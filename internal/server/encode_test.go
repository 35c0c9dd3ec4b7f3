package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/classify"
	"github.com/contextrouter/contextrouter/internal/engine"
)

func stdJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var trickyStrings = []string{
	"",
	"plain text",
	`quotes " and \ backslash`,
	"controls \b \f \n \r \t \x00 \x01 \x1f \x7f",
	"html <b>&amp;</b> stays as is",
	"unicode: Grüße, 東京, emoji 🚀, line\u2028sep\u2029para",
	"invalid utf-8: \xff \xc3\x28 \xe2\x82 end",
	"trailing invalid \xed",
	strings.Repeat("long run of plain text ", 200),
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		want := strings.TrimSuffix(string(stdJSON(t, s)), "\n")
		if got := string(appendString(nil, s)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
	// Every single byte value, alone and between plain text.
	for c := 0; c < 256; c++ {
		s := fmt.Sprintf("a%cb", c)
		want := strings.TrimSuffix(string(stdJSON(t, s)), "\n")
		if got := string(appendString(nil, s)); got != want {
			t.Errorf("byte %#x: %s, want %s", c, got, want)
		}
	}
}

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 0.9333, 1e-7, 1.5e-9, 123456.789, 1e20, 1e21, 3.2e22, -4e-7, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		want := strings.TrimSuffix(string(stdJSON(t, f)), "\n")
		if got := string(appendFloat(nil, f)); got != want {
			t.Errorf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

// fill sets every field reachable from v to a distinct non-zero value
// (slices get two elements), so that a field the encoder does not know
// shows up as a difference.
func fill(v reflect.Value, n *int, salt string) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d <&> \"q\"\n", salt, *n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i), n, salt)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), n, salt)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n, salt)
		fill(e, n, salt)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n, salt)
		v.Set(p)
	default:
		panic("fill: unsupported kind " + v.Kind().String())
	}
}

func TestAppendResponseMatchesEncodingJSON(t *testing.T) {
	full := &engine.Response{}
	n := 0
	fill(reflect.ValueOf(full).Elem(), &n, "x")

	// A real answer, with redaction and failures, as the engine makes them.
	snap := compileFiles(t, quickstart)
	real, err := snap.Query(context.Background(), engine.Request{Text: "What are the salary bands and the quarterly budget?", Agent: "hr-assistant", Tags: []string{"hr"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]*engine.Response{
		"every field set": full,
		"zero value":      {},
		"omitempty fields unset": {Chunks: []engine.Chunk{{Content: "c", Metadata: engine.ChunkMetadata{Chunk: 3}}},
			MatchedRoutes: []string{"r"}, RouteMatches: []engine.RouteMatch{{Route: "r", MatchedBy: engine.MatchedByCondition}},
			DeniedSources: []string{}, FailedSources: []engine.SourceFailure{{Source: "s", Error: "e"}}, RouteErrors: []engine.RouteError{}},
		"quickstart answer": real,
		"tool cards, optional fields unset": {Tools: []engine.ToolCard{
			{ToolInfo: engine.ToolInfo{Name: "web_search", Source: "web", Description: "Search <the> \"web\"\n", SideEffects: v1alpha1.SideEffectsRead}, Score: 1.2345, Confidence: 0.5},
			{ToolInfo: engine.ToolInfo{Name: "refund", Namespace: "billing", Source: "billing-tools", Description: "Refund.", SideEffects: v1alpha1.SideEffectsWrite,
				SafetyTags: []string{"financial", "pii"}, CostHint: "$0.01/call"}, Score: 1e-7, Confidence: 0, Fallback: true},
		}, Stats: engine.Stats{Tools: engine.ToolStats{Candidates: 7, Denied: 2, BelowThreshold: 1, Returned: 2}}},
		"no tools":          {Tools: []engine.ToolCard{}},
		"no tools, and why": {Tools: []engine.ToolCard{}, Stats: engine.Stats{Tools: engine.ToolStats{Candidates: 3, Denied: 3, Reason: engine.ToolsAllDenied}}},
		"freshness: a new chunk and a stale one": {Chunks: []engine.Chunk{
			{Content: "new", Metadata: engine.ChunkMetadata{AgeSeconds: new(int64), Stale: new(bool)}},
			{Content: "old", Metadata: engine.ChunkMetadata{AgeSeconds: ptr.To(int64(259200)), Stale: ptr.To(true)}},
		}, Stats: engine.Stats{Dropped: engine.Dropped{Stale: 4}}},
		"detection": {Detection: &engine.Detection{
			Classifiers: map[string]engine.ClassifierResult{
				"urgency": {Label: "high", Confidence: 0.5, Alternatives: []classify.Alternative{}},
				"intent":  {Label: "<refund>", Confidence: 0.9123, Alternatives: []classify.Alternative{{Label: "de\"ploy", Confidence: 1e-7}, {Label: "ü", Confidence: 0}}},
			},
			Entities: []engine.Entity{{Type: "ticket", Value: "OPS-1 & <x>", Start: 3, End: 14}, {Type: "t", Value: "\u2028", Start: 0, End: 3}},
		}},
		"detection, nothing found": {Detection: &engine.Detection{Classifiers: map[string]engine.ClassifierResult{}, Entities: []engine.Entity{}}},
	}
	for _, s := range trickyStrings {
		cases["strings: "+s[:min(len(s), 20)]] = &engine.Response{Text: s, Chunks: []engine.Chunk{{Content: s, Title: s, Path: s}}}
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			want := stdJSON(t, r)
			if got := appendResponse(nil, r); !bytes.Equal(got, want) {
				t.Fatalf("appendResponse differs from encoding/json:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	snap := compileFiles(b, quickstart)
	resp, err := snap.Query(context.Background(), engine.Request{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("appendResponse", func(b *testing.B) {
		buf := make([]byte, 0, 32<<10)
		b.ReportAllocs()
		for b.Loop() {
			buf = appendResponse(buf[:0], resp)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(resp)
		}
		b.SetBytes(int64(buf.Len()))
	})
}
