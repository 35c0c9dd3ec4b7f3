package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// edition returns the edition marker of an answer's chunks ("" if none).
func edition(resp engine.Response) string {
	for _, c := range resp.Chunks {
		if _, after, ok := strings.Cut(c.Content, "edition "); ok {
			return strings.TrimRight(strings.Fields(after)[0], ".:,")
		}
	}
	return ""
}

func (ts *testServer) waitEdition(want string) {
	ts.t.Helper()
	eventually(ts.t, 10*time.Second, "edition "+want, func() bool {
		return edition(ts.query(engine.Request{Text: "deploy checklist"})) == want
	})
}

func TestReloadOnFileChange(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, path, content string)
	}{
		{"replaced by rename", writeAtomic},
		{"rewritten in place", func(t *testing.T, path, content string) {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		for _, target := range []string{"directory", "file"} {
			t.Run(tc.name+"/"+target, func(t *testing.T) {
				dir := t.TempDir()
				file := filepath.Join(dir, "router.yaml")
				writeAtomic(t, file, inlineManifests("v1", "notes"))
				path := dir
				if target == "file" {
					path = file
				}
				ts := startServer(t, Options{Paths: []string{path}, PollInterval: -1})
				ts.waitReady()
				ts.waitEdition("v1")
				tc.write(t, file, inlineManifests("v2", "notes"))
				ts.waitEdition("v2")
				if st := ts.status(); st.LastReloadError != "" || !slices.Equal(st.Routes, []string{"notes-v2"}) {
					t.Fatalf("status after reload: %+v", st)
				}
				// The removed route's series is dropped; the new one counts.
				if v, ok := ts.metric("contextrouter_route_matches_total", "route", "notes-v1"); ok {
					t.Errorf("series of the removed route still exported (%v)", v)
				}
				if v, _ := ts.metric("contextrouter_route_matches_total", "route", "notes-v2"); v < 1 {
					t.Errorf("route_matches_total{route=notes-v2} = %v", v)
				}
			})
		}
	}
}

// A file added to a watched directory, in a new subfolder, is picked up.
func TestReloadOnNewFileInSubfolder(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), inlineManifests("v1", "notes"))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()
	writeAtomic(t, filepath.Join(dir, "more", "deeper", "b.yaml"), inlineManifests("v1", "extra"))
	eventually(t, 10*time.Second, "the new source", func() bool { return len(ts.status().Sources) == 2 })
	// The new subfolder is watched too.
	writeAtomic(t, filepath.Join(dir, "more", "deeper", "b.yaml"), inlineManifests("v2", "extra"))
	eventually(t, 10*time.Second, "the changed source", func() bool {
		return slices.Contains(ts.status().Routes, "extra-v2")
	})
}

// The kubelet updates a mounted ConfigMap by swapping the `..data` symlink;
// the visible file names never change.
func TestReloadConfigMapSwap(t *testing.T) {
	for _, target := range []string{"mount directory", "file in the mount"} {
		t.Run(target, func(t *testing.T) {
			vol := newConfigMapVolume(t, map[string]string{"bundle.yaml": inlineManifests("v1", "notes")})
			path := vol.dir
			if target == "file in the mount" {
				path = filepath.Join(vol.dir, "bundle.yaml")
			}
			ts := startServer(t, Options{Paths: []string{path}, PollInterval: -1})
			ts.waitReady()
			ts.waitEdition("v1")
			for _, v := range []string{"v2", "v3", "v4"} {
				vol.update(map[string]string{"bundle.yaml": inlineManifests(v, "notes")})
				ts.waitEdition(v)
			}
			entries, _ := os.ReadDir(vol.dir)
			if len(entries) != 3 { // ..<timestamp>, ..data, bundle.yaml
				t.Fatalf("volume layout: %v", entries)
			}
		})
	}
}

