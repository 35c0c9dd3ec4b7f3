package cli

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/located"
)

// setAnnotation returns the YAML manifest file data with the annotation key
// of the ContextSource name set to value (a block scalar when it has
// several lines). Only that object's metadata is written again, at its
// place and indentation; every other byte of the file stays as it was. When
// the metadata block cannot be cut out of the text exactly (a comment
// closing it, odd indentation), the object's document is written again
// whole, comments kept. Either way the result is decoded again and must
// hold the same objects with only that annotation changed.
func setAnnotation(data []byte, name, key, value string) ([]byte, error) {
	crlf := bytes.Contains(data, []byte("\r\n"))
	text := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	for _, doc := range located.SplitYAML(text) {
		var root yamlv3.Node
		if yamlv3.Unmarshal(doc.Text, &root) != nil || root.Kind != yamlv3.DocumentNode || len(root.Content) == 0 {
			continue
		}
		obj := root.Content[0]
		if scalarAt(obj, "kind") == "List" && holdsSource(obj, name) {
			return nil, fmt.Errorf("ContextSource %q is an item of a List: set the annotation by hand, or use --print", name)
		}
		if scalarAt(obj, "kind") != v1alpha1.KindContextSource || scalarAt(valueAt(obj, "metadata"), "name") != name {
			continue
		}
		edited, err := editDocument(doc.Text, &root, key, value)
		if err != nil {
			return nil, fmt.Errorf("ContextSource %q: %w", name, err)
		}
		// doc.Text is a slice of text: its offset is where their capacities differ.
		start := cap(text) - cap(doc.Text)
		out := slices3(text[:start], edited, text[start+len(doc.Text):])
		if crlf {
			out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
		}
		return out, nil
	}
	return nil, fmt.Errorf("ContextSource %q: not found in the file as a YAML document", name)
}

func slices3(a, b, c []byte) []byte {
	out := make([]byte, 0, len(a)+len(b)+len(c))
	return append(append(append(out, a...), b...), c...)
}

// editDocument sets the annotation in one document: its metadata block cut
// and written again, or else the whole document.
func editDocument(text []byte, root *yamlv3.Node, key, value string) ([]byte, error) {
	want, err := decodeYAML(text)
	if err != nil {
		return nil, err
	}
	setIn(want, key, value)
	obj := root.Content[0]
	meta := valueAt(obj, "metadata")
	if meta == nil || meta.Kind != yamlv3.MappingNode {
		return nil, errors.New("metadata is not a mapping")
	}
	// Comments after the block's last line stay in the text after it when
	// the block is cut out: the nodes must not write them a second time.
	restore := clearFootComments(meta)
	setAnnotationNode(meta, key, value)
	if out, ok := spliceMetadata(text, obj); ok && sameYAML(out, want) {
		return out, nil
	}
	restore()
	out, err := encodeYAML(root, 0)
	if err != nil {
		return nil, err
	}
	if !sameYAML(out, want) {
		return nil, errors.New("the document cannot be written again with the annotation (please set it by hand)")
	}
	return out, nil
}

// spliceMetadata replaces the text of the metadata entry (its key line and
// the lines indented deeper that follow, up to the last one that is not a
// comment) with the edited node, written at the key's indentation.
func spliceMetadata(text []byte, obj *yamlv3.Node) ([]byte, bool) {
	var k, v *yamlv3.Node
	for i := 0; i+1 < len(obj.Content); i += 2 {
		if obj.Content[i].Value == "metadata" {
			k, v = obj.Content[i], obj.Content[i+1]
		}
	}
	if k == nil || obj.Style&yamlv3.FlowStyle != 0 {
		return nil, false
	}
	lines := strings.SplitAfter(string(text), "\n")
	first, indent := k.Line-1, k.Column-1
	if first >= len(lines) || len(lines[first]) < indent || strings.TrimSpace(lines[first][:indent]) != "" ||
		!strings.HasPrefix(lines[first][indent:], "metadata") {
		return nil, false
	}
	last := first
	for i := first + 1; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		switch {
		case strings.TrimSpace(trimmed) == "":
			continue
		case len(lines[i])-len(trimmed) <= indent:
			i = len(lines)
		case !strings.HasPrefix(trimmed, "#"):
			last = i
		}
	}
	entry := &yamlv3.Node{Kind: yamlv3.MappingNode, Content: []*yamlv3.Node{
		{Kind: yamlv3.ScalarNode, Value: k.Value, LineComment: k.LineComment}, v,
	}}
	rendered, err := encodeYAML(entry, indent)
	if err != nil {
		return nil, false
	}
	return []byte(strings.Join(lines[:first], "") + string(rendered) + strings.Join(lines[last+1:], "")), true
}

