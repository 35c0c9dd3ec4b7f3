package sources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func init() { Register(v1alpha1.SourceDirectory, newDirectory) }

// DirectoryMountRoot is where the operator mounts a Directory source's volume
// in router pods: <DirectoryMountRoot>/<source name>.
const DirectoryMountRoot = "/var/run/contextrouter/sources"

// MountPath is where a router pod mounts a Directory source's volume:
// spec.directory.path when absolute, else DirectoryMountRoot/<source>. A
// relative path only has a meaning next to manifest files, which a cluster
// does not have.
func MountPath(source, dirPath string) string {
	if path.IsAbs(dirPath) {
		return path.Clean(dirPath)
	}
	return path.Join(DirectoryMountRoot, source)
}

// DirectoryRoot is the folder a Directory source reads: spec.directory.path,
// taken from baseDir (the manifest file's folder) when relative, or, for a
// volume without a path, where the operator mounts it.
func DirectoryRoot(source string, d *v1alpha1.DirectorySource, baseDir string) (string, error) {
	switch {
	case d.Path == "" && d.Volume != nil:
		return filepath.FromSlash(MountPath(source, "")), nil
	case d.Path == "":
		return "", errors.New("spec.directory.path: must be set when spec.directory.volume is not")
	case !filepath.IsAbs(d.Path):
		return filepath.Join(baseDir, d.Path), nil
	}
	return filepath.Clean(d.Path), nil
}

// directorySource reads the files under a folder. It keeps the chunks of its last good Load, so a
// long-lived caller (serve) goes on serving them when the folder vanishes.
type directorySource struct {
	name string
	root string
	// shown is the root as the manifest writes it (or the volume's mount path): errors reach
	// callers, who must not learn the host's absolute paths.
	shown       string
	include     []string
	exclude     []string
	maxFileSize int64
	chunking    ChunkOptions
	log         *slog.Logger

	mu sync.Mutex
	// last holds the chunks of the last good Load; read is false before the first one.
	last []Chunk
	read bool
	// skipped accounts for the files the last good Load left out.
	skipped Skips
}

func newDirectory(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	d := spec.Spec.Directory
	if d == nil {
		return nil, errors.New("spec.directory: must be set when spec.type is Directory")
	}
	root, err := DirectoryRoot(spec.Name, d, env.BaseDir)
	if err != nil {
		return nil, err
	}
	shown := d.Path
	if shown == "" {
		shown = root
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &directorySource{
		name:        spec.Name,
		root:        root,
		shown:       shown,
		include:     slices.Clone(d.Include),
		exclude:     slices.Clone(d.Exclude),
		maxFileSize: d.MaxFileSize.Value(),
		chunking:    chunkOptions(spec, env),
		log:         logger.With("type", string(v1alpha1.SourceDirectory)),
	}, nil
}

func (s *directorySource) Name() string { return s.name }

// Skipped describes the files the last good Load left out.
func (s *directorySource) Skipped() Skips {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// Load walks the folder in sorted order and chunks every file that matches
// the globs. Files that cannot be used (too large, binary, unreadable,
// escaping symlinks) are skipped with a logged reason; only a missing or
// unreadable root fails the source. After a good Load, such a failure
// returns the chunks of the last good Load with a *StaleError.
func (s *directorySource) Load(ctx context.Context) ([]Chunk, error) {
	chunks, skipped, err := s.walk(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.last, s.read, s.skipped = chunks, true, skipped
	case s.read && ctx.Err() == nil:
		s.log.Warn("cannot read the source folder; serving the content last read", "error", err.Error())
		return slices.Clone(s.last), &StaleError{Err: err}
	default:
		return nil, err
	}
	// The caller may write to what it gets; the kept copy stays as read.
	return slices.Clone(chunks), nil
}

// rootError describes a root that cannot be read, naming it as the manifest does: the error
// reaches callers (failed_sources, status), and *fs.PathError would repeat the absolute path.
func (s *directorySource) rootError(err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("directory %q: %w", s.shown, err)
}

func (s *directorySource) walk(ctx context.Context) ([]Chunk, Skips, error) {
	realRoot, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return nil, Skips{}, s.rootError(err)
	}
	info, err := os.Stat(realRoot)
	if err != nil {
		return nil, Skips{}, s.rootError(err)
	}
	if !info.IsDir() {
		return nil, Skips{}, s.rootError(errors.New("not a directory"))
	}
	entries, err := os.ReadDir(realRoot)
	if err != nil {
		return nil, Skips{}, s.rootError(err)
	}
	w := &dirWalker{src: s, ctx: ctx, realRoot: realRoot, visited: map[string]string{realRoot: "."}}
	if err := w.walkEntries(realRoot, "", entries); err != nil {
		return nil, Skips{}, err
	}
	// Folder symlinks are followed only after the real tree is read, so a
	// folder reached both directly and through an alias is read under its
	// real path, whatever the names sort like. New links found below a
	// followed link join the queue.
	for len(w.pending) > 0 {
		l := w.pending[0]
		w.pending = w.pending[1:]
		if err := w.followDir(l.target, l.rel); err != nil {
			return nil, Skips{}, err
		}
	}
	slices.SortStableFunc(w.chunks, func(a, b Chunk) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Index, b.Index))
	})
	return w.chunks, w.skips, nil
}

