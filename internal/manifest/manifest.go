// Package manifest reads standalone manifests: YAML and JSON files holding
// ContextRouter, ContextRoute, ContextSource and AgentPermission objects. It
// decodes strictly (unknown and duplicate fields are errors naming the file,
// line, object and field path), applies the API defaults, checks the objects
// and their references, and selects the engine.Config of one router.
package manifest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Set is everything read from manifest files, in file order.
type Set struct {
	Routers     []v1alpha1.ContextRouter
	Routes      []v1alpha1.ContextRoute
	Sources     []v1alpha1.ContextSource
	Permissions []v1alpha1.AgentPermission
	Classifiers []v1alpha1.ContextClassifier
	// Namespace is the one namespace of the objects ("" if none was given).
	Namespace string

	// origins maps "Kind/name" to every place an object with that key was
	// read, in file order (more than one only for duplicates).
	origins map[string][]placement
	// files in the order they were read, to sort problems.
	files []string
	// broken holds "Kind/name" of objects that were found but did not decode.
	broken map[string]bool
	// filled holds the files with at least one document that is not blank,
	// comments or null, whether or not it decoded.
	filled map[string]bool
	// trained holds the classifiers Validate compiled, by name (first router's).
	trained []engine.ClassifierStatus
	// unexpanded holds "Kind/name/field" of the fields whose ${NAME} could not
	// be expanded: that problem is theirs, not the value's validation.
	unexpanded map[string]bool
}

// TrainedClassifiers describes the classifiers Validate compiled, sorted by
// name, each once (as the first router that compiled it trained it).
func (s *Set) TrainedClassifiers() []engine.ClassifierStatus {
	if s == nil {
		return nil
	}
	return s.trained
}

// placement is where one object was read from, with its YAML node to point
// problems at the exact line of a field.
type placement struct {
	origin Origin
	node   *yamlv3.Node // nil when the document could not be parsed for positions
	// src is the document's text and lineOffset the file line before its
	// first, to follow a position inside a scalar (a CEL error's column).
	src        []byte
	lineOffset int
}

// Origin is where an object came from.
type Origin struct {
	// File as it was given (or found while walking a directory).
	File string
	// Line is the first line of the object's YAML document or JSON value
	// (1-based); for problems, the line of the offending field when known.
	Line int
	// Doc is the 1-based position of the document among the file's non-empty documents.
	Doc int
}

// String returns "file:line", or just the file when the line is unknown.
func (o Origin) String() string {
	if o.Line > 0 {
		return o.File + ":" + strconv.Itoa(o.Line)
	}
	return o.File
}

// fill records that file holds a document.
func (s *Set) fill(file string) {
	if s.filled == nil {
		s.filled = make(map[string]bool)
	}
	s.filled[file] = true
}

// markBroken records that Kind/name was found but could not be decoded.
func (s *Set) markBroken(kind, name string) {
	if kind == "" || name == "" {
		return
	}
	if s.broken == nil {
		s.broken = make(map[string]bool)
	}
	s.broken[kind+"/"+name] = true
}

// Broken reports whether an object Kind/name was found in the files but could
// not be decoded, so the set does not hold it. Its problems were reported by
// Load; Check does not report references to it as "not found" on top.
func (s *Set) Broken(kind, name string) bool { return s.broken[kind+"/"+name] }

// fileRank orders files as they were read; a file not read ranks last.
func (s *Set) fileRank(file string) int {
	if i := slices.Index(s.files, file); i >= 0 {
		return i
	}
	return len(s.files)
}

// Origin returns where the object Kind/name was first read from.
func (s *Set) Origin(kind, name string) (Origin, bool) {
	pl, ok := s.placementOf(kind, name, 0)
	return pl.origin, ok
}

func (s *Set) placementOf(kind, name string, i int) (placement, bool) {
	list := s.origins[kind+"/"+name]
	if i >= len(list) {
		return placement{}, false
	}
	return list[i], true
}

// Problem is one problem with the manifests.
type Problem = problem.Problem

// loc is where a problem at o is.
func loc(o Origin) problem.Location { return problem.Location{File: o.File, Line: o.Line} }

// Load reads manifest files and directories. A directory is walked
// recursively for *.yaml, *.yml and *.json files in lexical order, skipping
// hidden entries (".git", the "..data" of a mounted ConfigMap); a file named
// explicitly is always read.
//
// Every problem is collected into one problem.List, returned as the error.
// The set is returned either way and holds the objects that decoded, so
// that `validate` can check them too (Set.Broken names those that did not).
//
// ${NAME} references in the fields that take them are replaced from the
// process environment (api.md §1.0); LoadEnv chooses the lookup.
func Load(paths ...string) (*Set, error) { return LoadEnv(os.LookupEnv, paths...) }

