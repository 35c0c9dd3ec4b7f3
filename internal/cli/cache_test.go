package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/cache"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// cacheManifests writes a router with a cache, two httpAPI sources and an
// inline one, and returns the folder.
func cacheManifests(t *testing.T, apiURL string) string {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "router.yaml"), fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: support, namespace: team-a}
spec:
  defaultAccess: Allow
  cache: {ttl: 10m, maxEntries: 50, maxBytes: 2Mi}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all, namespace: team-a}
spec:
  sources: [{name: kb-search}, {name: tickets}, {name: prompt}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: kb-search, namespace: team-a}
spec:
  type: HTTPAPI
  httpAPI: {url: "%[1]s/kb?q={{query}}", responsePath: results, textField: text}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: tickets, namespace: team-a}
spec:
  type: HTTPAPI
  httpAPI: {url: "%[1]s/tickets?q={{query}}", responsePath: results, textField: text}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: prompt, namespace: team-a}
spec:
  type: Inline
  inline: {content: "Be brief."}
`, apiURL))
	return dir
}

// fillCache answers questions through the engine with the router's on-disk
// cache, as serve does, and returns the cache folder.
func fillCache(t *testing.T, manifests, cacheDir string, questions ...string) string {
	t.Helper()
	set, err := manifest.Load(manifests)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := set.Config("")
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Router
	rc, err := cache.New(cache.OptionsFor(r.Spec.Cache, cache.Dir(cacheDir, r.Namespace, r.Name)))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := engine.Compile(context.Background(), cfg, engine.Options{Cache: rc})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range questions {
		resp, err := snap.Query(context.Background(), engine.Request{Text: q})
		if err != nil || len(resp.FailedSources) > 0 {
			t.Fatalf("query %q: %v %+v", q, err, resp.FailedSources)
		}
	}
	rc.Flush()
	return cache.Dir(cacheDir, r.Namespace, r.Name)
}

func cacheStatsJSON(t *testing.T, args ...string) cacheStats {
	t.Helper()
	out, stderr, code := run(t, append([]string{"cache", "stats", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("cache stats: exit %d: %s", code, stderr)
	}
	var st cacheStats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out)
	}
	return st
}

func folderSize(t *testing.T, dir string) int64 {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, de := range des {
		info, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}

func TestCacheStatsAndClear(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"results":[{"text":"%s answer about %s"}]}`, r.URL.Path, r.URL.Query().Get("q"))
	}))
	defer api.Close()
	manifests := cacheManifests(t, api.URL)
	cacheDir := t.TempDir()
	dir := fillCache(t, manifests, cacheDir, "reset my password", "refund policy")
	if want := filepath.Join(cacheDir, "http", "team-a_support"); dir != want {
		t.Fatalf("cache folder %s, want %s", dir, want)
	}

	// An entry fetched an hour ago (expired at ttl 10m), one of a source spec
	// that has since changed, and a torn file.
	old, err := cache.New(cache.Options{TTL: 2 * time.Hour, MaxEntries: 50, MaxBytes: 1 << 20, Dir: dir, Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	set, _ := manifest.Load(manifests)
	cfg, _ := set.Config("")
	var kbKey string
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == "kb-search" {
			kbKey = engine.SourceFingerprint(&cfg.Sources[i])
		}
	}
	old.Put(kbKey, "vpn setup", []sources.Chunk{{Content: "old answer"}})
	old.Put("sha256:"+strings.Repeat("ab", 32), "anything", []sources.Chunk{{Content: "from an edited spec"}})
	old.Flush()
	if err := os.WriteFile(filepath.Join(dir, strings.Repeat("f", 64)+".json"), []byte(`{"version":1,`), 0o600); err != nil {
		t.Fatal(err)
	}

	st := cacheStatsJSON(t, "-f", manifests, "--cache-dir", cacheDir)
	want := cacheStats{
		Router: "team-a/support", Dir: dir, TTL: "10m0s", MaxEntries: 50, MaxBytes: 2 << 20,
		Entries: 7, Bytes: folderSize(t, dir), Expired: 2, Stale: 1, Unreadable: 1,
		Sources: []cacheSourceStats{{Source: "kb-search", Entries: 3, Expired: 1}, {Source: "tickets", Entries: 2}},
	}
	for i := range st.Sources {
		if st.Sources[i].Bytes <= 0 {
			t.Errorf("source %s: %d bytes", st.Sources[i].Source, st.Sources[i].Bytes)
		}
		st.Sources[i].Bytes = 0
	}
	if st.Oldest == nil || st.Newest == nil || time.Since(*st.Oldest) < 59*time.Minute || time.Since(*st.Newest) > time.Minute {
		t.Errorf("oldest %v, newest %v: want about an hour ago and just now", st.Oldest, st.Newest)
	}
	st.Oldest, st.Newest = nil, nil
	if got, _ := json.Marshal(st); string(got) != mustJSON(t, want) {
		t.Errorf("cache stats:\n got %s\nwant %s", got, mustJSON(t, want))
	}

	out, stderr, code := run(t, "cache", "stats", "-f", manifests, "--cache-dir", cacheDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, line := range []string{
		"router:    team-a/support\n",
		"folder:    " + dir + "\n",
		"settings:  ttl 10m0s, at most 50 entries and 2.0 MiB\n",
		"entries:   7 (2 expired, 1 of an edited or removed source, 1 unreadable)\n",
		"  kb-search  3 entries, 1 expired, ",
		"  tickets    2 entries, 0 expired, ",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("text output lacks %q:\n%s", line, out)
		}
	}

	out, stderr, code = run(t, "cache", "clear", "-f", manifests, "--cache-dir", cacheDir)
	if code != 0 || !strings.HasPrefix(out, "removed 7 entries (") || !strings.HasSuffix(out, ") from "+dir+"\n") {
		t.Fatalf("cache clear: exit %d, %q, %s", code, out, stderr)
	}
	if des, err := os.ReadDir(dir); err != nil || len(des) != 0 {
		t.Errorf("after clear the folder holds %v (%v)", des, err)
	}
	if st := cacheStatsJSON(t, "-f", manifests, "--cache-dir", cacheDir); st.Entries != 0 || st.Bytes != 0 || st.Oldest != nil {
		t.Errorf("stats after clear = %+v", st)
	}

	// The cache refills after a clear, and a second clear finds only that.
	fillCache(t, manifests, cacheDir, "reset my password")
	if out, _, _ := run(t, "cache", "clear", "-f", manifests, "--cache-dir", cacheDir); !strings.HasPrefix(out, "removed 2 entries") {
		t.Errorf("second clear: %q", out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCacheDefaultFolderAndErrors(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Setenv("HOME", t.TempDir())
	manifests := cacheManifests(t, "http://127.0.0.1:9")

	st := cacheStatsJSON(t, "-f", manifests)
	if want := filepath.Join(xdg, "contextrouter", "http", "team-a_support"); st.Dir != want {
		t.Errorf("default folder %s, want %s", st.Dir, want)
	}
	if st.Entries != 0 || len(st.Sources) != 2 {
		t.Errorf("stats of a missing folder = %+v", st)
	}
	if out, _, code := run(t, "cache", "clear", "-f", manifests); code != 0 || !strings.HasPrefix(out, "removed 0 entries (0 B)") {
		t.Errorf("clear of a missing folder: exit %d, %q", code, out)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no manifests", []string{"cache", "stats"}, `"filename" not set`},
		{"bad output", []string{"cache", "stats", "-f", manifests, "-o", "yaml"}, `--output: must be text or json, not "yaml"`},
		{"unknown router", []string{"cache", "clear", "-f", manifests, "--router", "nope"}, "nope"},
		{"missing manifests", []string{"cache", "stats", "-f", filepath.Join(manifests, "missing.yaml")}, "missing.yaml"},
		{"arguments", []string{"cache", "clear", "-f", manifests, "extra"}, `unknown command "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := run(t, tc.args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure mentioning %q", code, stderr, tc.want)
			}
		})
	}
}

func TestCacheFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
