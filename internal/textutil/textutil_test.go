package textutil

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutBytes(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		n       int
		marker  string
		want    string
	}{
		{"fits", "abc", 3, Ellipsis, "abc"},
		{"cut", "abcdef", 3, Ellipsis, "abc…"},
		{"no marker", "abcdef", 3, "", "abc"},
		{"a character is not split", "aé", 2, "", "a"}, // é is two bytes
		{"a character that fits", "aé", 3, "", "aé"},
		{"four-byte character", "x😀y", 4, "+", "x+"},
		{"zero", "abc", 0, Ellipsis, "…"},
		{"negative", "abc", -1, "", ""},
		{"empty", "", 0, Ellipsis, ""},
		{"marker not counted", "abcdef", 2, " …(truncated)", "ab …(truncated)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CutBytes(tc.s, tc.n, tc.marker)
			if got != tc.want {
				t.Errorf("CutBytes(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.marker, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("CutBytes(%q, %d) = %q: not valid UTF-8", tc.s, tc.n, got)
			}
		})
	}
}

func TestCutRunes(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		n       int
		marker  string
		want    string
	}{
		{"fits in bytes", "abc", 3, Ellipsis, "abc"},
		{"fits in characters, not bytes", "ééé", 3, Ellipsis, "ééé"},
		{"cut", "éééé", 3, Ellipsis, "ééé…"},
		{"no marker", "éééé", 3, "", "ééé"},
		{"zero", "abc", 0, Ellipsis, "…"},
		{"invalid byte counts as one character", "\xffabc", 2, "", "\xffa"},
		{"long text", strings.Repeat("é", 10_000), 2, "", "éé"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CutRunes(tc.s, tc.n, tc.marker); got != tc.want {
				t.Errorf("CutRunes(%q, %d, %q) = %q, want %q", tc.s, tc.n, tc.marker, got, tc.want)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ name, s, want string }{
		{"plain", "a b", "a b"},
		{"line breaks", "a\r\nb\nc\rd", "a b c d"},
		{"runs of white space", "  a \t\t b  ", "a b"},
		{"terminal escape", "a\x1b[31mred", "a[31mred"},
		{"bidi override", "a\u202eb", "ab"},
		{"invalid UTF-8 from a cut", "ab\xc3", "ab"},
		{"unicode line separator", "a\u2028b", "a b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OneLine(tc.s); got != tc.want {
				t.Errorf("OneLine(%q) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}
