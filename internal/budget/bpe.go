package budget

import (
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer/codec"
)

// bpe counts the tokens OpenAI's byte-pair encodings produce (o200k_base for GPT-4o and later,
// cl100k_base for GPT-4 and GPT-3.5): the count a model bills and fits in its window.
//
// The vocabularies come from github.com/tiktoken-go/tokenizer, which embeds them in the binary.
// Its own tokenizer runs a backtracking regexp that allocates for every piece (about 115 µs of CPU
// and 1,300 allocations per KiB of English); this package splits text with a scanner that follows
// the encodings' split patterns alternative by alternative, looks tokens up in a packed table and
// merges byte pairs in a stack buffer: about 7 µs per KiB, no allocation. Tests check it against
// that library token for token, and against tiktoken's published ids.
//
// Byte-pair counts of prefixes are not provably monotone, as the Estimator contract asks; where one
// is not, TruncateEnd's search may stop a word short, never over the limit (every cut it returns is
// measured). TestTruncateProperties and FuzzTruncate find no such case at the word ends it cuts at.
type bpe struct{ enc *bpeEncoding }

func (b bpe) Count(s string) int {
	n := 0
	for i := 0; i < len(s); {
		j := b.enc.split(s, i)
		n += b.enc.pieceTokens(s[i:j])
		i = j
	}
	return n
}

// piece makes bpe piecewise: the split patterns have no look-behind and pieces merge alone.
func (b bpe) piece(s string, i int) (int, int) {
	j := b.enc.split(s, i)
	return j, b.enc.pieceTokens(s[i:j])
}

// bpeEncoding is one vocabulary with its split rule.
type bpeEncoding struct {
	ranks *vocab // token bytes -> rank, which is also the token id
	// split returns the end of the piece that starts at i (i < len(s)); pieces are merged
	// separately, never across their boundaries.
	split func(s string, i int) int
}

// lazyEncoding loads a vocabulary on first use: a process whose routers never name the encoding
// spends neither the time (about 0.2 s) nor the memory (about 15 MB for o200k_base, 8 MB for
// cl100k_base) on it.
type lazyEncoding struct {
	once  sync.Once
	enc   *bpeEncoding
	load  func() *codec.Codec
	split func(s string, i int) int
}

var (
	o200kBase  = &lazyEncoding{load: codec.NewO200kBase, split: splitO200k}
	cl100kBase = &lazyEncoding{load: codec.NewCl100kBase, split: splitCl100k}
)

func (l *lazyEncoding) get() *bpeEncoding {
	l.once.Do(func() { l.enc = &bpeEncoding{ranks: vocabulary(l.load()), split: l.split} })
	return l.enc
}

// vocabulary reads a codec's ranks back through Decode: the library keeps its map unexported,
// and ranks are dense from 0, so the first id that does not decode ends the vocabulary.
func vocabulary(c *codec.Codec) *vocab {
	toks := make([]string, 0, 1<<18) // o200k_base has 199,998
	short := 0
	for id := []uint{0}; ; id[0]++ {
		tok, err := c.Decode(id)
		if err != nil {
			break
		}
		toks = append(toks, tok)
		if len(tok) <= shortMax {
			short++
		}
	}
	ranks := newVocab(short, len(toks)-short)
	for id, tok := range toks {
		ranks.add(tok, uint32(id))
	}
	if n := ranks.size(); n < 256 || n != len(toks) {
		// Every byte is a token, and no two ids share one; anything else means the library
		// changed shape.
		panic(fmt.Sprintf("budget: %s vocabulary has %d distinct tokens for %d ids", c.GetName(), n, len(toks)))
	}
	return ranks
}

// noRank marks a pair of parts that is not a token.
const noRank = ^uint32(0)

func (e *bpeEncoding) rank(tok string) uint32 {
	if r, ok := e.ranks.lookup(tok); ok {
		return r
	}
	return noRank
}

