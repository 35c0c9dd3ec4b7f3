// Package sources turns ContextSources into chunks. Static sources (inline,
// directory, git) are read when a snapshot is built; query sources (httpAPI)
// are asked per query. The package is pure Go: no Kubernetes client.
package sources

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Chunk is one piece of text that may go into a context window.
type Chunk struct {
	// Source is the ContextSource name.
	Source string
	// Title for people and for scoring (weighted above the body).
	Title string
	// Path is slash-separated and relative to the source root ("" if none).
	Path string
	// Content is the text.
	Content string
	// Index is the chunk's position within its document (file or result list).
	Index int
	// ModTime is the document's modification time; zero if unknown.
	ModTime time.Time
	// Commit is the git commit the chunk was read from ("" for other sources).
	Commit string
	// Fetched is when a per-query source's answer was fetched, in Unix
	// nanoseconds (8 bytes, not a 24-byte time.Time: every chunk carries it);
	// 0 for static sources. A cached answer keeps the time of its fetch.
	Fetched int64
}

// FetchedAt is Fetched as a time; zero when the chunk was not fetched.
func (c *Chunk) FetchedAt() time.Time {
	if c.Fetched == 0 {
		return time.Time{}
	}
	return time.Unix(0, c.Fetched)
}

// Source is a built ContextSource. It is a StaticSource or a QuerySource.
type Source interface {
	Name() string
}

// StaticSource is read once per snapshot; a query does no I/O for it.
type StaticSource interface {
	Source
	// Load returns every chunk of the source.
	Load(ctx context.Context) ([]Chunk, error)
}

// StaleError is returned by StaticSource.Load together with the chunks of the source's last good
// load: the source cannot be read now, and a caller may keep serving that content while it reports
// the error.
type StaleError struct{ Err error }

func (e *StaleError) Error() string { return e.Err.Error() + " (serving the content last read)" }

func (e *StaleError) Unwrap() error { return e.Err }

// QuerySource is asked per query.
type QuerySource interface {
	Source
	// Fetch returns the chunks for one query. The context carries the source's timeout.
	Fetch(ctx context.Context, query string) ([]Chunk, error)
}

// ToolSource is a built Tools or MCP source: it yields a tool catalog, not
// chunks, read when a snapshot is built (api.md §10). A catalog whose
// upstream changes (a git repository, an MCP server) is also a Syncer.
type ToolSource interface {
	Source
	// LoadTools returns the catalog: defaulted, valid tools with unique ids,
	// sorted by id. With a *StaleError it returns the last good catalog.
	LoadTools(ctx context.Context) ([]v1alpha1.Tool, error)
}

// Notifier is a Syncer that learns of upstream changes between intervals
// (MCP's notifications/tools/list_changed): a receive on Changed means a
// Sync is due now.
type Notifier interface {
	Changed() <-chan struct{}
}

// Syncer is a static source whose content changes upstream (git).
type Syncer interface {
	// Sync fetches upstream; changed reports whether Load would now return other chunks.
	// A failed sync keeps the last good content.
	Sync(ctx context.Context) (changed bool, err error)
	// Interval is the time between syncs (spec.gitRepo.interval).
	Interval() time.Duration
}

// Env is what a source needs from its surroundings.
type Env struct {
	// BaseDir resolves relative directory paths (the manifest file's folder).
	BaseDir string
	// CacheDir holds git clones; empty means a directory under os.UserCacheDir.
	CacheDir string
	// Secrets resolves secret references.
	Secrets SecretResolver
	// Getenv resolves ${VAR} in header values; nil means os.Getenv.
	Getenv func(string) string
	// HTTPClient for HTTPAPI sources; nil means a default client.
	HTTPClient *http.Client
	// Logger receives skipped files and other notes; nil means slog.Default().
	// It already carries the source's name (the engine adds "source"), so
	// sources must not add that key again.
	Logger *slog.Logger
	// CountTokens estimates tokens, for maxChunkTokens; nil means ceil(chars/4).
	CountTokens func(string) int
	// ListInBackground leaves every listing of an MCP source to its sync
	// loop (serve, once a configuration serves): LoadTools never waits on
	// the server, and reports the source as not listed yet until the first
	// listing ends. Otherwise (the CLI, serve's first configuration) the
	// first LoadTools lists.
	ListInBackground bool
}

