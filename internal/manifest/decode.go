package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// parser accumulates objects and problems over one or more files.
type parser struct {
	set      *Set
	problems []Problem
	// nsOrigin is where the set's namespace was first given.
	nsOrigin string
}

func newParser() *parser { return &parser{set: &Set{}} }

func (p *parser) problem(pr Problem) {
	if pr.File != "" && !slices.Contains(p.set.files, pr.File) {
		// A file that could not be read still has its place in the order.
		p.set.files = append(p.set.files, pr.File)
	}
	if pr.File != "" {
		p.set.fill(pr.File) // its problem says what is wrong, not "empty"
	}
	p.problems = append(p.problems, pr)
}

// finish gives objects without a namespace the set's namespace and returns
// the set with every problem found (sorted by file, then line).
func (p *parser) finish() (*Set, error) {
	for _, ns := range p.set.namespaces() {
		if *ns == "" {
			*ns = p.set.Namespace
		}
	}
	problems := problem.List(p.problems)
	problems.Sort(p.set.fileRank)
	return p.set, problems.Err()
}

// document is one YAML document or JSON value of a file.
type document struct {
	file string
	// index is the 1-based position among the file's non-empty documents.
	index int
	// line is the document's first content line; lineOffset is added to
	// the 1-based line numbers of text to make them absolute.
	line, lineOffset int
	text             []byte
	isJSON           bool
}

func (d *document) origin(line int) Origin {
	if line <= 0 {
		line = d.line
	}
	return Origin{File: d.file, Line: line, Doc: d.index}
}

func (p *parser) parseFile(name string, data []byte) {
	p.set.files = append(p.set.files, name)
	// YAML reads a lone CR as a line break too (old Mac files); the document
	// split and every line number count LFs.
	data = []byte(sources.NormalizeNewlines(string(data)))
	if strings.EqualFold(filepath.Ext(name), ".json") {
		p.parseJSONStream(name, data)
		return
	}
	index := 0
	for _, c := range located.SplitYAML(data) {
		first := located.FirstContentLine(c.Text)
		if first == 0 {
			continue // blank or comments only
		}
		index++
		p.document(&document{file: name, index: index, line: c.FirstLine + first - 1,
			lineOffset: c.FirstLine - 1, text: c.Text})
	}
}

// parseJSONStream reads a JSON file: one value, or several one after another.
func (p *parser) parseJSONStream(name string, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for index := 1; ; index++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return
		}
		if err != nil {
			p.set.fill(name)
			line, col := located.LineCol(data, located.JSONErrorOffset(err, dec))
			p.problem(Problem{Location: problem.Location{File: name, Line: line},
				Message: fmt.Sprintf("invalid JSON at column %d: %s", col, strings.TrimPrefix(err.Error(), "json: "))})
			return
		}
		// InputOffset is the end of raw; whitespace before it was skipped.
		startOff := int(dec.InputOffset()) - len(raw)
		line, _ := located.LineCol(data, startOff)
		p.document(&document{file: name, index: index, line: line, lineOffset: line - 1, text: raw, isJSON: true})
	}
}

// yamlProblems turns a go-yaml error into problems at absolute lines.
func (d *document) yamlProblems(err error, kind, name string) []Problem {
	var out []Problem
	for _, e := range located.YAMLErrors(err, d.text, d.lineOffset) {
		out = append(out, Problem{Location: loc(d.origin(e.Line)), Kind: kind, Name: name, Message: "invalid YAML: " + e.Message})
	}
	return out
}

// readHeader reads apiVersion, kind, metadata.name and metadata.namespace,
// explaining the first that is not a string.
func readHeader(j []byte) (h header, field, msg string) {
	var raw struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
		Metadata   any `json:"metadata"`
	}
	if err := json.Unmarshal(j, &raw); err != nil {
		return h, "", "not an object: " + err.Error()
	}
	str := func(path string, v any, dst *string) bool {
		switch v := v.(type) {
		case nil:
		case string:
			*dst = v
		default:
			field, msg = path, "must be a string, not "+jsonKindOf(v)
			if _, ok := v.(bool); ok {
				msg += located.YAMLBoolHint
			}
			return false
		}
		return true
	}
	if !str("apiVersion", raw.APIVersion, &h.APIVersion) || !str("kind", raw.Kind, &h.Kind) {
		return h, field, msg
	}
	switch m := raw.Metadata.(type) {
	case nil:
	case map[string]any:
		if !str("metadata.name", m["name"], &h.Metadata.Name) || !str("metadata.namespace", m["namespace"], &h.Metadata.Namespace) {
			return h, field, msg
		}
	default:
		return h, "metadata", "must be an object, not " + jsonKindOf(m)
	}
	return h, "", ""
}

func jsonKindOf(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case string:
		return "string"
	}
	return "null"
}

// header is what is read before the kind is known.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

