package index

// NearDuplicates holds the term sets (sorted ids in one global order, as
// DocTerms and TermIDs give) of texts already kept, and tells whether a new
// set is a near-duplicate of one of them: Jaccard >= the threshold. The query
// pipeline and session packs share it, so "near-duplicate" means one thing.
//
// Few sets are compared pairwise (JaccardAtLeast rejects most pairs in a few
// steps); past pairwiseLimit an inverted map of prefix terms (see PrefixLen)
// picks the only sets worth verifying.
type NearDuplicates struct {
	t        float64
	sets     [][]uint32
	prefixes map[uint32][]int32
}

const pairwiseLimit = 32

// NewNearDuplicates returns an empty set for threshold t (0 < t <= 1).
func NewNearDuplicates(t float64) NearDuplicates { return NearDuplicates{t: t} }

// Duplicate reports whether terms is a near-duplicate of a set added before.
// An empty set is never a duplicate.
func (d *NearDuplicates) Duplicate(terms []uint32) bool {
	if d.prefixes == nil {
		for _, o := range d.sets {
			if JaccardAtLeast(terms, o, d.t) {
				return true
			}
		}
		return false
	}
	for _, r := range terms[:PrefixLen(len(terms), d.t)] {
		for _, pos := range d.prefixes[r] {
			if JaccardAtLeast(terms, d.sets[pos], d.t) {
				return true
			}
		}
	}
	return false
}

// Add keeps terms for later comparisons; the slice must not change afterwards.
func (d *NearDuplicates) Add(terms []uint32) {
	d.sets = append(d.sets, terms)
	switch {
	case len(d.sets) == pairwiseLimit:
		d.prefixes = make(map[uint32][]int32, pairwiseLimit*16)
		for i, set := range d.sets {
			d.index(set, i)
		}
	case len(d.sets) > pairwiseLimit:
		d.index(terms, len(d.sets)-1)
	}
}

func (d *NearDuplicates) index(terms []uint32, pos int) {
	for _, r := range terms[:PrefixLen(len(terms), d.t)] {
		d.prefixes[r] = append(d.prefixes[r], int32(pos))
	}
}
