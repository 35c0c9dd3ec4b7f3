package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/cache"
)

// searchAPI is a real HTTP search API that counts the requests per query and
// fails the queries it is told to.
type searchAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]bool
}

func newSearchAPI(t *testing.T) *searchAPI {
	a := &searchAPI{calls: map[string]int{}, fail: map[string]bool{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		a.mu.Lock()
		a.calls[q]++
		fail := a.fail[q]
		a.mu.Unlock()
		if fail {
			http.Error(w, "index unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"results":[{"title":"About %s","text":"What the API knows about %s.","path":"kb/%d.md"}]}`, q, q, len(q))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *searchAPI) count(q string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[q]
}

func (a *searchAPI) setFail(q string, fail bool) {
	a.mu.Lock()
	a.fail[q] = fail
	a.mu.Unlock()
}

func (a *searchAPI) source(maxResults int32) v1alpha1.ContextSource {
	return v1alpha1.ContextSource{ObjectMeta: meta("kb-search"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI,
		HTTPAPI: &v1alpha1.HTTPAPISource{URL: a.srv.URL + "/search?q={{query}}", ResponsePath: "results", TextField: "text",
			TitleField: "title", PathField: "path", MaxResults: maxResults, Timeout: &metav1.Duration{Duration: 2 * time.Second}}}}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func cachedSnapshot(t *testing.T, api *searchAPI, maxResults int32, rc ResultCache) *Snapshot {
	t.Helper()
	cfg := &Config{
		Router:  router(nil),
		Routes:  []v1alpha1.ContextRoute{routeTo("all", "", "kb-search")},
		Sources: []v1alpha1.ContextSource{api.source(maxResults)},
	}
	s, err := Compile(context.Background(), cfg, Options{Cache: rc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// answer is a response without its timing, for comparing answers.
func answer(t *testing.T, r *Response) string {
	t.Helper()
	cp := *r
	cp.EvaluationTimeMS = 0
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResultCacheServesRepeatedQueries(t *testing.T) {
	api := newSearchAPI(t)
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	rc, err := cache.New(cache.Options{TTL: time.Minute, MaxEntries: 100, MaxBytes: 1 << 20, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := cachedSnapshot(t, api, 5, rc)
	first := query(t, s, Request{Text: "vacation"})
	if len(first.Chunks) != 1 || first.Chunks[0].Title != "About vacation" || first.Chunks[0].Source != "kb-search" {
		t.Fatalf("first answer = %+v", first.Chunks)
	}

	// Each step runs a query and says how many requests the API has then seen for it.
	for _, step := range []struct {
		name      string
		before    func()
		snap      func() *Snapshot
		text      string
		wantCalls int
		wantFail  bool
	}{
		{name: "the same question is answered from the cache", text: "vacation", wantCalls: 1},
		{name: "another question asks the API", text: "parental leave", wantCalls: 1},
		{name: "the other question is cached too", text: "parental leave", wantCalls: 1},
		{name: "within the TTL still cached", before: func() { clk.Advance(59 * time.Second) }, text: "vacation", wantCalls: 1},
		{name: "after the TTL the API is asked again", before: func() { clk.Advance(time.Second) }, text: "vacation", wantCalls: 2},
		{name: "and the new answer is cached", text: "vacation", wantCalls: 2},
		{name: "a failed fetch is reported", before: func() { api.setFail("outage", true) }, text: "outage", wantCalls: 1, wantFail: true},
		{name: "and not cached", before: func() { api.setFail("outage", false) }, text: "outage", wantCalls: 2},
		{name: "a success after it is cached", text: "outage", wantCalls: 2},
		{name: "an edited source misses", snap: func() *Snapshot { return cachedSnapshot(t, api, 6, rc) }, text: "vacation", wantCalls: 3},
		{name: "the old snapshot keeps its own entries", snap: func() *Snapshot { return s }, text: "vacation", wantCalls: 3},
		{name: "a new snapshot of the same spec shares them", snap: func() *Snapshot { return cachedSnapshot(t, api, 5, rc) }, text: "vacation", wantCalls: 3},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.before != nil {
				step.before()
			}
			snap := s
			if step.snap != nil {
				snap = step.snap()
			}
			resp := query(t, snap, Request{Text: step.text})
			if got := api.count(step.text); got != step.wantCalls {
				t.Errorf("the API saw %d requests for %q, want %d", got, step.text, step.wantCalls)
			}
			failed := len(resp.FailedSources) == 1 && resp.FailedSources[0].Source == "kb-search"
			if failed != step.wantFail || (!step.wantFail && len(resp.Chunks) != 1) {
				t.Errorf("failed_sources %+v, chunks %d; want failure %t", resp.FailedSources, len(resp.Chunks), step.wantFail)
			}
		})
	}

	// A cached answer is the same response as the fetched one.
	if again := query(t, s, Request{Text: "vacation"}); answer(t, again) != answer(t, first) {
		t.Errorf("cached answer differs:\n got %s\nwant %s", answer(t, again), answer(t, first))
	}
	hits, misses := rc.Stats()
	if hits != 8 || misses != 6 {
		t.Errorf("cache stats = %d hits, %d misses; want 8, 6", hits, misses)
	}
}

func TestResultCacheOnDiskAcrossProcesses(t *testing.T) {
	api := newSearchAPI(t)
	dir := t.TempDir()
	rc1, err := cache.New(cache.Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := answer(t, query(t, cachedSnapshot(t, api, 5, rc1), Request{Text: "expenses"}))
	rc1.Flush()

	// A restarted router reads the answer from disk.
	rc2, err := cache.New(cache.Options{TTL: time.Hour, MaxEntries: 10, MaxBytes: 1 << 20, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := answer(t, query(t, cachedSnapshot(t, api, 5, rc2), Request{Text: "expenses"}))
	if api.count("expenses") != 1 {
		t.Errorf("the API saw %d requests, want 1 (the second from disk)", api.count("expenses"))
	}
	if got != want {
		t.Errorf("answer from disk differs:\n got %s\nwant %s", got, want)
	}
}

func TestNoResultCacheFetchesEveryTime(t *testing.T) {
	api := newSearchAPI(t)
	for _, rc := range []ResultCache{nil, (*cache.Cache)(nil)} {
		s := cachedSnapshot(t, api, 5, rc)
		query(t, s, Request{Text: "q"})
		query(t, s, Request{Text: "q"})
	}
	if got := api.count("q"); got != 4 {
		t.Errorf("the API saw %d requests, want 4", got)
	}
}

func TestResultCacheKeyIsSourceFingerprint(t *testing.T) {
	api := newSearchAPI(t)
	base := api.source(5)
	fp := SourceFingerprint(&base)
	if len(fp) != len("sha256:")+64 || fp[:7] != "sha256:" {
		t.Fatalf("fingerprint %q, want sha256:<64 hex>", fp)
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.ContextSource)
		same bool
	}{
		{"a deep copy", func(*v1alpha1.ContextSource) {}, true},
		{"labels do not count", func(s *v1alpha1.ContextSource) { s.Labels = map[string]string{"team": "x"} }, true},
		{"another URL", func(s *v1alpha1.ContextSource) { s.Spec.HTTPAPI.URL += "&lang=en" }, false},
		{"another header", func(s *v1alpha1.ContextSource) {
			v := "1"
			s.Spec.HTTPAPI.Headers = []v1alpha1.HTTPHeader{{Name: "X-Version", Value: &v}}
		}, false},
		{"another name", func(s *v1alpha1.ContextSource) { s.Name = "kb-search-2" }, false},
		{"another namespace", func(s *v1alpha1.ContextSource) { s.Namespace = "other" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := base.DeepCopy()
			tc.edit(cp)
			if got := SourceFingerprint(cp); (got == fp) != tc.same {
				t.Errorf("fingerprint equal = %t, want %t", got == fp, tc.same)
			}
		})
	}
	if !reflect.DeepEqual(SourceFingerprint(&base), fp) {
		t.Error("fingerprint is not stable")
	}
}