// dirWalker holds the state of one Load.
type dirWalker struct {
	src      *directorySource
	ctx      context.Context
	realRoot string
	// visited maps the real path of every folder read to the relative path it
	// was read under. Each folder is read once, which also breaks symlink loops.
	visited map[string]string
	// pending are folder symlinks (already resolved) waiting to be followed.
	pending []dirLink
	chunks  []Chunk
	skips   Skips
}

type dirLink struct{ target, rel string }

func (w *dirWalker) skip(rel, reason string, args ...any) {
	w.skips.add(w.src.log, rel, reason, args...)
}

// walkDir reads the folder whose real (symlink-free) path is dir; rel is the
// slash path it has under the root.
func (w *dirWalker) walkDir(dir, rel string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		// A folder that vanished or cannot be read must not hide the rest.
		w.skip(rel+"/", SkipUnreadable, "error", err)
		return nil
	}
	return w.walkEntries(dir, rel, entries)
}

func (w *dirWalker) walkEntries(dir, rel string, entries []fs.DirEntry) error {
	// os.ReadDir sorts by name, so which of two aliases is read is deterministic.
	for _, e := range entries {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		// Kubernetes ConfigMap and Secret volumes keep the real files under
		// "..data" -> "..<timestamp>" and expose each key as a top-level
		// symlink into them; reading only the top-level links reads each key once.
		if strings.HasPrefix(name, "..") {
			continue
		}
		full := filepath.Join(dir, name)
		relPath := path.Join(rel, name)
		mode := e.Type()

		if mode&fs.ModeSymlink != 0 {
			w.walkSymlink(full, relPath)
			continue
		}
		switch {
		case mode.IsDir():
			if w.prunable(relPath) {
				continue
			}
			// Not a symlink and inside a real folder: full is already real.
			w.visited[full] = relPath
			if err := w.walkDir(full, relPath); err != nil {
				return err
			}
		case mode.IsRegular():
			if MatchPath(relPath, w.src.include, w.src.exclude) {
				w.readFile(full, relPath)
			}
		default:
			// Devices, sockets and FIFOs: reading a FIFO would block the load.
			if MatchPath(relPath, w.src.include, w.src.exclude) {
				w.skip(relPath, SkipNotRegular, "mode", mode.String())
			}
		}
	}
	return nil
}

// walkSymlink follows a link only when its real target stays inside the real
// root. Files are read at once; folders are queued (see Load).
func (w *dirWalker) walkSymlink(link, rel string) {
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		if MatchPath(rel, w.src.include, w.src.exclude) {
			w.skip(rel, SkipBrokenLink, "error", err)
		}
		return
	}
	info, err := os.Stat(target)
	if err != nil {
		w.skip(rel, SkipUnreadable, "error", err)
		return
	}
	if info.IsDir() {
		if w.prunable(rel) {
			return
		}
		if !w.inside(target) {
			w.skip(rel+"/", SkipOutsideRoot, "target", target)
			return
		}
		w.pending = append(w.pending, dirLink{target: target, rel: rel})
		return
	}
	if !MatchPath(rel, w.src.include, w.src.exclude) {
		return
	}
	if !w.inside(target) {
		w.skip(rel, SkipOutsideRoot, "target", target)
		return
	}
	if !info.Mode().IsRegular() {
		w.skip(rel, SkipNotRegular, "mode", info.Mode().String())
		return
	}
	// Read the resolved path, not the link, so the file read is the one checked.
	w.readFile(target, rel)
}

// followDir reads a folder reached through a symlink unless it was read already.
func (w *dirWalker) followDir(target, rel string) error {
	if first, seen := w.visited[target]; seen {
		w.src.log.Info("skipping "+rel+"/: folder already read (symlink alias or loop)", "readAs", first)
		return nil
	}
	w.visited[target] = rel
	return w.walkDir(target, rel)
}

// inside reports whether the real path p is the real root or below it. A
// string prefix test would wrongly accept /data/docs2 for /data/docs.
func (w *dirWalker) inside(p string) bool {
	r, err := filepath.Rel(w.realRoot, p)
	if err != nil || filepath.IsAbs(r) {
		return false
	}
	return r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator))
}

// prunable reports whether an exclude pattern of the form "X/**" covers the
// folder rel, so nothing below it could be read and the walk can skip it.
func (w *dirWalker) prunable(rel string) bool {
	for _, p := range w.src.exclude {
		if dir, ok := strings.CutSuffix(p, "/**"); ok && doublestar.MatchUnvalidated(dir, rel) {
			return true
		}
	}
	return false
}

// readFile reads one matching file and appends its chunks.
func (w *dirWalker) readFile(file, rel string) {
	f, err := os.Open(file)
	if err != nil {
		w.skip(rel, SkipUnreadable, "error", err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		w.skip(rel, SkipUnreadable, "error", err)
		return
	}
	limit := w.src.maxFileSize
	if info.Size() > limit {
		w.skip(rel, SkipTooLarge, "size", info.Size(), "maxFileSize", limit)
		return
	}
	// Read at most one byte past the limit: the file may grow after Stat.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		w.skip(rel, SkipUnreadable, "error", err)
		return
	}
	if int64(len(data)) > limit {
		w.skip(rel, SkipTooLarge, "maxFileSize", limit)
		return
	}
	if !IsText(data) {
		w.skip(rel, SkipNotText)
		return
	}
	w.chunks = append(w.chunks, SplitDocument(Document{
		Source:  w.src.name,
		Path:    rel,
		Title:   path.Base(rel),
		Content: string(data),
		ModTime: info.ModTime(),
	}, w.src.chunking)...)
}
