// Package tokenize turns text into search terms. The scorer, the index, route
// conditions (containsAnyWord) and near-duplicate detection all use it, so a
// word means the same thing everywhere: a maximal run of letters and digits,
// lower-cased, stemmed with the Snowball English stemmer.
package tokenize

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// IsWordRune reports whether r belongs to a word: a letter, a digit or a
// combining mark. EachWord's ASCII fast path agrees with it.
func IsWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// EachWord calls fn with every lower-cased letter/digit run of s, in order. The
// slice passed to fn is reused: fn must copy it to keep it.
func EachWord(s string, fn func(word []byte)) {
	var buf [64]byte
	w := buf[:0]
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				w = append(w, c)
				continue
			case c >= 'A' && c <= 'Z':
				w = append(w, c+'a'-'A')
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if IsWordRune(r) {
				w = utf8.AppendRune(w, unicode.ToLower(r))
				continue
			}
		}
		if len(w) > 0 {
			fn(w)
			w = w[:0]
		}
	}
	if len(w) > 0 {
		fn(w)
	}
}

// EachWordStarting calls fn, as EachWord does, with the words of s whose
// lower-cased first byte first marks; the others are passed over without
// being built. A caller that looks for a few terms in a long text (a term
// starts with its word's first byte) skips most of it cheaply.
func EachWordStarting(s string, first *[256]bool, fn func(word []byte)) {
	var buf [64]byte
	w := buf[:0]
	for i := 0; i < len(s); {
		// The next word's first rune, lower-cased, and where it starts.
		start, lead := i, byte(0)
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				lead = c
			case c >= 'A' && c <= 'Z':
				lead = c + 'a' - 'A'
			default:
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if !IsWordRune(r) {
				continue
			}
			var enc [utf8.UTFMax]byte
			utf8.EncodeRune(enc[:], unicode.ToLower(r))
			lead = enc[0]
		}
		for i < len(s) {
			if c := s[i]; c < utf8.RuneSelf {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
					break
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if !IsWordRune(r) {
				break
			}
			i += size
		}
		if first[lead] {
			// Lower-cased as EachWord does (TestEachWordStarting).
			w = w[:0]
			for _, r := range s[start:i] {
				if r < utf8.RuneSelf {
					if r >= 'A' && r <= 'Z' {
						r += 'a' - 'A'
					}
					w = append(w, byte(r))
				} else {
					w = utf8.AppendRune(w, unicode.ToLower(r))
				}
			}
			fn(w)
		}
	}
}

// stopwords are dropped from scored text and queries. Kept short on purpose
// (a longer list did not help on the SciFact train split), and without "not",
// which carries meaning in policies and claims.
var stopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a an and are as at be been but by for if in into is it its
		no of on or such that the their then there these they this to was were will with
		i me my we our you your he she his her him from do does did have has had
		can could would should what which who whom how when where why am so than`) {
		m[w] = struct{}{}
	}
	return m
}()

// IsStopword reports whether a lower-cased word is a stopword.
func IsStopword(word string) bool {
	_, ok := stopwords[word]
	return ok
}

// Stem returns the Snowball English stem of a lower-cased word. Results are
// cached: stemming dominates indexing time and vocabularies are Zipf-shaped.
func Stem(word string) string {
	if v, ok := stemCache.Load(word); ok {
		return v.(string)
	}
	s := stem(word)
	if stemCacheSize.Load() < maxStemCache {
		if _, loaded := stemCache.LoadOrStore(strings.Clone(word), s); !loaded {
			stemCacheSize.Add(1)
		}
	}
	return s
}

const maxStemCache = 1 << 18

var (
	stemCache     sync.Map
	stemCacheSize atomic.Int64
)

func stem(word string) string {
	// The stemmer is for English; digits, mixed tokens and long words pass through.
	if len(word) <= 2 || len(word) > 40 {
		return word
	}
	for i := 0; i < len(word); i++ {
		if c := word[i]; c < 'a' || c > 'z' {
			return word
		}
	}
	return english.Stem(word, true)
}

// Term normalises one lower-cased word into a search term; ok is false for
// stopwords and single letters, which are not indexed.
func Term(word string) (term string, ok bool) {
	if IsStopword(word) || (len(word) == 1 && word[0] >= 'a' && word[0] <= 'z') {
		return "", false
	}
	return Stem(word), true
}

// Terms appends the search terms of s to dst, in order, duplicates kept.
func Terms(dst []string, s string) []string {
	EachWord(s, func(w []byte) {
		if t, ok := Term(string(w)); ok {
			dst = append(dst, t)
		}
	})
	return dst
}

// UniqueTerms returns the distinct search terms of s in first-seen order.
func UniqueTerms(s string) []string {
	var out []string
	seen := map[string]struct{}{}
	EachWord(s, func(w []byte) {
		t, ok := Term(string(w))
		if !ok {
			return
		}
		if _, dup := seen[t]; !dup {
			seen[t] = struct{}{}
			out = append(out, t)
		}
	})
	return out
}

// WordStems returns the stems of every word of s, stopwords included, for
// whole-word matching in route conditions ("the" must be findable there).
func WordStems(s string) []string {
	var out []string
	EachWord(s, func(w []byte) { out = append(out, Stem(string(w))) })
	return out
}

// keywordStopwords is the reference project's (theaios-context-router)
// stopword list for its keyword score, word for word: imported
// configurations must rank as they did there. It differs from stopwords
// (which keeps "not" and was tuned for BM25) on purpose.
var keywordStopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a an the and or but in on at to for of with by from is it that this
		was are be have has had do does did will would could should may might can not no so if then
		than too very just about up out all its my your our their we they he she i me him her us them
		what which who when where how as into through during before after above below between each
		every both few more most other some such only own same also any been being here there`) {
		m[w] = struct{}{}
	}
	return m
}()

