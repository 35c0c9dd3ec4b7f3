package manifest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// Compile loads the manifests under paths, checks them as validate does
// (an invalid object never reaches the engine; warnings go to opts.Logger)
// and compiles the router named router ("" = the only one). It is the
// one-shot path of the CLI's commands and the Go API; serve reloads through
// its own watcher.
func Compile(ctx context.Context, paths []string, router string, opts engine.Options) (*engine.Snapshot, error) {
	_, cfg, err := LoadConfig(paths, router, opts.Logger)
	if err != nil {
		return nil, err
	}
	return engine.Compile(ctx, cfg, opts)
}

// LoadConfig loads the manifests under paths, checks them as validate does
// (errors refuse them all; warnings go to log, nil = slog.Default()) and
// selects the configuration of the router named router ("" = the only
// one), without compiling it.
func LoadConfig(paths []string, router string, log *slog.Logger) (*Set, *engine.Config, error) {
	set, err := Load(paths...)
	if err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	var errs []string
	for _, p := range set.Check() {
		if p.IsWarning() {
			log.Warn(p.Error())
			continue
		}
		errs = append(errs, p.Error())
	}
	if len(errs) > 0 {
		return nil, nil, fmt.Errorf("invalid manifests:\n%s", strings.Join(errs, "\n"))
	}
	cfg, err := set.Config(router)
	if err != nil {
		return nil, nil, err
	}
	return set, cfg, nil
}
