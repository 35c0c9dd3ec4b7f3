package budget

import (
	"sort"
	"strings"
	"unicode"
)

// counter measures the texts a truncation of s tries: slices of s, and s with a marker in place of
// a cut. A truncation measures dozens of them; for a byte-pair encoding, recounting each from
// scratch would cost more than the rest of a query. Offsets are where utf8.RuneStart holds (or
// len(s)), as every cut of this package is: a cut never splits a rune.
type counter interface {
	// within reports whether est.Count(s) <= limit, with the count when it is.
	within(limit int) (tokens int, fits bool)
	// bound, after within(limit) reported false, is a byte offset past which no cut of s fits in
	// limit, marker or not; len(s) when nothing is known.
	bound() int
	total() int
	// span is est.Count(s[a:b]).
	span(a, b int) int
	// joined is est.Count(s[:h] + mid + s[t:]). It is fast when mid starts with white space, or is
	// empty and t == len(s), as every marker and cut of this package does.
	joined(h int, mid string, t int) int
}

func newCounter(s string, est Estimator) counter {
	if p, ok := est.(piecewise); ok {
		return &pieceCounter{s: s, est: p}
	}
	return plainCounter{s, est}
}

// plainCounter counts every text in full.
type plainCounter struct {
	s   string
	est Estimator
}

func (c plainCounter) within(limit int) (int, bool) {
	n := c.est.Count(c.s)
	return n, n <= limit
}
func (c plainCounter) bound() int        { return len(c.s) }
func (c plainCounter) total() int        { return c.est.Count(c.s) }
func (c plainCounter) span(a, b int) int { return c.est.Count(c.s[a:b]) }
func (c plainCounter) joined(h int, mid string, t int) int {
	return c.est.Count(c.s[:h] + mid + c.s[t:])
}

// piecewise is an Estimator whose count of a text is the sum of the counts of its pieces, the piece
// starting at i being decided by the text from i on (a split pattern without look-behind).
type piecewise interface {
	Estimator
	// piece returns the end of the piece of s that starts at i (< len(s)) and its tokens.
	piece(s string, i int) (end, tokens int)
}

// pieceCounter indexes the pieces of s, as far as a question needs, and answers from the index plus
// a recount of the few pieces around each cut:
//
//   - The pieces of s before the one holding the last non-space byte of s[:b] are pieces of s[:b]
//     too, and of s[:b]+mid when mid starts with white space: the split patterns decide a piece
//     from its own characters and the one after it, and a word or symbol run stops at white space
//     whatever follows. So only s[p:b]+mid is recounted, p being that piece's start.
//   - Splitting from an offset that is not a piece start soon reaches one that is (usually after
//     one piece); from there on both splits read the same text, so they agree to the end.
type pieceCounter struct {
	s       string
	est     piecewise
	pieces  []pieceMark // every indexed piece, in order
	indexed int         // s[:indexed] is split; indexed is a piece boundary
	tokens  int         // tokens of s[:indexed]

	mid       string // the marker of the last joined
	midCounts []int  // est.Count(mid[k:]), -1 until counted
}

type pieceMark struct {
	start  int // where the piece starts
	before int // tokens before it
}

// index splits s until it has passed offset to (or reached the end).
func (c *pieceCounter) index(to int) {
	for c.indexed < to && c.indexed < len(c.s) {
		c.step()
	}
}

func (c *pieceCounter) step() {
	if c.pieces == nil {
		c.pieces = make([]pieceMark, 0, len(c.s)/4+1) // about one piece per 4 bytes of prose
	}
	end, n := c.est.piece(c.s, c.indexed)
	c.pieces = append(c.pieces, pieceMark{c.indexed, c.tokens})
	c.indexed, c.tokens = end, c.tokens+n
}

// after returns the index of the first indexed piece starting at or after q.
func (c *pieceCounter) after(q int) int {
	return sort.Search(len(c.pieces), func(k int) bool { return c.pieces[k].start >= q })
}

func (c *pieceCounter) within(limit int) (int, bool) {
	for c.indexed < len(c.s) && c.tokens <= limit {
		c.step()
	}
	return c.tokens, c.tokens <= limit
}

// bound is where within stopped, a piece boundary with s[:indexed] over the limit: a cut past it
// keeps every piece before it (see restart), so it is over the limit too.
func (c *pieceCounter) bound() int { return c.indexed }

func (c *pieceCounter) total() int {
	c.index(len(c.s))
	return c.tokens
}

// tokensAt returns the tokens of s before offset q when q is a piece boundary.
func (c *pieceCounter) tokensAt(q int) (int, bool) {
	c.index(q)
	if q == c.indexed {
		return c.tokens, true
	}
	if k := c.after(q); k < len(c.pieces) && c.pieces[k].start == q {
		return c.pieces[k].before, true
	}
	return 0, false
}

// restart returns the start of the piece holding the last non-space byte of s[:b] (0 if none), and
// the tokens before it.
func (c *pieceCounter) restart(b int) (int, int) {
	w := len(strings.TrimRightFunc(c.s[:b], unicode.IsSpace))
	if w == 0 {
		return 0, 0
	}
	c.index(w)
	m := c.pieces[c.after(w)-1] // the last piece starting before w
	return m.start, m.before
}

// count splits x from i to its end and returns its tokens.
func (c *pieceCounter) count(x string, i int) int {
	n := 0
	for i < len(x) {
		end, k := c.est.piece(x, i)
		i, n = end, n+k
	}
	return n
}

func (c *pieceCounter) span(a, b int) int {
	p, atP := len(c.s), 0 // s itself ends where its last piece does
	if b < len(c.s) {
		p, atP = c.restart(b)
	} else {
		atP = c.total()
	}
	x := c.s[:b] // splitting s[:b] from a is splitting s[a:b]
	n := 0
	for i := a; i < b; {
		if i <= p {
			if at, ok := c.tokensAt(i); ok {
				return n + atP - at + c.count(x, p)
			}
		}
		end, k := c.est.piece(x, i)
		i, n = end, n+k
	}
	return n
}

func (c *pieceCounter) joined(h int, mid string, t int) int {
	if mid == "" && t < len(c.s) || mid != "" && !unicode.IsSpace(firstRune(mid)) {
		return c.est.Count(c.s[:h] + mid + c.s[t:]) // outside what restart vouches for
	}
	p, n := c.restart(h)
	x := c.s[p:h] + mid + c.s[t:]
	midAt := h - p                 // x[midAt:midAt+len(mid)] == mid
	off := len(x) - (len(c.s) - t) // x[off+j] == s[t+j]
	for i := 0; i < len(x); {
		if i >= off {
			if at, ok := c.tokensAt(t + i - off); ok {
				return n + c.total() - at
			}
		} else if i >= midAt && t == len(c.s) {
			// The rest is a suffix of mid alone, the same for every cut tried.
			return n + c.midTokens(mid, i-midAt)
		}
		end, k := c.est.piece(x, i)
		i, n = end, n+k
	}
	return n
}

// midTokens is est.Count(mid[k:]), remembered for the last mid.
func (c *pieceCounter) midTokens(mid string, k int) int {
	if mid != c.mid {
		c.mid, c.midCounts = mid, make([]int, len(mid))
		for i := range c.midCounts {
			c.midCounts[i] = -1
		}
	}
	if c.midCounts[k] < 0 {
		c.midCounts[k] = c.est.Count(mid[k:])
	}
	return c.midCounts[k]
}

func firstRune(s string) rune {
	for _, r := range s {
		return r
	}
	return -1
}
