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
// catalog files by a Directory or GitRepo source that returns each file
// whole. It keeps its last good catalog: a catalog that changes to something
// invalid keeps serving the old one, with a *StaleError.
type toolsSource struct {
	name   string
	inline []v1alpha1.Tool
	// files reads the catalog files (nil for an inline catalog).
	files StaticSource
	log   *slog.Logger

	mu   sync.Mutex
	last []v1alpha1.Tool
	read bool
}

// gitTools is a catalog in a git repository: it syncs like a GitRepo source.
type gitTools struct {
	*toolsSource
	git *GitRepo
}

var (
	_ ToolSource = (*toolsSource)(nil)
	_ ToolSource = (*gitTools)(nil)
	_ Syncer     = (*gitTools)(nil)
)

func newTools(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	ts := spec.Spec.Tools
	if ts == nil {
		return nil, errors.New("spec.tools: must be set when spec.type is Tools")
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	s := &toolsSource{name: spec.Name, log: logger.With("type", string(v1alpha1.SourceTools))}
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
		s.files = d
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
		s.files = g
		return &gitTools{toolsSource: s, git: g}, nil
	}
	return nil, errors.New("spec.tools: set one of catalog, directory and gitRepo")
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
	tools, perr := ParseCatalogs(files)
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
