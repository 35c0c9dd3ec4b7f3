package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/cache"
	"github.com/contextrouter/contextrouter/internal/sources"
)

func TestStaleness(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		t         time.Time
		maxAge    time.Duration
		wantAge   int64
		wantStale bool
	}{
		{"just written", now, time.Hour, 0, false},
		{"younger than maxAge", now.Add(-59 * time.Minute), time.Hour, 3540, false},
		{"exactly maxAge is not stale", now.Add(-time.Hour), time.Hour, 3600, false},
		{"a nanosecond past maxAge", now.Add(-time.Hour - time.Nanosecond), time.Hour, 3600, true},
		{"days old", now.Add(-72 * time.Hour), 24 * time.Hour, 259200, true},
		{"partial seconds are cut", now.Add(-1500 * time.Millisecond), time.Second, 1, true},
		{"from the future (skewed clock) is 0 s old", now.Add(time.Hour), time.Minute, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			age, stale := Staleness(tc.t, now, tc.maxAge)
			if age != tc.wantAge || stale != tc.wantStale {
				t.Errorf("Staleness = %d, %v; want %d, %v", age, stale, tc.wantAge, tc.wantStale)
			}
		})
	}
}

func withFreshness(src v1alpha1.ContextSource, maxAge time.Duration, action v1alpha1.StaleAction) v1alpha1.ContextSource {
	src.Spec.Freshness = &v1alpha1.FreshnessSpec{MaxAge: metav1.Duration{Duration: maxAge}, StaleAction: action}
	return src
}

// ageDirectory is a Directory source with a file written an hour ago and one
// written three days ago.
func ageDirectory(t *testing.T) (v1alpha1.ContextSource, time.Time, time.Time) {
	t.Helper()
	root := t.TempDir()
	now := time.Now()
	recent, old := now.Add(-time.Hour).Truncate(time.Second), now.Add(-72*time.Hour).Truncate(time.Second)
	for name, mt := range map[string]time.Time{"recent.md": recent, "old.md": old} {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte("# Hives "+name+"\n\nHow to winter the hives, as "+name+" says.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return v1alpha1.ContextSource{ObjectMeta: meta("wiki"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: root},
		Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
	}}, recent, old
}

type chunkAge struct {
	path  string
	age   int64
	stale bool
}

func chunkAges(t *testing.T, resp *Response) []chunkAge {
	t.Helper()
	var out []chunkAge
	for _, c := range resp.Chunks {
		if (c.Metadata.AgeSeconds == nil) != (c.Metadata.Stale == nil) {
			t.Fatalf("chunk %s: age_seconds and stale must come together: %+v", c.Path, c.Metadata)
		}
		if c.Metadata.AgeSeconds == nil {
			out = append(out, chunkAge{path: c.Source + ":" + c.Path, age: -1})
			continue
		}
		out = append(out, chunkAge{c.Source + ":" + c.Path, *c.Metadata.AgeSeconds, *c.Metadata.Stale})
	}
	slices.SortFunc(out, func(a, b chunkAge) int { return int(a.age - b.age) })
	return out
}

// near reports whether an age measured at query time is the expected one;
// the query runs within a minute of the files being written.
func near(got, want int64) bool { return got >= want && got < want+60 }

