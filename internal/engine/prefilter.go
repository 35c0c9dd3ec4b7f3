package engine

import (
	"regexp/syntax"
	"unicode/utf8"
)

// requiredLiteral returns a string every match of pattern contains ("" when
// none is found): a query whose text lacks it skips the regular expression,
// and most questions lack the `-` of a ticket pattern like
// `\b[A-Z][A-Z0-9]+-[0-9]+\b`.
func requiredLiteral(pattern string) string {
	re, err := syntax.Parse(pattern, syntax.Perl) // the flags regexp.Compile uses
	if err != nil {
		return ""
	}
	return literalIn(re.Simplify())
}

// literalIn is the longest literal that every match of re contains.
func literalIn(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral, syntax.OpCharClass:
		if runes, ok := exactRunes(re); ok {
			return literalString(runes)
		}
	case syntax.OpCapture, syntax.OpPlus:
		return literalIn(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return literalIn(re.Sub[0])
		}
	case syntax.OpConcat:
		// Adjacent single-spelling parts join into one literal (x{3} is
		// simplified to three x); any other part is searched on its own.
		best := ""
		var run []rune
		for i, sub := range re.Sub {
			if runes, ok := exactRunes(sub); ok {
				run = append(run, runes...)
			} else if l := literalIn(sub); len(l) > len(best) {
				best = l
			}
			if _, ok := exactRunes(sub); !ok || i == len(re.Sub)-1 {
				if l := literalString(run); len(l) > len(best) {
					best = l
				}
				run = run[:0]
			}
		}
		return best
	}
	return ""
}

// exactRunes returns the one string re matches, for a case-sensitive
// literal or a one-rune class.
func exactRunes(re *syntax.Regexp) ([]rune, bool) {
	switch {
	case re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0:
		return re.Rune, true
	case re.Op == syntax.OpCharClass && len(re.Rune) == 2 && re.Rune[0] == re.Rune[1]:
		return re.Rune[:1], true
	}
	return nil, false
}

// literalString spells the longest part of runes that a text must contain
// as UTF-8. The regexp reads an invalid byte as U+FFFD, so U+FFFD in a
// pattern may match text without its UTF-8: the literal stops there.
func literalString(runes []rune) string {
	best, cur := "", []byte(nil)
	for i, r := range runes {
		if r != utf8.RuneError && utf8.ValidRune(r) {
			cur = utf8.AppendRune(cur, r)
		}
		if r == utf8.RuneError || !utf8.ValidRune(r) || i == len(runes)-1 {
			if len(cur) > len(best) {
				best = string(cur)
			}
			cur = cur[:0]
		}
	}
	return best
}
