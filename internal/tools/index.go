package tools

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Field weights a kind of evidence in the BM25F sum: its term frequencies
// count Weight times, normalised by the field's length with B (0: none,
// 1: fully).
type Field struct {
	Weight float64
	B      float64
}

// Params weight the evidence of a tool. DefaultParams is what Options{}
// uses.
type Params struct {
	// K1 is the BM25F saturation of a term's weighted frequency.
	K1 float64
	// Fields of the BM25F document of a tool: its name words (and the whole
	// name), its namespace words, description, tags, and every example
	// question concatenated.
	Name, Namespace, Description, Tags, Examples Field
	// ExampleMatch weighs the closest single example (cosine of tf-idf term
	// sets) against the BM25F score, as a share of the query's best BM25F
	// score: a tool whose example is the query gets that much on top.
	ExampleMatch float64
	// Synonym, Related and Broader weigh the catalog terms WordNet relates
	// to a question's word (related.go), as shares of the word's own weight:
	// its synonyms; its derivationally related forms, pertainyms and similar
	// adjectives; its hypernyms. A related term that is a word of the
	// question counts as that word only. 0 leaves a kind out.
	Synonym, Related, Broader float64
	// ExpandNorm divides the weights of a word's related terms by their
	// number in the catalog to this power, so that a word with many
	// relatives does not outweigh one with few.
	ExpandNorm float64
	// ExpandMaxDF leaves out related terms found in more than this share
	// of the tools, rounded up (0: no limit): they say little and cost the
	// most.
	ExpandMaxDF float64
	// LearnedProfile weighs the BM25 score of a tool's learned examples
	// taken as one text (its learned profile, learned.go) against the
	// catalog's BM25F: 0 leaves it out.
	LearnedProfile float64
	// LearnedGap raises the score of a tool whose learned examples lie far
	// from its own words: times 1 + LearnedGap·(1 − their mean cosine with
	// the tool's name, namespace, description and tags), over the mean of
	// that factor among the tools with learned examples. Such a tool's own
	// words say little of the questions it serves, so the catalog's
	// evidence underrates it. 0 leaves it out.
	LearnedGap float64
	// LearnedStandIn: with learned examples, the BM25F score of a tool
	// without any counts 1 + LearnedStandIn times, standing in for the
	// learned profile it lacks, so that learning some tools does not bury
	// the others. 0 leaves it out.
	LearnedStandIn float64
	// Temperature of the confidence softmax over score/top score when the
	// top tool has examples, and PlainTemperature when it has none: the
	// scores of the two kinds spread differently (docs/api.md §10.3).
	Temperature, PlainTemperature float64
}

// DefaultParams were tuned on MetaTool dev and dev-multi only
// (docs/benchmarks.md, "Tool selection").
var DefaultParams = Params{
	K1:               1.6,
	Name:             Field{Weight: 3, B: 0},
	Namespace:        Field{Weight: 2, B: 0},
	Description:      Field{Weight: 1, B: 0.25},
	Tags:             Field{Weight: 1.5, B: 0},
	Examples:         Field{Weight: 0.05, B: 0.25},
	ExampleMatch:     1,
	Synonym:          0.5,
	Related:          0.3,
	Broader:          0.2,
	ExpandNorm:       0.5,
	ExpandMaxDF:      0.05,
	LearnedProfile:   0.5,
	LearnedGap:       1,
	LearnedStandIn:   1,
	Temperature:      0.15,
	PlainTemperature: 0.25,
}

// termIndex is the compact term index of a catalog: postings flattened into
// single arrays, per-query state in pooled accumulators.
type termIndex struct {
	p    Params
	dict map[string]uint32 // term -> id
	// words caches the term id of every lower-cased word of the catalog (-1:
	// not a term), so most query words need no stemming.
	words map[string]int32

	// BM25F postings: per term, the tools with its saturated weight
	// tf~/(k1+tf~), tf~ the field-weighted, length-normalised frequency.
	toolOff  []uint32
	toolDoc  []uint32
	toolSat  []float32
	toolIDF  []float32 // per term, over tools
	examples sentences
	anti     sentences

	idf2 []float32 // per term: toolIDF squared, the weight of cosines
	// own are the tool's own words (name, namespace, description, tags),
	// names those of its name and namespace: sorted distinct term ids.
	own, names flatSets
	surface    []string // per term: its shortest word, for labels
	stems      []string // per term: the term itself
	// groups are the near-duplicate tools (collapse.go).
	groups groups

	expansion bool // any of Synonym, Related, Broader is set
	// The catalog terms related to a term: per catalog term, and for other
	// words of questions.
	relKnown []atomic.Pointer[[]expansion]
	relMu    sync.RWMutex
	relOther map[string][]expansion

	pool sync.Pool
}

