package v1alpha1

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/internal/jsonenc"
)

// The canonical JSON of tool digests (api.md §10.9), written by hand: a
// digest of every tool is taken at every snapshot build, and decoding a
// schema into maps to encode it again costs ten times as much.

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }

// appendJSONStrings appends a list of strings; nil is [] (a digest does
// not tell an absent list from an empty one).
func appendJSONStrings(dst []byte, list []string) []byte {
	if list == nil {
		list = []string{}
	}
	return jsonenc.AppendStrings(dst, list)
}

// appendCanonicalJSON appends the canonical form of the JSON document raw:
// what decoding it (numbers kept as written) and encoding it again with
// encoding/json, HTML escaping off, gives. A document that does not parse
// (the catalog rules refuse it first) is appended as it is.
func appendCanonicalJSON(dst []byte, raw []byte) []byte {
	c := canonicalizers.Get().(*canonicalizer)
	defer canonicalizers.Put(c)
	c.data, c.pos, c.depth, c.bad = raw, 0, 0, false
	start := len(dst)
	out := c.value(dst)
	c.space()
	c.data = nil
	if c.bad || c.pos != len(raw) {
		return append(dst[:start], raw...)
	}
	return out
}

// canonicalizers keep their stacks between documents.
var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

type canonicalizer struct {
	data  []byte
	pos   int
	depth int
	bad   bool
	// members is a stack of the members of the objects being written;
	// scratch holds an object's bytes while they are sorted.
	members []member
	scratch []byte
}

// maxCanonicalDepth is encoding/json's nesting limit: a document nested
// deeper does not decode, so it is hashed as it is (and stack use stays
// bounded for documents no catalog rule has checked).
const maxCanonicalDepth = 10000

func (c *canonicalizer) space() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) fail(dst []byte) []byte {
	c.bad = true
	return dst
}

func (c *canonicalizer) value(dst []byte) []byte {
	c.space()
	if c.bad || c.pos >= len(c.data) {
		return c.fail(dst)
	}
	switch b := c.data[c.pos]; {
	case b == '{' || b == '[':
		if c.depth++; c.depth > maxCanonicalDepth {
			return c.fail(dst)
		}
		defer func() { c.depth-- }()
		if b == '{' {
			return c.object(dst)
		}
		return c.array(dst)
	case b == '"':
		dst, _ = c.string(dst)
		return dst
	case b == '-' || (b >= '0' && b <= '9'):
		end := c.pos
		for end < len(c.data) && bytes.IndexByte([]byte("+-.eE0123456789"), c.data[end]) >= 0 {
			end++
		}
		num := c.data[c.pos:end]
		if !json.Valid(num) {
			return c.fail(dst)
		}
		c.pos = end
		return append(dst, num...)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(c.data[c.pos:], []byte(lit)) {
			c.pos += len(lit)
			return append(dst, lit...)
		}
	}
	return c.fail(dst)
}

// string appends the canonical form of the string at pos and returns its
// decoded value when it differs from the bytes appended between the quotes
// (clean is then false).
func (c *canonicalizer) string(dst []byte) (out []byte, clean bool) {
	start := c.pos + 1
	clean = true
	i := start
	for ; i < len(c.data); i++ {
		b := c.data[i]
		if b == '"' {
			break
		}
		if b == '\\' || b < 0x20 {
			clean = false
			if b == '\\' {
				i++
			}
		}
	}
	if i >= len(c.data) {
		return c.fail(dst), false
	}
	raw := c.data[start:i]
	c.pos = i + 1
	if clean && utf8.Valid(raw) && !bytes.Contains(raw, []byte("\u2028")) && !bytes.Contains(raw, []byte("\u2029")) {
		dst = append(dst, '"')
		dst = append(dst, raw...)
		return append(dst, '"'), true
	}
	var s string
	if err := json.Unmarshal(c.data[start-1:i+1], &s); err != nil {
		return c.fail(dst), false
	}
	return appendJSONString(dst, s), false
}

func (c *canonicalizer) array(dst []byte) []byte {
	c.pos++
	dst = append(dst, '[')
	if c.closes(']') {
		return append(dst, ']')
	}
	for more := true; more && !c.bad; {
		dst = c.value(dst)
		dst, more = c.next(dst, ']')
	}
	return append(dst, ']')
}

// closes reports whether the container just opened ends at once (and
// consumes its end).
func (c *canonicalizer) closes(end byte) bool {
	c.space()
	if c.pos < len(c.data) && c.data[c.pos] == end {
		c.pos++
		return true
	}
	return false
}

// next reads what follows an element of a container: a comma (more
// follow; it is written) or the container's end (consumed, not written).
func (c *canonicalizer) next(dst []byte, end byte) ([]byte, bool) {
	c.space()
	switch {
	case c.pos >= len(c.data):
		return c.fail(dst), false
	case c.data[c.pos] == ',':
		c.pos++
		return append(dst, ','), true
	case c.data[c.pos] == end:
		c.pos++
		return dst, false
	}
	return c.fail(dst), false
}

// member is one "key":value of an object being written: its bytes in the
// output, from start, the key's closing quote at keyEnd-1; and the key
// decoded when it differs from the bytes between the quotes.
type member struct {
	start, keyEnd, end int
	clean              bool
	key                string
}

// keyOf is the decoded key of m, whose bytes are in buf from base on.
func keyOf(m member, buf []byte, base int) []byte {
	if m.clean {
		return buf[m.start-base+1 : m.keyEnd-base-1]
	}
	return []byte(m.key)
}

func (c *canonicalizer) object(dst []byte) []byte {
	c.pos++
	open := len(dst)
	dst = append(dst, '{')
	if c.closes('}') {
		return append(dst, '}')
	}
	// The members of nested objects share one stack.
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	sorted := true
	for more := true; more && !c.bad; {
		c.space()
		if c.pos >= len(c.data) || c.data[c.pos] != '"' {
			return c.fail(dst)
		}
		m := member{start: len(dst)}
		dst, m.clean = c.string(dst)
		if c.bad {
			return dst
		}
		m.keyEnd = len(dst)
		if !m.clean {
			var key string
			_ = json.Unmarshal(dst[m.start:], &key)
			m.key = key
		}
		c.space()
		if c.pos >= len(c.data) || c.data[c.pos] != ':' {
			return c.fail(dst)
		}
		c.pos++
		dst = c.value(append(dst, ':'))
		m.end = len(dst)
		if n := len(c.members); n > base && bytes.Compare(keyOf(c.members[n-1], dst, 0), keyOf(m, dst, 0)) >= 0 {
			sorted = false
		}
		c.members = append(c.members, m)
		dst, more = c.next(dst, '}')
	}
	if c.bad || sorted {
		return append(dst, '}')
	}
	// Sort by key; of a key given twice, the last value counts (as a
	// decoder keeps it).
	c.scratch = append(c.scratch[:0], dst[open:]...)
	written := c.scratch
	members := c.members[base:]
	slices.SortStableFunc(members, func(a, b member) int {
		return bytes.Compare(keyOf(a, written, open), keyOf(b, written, open))
	})
	dst = append(dst[:open], '{')
	first := true
	for i := range members {
		m := &members[i]
		if i+1 < len(members) && bytes.Equal(keyOf(members[i+1], written, open), keyOf(*m, written, open)) {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, written[m.start-open:m.end-open]...)
	}
	return append(dst, '}')
}
