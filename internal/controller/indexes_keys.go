package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Field index keys shared by the reconcilers of this package. Keys are per
// kind, so the route and permission parentRefs indexes may share a field path.
// Every reconciler that needs one of these registers it through
// RegisterSharedIndexes, which is safe to call more than once per manager.
const (
	// IndexRouteSources indexes ContextRoutes by the ContextSource names in spec.sources.
	IndexRouteSources = "spec.sources.name"
	// IndexRouteParents indexes ContextRoutes by parentRef names; a route
	// without parentRefs is indexed under AllParents.
	IndexRouteParents = "spec.parentRefs.name"
	// IndexPermissionParents indexes AgentPermissions by parentRef names; a
	// permission without parentRefs is indexed under AllParents.
	IndexPermissionParents = "spec.parentRefs.name"
	// IndexPermissionSources indexes AgentPermissions by the ContextSource
	// names in spec.allowSources and spec.denySources.
	IndexPermissionSources = "spec.sourceNames"
	// IndexSourceSecrets indexes ContextSources by the Secrets they read:
	// httpAPI header valueFrom.secretKeyRef and gitRepo.auth.secretRef.
	IndexSourceSecrets = "spec.secretNames"
	// IndexSourceConfigMaps indexes ContextSources by directory.volume.configMap.name.
	IndexSourceConfigMaps = "spec.directory.volume.configMap.name"
	// IndexSourcePVCs indexes ContextSources by directory.volume.persistentVolumeClaim.claimName.
	IndexSourcePVCs = "spec.directory.volume.persistentVolumeClaim.claimName"
	// IndexSourceExcludedBy indexes ContextSources by the routers in
	// status.excludedBy: a router finds the entries it wrote there.
	IndexSourceExcludedBy = "status.excludedBy.router"

	// AllParents is the parentRefs index value of an object attached to every
	// router in its namespace (empty parentRefs).
	AllParents = "*"
)

// RouteSourceNames is the IndexRouteSources extractor.
func RouteSourceNames(obj client.Object) []string {
	r, ok := obj.(*v1alpha1.ContextRoute)
	if !ok {
		return nil
	}
	return uniqueSorted(r.SourceNames())
}

// RouteParentNames is the IndexRouteParents extractor.
func RouteParentNames(obj client.Object) []string {
	r, ok := obj.(*v1alpha1.ContextRoute)
	if !ok {
		return nil
	}
	return parentNames(r.ParentNames())
}

// PermissionParentNames is the IndexPermissionParents extractor.
func PermissionParentNames(obj client.Object) []string {
	p, ok := obj.(*v1alpha1.AgentPermission)
	if !ok {
		return nil
	}
	return parentNames(p.ParentNames())
}

// PermissionSourceNames is the IndexPermissionSources extractor.
func PermissionSourceNames(obj client.Object) []string {
	p, ok := obj.(*v1alpha1.AgentPermission)
	if !ok {
		return nil
	}
	return uniqueSorted(p.SourceNames())
}

// SourceSecretNames is the IndexSourceSecrets extractor.
func SourceSecretNames(obj client.Object) []string {
	s, ok := obj.(*v1alpha1.ContextSource)
	if !ok {
		return nil
	}
	return s.SecretNames()
}

// SourceConfigMapNames is the IndexSourceConfigMaps extractor.
func SourceConfigMapNames(obj client.Object) []string {
	if v := sourceVolume(obj); v != nil && v.ConfigMap != nil {
		return []string{v.ConfigMap.Name}
	}
	return nil
}

// SourcePVCNames is the IndexSourcePVCs extractor.
func SourcePVCNames(obj client.Object) []string {
	if v := sourceVolume(obj); v != nil && v.PersistentVolumeClaim != nil {
		return []string{v.PersistentVolumeClaim.ClaimName}
	}
	return nil
}

// sourceVolume is the volume a source's files are on, if any.
func sourceVolume(obj client.Object) *v1alpha1.DirectoryVolume {
	s, ok := obj.(*v1alpha1.ContextSource)
	if !ok {
		return nil
	}
	if d, _ := s.DirectoryBlock(); d != nil {
		return d.Volume
	}
	return nil
}

// SourceExcludedBy is the IndexSourceExcludedBy extractor.
func SourceExcludedBy(obj client.Object) []string {
	s, ok := obj.(*v1alpha1.ContextSource)
	if !ok {
		return nil
	}
	names := make([]string, len(s.Status.ExcludedBy))
	for i, e := range s.Status.ExcludedBy {
		names[i] = e.Router
	}
	return uniqueSorted(names)
}

// SharedIndex is one field index of an object kind.
type SharedIndex struct {
	Object  client.Object
	Key     string
	Extract client.IndexerFunc
}

// SharedIndexes lists every index declared in this file.
func SharedIndexes() []SharedIndex {
	return []SharedIndex{
		{&v1alpha1.ContextRoute{}, IndexRouteSources, RouteSourceNames},
		{&v1alpha1.ContextRoute{}, IndexRouteParents, RouteParentNames},
		{&v1alpha1.AgentPermission{}, IndexPermissionParents, PermissionParentNames},
		{&v1alpha1.AgentPermission{}, IndexPermissionSources, PermissionSourceNames},
		{&v1alpha1.ContextSource{}, IndexSourceSecrets, SourceSecretNames},
		{&v1alpha1.ContextSource{}, IndexSourceConfigMaps, SourceConfigMapNames},
		{&v1alpha1.ContextSource{}, IndexSourcePVCs, SourcePVCNames},
		{&v1alpha1.ContextSource{}, IndexSourceExcludedBy, SourceExcludedBy},
	}
}

// RegisterSharedIndexes registers every SharedIndexes entry with indexer
// (mgr.GetFieldIndexer()). Several reconcilers call it from their
// SetupWithManager; an index that is already registered is left as it is,
// since every caller registers the same extractor under the same key.
func RegisterSharedIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range SharedIndexes() {
		if err := IndexFieldOnce(ctx, indexer, ix.Object, ix.Key, ix.Extract); err != nil {
			return err
		}
	}
	return nil
}

// IndexFieldOnce is indexer.IndexField that tolerates the key being
// registered already for that kind (client-go's "indexer conflict").
func IndexFieldOnce(ctx context.Context, indexer client.FieldIndexer, obj client.Object, key string, fn client.IndexerFunc) error {
	err := indexer.IndexField(ctx, obj, key, fn)
	if err != nil && !strings.Contains(err.Error(), "indexer conflict") {
		return fmt.Errorf("index %T by %s: %w", obj, key, err)
	}
	return nil
}

// parentNames is the index value of a parentRefs list: the router names, or
// AllParents when the list is empty (attached to every router).
func parentNames(names []string) []string {
	if len(names) == 0 {
		return []string{AllParents}
	}
	return uniqueSorted(names)
}

func uniqueSorted(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
}