// score scores the allowed tools for the question: sc.cands gets every
// tool with evidence, sc.terms the question's catalog terms (marked in
// sc.seen until release) and sc.unknown the number of its other words. The
// per-tool arrays are left zero.
func (ix *termIndex) score(sc *scratch, query string, allowed []bool) {
	ix.gather(sc, query, allowed)
	exWeight := float32(ix.p.ExampleMatch) * ix.topBM25F(sc)
	cands := sc.cands[:0]
	for _, d := range sc.touched {
		s := ix.penalize(sc, d, sc.tool[d]+exWeight*sc.best[d]) * sc.learned.lift(d)
		if s > 0 {
			cands = append(cands, cand{entry: d, score: s, example: sc.best[d]})
		}
	}
	sc.cands = cands
	ix.reset(sc)
}

// gather collects the evidence of the allowed tools for the question: the
// question's terms and their related terms (sc.expand, weights in
// sc.expW), the BM25F score (sc.tool), closest example (sc.best) and
// anti-pattern (sc.antiSim) of the tools touched.
func (ix *termIndex) gather(sc *scratch, query string, allowed []bool) {
	sc.terms = ix.queryTermsOther(sc.terms[:0], query, sc.seen, &sc.other)
	sc.unknown = len(sc.other)
	if sc.learned != nil {
		sc.learnedWords = append(sc.learnedWords[:0], sc.other...)
	}
	if ix.expansion {
		ix.expandTerms(sc)
	} else {
		clear(sc.other)
		sc.other = sc.other[:0]
	}
	sc.qnorm = 0
	for _, t := range sc.terms {
		sc.qnorm += ix.idf2[t]
	}
	// Related terms at their weight (idf included in expW), then the
	// question's own.
	for _, t := range sc.expand {
		ix.addPostings(sc, t, sc.expW[t], allowed)
	}
	for _, t := range sc.terms {
		ix.addPostings(sc, t, ix.toolIDF[t], allowed)
	}
	ix.examples.match(sc, sc.terms, sc.best, allowed, &sc.touched, sc.tool)
	ix.anti.match(sc, sc.terms, sc.antiSim, allowed, &sc.antiHit, nil)
	if sc.learned != nil {
		sc.learned.apply(sc, allowed)
		clear(sc.learnedWords)
		sc.learnedWords = sc.learnedWords[:0]
	}
}

// reset zeroes what gather set but the question's terms.
func (ix *termIndex) reset(sc *scratch) {
	for _, d := range sc.touched {
		sc.tool[d], sc.best[d] = 0, 0
	}
	sc.touched = sc.touched[:0]
	for _, d := range sc.antiHit {
		sc.antiSim[d] = 0
	}
	sc.antiHit = sc.antiHit[:0]
	for _, t := range sc.expand {
		sc.expW[t] = 0
	}
	sc.expand = sc.expand[:0]
}

// topBM25F is the best BM25F score of the query's candidates: the closest
// example counts as a share of it.
func (ix *termIndex) topBM25F(sc *scratch) float32 {
	var top float32
	for _, d := range sc.touched {
		top = max(top, sc.tool[d])
	}
	return top
}

// penalize applies tool d's anti-patterns to its score s: an anti-pattern
// closer to the question than the tool's own words and examples costs the
// square of the difference, so a question like the anti-pattern loses
// almost everything, one that shares a word or two with it little.
func (ix *termIndex) penalize(sc *scratch, d uint32, s float32) float32 {
	return s * ix.antiFactor(sc.antiSim[d], sc.best[d], d, sc)
}

// antiFactor is the factor of a tool's score for its best anti-pattern
// cosine anti and closest example cosine ex.
func (ix *termIndex) antiFactor(anti, ex float32, d uint32, sc *scratch) float32 {
	if anti <= ex {
		return 1
	}
	pos := max(ex, ix.selfCosine(d, sc))
	if pen := min(anti-pos, 1); pen > 0 {
		return 1 - pen*pen
	}
	return 1
}

