package classify

import (
	"math"
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

// featureSet selects the feature families (fixed after tuning; a var so
// the tuning experiment can vary it).
type featureSet struct {
	raw         bool // unstemmed word unigrams too
	minN, maxN  int  // char n-gram lengths
	cross       bool // char n-grams over the whole text, not per word
	groupWeight float64
}

var features = featureSet{minN: minGram, maxN: maxGram, groupWeight: groupWeight}

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
	buf   []byte // the words, back to back
	ends  []int  // word i is buf[ends[i-1]:ends[i]]
	stems []string
	word  []uint32 // hashed word-level ids (unigrams, bigrams)
	char  []uint32 // hashed char n-gram ids
	pad   []byte
}

func (e *extractor) wordAt(i int) []byte {
	start := 0
	if i > 0 {
		start = e.ends[i-1]
	}
	return e.buf[start:e.ends[i]]
}

func fnv[T string | []byte](kind byte, parts ...T) uint32 {
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
	return h & (1<<hashBits - 1)
}

// hash fills e.word and e.char with the raw ids of text (text already
// bounded by the caller), sorted, duplicates kept: runs are term counts.
func (e *extractor) hash(text string) {
	e.buf, e.ends, e.stems = e.buf[:0], e.ends[:0], e.stems[:0]
	e.word, e.char = e.word[:0], e.char[:0]
	tokenize.EachWord(text, func(w []byte) {
		e.buf = append(e.buf, w...)
		e.ends = append(e.ends, len(e.buf))
	})
	for i := range e.ends {
		e.stems = append(e.stems, tokenize.Stem(string(e.wordAt(i))))
	}
	prev := "^" // sentence start and end are bigram partners too
	for _, s := range e.stems {
		e.word = append(e.word, fnv(kindWord, s), fnv(kindBigram, prev, s))
		prev = s
	}
	if features.raw {
		for i := range e.ends {
			e.word = append(e.word, fnv(kindRaw, string(e.wordAt(i))))
		}
	}
	if len(e.stems) > 0 {
		e.word = append(e.word, fnv(kindBigram, prev, "$"))
	}
	if features.cross {
		e.pad = append(e.pad[:0], '<')
		for i := range e.ends {
			if i > 0 {
				e.pad = append(e.pad, ' ')
			}
			e.pad = append(e.pad, e.wordAt(i)...)
		}
		e.pad = append(e.pad, '>')
		e.grams()
	} else {
		for i := range e.ends {
			e.pad = append(append(append(e.pad[:0], '<'), e.wordAt(i)...), '>')
			e.grams()
		}
	}
	slices.Sort(e.word)
	slices.Sort(e.char)
}

func (e *extractor) grams() {
	for n := features.minN; n <= features.maxN; n++ {
		for i := 0; i+n <= len(e.pad); i++ {
			e.char = append(e.char, fnv(kindChar, e.pad[i:i+n]))
		}
	}
}

// vectorize maps the hashed ids of text to a TF-IDF vector over the
// model's compact features (unknown ids dropped): sublinear tf 1+ln(tf),
// times idf, each group L2-normalised and weighted. dst is reused.
func (e *extractor) vectorize(dst []feat, text string, index map[uint32]int32, idf []float32) []feat {
	e.hash(text)
	dst = dst[:0]
	dst = appendGroup(dst, e.word, index, idf, float32(math.Sqrt(features.groupWeight)))
	dst = appendGroup(dst, e.char, index, idf, float32(math.Sqrt(1-features.groupWeight)))
	return dst
}

func appendGroup(dst []feat, ids []uint32, index map[uint32]int32, idf []float32, scale float32) []feat {
	start := len(dst)
	var norm float64
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		if f, ok := index[ids[i]]; ok {
			v := (1 + float32(math.Log(float64(j-i)))) * idf[f]
			dst = append(dst, feat{idx: f, val: v})
			norm += float64(v) * float64(v)
		}
		i = j
	}
	if norm > 0 {
		k := scale / float32(math.Sqrt(norm))
		for i := start; i < len(dst); i++ {
			dst[i].val *= k
		}
	}
	return dst
}
