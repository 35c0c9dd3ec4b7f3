// Package jsonenc writes JSON by hand where encoding/json's reflection and
// per-byte escaping cost too much: the server's answers, tool digests. Its
// output is byte for byte what encoding/json writes with HTML escaping off.
package jsonenc

import "unicode/utf8"

// plain marks the bytes copied as they are: printable ASCII except '"' and '\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendString quotes s like encoding/json without HTML escaping: runs of
// plain bytes are copied at once, control characters escaped, invalid UTF-8
// replaced by \ufffd, and U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: chunk text is mostly plain ASCII.
		for i+8 <= len(s) && !special8(load8(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// load8 reads s[i:i+8] as a little-endian word (the compiler merges the loads).
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 reports whether a word holds a byte that is not plain: below
// 0x20, '"', '\\' or 0x80 and above (SWAR: a byte b is zero iff
// (b-1) & ^b has its high bit set).
func special8(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	below := (x - ones*0x20) & ^x & highs
	return (below | zero(x^(ones*'"')) | zero(x^(ones*'\\')) | x&highs) != 0
}

// AppendStrings writes a list of strings as encoding/json does: nil is null.
func AppendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}
