package budget

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestMiddleMarker(t *testing.T) {
	if got, want := MiddleMarker(42), "\n[… 42 tokens omitted …]\n"; got != want {
		t.Errorf("MiddleMarker(42) = %q, want %q", got, want)
	}
}

type truncCase struct {
	name   string
	kind   v1alpha1.TokenEstimator
	in     string
	limit  int
	want   string // ignored when !wantOK
	tokens int
	wantOK bool
}

func TestTruncateEnd(t *testing.T) {
	x100 := strings.Repeat("x", 100)
	for _, tc := range []truncCase{
		{
			name: "fits unchanged", kind: v1alpha1.EstimatorCharsDiv4,
			in: "one two three four five six", limit: 7,
			want: "one two three four five six", tokens: 7, wantOK: true,
		},
		{
			// 13-rune marker leaves 11 runes: "one two" fits, "one two three" does not.
			name: "chars cut at word end", kind: v1alpha1.EstimatorCharsDiv4,
			in: "one two three four five six", limit: 6,
			want: "one two" + EndMarker, tokens: 5, wantOK: true,
		},
		{
			// Marker is one field.
			name: "whitespace", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c d e", limit: 3,
			want: "a b" + EndMarker, tokens: 3, wantOK: true,
		},
		{
			// Marker is 4 words ([ … truncated ]); ceil((1+4)*4/3) = 7.
			name: "words one word", kind: v1alpha1.EstimatorWords,
			in: "alpha beta gamma delta epsilon zeta eta theta", limit: 7,
			want: "alpha" + EndMarker, tokens: 7, wantOK: true,
		},
		{
			name: "words two words", kind: v1alpha1.EstimatorWords,
			in: "alpha beta gamma delta epsilon zeta eta theta", limit: 8,
			want: "alpha beta" + EndMarker, tokens: 8, wantOK: true,
		},
		{
			// ceil((1+4)*4/3) = 7 > 5: not even one word fits next to the marker.
			name: "words too small", kind: v1alpha1.EstimatorWords,
			in: "alpha beta gamma delta epsilon zeta eta theta", limit: 5,
		},
		{
			// 16 runes leave 3 for content; a normal word is never cut inside.
			name: "first word does not fit", kind: v1alpha1.EstimatorCharsDiv4,
			in: "abcdefghij klmnop", limit: 4,
		},
		{
			name: "limit zero", kind: v1alpha1.EstimatorCharsDiv4,
			in: "a b", limit: 0,
		},
		{
			name: "empty input fits any limit", kind: v1alpha1.EstimatorWords,
			in: "", limit: 0, want: "", tokens: 0, wantOK: true,
		},
		{
			// 10 spaces = 3 tokens; there is no word to keep.
			name: "all whitespace", kind: v1alpha1.EstimatorCharsDiv4,
			in: "          ", limit: 2,
		},
		{
			// 28 runes = 7 tokens: 15 content runes + 13 marker runes.
			name: "non-ascii counts runes not bytes", kind: v1alpha1.EstimatorCharsDiv4,
			in: "naïve café déjà vu über straße", limit: 7,
			want: "naïve café déjà" + EndMarker, tokens: 7, wantOK: true,
		},
		{
			name: "crlf leaves no carriage return", kind: v1alpha1.EstimatorWhitespace,
			in: "line one\r\nline two\r\n", limit: 3,
			want: "line one" + EndMarker, tokens: 3, wantOK: true,
		},
		{
			// One giant word: cut at a rune boundary, 27 + 13 = 40 runes.
			name: "giant word", kind: v1alpha1.EstimatorCharsDiv4,
			in: x100, limit: 10,
			want: strings.Repeat("x", 27) + EndMarker, tokens: 10, wantOK: true,
		},
		{
			name: "giant word after short words", kind: v1alpha1.EstimatorCharsDiv4,
			in: "see " + x100, limit: 10,
			want: "see " + strings.Repeat("x", 23) + EndMarker, tokens: 10, wantOK: true,
		},
		{
			// Multi-byte runes: 27 runes of 3 bytes each, never split.
			name: "giant cjk run", kind: v1alpha1.EstimatorCharsDiv4,
			in: strings.Repeat("日", 50), limit: 10,
			want: strings.Repeat("日", 27) + EndMarker, tokens: 10, wantOK: true,
		},
		{
			// Each ideograph is a word for the estimator: ceil((3+4)*4/3) = 10.
			name: "giant cjk run words", kind: v1alpha1.EstimatorWords,
			in: strings.Repeat("日", 50), limit: 10,
			want: "日日日" + EndMarker, tokens: 10, wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est := mustNew(t, tc.kind)
			out, tokens, ok := TruncateEnd(tc.in, tc.limit, est)
			assertResult(t, tc, out, tokens, ok)
			checkEnd(t, est, tc.in, tc.limit, out, tokens, ok)
		})
	}
}

