package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func init() { Register(v1alpha1.SourceTools, newTools) }

// toolsSource is a tool catalog (api.md §10.1): written inline, or read from
// catalog files — or OpenAPI documents — by a Directory or GitRepo source
// that returns each file whole, or fetched from a URL. It keeps its last
// good catalog: a catalog that changes to something invalid keeps serving
// the old one, with a *StaleError.
type toolsSource struct {
	name   string
	inline []v1alpha1.Tool
	// files reads the catalog files (nil for an inline catalog); block is
	// their spec.tools block (directory, gitRepo, http).
	files StaticSource
	block string
	// openAPI: the files are OpenAPI documents.
	openAPI *v1alpha1.OpenAPITools
	log     *slog.Logger

	mu   sync.Mutex
	last []v1alpha1.Tool
	read bool
	// parsed are the files last made into a catalog, and tools that
	// catalog: the same files are not read again (an OpenAPI document of a
	// few MiB takes a second).
	parsed      []Chunk
	parsedTools []v1alpha1.Tool
}

// gitTools is a catalog in a git repository: it syncs like a GitRepo source.
type gitTools struct {
	*toolsSource
	git *GitRepo
}

// httpTools is a catalog fetched from a URL: it fetches again every
// interval.
type httpTools struct {
	*toolsSource
	file *httpFile
}

var (
	_ ToolSource = (*toolsSource)(nil)
	_ ToolSource = (*gitTools)(nil)
	_ Syncer     = (*gitTools)(nil)
	_ ToolSource = (*httpTools)(nil)
	_ Fetcher    = (*httpTools)(nil)
)

// Fetcher is a Syncer that fetches a file over HTTP (spec.tools.http).
// Fetched reports whether a fetch has ended: a source built while a
// configuration serves fetches on its sync loop only, which then fetches
// at once.
type Fetcher interface {
	Syncer
	Fetched() bool
}

func newTools(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	ts := spec.Spec.Tools
	if ts == nil {
		return nil, errors.New("spec.tools: must be set when spec.type is Tools")
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &toolsSource{name: spec.Name, log: logger.With("type", string(v1alpha1.SourceTools)), openAPI: ts.OpenAPI}
	if ts.OpenAPI != nil && ts.Catalog != nil {
		return nil, errors.New("spec.tools.openAPI: reads documents from directory, gitRepo or http, not an inline catalog")
	}
	switch {
	case ts.Catalog != nil:
		if err := inlineCatalogError(ts.Catalog); err != nil {
			return nil, err
		}
		s.inline = slices.Clone(ts.Catalog)
		for i := range s.inline {
			s.inline[i].Default()
		}
		SortTools(s.inline)
		return s, nil
	case ts.Directory != nil:
		inner := spec.DeepCopy()
		inner.Spec.Directory, inner.Spec.Tools = inner.Spec.Tools.Directory, nil
		src, err := newDirectory(inner, env)
		if err != nil {
			return nil, toolsFieldError(err, "directory")
		}
		d := src.(*directorySource)
		d.chunking.Raw = true
		s.files, s.block = d, "directory"
		return s, nil
	case ts.GitRepo != nil:
		inner := spec.DeepCopy()
		inner.Spec.GitRepo, inner.Spec.Tools = inner.Spec.Tools.GitRepo, nil
		src, err := newGitRepo(inner, env)
		if err != nil {
			return nil, toolsFieldError(err, "gitRepo")
		}
		g := src.(*GitRepo)
		g.chunking.Raw = true
		s.files, s.block = g, "gitRepo"
		return &gitTools{toolsSource: s, git: g}, nil
	case ts.HTTP != nil:
		f, err := newHTTPFile(ts.HTTP, env)
		if err != nil {
			return nil, err
		}
		s.files, s.block = f, "http"
		return &httpTools{toolsSource: s, file: f}, nil
	}
	return nil, errors.New("spec.tools: set one of catalog, directory, gitRepo and http")
}

// toolsFieldError moves a Directory or GitRepo factory's field path
// (spec.directory.path) under spec.tools.
func toolsFieldError(err error, block string) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "spec."+block); ok {
		return errors.New("spec.tools." + block + rest)
	}
	return fmt.Errorf("spec.tools.%s: %w", block, err)
}

