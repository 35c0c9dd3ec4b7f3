package budget

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// TestPieceCounterExact checks the index-and-recount answers of pieceCounter against counting
// each text in full, at every kind of offset (inside words, inside runes, in white space), with
// the markers truncation uses and with mids it must not take a shortcut for.
func TestPieceCounterExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 8))
	mids := []string{"", EndMarker, MiddleMarker(12), " ", "\n", "s", "'re", "x y"}
	for _, kind := range []v1alpha1.TokenEstimator{v1alpha1.EstimatorO200kBase, v1alpha1.EstimatorCl100kBase} {
		est := mustNew(t, kind)
		if _, ok := est.(piecewise); !ok {
			t.Fatalf("%s is not piecewise", kind)
		}
		for i := range 3000 {
			s := randomText(rng)
			if i%10 == 0 {
				s = contractionText(rng)
			}
			t.Run(string(kind)+"/"+strconv.Itoa(i), func(t *testing.T) {
				c := newCounter(s, est)
				// Truncation cuts only where utf8.RuneStart holds, never inside a rune.
				a := runeBoundary(s, rng.IntN(len(s)+1))
				b := runeBoundary(s, a+rng.IntN(len(s)-a+1))
				if got, want := c.span(a, b), est.Count(s[a:b]); got != want {
					t.Errorf("span(%d, %d) = %d, Count = %d", a, b, got, want)
				}
				mid := mids[rng.IntN(len(mids))]
				if rng.IntN(3) == 0 {
					b = len(s)
				}
				if got, want := c.joined(a, mid, b), est.Count(s[:a]+mid+s[b:]); got != want {
					t.Errorf("joined(%d, %q, %d) = %d, Count = %d", a, mid, b, got, want)
				}
				if got, want := c.total(), est.Count(s); got != want {
					t.Errorf("total = %d, Count = %d", got, want)
				}
				if t.Failed() {
					t.Logf("s = %q", s)
				}
			})
		}
	}
}

// contractionText strings together words, apostrophes and contraction letters, where the split
// patterns look furthest ahead, and bytes that are not UTF-8.
func contractionText(rng *rand.Rand) string {
	parts := []string{"we", "'", "re", "'s", "'ll", "'LL", "l", "e", "s", "don", "'t", "HELLO", "x", " ", "\n", ".",
		"\u0301", "日", "99", "\u2003", "\xff", "\xe2\x80", "\x80"}
	var b []byte
	for n := rng.IntN(30); n > 0; n-- {
		b = append(b, parts[rng.IntN(len(parts))]...)
	}
	return string(b)
}

// runeBoundary moves i back to where utf8.RuneStart holds.
func runeBoundary(s string, i int) int {
	if i == len(s) {
		return i
	}
	return runeStartAtOrBefore(s, i, 0)
}

// FuzzPieceCounter checks pieceCounter against full counts at any offsets where a cut may fall.
func FuzzPieceCounter(f *testing.F) {
	for _, s := range []string{"", "we're here", " \n  \n  b", "don'T\n/x", "HELLOworld ǅx \u0301a", "a\xffb \xe2\x80 c"} {
		f.Add(s, uint16(3), uint16(7), uint8(1), uint8(0))
	}
	mids := []string{"", EndMarker, MiddleMarker(3), " ", "\n", "x"}
	f.Fuzz(func(t *testing.T, s string, a, b uint16, mid, kind uint8) {
		est := mustNew(t, []v1alpha1.TokenEstimator{v1alpha1.EstimatorO200kBase, v1alpha1.EstimatorCl100kBase}[kind%2])
		i := runeBoundary(s, int(a)%(len(s)+1))
		j := runeBoundary(s, i+int(b)%(len(s)-i+1))
		c := newCounter(s, est)
		if got, want := c.span(i, j), est.Count(s[i:j]); got != want {
			t.Errorf("span(%d, %d) = %d, Count = %d", i, j, got, want)
		}
		m := mids[int(mid)%len(mids)]
		if got, want := c.joined(i, m, j), est.Count(s[:i]+m+s[j:]); got != want {
			t.Errorf("joined(%d, %q, %d) = %d, Count = %d", i, m, j, got, want)
		}
	})
}
