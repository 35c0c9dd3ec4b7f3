package classify

import (
	"math"
	mathbits "math/bits"
	"slices"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// hashBits sizes the hash space of raw features before they are compacted
// to the ones seen in training: 2^22 keeps collisions rare (CLINC150 has
// about 10^5 distinct n-grams) at no memory cost, since only seen ids get a
// weight row.
const hashBits = 22

// Feature kinds, mixed into the hash so a word and a char n-gram with the
// same bytes stay apart.
const (
	kindWord byte = iota + 1
	kindBigram
	kindChar
	kindRaw
)

// The feature families, fixed after tuning on the CLINC150 val split
// (docs/benchmarks.md, "Intent detection"): both alternatives below lost.
// Constants, as the hyper-parameters are (softmax.go).
const (
	// rawWords adds unstemmed word unigrams.
	rawWords = false
	// crossWords takes char n-grams over the whole text, across word
	// boundaries, instead of per word.
	crossWords = false
)

// Char n-gram lengths (2–5 beat 3–5 on CLINC150 val), taken inside "<word>" (boundaries marked).
const minGram, maxGram = 2, 5

// groupWeight is the share of the squared norm given to word features; char
// n-grams get the rest. Both groups are L2-normalised on their own first so
// long texts do not tilt the mix.
const groupWeight = 0.5

// feat is one non-zero of a sparse vector: compact feature index and value.
type feat struct {
	idx int32
	val float32
}

// extractor turns text into hashed feature ids, reusing its buffers. It is
// not safe for concurrent use; Model keeps a pool.
type extractor struct {
	buf    []byte // the words, back to back
	ends   []int  // word i is buf[ends[i-1]:ends[i]]
	stems  []string
	word   []uint32 // hashed word-level ids (unigrams, bigrams)
	char   []uint32 // hashed char n-gram ids
	pad    []byte
	known  []int32  // one group's distinct known features
	counts []uint16 // their term counts by compact index, zero between groups
	seen   []uint64 // bitmap of the known features, zero between groups
	// memos remembers words (at most maxMemo), their char features under
	// memoIndex; wordMemos are the memos of the words of the text.
	memos     map[string]*wordMemo
	memoIndex *vocabulary
	wordMemos []*wordMemo
}

// maxMemo and maxMemoWord bound an extractor's memo of words: at most
// 2048 words of at most 32 bytes (about 1 MB with their char features;
// questions use far fewer). Longer words are not remembered.
const (
	maxMemo     = 2048
	maxMemoWord = 32
)

// wordMemo is what an extractor remembers of a word: its stem and, under
// the extractor's memoIndex, its known char n-gram features (one per
// occurrence). Both depend on the word (and the vocabulary) alone, and a
// pooled extractor sees the same words again and again: a hit costs one
// map look-up by the word's bytes, with no allocation and no shared lock.
type wordMemo struct {
	stem    string
	chars   []int32
	charsOK bool
}

// memo returns the memo of word w, made on first sight (and kept while the
// memo holds fewer than maxMemo words).
func (e *extractor) memo(w []byte) *wordMemo {
	if m, ok := e.memos[string(w)]; ok {
		return m
	}
	word := string(w)
	m := &wordMemo{stem: tokenize.Stem(word)}
	if e.memos == nil {
		e.memos = map[string]*wordMemo{}
	}
	if len(e.memos) < maxMemo && len(word) <= maxMemoWord {
		e.memos[word] = m
	}
	return m
}

func (e *extractor) wordAt(i int) []byte {
	start := 0
	if i > 0 {
		start = e.ends[i-1]
	}
	return e.buf[start:e.ends[i]]
}

func fnv[T string | []byte](kind byte, parts ...T) uint32 {
	return fnvFull(kind, parts...) & (1<<hashBits - 1)
}

// fnvFull is FNV-1a over kind and parts, before masking to hashBits.
func fnvFull[T string | []byte](kind byte, parts ...T) uint32 {
	h := uint32(2166136261)
	h = (h ^ uint32(kind)) * 16777619
	for i, p := range parts {
		if i > 0 {
			h = (h ^ 0xff) * 16777619 // separator: "ab","c" differs from "a","bc"
		}
		for j := range len(p) {
			h = (h ^ uint32(p[j])) * 16777619
		}
	}
	return h
}

// hash fills e.word and e.char with the raw ids of text (text already
// bounded by the caller), unsorted, duplicates kept: each id is one
// occurrence.
func (e *extractor) hash(text string) {
	e.hashWords(text)
	e.char = e.char[:0]
	if crossWords {
		e.crossGrams()
		return
	}
	for i := range e.ends {
		e.wordGrams(e.wordAt(i))
	}
}

// hashWords splits text into e.buf and e.ends, stems the words and fills
// e.word with the word-level ids.
func (e *extractor) hashWords(text string) {
	e.buf, e.ends, e.stems = e.buf[:0], e.ends[:0], e.stems[:0]
	e.word = e.word[:0]
	tokenize.EachWord(text, func(w []byte) {
		e.buf = append(e.buf, w...)
		e.ends = append(e.ends, len(e.buf))
	})
	e.wordMemos = e.wordMemos[:0]
	for i := range e.ends {
		m := e.memo(e.wordAt(i))
		e.wordMemos = append(e.wordMemos, m)
		e.stems = append(e.stems, m.stem)
	}
	prev := "^" // sentence start and end are bigram partners too
	for _, s := range e.stems {
		e.word = append(e.word, fnv(kindWord, s), fnv(kindBigram, prev, s))
		prev = s
	}
	if rawWords {
		for i := range e.ends {
			e.word = append(e.word, fnv(kindRaw, e.wordAt(i)))
		}
	}
	if len(e.stems) > 0 {
		e.word = append(e.word, fnv(kindBigram, prev, "$"))
	}
}

// crossGrams appends to e.char the char n-gram ids of all words joined.
func (e *extractor) crossGrams() {
	e.pad = append(e.pad[:0], '<')
	for i := range e.ends {
		if i > 0 {
			e.pad = append(e.pad, ' ')
		}
		e.pad = append(e.pad, e.wordAt(i)...)
	}
	e.pad = append(e.pad, '>')
	e.grams()
}

// wordGrams appends to e.char the char n-gram ids of "<w>".
func (e *extractor) wordGrams(w []byte) {
	e.pad = append(append(append(e.pad[:0], '<'), w...), '>')
	e.grams()
}

// charFeatures returns the known char n-gram features of word w (memo m),
// one per occurrence, computed once per word under e.memoIndex.
func (e *extractor) charFeatures(m *wordMemo, w []byte, index *vocabulary) []int32 {
	if m.charsOK {
		return m.chars
	}
	e.char = e.char[:0]
	e.wordGrams(w)
	m.chars = m.chars[:0]
	for _, id := range e.char {
		if f, ok := index.lookup(id); ok {
			m.chars = append(m.chars, f)
		}
	}
	m.charsOK = true
	return m.chars
}

// grams appends the ids of e.pad's char n-grams, fnv(kindChar, gram):
// the n-grams starting at one byte share their hash prefix, so each is one
// more step of the previous one.
func (e *extractor) grams() {
	p := e.pad
	start := fnvFull[string](kindChar) // the kind byte hashed, no gram byte yet
	for i := range p {
		h := start
		for n := 1; n <= maxGram && i+n <= len(p); n++ {
			h = (h ^ uint32(p[i+n-1])) * 16777619
			if n >= minGram {
				e.char = append(e.char, h&(1<<hashBits-1))
			}
		}
	}
}

// vectorize maps the hashed ids of text to a TF-IDF vector over the
// model's compact features (unknown ids dropped): sublinear tf 1+ln(tf),
// times idf, each group L2-normalised and weighted. dst is reused.
func (e *extractor) vectorize(dst []feat, text string, index *vocabulary, idf []float32) []feat {
	if e.memoIndex != index {
		e.memoIndex, e.memos = index, nil // char features are the vocabulary's
	}
	e.hashWords(text)
	dst = dst[:0]
	e.startGroup(len(idf))
	for _, id := range e.word {
		if f, ok := index.lookup(id); ok {
			e.count(f)
		}
	}
	dst = e.endGroup(dst, idf, float32(math.Sqrt(groupWeight)))
	e.startGroup(len(idf))
	if crossWords {
		e.char = e.char[:0]
		e.crossGrams()
		for _, id := range e.char {
			if f, ok := index.lookup(id); ok {
				e.count(f)
			}
		}
	} else {
		for i := range e.ends {
			for _, f := range e.charFeatures(e.wordMemos[i], e.wordAt(i), index) {
				e.count(f)
			}
		}
	}
	return e.endGroup(dst, idf, float32(math.Sqrt(1-groupWeight)))
}

// startGroup readies the term counts of a feature group. Unknown ids are
// dropped before counting (most of a question's char n-grams are not in a
// small model's vocabulary); only the distinct known features are then put
// in order.
func (e *extractor) startGroup(nFeat int) {
	if len(e.counts) != nFeat {
		e.counts = make([]uint16, nFeat) // a text of MaxTextBytes has fewer than 2^16 ids
		e.seen = make([]uint64, (nFeat+63)/64)
	}
	e.known = e.known[:0]
}

// count adds one occurrence of known feature f.
func (e *extractor) count(f int32) {
	if e.counts[f] == 0 {
		e.known = append(e.known, f)
		e.seen[f>>6] |= 1 << (f & 63)
	}
	e.counts[f]++
}

// endGroup appends the counted features, one per distinct feature, in
// ascending compact index: the vocabulary numbers features in ascending id
// order, so the sums over them (norm, scores) add in the same order as
// over the sorted ids. It leaves the counts zero.
func (e *extractor) endGroup(dst []feat, idf []float32, scale float32) []feat {
	if len(e.known)*8 >= len(e.seen) {
		// Dense enough: reading the bitmap in order beats a sort.
		e.known = e.known[:0]
		for w, bits := range e.seen {
			for bits != 0 {
				e.known = append(e.known, int32(w<<6+mathbits.TrailingZeros64(bits)))
				bits &= bits - 1
			}
		}
	} else {
		slices.Sort(e.known)
	}
	for _, f := range e.known {
		e.seen[f>>6] = 0
	}
	start := len(dst)
	var norm float64
	for _, f := range e.known {
		v := tfWeight(int(e.counts[f])) * idf[f]
		e.counts[f] = 0
		dst = append(dst, feat{idx: f, val: v})
		norm += float64(v) * float64(v)
	}
	if norm > 0 {
		k := scale / float32(math.Sqrt(norm))
		for i := start; i < len(dst); i++ {
			dst[i].val *= k
		}
	}
	return dst
}

// tfWeight is the sublinear term weight 1+ln(tf), from a table for the
// small counts nearly every feature has (the same float32 values).
func tfWeight(tf int) float32 {
	if tf < len(tfTable) {
		return tfTable[tf]
	}
	return 1 + float32(math.Log(float64(tf)))
}

var tfTable = func() (t [32]float32) {
	for n := 1; n < len(t); n++ {
		t[n] = 1 + float32(math.Log(float64(n)))
	}
	return t
}()

// vocabulary maps raw feature ids to compact indices: an open-addressing
// table probed linearly (ids are already hashes, so their low bits index
// it), a few times faster than a Go map on the many misses of a query.
type vocabulary struct {
	keys []uint32 // emptyID marks a free slot
	vals []int32
	mask uint32
}

// emptyID is no feature id: ids have hashBits bits.
const emptyID = ^uint32(0)

// newVocabulary indexes ids (distinct, below 2^hashBits) as 0, 1, ... in order.
func newVocabulary(ids []uint32) *vocabulary {
	size := 16
	for size < 2*len(ids) {
		size *= 2
	}
	v := &vocabulary{keys: make([]uint32, size), vals: make([]int32, size), mask: uint32(size - 1)}
	for i := range v.keys {
		v.keys[i] = emptyID
	}
	for i, id := range ids {
		s := v.slot(id)
		v.keys[s], v.vals[s] = id, int32(i)
	}
	return v
}

// slot is where id is, or the free slot where it would go.
func (v *vocabulary) slot(id uint32) uint32 {
	s := id & v.mask
	for v.keys[s] != id && v.keys[s] != emptyID {
		s = (s + 1) & v.mask
	}
	return s
}

func (v *vocabulary) lookup(id uint32) (int32, bool) {
	s := v.slot(id)
	return v.vals[s], v.keys[s] == id
}

// each calls fn with every feature id, in table order.
func (v *vocabulary) each(fn func(id uint32)) {
	for _, k := range v.keys {
		if k != emptyID {
			fn(k)
		}
	}
}
