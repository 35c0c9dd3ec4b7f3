package manifest

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// skipCatalogFiles takes the tool catalog files of the set's Tools sources
// out of the manifests: a folder of manifests may hold the catalog folder
// a Tools source reads (spec.tools.directory.path), whose JSON and YAML
// files are lists of tools, not objects. A file there that yielded no
// object is not a manifest file: its problems are the catalog's, which the
// source reports.
func (p *parser) skipCatalogFiles() {
	var roots []string
	for i := range p.set.Sources {
		src := &p.set.Sources[i]
		if src.Spec.Type != v1alpha1.SourceTools || src.Spec.Tools == nil || src.Spec.Tools.Directory == nil || src.Spec.Tools.Directory.Path == "" {
			continue
		}
		o, ok := p.set.Origin(v1alpha1.KindContextSource, src.Name)
		if !ok || o.File == "" {
			continue
		}
		root, err := sources.DirectoryRoot(src.Name, src.Spec.Tools.Directory, filepath.Dir(o.File))
		if err != nil {
			continue
		}
		if abs, err := filepath.Abs(root); err == nil {
			roots = append(roots, abs)
		}
	}
	if len(roots) == 0 {
		return
	}
	withObjects := map[string]bool{}
	for _, pls := range p.set.origins {
		for _, pl := range pls {
			withObjects[pl.origin.File] = true
		}
	}
	catalog := func(file string) bool {
		if file == "" || withObjects[file] {
			return false
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(roots, func(root string) bool {
			rel, err := filepath.Rel(root, abs)
			return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
		})
	}
	p.problems = slices.DeleteFunc(p.problems, func(pr Problem) bool { return catalog(pr.File) })
	p.set.files = slices.DeleteFunc(p.set.files, catalog)
}
