// Package index is the inverted index built once per snapshot over static
// chunks. A query walks only the postings of its own terms, so its cost grows
// with matching postings, not with corpus size.
package index

import (
	"math"
	"slices"
	"sync"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Params are the BM25 parameters. Title terms count TitleWeight times.
type Params struct {
	K1          float64
	B           float64
	TitleWeight float64
}

// DefaultParams were tuned on the SciFact train split (docs/benchmarks.md).
var DefaultParams = Params{K1: 1.2, B: 0.5, TitleWeight: 2}

// Builder accumulates documents. It is not safe for concurrent use.
type Builder struct {
	p        Params
	keywords bool

	dict  map[string]uint32 // term -> id
	words map[string]int32  // lower-cased word -> term id, or -1 when not a term
	terms []string

	postings [][]posting
	docLen   []float32
	group    []uint16
	docTerms [][]uint32

	scratch []float32 // tf per term id for the document being added
	touched []uint32

	kwDict     map[string]uint32
	kwPostings [][]uint32
}

type posting struct {
	doc uint32
	tf  float32
}

// NewBuilder starts an index. With keywords set, it also builds the postings
// the Keyword scorer needs.
func NewBuilder(p Params, keywords bool) *Builder {
	return &Builder{
		p:        p,
		keywords: keywords,
		dict:     map[string]uint32{},
		words:    map[string]int32{},
		kwDict:   map[string]uint32{},
	}
}

// termID returns the id of a lower-cased word's term, or -1.
func (b *Builder) termID(w []byte) int32 {
	if id, ok := b.words[string(w)]; ok {
		return id
	}
	word := string(w)
	t, ok := tokenize.Term(word)
	id := int32(-1)
	if ok {
		tid, seen := b.dict[t]
		if !seen {
			tid = uint32(len(b.terms))
			b.dict[t] = tid
			b.terms = append(b.terms, t)
			b.postings = append(b.postings, nil)
			b.scratch = append(b.scratch, 0)
		}
		id = int32(tid)
	}
	b.words[word] = id
	return id
}

// Add indexes one document of a group (the engine uses one group per source)
// and returns its id; ids are dense and start at 0.
func (b *Builder) Add(group uint16, title, body string) uint32 {
	doc := uint32(len(b.docLen))
	var n float32
	add := func(weight float32) func([]byte) {
		return func(w []byte) {
			id := b.termID(w)
			if id < 0 {
				return
			}
			if b.scratch[id] == 0 {
				b.touched = append(b.touched, uint32(id))
			}
			b.scratch[id] += weight
			n += weight
		}
	}
	tokenize.EachWord(title, add(float32(b.p.TitleWeight)))
	tokenize.EachWord(body, add(1))
	slices.Sort(b.touched)
	for _, id := range b.touched {
		b.postings[id] = append(b.postings[id], posting{doc: doc, tf: b.scratch[id]})
		b.scratch[id] = 0
	}
	b.docTerms = append(b.docTerms, slices.Clone(b.touched))
	b.touched = b.touched[:0]
	b.docLen = append(b.docLen, n)
	b.group = append(b.group, group)
	if b.keywords {
		b.addKeywords(doc, title, body)
	}
	return doc
}

// addKeywords posts the keywords of title ∪ body. As in the reference
// score, a body without keywords scores 0 whatever its title holds, so such a
// document gets no postings.
func (b *Builder) addKeywords(doc uint32, title, body string) {
	kw := tokenize.Keywords(body)
	if len(kw) == 0 {
		return
	}
	seen := map[uint32]struct{}{}
	for _, k := range append(kw, tokenize.Keywords(title)...) {
		id, ok := b.kwDict[k]
		if !ok {
			id = uint32(len(b.kwPostings))
			b.kwDict[k] = id
			b.kwPostings = append(b.kwPostings, nil)
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			b.kwPostings[id] = append(b.kwPostings[id], doc)
		}
	}
}

// Build freezes the index. The builder must not be used afterwards.
func (b *Builder) Build() *Index {
	ix := &Index{
		p:          b.p,
		dict:       b.dict,
		n:          len(b.docLen),
		group:      b.group,
		kwDict:     b.kwDict,
		kwPostings: b.kwPostings,
	}
	var total float64
	for _, l := range b.docLen {
		total += float64(l)
	}
	if ix.n > 0 {
		ix.avgdl = total / float64(ix.n)
	}
	if ix.avgdl == 0 {
		ix.avgdl = 1
	}
	// Flatten postings and doc terms into single arrays: fewer headers, better locality.
	var np, nt int
	for _, ps := range b.postings {
		np += len(ps)
	}
	for _, ts := range b.docTerms {
		nt += len(ts)
	}
	ix.postOff = make([]uint32, len(b.postings)+1)
	ix.postDoc = make([]uint32, 0, np)
	ix.postTF = make([]float32, 0, np)
	ix.df = make([]uint32, len(b.postings))
	for t, ps := range b.postings {
		ix.postOff[t] = uint32(len(ix.postDoc))
		ix.df[t] = uint32(len(ps))
		for _, p := range ps {
			ix.postDoc = append(ix.postDoc, p.doc)
			ix.postTF = append(ix.postTF, p.tf)
		}
		b.postings[t] = nil
	}
	ix.postOff[len(b.postings)] = uint32(len(ix.postDoc))
	// Doc term sets are stored as ranks in a global rarest-first order, which
	// both Jaccard merging and prefix filtering (see PrefixLen) rely on.
	order := make([]uint32, len(ix.df))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		if ix.df[a] != ix.df[b] {
			return int(ix.df[a]) - int(ix.df[b])
		}
		return int(a) - int(b)
	})
	ix.rank = make([]uint32, len(order))
	for r, id := range order {
		ix.rank[id] = uint32(r)
	}
	ix.termOff = make([]uint32, len(b.docTerms)+1)
	ix.termIDs = make([]uint32, 0, nt)
	for d, ts := range b.docTerms {
		ix.termOff[d] = uint32(len(ix.termIDs))
		start := len(ix.termIDs)
		for _, id := range ts {
			ix.termIDs = append(ix.termIDs, ix.rank[id])
		}
		slices.Sort(ix.termIDs[start:])
		b.docTerms[d] = nil
	}
	ix.termOff[len(b.docTerms)] = uint32(len(ix.termIDs))
	ix.norm = make([]float32, ix.n)
	for d, l := range b.docLen {
		ix.norm[d] = float32(b.p.K1 * (1 - b.p.B + b.p.B*float64(l)/ix.avgdl))
	}
	ix.pool.New = func() any { return &accumulator{score: make([]float32, ix.n)} }
	*b = Builder{}
	return ix
}