// TestFreshnessDirectory: Flag marks the old file stale and keeps it, Drop
// leaves it out and counts it; without freshness no chunk carries an age.
func TestFreshnessDirectory(t *testing.T) {
	src, recent, old := ageDirectory(t)
	tests := []struct {
		name        string
		freshness   bool
		action      v1alpha1.StaleAction
		wantPaths   []string
		wantStale   []bool
		wantDropped int
	}{
		{"no freshness", false, "", []string{"wiki:recent.md", "wiki:old.md"}, nil, 0},
		{"Flag", true, v1alpha1.StaleFlag, []string{"wiki:recent.md", "wiki:old.md"}, []bool{false, true}, 0},
		{"Drop", true, v1alpha1.StaleDrop, []string{"wiki:recent.md"}, []bool{false}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := src
			if tc.freshness {
				s = withFreshness(src, 24*time.Hour, tc.action)
			}
			snap := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "wiki")}, Sources: []v1alpha1.ContextSource{s}})
			resp := query(t, snap, Request{Text: "winter hives"})
			ages := chunkAges(t, resp)
			var paths []string
			for _, a := range ages {
				paths = append(paths, a.path)
			}
			if !tc.freshness {
				slices.Sort(paths)
				if !slices.Equal(paths, []string{"wiki:old.md", "wiki:recent.md"}) || ages[0].age != -1 || ages[1].age != -1 {
					t.Errorf("without freshness: %+v", ages)
				}
			} else {
				if !slices.Equal(paths, tc.wantPaths) {
					t.Fatalf("chunks = %v, want %v", paths, tc.wantPaths)
				}
				wantAges := []int64{int64(time.Since(recent) / time.Second), int64(time.Since(old) / time.Second)}
				for i, a := range ages {
					if a.stale != tc.wantStale[i] || !near(a.age, wantAges[i]-1) {
						t.Errorf("chunk %s: age %d stale %v; want about %d, stale %v", a.path, a.age, a.stale, wantAges[i], tc.wantStale[i])
					}
				}
			}
			if resp.Stats.Dropped.Stale != tc.wantDropped || resp.Stats.Candidates != 2 {
				t.Errorf("stats %+v: want 2 candidates, dropped.stale %d", resp.Stats, tc.wantDropped)
			}
			st := snap.Sources()[0]
			if !st.NewestContent.Equal(recent) {
				t.Errorf("newest content %v, want %v (the recent file)", st.NewestContent, recent)
			}
			if _, stale, ok := st.ContentAge(time.Now()); !ok || stale {
				t.Errorf("ContentAge: ok %v stale %v; the newest file is an hour old", ok, stale)
			}
		})
	}
}

// TestFreshnessGitRepo: a repository's chunks are as old as the commit
// served, so a repository last committed ten days ago is stale under a week's
// maxAge, and one committed an hour ago is not.
func TestFreshnessGitRepo(t *testing.T) {
	for _, tc := range []struct {
		name      string
		commitAgo time.Duration
		action    v1alpha1.StaleAction
		wantStale bool
		included  int
	}{
		{"recent commit", time.Hour, v1alpha1.StaleDrop, false, 2},
		{"old commit, Flag", 240 * time.Hour, v1alpha1.StaleFlag, true, 2},
		{"old commit, Drop", 240 * time.Hour, v1alpha1.StaleDrop, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			when := time.Now().Add(-tc.commitAgo).Truncate(time.Second)
			dir := gitRepoAt(t, when, map[string]string{"a.md": "# Swarms\n\nSwarms in spring.\n", "b.md": "# Queens\n\nSwarms and queens.\n"})
			src := withFreshness(v1alpha1.ContextSource{ObjectMeta: meta("repo"), Spec: v1alpha1.ContextSourceSpec{
				Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{URL: "file://" + dir},
				Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
			}}, 7*24*time.Hour, tc.action)
			snap, err := Compile(context.Background(), &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "repo")},
				Sources: []v1alpha1.ContextSource{src}}, Options{CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if e := snap.Sources()[0].Error; e != "" {
				t.Fatalf("source error: %s", e)
			}
			resp := query(t, snap, Request{Text: "swarms"})
			if resp.Stats.Included != tc.included || resp.Stats.Candidates != 2 || resp.Stats.Dropped.Stale != 2-tc.included {
				t.Fatalf("stats %+v: want 2 candidates, %d included", resp.Stats, tc.included)
			}
			for _, a := range chunkAges(t, resp) {
				if a.stale != tc.wantStale || !near(a.age, int64(tc.commitAgo/time.Second)) {
					t.Errorf("chunk %s: age %d stale %v; want about %d, stale %v", a.path, a.age, a.stale, int64(tc.commitAgo/time.Second), tc.wantStale)
				}
			}
			st := snap.Sources()[0]
			if !st.NewestContent.Equal(when) {
				t.Errorf("newest content %v, want the commit time %v", st.NewestContent, when)
			}
			if _, stale, _ := st.ContentAge(time.Now()); stale != tc.wantStale {
				t.Errorf("status stale = %v, want %v", stale, tc.wantStale)
			}
		})
	}
}