func (p *parser) document(d *document) {
	j := d.text
	if !d.isJSON {
		var err error
		if j, err = yaml.YAMLToJSON(d.text); err != nil {
			p.set.fill(d.file)
			for _, pr := range d.yamlProblems(err, "", "") {
				p.problem(pr)
			}
			return
		}
		if string(bytes.TrimSpace(j)) == "null" {
			return // "~" or "null" only
		}
	}
	p.set.fill(d.file)
	root := located.ParseNode(d.text, d.lineOffset)
	if root == nil && !d.isJSON {
		// Positions are unavailable; still refuse duplicate keys.
		if _, err := yaml.YAMLToJSONStrict(d.text); err != nil {
			var h header
			_ = json.Unmarshal(j, &h)
			for _, pr := range d.yamlProblems(err, h.Kind, h.Metadata.Name) {
				p.problem(pr)
			}
		}
	}
	p.object(d, j, root, d.line, "")
}

// listItemKinds maps typed list kinds to their item kind.
var listItemKinds = map[string]string{
	v1alpha1.KindContextRouter + "List":     v1alpha1.KindContextRouter,
	v1alpha1.KindContextRoute + "List":      v1alpha1.KindContextRoute,
	v1alpha1.KindContextSource + "List":     v1alpha1.KindContextSource,
	v1alpha1.KindAgentPermission + "List":   v1alpha1.KindAgentPermission,
	v1alpha1.KindContextClassifier + "List": v1alpha1.KindContextClassifier,
}

// object decodes one object (or a list of them) from JSON. node locates its
// fields; line is where it starts; itemKind is the kind of a typed list's
// items, which may leave apiVersion and kind out.
func (p *parser) object(d *document, j []byte, node *yamlv3.Node, line int, itemKind string) {
	o := d.origin(line)
	if t := bytes.TrimSpace(j); len(t) == 0 || t[0] != '{' {
		p.problem(Problem{Location: loc(o), Message: fmt.Sprintf(
			"a manifest must be an object with apiVersion and kind, not %s", located.JSONValueKind(t))})
		return
	}
	h, field, msg := readHeader(j)
	if msg != "" {
		p.problem(Problem{Location: loc(d.origin(located.LineOf(node, field, false))), Kind: h.Kind, Name: h.Metadata.Name, Field: field, Message: msg})
		p.set.markBroken(h.Kind, h.Metadata.Name)
		return
	}
	if itemKind != "" && h.APIVersion == "" && h.Kind == "" {
		h.APIVersion, h.Kind = v1alpha1.GroupVersion.String(), itemKind
	}
	kind, name := h.Kind, h.Metadata.Name
	pr := func(field, msg string) Problem {
		return Problem{Location: loc(d.origin(located.LineOf(node, field, false))), Kind: kind, Name: name, Field: field, Message: msg}
	}

	// Lists: kubectl's "v1 List" and the typed lists of this API.
	if (h.Kind == "List" && (h.APIVersion == "v1" || h.APIVersion == "")) ||
		(h.APIVersion == v1alpha1.GroupVersion.String() && listItemKinds[h.Kind] != "") {
		p.list(d, j, node, o, h.Kind, listItemKinds[h.Kind])
		return
	}

	if msg, field := checkTypeMeta(h.APIVersion, h.Kind); msg != "" {
		p.problem(pr(field, msg))
		p.set.markBroken(kind, name)
		return
	}

	if !d.isJSON && node != nil {
		for _, dup := range located.DuplicateKeys(node, "") {
			p.problem(Problem{Location: loc(d.origin(dup.Line)), Kind: kind, Name: name, Field: dup.Path, Message: "duplicate field"})
		}
	}

	var obj interface {
		Default()
		GetNamespace() string
		GetObjectKind() schema.ObjectKind
	}
	switch kind {
	case v1alpha1.KindContextRouter:
		obj = &v1alpha1.ContextRouter{}
	case v1alpha1.KindContextRoute:
		obj = &v1alpha1.ContextRoute{}
	case v1alpha1.KindContextSource:
		obj = &v1alpha1.ContextSource{}
	case v1alpha1.KindAgentPermission:
		obj = &v1alpha1.AgentPermission{}
	case v1alpha1.KindContextClassifier:
		obj = &v1alpha1.ContextClassifier{}
	}
	if !p.decode(d, j, node, obj, pr) {
		p.set.markBroken(kind, name)
		return
	}
	// Items of typed lists may leave apiVersion and kind out.
	obj.GetObjectKind().SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	// Defaulting cannot tell an explicit 0 from a missing field; the API
	// server would refuse these zeros (minimum 1), so the loader does too.
	for _, f := range explicitZeros(kind, j) {
		p.problem(pr(f, "must be at least 1 (leave the field out for the default)"))
	}
	obj.Default()
	p.namespace(obj.GetNamespace(), pr, describe(kind, name), o)

	s := p.set
	switch v := obj.(type) {
	case *v1alpha1.ContextRouter:
		s.Routers = append(s.Routers, *v)
	case *v1alpha1.ContextRoute:
		s.Routes = append(s.Routes, *v)
	case *v1alpha1.ContextSource:
		s.Sources = append(s.Sources, *v)
	case *v1alpha1.AgentPermission:
		s.Permissions = append(s.Permissions, *v)
	case *v1alpha1.ContextClassifier:
		s.Classifiers = append(s.Classifiers, *v)
	}
	s.place(kind, name, placement{origin: o, node: node, src: d.text, lineOffset: d.lineOffset})
}

