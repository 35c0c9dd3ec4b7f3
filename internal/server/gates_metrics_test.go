package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// gatesManifests: kb-route's only source fails, so wiki-route answers for
// it; everything is the fallback. alternate names kb-route's alternate.
func gatesManifests(kbURL, alternate string) string {
	return fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: kb}
spec:
  type: HTTPAPI
  httpAPI: {url: "%s?q={{query}}", textField: text}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec: {type: Inline, inline: {title: Wiki, content: The wiki answers.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: handbook}
spec: {type: Inline, inline: {title: Handbook, content: The handbook covers the rest.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: kb-route}
spec: {when: '"kb" in tags', sources: [{name: kb}], alternate: %s, timeout: 2s}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: wiki-route}
spec: {when: '"wiki" in tags', sources: [{name: wiki}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: other-wiki}
spec: {when: '"other" in tags', sources: [{name: wiki}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec: {fallback: true, sources: [{name: handbook}]}
`, kbURL, alternate)
}

// TestRouteMetrics reads the gates' series from GET /metrics after queries
// that use them, and after a reload that changes the alternate.
func TestRouteMetrics(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusBadGateway)
	}))
	defer broken.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	writeAtomic(t, file, gatesManifests(broken.URL, "wiki-route"))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()

	for _, req := range []engine.Request{
		{Text: "question", Tags: []string{"kb"}},   // kb fails: wiki-route as its alternate
		{Text: "question", Tags: []string{"wiki"}}, // wiki-route by condition
		{Text: "question"},                         // nothing matches: the fallback
		{Text: "question"},
	} {
		ts.query(req)
	}
	scrape := func() string {
		code, body := ts.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d", code)
		}
		return string(body)
	}
	body := scrape()
	for _, line := range []string{
		`contextrouter_route_alternates_total{alternate="wiki-route",route="kb-route"} 1`,
		`contextrouter_route_fallbacks_total{route="everything"} 2`,
		`contextrouter_route_fallbacks_total{route="wiki-route"} 0`,
		`contextrouter_route_matches_total{route="wiki-route"} 2`,
		`contextrouter_route_matches_total{route="everything"} 2`,
		`contextrouter_route_duration_seconds_count{route="wiki-route"} 2`,
		`contextrouter_route_duration_seconds_count{route="kb-route"} 1`,
		`contextrouter_route_duration_seconds_count{route="everything"} 2`,
		`contextrouter_route_duration_seconds_count{route="other-wiki"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// Only configured pairs are series: bounded by the routes.
	if n := strings.Count(body, "contextrouter_route_alternates_total{"); n != 1 {
		t.Errorf("%d route_alternates_total series, want 1", n)
	}

	// A reload that points kb-route at another alternate drops the old pair.
	writeAtomic(t, file, gatesManifests(broken.URL, "other-wiki"))
	eventually(t, 10*time.Second, "the new alternate", func() bool {
		r := ts.query(engine.Request{Text: "question", Tags: []string{"kb"}})
		return len(r.MatchedRoutes) == 2 && r.MatchedRoutes[1] == "other-wiki"
	})
	body = scrape()
	if strings.Contains(body, `contextrouter_route_alternates_total{alternate="wiki-route"`) {
		t.Error("the series of the old alternate is still exported")
	}
	if !strings.Contains(body, `contextrouter_route_alternates_total{alternate="other-wiki",route="kb-route"} 1`+"\n") {
		t.Errorf("the new alternate is not counted:\n%s", grepLines(body, "route_alternates"))
	}
}
