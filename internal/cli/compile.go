package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// compile loads the manifests and compiles the selected router.
func (f *sourceFlags) compile(ctx context.Context) (*engine.Snapshot, error) {
	return f.compileWith(ctx, f.options())
}

// compileWith is compile with other engine options.
func (f *sourceFlags) compileWith(ctx context.Context, opts engine.Options) (*engine.Snapshot, error) {
	set, err := manifest.Load(f.files...)
	if err != nil {
		return nil, err
	}
	// The same checks as validate: an invalid object never reaches the engine.
	var errs []string
	for _, p := range set.Check() {
		if p.IsWarning() {
			slog.Warn(p.Error())
			continue
		}
		errs = append(errs, p.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid manifests:\n%s", strings.Join(errs, "\n"))
	}
	cfg, err := set.Config(f.router)
	if err != nil {
		return nil, err
	}
	return engine.Compile(ctx, cfg, opts)
}

func (f *sourceFlags) options() engine.Options {
	return engine.Options{
		CacheDir: f.cacheDir,
		Secrets:  sources.EnvFileSecrets{Dir: f.secretsDir},
		Logger:   slog.Default(),
	}
}