// Factory builds a source from a defaulted spec that Validate accepted. It
// checks what only the source type knows (URL templates, field paths, git
// refs) and prepares; it does no slow I/O. It does not check the API's rules
// again, but returns an error rather than panicking on a spec that breaks
// them (one written by hand in Go).
type Factory func(spec *v1alpha1.ContextSource, env Env) (Source, error)

var (
	registryMu sync.RWMutex
	registry   = map[v1alpha1.SourceType]Factory{}
)

// Register makes a source type available to New. It panics on a duplicate.
func Register(t v1alpha1.SourceType, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[t]; dup {
		panic("sources: duplicate registration of " + string(t))
	}
	registry[t] = f
}

// Types lists the registered source types, sorted.
func Types() []v1alpha1.SourceType {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]v1alpha1.SourceType, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// New builds the source a spec describes. The factory gets a defaulted copy
// (v1alpha1 Default is the one place for defaults), so a spec built in Go
// need not be defaulted.
func New(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	registryMu.RLock()
	f, ok := registry[spec.Spec.Type]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("spec.type: unsupported source type %q", spec.Spec.Type)
	}
	spec = spec.DeepCopy()
	spec.Default()
	return f(spec, env.withDefaults())
}

func (e Env) withDefaults() Env {
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	if e.CountTokens == nil {
		e.CountTokens = func(s string) int { return (len([]rune(s)) + 3) / 4 }
	}
	if e.Secrets == nil {
		e.Secrets = EnvFileSecrets{Getenv: e.Getenv}
	}
	return e
}

// Why a static source left a file out (the keys of Skips.Reasons).
const (
	SkipTooLarge    = "too_large"        // larger than maxFileSize
	SkipNotText     = "not_utf8"         // not UTF-8 text, or a NUL byte (binary)
	SkipNotRegular  = "not_regular_file" // FIFO, device, socket; git: an unknown mode
	SkipUnreadable  = "unreadable"       // cannot be opened, read or stat'ed
	SkipBrokenLink  = "broken_symlink"
	SkipOutsideRoot = "outside_root" // a symlink pointing outside the source root
	SkipSymlink     = "symlink"      // git: symlinks in the tree are not followed
	SkipSubmodule   = "submodule"    // git
)

// skipText is how a skip reason reads in the log.
var skipText = map[string]string{
	SkipTooLarge:    "file larger than maxFileSize",
	SkipNotText:     "not UTF-8 text (binary or other encoding)",
	SkipNotRegular:  "not a regular file",
	SkipUnreadable:  "cannot be read",
	SkipBrokenLink:  "broken symlink",
	SkipOutsideRoot: "symlink points outside the source root",
	SkipSymlink:     "symlink",
	SkipSubmodule:   "submodule",
}

// MaxSkipExamples bounds Skips.Examples: status and validate show a few
// paths, not a listing of a large tree.
const MaxSkipExamples = 5

// Skips accounts for the files a static source's last Load left out.
type Skips struct {
	// Files is the number of files (and unreadable folders) left out.
	Files int `json:"files"`
	// Reasons counts them by Skip* reason.
	Reasons map[string]int `json:"reasons"`
	// Examples are the first MaxSkipExamples paths, in reading order.
	Examples []string `json:"examples"`
}

// add records one skipped path and logs it at info level.
func (k *Skips) add(log *slog.Logger, rel, reason string, args ...any) {
	log.Info("skipping "+rel+": "+skipText[reason], args...)
	if k.Reasons == nil {
		k.Reasons = map[string]int{}
	}
	k.Files++
	k.Reasons[reason]++
	if len(k.Examples) < MaxSkipExamples {
		k.Examples = append(k.Examples, rel)
	}
}

// SkipReporter is a static source that may leave files out at Load.
type SkipReporter interface {
	// Skipped describes the last Load that returned content.
	Skipped() Skips
}

// Summary says in one line how many files were left out and why, with the
// first paths: "skipped 3 files: 2 file larger than maxFileSize, 1 not UTF-8
// text (binary or other encoding) (big.md, huge.md, logo.png)".
func (k Skips) Summary() string {
	reasons := make([]string, 0, len(k.Reasons))
	for _, r := range slices.Sorted(maps.Keys(k.Reasons)) {
		reasons = append(reasons, fmt.Sprintf("%d %s", k.Reasons[r], skipText[r]))
	}
	more := ""
	if k.Files > len(k.Examples) {
		more = ", …"
	}
	return fmt.Sprintf("skipped %d files: %s (%s%s)", k.Files, strings.Join(reasons, ", "), strings.Join(k.Examples, ", "), more)
}
