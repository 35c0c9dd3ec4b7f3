package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendStringMatchesEncodingJSON: every byte value alone and between
// plain text, runs longer than the eight-byte steps, invalid UTF-8 and the
// separators encoding/json always escapes.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	all := make([]byte, 0, 256)
	for b := 0; b < 256; b++ {
		all = append(all, byte(b))
	}
	cases := []string{"", "plain", "<&> \"q\" \\", string(all), "\u2028\u2029é😀", "bad \xff\xfe utf8", "trailing \xed",
		strings.Repeat("long plain run ", 40) + "\x01"}
	for b := 0; b < 256; b++ {
		cases = append(cases, "a"+string([]byte{byte(b)})+"b")
	}
	for _, s := range cases {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := AppendString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("AppendString(%q)\n got %q\nwant %q", s, got[1:], want)
		}
	}
}