func TestTruncateMiddle(t *testing.T) {
	// Ten lines of four two-byte words each: "Aa Ab Ac Ad\nBa Bb Bc Bd\n…".
	var lines []string
	for l := 'A'; l < 'A'+10; l++ {
		lines = append(lines, string(l)+"a "+string(l)+"b "+string(l)+"c "+string(l)+"d")
	}
	grid := strings.Join(lines, "\n")
	var crlf []string
	for i := 1; i <= 10; i++ {
		crlf = append(crlf, "w"+strconv.Itoa(i))
	}
	x200 := strings.Repeat("x", 200)
	longFirst := "Incomprehensibilities " + strings.Repeat("a ", 40) + "end"

	for _, tc := range []truncCase{
		{
			name: "fits unchanged", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c", limit: 3, want: "a b c", tokens: 3, wantOK: true,
		},
		{
			// The marker is 5 fields; 2 remain, one per side.
			name: "whitespace one word each side", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c d e f g h i j", limit: 7,
			want: "a" + MiddleMarker(8) + "j", tokens: 7, wantOK: true,
		},
		{
			name: "whitespace two words each side", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c d e f g h i j", limit: 9,
			want: "a b" + MiddleMarker(6) + "i j", tokens: 9, wantOK: true,
		},
		{
			// Room for one word only: it goes to the head.
			name: "head only", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c d e f g h i j", limit: 6,
			want: "a" + MiddleMarker(9), tokens: 6, wantOK: true,
		},
		{
			// The 22-rune first word needs 6 tokens, more than half of what the marker leaves, while
			// a tail of short words would fit: the head wins and gets the whole budget.
			name: "long first word keeps the head", kind: v1alpha1.EstimatorCharsDiv4,
			in: longFirst, limit: 12,
			want: "Incomprehensibilities a" + MiddleMarker(21), tokens: 12, wantOK: true,
		},
		{
			// The first word plus the marker is 12 tokens: nothing is kept, not a tail alone.
			name: "first word does not fit, no tail alone", kind: v1alpha1.EstimatorCharsDiv4,
			in: longFirst, limit: 10,
		},
		{
			name: "marker alone does not count", kind: v1alpha1.EstimatorWhitespace,
			in: "a b c d e f g h i j", limit: 5,
		},
		{
			name: "limit zero", kind: v1alpha1.EstimatorCharsDiv4,
			in: x200, limit: 0,
		},
		{
			// Budget 9 words a side would cut mid-line ("…\nCa" and "Hd\n…"); moving to the line
			// boundaries costs 3 bytes a side, within 1/8 of each side's 26 bytes.
			name: "cuts move to line boundaries", kind: v1alpha1.EstimatorWhitespace,
			in: grid, limit: 23,
			want:   lines[0] + "\n" + lines[1] + MiddleMarker(24) + lines[8] + "\n" + lines[9],
			tokens: 21, wantOK: true,
		},
		{
			// Marker with N=50 is 25 runes = 7 tokens; 13 remain: head 7 tokens (28 runes), tail 6
			// (24 runes). The omitted 148 runes are 37 tokens, the result 77 runes = 20 tokens.
			name: "giant word both sides", kind: v1alpha1.EstimatorCharsDiv4,
			in: x200, limit: 20,
			want:   strings.Repeat("x", 28) + MiddleMarker(37) + strings.Repeat("x", 24),
			tokens: 20, wantOK: true,
		},
		{
			name: "crlf leaves no carriage return", kind: v1alpha1.EstimatorWhitespace,
			in: strings.Join(crlf, "\r\n"), limit: 7,
			want: "w1" + MiddleMarker(8) + "w10", tokens: 7, wantOK: true,
		},
		{
			// 16 words = 22 tokens. The marker is 7 words ([ … N tokens omitted … ]) = 10 tokens,
			// leaving 3+2: "alpha beta" and "pi" make 10 words = 14 tokens; the spare token then
			// buys "omicron": 11 words = 15 tokens, the omitted 12 words are 16.
			name: "words", kind: v1alpha1.EstimatorWords,
			in: "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi", limit: 15,
			want: "alpha beta" + MiddleMarker(16) + "omicron pi", tokens: 15, wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est := mustNew(t, tc.kind)
			out, tokens, ok := TruncateMiddle(tc.in, tc.limit, est)
			assertResult(t, tc, out, tokens, ok)
			checkMiddle(t, est, tc.in, tc.limit, out, tokens, ok)
		})
	}
}

