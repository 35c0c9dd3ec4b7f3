package engine

import (
	"regexp/syntax"
	"slices"
	"strings"
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

// RequiredLiterals returns literals one of which every match of re holds,
// and fold when they are to be found in any case (lower-cased then; only
// ASCII ones are), or nil when there are none (a class, an optional part).
// re is parsed as the caller compiles it. It is the rule of
// requiredLiteral, grown for case folding and alternatives: the grep
// drill-down of sessions looks for the literals before it runs the
// expression on a line.
func RequiredLiterals(re *syntax.Regexp) (lits []string, fold bool) {
	lits, fold, _ = literalsIn(re.Simplify())
	return lits, fold
}

// literalsIn is RequiredLiterals; ok false when there are none.
func literalsIn(re *syntax.Regexp) (lits []string, fold, ok bool) {
	switch re.Op {
	case syntax.OpLiteral, syntax.OpCharClass:
		if runes, f, exact := spelling(re); exact {
			if l := foldedString(runes, f); l != "" {
				return []string{l}, f, true
			}
		}
	case syntax.OpCapture, syntax.OpPlus:
		return literalsIn(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return literalsIn(re.Sub[0])
		}
	case syntax.OpConcat:
		return concatLiterals(re.Sub)
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			l, f, good := literalsIn(sub)
			if !good {
				return nil, false, false
			}
			lits, fold = append(lits, l...), fold || f
		}
		if fold {
			for i, l := range lits {
				lits[i] = strings.ToLower(l) // all ASCII
			}
		}
		return lits, fold, true
	}
	return nil, false, false
}

// concatLiterals is literalsIn of a concatenation: adjacent parts of one
// spelling join into one literal (in any case when one of them is); of the
// candidates, the set whose shortest literal is longest.
func concatLiterals(subs []*syntax.Regexp) (lits []string, fold, ok bool) {
	best := -1
	consider := func(l []string, f bool) {
		if short := len(slices.MinFunc(l, func(a, b string) int { return len(a) - len(b) })); short > best {
			lits, fold, ok, best = l, f, true, short
		}
	}
	var run []rune
	runFold := false
	for i, sub := range subs {
		runes, f, exact := spelling(sub)
		if exact {
			run, runFold = append(run, runes...), runFold || f
		} else if l, f, good := literalsIn(sub); good {
			consider(l, f)
		}
		if !exact || i == len(subs)-1 {
			if l := foldedString(run, runFold); l != "" {
				consider([]string{l}, runFold)
			}
			run, runFold = run[:0], false
		}
	}
	return lits, fold, ok
}

// spelling returns the one spelling of a literal or a one-rune class, and
// fold when it matches in any case; a folded literal past ASCII has none.
// (Two runes past ASCII fold to ASCII letters, U+212A to k and U+017F to
// s: a caller that looks for a folded literal in a text holding them must
// run the expression instead.)
func spelling(re *syntax.Regexp) (runes []rune, fold, ok bool) {
	if runes, ok := exactRunes(re); ok {
		return runes, false, true
	}
	if re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase == 0 {
		return nil, false, false
	}
	for _, r := range re.Rune {
		if r >= utf8.RuneSelf {
			return nil, false, false
		}
	}
	return re.Rune, true, true
}

// foldedString is literalString, in lower case when fold.
func foldedString(runes []rune, fold bool) string {
	l := literalString(runes)
	if fold {
		l = strings.ToLower(l)
	}
	return l
}