// clearFootComments drops the foot comments of n and of the last entry
// below it, all the way down (those of the block's last lines), and
// returns a function that puts them back.
func clearFootComments(n *yamlv3.Node) (restore func()) {
	var nodes []*yamlv3.Node
	var comments []string
	clear := func(n *yamlv3.Node) {
		nodes, comments = append(nodes, n), append(comments, n.FootComment)
		n.FootComment = ""
	}
	for n != nil {
		clear(n)
		if len(n.Content) == 0 {
			break
		}
		if n.Kind == yamlv3.MappingNode && len(n.Content) >= 2 {
			clear(n.Content[len(n.Content)-2])
		}
		n = n.Content[len(n.Content)-1]
	}
	return func() {
		for i, n := range nodes {
			n.FootComment = comments[i]
		}
	}
}

// setAnnotationNode sets metadata.annotations[key] in the node tree; the
// metadata and annotations become block mappings (a value of several lines
// is a block scalar).
func setAnnotationNode(meta *yamlv3.Node, key, value string) {
	meta.Style &^= yamlv3.FlowStyle
	ann := valueAt(meta, "annotations")
	if ann == nil || ann.Kind != yamlv3.MappingNode {
		ann = &yamlv3.Node{Kind: yamlv3.MappingNode, Tag: "!!map"}
		meta.Content = append(meta.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: "annotations"}, ann)
	}
	ann.Style &^= yamlv3.FlowStyle
	scalar := &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: value}
	if strings.Contains(value, "\n") {
		scalar.Style = yamlv3.LiteralStyle
	}
	if v := valueAt(ann, key); v != nil {
		*v = *scalar
		return
	}
	ann.Content = append(ann.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: key}, scalar)
}

// encodeYAML writes a node with two-space indentation, every line indented
// by indent more spaces.
func encodeYAML(n *yamlv3.Node, indent int) ([]byte, error) {
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if indent == 0 {
		return buf.Bytes(), nil
	}
	pad := strings.Repeat(" ", indent)
	var out strings.Builder
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if strings.TrimSpace(l) != "" {
			out.WriteString(pad)
		}
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

func decodeYAML(text []byte) (any, error) {
	var v any
	if err := yamlv3.Unmarshal(text, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// setIn sets metadata.annotations[key] in a decoded object.
func setIn(obj any, key, value string) {
	m, _ := obj.(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		return
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[key] = value
}

// sameYAML reports whether text decodes to want.
func sameYAML(text []byte, want any) bool {
	got, err := decodeYAML(text)
	return err == nil && reflect.DeepEqual(got, want)
}

// valueAt is the value of key in a mapping node (nil when absent).
func valueAt(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalarAt(n *yamlv3.Node, key string) string {
	if v := valueAt(n, key); v != nil && v.Kind == yamlv3.ScalarNode {
		return v.Value
	}
	return ""
}

// holdsSource reports whether a List's items hold the ContextSource name.
func holdsSource(list *yamlv3.Node, name string) bool {
	items := valueAt(list, "items")
	if items == nil {
		return false
	}
	for _, it := range items.Content {
		if scalarAt(it, "kind") == v1alpha1.KindContextSource && scalarAt(valueAt(it, "metadata"), "name") == name {
			return true
		}
	}
	return false
}
