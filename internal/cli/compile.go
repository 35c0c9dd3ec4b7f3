package cli

import (
	"context"
	"log/slog"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// compileFlags loads the manifests and compiles the selected router.
func (f *sourceFlags) compile(ctx context.Context) (*engine.Snapshot, error) {
	set, err := manifest.Load(f.files...)
	if err != nil {
		return nil, err
	}
	cfg, err := set.Config(f.router)
	if err != nil {
		return nil, err
	}
	return engine.Compile(ctx, cfg, f.options())
}

func (f *sourceFlags) options() engine.Options {
	return engine.Options{
		CacheDir: f.cacheDir,
		Secrets:  sources.EnvFileSecrets{Dir: f.secretsDir},
		Logger:   slog.Default(),
	}
}
