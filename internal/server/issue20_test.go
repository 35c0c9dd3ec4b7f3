package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// issue20Manifests: a system prompt on a route that always applies, a
// billing route whose knowledge base is kbURL with the system prompt on it
// too, the wiki as its alternate, and a fallback.
func issue20Manifests(kbURL string) string {
	return fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt}
spec: {type: Inline, inline: {title: System prompt, content: You are the billing assistant.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: kb}
spec:
  type: HTTPAPI
  httpAPI: {url: "%s?q={{query}}", textField: text}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec: {type: Inline, inline: {title: Wiki, content: The wiki answers when the knowledge base cannot.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: handbook}
spec: {type: Inline, inline: {title: Handbook, content: The handbook covers everything else.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: system}
spec: {sources: [{name: prompt}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: billing}
spec: {when: 'containsAnyWord(text, ["invoice"])', sources: [{name: prompt}, {name: kb}], alternate: wiki-route}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: wiki-route}
spec: {when: '"wiki" in tags', sources: [{name: wiki}]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: everything}
spec: {fallback: true, sources: [{name: handbook}]}
`, kbURL)
}

// TestIssue20Bar is the bar issue 20 is checked by, over HTTP: a router with
// an always-route system prompt and a fallback answers an unmatched question
// from the fallback with the system prompt kept; a route with an Inline
// system prompt and a failing HTTP source serves its alternate.
func TestIssue20Bar(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "router.yaml"), issue20Manifests(broken.URL))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()

	titles := func(r engine.Response) []string {
		var out []string
		for _, c := range r.Chunks {
			out = append(out, c.Title)
		}
		slices.Sort(out)
		return out
	}
	t.Run("an unmatched question: the fallback, the system prompt kept", func(t *testing.T) {
		r := ts.query(engine.Request{Text: "What is for lunch on Thursday?"})
		want := []engine.RouteMatch{{Route: "system", MatchedBy: engine.MatchedByAlways}, {Route: "everything", MatchedBy: engine.MatchedByFallback}}
		if !reflect.DeepEqual(r.RouteMatches, want) {
			t.Errorf("route_matches = %+v, want %+v", r.RouteMatches, want)
		}
		if got := titles(r); !slices.Equal(got, []string{"Handbook", "System prompt"}) {
			t.Errorf("chunks %q, want the handbook and the system prompt", got)
		}
		if !strings.Contains(r.Text, "You are the billing assistant.") || r.Stats.Routes.Fallback != 1 {
			t.Errorf("text %q, stats.routes %+v; want the system prompt in it and one fallback", r.Text, r.Stats.Routes)
		}
	})
	t.Run("an Inline prompt and a failing HTTP source: the alternate serves", func(t *testing.T) {
		r := ts.query(engine.Request{Text: "Where is my invoice?"})
		want := []engine.RouteMatch{{Route: "system", MatchedBy: engine.MatchedByAlways}, {Route: "billing", MatchedBy: engine.MatchedByCondition},
			{Route: "wiki-route", MatchedBy: engine.MatchedByAlternate, AlternateFor: "billing"}}
		if !reflect.DeepEqual(r.RouteMatches, want) {
			t.Errorf("route_matches = %+v, want %+v", r.RouteMatches, want)
		}
		if len(r.FailedSources) != 1 || r.FailedSources[0].Source != "kb" || !strings.Contains(r.FailedSources[0].Error, "500") {
			t.Errorf("failed_sources = %+v, want kb with its 500", r.FailedSources)
		}
		if got := titles(r); !slices.Equal(got, []string{"System prompt", "Wiki"}) || r.Stats.Routes.Alternate != 1 {
			t.Errorf("chunks %q, stats.routes %+v; want the system prompt and the wiki, one alternate", got, r.Stats.Routes)
		}
	})
}

// TestUnknownLabelAtLoadAndReload: a misspelt classifier label refuses the
// configuration at the first load and at a reload (the old one keeps
// serving), with the labels and the nearest one; a classifier without
// out-of-scope examples is logged as a warning.
func TestUnknownLabelAtLoadAndReload(t *testing.T) {
	manifests := func(label string) string {
		return `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: faq}
spec: {type: Inline, inline: {title: FAQ, content: Restart the laptop first.}}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextClassifier
metadata: {name: intent}
spec:
  labels:
  - {name: it_help, examples: [my laptop does not start, reset my password, the vpn is down]}
  - {name: billing, examples: [where is my invoice, I was charged twice]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: it}
spec: {when: 'detected.intent.label == "` + label + `"', sources: [{name: faq}]}
`
	}
	const want = `ContextRoute/it: spec.when: detected.intent.label compared with "it-help", which is not a label of ContextClassifier intent (did you mean "it_help"?); its labels are "billing", "it_help"`
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	writeAtomic(t, file, manifests("it-help"))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	eventually(t, 10*time.Second, "the failed first load", func() bool { return strings.Contains(ts.status().LastReloadError, want) })
	if code, _ := ts.get("/readyz"); code == http.StatusOK {
		t.Error("ready with a configuration that failed to load")
	}

	writeAtomic(t, file, manifests("it_help"))
	ts.waitReady()
	good := ts.status().SnapshotHash
	if r := ts.query(engine.Request{Text: "my laptop does not start"}); !slices.Equal(r.MatchedRoutes, []string{"it"}) {
		t.Errorf("matched %v, want it", r.MatchedRoutes)
	}
	if !strings.Contains(ts.logs.String(), `ContextClassifier/intent: spec.outOfScopeLabel: no out-of-scope examples`) {
		t.Error("the classifier without out-of-scope examples is not logged")
	}

	writeAtomic(t, file, manifests("it-help"))
	eventually(t, 10*time.Second, "the failed reload", func() bool { return strings.Contains(ts.status().LastReloadError, want) })
	if st := ts.status(); st.SnapshotHash != good || !st.Ready {
		t.Errorf("serving %s (ready %v), want the old snapshot %s", st.SnapshotHash, st.Ready, good)
	}
	if r := ts.query(engine.Request{Text: "my laptop does not start"}); !slices.Equal(r.MatchedRoutes, []string{"it"}) {
		t.Errorf("after the bad reload: matched %v, want it (the old configuration)", r.MatchedRoutes)
	}
}
