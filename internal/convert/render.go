package convert

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/internal/textutil"
)

// Files are the output files of -o DIR, by kind, in this order.
var Files = []struct{ Name, Kind string }{
	{"router.yaml", kindRouter},
	{"sources.yaml", kindSource},
	{"routes.yaml", kindRoute},
	{"permissions.yaml", kindPermission},
}

func (r *Result) objects(kind string) []*object {
	switch kind {
	case kindRouter:
		return []*object{r.Router}
	case kindSource:
		return r.Sources
	case kindRoute:
		return r.Routes
	}
	return r.Permissions
}

// Stream is every object in one multi-document YAML stream, with a header
// naming the input and listing every note.
func (r *Result) Stream() []byte {
	var objs []*object
	for _, f := range Files {
		objs = append(objs, r.objects(f.Kind)...)
	}
	return r.render(objs, r.Notes)
}

// FileFor is the content of one file of -o DIR (nil when the kind has no
// object); its header lists the notes about that kind (the router's file
// also those about the whole configuration).
func (r *Result) FileFor(kind string) []byte {
	objs := r.objects(kind)
	if len(objs) == 0 {
		return nil
	}
	var notes []Issue
	for _, n := range r.Notes {
		if n.Kind == kind || kind == kindRouter && n.Kind == "" {
			notes = append(notes, n)
		}
	}
	return r.render(objs, notes)
}

func (r *Result) render(objs []*object, notes []Issue) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Converted by `contextrouter convert --from theaios` from %s.\n", textutil.OneLine(r.File))
	if len(notes) > 0 {
		b.WriteString("# Notes (what could not be translated as is):\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "#   %s\n", textutil.OneLine(n.String()))
		}
	}
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		var doc bytes.Buffer
		enc := yamlv3.NewEncoder(&doc)
		enc.SetIndent(2)
		if err := enc.Encode(toNode(o.body)); err != nil {
			panic(fmt.Sprintf("convert: encoding %s/%s: %v", o.Kind, o.Name, err)) // the tree holds plain values only
		}
		_ = enc.Close()
		b.Write(doc.Bytes())
	}
	return b.Bytes()
}

var yaml11Bool = regexp.MustCompile(`^(?i:y|yes|n|no|on|off|true|false)$`)

func toNode(v any) *yamlv3.Node {
	switch v := v.(type) {
	case omap:
		n := &yamlv3.Node{Kind: yamlv3.MappingNode}
		for _, e := range v {
			n.Content = append(n.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: e.k}, toNode(e.v))
		}
		return n
	case []any:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode}
		for _, e := range v {
			n.Content = append(n.Content, toNode(e))
		}
		return n
	case []string:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode, Style: yamlv3.FlowStyle}
		for _, e := range v {
			n.Content = append(n.Content, toNode(e))
		}
		return n
	case string:
		n := &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: v}
		switch {
		case strings.Contains(v, "\n") && !strings.ContainsAny(v, "\r\t") && strings.TrimRight(v, " ") == v:
			n.Style = yamlv3.LiteralStyle
		case yaml11Bool.MatchString(v):
			// The manifest loader reads YAML 1.1, where an unquoted y, on or no is a boolean.
			n.Style = yamlv3.DoubleQuotedStyle
		}
		return n
	}
	var n yamlv3.Node
	if err := n.Encode(v); err != nil {
		panic(fmt.Sprintf("convert: encoding %T: %v", v, err))
	}
	return &n
}
