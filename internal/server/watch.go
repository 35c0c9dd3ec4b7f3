package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// rootKind says what a change under a watched root calls for.
type rootKind uint8

const (
	// kindManifest: the manifests changed; reload them.
	kindManifest rootKind = 1 << iota
	// kindSource: a Directory source's files changed; rebuild the serving configuration.
	kindSource
)

// maxWatches bounds the folders watched, against inotify limits and huge trees.
const maxWatches = 1024

// watchRoot is a path whose changes matter.
type watchRoot struct {
	path string
	kind rootKind
}

// watchRoots are the -f paths and the folders of the Directory sources and
// the catalog folders of the Tools sources of cfg.
func watchRoots(paths []string, cfg *engine.Config) []watchRoot {
	var roots []watchRoot
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		roots = append(roots, watchRoot{filepath.Clean(p), kindManifest})
	}
	if cfg == nil {
		return roots
	}
	for _, src := range cfg.Sources {
		d, _ := src.DirectoryBlock()
		if d == nil {
			continue
		}
		root, err := sources.DirectoryRoot(src.Name, d, cfg.BaseDirs[src.Name])
		if err != nil {
			continue
		}
		roots = append(roots, watchRoot{root, kindSource})
	}
	return roots
}

// dirRule says which entries of a watched folder matter, and why.
type dirRule struct {
	kind rootKind
	// only is the one entry that matters ("" = every entry). Entries whose
	// names start with ".." always matter: they are the timestamped folders
	// and the `..data` link of a mounted ConfigMap, which the kubelet swaps
	// atomically while the visible names stay symlinks into `..data`.
	only string
}

// matters reports whether an event on name, an entry of a folder of the
// rule, calls for its kind. In manifest folders only what the loader reads
// matters (manifest files, and folders, which it walks): a log file written
// there (`serve -f DIR 2> DIR/log`) would otherwise reload on every line the
// reload itself logs.
func (r dirRule) matters(name string) bool {
	base := filepath.Base(name)
	switch {
	case strings.HasPrefix(base, ".."):
		return true
	case r.only != "":
		return base == r.only
	case strings.HasPrefix(base, "."):
		return false
	case r.kind != kindManifest || manifest.IsManifestFile(base):
		return true
	}
	fi, err := os.Stat(name)
	return err == nil && fi.IsDir()
}

// watcher turns file events under the roots into reload requests, after a
// quiet period (debounce) so that an editor's or the kubelet's burst of
// events causes one reload.
type watcher struct {
	s  *Server
	fs *fsnotify.Watcher // nil when inotify is unavailable; the poller still works

	mu     sync.Mutex
	roots  []watchRoot
	dirs   map[string][]dirRule
	capped bool
}

func newWatcher(s *Server) *watcher {
	w := &watcher{s: s, dirs: map[string][]dirRule{}}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("file watching unavailable; changes are found by the periodic check only", "error", err.Error())
		return w
	}
	w.fs = fw
	return w
}

// setRoots watches a new set of roots.
func (w *watcher) setRoots(roots []watchRoot) {
	w.mu.Lock()
	w.roots = roots
	w.mu.Unlock()
	w.rewatch()
}