// release ends a query's use of sc: what score left set is cleared.
func (ix *termIndex) release(sc *scratch) {
	for _, t := range sc.terms {
		sc.seen[t] = false
	}
	sc.cands = sc.cands[:0]
}

// set returns the term set of tool i's own words.
func (ix *termIndex) set(i int) []uint32 { return ix.own.get(i) }

// flatSets holds a sorted set of term ids per tool, flat.
type flatSets struct {
	off []uint32 // per tool: start in ids; one more entry at the end
	ids []uint32
}

func (f *flatSets) get(i int) []uint32 { return f.ids[f.off[i]:f.off[i+1]] }

// selfCosine is the cosine of the question's terms (sc.seen, of norm²
// sc.qnorm) and tool i's own words, idf-weighted as sentences are.
func (ix *termIndex) selfCosine(i uint32, sc *scratch) float32 {
	var dot, sn float32
	for _, t := range ix.set(int(i)) {
		w := ix.idf2[t]
		sn += w
		if sc.seen[t] {
			dot += w
		}
	}
	if dot == 0 {
		return 0
	}
	return dot / float32(math.Sqrt(float64(sc.qnorm)*float64(sn)))
}

// sentences is an index of short texts (examples, anti-patterns) that
// belong to tools, scored by cosine of idf-weighted term sets.
type sentences struct {
	off   []uint32  // per term: range of doc and w
	doc   []uint32  // sentence ids
	w     []float32 // 1/‖sentence‖, the norm of its idf-weighted terms
	idf2  []float32 // per term: squared idf over the catalog's tools
	owner []uint32  // sentence -> tool
}

// scratch is the per-query state, pooled: arrays sized by the catalog that
// a query leaves all zero, and the lists of what it touched.
type scratch struct {
	tool    []float32 // BM25F score per tool
	best    []float32 // best example cosine per tool
	antiSim []float32 // best anti-pattern cosine per tool
	sent    []float32 // cosine numerator per sentence
	touched []uint32  // tools with a score
	antiHit []uint32  // tools with an anti-pattern cosine
	sentHit []uint32  // sentences with a score
	terms   []uint32
	seen    []bool    // per term: in terms
	expW    []float32 // per term: the weight of an expansion term
	expand  []uint32  // terms with an expW
	other   []string  // terms of the question the catalog lacks
	// learned is the overlay of this query (nil: none); learnedWords the
	// question's terms the catalog lacks, ext its terms in the overlay's
	// ids and lsent the overlay's cosine numerators.
	learned      *Learned
	learnedWords []string
	ext          []uint32
	lsent        []float32
	unknown      int     // words of the question the catalog lacks
	qnorm        float32 // Σ idf² of terms
	// cands are the query's candidates; heap, taken and seenGroup the
	// cards' selection (Index.cards).
	cands, heap, taken []cand
	seenGroup          []int32
}

// builder carries one newIndex from pass to pass: it gives the words of a
// catalog their term ids and holds what the first pass read.
type builder struct {
	dict  map[string]uint32
	words map[string]int32
	n     int // terms

	// acc accumulates per term id, and touched lists the ids to reset.
	acc     []float32
	touched []uint32
	// fields are the terms of every field of every tool; ex and anti the
	// term sets of every example and anti-pattern.
	fields   [numFields]fieldTerms
	ex, anti sentenceSets
	sentence []uint32 // a sentence's term ids, reused
}

func (b *builder) term(w []byte) int32 {
	if id, ok := b.words[string(w)]; ok {
		return id
	}
	word := string(w)
	id := int32(-1)
	if t, ok := tokenize.Term(word); ok {
		tid, seen := b.dict[t]
		if !seen {
			tid = uint32(b.n)
			b.dict[t] = tid
			b.n++
		}
		id = int32(tid)
	}
	b.words[word] = id
	return id
}

// each calls fn with the term id of every term of s, repeats included.
func (b *builder) each(s string, fn func(id uint32)) {
	tokenize.EachWord(s, func(w []byte) {
		if id := b.term(w); id >= 0 {
			fn(uint32(id))
		}
	})
}

// The fields of a tool's BM25F document, in Params order.
const (
	fieldName = iota
	fieldNamespace
	fieldDescription
	fieldTags
	fieldExamples
	numFields
)

// fieldTerms holds one field of every tool: its distinct terms with their
// frequencies, flat, tool after tool.
type fieldTerms struct {
	off []uint32 // per tool: start in id and tf; one more entry at the end
	id  []uint32
	tf  []float32
	len []float32 // per tool: the field's length in terms
}

