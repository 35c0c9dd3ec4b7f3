// Package convert turns the configuration of theaios-context-router (its
// single-file YAML) into contextrouter manifests (docs/api.md §7, convert).
// It reads only the bytes it is given: no source is read and no variable is
// expanded. Problems that make the file unreadable (bad YAML, unknown keys,
// wrong types, conditions that do not parse) are errors with the file and
// line; what is valid there but has no equivalent here is a Note, never
// dropped silently.
package convert

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Options change a conversion.
type Options struct {
	// Words translates `text contains "x"` to containsAnyWord instead of a
	// case-sensitive substring test.
	Words bool
	// OutputDir is where the manifests will be written; relative directory
	// paths are rewritten relative to it. Empty: kept as written (relative
	// to the input file's folder).
	OutputDir string
}

// Issue is an error or a note at a place of the input file.
type Issue struct {
	problem.Location
	Key     string // the key path, such as routes[2].when
	Kind    string // the output kind it concerns ("" for the router)
	Message string
}

func (i Issue) String() string {
	s := i.Location.String()
	if i.Key != "" {
		s += ": " + i.Key
	}
	return s + ": " + i.Message
}

// Errors are the problems that stop a conversion, in file order.
type Errors []Issue

func (e Errors) Error() string {
	s := make([]string, len(e))
	for i, is := range e {
		s[i] = is.String()
	}
	return strings.Join(s, "\n")
}

// Result is a converted configuration.
type Result struct {
	File        string
	Router      *object
	Sources     []*object
	Routes      []*object
	Permissions []*object
	Notes       []Issue
}

type conv struct {
	file   string
	src    []byte
	opts   Options
	errs   Errors
	notes  []Issue
	vars   map[string]any
	names  map[string]map[string]bool // kind -> names used
	srcMap map[string]string          // theaios source name -> ours ("" = left out)
	manual bool                       // budget.ranking: manual
}

// Kinds, for Issue.Kind and the output files.
const (
	kindRouter     = "ContextRouter"
	kindSource     = "ContextSource"
	kindRoute      = "ContextRoute"
	kindPermission = "AgentPermission"
)

// Theaios converts the configuration in data, read from file.
func Theaios(file string, data []byte, opts Options) (*Result, error) {
	c := &conv{file: file, src: data, opts: opts, names: map[string]map[string]bool{}, srcMap: map[string]string{}}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, c.yamlErrors(err)
	}
	res := &Result{File: file}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, Errors{{Location: problem.Location{File: file}, Message: "the file is empty"}}
	}
	root := doc.Content[0]
	top := c.fields(root, "", "version", "metadata", "variables", "sources", "routes", "permissions", "budget", "cache", "embedding")
	if top == nil {
		return nil, c.errs
	}
	c.convert(root, top, res)
	if len(c.errs) > 0 {
		slices.SortStableFunc(c.errs, func(a, b Issue) int { return a.Line - b.Line })
		return nil, c.errs
	}
	c.selfCheck(res)
	slices.SortStableFunc(c.notes, func(a, b Issue) int { return a.Line - b.Line })
	res.Notes = c.notes
	return res, nil
}

// selfCheck runs the checks of validate (every API rule and reference, CEL
// included; no source is read) on the output, so that what theaios accepts
// and this API refuses is a note rather than a surprise. Fields that hold a
// ${NAME} reference are checked only once it is expanded, at load.
func (c *conv) selfCheck(res *Result) {
	const name = "converted.yaml"
	set, err := manifest.Parse(name, res.Stream())
	var problems problem.List
	if err != nil && !errors.As(err, &problems) {
		problems = problem.List{{Message: err.Error()}}
	}
	if set != nil {
		problems = append(problems, set.Check()...)
	}
	objs := map[string]*object{res.Router.Kind + "/" + res.Router.Name: res.Router}
	for _, l := range [][]*object{res.Sources, res.Routes, res.Permissions} {
		for _, o := range l {
			objs[o.Kind+"/"+o.Name] = o
		}
	}
	for _, p := range problems {
		if o := objs[p.Kind+"/"+p.Name]; o != nil && p.Field != "" && strings.Contains(fmt.Sprint(o.body.get(p.Field)), "${") {
			continue
		}
		p.Location = problem.Location{}
		sev := "validate refuses the output"
		if p.IsWarning() {
			sev = "validate warns"
		}
		c.notes = append(c.notes, Issue{Location: problem.Location{File: c.file}, Kind: p.Kind, Message: sev + ": " + p.Error()})
	}
}

func (c *conv) yamlErrors(err error) Errors {
	var out Errors
	for _, e := range located.YAMLErrors(err, c.src, 0) {
		out = append(out, Issue{Location: problem.Location{File: c.file, Line: e.Line}, Message: "invalid YAML: " + e.Message})
	}
	return out
}

