package tools

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"sort"
	"sync"
)

// related.txt.gz is generated from WordNet 3.0 by hack/wordnet (licence:
// WORDNET-LICENSE beside it): per search term, its synonyms, related and
// broader terms.
//
//go:embed related.txt.gz
var relatedGz []byte

// WordNetLicense is WordNet's licence, which asks that its notice travel
// with every copy of the data: embedded beside the table.
//
//go:embed WORDNET-LICENSE
var WordNetLicense string

// Kinds of related terms, in the table's column order.
const (
	relSynonym = iota
	relRelated
	relBroader
	numRel
)

// relatedTable is the decompressed table: sorted lines and where each
// starts. Loaded on first use: an index without expansion never pays for it.
type relatedTable struct {
	data  []byte
	lines []uint32
}

var loadRelated = sync.OnceValue(func() *relatedTable {
	zr, err := gzip.NewReader(bytes.NewReader(relatedGz))
	if err != nil {
		panic("tools: related.txt.gz: " + err.Error()) // embedded at build time
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		panic("tools: related.txt.gz: " + err.Error())
	}
	t := &relatedTable{data: data}
	for i := 0; i < len(data); {
		t.lines = append(t.lines, uint32(i))
		j := bytes.IndexByte(data[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return t
})

// lookup calls fn with every term related to term and its kind; false:
// term is not in the table.
func (t *relatedTable) lookup(term string, fn func(kind int, related []byte)) bool {
	key := func(i int) []byte {
		line := t.data[t.lines[i]:]
		return line[:bytes.IndexByte(line, '\t')]
	}
	i := sort.Search(len(t.lines), func(i int) bool { return string(key(i)) >= term })
	if i == len(t.lines) || string(key(i)) != term {
		return false
	}
	line := t.data[t.lines[i]+uint32(len(term))+1:]
	line = line[:bytes.IndexByte(line, '\n')]
	kind := 0
	for len(line) > 0 && kind < numRel {
		end := len(line)
		if j := bytes.IndexAny(line, " \t"); j >= 0 {
			end = j
		}
		if end > 0 {
			fn(kind, line[:end])
		}
		if end == len(line) {
			break
		}
		if line[end] == '\t' {
			kind++
		}
		line = line[end+1:]
	}
	return true
}