// sentenceSets holds the term sets of examples or anti-patterns, flat.
type sentenceSets struct {
	off   []uint32 // per sentence: start in ids; one more entry at the end
	ids   []uint32 // sorted distinct term ids
	owner []uint32 // sentence -> tool
}

// newIndex indexes a catalog in two passes over its tools: the terms of
// every field (readCatalog), then their BM25F weights and term sets
// (weigh), scattered into per-term postings (post).
func newIndex(entries []Entry, p Params, collapse float64, tie []uint32) *termIndex {
	b := &builder{dict: map[string]uint32{}, words: map[string]int32{}}
	b.readCatalog(entries)
	ix := &termIndex{p: p, dict: b.dict, words: b.words}
	n := len(entries)
	byTool, df := b.weigh(ix, n)
	ix.post(&byTool, df, n)
	// The choice graph and the confidence compare tools by what they say
	// about themselves, examples aside.
	ix.own = b.union(n, nil, fieldName, fieldNamespace, fieldDescription, fieldTags)
	ix.names = b.union(n, nil, fieldName, fieldNamespace)
	if collapse > 0 {
		ix.groups = newGroups(b.union(n, b.notNumber(), fieldDescription, fieldTags), collapse, tie)
	}
	ix.labelTerms(b.words)
	ix.expansion = p.Synonym > 0 || p.Related > 0 || p.Broader > 0
	if ix.expansion {
		loadRelated() // here, not on the first question
		ix.relKnown = make([]atomic.Pointer[[]expansion], b.n)
		ix.relOther = map[string][]expansion{}
		ix.stems = make([]string, b.n)
		for t, id := range b.dict {
			ix.stems[id] = t
		}
	}
	ix.idf2 = make([]float32, b.n)
	for t, idf := range ix.toolIDF {
		ix.idf2[t] = idf * idf
	}
	ix.examples = newSentences(&b.ex, ix.idf2)
	ix.anti = newSentences(&b.anti, ix.idf2)
	most, terms := max(len(b.ex.owner), len(b.anti.owner)), b.n
	ix.pool.New = func() any {
		return &scratch{
			tool:    make([]float32, n),
			best:    make([]float32, n),
			antiSim: make([]float32, n),
			sent:    make([]float32, most),
			seen:    make([]bool, terms),
			expW:    make([]float32, terms),
		}
	}
	return ix
}

// readCatalog is the first pass: the terms of every field of every tool,
// and of every example and anti-pattern.
func (b *builder) readCatalog(entries []Entry) {
	add := b.count
	for i := range entries {
		t := &entries[i].Tool
		// Name words count once each: "create" of create_invoice is one
		// word, not three mentions. The whole name joins them, so a query
		// naming the tool (ABCmouse) finds it.
		b.each(nameWords(t.Name)+" "+t.Name, add)
		b.flush(fieldName, true)
		b.each(nameWords(t.Namespace), add)
		b.flush(fieldNamespace, false)
		b.each(t.Description, add)
		b.flush(fieldDescription, false)
		for _, tag := range t.Tags {
			b.each(tag, add)
		}
		b.flush(fieldTags, false)
		for _, e := range t.Examples {
			b.each(e, add)
			b.addSentence(&b.ex, e, i)
		}
		b.flush(fieldExamples, false)
		for _, a := range t.AntiPatterns {
			b.addSentence(&b.anti, a, i)
		}
	}
	for f := range b.fields {
		b.fields[f].off = append(b.fields[f].off, uint32(len(b.fields[f].id)))
	}
	b.ex.off = append(b.ex.off, uint32(len(b.ex.ids)))
	b.anti.off = append(b.anti.off, uint32(len(b.anti.ids)))
	b.acc = append(b.acc, make([]float32, b.n-len(b.acc))...)
}

// count counts one more occurrence of term id in acc.
func (b *builder) count(id uint32) {
	if int(id) >= len(b.acc) {
		b.acc = append(b.acc, make([]float32, int(id)+1-len(b.acc))...)
	}
	if b.acc[id] == 0 {
		b.touched = append(b.touched, id)
	}
	b.acc[id]++
}

