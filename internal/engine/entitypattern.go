package engine

import (
	"context"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Bounds of the work of an entity pattern on one question (api.md §1.5,
// §9). RE2 takes time linear in the text times the compiled program, so
// both are priced together, in instruction·bytes: about 10 ns each on the
// program sizes the compile limit allows.
const (
	// PatternScanCost bounds what a pattern reads of a question: it finds
	// the matches that start in the first PatternScanCost ÷ instructions
	// bytes (PatternScanBytes).
	PatternScanCost = 4 << 20
	// patternStepCost bounds one call into the regexp engine: the query's
	// context is checked between calls, so a timeout passes by at most
	// one step (a few milliseconds).
	patternStepCost = 1 << 20
	// minPatternWindow is the least a step reads past where it starts.
	minPatternWindow = 1 << 10
	// patternLookahead is what a step reads past its window: more than
	// the longest value reported, so a match that starts in the window and
	// is short enough to report is seen whole, with the text after it.
	patternLookahead = 2 * MaxEntityValueBytes
)

// PatternScanBytes is how much of a question a pattern compiled to
// instructions reads: matches must start before it (all of a question of
// MaxTextBytes for patterns of up to 64 instructions, 4,194 bytes at the
// limit of 1,000).
func PatternScanBytes(instructions int) int {
	return PatternScanCost / max(instructions, 1)
}

// entityPattern is a compiled entity pattern with its bounds.
type entityPattern struct {
	re *regexp.Regexp
	// at finds re's first match at or after the second rune of its input,
	// the first rune being the text before it: `\A(?s:.)(?s:.*?)(re)`, so
	// that \b, \B and ^ see the real text before a step's start.
	at *regexp.Regexp
	// lit is in every match of re (requiredLiteral): without it in the
	// text, re cannot match and is not run.
	lit string
	// scan is PatternScanBytes; window the bytes a step may start matches
	// in; lookahead what a step reads past its window (patternLookahead).
	scan, window, lookahead int
}

// newEntityPattern compiles an entity pattern under the rules of
// v1alpha1.CompileEntityPattern.
func newEntityPattern(pattern string) (*entityPattern, error) {
	re, insts, err := v1alpha1.CompileEntityPattern(pattern)
	if err != nil {
		return nil, err
	}
	// The parsed form prints as a self-contained expression (an open \Q of
	// the source would swallow the closing parenthesis).
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	at, err := regexp.Compile(`\A(?s:.)(?s:.*?)(` + parsed.String() + `)`)
	if err != nil {
		return nil, err
	}
	return &entityPattern{
		re:        re,
		at:        at,
		lit:       requiredLiteral(pattern),
		scan:      PatternScanBytes(insts),
		window:    max(patternStepCost/max(insts, 1), minPatternWindow),
		lookahead: patternLookahead,
	}, nil
}

// find appends to out the matches of p in text that start in its first
// p.scan bytes: leftmost-first and non-overlapping, at most MaxEntities+1
// of them counted, those longer than MaxEntityValueBytes and empty ones not
// reported. It stops with ctx's error when ctx ends.
//
// The text is matched in steps: each starts where the previous match ended
// (or its window did), reads at most window+patternLookahead bytes, and
// keeps a match that starts within its window, or anywhere when it reached
// the end of the text. A match kept is the one a single scan of the whole
// text finds there, unless that one is longer than p.lookahead, which
// is not reported either way (it may hide a shorter match at the same
// start, which a step then reports).
func (p *entityPattern) find(ctx context.Context, text, typ string, out []Entity) ([]Entity, error) {
	limit := min(len(text), p.scan)
	pos, found := 0, 0
	for pos < limit && found <= MaxEntities {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		end := min(len(text), pos+p.window+p.lookahead)
		a, b, ok := p.next(text, pos, end)
		if ok && a >= limit {
			break
		}
		if !ok || (a >= pos+p.window && end < len(text)) {
			if end == len(text) {
				break
			}
			// No match starts in the window: the next step starts where a
			// match was seen, or after the window, on a rune.
			next := pos + p.window
			if ok {
				next = a
			}
			for next > pos+1 && !utf8.RuneStart(text[next]) {
				next--
			}
			pos = next
			continue
		}
		if a == b {
			// An empty match (`\bx?` between two words) is no entity.
			_, w := utf8.DecodeRuneInString(text[a:])
			pos = a + max(w, 1)
			continue
		}
		found++
		if b-a <= MaxEntityValueBytes {
			out = append(out, Entity{Type: typ, Value: text[a:b], Start: a, End: b})
		}
		pos = b
	}
	return out, nil
}

// next returns the first match of p in text[:end] starting at or after pos,
// with pos's context (the rune before it) as in the whole text.
func (p *entityPattern) next(text string, pos, end int) (a, b int, ok bool) {
	if pos == 0 {
		m := p.re.FindStringIndex(text[:end])
		if m == nil {
			return 0, 0, false
		}
		return m[0], m[1], true
	}
	_, w := utf8.DecodeLastRuneInString(text[:pos])
	from := pos - w
	m := p.at.FindStringSubmatchIndex(text[from:end])
	if m == nil {
		return 0, 0, false
	}
	return from + m[2], from + m[3], true
}
