// Package budget counts tokens and truncates text to a token limit.
//
// The engine's budget stage uses it to fit chunks into the remaining context window, the chunker
// uses it to enforce maxChunkTokens and session packs to fit their phase budgets. CharsDiv4, Words
// and Whitespace are tokenizer-free estimates: cheap, and good enough to keep a response under a
// model's window when the budget leaves a margin (reserveTokens). O200kBase and Cl100kBase count
// exactly what OpenAI's byte-pair encodings produce.
package budget

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Estimator counts tokens of a text. Implementations must be monotone on prefixes cut at the
// boundaries this package cuts at, and fast (no allocations on the hot path).
type Estimator interface {
	Count(s string) int
}

// New returns the estimator for an API enum value:
//
//	CharsDiv4  = ceil(runes / 4)
//	Words      = ceil(words * 4 / 3); a word is a maximal run of letters/digits (combining marks
//	             included), every other non-space rune counts as one word, and so does every
//	             Han/Hiragana/Katakana character
//	Whitespace = number of whitespace-separated fields (strings.Fields semantics)
//	O200kBase  = tokens of OpenAI's o200k_base encoding (GPT-4o and later)
//	Cl100kBase = tokens of OpenAI's cl100k_base encoding (GPT-4, GPT-3.5)
//
// "" means CharsDiv4. The first New of a byte-pair encoding loads its vocabulary (see lazyEncoding).
func New(kind v1alpha1.TokenEstimator) (Estimator, error) {
	switch kind {
	case "", v1alpha1.EstimatorCharsDiv4:
		return charsDiv4{}, nil
	case v1alpha1.EstimatorWords:
		return words{}, nil
	case v1alpha1.EstimatorWhitespace:
		return whitespaceFields{}, nil
	case v1alpha1.EstimatorO200kBase:
		return bpe{o200kBase.get()}, nil
	case v1alpha1.EstimatorCl100kBase:
		return bpe{cl100kBase.get()}, nil
	}
	names := make([]string, 0, 8)
	for _, k := range v1alpha1.TokenEstimators() {
		names = append(names, string(k))
	}
	return nil, fmt.Errorf("unknown token estimator %q: want one of %s", string(kind), strings.Join(names, ", "))
}

// charsDiv4 is the classic "4 characters per token" rule of thumb. Invalid UTF-8 bytes count as one
// rune each, as utf8.RuneCountInString does.
type charsDiv4 struct{}

func (charsDiv4) Count(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }

// ASCII classes for the Words estimator; the table keeps the common case free of unicode lookups.
const (
	classSymbol = iota // punctuation, symbols, control characters: one word each
	classSpace
	classWord // letters and digits
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			t[c] = classSpace
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = classWord
		default:
			t[c] = classSymbol
		}
	}
	return t
}()

// words approximates subword tokenizers: they keep short words whole, split off punctuation and
// spend about 4 tokens per 3 words of English prose.
type words struct{}

func (words) Count(s string) int {
	n := 0
	inWord := false
	for i := 0; i < len(s); {
		var class uint8
		if c := s[i]; c < utf8.RuneSelf {
			class = asciiClass[c]
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			class = unicodeClass(r)
			if class == classWord && isIdeograph(r) {
				// Scripts written without spaces would otherwise count a whole sentence as one
				// word; tokenizers spend at least one token per such character.
				class = classSymbol
			}
		}
		switch class {
		case classSpace:
			inWord = false
		case classWord:
			if !inWord {
				n++
				inWord = true
			}
		default:
			n++
			inWord = false
		}
	}
	return (n*4 + 2) / 3
}

func unicodeClass(r rune) uint8 {
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r):
		// Marks keep decomposed accents ("e" + U+0301) and Indic vowel signs inside their word.
		return classWord
	}
	return classSymbol
}

func isIdeograph(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// whitespaceFields counts what strings.Fields would return, without building the slice.
type whitespaceFields struct{}

func (whitespaceFields) Count(s string) int {
	n := 0
	inField := false
	for i := 0; i < len(s); {
		var space bool
		if c := s[i]; c < utf8.RuneSelf {
			space = asciiClass[c] == classSpace
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			space = unicode.IsSpace(r)
		}
		if space {
			inField = false
		} else if !inField {
			n++
			inField = true
		}
	}
	return n
}
