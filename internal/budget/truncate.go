package budget

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EndMarker follows the kept prefix of a text cut by TruncateEnd.
const EndMarker = "\n[…truncated]"

// MiddleMarker returns the marker TruncateMiddle puts between head and tail:
// "\n[… N tokens omitted …]\n", N being the estimated size of the text it replaces.
func MiddleMarker(omitted int) string {
	return "\n[… " + strconv.Itoa(omitted) + " tokens omitted …]\n"
}

// giantWordRunes is the length above which a whitespace-free run (URL, hash, base64, minified code)
// may be cut inside. Cutting at word boundaries wastes at most one word of budget; for runs longer
// than this the waste would be unbounded, and a tokenizer splits them into many tokens anyway.
const giantWordRunes = 32

// lineSnapDivisor bounds what TruncateMiddle gives up to make the head end, and the tail start, on a
// line boundary: at most 1/lineSnapDivisor of that side's bytes.
const lineSnapDivisor = 8

// middleRounds bounds the passes TruncateMiddle makes to spend budget left over by rounding.
const middleRounds = 4

// TruncateEnd returns the longest prefix of s followed by EndMarker whose estimated size (marker
// included) is <= limit, with the number of tokens of the result. The prefix ends at a word boundary
// (trailing whitespace dropped); only a word longer than giantWordRunes runes is cut inside, at a rune
// boundary. ok is false, and out empty, when not even the marker plus the first word (or the first
// rune of a giant first word) fits; the caller should drop the text then. When est.Count(s) <= limit
// s is returned unchanged.
func TruncateEnd(s string, limit int, est Estimator) (out string, tokens int, ok bool) {
	c := newCounter(s, est)
	if n, fits := c.within(limit); fits {
		return s, n, true
	}
	bound := c.bound()
	fits := func(cut int) bool { return cut <= bound && c.joined(cut, EndMarker, len(s)) <= limit }
	cut := headCut(s, wordSpans(s[:wordEndAfter(s, bound)]), fits)
	if cut == 0 {
		return "", 0, false
	}
	out = s[:cut] + EndMarker
	tokens = c.joined(cut, EndMarker, len(s))
	if tokens > limit { // unreachable for a deterministic estimator: the search measured this cut
		return "", 0, false
	}
	return out, tokens, true
}

// wordEndAfter returns the end of the first word that ends after offset i (len(s) if none). The
// words up to it are all a cut bounded by i can end in or be cut inside, and the first out of reach.
func wordEndAfter(s string, i int) int {
	q := strings.IndexFunc(s[i:], func(r rune) bool { return !unicode.IsSpace(r) })
	if q < 0 {
		return len(s)
	}
	q += i
	if e := strings.IndexFunc(s[q:], unicode.IsSpace); e >= 0 {
		return q + e
	}
	return len(s)
}

// TruncateMiddle keeps a head and a tail of s of about equal estimated size and puts
// MiddleMarker(N) between them, N being est.Count of the omitted text, so that the result (marker
// included) is <= limit. Cuts fall on word boundaries and move to line boundaries when that costs
// little; only words longer than giantWordRunes runes are cut inside. The head is never empty: if
// only one side fits, the head is kept. ok is false, and out empty, when not even the marker plus
// the first word (or the first rune of a giant first word) fits. When est.Count(s) <= limit s is
// returned unchanged.
func TruncateMiddle(s string, limit int, est Estimator) (out string, tokens int, ok bool) {
	c := newCounter(s, est)
	total := c.total()
	if total <= limit {
		return s, total, true
	}
	words := wordSpans(s)

	// For estimators that are subadditive over the marker's newlines (all built-in ones are), head
	// and tail within budget minus the largest possible marker always fit. Rounding leaves slack,
	// which the next rounds hand out until nothing more fits.
	budget := max(limit-est.Count(MiddleMarker(total)), 0)
	for range middleRounds {
		h, t := balancedCuts(s, words, c, budget-budget/2, budget/2)
		cand, n := assembleMiddle(s, h, t, c)
		if n > limit {
			break
		}
		// A split that keeps only a tail is no answer: the head (where a heading or the gist
		// usually is) must survive; the fallback below keeps a head alone instead.
		if h > 0 {
			out, tokens, ok = cand, n, true
		}
		slack := limit - n
		if slack == 0 {
			break
		}
		budget += slack
	}
	if ok {
		return out, tokens, true
	}

	// The balanced split can lose a word to rounding on each side, the first word may not fit
	// in half the budget, or the estimator is not subadditive: fall back to a head alone, with
	// everything after it omitted.
	fits := func(cut int) bool {
		_, n := assembleMiddle(s, cut, len(s), c)
		return n <= limit
	}
	cut := headCut(s, words, fits)
	if cut == 0 {
		return "", 0, false
	}
	out, tokens = assembleMiddle(s, cut, len(s), c)
	if tokens > limit {
		return "", 0, false
	}
	return out, tokens, true
}

