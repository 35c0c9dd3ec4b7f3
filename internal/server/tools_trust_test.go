package server

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// opsManifests is a small ops catalog with a web search as the fallback,
// and six tools that say the same thing (three sources, as copies served by
// several MCP servers would be). The router keeps every setting of
// spec.tools at its default but the fallback.
const opsManifests = `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: ops}
spec:
  defaultAccess: Allow
  tools:
    fallback: [{source: web-tools, name: web_search}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: ops-tools}
spec:
  type: Tools
  tools:
    catalog:
    - {name: page_oncall, namespace: ops, description: Page the on-call engineers of a service about an incident., sideEffects: Write}
    - {name: restart_service, namespace: ops, description: Restart the pods of a service in a cluster., sideEffects: Destructive}
    - {name: rollback_deploy, namespace: ops, description: Roll back a deployment to its previous release., sideEffects: Write}
    - {name: query_logs, namespace: ops, description: Search the logs of a service for errors in a time range., sideEffects: Read}
    - {name: open_incident, namespace: ops, description: Open an incident ticket with a severity and a summary., sideEffects: Write}
    - {name: scale_deployment, namespace: ops, description: Scale the replicas of a deployment up or down., sideEffects: Write}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: web-tools}
spec:
  type: Tools
  tools:
    catalog:
    - {name: web_search, description: Search the public web., sideEffects: Read}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: ops}
spec:
  sources: [{name: ops-tools}, {name: metrics-a}, {name: metrics-b}, {name: metrics-c}]
`

// metricsSource is a Tools source with two of the six identical tools.
func metricsSource(name string) string {
	return fmt.Sprintf(`---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: %s}
spec:
  type: Tools
  tools:
    catalog:
    - {name: cpu_usage, namespace: metrics, description: Show the CPU usage of a service over the last hour., sideEffects: Read}
    - {name: cpu_usage_v2, namespace: metrics, description: Show the CPU usage of a service over the last hour., sideEffects: Read}
`, name)
}

func opsServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	m := opsManifests + metricsSource("metrics-a") + metricsSource("metrics-b") + metricsSource("metrics-c")
	if err := os.WriteFile(filepath.Join(dir, "router.yaml"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Options{Paths: []string{dir}})
	ts.waitReady()
	return ts
}

// TestToolsTrustOverHTTP is the bar of issue 19 on a small ops catalog
// over HTTP: an off-topic question that shares one word with one tool gets
// a weak card and the fallback; six identical tools take one place, listing
// the others; explain says why.
func TestToolsTrustOverHTTP(t *testing.T) {
	ts := opsServer(t)

	t.Run("a lone weak match is not confident", func(t *testing.T) {
		code, resp, raw := postTools(t, ts, `{"text": "What are the salary bands for engineers?"}`)
		if code != 200 || len(resp.Tools) == 0 {
			t.Fatalf("%d %s", code, raw)
		}
		first := resp.Tools[0]
		if first.Name != "page_oncall" || first.Confidence >= 0.5 {
			t.Errorf("first card %s at confidence %v, want page_oncall below 0.5: %s", first.Name, first.Confidence, raw)
		}
		last := resp.Tools[len(resp.Tools)-1]
		if last.Name != "web_search" || !last.Fallback {
			t.Errorf("the fallback did not join: %s", raw)
		}
	})

	t.Run("a fitting question is confident", func(t *testing.T) {
		_, resp, raw := postTools(t, ts, `{"text": "page the on-call engineers of the payments service"}`)
		if len(resp.Tools) == 0 || resp.Tools[0].Name != "page_oncall" || resp.Tools[0].Confidence < 0.5 {
			t.Fatalf("want page_oncall at confidence ≥ 0.5: %s", raw)
		}
		for _, c := range resp.Tools {
			if c.Fallback {
				t.Errorf("fallback joined a confident shortlist: %s", raw)
			}
		}
	})

	t.Run("six identical tools take one place", func(t *testing.T) {
		_, resp, raw := postTools(t, ts, `{"text": "show the cpu usage of the checkout service", "max_tools": 5}`)
		copies := 0
		var card engine.ToolCard
		for _, c := range resp.Tools {
			if strings.HasPrefix(c.Name, "cpu_usage") {
				copies++
				card = c
			}
		}
		if copies != 1 {
			t.Fatalf("%d cards of the six copies, want 1: %s", copies, raw)
		}
		// The best-ranked copy (source, then id) stands for the others.
		if card.Source != "metrics-a" || card.Name != "cpu_usage" || len(card.Also) != 5 {
			t.Errorf("card %s/%s also %v, want metrics-a/cpu_usage and the 5 others", card.Source, card.Name, card.Also)
		}
		want := []engine.ToolRef{{ID: "metrics.cpu_usage_v2", Source: "metrics-a"}, {ID: "metrics.cpu_usage", Source: "metrics-b"}}
		if len(card.Also) < 2 || card.Also[0] != want[0] || card.Also[1] != want[1] {
			t.Errorf("also %v, want it to start %v", card.Also, want)
		}
		if !strings.Contains(raw, `"also":[{"id":"metrics.cpu_usage_v2","source":"metrics-a"}`) {
			t.Errorf("also not in the JSON: %s", raw)
		}
	})

	t.Run("explain", func(t *testing.T) {
		_, plain, _ := postTools(t, ts, `{"text": "restart the checkout service"}`)
		_, resp, raw := postTools(t, ts, `{"text": "restart the checkout service", "explain": true}`)
		if len(resp.Tools) == 0 || len(resp.Tools) != len(plain.Tools) {
			t.Fatalf("explained %d cards, plain %d: %s", len(resp.Tools), len(plain.Tools), raw)
		}
		for i, c := range resp.Tools {
			if plain.Tools[i].Explain != nil {
				t.Errorf("a card without explain: true carries explain")
			}
			if c.Fallback {
				continue
			}
			e := c.Explain
			if e == nil {
				t.Fatalf("card %s without explain: %s", c.Name, raw)
			}
			// The card's confidence has 4 decimals.
			if math.Abs(e.Confidence-c.Confidence) > 5e-5 || e.ConfidenceBefore != e.Evidence.Softmax || e.ConfidenceBefore > 1 {
				t.Errorf("card %s: confidence %v / %v, explain %+v", c.Name, c.Confidence, e.Confidence, e)
			}
		}
		e := resp.Tools[0].Explain
		if resp.Tools[0].Name != "restart_service" || len(e.Terms) == 0 || e.Terms[0].Term != "restart" {
			t.Fatalf("first card %s, terms %+v", resp.Tools[0].Name, e.Terms)
		}
		if got := strings.Join(e.Terms[0].Fields, ","); got != "name,description" {
			t.Errorf("restart found in %q, want name,description", got)
		}
		if !strings.Contains(raw, `"score_parts":{`) || !strings.Contains(raw, `"confidence_before":`) {
			t.Errorf("explain fields missing: %s", raw)
		}
	})
}