// LoadEnv is Load with lookup for ${NAME} references; nil leaves them as
// written (a router pod serving a bundle: the objects come from the API server).
func LoadEnv(lookup LookupEnv, paths ...string) (*Set, error) {
	p := newParser()
	if len(paths) == 0 {
		p.problem(Problem{Message: "no manifest files or directories given"})
	}
	seen := make(map[string]bool)
	for _, path := range paths {
		for _, f := range p.expand(path) {
			key := f
			if abs, err := filepath.Abs(f); err == nil {
				key = abs
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			data, err := os.ReadFile(f)
			if err != nil {
				p.problem(Problem{Location: problem.Location{File: f}, Message: pathErrorText(err)})
				continue
			}
			p.parseFile(f, data)
		}
	}
	p.skipCatalogFiles()
	for _, pr := range p.set.expandEnv(lookup) {
		p.problem(pr)
	}
	return p.finish()
}

// Parse reads the manifests of one file's bytes; name is used in messages and
// to resolve relative directory paths. Like Load, it returns the objects
// that decoded along with any problems.
func Parse(name string, data []byte) (*Set, error) {
	p := newParser()
	p.parseFile(name, data)
	return p.finish()
}

// manifestExts are the extensions read when walking a directory.
var manifestExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// IsManifestFile reports whether a directory walk reads a file of this
// name as a manifest (by extension; hidden entries are skipped before).
// The server's watcher and poller use it, so that other files in a
// manifest folder, such as serve's own log, never cause a reload.
func IsManifestFile(name string) bool {
	return manifestExts[strings.ToLower(filepath.Ext(name))]
}

func isHidden(name string) bool { return strings.HasPrefix(name, ".") }

// expand turns one -f argument into the files to read.
func (p *parser) expand(path string) []string {
	fi, err := os.Stat(path)
	if err != nil {
		p.problem(Problem{Location: problem.Location{File: path}, Message: pathErrorText(err)})
		return nil
	}
	if !fi.IsDir() {
		return []string{path}
	}
	root := path
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 && !os.IsPathSeparator(path[len(path)-1]) {
		// WalkDir does not follow a link given as its root; a trailing
		// separator makes the system resolve it.
		root += string(filepath.Separator)
	}
	var files []string
	err = filepath.WalkDir(root, func(f string, d fs.DirEntry, err error) error {
		if err != nil {
			p.problem(Problem{Location: problem.Location{File: f}, Message: pathErrorText(err)})
			if d != nil && d.IsDir() && f != root {
				return fs.SkipDir
			}
			return nil
		}
		if f == root {
			return nil
		}
		if isHidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !IsManifestFile(d.Name()) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Mounted ConfigMaps link each key into a hidden folder: follow
			// links to files, never to directories (no cycles).
			if ti, err := os.Stat(f); err != nil || !ti.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		p.problem(Problem{Location: problem.Location{File: path}, Message: pathErrorText(err)})
	}
	if len(files) == 0 && err == nil {
		p.problem(Problem{Location: problem.Location{File: path}, Message: "directory holds no *.yaml, *.yml or *.json files"})
	}
	return files
}

// pathErrorText drops the path that *fs.PathError repeats; problems name it already.
func pathErrorText(err error) string {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

// kinds are the kinds a manifest may hold, in the order messages list them.
var kinds = []string{v1alpha1.KindContextRouter, v1alpha1.KindContextRoute, v1alpha1.KindContextSource, v1alpha1.KindAgentPermission, v1alpha1.KindContextClassifier}

func (s *Set) place(kind, name string, pl placement) {
	if s.origins == nil {
		s.origins = make(map[string][]placement)
	}
	key := kind + "/" + name
	s.origins[key] = append(s.origins[key], pl)
}

// namespaces returns pointers to every object's namespace, for the pass that
// fills in the set's namespace.
func (s *Set) namespaces() []*string {
	var out []*string
	for i := range s.Routers {
		out = append(out, &s.Routers[i].Namespace)
	}
	for i := range s.Routes {
		out = append(out, &s.Routes[i].Namespace)
	}
	for i := range s.Sources {
		out = append(out, &s.Sources[i].Namespace)
	}
	for i := range s.Permissions {
		out = append(out, &s.Permissions[i].Namespace)
	}
	for i := range s.Classifiers {
		out = append(out, &s.Classifiers[i].Namespace)
	}
	return out
}

// quoteList renders names for messages: "a", "b", "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

func describe(kind, name string) string { return fmt.Sprintf("%s %q", kind, name) }