// scanPieceMax is the longest piece merged in a stack buffer by repeated scans (quadratic, but
// fast for the short pieces prose is made of); longer ones use mergeLong.
const scanPieceMax = 128

type bpePart struct {
	start int32
	rank  uint32 // rank of this part joined with the next one
}

// pieceTokens is the number of tokens byte-pair merging turns piece into.
func (e *bpeEncoding) pieceTokens(piece string) int {
	if len(piece) <= 1 {
		return len(piece) // every byte is a token
	}
	if _, ok := e.ranks.lookup(piece); ok {
		return 1
	}
	if len(piece) > scanPieceMax {
		return len(e.mergeLong(piece)) - 1
	}
	var buf [scanPieceMax + 1]bpePart
	return len(e.mergeScan(piece, buf[:0])) - 1
}

// mergeScan is tiktoken's merge: join the adjacent pair of parts whose concatenation has the lowest
// rank (the leftmost of equals) until no pair is a token. It returns the part boundaries, the last
// being len(piece).
func (e *bpeEncoding) mergeScan(piece string, parts []bpePart) []bpePart {
	for i := range len(piece) + 1 {
		parts = append(parts, bpePart{int32(i), noRank})
	}
	for i := 0; i+2 < len(parts); i++ {
		parts[i].rank = e.rank(piece[i : i+2])
	}
	pairRank := func(i int) uint32 {
		if i+2 < len(parts) {
			return e.rank(piece[parts[i].start:parts[i+2].start])
		}
		return noRank
	}
	for {
		best, at := noRank, -1
		for i, p := range parts[:len(parts)-1] {
			if p.rank < best {
				best, at = p.rank, i
			}
		}
		if at < 0 {
			return parts
		}
		parts = append(parts[:at+1], parts[at+2:]...)
		parts[at].rank = pairRank(at)
		if at > 0 {
			parts[at-1].rank = pairRank(at - 1)
		}
	}
}

// mergeLong gives mergeScan's result in O(n log n) for long pieces (a run of spaces, dashes or
// letters without a digit can be megabytes): parts form a linked list and candidate pairs sit in
// a min-heap ordered by rank, then position. It allocates; pieces this long are rare.
func (e *bpeEncoding) mergeLong(piece string) []bpePart {
	n := int32(len(piece))
	next := make([]int32, n+1) // next[i]: start of the part after the one starting at i; -1 after the last
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1) // rank of the part starting at i joined with the next; noRank if none or gone
	for i := range n + 1 {
		next[i], prev[i], rank[i] = i+1, i-1, noRank
	}
	next[n] = -1
	pairRank := func(i int32) uint32 {
		j := next[i]
		if j < 0 || next[j] < 0 {
			return noRank
		}
		return e.rank(piece[i:next[j]])
	}
	h := pairHeap(make([]pairCand, 0, n))
	for i := int32(0); i+2 <= n; i++ {
		if rank[i] = pairRank(i); rank[i] != noRank {
			h = append(h, pairCand{rank[i], i})
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		// A rank names one token, so an entry whose rank no longer matches its part is stale.
		if rank[c.at] != c.rank {
			continue
		}
		i := c.at
		j := next[i]
		k := next[j]
		rank[j] = noRank
		next[i] = k
		if k >= 0 {
			prev[k] = i
		}
		for _, b := range [2]int32{i, prev[i]} {
			if b < 0 {
				continue
			}
			if rank[b] = pairRank(b); rank[b] != noRank {
				h.push(pairCand{rank[b], b})
			}
		}
	}
	var parts []bpePart
	for i := int32(0); i >= 0; i = next[i] {
		parts = append(parts, bpePart{i, rank[i]})
	}
	return parts
}

type pairCand struct {
	rank uint32
	at   int32
}

// pairHeap is a min-heap of candidate merges; typed, so that pushes do not box.
type pairHeap []pairCand

