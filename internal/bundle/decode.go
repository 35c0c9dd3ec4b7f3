package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// Decode reads a bundle back from the bytes Build wrote (a bundle
// ConfigMap's DataKey): what it holds and what a pod serving it must mount.
// Pods other than the router Deployment's (injected sidecars) learn their
// volumes this way instead of rebuilding the bundle from the cluster; for
// bytes Build made, Decode's Secrets and Directories equal Build's, so both
// kinds of pod mount the same. Verdicts and CompileTime stay empty: the bytes
// do not record them.
func Decode(data []byte) (*Bundle, error) {
	set, err := manifest.Parse(FileName, data)
	if err != nil {
		return nil, fmt.Errorf("bundle: decoding %s: %w", DataKey, err)
	}
	if len(set.Routers) != 1 {
		return nil, fmt.Errorf("bundle: decoding %s: %d ContextRouters, want exactly 1", DataKey, len(set.Routers))
	}
	router := &set.Routers[0]
	sum := sha256.Sum256(data)
	out := &Bundle{
		Namespace: router.Namespace,
		Router:    router.Name,
		Data:      data,
		Hash:      "sha256:" + hex.EncodeToString(sum[:]),
	}
	for _, r := range set.Routes {
		out.Routes = append(out.Routes, r.Name)
	}
	srcs := make([]*v1alpha1.ContextSource, len(set.Sources))
	for i := range set.Sources {
		srcs[i] = &set.Sources[i]
	}
	slices.SortFunc(srcs, func(x, y *v1alpha1.ContextSource) int { return strings.Compare(x.Name, y.Name) })
	for _, s := range srcs {
		out.Sources = append(out.Sources, s.Name)
		out.ToolSources = out.ToolSources || s.Spec.HoldsTools()
		// Build rewrote the path of every mounted source to its mount path.
		if m, ok := mountOf(s); ok {
			out.Directories = append(out.Directories, m)
		}
	}
	for _, p := range set.Permissions {
		out.Permissions = append(out.Permissions, p.Name)
	}
	slices.Sort(out.Routes)
	slices.Sort(out.Permissions)
	out.Secrets = secretNames(router, srcs)
	return out, nil
}

// secretNames names, sorted, every Secret a router reads with these sources.
func secretNames(router *v1alpha1.ContextRouter, srcs []*v1alpha1.ContextSource) []string {
	names := router.SecretNames()
	for _, s := range srcs {
		names = append(names, s.SecretNames()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