// CheckInlineCatalog reports the problems of an inline catalog that Validate
// cannot see (input schemas, duplicate ids), by field path:
// spec.tools.catalog[i].inputSchema, spec.tools.catalog[i].name.
func CheckInlineCatalog(tools []v1alpha1.Tool) []CatalogProblem {
	var out []CatalogProblem
	field := func(i int) string { return fmt.Sprintf("spec.tools.catalog[%d]", i) }
	for _, p := range CheckTools(tools, false, field) {
		out = append(out, CatalogProblem{Field: field(p.Index) + "." + p.Field, Message: p.Message})
	}
	return out
}

func inlineCatalogError(tools []v1alpha1.Tool) error {
	if ps := CheckInlineCatalog(tools); len(ps) > 0 {
		return fmt.Errorf("%s: %s", ps[0].Field, ps[0].Message)
	}
	return nil
}

func (s *toolsSource) Name() string { return s.name }

// LoadTools returns the catalog sorted by id. A file catalog is read again
// on every call; when it cannot be read or is not valid, the last good
// catalog is returned with a *StaleError, or, before a good one, the error.
func (s *toolsSource) LoadTools(ctx context.Context) ([]v1alpha1.Tool, error) {
	if s.files == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return slices.Clone(s.inline), nil
	}
	files, err := s.files.Load(ctx)
	var stale *StaleError
	if err != nil && !errors.As(err, &stale) {
		return s.keep(ctx, err)
	}
	if err := s.skippedDocuments(); err != nil {
		return s.keep(ctx, err)
	}
	tools, perr := s.parse(files)
	if perr != nil {
		return s.keep(ctx, perr)
	}
	s.mu.Lock()
	s.last, s.read = tools, true
	s.mu.Unlock()
	// The files are the last good ones of a folder that cannot be read now:
	// the catalog is good, and stale.
	return slices.Clone(tools), err
}

// parse makes the files a catalog, unless they are the files of the last
// catalog made.
func (s *toolsSource) parse(files []Chunk) ([]v1alpha1.Tool, error) {
	s.mu.Lock()
	if s.parsed != nil && slices.Equal(s.parsed, files) {
		tools := s.parsedTools
		s.mu.Unlock()
		return tools, nil
	}
	s.mu.Unlock()
	tools, cut, err := parseCatalogs(files, s.openAPI)
	if err != nil {
		return nil, err
	}
	if len(cut) > 0 {
		s.log.Warn("OpenAPI operations whose input schema is over 64 KiB with every schema it refers to: the farthest of those schemas are left out of it",
			"operations", len(cut), "first", cut[:min(len(cut), maxShownProblems)])
	}
	s.mu.Lock()
	s.parsed, s.parsedTools = slices.Clone(files), tools
	s.mu.Unlock()
	return tools, nil
}

// skippedDocuments fails an OpenAPI catalog whose folder or repository left
// a document out for its size: an API would silently lose its tools.
func (s *toolsSource) skippedDocuments() error {
	sr, ok := s.files.(SkipReporter)
	if s.openAPI == nil || !ok {
		return nil
	}
	if k := sr.Skipped(); k.Reasons[SkipTooLarge] > 0 {
		return fmt.Errorf("%s; an OpenAPI document is not skipped: raise spec.tools.%s.maxFileSize (documents may have up to 10Mi)", k.Summary(), s.block)
	}
	return nil
}

// keep answers a failed load with the last good catalog, if there is one.
func (s *toolsSource) keep(ctx context.Context, err error) ([]v1alpha1.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read || ctx.Err() != nil {
		return nil, err
	}
	s.log.Warn("cannot read the tool catalog; serving the catalog last read", "error", err.Error())
	return slices.Clone(s.last), &StaleError{Err: err}
}

// Sync syncs the repository; see GitRepo.Sync.
func (g *gitTools) Sync(ctx context.Context) (bool, error) { return g.git.Sync(ctx) }

// Interval is spec.tools.gitRepo.interval.
func (g *gitTools) Interval() time.Duration { return g.git.Interval() }

// Status reports the repository's sync state.
func (g *gitTools) Status() GitStatus { return g.git.Status() }

// CacheDir is the folder of the bare clone.
func (g *gitTools) CacheDir() string { return g.git.CacheDir() }

// Sync fetches the file again; see httpFile.Sync.
func (h *httpTools) Sync(ctx context.Context) (bool, error) { return h.file.Sync(ctx) }

// Interval is spec.tools.http.interval.
func (h *httpTools) Interval() time.Duration { return h.file.Interval() }

// Fetched reports whether a fetch has ended.
func (h *httpTools) Fetched() bool { return h.file.Fetched() }