func assertResult(t *testing.T, tc truncCase, out string, tokens int, ok bool) {
	t.Helper()
	if ok != tc.wantOK {
		t.Fatalf("ok = %v, want %v (out %q)", ok, tc.wantOK, out)
	}
	if !ok {
		return
	}
	if out != tc.want {
		t.Errorf("out = %q\nwant  %q", out, tc.want)
	}
	if tokens != tc.tokens {
		t.Errorf("tokens = %d, want %d", tokens, tc.tokens)
	}
}

// checkEnd asserts the TruncateEnd contract for any input: the engine relies on tokens ==
// Count(out) <= limit, the kept text must be a real prefix cut at a boundary, no longer
// word-boundary prefix may fit, and ok=false only when nothing fits.
func checkEnd(t *testing.T, est Estimator, s string, limit int, out string, tokens int, ok bool) {
	t.Helper()
	total := est.Count(s)
	if !ok {
		if out != "" || tokens != 0 {
			t.Errorf("ok=false with out %q, tokens %d", out, tokens)
		}
		if total <= limit {
			t.Errorf("ok=false although the input fits (%d <= %d)", total, limit)
		}
		if f := strings.Fields(s); len(f) > 0 {
			first := minimalHead(s)
			if n := est.Count(first + EndMarker); n <= limit {
				t.Errorf("ok=false although %q plus the marker fits (%d <= %d)", first, n, limit)
			}
		}
		return
	}
	if c := est.Count(out); tokens != c || tokens > limit {
		t.Fatalf("tokens = %d, Count(out) = %d, limit %d (out %q)", tokens, c, limit, out)
	}
	if total <= limit {
		if out != s {
			t.Errorf("input fits (%d <= %d) but was changed to %q", total, limit, out)
		}
		return
	}
	head, found := strings.CutSuffix(out, EndMarker)
	if !found {
		t.Fatalf("out %q lacks the end marker", out)
	}
	if head == "" || !strings.HasPrefix(s, head) {
		t.Fatalf("kept text %q is not a non-empty prefix of %q", head, s)
	}
	if utf8.ValidString(s) && !utf8.ValidString(out) {
		t.Errorf("cut splits a rune: %q", out)
	}
	if r, _ := utf8.DecodeLastRuneInString(head); unicode.IsSpace(r) {
		t.Errorf("kept text %q ends with whitespace", head)
	}
	// Maximality: the next word boundary would not have fit (a giant next word may be cut inside,
	// which only keeps more).
	cut := len(head)
	if atWordEnd(s, cut) {
		if next, giant := nextWordEnd(s, cut); next > 0 && !giant {
			if n := est.Count(s[:next] + EndMarker); n <= limit {
				t.Errorf("cut at %d but the word end at %d fits too (%d <= %d)", cut, next, n, limit)
			}
		}
	}
}

