package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// TestFreshnessOverHTTP: chunk ages reach the JSON answer, Drop is counted
// in stats, and /v1/status shows each source's newest content and whether
// even that is stale.
func TestFreshnessOverHTTP(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	recent, old := now.Add(-time.Hour).Truncate(time.Second), now.Add(-10*24*time.Hour).Truncate(time.Second)
	for _, f := range []struct {
		path string
		mt   time.Time
	}{{"wiki/recent.md", recent}, {"wiki/old.md", old}, {"archive/ancient.md", old}} {
		p := filepath.Join(root, f.path)
		writeAtomic(t, p, "# "+f.path+"\n\nRolling back a deploy, as "+f.path+" tells it.\n")
		if err := os.Chtimes(p, f.mt, f.mt); err != nil {
			t.Fatal(err)
		}
	}
	manifest := filepath.Join(root, "router.yaml")
	writeAtomic(t, manifest, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: wiki}
spec:
  type: Directory
  directory: {path: wiki}
  freshness: {maxAge: 24h, staleAction: Drop}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: archive}
spec:
  type: Directory
  directory: {path: archive}
  freshness: {maxAge: 168h}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: wiki}, {name: archive}]
`)
	ts := startServer(t, Options{Paths: []string{manifest}, PollInterval: -1})
	ts.waitReady()

	resp := ts.query(engine.Request{Text: "roll back a deploy"})
	if resp.Stats.Dropped.Stale != 1 || resp.Stats.Included != 2 || resp.Stats.Candidates != 3 {
		t.Errorf("stats %+v: want wiki/old.md dropped as stale, the two others included", resp.Stats)
	}
	for _, c := range resp.Chunks {
		if c.Metadata.AgeSeconds == nil || c.Metadata.Stale == nil {
			t.Fatalf("chunk %s:%s has no age: %+v", c.Source, c.Path, c.Metadata)
		}
		wantStale := c.Source == "archive"
		if *c.Metadata.Stale != wantStale {
			t.Errorf("chunk %s:%s stale = %v, want %v", c.Source, c.Path, *c.Metadata.Stale, wantStale)
		}
	}
	// The raw answer has the documented keys.
	code, raw := ts.do(http.MethodPost, "/v1/query", bytes.NewReader([]byte(`{"text": "roll back a deploy"}`)), nil)
	if code != http.StatusOK || !bytes.Contains(raw, []byte(`"stale":true`)) || !bytes.Contains(raw, []byte(`"age_seconds":`)) || !bytes.Contains(raw, []byte(`"dropped":{"budget":0,"path_denied":0,"sensitivity":0,"duplicate":0,"stale":1}`)) {
		t.Errorf("answer %d: %s", code, raw)
	}

	byName := map[string]SourceStatus{}
	for _, s := range ts.status().Sources {
		byName[s.Name] = s
	}
	for _, tc := range []struct {
		name   string
		newest time.Time
		stale  bool
	}{{"wiki", recent, false}, {"archive", old, true}} {
		s := byName[tc.name]
		if s.NewestContentTime == nil || !s.NewestContentTime.Equal(tc.newest) || s.ContentAgeSeconds == nil || s.Stale != tc.stale {
			t.Errorf("status of %s: newest %v age %v stale %v; want newest %v, stale %v", tc.name, s.NewestContentTime, s.ContentAgeSeconds, s.Stale, tc.newest, tc.stale)
			continue
		}
		if want := int64(time.Since(tc.newest) / time.Second); *s.ContentAgeSeconds > want || *s.ContentAgeSeconds < want-60 {
			t.Errorf("status of %s: content_age_seconds %d, want about %d", tc.name, *s.ContentAgeSeconds, want)
		}
		if v, ok := ts.metric("contextrouter_source_content_age_seconds", "source", tc.name); !ok || v < float64(*s.ContentAgeSeconds) || v > float64(*s.ContentAgeSeconds)+60 {
			t.Errorf("contextrouter_source_content_age_seconds{source=%q} = %v (%v), want about %d", tc.name, v, ok, *s.ContentAgeSeconds)
		}
	}
}

// TestFreshnessHTTPAPITimeFieldStatus: an HTTPAPI source whose results carry
// their own date (timeField) is as old in /v1/status and in
// contextrouter_source_content_age_seconds as its newest result, not as its
// last fetch: answers three days old make it stale though just fetched.
func TestFreshnessHTTPAPITimeFieldStatus(t *testing.T) {
	dated := time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Second)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"results": [{"text": "Swarm season report.", "date": %q}, {"text": "Older swarm notes.", "date": %q}]}`,
			dated.Format(time.RFC3339), dated.Add(-time.Hour).Format(time.RFC3339))
	}))
	t.Cleanup(api.Close)
	manifest := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, manifest, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: news}
spec:
  type: HTTPAPI
  httpAPI: {url: "`+api.URL+`/?q={{query}}", responsePath: results, textField: text, timeField: date}
  freshness: {maxAge: 24h}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: news}]
`)
	ts := startServer(t, Options{Paths: []string{manifest}, PollInterval: -1})
	ts.waitReady()
	if resp := ts.query(engine.Request{Text: "swarm"}); len(resp.Chunks) != 2 {
		t.Fatalf("chunks %+v: want both results", resp.Chunks)
	}
	var s SourceStatus
	for _, x := range ts.status().Sources {
		if x.Name == "news" {
			s = x
		}
	}
	if s.NewestContentTime == nil || !s.NewestContentTime.Equal(dated) || !s.Stale || s.ContentAgeSeconds == nil {
		t.Fatalf("status of news: newest %v age %v stale %v; want newest %v (the newest result's date), stale", s.NewestContentTime, s.ContentAgeSeconds, s.Stale, dated)
	}
	if want := int64(time.Since(dated) / time.Second); *s.ContentAgeSeconds > want || *s.ContentAgeSeconds < want-60 {
		t.Errorf("content_age_seconds %d, want about %d", *s.ContentAgeSeconds, want)
	}
	if v, ok := ts.metric("contextrouter_source_content_age_seconds", "source", "news"); !ok || v < float64(*s.ContentAgeSeconds) || v > float64(*s.ContentAgeSeconds)+60 {
		t.Errorf("contextrouter_source_content_age_seconds{source=news} = %v (%v), want about %d", v, ok, *s.ContentAgeSeconds)
	}
}