func (h pairHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].at < h[b].at
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c pairCand) {
	*h = append(*h, c)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *pairHeap) pop() pairCand {
	old := *h
	top := old[0]
	old[0] = old[len(old)-1]
	*h = old[:len(old)-1]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// Character classes of the split patterns. \s is unicode.IsSpace in both the reference (regexp2)
// and tiktoken's regex; marks (\p{M}) are neither letters nor numbers.
const (
	cLetter  = 1 << iota // \p{L}
	cNumber              // \p{N}
	cSpace               // \s
	cNewline             // \r or \n
	cUpper               // o200k_base's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower               // o200k_base's [\p{Ll}\p{Lm}\p{Lo}\p{M}]

	multiByte = 0xff // in byteFlags: not ASCII, decode the rune
)

// byteFlags classifies ASCII bytes; the others (the start or middle of a multi-byte rune, or not
// UTF-8) are marked multiByte and decoded.
var byteFlags = func() (t [256]uint8) {
	for c := range t {
		if c < utf8.RuneSelf {
			t[c] = runeFlags(rune(c))
		} else {
			t[c] = multiByte
		}
	}
	return t
}()

func runeFlags(r rune) uint8 {
	var f uint8
	switch {
	case unicode.IsLetter(r):
		f = cLetter
		if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
			f |= cUpper
		}
		if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
			f |= cLower
		}
	case unicode.IsMark(r):
		f = cUpper | cLower
	case unicode.IsNumber(r):
		f = cNumber
	case unicode.IsSpace(r):
		f = cSpace
		if r == '\r' || r == '\n' {
			f |= cNewline
		}
	}
	return f
}

// at returns the classes and byte length of the rune at i. An invalid byte is one rune of no
// class (a symbol), as the U+FFFD it decodes to is.
func at(s string, i int) (uint8, int) {
	if f := byteFlags[s[i]]; f != multiByte { // small enough to inline
		return f, 1
	}
	return atRune(s, i)
}

func atRune(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 0, 1
	}
	return runeFlags(r), n
}

// isSymbol is [^\s\p{L}\p{N}].
func isSymbol(f uint8) bool { return f&(cSpace|cLetter|cNumber) == 0 }

// canLead is [^\r\n\p{L}\p{N}], the optional character before a word.
func canLead(f uint8) bool { return f&(cNewline|cLetter|cNumber) == 0 }

// run returns the end of the run of runes with a class in mask starting at i.
func run(s string, i int, mask uint8) int {
	for i < len(s) {
		if f := byteFlags[s[i]]; f != multiByte { // most text is ASCII
			if f&mask == 0 {
				break
			}
			i++
			continue
		}
		f, n := at(s, i)
		if f&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// digits is \p{N}{1,3} at i, where a number is known to start.
func digits(s string, i int) int {
	for k := 0; k < 3 && i < len(s); k++ {
		f, n := at(s, i)
		if f&cNumber == 0 {
			break
		}
		i += n
	}
	return i
}

// contraction is (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or i when there is none.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	lower := func(k int) byte { return s[k] | 0x20 } // ASCII letters only, as the patterns match
	switch lower(i + 1) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(i+2) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(i+2) == 'l' {
			return i + 3
		}
	}
	return i
}

// symbols is ` ?[^\s\p{L}\p{N}]+[\r\n]*` at i, or with slash ` ?[^\s\p{L}\p{N}]+[\r\n/]*`: its end,
// or -1.
func symbols(s string, i int, slash bool) int {
	j := i
	if s[j] == ' ' {
		j++
	}
	start := j
	for j < len(s) {
		f, n := at(s, j)
		if !isSymbol(f) {
			break
		}
		j += n
	}
	if j == start {
		return -1
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || slash && s[j] == '/') {
		j++
	}
	return j
}

// spaces is `\s*[\r\n]+|\s+(?!\S)|\s+` at i: through the last line break of the white space run;
// without one, all of it but the last character when a word follows, so that the word keeps
// its leading space.
func spaces(s string, i int) int {
	end, last, nl := i, i, -1
	for end < len(s) {
		f, n := at(s, end)
		if f&cSpace == 0 {
			break
		}
		if f&cNewline != 0 {
			nl = end
		}
		last = end
		end += n
	}
	switch {
	case end == i: // not white space: unreachable, as every other class matched earlier
		_, n := at(s, i)
		return i + n
	case nl >= 0:
		return nl + 1
	case end == len(s) || last == i:
		return end
	}
	return last
}