var middleMarkerRE = regexp.MustCompile(`\n\[… (\d+) tokens omitted …\]\n`)

// checkMiddle asserts the TruncateMiddle contract for any input.
func checkMiddle(t *testing.T, est Estimator, s string, limit int, out string, tokens int, ok bool) {
	t.Helper()
	total := est.Count(s)
	if !ok {
		if out != "" || tokens != 0 {
			t.Errorf("ok=false with out %q, tokens %d", out, tokens)
		}
		if total <= limit {
			t.Errorf("ok=false although the input fits (%d <= %d)", total, limit)
		}
		if f := strings.Fields(s); len(f) > 0 {
			first := minimalHead(s)
			if n := est.Count(first + MiddleMarker(est.Count(s[len(first):]))); n <= limit {
				t.Errorf("ok=false although %q plus the marker fits (%d <= %d)", first, n, limit)
			}
		}
		return
	}
	if c := est.Count(out); tokens != c || tokens > limit {
		t.Fatalf("tokens = %d, Count(out) = %d, limit %d (out %q)", tokens, c, limit, out)
	}
	if total <= limit {
		if out != s {
			t.Errorf("input fits (%d <= %d) but was changed to %q", total, limit, out)
		}
		return
	}
	// The input may itself contain marker-like text: accept any split that satisfies the contract.
	var problems []string
	for _, m := range middleMarkerRE.FindAllStringSubmatchIndex(out, -1) {
		head, tail := out[:m[0]], out[m[1]:]
		n, _ := strconv.Atoi(out[m[2]:m[3]])
		switch {
		case !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) || len(head)+len(tail) >= len(s):
			problems = append(problems, "head/tail are not a prefix and suffix around a gap")
		case head == "":
			problems = append(problems, "the head is empty (only a tail kept)")
		case n != est.Count(s[len(head):len(s)-len(tail)]):
			problems = append(problems, "omitted count "+strconv.Itoa(n)+" is not the omitted text's count")
		case strings.TrimRightFunc(head, unicode.IsSpace) != head || strings.TrimLeftFunc(tail, unicode.IsSpace) != tail:
			problems = append(problems, "head or tail has whitespace at the cut")
		default:
			problems = nil
		}
		if problems == nil {
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Errorf("cut splits a rune: %q", out)
			}
			return
		}
	}
	t.Fatalf("out %q is not head + MiddleMarker(N) + tail of %q: %v", out, s, problems)
}

// minimalHead is the smallest head the truncations may keep: the first word, or the first rune of a
// giant first word.
func minimalHead(s string) string {
	start := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	end, giant := nextWordEnd(s, start)
	if giant {
		_, size := utf8.DecodeRuneInString(s[start:])
		return s[:start+size]
	}
	return s[:end]
}

// atWordEnd reports whether i is followed by whitespace or the end of s.
func atWordEnd(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return i == len(s) || unicode.IsSpace(r)
}

// nextWordEnd returns the end of the first word starting at or after i (0 if none) and whether that
// word is giant.
func nextWordEnd(s string, i int) (int, bool) {
	rest := s[i:]
	trimmed := strings.TrimLeftFunc(rest, unicode.IsSpace)
	if trimmed == "" {
		return 0, false
	}
	start := i + len(rest) - len(trimmed)
	word := trimmed
	if j := strings.IndexFunc(trimmed, unicode.IsSpace); j >= 0 {
		word = trimmed[:j]
	}
	return start + len(word), utf8.RuneCountInString(word) > giantWordRunes
}