// positiveFields are integer fields with a default and a minimum of 1.
var positiveFields = map[string][]string{
	v1alpha1.KindContextRouter: {"spec.budget.maxTokens"},
	v1alpha1.KindContextSource: {"spec.chunking.maxChunkTokens", "spec.httpAPI.maxResults"},
}

// explicitZeros returns the positiveFields of kind that the document sets to 0.
func explicitZeros(kind string, j []byte) []string {
	var doc map[string]any
	if len(positiveFields[kind]) == 0 || json.Unmarshal(j, &doc) != nil {
		return nil
	}
	var out []string
	for _, path := range positiveFields[kind] {
		var v any = doc
		for _, seg := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[seg]
		}
		if n, ok := v.(float64); ok && n == 0 {
			out = append(out, path)
		}
	}
	return out
}

// checkTypeMeta explains an apiVersion/kind pair this loader does not read.
func checkTypeMeta(apiVersion, kind string) (msg, field string) {
	want := v1alpha1.GroupVersion.String()
	known := false
	for _, k := range kinds {
		known = known || k == kind
	}
	switch {
	case kind == "":
		return fmt.Sprintf("missing: every manifest needs apiVersion: %s and one of the kinds %s", want, strings.Join(kinds, ", ")), "kind"
	case apiVersion == "":
		return "missing: want " + want, "apiVersion"
	case known && apiVersion != want:
		return fmt.Sprintf("unsupported apiVersion %q for %s: want %s", apiVersion, kind, want), "apiVersion"
	case !known && apiVersion == want:
		msg := fmt.Sprintf("unknown kind %q: want one of %s", kind, strings.Join(kinds, ", "))
		if s := located.Closest(kind, kinds); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		return msg, "kind"
	case !known:
		return fmt.Sprintf("%s %s is not a %s kind: manifests hold %s only", apiVersion, kind, want, strings.Join(kinds, ", ")), "kind"
	}
	return "", ""
}

// list decodes the items of a List.
func (p *parser) list(d *document, j []byte, node *yamlv3.Node, o Origin, kind, itemKind string) {
	var l struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ListMeta   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	strict, err := sigsjson.UnmarshalStrict(j, &l)
	if err != nil {
		p.problem(Problem{Location: loc(o), Kind: kind, Field: "items", Message: "must be a list of objects"})
		return
	}
	for _, e := range strict {
		p.problem(Problem{Location: loc(o), Kind: kind, Field: located.StrictPath(e), Message: located.StrictKind(e)})
	}
	items := located.Lookup(node, "items")
	for i, item := range l.Items {
		var itemNode *yamlv3.Node
		line := o.Line
		if items != nil && items.Kind == yamlv3.SequenceNode && i < len(items.Content) {
			itemNode = items.Content[i]
			line = itemNode.Line
		}
		p.object(d, item, itemNode, line, itemKind)
	}
}

// namespace records an object's namespace; all objects must share one.
func (p *parser) namespace(ns string, pr func(field, msg string) Problem, what string, o Origin) {
	switch {
	case ns == "":
	case p.set.Namespace == "":
		p.set.Namespace, p.nsOrigin = ns, what+" at "+o.String()
	case ns != p.set.Namespace:
		p.problem(pr("metadata.namespace", fmt.Sprintf(
			"namespace %q differs from %q of %s: standalone manifests share one namespace",
			ns, p.set.Namespace, p.nsOrigin)))
	}
}

// decode strictly decodes j into obj, reporting every unknown or duplicate
// field, or the first type error, at the field's line.
func (p *parser) decode(d *document, j []byte, node *yamlv3.Node, obj any, pr func(field, msg string) Problem) bool {
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		field, msg := located.ExplainDecodeError(err, j, reflect.TypeOf(obj).Elem())
		p.problem(pr(field, msg))
		return false
	}
	for _, e := range strict {
		path, what := located.StrictPath(e), located.StrictKind(e)
		if what == "unknown field" {
			if s := located.SuggestField(reflect.TypeOf(obj).Elem(), path); s != "" {
				what += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		pb := pr(path, what)
		// A duplicate's own line is its second occurrence.
		pb.Location = loc(d.origin(located.LineOf(node, path, what == "duplicate field")))
		if line := located.BoolKeyLine(node, path); line > 0 {
			pb.Location = loc(d.origin(line))
			pb.Message += located.YAMLBoolHint // the key is y, yes, on, n, no or off
		}
		p.problem(pb)
	}
	return len(strict) == 0
}