// gitRepoAt makes a repository with one commit of files at the given time.
func gitRepoAt(t *testing.T, when time.Time, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	commitAt(t, dir, when, files)
	return dir
}

// commitAt commits files to the repository in dir at the given time.
func commitAt(t *testing.T, dir string, when time.Time, files map[string]string) {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			t.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "Test", Email: "test@example.com", When: when}
	if _, err := wt.Commit("content", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
}

// TestFreshnessGitRepoServedCommit: chunks are as old as the commit served,
// not as the commit that last touched their file (api.md §4.7): a file
// committed ten days ago is fresh once a later commit an hour ago is served.
func TestFreshnessGitRepoServedCommit(t *testing.T) {
	now := time.Now()
	dir := gitRepoAt(t, now.Add(-240*time.Hour), map[string]string{"a.md": "# Swarms\n\nSwarms in spring.\n"})
	served := now.Add(-time.Hour).Truncate(time.Second)
	commitAt(t, dir, served, map[string]string{"b.md": "# Queens\n\nQueens and swarms.\n"})
	src := withFreshness(v1alpha1.ContextSource{ObjectMeta: meta("repo"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{URL: "file://" + dir},
		Chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 512},
	}}, 24*time.Hour, v1alpha1.StaleDrop)
	snap, err := Compile(context.Background(), &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "repo")},
		Sources: []v1alpha1.ContextSource{src}}, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	resp := query(t, snap, Request{Text: "swarms"})
	ages := chunkAges(t, resp)
	if len(ages) != 2 || resp.Stats.Dropped.Stale != 0 {
		t.Fatalf("chunks %+v, stats %+v: want both files, none stale", ages, resp.Stats)
	}
	for _, a := range ages {
		if a.stale || !near(a.age, int64(time.Since(served)/time.Second)-1) {
			t.Errorf("chunk %s: age %d stale %v; want the served commit's age, about 3600 s", a.path, a.age, a.stale)
		}
	}
	if got := snap.Sources()[0].NewestContent; !got.Equal(served) {
		t.Errorf("newest content %v, want the served commit's time %v", got, served)
	}
}

// TestFreshnessHTTPAPI: a fetched answer is 0 seconds old; one served from
// the result cache is as old as its fetch (here one a router stored two hours
// ago), so Drop leaves it out and Flag marks it.
func TestFreshnessHTTPAPI(t *testing.T) {
	api := newSearchAPI(t)
	fetchedAt := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	for _, action := range []v1alpha1.StaleAction{v1alpha1.StaleFlag, v1alpha1.StaleDrop} {
		t.Run(string(action), func(t *testing.T) {
			rc, err := cache.New(cache.Options{TTL: 24 * time.Hour, MaxEntries: 10, MaxBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			src := withFreshness(api.source(5), time.Hour, action)
			cfg := &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "kb-search")}, Sources: []v1alpha1.ContextSource{src}}
			snap, err := Compile(context.Background(), cfg, Options{Cache: rc})
			if err != nil {
				t.Fatal(err)
			}
			q := "swarms " + string(action)
			resp := query(t, snap, Request{Text: q})
			if got := chunkAges(t, resp); len(got) != 1 || got[0].age != 0 || got[0].stale {
				t.Fatalf("a fresh fetch: %+v, want one chunk 0 s old, not stale", got)
			}
			if snap.Sources()[0].NewestContent.IsZero() {
				t.Error("the fetch did not set the source's newest content time")
			}

			old := "queens " + string(action)
			rc.Put(SourceFingerprint(&cfg.Sources[0]), old, []sources.Chunk{{Source: "kb-search", Content: "Queens are reared in spring.", Fetched: fetchedAt.UnixNano()}})
			resp = query(t, snap, Request{Text: old})
			if n := api.count(old); n != 0 {
				t.Fatalf("the API was asked %d times; the answer must come from the cache", n)
			}
			switch action {
			case v1alpha1.StaleFlag:
				got := chunkAges(t, resp)
				if len(got) != 1 || !got[0].stale || !near(got[0].age, int64(time.Since(fetchedAt)/time.Second)-1) {
					t.Errorf("cached answer: %+v, want one stale chunk about 7200 s old", got)
				}
			case v1alpha1.StaleDrop:
				if resp.Stats.Included != 0 || resp.Stats.Dropped.Stale != 1 || resp.Stats.Candidates != 1 {
					t.Errorf("cached answer under Drop: stats %+v, want it dropped as stale", resp.Stats)
				}
			}
		})
	}
}