// Index is immutable and safe for concurrent queries.
type Index struct {
	p     Params
	dict  map[string]uint32
	n     int
	avgdl float64
	df    []uint32
	norm  []float32 // k1 * (1 - b + b*dl/avgdl) per doc
	group []uint16

	postOff []uint32
	postDoc []uint32
	postTF  []float32

	rank    []uint32 // term id -> rank, rarest first
	termOff []uint32
	termIDs []uint32 // per doc: sorted term ranks

	kwDict     map[string]uint32
	kwPostings [][]uint32

	pool sync.Pool
}

// Len is the number of documents.
func (ix *Index) Len() int { return ix.n }

// Group returns the group a document was added with.
func (ix *Index) Group(doc uint32) uint16 { return ix.group[doc] }

// Terms is the number of distinct terms.
func (ix *Index) Terms() int { return len(ix.df) }

// DocTerms returns a document's distinct terms as sorted ranks (rarest
// first). Do not modify.
func (ix *Index) DocTerms(doc uint32) []uint32 {
	return ix.termIDs[ix.termOff[doc]:ix.termOff[doc+1]]
}

// Query is a parsed query. Build it once and use it for the index and for
// scoring texts (HTTP results) with the same term statistics.
type Query struct {
	terms []queryTerm // known terms, for walking postings
	all   []queryTerm // every distinct term, for scoring texts
	kw    []string    // keywords, for the Keyword scorer
}

