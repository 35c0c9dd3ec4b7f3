package server

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// A reload to a configuration that answers nothing (an emptied file, routes removed) is refused
// like a bad one: the old snapshot keeps answering and /v1/status, the metrics and the log say why.
func TestEmptyReloadKeepsServing(t *testing.T) {
	const router = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: acme}\nspec: {defaultAccess: Allow}\n---\n"
	tests := []struct {
		name    string
		content string
		want    []string // in last_reload_error
	}{
		{"emptied file", "", []string{"ContextRouter/default: " + manifest.NoRoutesMessage, "router.yaml: " + manifest.EmptyFileMessage}},
		{"comments only", "# moved elsewhere\n", []string{"ContextRouter/default: " + manifest.NoRoutesMessage, "router.yaml: " + manifest.EmptyFileMessage}},
		{"routes removed", router + "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: notes}\nspec: {type: Inline, inline: {content: x}}\n",
			[]string{"ContextRouter/acme: " + manifest.NoRoutesMessage}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "router.yaml")
			writeAtomic(t, file, router+inlineManifests("v1", "notes"))
			ts := startServer(t, Options{Paths: []string{file}, PollInterval: -1})
			ts.waitReady()
			ts.waitEdition("v1")
			good := ts.status().SnapshotHash

			writeAtomic(t, file, tc.content)
			eventually(t, 10*time.Second, "the refused reload", func() bool { return ts.status().LastReloadError != "" })
			st := ts.status()
			for _, w := range tc.want {
				if !strings.Contains(st.LastReloadError, w) {
					t.Errorf("last_reload_error = %q, want it to contain %q", st.LastReloadError, w)
				}
			}
			if st.SnapshotHash != good || !st.Ready || !slices.Equal(st.Routes, []string{"notes-v1"}) {
				t.Errorf("status %+v: want the old snapshot %s serving", st, good)
			}
			if e := edition(ts.query(engine.Request{Text: "deploy checklist"})); e != "v1" {
				t.Errorf("answered from edition %q, want v1", e)
			}
			if v, _ := ts.metric("contextrouter_snapshot_reloads_total", "result", "failure"); v < 1 {
				t.Errorf("failed reloads counted %v, want >= 1", v)
			}
			if !strings.Contains(ts.logs.String(), "previous snapshot keeps serving") {
				t.Error("the refusal is not logged")
			}

			writeAtomic(t, file, router+inlineManifests("v2", "notes"))
			ts.waitEdition("v2")
			if st := ts.status(); st.LastReloadError != "" {
				t.Errorf("error still reported after a good reload: %q", st.LastReloadError)
			}
		})
	}
}

// With the opt-in (the serve flag, or the router's spec.allowEmpty) an empty configuration goes live.
func TestEmptyReloadAllowed(t *testing.T) {
	tests := []struct {
		name       string
		allowEmpty bool
		empty      string
		router     string
	}{
		{"serve --allow-empty, file emptied", true, "", "default"},
		{"spec.allowEmpty, routes removed", false,
			"apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: acme}\nspec: {allowEmpty: true}\n", "acme"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "router.yaml")
			writeAtomic(t, file, inlineManifests("v1", "notes"))
			ts := startServer(t, Options{Paths: []string{file}, PollInterval: -1, AllowEmpty: tc.allowEmpty})
			ts.waitReady()
			ts.waitEdition("v1")

			writeAtomic(t, file, tc.empty)
			eventually(t, 10*time.Second, "the empty configuration serving", func() bool {
				st := ts.status()
				return st.Router == tc.router && len(st.Routes) == 0
			})
			if st := ts.status(); st.LastReloadError != "" || !st.Ready {
				t.Errorf("status %+v: want the empty configuration ready, without error", st)
			}
			if resp := ts.query(engine.Request{Text: "deploy checklist"}); len(resp.Chunks) != 0 || len(resp.MatchedRoutes) != 0 {
				t.Errorf("the empty router answered %+v", resp)
			}
		})
	}
}

// A first configuration that answers nothing is refused too: the server is not ready until a
// usable one arrives.
func TestEmptyFirstLoadNotReady(t *testing.T) {
	file := filepath.Join(t.TempDir(), "router.yaml")
	writeAtomic(t, file, "")
	ts := startServer(t, Options{Paths: []string{file}, PollInterval: -1})
	eventually(t, 10*time.Second, "the refused first load", func() bool {
		return strings.Contains(ts.status().LastReloadError, manifest.NoRoutesMessage)
	})
	if code, _ := ts.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d without a configuration, want 503", code)
	}
	writeAtomic(t, file, inlineManifests("v1", "notes"))
	ts.waitReady()
	ts.waitEdition("v1")
}

// A Directory source whose folder is removed keeps answering with the chunks it last read, and
// says so in failed_sources and /v1/status, naming the folder as the manifest does, never by
// its absolute host path. When the folder is back, its content is read again.
func TestDirectorySourceVanishes(t *testing.T) {
	root := t.TempDir()
	ts, docs, _ := directoryServer(t, root)

	if err := os.RemoveAll(docs); err != nil {
		t.Fatal(err)
	}
	const want = `directory "../docs": no such file or directory (serving the content last read)`
	eventually(t, 10*time.Second, "the source error in /v1/status", func() bool {
		st := ts.status()
		return len(st.Sources) == 1 && st.Sources[0].Error != ""
	})
	if src := ts.status().Sources[0]; src.Error != want || src.Chunks != 1 {
		t.Errorf("status of the source: %+v, want error %q and its 1 chunk", src, want)
	}
	resp := ts.query(engine.Request{Text: "roll back a deploy"})
	if edition(resp) != "d1" {
		t.Errorf("answer %+v: want the last good chunk (edition d1)", resp.Chunks)
	}
	if len(resp.FailedSources) != 1 || resp.FailedSources[0] != (engine.SourceFailure{Source: "docs", Error: want}) {
		t.Errorf("failed_sources = %+v, want docs: %q", resp.FailedSources, want)
	}
	for _, path := range []string{"/v1/status", "/metrics"} {
		if _, body := ts.get(path); strings.Contains(string(body), root) {
			t.Errorf("%s shows the host folder %s", path, root)
		}
	}
	if _, body := ts.do(http.MethodPost, "/v1/query", strings.NewReader(`{"text": "roll back a deploy"}`), nil); strings.Contains(string(body), root) {
		t.Errorf("the query answer shows the host folder %s: %s", root, body)
	}

	// The folder comes back whole (renamed into place), with new content.
	next := filepath.Join(root, "next")
	writeAtomic(t, filepath.Join(next, "deploys.md"), "# Deploys\n\nRoll back a deploy with the previous release, edition d2.\n")
	if err := os.Rename(next, docs); err != nil {
		t.Fatal(err)
	}
	ts.waitEdition("d2")
	if resp := ts.query(engine.Request{Text: "roll back a deploy"}); len(resp.FailedSources) != 0 {
		t.Errorf("failed_sources after the folder is back: %+v", resp.FailedSources)
	}
}