// TestFreshnessMeasuredAtQueryTime: one snapshot, served while its clock
// moves on, flags the same chunk stale once it passes maxAge, and Drop then
// leaves it out; nothing is recompiled.
func TestFreshnessMeasuredAtQueryTime(t *testing.T) {
	src, recent, _ := ageDirectory(t)
	for _, action := range []v1alpha1.StaleAction{v1alpha1.StaleFlag, v1alpha1.StaleDrop} {
		t.Run(string(action), func(t *testing.T) {
			clock := &fakeClock{t: recent.Add(time.Hour)}
			cfg := &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "wiki")},
				Sources: []v1alpha1.ContextSource{withFreshness(src, 24*time.Hour, action)}}
			snap, err := Compile(context.Background(), cfg, Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			recentOf := func(resp *Response) *Chunk {
				for i := range resp.Chunks {
					if resp.Chunks[i].Path == "recent.md" {
						return &resp.Chunks[i]
					}
				}
				return nil
			}
			c := recentOf(query(t, snap, Request{Text: "winter hives"}))
			if c == nil || *c.Metadata.AgeSeconds != 3600 || *c.Metadata.Stale {
				t.Fatalf("an hour after it was written: %+v, want 3600 s, not stale", c)
			}
			clock.Advance(24 * time.Hour)
			resp := query(t, snap, Request{Text: "winter hives"})
			c = recentOf(resp)
			switch action {
			case v1alpha1.StaleFlag:
				if c == nil || *c.Metadata.AgeSeconds != 25*3600 || !*c.Metadata.Stale {
					t.Errorf("a day later: %+v, want 90000 s, stale", c)
				}
			case v1alpha1.StaleDrop:
				if c != nil || resp.Stats.Dropped.Stale != 2 {
					t.Errorf("a day later under Drop: chunk %+v, stats %+v; want both files dropped as stale", c, resp.Stats)
				}
			}
		})
	}
}

// TestFreshnessHTTPAPITimeField: with timeField, a result is as old as its
// own date, not its fetch: a fresh fetch of a three-day-old article is stale.
func TestFreshnessHTTPAPITimeField(t *testing.T) {
	old, recent := time.Now().Add(-72*time.Hour).UTC().Truncate(time.Second), time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"results": [{"text": "Swarm season report.", "date": %q}, {"text": "Swarm alert today.", "date": %q}]}`,
			old.Format(time.RFC3339), recent.Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	src := withFreshness(v1alpha1.ContextSource{ObjectMeta: meta("news"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI,
		HTTPAPI: &v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", ResponsePath: "results", TextField: "text", TimeField: "date",
			MaxResults: 10, Timeout: &metav1.Duration{Duration: 2 * time.Second}}}}, 24*time.Hour, v1alpha1.StaleDrop)
	snap := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "news")}, Sources: []v1alpha1.ContextSource{src}})
	resp := query(t, snap, Request{Text: "swarm"})
	if len(resp.Chunks) != 1 || resp.Chunks[0].Content != "Swarm alert today." || resp.Stats.Dropped.Stale != 1 {
		t.Fatalf("chunks %+v, stats %+v: want the recent result, the old one dropped as stale", resp.Chunks, resp.Stats)
	}
	if c := resp.Chunks[0]; c.Metadata.MTime != recent.Format(time.RFC3339) || !near(*c.Metadata.AgeSeconds, 3599) {
		t.Errorf("metadata %+v: want mtime %s and about 3600 s", c.Metadata, recent.Format(time.RFC3339))
	}
	// The source's newest content is the newest result's date, not the fetch.
	if got := snap.Sources()[0].NewestContent; !got.Equal(recent) {
		t.Errorf("newest content %v, want the newest result's date %v", got, recent)
	}
}