// flush moves the counted terms into field f of the next tool (each
// counting once when once is set) and resets acc.
func (b *builder) flush(f int, once bool) {
	fd := &b.fields[f]
	fd.off = append(fd.off, uint32(len(fd.id)))
	slices.Sort(b.touched)
	var l float32
	for _, id := range b.touched {
		tf := b.acc[id]
		if once {
			tf = 1
		}
		fd.id = append(fd.id, id)
		fd.tf = append(fd.tf, tf)
		l += tf
		b.acc[id] = 0
	}
	fd.len = append(fd.len, l)
	b.touched = b.touched[:0]
}

// addSentence adds the term set of text, a sentence of tool owner, to s.
func (b *builder) addSentence(s *sentenceSets, text string, owner int) {
	b.sentence = b.sentence[:0]
	b.each(text, func(id uint32) { b.sentence = append(b.sentence, id) })
	slices.Sort(b.sentence)
	s.off = append(s.off, uint32(len(s.ids)))
	s.ids = append(s.ids, slices.Compact(b.sentence)...)
	s.owner = append(s.owner, uint32(owner))
}

// weigh is the second pass, BM25F: tf~ = Σ_f w_f·tf_f / (1 − b_f +
// b_f·len_f/avg_f). A query only multiplies idf by tf~/(k1+tf~), so that
// part is computed here, tool by tool, with each term's document frequency.
func (b *builder) weigh(ix *termIndex, n int) (byTool fieldTerms, df []uint32) {
	p := &ix.p
	weights := [numFields]Field{p.Name, p.Namespace, p.Description, p.Tags, p.Examples}
	var avg [numFields]float64
	for f := range b.fields {
		for _, l := range b.fields[f].len {
			avg[f] += float64(l)
		}
		avg[f] = max(avg[f]/float64(max(n, 1)), 1)
	}
	df = make([]uint32, b.n)
	acc := b.acc
	for i := range n {
		for f := range b.fields {
			fd := &b.fields[f]
			w := weights[f].Weight / (1 - weights[f].B + weights[f].B*float64(fd.len[i])/avg[f])
			if w <= 0 {
				continue
			}
			for j := fd.off[i]; j < fd.off[i+1]; j++ {
				id := fd.id[j]
				if acc[id] == 0 {
					b.touched = append(b.touched, id)
				}
				acc[id] += float32(w * float64(fd.tf[j]))
			}
		}
		slices.Sort(b.touched)
		byTool.off = append(byTool.off, uint32(len(byTool.id)))
		for _, id := range b.touched {
			tf := float64(acc[id])
			byTool.id = append(byTool.id, id)
			byTool.tf = append(byTool.tf, float32(tf/(tf+p.K1)))
			df[id]++
			acc[id] = 0
		}
		b.touched = b.touched[:0]
	}
	byTool.off = append(byTool.off, uint32(len(byTool.id)))
	return byTool, df
}

// union returns, per tool of n, the sorted distinct term ids of fields fs
// for which keep (nil: all) holds.
func (b *builder) union(n int, keep func(id uint32) bool, fs ...int) flatSets {
	out := flatSets{off: make([]uint32, 1, n+1)}
	for i := range n {
		start := len(out.ids)
		for _, f := range fs {
			fd := &b.fields[f]
			for _, id := range fd.id[fd.off[i]:fd.off[i+1]] {
				if keep == nil || keep(id) {
					out.ids = append(out.ids, id)
				}
			}
		}
		set := out.ids[start:]
		slices.Sort(set)
		out.ids = append(out.ids[:start], slices.Compact(set)...)
		out.off = append(out.off, uint32(len(out.ids)))
	}
	return out
}

// post scatters the tools' saturated weights (byTool) into per-term
// postings, and computes each term's idf over the n tools from its
// document frequency df.
func (ix *termIndex) post(byTool *fieldTerms, df []uint32, n int) {
	terms := len(df)
	ix.toolOff = make([]uint32, terms+1)
	ix.toolIDF = make([]float32, terms)
	for id, d := range df {
		ix.toolOff[id+1] = ix.toolOff[id] + d
		ix.toolIDF[id] = float32(math.Log(1 + (float64(n)-float64(d)+0.5)/(float64(d)+0.5)))
	}
	ix.toolDoc = make([]uint32, len(byTool.id))
	ix.toolSat = make([]float32, len(byTool.id))
	next := slices.Clone(ix.toolOff[:terms])
	for i := range n {
		for j := byTool.off[i]; j < byTool.off[i+1]; j++ {
			id := byTool.id[j]
			ix.toolDoc[next[id]] = uint32(i)
			ix.toolSat[next[id]] = byTool.tf[j]
			next[id]++
		}
	}
}