// splitCl100k follows cl100k_base's pattern, alternative by alternative:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCl100k(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	f, n := at(s, i)
	if canLead(f) && i+n < len(s) {
		if g, m := at(s, i+n); g&cLetter != 0 {
			return run(s, i+n+m, cLetter)
		}
	}
	switch {
	case f&cLetter != 0:
		return run(s, i+n, cLetter)
	case f&cNumber != 0:
		return digits(s, i)
	}
	if e := symbols(s, i, false); e > 0 {
		return e
	}
	return spaces(s, i)
}

// splitO200k follows o200k_base's pattern, alternative by alternative (upper and lower as in the
// class comments above, c a contraction as in cl100k_base):
//
//	[^\r\n\p{L}\p{N}]?upper*lower+c?|[^\r\n\p{L}\p{N}]?upper+lower*c?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// An optional leading character is tried taken first, then not, as a backtracking matcher does.
func splitO200k(s string, i int) int {
	const word = cUpper | cLower
	f, n := at(s, i)
	lead := false // whether a word can follow the leading character
	if canLead(f) && i+n < len(s) {
		g, _ := at(s, i+n)
		lead = g&word != 0
	}
	if lead {
		if e := lowerWord(s, i+n); e >= 0 {
			return e
		}
	}
	if f&word != 0 {
		if e := lowerWord(s, i); e >= 0 {
			return e
		}
	}
	if lead {
		if e := upperWord(s, i+n); e >= 0 {
			return e
		}
	}
	if f&word != 0 {
		if e := upperWord(s, i); e >= 0 {
			return e
		}
	}
	if f&cNumber != 0 {
		return digits(s, i)
	}
	if e := symbols(s, i, true); e > 0 {
		return e
	}
	return spaces(s, i)
}

// lowerWord is upper*lower+c? at i: its end, or -1. The classes overlap (Lm, Lo and marks are in
// both), so when no lower follows the greedy upper run, the run gives back characters one at a
// time until one of them can start lower+.
func lowerWord(s string, i int) int {
	b := run(s, i, cUpper)
	for p := b; ; {
		if p < len(s) {
			if f, _ := at(s, p); f&cLower != 0 {
				return contraction(s, run(s, p, cLower))
			}
		}
		if p == i {
			return -1
		}
		_, n := utf8.DecodeLastRuneInString(s[i:p]) // the run holds valid runes only
		p -= n
	}
}

// upperWord is upper+lower*c? at i: its end, or -1.
func upperWord(s string, i int) int {
	b := run(s, i, cUpper)
	if b == i {
		return -1
	}
	return contraction(s, run(s, b, cLower))
}

// bpeToken is one token of a text: its id and the byte offset where it ends.
type bpeToken struct {
	end int
	id  uint32
}

// appendTokens appends the tokens of s, in order, to dst.
func (e *bpeEncoding) appendTokens(dst []bpeToken, s string) []bpeToken {
	var buf [scanPieceMax + 1]bpePart
	for i := 0; i < len(s); {
		j := e.split(s, i)
		piece := s[i:j]
		if id, ok := e.ranks.lookup(piece); ok {
			dst = append(dst, bpeToken{j, id})
		} else {
			var parts []bpePart
			if len(piece) > scanPieceMax {
				parts = e.mergeLong(piece)
			} else {
				parts = e.mergeScan(piece, buf[:0])
			}
			for k := 0; k+1 < len(parts); k++ {
				a, b := parts[k].start, parts[k+1].start
				dst = append(dst, bpeToken{i + int(b), e.rank(piece[a:b])})
			}
		}
		i = j
	}
	return dst
}
