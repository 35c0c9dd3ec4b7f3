package cli

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/eval"
)

// routesManifest is a router whose routes match on words, tags and
// metadata, with a fallback; its sources are never read by eval routes
// (the folder does not even exist).
const routesManifest = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec: {type: Directory, directory: {path: ./does-not-exist}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: billing}
spec: {when: 'containsAnyWord(text, ["invoice", "refund"])', sources: [{name: docs}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: support}
spec: {when: '"support" in tags || metadata[?"team"].orValue("") == "support"', sources: [{name: docs}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: strict}
spec: {when: 'metadata["tier"] == "gold"', sources: [{name: docs}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec: {fallback: true, sources: [{name: docs}]}
`

// routesCases: 4 of 5 right. Line 5 expects billing for a question only
// the fallback serves, and strict's condition fails on every case without
// the "tier" key.
const routesCases = `{"text": "Where is my invoice?", "agent": "a", "expected_routes": ["billing"]}
{"text": "Printer broken", "agent": "a", "tags": ["support"], "expected_routes": ["support"]}
{"text": "refund please", "agent": "a", "metadata": {"team": "support", "tier": "gold"}, "expected_routes": ["billing", "support", "strict"]}

{"text": "Hello there", "agent": "a", "expected_routes": ["everything"]}
{"text": "Money back?", "agent": "a", "expected_routes": ["billing"]}
`

func TestEvalRoutes(t *testing.T) {
	dir := t.TempDir()
	manifest, cases := filepath.Join(dir, "router.yaml"), filepath.Join(dir, "cases.jsonl")
	write(t, manifest, routesManifest)
	write(t, cases, routesCases)

	out, stderr, code := run(t, "eval", "routes", "-f", manifest, "--cases", cases, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r eval.RouteReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Served (case, route) pairs: billing; support; billing, support, strict;
	// everything; everything — 7 served, 6 right; 7 expected, 6 found.
	if r.Cases != 5 || r.RouteAccuracy != 0.8 || r.MicroPrecision != 0.8571 || r.MicroRecall != 0.8571 {
		t.Errorf("cases %d, accuracy %v, precision %v, recall %v; want 5, 0.8, 0.8571, 0.8571", r.Cases, r.RouteAccuracy, r.MicroPrecision, r.MicroRecall)
	}
	scores := map[string]string{}
	for _, s := range r.Routes {
		f := func(p *float64) string {
			if p == nil {
				return "null"
			}
			return strconv.FormatFloat(*p, 'f', -1, 64)
		}
		scores[s.Route] = f(s.Precision) + "/" + f(s.Recall)
	}
	want := map[string]string{"billing": "1/0.6667", "support": "1/1", "strict": "1/1", "everything": "0.5/1"}
	for route, w := range want {
		if scores[route] != w {
			t.Errorf("route %s precision/recall = %s, want %s", route, scores[route], w)
		}
	}
	last := r.Results[4]
	if last.Line != 6 || last.Correct || strings.Join(last.Missing, ",") != "billing" || strings.Join(last.Unexpected, ",") != "everything" {
		t.Errorf("last case = %+v", last)
	}
	if len(r.Results[0].RouteErrors) != 1 || r.Results[0].RouteErrors[0].Route != "strict" {
		t.Errorf("route errors of case 1 = %+v, want strict's", r.Results[0].RouteErrors)
	}

	// Thresholds: under fails after printing the report, at or over passes.
	tests := []struct {
		name     string
		flags    []string
		code     int
		stderr   string
		textLine string
	}{
		{"accuracy under", []string{"--fail-under-accuracy", "0.81"}, 1, "route accuracy 0.8000 is under --fail-under-accuracy 0.81", "route accuracy:"},
		{"accuracy at", []string{"--fail-under-accuracy", "0.8"}, 0, "", `line 6: "Money back?": served [everything], expected [billing]`},
		{"precision and recall under", []string{"--fail-under-precision", "0.9", "--fail-under-recall", "0.9"}, 1,
			"micro precision 0.8571 is under --fail-under-precision 0.9; micro recall 0.8571 is under --fail-under-recall 0.9", "everything"},
		{"threshold out of range", []string{"--fail-under-recall", "90"}, 1, "--fail-under-recall: must be between 0 and 1, not 90", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"eval", "routes", "-f", manifest, "--cases", cases}, tt.flags...)...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) || !strings.Contains(out, tt.textLine) {
				t.Errorf("exit %d, stderr %q, out:\n%s\nwant exit %d, stderr with %q, out with %q", code, stderr, out, tt.code, tt.stderr, tt.textLine)
			}
		})
	}
}

func TestEvalRoutesBadCases(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "router.yaml")
	write(t, manifest, routesManifest)
	tests := []struct{ name, cases, want string }{
		{"unknown route", `{"text": "x", "expected_routes": ["biling"]}`,
			`cases.jsonl:1: expected_routes[0]: "biling" is not a route of the router (its routes: billing, support, strict, everything)`},
		{"missing expected_routes", "\n" + `{"text": "x"}`, `cases.jsonl:2: expected_routes: required`},
		{"empty text", `{"text": " ", "expected_routes": []}`, `cases.jsonl:1: text: must not be empty`},
		{"unknown field", `{"text": "x", "expected": ["billing"], "expected_routes": []}`, `cases.jsonl:1: json: unknown field "expected"`},
		{"not JSON", `text: x`, `cases.jsonl:1: invalid character`},
		{"duplicate route", `{"text": "x", "expected_routes": ["billing", "billing"]}`, `cases.jsonl:1: expected_routes[1]: "billing" is listed twice`},
		{"bad request", `{"text": "x", "tags": ["` + strings.Repeat("t", 300) + `"], "expected_routes": []}`,
			`cases.jsonl:1: bad request: tags[0] is 300 bytes`},
		{"no cases", "\n\n", `cases.jsonl: no cases`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cases := filepath.Join(dir, "cases.jsonl")
			write(t, cases, tt.cases)
			_, stderr, code := run(t, "eval", "routes", "-f", manifest, "--cases", cases)
			if code != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tt.want)
			}
		})
	}
}

// TestQueryShowsGates: the text output says which route served as a
// fallback or an alternate; a source that cannot be loaded fails its route.
func TestQueryShowsGates(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "router.yaml")
	write(t, manifest, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: missing}
spec: {type: Directory, directory: {path: ./does-not-exist}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec: {type: Inline, inline: {title: Wiki, content: The wiki answers.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: docs}
spec: {when: '"docs" in tags', sources: [{name: missing}], alternate: wiki-route}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: wiki-route}
spec: {when: '"wiki" in tags', sources: [{name: wiki}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec: {fallback: true, sources: [{name: wiki}]}
`)
	tests := []struct{ name, tag, want string }{
		{"alternate", "docs", "matched routes:  docs, wiki-route (alternate for docs)\n"},
		{"fallback", "other", "matched routes:  everything (fallback)\n"},
		{"condition", "wiki", "matched routes:  wiki-route\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, "query", "-f", manifest, "-t", tt.tag, "what does the wiki say")
			if code != 0 || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d (%s), out:\n%s\nwant a line %q", code, stderr, out, tt.want)
			}
		})
	}
}
