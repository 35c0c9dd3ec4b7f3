package tools

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"

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

	setOff  []uint32 // per tool: range of sets
	sets    []uint32 // sorted distinct term ids of name, namespace, description, tags
	surface []string // per term: its shortest word, for labels

	pool sync.Pool
}

// set returns the term set of tool i.
func (ix *termIndex) set(i int) []uint32 { return ix.sets[ix.setOff[i]:ix.setOff[i+1]] }

// selfCosine is the cosine of the question's terms and tool i's term set,
// idf-weighted as sentences are.
func (ix *termIndex) selfCosine(i uint32, terms []uint32) float32 {
	set := ix.set(int(i))
	var dot, qn, sn float32
	for _, t := range terms {
		w := ix.examples.idf2[t]
		qn += w
		if _, ok := slices.BinarySearch(set, t); ok {
			dot += w
		}
	}
	for _, t := range set {
		sn += ix.examples.idf2[t]
	}
	if dot == 0 {
		return 0
	}
	return dot / float32(math.Sqrt(float64(qn)*float64(sn)))
}

// sentences is an index of short texts (examples, anti-patterns) that
// belong to tools, scored by cosine of idf-weighted term sets.
type sentences struct {
	off   []uint32  // per term: range of doc and w
	doc   []uint32  // sentence ids
	w     []float32 // 1/|sentence| (the sentence's idf norm)
	idf2  []float32 // per term: squared idf over the catalog's tools
	owner []uint32  // sentence -> tool
}

type scratch struct {
	tool    []float32 // BM25F score per tool
	best    []float32 // best example cosine per tool
	antiSim []float32 // best anti-pattern cosine per tool
	sent    []float32 // cosine numerator per sentence
	touched []uint32  // tools with a score
	antiHit []uint32  // tools with an anti-pattern cosine
	sentHit []uint32  // sentences with a score
	terms   []uint32
	hits    []Hit
}

