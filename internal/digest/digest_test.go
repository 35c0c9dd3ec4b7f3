package digest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"sync"
	"testing"
)

func TestSHA256(t *testing.T) {
	for _, s := range []string{"", "a", "tool result", strings.Repeat("é", 5000)} {
		if got, want := SHA256(s), sha256.Sum256([]byte(s)); got != want {
			t.Errorf("SHA256(%.20q) = %x, want %x", s, got, want)
		}
	}
	s := strings.Repeat("x", 1<<16)
	if n := testing.AllocsPerRun(100, func() { _ = SHA256(s) }); n != 0 {
		t.Errorf("SHA256 allocates %v times; it must read the string in place", n)
	}
}

func TestMAC(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	m := NewMAC(key)
	for _, s := range []string{"", "request-1", strings.Repeat("z", 1000)} {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		if got, want := m.Sum(s), h.Sum(nil); !bytes.Equal(got[:], want) {
			t.Errorf("Sum(%.20q) = %x, want HMAC-SHA-256 %x", s, got, want)
		}
	}
	key[0] = 'X' // NewMAC keeps its own copy of the key
	if got, again := m.Sum("a"), NewMAC([]byte("0123456789abcdef0123456789abcdef")).Sum("a"); got != again {
		t.Error("changing the caller's key slice changed the MAC")
	}
	if n := testing.AllocsPerRun(100, func() { _ = m.Sum("request-1") }); n != 0 && !raceDetector {
		t.Errorf("Sum allocates %v times", n)
	}
	// Concurrent use is safe (go test -race checks it) and answers alike.
	var wg sync.WaitGroup
	want := m.Sum("same")
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if m.Sum("same") != want {
					t.Error("concurrent Sum differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNewKey(t *testing.T) {
	a, b := NewKey(), NewKey()
	if len(a) != 32 || bytes.Equal(a, b) {
		t.Fatalf("keys %x and %x: want two different 32-byte keys", a, b)
	}
	if NewMAC(a).Sum("x") == NewMAC(b).Sum("x") {
		t.Error("MACs under two keys agree")
	}
}