// A configuration that does not load leaves the previous snapshot serving;
// /v1/status, the metrics and the log say why.
func TestBadConfigKeepsServing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes"))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()
	good := ts.status().SnapshotHash

	tests := []struct {
		name, content, want string
	}{
		{"unknown field", inlineManifests("v9", "notes") + "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: odd}\nspec: {type: Inline, colour: red, inline: {content: x}}\n", "ContextSource/odd: spec.colour: unknown field"},
		{"invalid CEL", inlineManifests("v9", "notes") + "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: broken}\nspec: {when: 'text.contains(', sources: [{name: notes}]}\n", "ContextRoute/broken: spec.when"},
		{"missing source", inlineManifests("v9", "notes") + "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: dangling}\nspec: {sources: [{name: nowhere}]}\n", `ContextSource "nowhere" not found`},
		{"YAML syntax", "kind: [unclosed\n", "router.yaml:1: invalid YAML"},
	}
	failures := 0.0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			writeAtomic(t, file, tc.content)
			eventually(t, 10*time.Second, "the failed reload", func() bool {
				return strings.Contains(ts.status().LastReloadError, tc.want)
			})
			failures++
			st := ts.status()
			if st.SnapshotHash != good || !st.Ready {
				t.Errorf("serving %s (ready %v), want the old snapshot %s", st.SnapshotHash, st.Ready, good)
			}
			if e := edition(ts.query(engine.Request{Text: "deploy checklist"})); e != "v1" {
				t.Errorf("answered from edition %q, want v1", e)
			}
			if v, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "failure"); v < failures {
				t.Errorf("failed reloads counted %v, want >= %v", v, failures)
			}
			if code, _ := ts.get("/readyz"); code != 200 {
				t.Errorf("/readyz %d while the old snapshot serves", code)
			}
			if !strings.Contains(ts.logs.String(), "previous snapshot keeps serving") {
				t.Error("the failure is not logged")
			}
		})
	}
	writeAtomic(t, file, inlineManifests("v2", "notes"))
	ts.waitEdition("v2")
	if st := ts.status(); st.LastReloadError != "" {
		t.Errorf("error still reported after a good reload: %q", st.LastReloadError)
	}
}

// The periodic check finds changes the file watcher did not report.
func TestPollFindsMissedChanges(t *testing.T) {
	file := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes"))
	srv, err := New(Options{Paths: []string{file}, PollInterval: 30 * time.Millisecond, Engine: engine.Options{CacheDir: t.TempDir()},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	// No fsnotify: only the poller can see the change.
	srv.watcher = &watcher{s: srv, dirs: map[string][]dirRule{}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); srv.reloadWorker(ctx) }()
	go func() { defer wg.Done(); srv.poll(ctx) }()
	defer wg.Wait()
	defer cancel()

	reloads := func() float64 {
		v, _ := gatherValue(t, srv, "contextrouter_snapshot_reloads_total", "result", "success")
		return v
	}
	time.Sleep(150 * time.Millisecond)
	if n := reloads(); n != 1 {
		t.Fatalf("%v reloads without a change, want 1", n)
	}
	writeAtomic(t, file, inlineManifests("v2", "notes"))
	eventually(t, 5*time.Second, "the poller's reload", func() bool {
		return slices.Equal(srv.Snapshot().Routes(), []string{"notes-v2"})
	})
}

func TestManifestHash(t *testing.T) {
	dir := t.TempDir()
	writeAtomic(t, filepath.Join(dir, "a.yaml"), "a: 1\n")
	writeAtomic(t, filepath.Join(dir, "sub", "b.json"), "{}")
	base := manifestHash([]string{dir})
	tests := []struct {
		name   string
		change func()
		same   bool
	}{
		{"unrelated file", func() { writeAtomic(t, filepath.Join(dir, "notes.md"), "# notes") }, true},
		{"hidden folder", func() { writeAtomic(t, filepath.Join(dir, ".git", "x.yaml"), "x: 1") }, true},
		{"manifest content", func() { writeAtomic(t, filepath.Join(dir, "a.yaml"), "a: 2\n") }, false},
		{"new manifest", func() { writeAtomic(t, filepath.Join(dir, "sub", "c.yml"), "c: 1") }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.change()
			h := manifestHash([]string{dir})
			if (h == base) != tc.same {
				t.Fatalf("hash changed: %v, want %v", h != base, !tc.same)
			}
			base = h
		})
	}
	if manifestHash([]string{filepath.Join(dir, "missing")}) == manifestHash([]string{filepath.Join(dir, "a.yaml")}) {
		t.Fatal("a missing path hashes like a file")
	}
}