func (c *conv) errorf(n *yamlv3.Node, key, format string, args ...any) {
	c.errs = append(c.errs, Issue{Location: problem.Location{File: c.file, Line: line(n)}, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (c *conv) note(n *yamlv3.Node, key, kind, format string, args ...any) {
	c.notes = append(c.notes, Issue{Location: problem.Location{File: c.file, Line: line(n)}, Key: key, Kind: kind, Message: fmt.Sprintf(format, args...)})
}

func line(n *yamlv3.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// entry is a key of a mapping with its value.
type entry struct{ key, val *yamlv3.Node }

// fields reads a mapping, reporting keys not in known (with a suggestion)
// and duplicates. It returns nil if n is not a mapping; a null is empty.
func (c *conv) fields(n *yamlv3.Node, path string, known ...string) map[string]entry {
	n = deref(n)
	out := map[string]entry{}
	if n == nil || n.Tag == "!!null" {
		return out
	}
	if n.Kind != yamlv3.MappingNode {
		c.errorf(n, strings.TrimPrefix(path, "."), "must be a mapping, not %s", describe(n))
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		key := joinKey(path, name)
		if known != nil && !slices.Contains(known, name) {
			msg := "unknown key"
			if s := located.Closest(name, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			c.errorf(k, key, "%s", msg)
			continue
		}
		if _, dup := out[name]; dup {
			c.errorf(k, key, "duplicate key")
			continue
		}
		out[name] = entry{k, v}
	}
	return out
}

// keys returns the keys of a mapping in file order.
func keys(n *yamlv3.Node) []*yamlv3.Node {
	n = deref(n)
	var out []*yamlv3.Node
	if n != nil && n.Kind == yamlv3.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, n.Content[i])
		}
	}
	return out
}

func deref(n *yamlv3.Node) *yamlv3.Node {
	for n != nil && n.Kind == yamlv3.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yamlv3.DocumentNode && len(n.Content) > 0 {
		return deref(n.Content[0])
	}
	return n
}

func joinKey(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func describe(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.MappingNode:
		return "a mapping"
	case yamlv3.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	case "!!null":
		return "null"
	}
	return n.Value
}

// str reads a string; numbers are taken as written (version: 1.0).
func (c *conv) str(e entry, key string) (string, bool) {
	if e.val == nil {
		return "", false
	}
	n := deref(e.val)
	if n.Kind != yamlv3.ScalarNode || n.Tag == "!!null" || n.Tag == "!!bool" {
		if n.Tag == "!!null" {
			return "", false
		}
		c.errorf(n, key, "must be a string, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (c *conv) integer(e entry, key string) (int64, bool) {
	if e.val == nil {
		return 0, false
	}
	n := deref(e.val)
	if n.Tag == "!!null" {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yamlv3.ScalarNode || n.Tag != "!!int" || err != nil {
		c.errorf(n, key, "must be an integer, not %s", describe(n))
		return 0, false
	}
	return v, true
}

func (c *conv) boolean(e entry, key string) (bool, bool) {
	if e.val == nil {
		return false, false
	}
	n := deref(e.val)
	if n.Tag == "!!null" {
		return false, false
	}
	if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" {
		c.errorf(n, key, "must be true or false, not %s", describe(n))
		return false, false
	}
	var b bool
	_ = n.Decode(&b)
	return b, true
}

func (c *conv) strings(e entry, key string) ([]string, bool) {
	if e.val == nil {
		return nil, false
	}
	n := deref(e.val)
	if n.Tag == "!!null" {
		return nil, false
	}
	if n.Kind != yamlv3.SequenceNode {
		c.errorf(n, key, "must be a list of strings, not %s", describe(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	for i, it := range n.Content {
		if s, ok := c.str(entry{nil, it}, fmt.Sprintf("%s[%d]", key, i)); ok {
			out = append(out, s)
		}
	}
	return out, true
}

// enum reads a string that must be one of values (compared ignoring case).
func (c *conv) enum(e entry, key string, values ...string) (string, bool) {
	s, ok := c.str(e, key)
	if !ok {
		return "", false
	}
	for _, v := range values {
		if strings.EqualFold(s, v) {
			return v, true
		}
	}
	msg := fmt.Sprintf("unsupported value %q: supported values: %s", s, strings.Join(values, ", "))
	if sug := located.Closest(s, values); sug != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sug)
	}
	c.errorf(e.val, key, "%s", msg)
	return "", false
}

// name makes a DNS-1123 subdomain of a theaios name, unique per kind.
func (c *conv) name(kind, want, fallback string, n *yamlv3.Node, key string) string {
	s := dnsName(want)
	if s == "" {
		s = fallback
	}
	if c.names[kind] == nil {
		c.names[kind] = map[string]bool{}
	}
	base := s
	for i := 2; c.names[kind][s]; i++ {
		s = fmt.Sprintf("%s-%d", base, i)
	}
	c.names[kind][s] = true
	if s != want {
		c.note(n, key, kind, "%q is named %q here (names are lower-case DNS-1123 subdomains, unique per kind)", want, s)
	}
	return s
}

var dashes = regexp.MustCompile(`-{2,}`)

func dnsName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	out := strings.Trim(dashes.ReplaceAllString(b.String(), "-"), "-.")
	if len(out) > 253 {
		out = strings.Trim(out[:253], "-.")
	}
	return out
}

// envRef finds ${NAME} references.
var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// envTargets are the fields of our spec that the input keys (by source
// type) become, where manifest.EnvFieldPaths says whether ${NAME} is
// expanded at load. Header values are resolved per request (api.md §4.4).
var envTargets = map[string]map[string]string{
	"inline":    {"content": "spec.inline.content"},
	"directory": {"path": "spec.directory.path"},
	"git_repo":  {"url": "spec.gitRepo.url", "ref": "spec.gitRepo.ref"},
	"http_api":  {"url": "spec.httpAPI.url", "body_template": "spec.httpAPI.body"},
}

// literalEnv notes every ${NAME} of the input in a field where this API does
// not expand it (theaios expands it everywhere): it stays literal there.
func (c *conv) literalEnv(root *yamlv3.Node) {
	var walk func(n *yamlv3.Node, path []string)
	walk = func(n *yamlv3.Node, path []string) {
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				c.noteEnv(k, append(path, k.Value), k.Value, true, root)
				walk(n.Content[i+1], append(path, k.Value))
			}
		case yamlv3.SequenceNode:
			for i, e := range n.Content {
				walk(e, append(path, fmt.Sprintf("[%d]", i)))
			}
		case yamlv3.ScalarNode:
			c.noteEnv(n, path, n.Value, false, root)
		} // an alias's target is walked where it is defined: walking it again could take exponential time
	}
	walk(root, nil)
}

func (c *conv) noteEnv(n *yamlv3.Node, path []string, value string, isKey bool, root *yamlv3.Node) {
	m := envRef.FindString(value)
	if m == "" {
		return
	}
	if len(path) >= 3 && path[0] == "sources" {
		typ := ""
		if t := located.Lookup(root, "sources."+path[1]+".type"); t != nil {
			typ = t.Value
		}
		// A value of such a key, or a header's value (not its name).
		expanded := len(path) == 3 && slices.Contains(manifest.EnvFieldPaths(), envTargets[typ][path[2]]) ||
			typ == "http_api" && len(path) == 4 && path[2] == "headers"
		if !isKey && expanded {
			return
		}
	}
	key := strings.ReplaceAll(strings.Join(path, "."), ".[", "[")
	c.note(n, key, "", "%s is kept as written: this field is not expanded here (only inline text, directory path, git URL and ref, httpAPI URL and body at load, and header values per request)", m)
}

func (c *conv) convert(root *yamlv3.Node, top map[string]entry, res *Result) {
	if e, ok := top["version"]; ok {
		if v, ok := c.str(e, "version"); ok && v != "1.0" && v != "1" {
			c.note(e.val, "version", "", "version %q: converted as version 1.0", v)
		}
	}
	c.vars = map[string]any{}
	if e, ok := top["variables"]; ok {
		if n := deref(e.val); n.Tag != "!!null" && n.Kind != yamlv3.MappingNode {
			c.errorf(n, "variables", "must be a mapping, not %s", describe(n))
		} else if n.Kind == yamlv3.MappingNode {
			if err := n.Decode(&c.vars); err != nil {
				c.errorf(n, "variables", "%v", err)
			}
		}
	}
	c.literalEnv(root)
	res.Router = c.router(top)
	c.sources(top["sources"], res)
	c.routes(top["routes"], res)
	c.permissions(top["permissions"], res)
	if c.manual {
		manualPriorities(res)
	}
}

// pathIn joins a theaios path under the folder of the input file and makes
// it relative to the output folder.
func (c *conv) directoryPath(p string) string {
	if p == "" || filepath.IsAbs(p) || strings.Contains(p, "${") || c.opts.OutputDir == "" {
		return p
	}
	abs, err := filepath.Abs(filepath.Join(filepath.Dir(c.file), p))
	if err != nil {
		return p
	}
	out, err := filepath.Abs(c.opts.OutputDir)
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(out, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(rel)
}

// checkCondition compiles a translated condition as the engine does.
func checkCondition(cel string) error {
	_, err := engine.CompileCondition(cel)
	return err
}

// condition translates a when: value; errors are located in the scalar.
func (c *conv) condition(n *yamlv3.Node, key, src string) (string, bool) {
	tree, err := parseCondition(src)
	if err == nil {
		tr := &translator{vars: c.vars, words: c.opts.Words}
		var e celExpr
		if e, err = tr.translate(tree); err == nil {
			if cerr := checkCondition(e.s); cerr != nil {
				err = &untranslatable{"the translation " + e.s + " does not compile: " + problem.OneLine(cerr.Error())}
			} else {
				for _, msg := range uniq(tr.notes) {
					c.note(n, key, kindRoute, "%s", msg)
				}
				return e.s, true
			}
		}
	}
	var ce *condError
	if errors.As(err, &ce) {
		l, col, ok := located.ScalarPosition(c.src, 0, n, 1, ce.pos+1)
		if !ok {
			l, col = n.Line, 0
		}
		c.errs = append(c.errs, Issue{Location: problem.Location{File: c.file, Line: l, Column: col}, Key: key, Message: ce.msg})
		return "", false
	}
	c.note(n, key, kindRoute, "cannot be translated, so the route is left out: %v", err)
	return "", false
}