type queryTerm struct {
	term string
	id   int64 // -1 when not in the index
	idf  float64
}

// Empty reports whether the query has no terms at all.
func (q *Query) Empty() bool { return len(q.all) == 0 && len(q.kw) == 0 }

// NewQuery parses text. Each distinct term counts once. Keywords are
// extracted only when asked for (the Keyword scorer).
func (ix *Index) NewQuery(text string, keywords bool) *Query {
	q := &Query{}
	if keywords {
		q.kw = tokenize.Keywords(text)
	}
	for _, t := range tokenize.UniqueTerms(text) {
		qt := queryTerm{term: t, id: -1}
		df := 0.0
		if id, ok := ix.dict[t]; ok {
			qt.id = int64(id)
			df = float64(ix.df[id])
		}
		qt.idf = math.Log(1 + (float64(ix.n)-df+0.5)/(df+0.5))
		q.all = append(q.all, qt)
		if qt.id >= 0 {
			q.terms = append(q.terms, qt)
		}
	}
	return q
}

// Hit is a scored document.
type Hit struct {
	Doc   uint32
	Score float64
}

type accumulator struct {
	score   []float32
	touched []uint32
}

// BM25 appends to dst every document of an allowed group that contains at
// least one query term, with its BM25 score, in document order.
func (ix *Index) BM25(dst []Hit, q *Query, allowed []bool) []Hit {
	if len(q.terms) == 0 {
		return dst
	}
	acc := ix.pool.Get().(*accumulator)
	k1 := float32(ix.p.K1)
	for _, t := range q.terms {
		idf := float32(t.idf) * (k1 + 1)
		lo, hi := ix.postOff[t.id], ix.postOff[t.id+1]
		docs, tfs := ix.postDoc[lo:hi], ix.postTF[lo:hi]
		for i, d := range docs {
			g := ix.group[d]
			if int(g) >= len(allowed) || !allowed[g] {
				continue
			}
			tf := tfs[i]
			if acc.score[d] == 0 {
				acc.touched = append(acc.touched, d)
			}
			acc.score[d] += idf * tf / (tf + ix.norm[d])
		}
	}
	slices.Sort(acc.touched)
	for _, d := range acc.touched {
		dst = append(dst, Hit{Doc: d, Score: float64(acc.score[d])})
		acc.score[d] = 0
	}
	acc.touched = acc.touched[:0]
	ix.pool.Put(acc)
	return dst
}

// BM25Text scores a text that is not in the index (an HTTP result) with the
// index's term statistics; unseen terms get the idf of a term with df 0.
func (ix *Index) BM25Text(q *Query, title, body string) float64 {
	if len(q.all) == 0 {
		return 0
	}
	want := make(map[string]int, len(q.all))
	for i, t := range q.all {
		want[t.term] = i
	}
	tf := make([]float64, len(q.all))
	var dl float64
	count := func(weight float64) func([]byte) {
		return func(w []byte) {
			t, ok := tokenize.Term(string(w))
			if !ok {
				return
			}
			dl += weight
			if i, ok := want[t]; ok {
				tf[i] += weight
			}
		}
	}
	tokenize.EachWord(title, count(ix.p.TitleWeight))
	tokenize.EachWord(body, count(1))
	norm := ix.p.K1 * (1 - ix.p.B + ix.p.B*dl/ix.avgdl)
	var s float64
	for i, t := range q.all {
		if tf[i] > 0 {
			s += t.idf * tf[i] * (ix.p.K1 + 1) / (tf[i] + norm)
		}
	}
	return s
}