// labelTerms gives every term its shortest word (the alphabetically first
// of equal length), for labels.
func (ix *termIndex) labelTerms(words map[string]int32) {
	ix.surface = make([]string, len(ix.toolIDF))
	for w, id := range words {
		if id < 0 {
			continue
		}
		if cur := ix.surface[id]; cur == "" || len(w) < len(cur) || len(w) == len(cur) && w < cur {
			ix.surface[id] = w
		}
	}
}

// newSentences indexes sentences with the catalog's squared idf (idf2),
// so that a question word the sentences lack still counts in the
// question's norm.
func newSentences(ss *sentenceSets, idf2 []float32) sentences {
	nTerms := len(idf2)
	s := sentences{owner: ss.owner, idf2: idf2, off: make([]uint32, nTerms+1)}
	df := make([]uint32, nTerms)
	for _, t := range ss.ids {
		df[t]++
	}
	// Counting sort of (term, sentence) pairs into flat postings.
	for t, d := range df {
		s.off[t+1] = s.off[t] + d
	}
	s.doc = make([]uint32, len(ss.ids))
	s.w = make([]float32, len(ss.ids))
	next := slices.Clone(s.off[:nTerms])
	for i := range ss.owner {
		terms := ss.ids[ss.off[i]:ss.off[i+1]]
		var norm float64
		for _, t := range terms {
			norm += float64(idf2[t])
		}
		w := float32(0)
		if norm > 0 {
			w = float32(1 / math.Sqrt(norm))
		}
		for _, t := range terms {
			s.doc[next[t]] = uint32(i)
			s.w[next[t]] = w
			next[t]++
		}
	}
	return s
}

// queryTerms appends the distinct term ids of text known to the catalog.
// seen (per term id, all false; nil for a short text) makes repeats cost
// O(1) on a long question; the caller clears it through the result.
func (ix *termIndex) queryTerms(dst []uint32, text string, seen []bool) []uint32 {
	return ix.queryTermsOther(dst, text, seen, nil)
}

// queryTermsOther is queryTerms that also appends to other (when given)
// the terms of text the catalog lacks.
func (ix *termIndex) queryTermsOther(dst []uint32, text string, seen []bool, other *[]string) []uint32 {
	tokenize.EachWord(text, func(w []byte) {
		id, ok := ix.words[string(w)]
		if !ok {
			t, isTerm := tokenize.Term(string(w))
			if !isTerm {
				return
			}
			tid, known := ix.dict[t]
			if !known {
				if other != nil {
					*other = append(*other, t)
				}
				return
			}
			id = int32(tid)
		}
		switch {
		case id < 0:
		case seen != nil:
			if !seen[id] {
				seen[id] = true
				dst = append(dst, uint32(id))
			}
		case !slices.Contains(dst, uint32(id)):
			dst = append(dst, uint32(id))
		}
	})
	return dst
}

// addPostings adds w times term t's saturated BM25F weight to the score of
// every allowed tool that holds it.
func (ix *termIndex) addPostings(sc *scratch, t uint32, w float32, allowed []bool) {
	lo, hi := ix.toolOff[t], ix.toolOff[t+1]
	docs, sats := ix.toolDoc[lo:hi], ix.toolSat[lo:hi]
	for i, d := range docs {
		if allowed != nil && !allowed[d] {
			continue
		}
		if sc.tool[d] == 0 {
			sc.touched = append(sc.touched, d)
		}
		sc.tool[d] += w * sats[i]
	}
}

// match scores the sentences of s against the query terms and keeps, per
// tool, the best cosine in best. A tool gets its first cosine is appended
// to list unless other (when given) already has a score for it.
func (s *sentences) match(sc *scratch, terms []uint32, best []float32, allowed []bool, list *[]uint32, other []float32) {
	s.matchInto(sc, sc.sent, terms, best, allowed, list, other)
}

