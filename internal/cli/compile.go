package cli

import (
	"context"
	"log/slog"

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
	return manifest.Compile(ctx, f.files, f.router, opts)
}

func (f *sourceFlags) options() engine.Options {
	return engine.Options{
		CacheDir: f.cacheDir,
		Secrets:  sources.EnvFileSecrets{Dir: f.secretsDir},
		Logger:   slog.Default(),
	}
}
