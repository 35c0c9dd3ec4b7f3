package session

import (
	"strings"
	"testing"
)

// TestASCIILower: eight bytes at a time, every byte value is lowered as
// one at a time would, at every offset of the tail.
func TestASCIILower(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for cut := range 9 {
		s := all.String()[cut:] + "ÀZ@[`{Aa"
		got, want := asciiLower(s), []byte(s)
		for i, c := range want {
			if 'A' <= c && c <= 'Z' {
				want[i] = c + 'a' - 'A'
			}
		}
		if got != string(want) {
			t.Fatalf("offset %d: %q, want %q", cut, got, want)
		}
	}
}