// matchInto is match with acc (one slot per sentence, all zero) as the
// cosine numerators.
func (s *sentences) matchInto(sc *scratch, acc []float32, terms []uint32, best []float32, allowed []bool, list *[]uint32, other []float32) {
	if len(s.owner) == 0 {
		return
	}
	var qnorm float32
	for _, t := range terms {
		qnorm += s.idf2[t]
	}
	if qnorm == 0 {
		return
	}
	for _, t := range terms {
		if int(t)+1 >= len(s.off) {
			continue // a word of the question the sentences' terms lack
		}
		idf2 := s.idf2[t]
		lo, hi := s.off[t], s.off[t+1]
		docs, ws := s.doc[lo:hi], s.w[lo:hi]
		for i, d := range docs {
			if allowed != nil && !allowed[s.owner[d]] {
				continue
			}
			if acc[d] == 0 {
				sc.sentHit = append(sc.sentHit, d)
			}
			acc[d] += idf2 * ws[i]
		}
	}
	inv := 1 / float32(math.Sqrt(float64(qnorm)))
	for _, d := range sc.sentHit {
		c := acc[d] * inv
		acc[d] = 0
		o := s.owner[d]
		if c <= best[o] {
			continue
		}
		if best[o] == 0 && (other == nil || other[o] == 0) {
			*list = append(*list, o)
		}
		best[o] = c
	}
	sc.sentHit = sc.sentHit[:0]
}

// tieOrder ranks entries by (source, id, position): the order of tools of
// equal score.
func tieOrder(entries []Entry) []uint32 {
	ids := make([]string, len(entries))
	order := make([]int, len(entries))
	for i := range entries {
		ids[i] = entries[i].Tool.ID()
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(entries[a].Source, entries[b].Source); c != 0 {
			return c
		}
		if c := cmp.Compare(ids[a], ids[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	rank := make([]uint32, len(entries))
	for r, i := range order {
		rank[i] = uint32(r)
	}
	return rank
}

// expansion is a catalog term related to a question word, with its weight
// as a share of the word's.
type expansion struct {
	term   uint32
	weight float32
}

// relatedTerms returns the catalog terms related to term (id its term id,
// -1: not a catalog term), computed once per term: a slot per catalog term,
// a map bounded by the table's size for the others.
func (ix *termIndex) relatedTerms(term string, id int32) []expansion {
	if id >= 0 {
		if p := ix.relKnown[id].Load(); p != nil {
			return *p
		}
	} else {
		ix.relMu.RLock()
		out, ok := ix.relOther[term]
		ix.relMu.RUnlock()
		if ok {
			return out
		}
	}
	weights := [numRel]float32{float32(ix.p.Synonym), float32(ix.p.Related), float32(ix.p.Broader)}
	maxDF := uint32(math.Ceil(ix.p.ExpandMaxDF * float64(len(ix.own.off)-1)))
	var out []expansion
	found := loadRelated().lookup(term, func(kind int, rel []byte) {
		t, ok := ix.dict[string(rel)]
		if !ok || weights[kind] == 0 || ix.p.ExpandMaxDF > 0 && ix.toolOff[t+1]-ix.toolOff[t] > maxDF {
			return
		}
		if !slices.ContainsFunc(out, func(e expansion) bool { return e.term == t }) {
			out = append(out, expansion{t, weights[kind]})
		}
	})
	if len(out) > 1 && ix.p.ExpandNorm > 0 {
		norm := float32(math.Pow(float64(len(out)), -ix.p.ExpandNorm))
		for i := range out {
			out[i].weight *= norm
		}
	}
	switch {
	case id >= 0:
		ix.relKnown[id].Store(&out)
	case found:
		ix.relMu.Lock()
		ix.relOther[strings.Clone(term)] = out
		ix.relMu.Unlock()
	}
	return out
}

// expandTerms collects in sc.expand the catalog terms related to the
// question's terms (sc.terms, sc.other) that are not question terms
// (sc.seen), each with its weight in sc.expW: the largest any question term
// gives it, times the smaller idf of the two when the question term is a
// catalog term, so that a related term never counts more than the term
// would.
func (ix *termIndex) expandTerms(sc *scratch) {
	add := func(rel []expansion, src float32) {
		for _, e := range rel {
			if sc.seen[e.term] {
				continue
			}
			wt := e.weight * min(src, ix.toolIDF[e.term])
			if sc.expW[e.term] == 0 {
				sc.expand = append(sc.expand, e.term)
			}
			sc.expW[e.term] = max(sc.expW[e.term], wt)
		}
	}
	for _, t := range sc.terms {
		add(ix.relatedTerms(ix.stems[t], int32(t)), ix.toolIDF[t])
	}
	for _, t := range sc.other {
		add(ix.relatedTerms(t, -1), float32(math.Inf(1)))
	}
	clear(sc.other)
	sc.other = sc.other[:0]
}
