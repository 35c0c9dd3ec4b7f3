package kubeauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Basic aHI6cHc=", "", false},
		{"", "", false},
		{"Bearerabc", "", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		token, ok := BearerToken(r)
		if token != tc.token || ok != tc.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

func TestChallenge(t *testing.T) {
	for code, want := range map[int]string{
		http.StatusUnauthorized: `Bearer realm="contextrouter"`,
		http.StatusForbidden:    `Bearer realm="contextrouter", error="insufficient_scope"`,
		http.StatusOK:           "",
		http.StatusBadRequest:   "",
	} {
		h := http.Header{}
		Challenge(h, code)
		if got := h.Get("WWW-Authenticate"); got != want {
			t.Errorf("Challenge(%d) = %q, want %q", code, got, want)
		}
	}
}

// The answer cache keeps allowed answers for AllowedTTL, refusals for
// RefusedTTL, and never holds more than maxAnswers.
func TestAnswerCache(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rv := &Reviewer{now: func() time.Time { return now }, answers: map[[sha256.Size]byte]answer{}}
	yes, no := key("authz", "t1", "get", "/metrics"), key("authz", "t2", "get", "/metrics")
	rv.remember(yes, answer{allowed: true}, true)
	rv.remember(no, answer{}, false)
	now = now.Add(RefusedTTL)
	if _, ok := rv.lookup(no); ok {
		t.Error("a refusal outlived RefusedTTL")
	}
	if a, ok := rv.lookup(yes); !ok || !a.allowed {
		t.Error("an allowed answer expired before AllowedTTL")
	}
	now = now.Add(AllowedTTL - RefusedTTL)
	if _, ok := rv.lookup(yes); ok {
		t.Error("an allowed answer outlived AllowedTTL")
	}
	for i := range 3 * maxAnswers {
		rv.remember(key("authn", fmt.Sprint(i)), answer{}, true)
		if len(rv.answers) > maxAnswers {
			t.Fatalf("%d answers after %d inserts, want at most %d", len(rv.answers), i+1, maxAnswers)
		}
	}
	// Keys keep their parts apart: ("ab", "c") is not ("a", "bc").
	if key("ab", "c") == key("a", "bc") {
		t.Error("key parts run together")
	}
}

// The cost a token-mode query pays once its token's answer is cached.
func BenchmarkAuthenticateCached(b *testing.B) {
	rv := &Reviewer{now: time.Now, answers: map[[sha256.Size]byte]answer{}}
	token := strings.Repeat("t", 900) // a projected ServiceAccount token is about 900 bytes
	audiences := []string{"contextrouter.dev"}
	rv.remember(key("authn", token, audiences...), answer{}, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rv.Authenticate(context.Background(), token, audiences); err != nil {
			b.Fatal(err)
		}
	}
}
