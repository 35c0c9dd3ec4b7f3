// Package textutil shortens text for messages, labels and excerpts: cut to
// a number of bytes or characters on a character boundary, with or without
// a marker, and made one clean line. Every package that cuts or flattens
// text calls these, so a cut never splits a character in one place and not
// in another (issue 23).
package textutil

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis is the marker of a cut that a reader sees ("…", one character,
// three bytes).
const Ellipsis = "…"

// CutBytes returns s when it is at most n bytes; otherwise its longest
// prefix of at most n bytes that ends on a character boundary, followed by
// marker ("" for none). The marker is not counted in n: a caller whose
// limit includes it passes n-len(marker).
func CutBytes(s string, n int, marker string) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + marker
}

// CutRunes returns s when it has at most n characters (runes); otherwise
// its first n characters, followed by marker ("" for none). It reads no
// further into s than it keeps, so a cut of a long text costs what it keeps.
func CutRunes(s string, n int, marker string) string {
	if len(s) <= n {
		return s // at most n bytes, so at most n characters
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i >= len(s) {
		return s
	}
	return s[:i] + marker
}

// OneLine makes text fit one line of a log or a comment: valid UTF-8 (an
// invalid sequence, such as a character a byte cut split, is dropped), no
// control or other unprintable characters (a terminal escape, a
// bidirectional override), and every run of white space, line breaks
// included, as one space, none at either end.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsPrint(r) {
			return r
		}
		return -1
	}, strings.ToValidUTF8(s, ""))
	return strings.Join(strings.Fields(s), " ")
}
