package session

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

// TestParseArtifactRef: the one reading of a ref takes exactly what
// ArtifactRef writes, and refuses the rest with one message.
func TestParseArtifactRef(t *testing.T) {
	text := "a tool result"
	ref := ArtifactRef(text)
	sum, err := ParseArtifactRef(ref)
	if err != nil || sum != sha256.Sum256([]byte(text)) || sum != ArtifactDigest(text) {
		t.Fatalf("ParseArtifactRef(%q) = %x, %v; want the SHA-256 of the text", ref, sum, err)
	}
	hexPart := ref[len("sha256:"):]
	for _, tc := range []struct{ name, ref string }{
		{"upper-case hex", "sha256:" + strings.ToUpper(hexPart)},
		{"one upper-case digit", "sha256:A" + strings.Repeat("0", 63)},
		{"upper-case prefix", "SHA256:" + hexPart},
		{"short", ref[:len(ref)-1]},
		{"long", ref + "0"},
		{"no prefix", hexPart},
		{"not hex", "sha256:" + strings.Repeat("g", 64)},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArtifactRef(tc.ref)
			if !errors.Is(err, ErrBadArtifactRef) {
				t.Fatalf("ParseArtifactRef(%q) = %v, want ErrBadArtifactRef", tc.ref, err)
			}
			want := `artifact ref "` + tc.ref + `": want sha256: and 64 lower-case hex digits, as a pack's artifacts name it`
			if err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
	long := strings.Repeat("x", 10_000)
	if _, err := ParseArtifactRef(long); len(err.Error()) > 300 {
		t.Errorf("the error of a 10,000-byte ref is %d bytes: it must not repeat it whole", len(err.Error()))
	}
}