// rewatch brings the watched folders in line with the roots: new
// subfolders, a root that appeared, a symlinked root that now points
// elsewhere (adding a path again re-resolves it).
func (w *watcher) rewatch() {
	if w.fs == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string][]dirRule{}
	add := func(dir string, r dirRule) bool {
		if _, ok := want[dir]; !ok && len(want) >= maxWatches {
			return false
		}
		want[dir] = append(want[dir], r)
		return true
	}
	full := false
	for _, root := range w.roots {
		add(filepath.Dir(root.path), dirRule{kind: root.kind, only: filepath.Base(root.path)})
		if fi, err := os.Stat(root.path); err != nil || !fi.IsDir() {
			continue
		}
		walkRoot := root.path
		if li, err := os.Lstat(root.path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
			// WalkDir does not descend into a symlinked root without this.
			walkRoot += string(filepath.Separator)
		}
		_ = filepath.WalkDir(walkRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			p = filepath.Clean(p)
			if p != root.path && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			if !add(p, dirRule{kind: root.kind}) {
				full = true
				return fs.SkipAll
			}
			return nil
		})
	}
	if full && !w.capped {
		w.s.log.Warn(fmt.Sprintf("watching only %d folders; later changes in the others are picked up by the next reload", maxWatches))
	}
	w.capped = full
	for dir := range w.dirs {
		if _, ok := want[dir]; !ok {
			_ = w.fs.Remove(dir)
		}
	}
	for dir := range want {
		if err := w.fs.Add(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.s.log.Debug("cannot watch folder", "folder", dir, "error", err.Error())
		}
	}
	w.dirs = want
}

// classify says what an event on name calls for (0 = nothing).
func (w *watcher) classify(name string) rootKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	var k rootKind
	for _, r := range w.dirs[filepath.Dir(name)] {
		if r.matters(name) {
			k |= r.kind
		}
	}
	// The watched folder itself was removed or moved.
	for _, r := range w.dirs[name] {
		if r.only == "" {
			k |= r.kind
		}
	}
	return k
}

// run handles events until ctx ends.
func (w *watcher) run(ctx context.Context) {
	if w.fs == nil {
		<-ctx.Done()
		return
	}
	defer w.fs.Close()
	debounce := w.s.opts.Debounce
	// A folder that never goes quiet still reloads this often.
	maxWait := 10 * debounce
	var (
		timer   *time.Timer
		fire    <-chan time.Time
		first   time.Time
		pending rootKind
	)
	arm := func() {
		now := time.Now()
		switch {
		case fire == nil:
			first = now
			timer = time.NewTimer(debounce)
			fire = timer.C
		case now.Sub(first) < maxWait:
			timer.Reset(debounce)
		}
	}
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case e, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if e.Op == fsnotify.Chmod {
				continue
			}
			if k := w.classify(e.Name); k != 0 {
				pending |= k
				arm()
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			// An overflow loses events: reload to be sure.
			w.s.log.Warn("file watch error; reloading", "error", err.Error())
			pending |= kindManifest
			arm()
		case <-fire:
			fire = nil
			w.rewatch()
			switch {
			case pending&kindManifest != 0:
				w.s.log.Info("manifest files changed")
				w.s.requestReload(true)
			case pending&kindSource != 0:
				w.s.log.Info("source files changed")
				w.s.requestReload(false)
			}
			pending = 0
		}
	}
}

// manifestHash hashes the names and contents of the files manifest.Load
// reads for paths (same walk: *.yaml, *.yml and *.json, hidden entries
// skipped, symlinks to files followed). Errors are part of the hash, so a
// file appearing or becoming readable changes it.
func manifestHash(paths []string) string {
	h := sha256.New()
	file := func(name string) {
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(h, "%s\x00error\x00%s\x00", name, err)
			return
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(h, "%s\x00error\x00%s\x00", p, err)
			continue
		}
		if !fi.IsDir() {
			file(p)
			continue
		}
		root := p
		if li, err := os.Lstat(p); err == nil && li.Mode()&fs.ModeSymlink != 0 && !os.IsPathSeparator(p[len(p)-1]) {
			root += string(filepath.Separator)
		}
		_ = filepath.WalkDir(root, func(f string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(h, "%s\x00error\x00%s\x00", f, err)
				return nil
			}
			if f == root {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !manifest.IsManifestFile(d.Name()) {
				return nil
			}
			if d.Type()&fs.ModeSymlink != 0 {
				if ti, err := os.Stat(f); err != nil || !ti.Mode().IsRegular() {
					return nil
				}
			} else if !d.Type().IsRegular() {
				return nil
			}
			file(f)
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))
}
