package located

import (
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// The YAML node tree of an object is kept to point problems at the line of
// the field they concern. Paths are the ones the JSON decoder and the
// validation package produce: "spec.sources[1].name",
// "spec.deployment.resources.limits[memory]", "spec.variables.region".

// pathSeg is one step of a field path: a key, or a list index (index >= 0).
type pathSeg struct {
	key   string
	index int
}

// splitPath parses a field path; a bracketed number is an index, any other
// bracketed text a map key.
func splitPath(path string) []pathSeg {
	var segs []pathSeg
	for path != "" {
		switch {
		case path[0] == '.':
			path = path[1:]
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return append(segs, pathSeg{key: path[1:], index: -1})
			}
			inner := path[1:end]
			if i, err := strconv.Atoi(inner); err == nil && i >= 0 {
				segs = append(segs, pathSeg{key: inner, index: i})
			} else {
				segs = append(segs, pathSeg{key: inner, index: -1})
			}
			path = path[end+1:]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, pathSeg{key: path[:end], index: -1})
			path = path[end:]
		}
	}
	return segs
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// LineOf returns the line of the deepest node on path that exists (the key's
// line for a mapping entry), or 0 without a node. last picks the last of
// repeated keys for the final segment, where a duplicate is.
func LineOf(n *yamlv3.Node, path string, last bool) int {
	if n == nil {
		return 0
	}
	line := n.Line
	segs := splitPath(path)
	for i, seg := range segs {
		n = deref(n)
		switch n.Kind {
		case yamlv3.MappingNode:
			k, v := mappingEntry(n, seg.key, last && i == len(segs)-1)
			if k == nil {
				return line
			}
			line, n = k.Line, v
		case yamlv3.SequenceNode:
			if seg.index < 0 || seg.index >= len(n.Content) {
				return line
			}
			n = n.Content[seg.index]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

// BoolKeyLine finds a key that YAML 1.1 (the JSON conversion) read as a
// boolean: for a path ending in "true" or "false" that the node tree does
// not have, the line of an unquoted key y, yes, on (n, no, off) in the
// parent mapping, or 0.
func BoolKeyLine(n *yamlv3.Node, path string) int {
	i := strings.LastIndexByte(path, '.')
	parentPath, last := "", path
	if i >= 0 {
		parentPath, last = path[:i], path[i+1:]
	}
	if last != "true" && last != "false" {
		return 0
	}
	parent := Lookup(n, parentPath)
	if parent == nil || parent.Kind != yamlv3.MappingNode {
		return 0
	}
	for j := 0; j+1 < len(parent.Content); j += 2 {
		k := parent.Content[j]
		if k.Kind != yamlv3.ScalarNode || k.Style != 0 {
			continue
		}
		switch strings.ToLower(k.Value) {
		case "y", "yes", "on":
			if last == "true" {
				return k.Line
			}
		case "n", "no", "off":
			if last == "false" {
				return k.Line
			}
		}
	}
	return 0
}

// Lookup returns the node at path, or nil.
func Lookup(n *yamlv3.Node, path string) *yamlv3.Node {
	for _, seg := range splitPath(path) {
		if n == nil {
			return nil
		}
		n = deref(n)
		switch n.Kind {
		case yamlv3.MappingNode:
			_, n = mappingEntry(n, seg.key, false)
		case yamlv3.SequenceNode:
			if seg.index < 0 || seg.index >= len(n.Content) {
				return nil
			}
			n = n.Content[seg.index]
		default:
			return nil
		}
	}
	if n == nil {
		return nil
	}
	return deref(n)
}

func deref(n *yamlv3.Node) *yamlv3.Node {
	for n.Kind == yamlv3.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// mappingEntry finds the first (or last) entry with a key.
func mappingEntry(n *yamlv3.Node, key string, last bool) (k, v *yamlv3.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if c := n.Content[i]; c.Kind == yamlv3.ScalarNode && c.Value == key {
			k, v = c, n.Content[i+1]
			if !last {
				return k, v
			}
		}
	}
	return k, v
}

// DupKey is a repeated mapping key.
type DupKey struct {
	Path string
	Line int
}

// DuplicateKeys finds repeated keys, which YAML forbids and the JSON
// conversion would silently drop. Aliases are not followed: their anchors are
// checked where they are defined.
func DuplicateKeys(n *yamlv3.Node, path string) []DupKey {
	var out []DupKey
	switch n.Kind {
	case yamlv3.MappingNode:
		seen := make(map[string]bool)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yamlv3.ScalarNode || isMergeKey(k) {
				continue
			}
			p := joinPath(path, k.Value)
			if seen[k.Value] {
				out = append(out, DupKey{Path: p, Line: k.Line})
			}
			seen[k.Value] = true
			out = append(out, DuplicateKeys(v, p)...)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			out = append(out, DuplicateKeys(c, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return out
}

func isMergeKey(k *yamlv3.Node) bool {
	return k.Value == "<<" && (k.Tag == "" || k.Tag == "!!merge" || k.Tag == "tag:yaml.org,2002:merge")
}
