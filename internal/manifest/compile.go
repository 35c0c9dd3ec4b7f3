package manifest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Compile loads the manifests under paths, checks them as validate does
// (an invalid object never reaches the engine; warnings, its own and the
// engine's, go to opts.Logger)
// and compiles the router named router ("" = the only one). It is the
// one-shot path of the CLI's commands and the Go API; serve reloads through
// its own watcher.
func Compile(ctx context.Context, paths []string, router string, opts engine.Options) (*engine.Snapshot, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	set, cfg, err := LoadConfig(paths, router, log)
	if err != nil {
		return nil, err
	}
	snap, err := engine.Compile(ctx, cfg, opts)
	if found := (problem.List)(nil); errors.As(err, &found) {
		// At the field's line, as validate reports them.
		set.Locate(found)
		return nil, found
	} else if err != nil {
		return nil, err
	}
	// The engine's warnings (a fallback that can never serve, a classifier
	// without out-of-scope examples) are the ones validate prints.
	warnings := snap.Warnings()
	set.Locate(warnings)
	for _, p := range warnings {
		log.Warn(p.Error())
	}
	return snap, nil
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
