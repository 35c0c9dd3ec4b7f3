package manifest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// maxFuzzManifest bounds a fuzzed file: manifests are small, and bigger
// inputs only slow the fuzzer down.
const maxFuzzManifest = 64 << 10

// FuzzParse feeds arbitrary bytes, as a YAML or a JSON file, to what
// `contextrouter validate` runs (manifest.Validate: load, check, compile;
// sources are not read). Whatever the input, nothing panics and every
// problem names the file and a line within it, except the warning that the
// file is empty and problems of the implied default router, which no file
// declares.
func FuzzParse(f *testing.F) {
	// The fixtures, one file at a time and all of the quickstart as one stream.
	var all [][]byte
	for _, dir := range []string{quickstartDir, samplesDir} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		for _, name := range files {
			if strings.HasPrefix(filepath.Base(name), "configmap-") {
				continue // large ConfigMaps of documents; the committed corpus has a small one
			}
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, false)
			if dir == quickstartDir {
				all = append(all, data)
			}
		}
	}
	f.Add(bytes.Join(all, []byte("\n---\n")), false)
	f.Add([]byte(`{"apiVersion":"contextrouter.dev/v1alpha1","kind":"ContextSource","metadata":{"name":"a"},"spec":{"type":"Inline","inline":{"content":"x"}}}`), true)
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"contextrouter.dev/v1alpha1","kind":"ContextRoute","metadata":{"name":"r"},"spec":{"when":"1 <"}}]}`), true)

	dir := f.TempDir()
	opts := engine.Options{SkipLoad: true, CacheDir: f.TempDir()}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		if len(data) > maxFuzzManifest {
			t.Skip("larger than a manifest")
		}
		file := filepath.Join(dir, "fuzz.yaml")
		if asJSON {
			file = filepath.Join(dir, "fuzz.json")
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// Lines as YAML counts them: CR, LF and CRLF each end one.
		lines := strings.Count(sources.NormalizeNewlines(string(data)), "\n") + 1

		set, problems := manifest.Validate(context.Background(), []string{file}, "", opts)
		if set == nil {
			t.Fatal("Validate returned no set")
		}
		for _, p := range problems {
			if p.Message == "" {
				t.Errorf("problem without a message: %+v", p)
			}
			if p.File == "" && implied(set, p) {
				continue
			}
			if p.File == file && p.Line == 0 && p.Message == manifest.EmptyFileMessage && p.IsWarning() {
				continue // about the whole file
			}
			checkLocated(t, p, file, lines)
		}
	})
}

// implied reports whether p is about the default router that a set without
// a ContextRouter implies.
func implied(set *manifest.Set, p problem.Problem) bool {
	return len(set.Routers) == 0 && p.Kind == v1alpha1.KindContextRouter && (p.Name == "" || p.Name == v1alpha1.DefaultRouterName)
}

// checkLocated fails unless a problem names the file and a line within it.
func checkLocated(t *testing.T, p problem.Problem, file string, lines int) {
	t.Helper()
	if p.File != file || p.Line < 1 || p.Line > lines {
		t.Errorf("problem at %s:%d, want %s and a line in 1..%d: %q", p.File, p.Line, file, lines, p.Error())
	}
	want := file + ":" + strconv.Itoa(p.Line)
	if p.Column > 0 {
		want += ":" + strconv.Itoa(p.Column) // a CEL error's character
	}
	if want += ": "; !strings.HasPrefix(p.Error(), want) {
		t.Errorf("problem text %q does not start with %q", p.Error(), want)
	}
}
