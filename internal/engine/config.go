// Package engine compiles a Config into an immutable Snapshot and runs the
// context pipeline on it: route match, permissions, fetch, path/sensitivity
// filter, score, rank + dedup, budget, assemble. It is pure Go: no Kubernetes
// client; the CLI, the server and the operator all call it.
package engine

import (
	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Config is everything one router needs, already defaulted: the router, and the
// routes, sources and permissions attached to it, in a deterministic order.
type Config struct {
	// Router is the ContextRouter (possibly the implied default one).
	Router v1alpha1.ContextRouter
	// Routes attached to the router, in evaluation order.
	Routes []v1alpha1.ContextRoute
	// Sources in the router's namespace (every one a route may name).
	Sources []v1alpha1.ContextSource
	// Permissions that apply to the router.
	Permissions []v1alpha1.AgentPermission
	// Classifiers attached to the router, sorted or in file order.
	Classifiers []v1alpha1.ContextClassifier
	// BaseDirs maps a source name to the folder its relative directory.path
	// resolves against (standalone: the manifest file's folder).
	BaseDirs map[string]string
	// Origins maps "Kind/name" to where the object came from, for messages.
	Origins map[string]problem.Location
}

// Origin returns where an object came from (the zero Location when unknown).
func (c *Config) Origin(kind, name string) problem.Location {
	return c.Origins[kind+"/"+name]
}
