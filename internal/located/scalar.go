package located

import (
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
)

// ScalarPosition maps a position inside a scalar's value (1-based line and
// column, columns counted in characters, as the CEL compiler counts them)
// to its line and column in the file. src is the text of the node's
// document, whose line 1 is the file's line lineOffset+1 (ParseNode's
// lineOffset). Every scalar style is followed: plain and quoted scalars fold
// line breaks into spaces, quoted ones drop their quotes and escapes, block
// scalars (| and >) drop their indentation. ok is false when the value
// cannot be followed in src (the caller then points at the field's line).
func ScalarPosition(src []byte, lineOffset int, n *yamlv3.Node, line, col int) (fileLine, fileCol int, ok bool) {
	if n == nil || n.Kind != yamlv3.ScalarNode || line < 1 || col < 1 {
		return 0, 0, false
	}
	target, ok := runeIndex(n.Value, line, col)
	if !ok {
		return 0, 0, false
	}
	off, ok := scalarOffset(string(src), n, target, lineOffset)
	if !ok {
		return 0, 0, false
	}
	l, c := LineCol(src, off)
	// LineCol counts bytes; the column is reported in characters.
	c = utf8.RuneCount(src[off-(c-1) : off])
	return l + lineOffset, c + 1, true
}

// runeIndex returns the index (in characters) of line:col of value; col may
// point one past the end of a line, where an error at its end is.
func runeIndex(value string, line, col int) (int, bool) {
	i, l, c := 0, 1, 1
	for _, r := range value {
		if l == line && c == col {
			return i, true
		}
		if r == '\n' {
			if l == line {
				return 0, false
			}
			l, c = l+1, 1
		} else {
			c++
		}
		i++
	}
	return i, l == line && c == col
}

// scalarOffset returns the byte offset in src of the value's target-th
// character. It walks the value and the source together: a character of the
// value is the next equal character of the source, or the escape sequence
// that stands for it; a space or line break of the value may be any run of
// whitespace (folding); the source's indentation, quotes and escaped line
// breaks stand for nothing. Anything else means the source is not this
// scalar.
func scalarOffset(src string, n *yamlv3.Node, target, lineOffset int) (int, bool) {
	p, ok := lineStart(src, n.Line-lineOffset)
	if !ok {
		return 0, false
	}
	// Node columns count characters.
	for c := 1; c < n.Column; c++ {
		if p >= len(src) || src[p] == '\n' {
			return 0, false
		}
		_, w := utf8.DecodeRuneInString(src[p:])
		p += w
	}
	quote := byte(0)
	switch n.Style {
	case yamlv3.DoubleQuotedStyle:
		quote = '"'
	case yamlv3.SingleQuotedStyle:
		quote = '\''
	case yamlv3.LiteralStyle, yamlv3.FoldedStyle:
		// The content starts on the line after the indicator.
		i := strings.IndexByte(src[p:], '\n')
		if i < 0 {
			return 0, false
		}
		p += i + 1
	}
	if quote != 0 {
		if p >= len(src) || src[p] != quote {
			return 0, false
		}
		p++
	}
	i := 0
	for _, v := range n.Value {
		for {
			if p >= len(src) {
				return 0, false
			}
			c := src[p]
			if quote == '"' && c == '\\' {
				if p+1 < len(src) && (src[p+1] == '\n' || src[p+1] == '\r') {
					p += 2 // an escaped line break stands for nothing
					continue
				}
				r, w := unescape(src[p+1:])
				if w == 0 || r != v {
					return 0, false
				}
				if i == target {
					return p, true
				}
				p += 1 + w
				break
			}
			r, w := utf8.DecodeRuneInString(src[p:])
			if r == v || (isSpace(v) && isSpace(r)) {
				if i == target {
					return p, true
				}
				p += w
				if quote == '\'' && v == '\'' {
					p++ // '' stands for '
				}
				break
			}
			if !isSpace(r) {
				return 0, false
			}
			p += w // indentation, or the rest of a folded line break
		}
		i++
	}
	if i == target {
		// An error at the end of the expression: just after its last character.
		return p, true
	}
	return 0, false
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// lineStart returns the byte offset of the 1-based line of src.
func lineStart(src string, line int) (int, bool) {
	p := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(src[p:], '\n')
		if i < 0 {
			return 0, false
		}
		p += i + 1
	}
	return p, true
}

// unescape decodes the single-character escapes of double-quoted YAML that a
// condition can hold (s starts after the backslash); w is 0 for others,
// such as \x and \u, which are not followed.
func unescape(s string) (r rune, w int) {
	if s == "" {
		return 0, 0
	}
	switch s[0] {
	case '0':
		return 0, 1
	case 'a':
		return '\a', 1
	case 'b':
		return '\b', 1
	case 't', '\t':
		return '\t', 1
	case 'n':
		return '\n', 1
	case 'v':
		return '\v', 1
	case 'f':
		return '\f', 1
	case 'r':
		return '\r', 1
	case 'e':
		return 0x1b, 1
	case ' ', '"', '/', '\\':
		return rune(s[0]), 1
	}
	return 0, 0
}