// termIDs collects the term ids of text into the builder.
type builder struct {
	dict  map[string]uint32
	words map[string]int32
	n     int // terms
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

func newIndex(entries []Entry, p Params) *termIndex {
	b := &builder{dict: map[string]uint32{}, words: map[string]int32{}}
	n := len(entries)
	type fieldTF struct {
		tf  map[uint32]float32
		len float32
	}
	const nf = 5
	fields := [nf]*Field{&p.Name, &p.Namespace, &p.Description, &p.Tags, &p.Examples}
	docs := make([][nf]fieldTF, n)
	var avg [nf]float64
	var exTerms, antiTerms [][]uint32
	var exOwner, antiOwner []uint32
	for i := range entries {
		t := &entries[i].Tool
		d := &docs[i]
		for f := range d {
			d[f].tf = map[uint32]float32{}
		}
		add := func(f int, s string) {
			b.each(s, func(id uint32) { d[f].tf[id]++; d[f].len++ })
		}
		// Name words count once each: "create" of create_invoice is one
		// word, not three mentions. The whole name joins them, so a query
		// naming the tool (ABCmouse) finds it.
		b.each(nameWords(t.Name)+" "+t.Name, func(id uint32) {
			if d[0].tf[id] == 0 {
				d[0].tf[id] = 1
				d[0].len++
			}
		})
		add(1, nameWords(t.Namespace))
		add(2, t.Description)
		add(3, strings.Join(t.Tags, " "))
		for _, e := range t.Examples {
			add(4, e)
			exTerms = append(exTerms, b.set(e))
			exOwner = append(exOwner, uint32(i))
		}
		for _, a := range t.AntiPatterns {
			antiTerms = append(antiTerms, b.set(a))
			antiOwner = append(antiOwner, uint32(i))
		}
		for f := range d {
			avg[f] += float64(d[f].len)
		}
	}
	for f := range avg {
		avg[f] = max(avg[f]/float64(max(n, 1)), 1)
	}
	// BM25F: tf~ = Σ_f w_f·tf_f / (1 − b_f + b_f·len_f/avg_f); the query
	// only multiplies idf by tf~/(k1+tf~), so that part is computed here.
	type post struct {
		tool uint32
		sat  float32
	}
	postings := make([][]post, b.n)
	tfs := map[uint32]float64{}
	var ids []uint32
	for i := range docs {
		clear(tfs)
		for f := range docs[i] {
			fd := &docs[i][f]
			norm := 1 - fields[f].B + fields[f].B*float64(fd.len)/avg[f]
			for id, tf := range fd.tf {
				tfs[id] += fields[f].Weight * float64(tf) / norm
			}
		}
		ids = ids[:0]
		for id, tf := range tfs {
			if tf > 0 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			tf := tfs[id]
			postings[id] = append(postings[id], post{uint32(i), float32(tf / (tf + p.K1))})
		}
	}
	ix := &termIndex{p: p, dict: b.dict, words: b.words}
	// The term sets of the choice graph: what a tool says about itself,
	// without its examples.
	ix.setOff = make([]uint32, n+1)
	for i := range docs {
		ix.setOff[i] = uint32(len(ix.sets))
		start := len(ix.sets)
		for f := range 4 {
			for id := range docs[i][f].tf {
				ix.sets = append(ix.sets, id)
			}
		}
		set := ix.sets[start:]
		slices.Sort(set)
		ix.sets = append(ix.sets[:start], slices.Compact(set)...)
	}
	ix.setOff[n] = uint32(len(ix.sets))
	ix.surface = make([]string, b.n)
	for w, id := range b.words {
		if id < 0 {
			continue
		}
		if cur := ix.surface[id]; cur == "" || len(w) < len(cur) || len(w) == len(cur) && w < cur {
			ix.surface[id] = w
		}
	}
	ix.toolOff = make([]uint32, b.n+1)
	ix.toolIDF = make([]float32, b.n)
	for id, ps := range postings {
		ix.toolOff[id] = uint32(len(ix.toolDoc))
		df := float64(len(ps))
		ix.toolIDF[id] = float32(math.Log(1 + (float64(n)-df+0.5)/(df+0.5)))
		for _, q := range ps {
			ix.toolDoc = append(ix.toolDoc, q.tool)
			ix.toolSat = append(ix.toolSat, q.sat)
		}
	}
	ix.toolOff[b.n] = uint32(len(ix.toolDoc))
	idf2 := make([]float32, b.n)
	for t, idf := range ix.toolIDF {
		idf2[t] = idf * idf
	}
	ix.examples = newSentences(exTerms, exOwner, idf2)
	ix.anti = newSentences(antiTerms, antiOwner, idf2)
	nEx, nAnti := len(exOwner), len(antiOwner)
	ix.pool.New = func() any {
		return &scratch{
			tool:    make([]float32, n),
			best:    make([]float32, n),
			antiSim: make([]float32, n),
			sent:    make([]float32, max(nEx, nAnti)),
		}
	}
	return ix
}

// set returns the distinct term ids of s, sorted.
func (b *builder) set(s string) []uint32 {
	var ids []uint32
	b.each(s, func(id uint32) { ids = append(ids, id) })
	slices.Sort(ids)
	return slices.Compact(ids)
}

// newSentences indexes sentences with the catalog's squared idf (idf2),
// so that a question word the sentences lack still counts in the
// question's norm.
func newSentences(terms [][]uint32, owner []uint32, idf2 []float32) sentences {
	nTerms := len(idf2)
	s := sentences{owner: owner, idf2: idf2, off: make([]uint32, nTerms+1)}
	if len(terms) == 0 {
		return s
	}
	df := make([]uint32, nTerms)
	for _, ts := range terms {
		for _, t := range ts {
			df[t]++
		}
	}
	// Counting sort of (term, sentence) pairs into flat postings.
	var total uint32
	for t, d := range df {
		s.off[t] = total
		total += d
	}
	s.off[nTerms] = total
	s.doc = make([]uint32, total)
	s.w = make([]float32, total)
	next := slices.Clone(s.off[:nTerms])
	for i, ts := range terms {
		var norm float64
		for _, t := range ts {
			norm += float64(s.idf2[t])
		}
		w := float32(0)
		if norm > 0 {
			w = float32(1 / math.Sqrt(norm))
		}
		for _, t := range ts {
			s.doc[next[t]] = uint32(i)
			s.w[next[t]] = w
			next[t]++
		}
	}
	return s
}

// queryTerms appends the distinct term ids of text known to the catalog.
func (ix *termIndex) queryTerms(dst []uint32, text string) []uint32 {
	tokenize.EachWord(text, func(w []byte) {
		id, ok := ix.words[string(w)]
		if !ok {
			t, isTerm := tokenize.Term(string(w))
			if !isTerm {
				return
			}
			tid, known := ix.dict[t]
			if !known {
				return
			}
			id = int32(tid)
		}
		if id >= 0 && !slices.Contains(dst, uint32(id)) {
			dst = append(dst, uint32(id))
		}
	})
	return dst
}

// match scores the sentences of s against the query terms and keeps, per
// tool, the best cosine in best. A tool gets its first cosine is appended
// to list unless other (when given) already has a score for it.
func (s *sentences) match(sc *scratch, terms []uint32, best []float32, allowed []bool, list *[]uint32, other []float32) {
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
		idf2 := s.idf2[t]
		lo, hi := s.off[t], s.off[t+1]
		docs, ws := s.doc[lo:hi], s.w[lo:hi]
		for i, d := range docs {
			if allowed != nil && !allowed[s.owner[d]] {
				continue
			}
			if sc.sent[d] == 0 {
				sc.sentHit = append(sc.sentHit, d)
			}
			sc.sent[d] += idf2 * ws[i]
		}
	}
	inv := 1 / float32(math.Sqrt(float64(qnorm)))
	for _, d := range sc.sentHit {
		c := sc.sent[d] * inv
		sc.sent[d] = 0
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

// tieLess orders tools of equal score by (source, id).
func tieOrder(entries []Entry) []uint32 {
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ea, eb := &entries[a], &entries[b]
		if c := cmp.Compare(ea.Source, eb.Source); c != 0 {
			return c
		}
		if c := cmp.Compare(ea.Tool.ID(), eb.Tool.ID()); c != 0 {
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