// A change to the files of a Directory source rebuilds the snapshot, even
// while the manifests themselves are broken.
func TestDirectorySourceChangeRebuilds(t *testing.T) {
	ts, docs, manifest := directoryServer(t, t.TempDir())
	doc := filepath.Join(docs, "deploys.md")
	writeAtomic(t, doc, "# Deploys\n\nRoll back a deploy with the previous release, edition d2.\n")
	ts.waitEdition("d2")

	writeAtomic(t, manifest, "kind: [broken\n")
	eventually(t, 10*time.Second, "the failed reload", func() bool { return ts.status().LastReloadError != "" })
	writeAtomic(t, doc, "# Deploys\n\nRoll back a deploy with the previous release, edition d3.\n")
	ts.waitEdition("d3")
}

// versionConfig is a valid configuration whose every chunk and route names version v.
func versionConfig(v string) string { return inlineManifests(v, "alpha", "beta") }

// brokenConfig is an invalid configuration whose error names marker, in one of four ways.
func brokenConfig(kind int, v, marker string) (content, want string) {
	base := versionConfig(v)
	switch kind % 4 {
	case 0:
		return base + fmt.Sprintf("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: r-%s}\nspec: {sources: [{name: missing-%s}]}\n", marker, marker), "missing-" + marker
	case 1:
		return base + fmt.Sprintf("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: cel-%s}\nspec: {when: 'text.startsWith(', sources: [{name: alpha}]}\n", marker), "cel-" + marker
	case 2:
		return base + fmt.Sprintf("apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: odd}\nspec: {type: Inline, field%s: 1, inline: {content: x}}\n", marker), "field" + marker
	}
	return base + "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: [\n", "invalid YAML"
}

// 100 reloads alternating valid and invalid configurations while clients
// query without pause: no request fails, and every answer comes from one
// whole configuration (its chunks and matched routes all name one version).
func TestReloadReliability(t *testing.T) {
	vol := newConfigMapVolume(t, map[string]string{"bundle.yaml": versionConfig("a")})
	ts := startServer(t, Options{Paths: []string{vol.dir}, PollInterval: -1})
	ts.waitReady()

	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		mu        sync.Mutex
		problems  []string
		byVersion = map[string]int{}
		total     atomic.Int64
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 10 * time.Second}
	body := []byte(`{"text": "deploy checklist and vacation policy"}`)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				problem, version := checkedQuery(client, ts.url, body)
				total.Add(1)
				mu.Lock()
				if problem != "" && len(problems) < 20 {
					problems = append(problems, problem)
				}
				byVersion[version]++
				mu.Unlock()
			}
		}()
	}

	serving := "a"
	for i := range 100 {
		before := ts.status()
		if i%2 == 0 {
			serving = map[string]string{"a": "b", "b": "a"}[serving]
			vol.update(map[string]string{"bundle.yaml": versionConfig(serving)})
			eventually(t, 10*time.Second, fmt.Sprintf("reload %d to version %s", i, serving), func() bool {
				st := ts.status()
				return st.LastReloadError == "" && slices.Equal(st.Routes, []string{"alpha-" + serving, "beta-" + serving})
			})
			continue
		}
		content, want := brokenConfig(i/2, serving, fmt.Sprint(i))
		vol.update(map[string]string{"bundle.yaml": content})
		eventually(t, 10*time.Second, fmt.Sprintf("failed reload %d (%s)", i, want), func() bool {
			return strings.Contains(ts.status().LastReloadError, want)
		})
		if after := ts.status(); after.SnapshotHash != before.SnapshotHash {
			t.Fatalf("reload %d: a broken configuration replaced the snapshot", i)
		}
	}
	stop.Store(true)
	wg.Wait()

	if len(problems) > 0 {
		t.Fatalf("%d queries; problems:\n%s", total.Load(), strings.Join(problems, "\n"))
	}
	if byVersion["a"] == 0 || byVersion["b"] == 0 || len(byVersion) != 2 {
		t.Fatalf("answers by version %v: want both versions and nothing else", byVersion)
	}
	ok, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "success")
	bad, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "failure")
	if ok < 51 || bad < 50 {
		t.Fatalf("reloads counted: %v successful, %v failed; want >= 51 and >= 50", ok, bad)
	}
	t.Logf("%d queries during 100 reloads, by version %v", total.Load(), byVersion)
}

