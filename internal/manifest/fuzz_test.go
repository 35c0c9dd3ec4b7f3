package manifest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// maxFuzzManifest bounds a fuzzed file: manifests are small, and bigger
// inputs only slow the fuzzer down.
const maxFuzzManifest = 64 << 10

// FuzzParse feeds arbitrary bytes to the manifest reader as a YAML or a JSON
// file, then checks and compiles what it accepts the way `contextrouter
// validate` does (without reading sources). Whatever the input, reading
// either succeeds or fails with problems located at a line of the file, and
// nothing panics.
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
	if data, err := os.ReadFile("../cli/testdata/invalid-glob.yaml"); err == nil {
		f.Add(data, false)
	}
	f.Add([]byte(`{"apiVersion":"contextrouter.dev/v1alpha1","kind":"ContextSource","metadata":{"name":"a"},"spec":{"type":"Inline","inline":{"content":"x"}}}`), true)
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"contextrouter.dev/v1alpha1","kind":"ContextRoute","metadata":{"name":"r"},"spec":{"when":"1 <"}}]}`), true)

	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		if len(data) > maxFuzzManifest {
			t.Skip("larger than a manifest")
		}
		name := "fuzz.yaml"
		if asJSON {
			name = "fuzz.json"
		}
		lines := bytes.Count(data, []byte("\n")) + 1

		set, err := manifest.Parse(name, data)
		if err != nil {
			var le *manifest.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("Parse returned %T, want *manifest.LoadError: %v", err, err)
			}
			if len(le.Problems) == 0 {
				t.Fatal("LoadError without problems")
			}
			for _, p := range le.Problems {
				checkLocated(t, p, name, lines)
			}
			return
		}

		// What loads is checked, selected and compiled like `validate` does.
		failed := false
		for _, p := range set.Check() {
			checkLocated(t, p, name, lines)
			if p.Kind == "" {
				t.Errorf("check problem names no object: %q", p.Error())
			}
			failed = failed || !p.Warning
		}
		if failed {
			return
		}
		routers := []string{""}
		if len(set.Routers) > 1 {
			routers = routers[:0]
			for _, r := range set.Routers {
				routers = append(routers, r.Name)
			}
		}
		for _, router := range routers {
			cfg, err := set.Config(router)
			if err != nil {
				continue // duplicate names: reported by Check as well
			}
			_, err = engine.Compile(context.Background(), cfg, engine.Options{SkipLoad: true, CacheDir: t.TempDir()})
			var ce *engine.CompileError
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("Compile returned %T, want *engine.CompileError: %v", err, err)
			}
			if ce == nil {
				continue
			}
			for _, p := range ce.Problems {
				// Only the implied default router was not read from the file.
				if p.Origin == "" && !(p.Kind == "ContextRouter" && len(set.Routers) == 0) {
					t.Errorf("compile problem without origin: %q", p.Error())
				}
				if p.Origin != "" && !strings.HasPrefix(p.Origin, name+":") {
					t.Errorf("compile problem origin %q is not in %s", p.Origin, name)
				}
			}
		}
	})
}

// checkLocated fails unless a problem names the file and a line within it.
func checkLocated(t *testing.T, p manifest.Problem, file string, lines int) {
	t.Helper()
	if p.Origin.File != file || p.Origin.Line < 1 || p.Origin.Line > lines {
		t.Errorf("problem at %s:%d, want %s and a line in 1..%d: %q", p.Origin.File, p.Origin.Line, file, lines, p.Error())
	}
	if want := file + ":" + strconv.Itoa(p.Origin.Line) + ": "; !strings.HasPrefix(p.Error(), want) {
		t.Errorf("problem text %q does not start with %q", p.Error(), want)
	}
	if p.Message == "" {
		t.Errorf("problem without a message: %+v", p)
	}
}
