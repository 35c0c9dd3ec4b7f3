package memstore_test

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/learning/learningtest"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/storetest"
)

// The embedded store passes the conformance table every store runs, in
// memory and with a directory.
func TestMemStoreConformance(t *testing.T) {
	for name, dir := range map[string]bool{"memory": false, "directory": true} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) session.Store {
				cfg := memstore.Config{}
				if dir {
					cfg.Dir = t.TempDir()
				}
				m, err := memstore.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.Close() })
				return m
			})
		})
	}
}

// The embedded store keeps learned outcomes too (docs/api.md §10.10), in
// memory and in its directory.
func TestMemStoreOutcomesConformance(t *testing.T) {
	for name, dir := range map[string]bool{"memory": false, "directory": true} {
		t.Run(name, func(t *testing.T) {
			learningtest.Run(t, func(t *testing.T) learning.Store {
				cfg := memstore.Config{}
				if dir {
					cfg.Dir = t.TempDir()
				}
				m, err := memstore.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.Close() })
				return m
			})
		})
	}
}