// checkedQuery runs one query and returns what is wrong with the answer
// ("" if nothing) and the version it came from.
func checkedQuery(client *http.Client, url string, body []byte) (problem, version string) {
	resp, err := client.Post(url+"/v1/query", "application/json", bytes.NewReader(body))
	if err != nil {
		return err.Error(), ""
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error(), ""
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("status %d: %s", resp.StatusCode, raw), ""
	}
	var r engine.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return err.Error(), ""
	}
	if len(r.Chunks) != 2 {
		return fmt.Sprintf("%d chunks: %s", len(r.Chunks), raw), ""
	}
	version = edition(r)
	for _, c := range r.Chunks {
		if !strings.Contains(c.Content, "edition "+version+":") || !strings.HasSuffix(c.Title, " "+version) {
			return fmt.Sprintf("mixed answer: chunk %q %q in an answer of version %s", c.Title, c.Content, version), version
		}
	}
	if want := []string{"alpha-" + version, "beta-" + version}; !slices.Equal(r.MatchedRoutes, want) {
		return fmt.Sprintf("mixed answer: routes %v in an answer of version %s", r.MatchedRoutes, version), version
	}
	return "", version
}

// A file in a manifest folder that is not a manifest never reloads: serve
// writing its own log there (`serve -f DIR 2> DIR/log`) reloaded on every
// line the reload logged, forever. Manifest changes still reload, once each.
func TestWatcherIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "router.yaml")
	writeAtomic(t, file, inlineManifests("v1", "notes"))
	logFile, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(logs, logFile), &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1, Logger: logger})
	ts.logs = logs
	ts.waitReady()
	ts.waitEdition("v1")
	// Notes and tools beside the manifests are not read either.
	for _, name := range []string{"README.md", "notes.txt", "router.yaml.orig"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a manifest\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomic(t, file, inlineManifests("v2", "notes"))
	ts.waitEdition("v2")
	writeAtomic(t, file, inlineManifests("v3", "notes"))
	ts.waitEdition("v3")
	// The v3 reload logged into the folder. Were that a change, it would
	// reload one debounce (20ms) later and log again, and so on: give such a
	// loop ten rounds to show.
	time.Sleep(10 * 20 * time.Millisecond)
	// The first load and the two changes.
	if v, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "success"); v != 3 {
		t.Errorf("snapshot_reloads_total{result=success} = %v, want 3:\n%s", v, logs.String())
	}
}

// The watcher's rule for one event: in a manifest folder only what the
// loader reads (and folders, which it walks) matters; in a Directory
// source's folder every file does; ConfigMap swaps always do.
func TestWatcherClassify(t *testing.T) {
	root := t.TempDir()
	manifests, docs := filepath.Join(root, "config"), filepath.Join(root, "docs")
	for _, d := range []string{manifests, docs, filepath.Join(manifests, "more")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	single := filepath.Join(root, "router.txt")
	w := &watcher{dirs: map[string][]dirRule{
		manifests:                        {{kind: kindManifest}},
		filepath.Join(manifests, "more"): {{kind: kindManifest}},
		docs:                             {{kind: kindSource}},
		root:                             {{kind: kindManifest, only: "router.txt"}},
	}}
	for _, tc := range []struct {
		name string
		want rootKind
	}{
		{filepath.Join(manifests, "router.yaml"), kindManifest},
		{filepath.Join(manifests, "ROUTES.YML"), kindManifest},
		{filepath.Join(manifests, "bundle.json"), kindManifest},
		{filepath.Join(manifests, "log"), 0},
		{filepath.Join(manifests, "serve.log"), 0},
		{filepath.Join(manifests, "router.yaml.swp"), 0},
		{filepath.Join(manifests, ".router.yaml"), 0},
		{filepath.Join(manifests, "..data"), kindManifest},
		{filepath.Join(manifests, "more"), kindManifest}, // a folder the loader walks
		{filepath.Join(docs, "notes.txt"), kindSource},
		{filepath.Join(docs, "guide.md"), kindSource},
		{single, kindManifest}, // named with -f: read whatever its extension
		{filepath.Join(root, "other.yaml"), 0},
	} {
		if got := w.classify(tc.name); got != tc.want {
			t.Errorf("classify(%s) = %d, want %d", strings.TrimPrefix(tc.name, root), got, tc.want)
		}
	}
}