// balancedCuts returns the end of the largest head costing <= headBudget and the start of the
// largest tail costing <= tailBudget, snapped to line boundaries where cheap. h <= t always.
func balancedCuts(s string, words []span, c counter, headBudget, tailBudget int) (h, t int) {
	h = headCut(s, words, func(cut int) bool { return c.span(0, cut) <= headBudget })
	t = tailCut(s, words, func(cut int) bool { return c.span(cut, len(s)) <= tailBudget })
	h = snapHeadToLine(s, h)
	t = snapTailToLine(s, t)
	if t < h { // budgets grown from slack can exceed the text; the caller's measurement rejects it
		t = h
	}
	return h, t
}

func assembleMiddle(s string, h, t int, c counter) (string, int) {
	marker := MiddleMarker(c.span(h, t))
	return s[:h] + marker + s[t:], c.joined(h, marker, t)
}

// span is a maximal run of non-space runes, as byte offsets [start, end).
type span struct{ start, end int }

// wordSpans splits s the way strings.Fields does and returns where the fields are.
func wordSpans(s string) []span {
	spans := make([]span, 0, whitespaceFields{}.Count(s)) // one allocation instead of regrowing
	start := -1
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if unicode.IsSpace(r) {
			if start >= 0 {
				spans = append(spans, span{start, i})
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		spans = append(spans, span{start, len(s)})
	}
	return spans
}

// headCut returns the largest cut for which fits(cut) holds, assuming fits is monotone (true up to
// some point): the end of a word, or a rune boundary inside the first word that does not fit when
// that word is giant. 0 means nothing fits. It costs O(log n) calls of fits.
func headCut(s string, words []span, fits func(int) bool) int {
	// sort.Search only returns i > 0 after fits(words[i-1].end) was measured true.
	i := sort.Search(len(words), func(i int) bool { return !fits(words[i].end) })
	cut := 0
	if i > 0 {
		cut = words[i-1].end
	}
	if i < len(words) && isGiant(s, words[i]) {
		w := words[i]
		lo := w.start + firstRuneLen(s[w.start:])
		k := sort.Search(w.end-lo, func(k int) bool { return !fits(runeStartAtOrBefore(s, lo+k, lo)) })
		if k > 0 {
			cut = runeStartAtOrBefore(s, lo+k-1, lo)
		}
	}
	return cut
}

// tailCut mirrors headCut: the smallest cut for which fits(cut) holds, assuming fits is monotone
// (false up to some point): the start of a word, or a rune boundary inside the last word that does
// not fit when that word is giant. len(s) means nothing fits.
func tailCut(s string, words []span, fits func(int) bool) int {
	j := sort.Search(len(words), func(j int) bool { return fits(words[j].start) })
	cut := len(s)
	if j < len(words) {
		cut = words[j].start
	}
	if j > 0 && isGiant(s, words[j-1]) {
		w := words[j-1]
		lo := w.start + firstRuneLen(s[w.start:])
		k := sort.Search(w.end-lo, func(k int) bool { return fits(runeStartAtOrBefore(s, lo+k, lo)) })
		if k < w.end-lo {
			cut = runeStartAtOrBefore(s, lo+k, lo)
		}
	}
	return cut
}

func isGiant(s string, w span) bool {
	return w.end-w.start > giantWordRunes && utf8.RuneCountInString(s[w.start:w.end]) > giantWordRunes
}

func firstRuneLen(s string) int {
	_, size := utf8.DecodeRuneInString(s)
	return size
}

// runeStartAtOrBefore moves i back to the start of the rune it falls in, but not below lo (itself a
// rune boundary). A byte that utf8.RuneStart accepts can never continue a valid rune, so the result
// never splits one; in invalid input it may join stray continuation bytes, which is harmless.
func runeStartAtOrBefore(s string, i, lo int) int {
	for i > lo && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// snapHeadToLine moves a head cut back to the end of the previous line's text when the cut is
// mid-line and that drops at most 1/lineSnapDivisor of the head.
func snapHeadToLine(s string, h int) int {
	if h == 0 || lineBreakAfter(s, h) {
		return h
	}
	nl := strings.LastIndexByte(s[:h], '\n')
	if nl < 0 {
		return h
	}
	e := len(strings.TrimRightFunc(s[:nl], unicode.IsSpace))
	if e == 0 || h-e > h/lineSnapDivisor {
		return h
	}
	return e
}

// snapTailToLine moves a tail cut forward to the first word of the next line when the cut is
// mid-line and that drops at most 1/lineSnapDivisor of the tail.
func snapTailToLine(s string, t int) int {
	if t == len(s) || lineBreakBefore(s, t) {
		return t
	}
	nl := strings.IndexByte(s[t:], '\n')
	if nl < 0 {
		return t
	}
	rest := s[t+nl+1:]
	b := len(s) - len(strings.TrimLeftFunc(rest, unicode.IsSpace))
	if b == len(s) || b-t > (len(s)-t)/lineSnapDivisor {
		return t
	}
	return b
}

// lineBreakAfter reports whether the whitespace run starting at i reaches a newline or the end of s.
func lineBreakAfter(s string, i int) bool {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\n' {
			return true
		}
		if !unicode.IsSpace(r) {
			return false
		}
		i += size
	}
	return true
}

// lineBreakBefore reports whether the whitespace run ending at i starts at a newline or the start of s.
func lineBreakBefore(s string, i int) bool {
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if r == '\n' {
			return true
		}
		if !unicode.IsSpace(r) {
			return false
		}
		i -= size
	}
	return true
}