// randomText mixes ASCII, accented and CJK letters, digits, punctuation, emoji, combining marks and
// all kinds of whitespace, with an occasional giant word.
func randomText(rng *rand.Rand) string {
	pools := [][]string{
		{"a", "b", "e", "t", "Q", "Z", "0", "7"},
		{" ", " ", " ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "  "},
		{",", ".", "!", "…", "—", "_", "(", ")", "#", "="},
		{"é", "ñ", "ü", "ж", "λ", "ß"},
		{"日", "本", "語", "カ", "ひ", "한"},
		{"🙂", "👍🏽", "\u0301", "\u200b"},
	}
	weights := []int{50, 25, 8, 8, 5, 4}
	var b strings.Builder
	for n := rng.IntN(160); n > 0; n-- {
		if rng.IntN(40) == 0 {
			b.WriteString(strings.Repeat(pools[rng.IntN(4)][0], 20+rng.IntN(80)))
			continue
		}
		w := rng.IntN(100)
		p := 0
		for w >= weights[p] {
			w -= weights[p]
			p++
		}
		b.WriteString(pools[p][rng.IntN(len(pools[p]))])
	}
	return b.String()
}

// TestTruncateProperties runs both truncations with all estimators over random inputs and limits.
func TestTruncateProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260101, 7))
	ests := make([]Estimator, len(allKinds))
	for i, kind := range allKinds {
		ests[i] = mustNew(t, kind)
	}
	for i := range 5000 {
		s := randomText(rng)
		k := i % len(allKinds)
		est := ests[k]
		limit := rng.IntN(est.Count(s) + 12)
		name := string(allKinds[k]) + "/" + strconv.Itoa(i)
		t.Run(name, func(t *testing.T) {
			out, tokens, ok := TruncateEnd(s, limit, est)
			checkEnd(t, est, s, limit, out, tokens, ok)
			out, tokens, ok = TruncateMiddle(s, limit, est)
			checkMiddle(t, est, s, limit, out, tokens, ok)
		})
		if t.Failed() {
			t.Logf("input %q, limit %d", s, limit)
			break
		}
	}
}

func FuzzTruncate(f *testing.F) {
	for _, seed := range []struct {
		s     string
		limit uint16
	}{
		{"", 0},
		{"   \t\r\n ", 1},
		{"one two three four five six", 6},
		{"alpha beta gamma delta", 7},
		{"naïve café déjà vu über straße", 7},
		{"line one\r\nline two\r\n", 3},
		{strings.Repeat("x", 100), 10},
		{"see " + strings.Repeat("日", 60) + " end", 12},
		{"a\n[… 3 tokens omitted …]\nb c d e f g h", 6},
		{"\xff\xfe \xe6\x97 ok \x80\x80\x80", 2},
	} {
		for kind := range uint8(len(allKinds)) {
			f.Add(seed.s, seed.limit, kind)
		}
	}
	f.Fuzz(func(t *testing.T, s string, limit uint16, kind uint8) {
		est := mustNew(t, allKinds[int(kind)%len(allKinds)])
		lim := int(limit)
		out, tokens, ok := TruncateEnd(s, lim, est)
		checkEnd(t, est, s, lim, out, tokens, ok)
		out, tokens, ok = TruncateMiddle(s, lim, est)
		checkMiddle(t, est, s, lim, out, tokens, ok)
	})
}

func BenchmarkTruncateEnd(b *testing.B) {
	text := benchText()
	for _, kind := range allKinds {
		b.Run(string(kind), func(b *testing.B) {
			est := mustNew(b, kind)
			limit := est.Count(text) / 2
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, _, ok := TruncateEnd(text, limit, est); !ok {
					b.Fatal("truncation failed")
				}
			}
		})
	}
}

func BenchmarkTruncateMiddle(b *testing.B) {
	text := benchText()
	for _, kind := range allKinds {
		b.Run(string(kind), func(b *testing.B) {
			est := mustNew(b, kind)
			limit := est.Count(text) / 2
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, _, ok := TruncateMiddle(text, limit, est); !ok {
					b.Fatal("truncation failed")
				}
			}
		})
	}
}