// Keyword appends every document of an allowed group that contains at least
// one query keyword, scored |query keywords in title ∪ content| / |query keywords|.
func (ix *Index) Keyword(dst []Hit, q *Query, allowed []bool) []Hit {
	if len(q.kw) == 0 || ix.kwPostings == nil {
		return dst
	}
	acc := ix.pool.Get().(*accumulator)
	for _, k := range q.kw {
		id, ok := ix.kwDict[k]
		if !ok {
			continue
		}
		for _, d := range ix.kwPostings[id] {
			g := ix.group[d]
			if int(g) >= len(allowed) || !allowed[g] {
				continue
			}
			if acc.score[d] == 0 {
				acc.touched = append(acc.touched, d)
			}
			acc.score[d]++
		}
	}
	slices.Sort(acc.touched)
	n := float64(len(q.kw))
	for _, d := range acc.touched {
		dst = append(dst, Hit{Doc: d, Score: math.Min(1, float64(acc.score[d])/n)})
		acc.score[d] = 0
	}
	acc.touched = acc.touched[:0]
	ix.pool.Put(acc)
	return dst
}

// KeywordText scores a text that is not in the index with the Keyword formula.
func KeywordText(q *Query, title, text string) float64 {
	if len(q.kw) == 0 {
		return 0
	}
	body := tokenize.Keywords(text)
	if len(body) == 0 {
		return 0 // as addKeywords
	}
	have := map[string]struct{}{}
	for _, k := range append(body, tokenize.Keywords(title)...) {
		have[k] = struct{}{}
	}
	found := 0
	for _, k := range q.kw {
		if _, ok := have[k]; ok {
			found++
		}
	}
	return math.Min(1, float64(found)/float64(len(q.kw)))
}

// TermIDs maps a text's distinct terms to sorted ranks, comparable with
// DocTerms; terms unknown to the index get ranks from extra (after every
// known term), which the caller shares across one query so that two texts
// agree on them.
func (ix *Index) TermIDs(text string, extra map[string]uint32) []uint32 {
	var ids []uint32
	for _, t := range tokenize.UniqueTerms(text) {
		var r uint32
		if id, ok := ix.dict[t]; ok {
			r = ix.rank[id]
		} else {
			var seen bool
			r, seen = extra[t]
			if !seen {
				r = uint32(len(ix.df) + len(extra))
				extra[t] = r
			}
		}
		ids = append(ids, r)
	}
	slices.Sort(ids)
	return ids
}

// PrefixLen is the prefix filter for Jaccard: if J(a, b) >= t then the first
// PrefixLen(|a|, t) elements of a and the first PrefixLen(|b|, t) of b (in
// one global order) share an element. With a rarest-first order, few pairs
// pass, so near-duplicate search checks only those.
func PrefixLen(n int, t float64) int {
	if t <= 0 {
		return n
	}
	p := n - int(math.Ceil(t*float64(n)-1e-9)) + 1
	return max(0, min(n, p))
}

// Jaccard is |a ∩ b| / |a ∪ b| of two sorted id sets; two empty sets are 0.
func Jaccard(a, b []uint32) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	inter := Intersection(a, b)
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// Intersection is |a ∩ b| of two sorted id sets.
func Intersection(a, b []uint32) int {
	i, j, inter := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return inter
}

// JaccardAtLeast reports whether Jaccard(a, b) >= t without computing it in
// full: J >= t needs |a ∩ b| >= t/(1+t) * (|a|+|b|), so it rejects on the size
// ratio first and stops merging once the rest cannot reach that count.
func JaccardAtLeast(a, b []uint32, t float64) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if t <= 0 {
		return true
	}
	la, lb := len(a), len(b)
	if float64(min(la, lb)) < t*float64(max(la, lb)) {
		return false
	}
	need := int(math.Ceil(t/(1+t)*float64(la+lb) - 1e-9))
	i, j, inter := 0, 0, 0
	for i < la && j < lb {
		if inter+min(la-i, lb-j) < need {
			return false
		}
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter) >= t*float64(la+lb-inter)-1e-9
}