// keywordTrim is the punctuation the reference strips from both ends of a
// keyword; anything else (#, @, $, …) stays part of it.
const keywordTrim = ".,;:!?\"'()[]{}/-"

// isKeywordSpace is the reference's separator: Python's str.split(), which
// is Unicode White_Space plus the ASCII separators U+001C–U+001F.
func isKeywordSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pythonLower is Python's str.lower(), which the reference applies: Go's
// strings.ToLower except for the two special casings of Unicode's
// SpecialCasing.txt that are not language-specific: İ (U+0130) becomes
// "i̇" (i and a combining dot), and Σ at the end of a word becomes final ς.
func pythonLower(s string) string {
	if !strings.ContainsAny(s, "\u0130\u03a3") {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	for i, r := range s {
		switch r {
		case '\u0130':
			b.WriteString("i\u0307")
		case '\u03a3':
			if finalSigma(s, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma is Unicode's Final_Sigma condition for the Σ at byte i: a cased
// letter before it and none after it, skipping case-ignorable characters.
func finalSigma(s string, i int) bool {
	before := false
	for j := i; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !caseIgnorable(r) {
			before = cased(r)
			break
		}
	}
	if !before {
		return false
	}
	for _, r := range s[i+len("Σ"):] {
		if !caseIgnorable(r) {
			return !cased(r)
		}
	}
	return true
}

// cased is Unicode's Cased: Lu, Ll, Lt, Other_Lowercase (ª, º, ⓐ…) and
// Other_Uppercase (Ⅰ, Ⓐ…).
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable approximates Unicode's Case_Ignorable: marks, format
// characters, modifiers, and the apostrophes and dots inside words.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '^', '`', '\u00b7', '\u2018', '\u2019', '\u2024', '\u2027', '\u0387', '\u05f4', '\ufe13', '\ufe52', '\ufe55', '\uff07', '\uff0e', '\uff1a':
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// Keywords implements the reference project's keyword extraction exactly:
// the text lower-cased, split on whitespace, each token trimmed of
// keywordTrim at both ends, minus its stopwords and one-character tokens.
// Distinct, in first-seen order.
func Keywords(s string) []string {
	var out []string
	seen := map[string]struct{}{}
	for _, f := range strings.FieldsFunc(pythonLower(s), isKeywordSpace) {
		k := strings.Trim(f, keywordTrim)
		if utf8.RuneCountInString(k) <= 1 {
			continue
		}
		if _, stop := keywordStopwords[k]; stop {
			continue
		}
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, k)
		}
	}
	return out
}
