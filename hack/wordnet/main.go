// Command wordnet generates internal/tools/related.txt.gz, the table of
// related words that tool retrieval expands questions with, from the
// WordNet 3.0 database files (Debian package wordnet-base:
// /usr/share/wordnet). Keys and values are search terms (tokenize.Term),
// so the table matches the stemmer the index uses.
//
//	go run ./hack/wordnet -dict /usr/share/wordnet -o internal/tools/related.txt.gz
//
// One line per term, sorted: "term\tsynonyms\trelated\tbroader", each
// column a space-separated list of terms:
//   - synonyms: the other words of the term's synsets;
//   - related: adjectives similar to it, pertainyms, derivationally related
//     forms and "see also" words;
//   - broader: the words of its synsets' hypernyms, one level up.
//
// Only a word's first -senses senses count (index files list them most
// frequent first): rare senses add more noise than evidence.
package main

import (
	"bufio"
	"compress/gzip"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/contextrouter/contextrouter/internal/tokenize"
)

const (
	colSynonyms = iota
	colRelated
	colBroader
	numCols
)

type synset struct {
	words []string // lemmas, lower-cased, "_" between words
	ptrs  []pointer
}

type pointer struct {
	symbol string
	target string // pos + offset
	source int    // word number in the synset (1-based); 0: the whole synset
}

// posFiles are the parts of speech and their files, in a fixed order: a
// term's columns list the words of its noun senses first, then verb,
// adjective and adverb senses, so the table is the same on every run.
var posFiles = [][2]string{{"n", "noun"}, {"v", "verb"}, {"a", "adj"}, {"r", "adv"}}

func main() {
	dict := flag.String("dict", "/usr/share/wordnet", "directory of the WordNet database files")
	out := flag.String("o", "internal/tools/related.txt.gz", "output file")
	senses := flag.Int("senses", 3, "senses per word to follow, most frequent first")
	limit := flag.Int("limit", 24, "terms per column at most")
	flag.Parse()

	synsets := map[string]*synset{}
	for _, pf := range posFiles {
		pos, name := pf[0], pf[1]
		if err := readData(filepath.Join(*dict, "data."+name), pos, synsets); err != nil {
			log.Fatal(err)
		}
	}
	table := map[string]*[numCols][]string{}
	for _, pf := range posFiles {
		pos, name := pf[0], pf[1]
		if err := readIndex(filepath.Join(*dict, "index."+name), pos, *senses, synsets, table); err != nil {
			log.Fatal(err)
		}
	}

	keys := make([]string, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	w := bufio.NewWriter(zw)
	lines := 0
	for _, k := range keys {
		cols := table[k]
		seen := map[string]bool{k: true}
		var parts [numCols]string
		empty := true
		for c := range cols {
			var keep []string
			for _, t := range cols[c] {
				if !seen[t] && len(keep) < *limit {
					seen[t] = true
					keep = append(keep, t)
				}
			}
			parts[c] = strings.Join(keep, " ")
			empty = empty && len(keep) == 0
		}
		if empty {
			continue
		}
		fmt.Fprintf(w, "%s\t%s\n", k, strings.Join(parts[:], "\t"))
		lines++
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	log.Printf("%d terms written to %s", lines, *out)
}

// term is the search term of a single-word lemma; ok is false for
// collocations and stopwords.
func term(lemma string) (string, bool) {
	if strings.ContainsAny(lemma, "_-. '") {
		return "", false
	}
	var t string
	var n int
	tokenize.EachWord(lemma, func(w []byte) {
		n++
		t, _ = tokenize.Term(string(w))
	})
	if n != 1 || t == "" {
		return "", false
	}
	return t, true
}

// readData parses data.POS: "offset lex_filenum ss_type w_cnt word lex_id
// ... p_cnt [symbol offset pos source/target]... | gloss".
func readData(path, pos string, into map[string]*synset) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			continue // licence header
		}
		if i := strings.Index(line, " | "); i >= 0 {
			line = line[:i] // the gloss
		}
		fs := strings.Fields(line)
		wc, err := strconv.ParseInt(fs[3], 16, 32)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", path, fs[0], err)
		}
		s := &synset{}
		i := 4
		for range wc {
			w := strings.ToLower(fs[i])
			if j := strings.IndexByte(w, '('); j > 0 {
				w = w[:j] // adjective marker: (a), (p), (ip)
			}
			s.words = append(s.words, w)
			i += 2
		}
		pc, _ := strconv.Atoi(fs[i])
		i++
		for range pc {
			st, _ := strconv.ParseUint(fs[i+3][:2], 16, 8)
			p := fs[i+2]
			if p == "s" {
				p = "a" // satellite adjectives live in data.adj
			}
			s.ptrs = append(s.ptrs, pointer{symbol: fs[i], target: p + fs[i+1], source: int(st)})
			i += 4
		}
		into[pos+fs[0]] = s
	}
	return sc.Err()
}

// readIndex parses index.POS: "lemma pos synset_cnt p_cnt [symbol]...
// sense_cnt tagsense_cnt offset...", offsets most frequent sense first.
func readIndex(path, pos string, senses int, synsets map[string]*synset, table map[string]*[numCols][]string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") {
			continue
		}
		fs := strings.Fields(line)
		key, ok := term(fs[0])
		if !ok {
			continue
		}
		nSyn, _ := strconv.Atoi(fs[2])
		nPtr, _ := strconv.Atoi(fs[3])
		offs := fs[6+nPtr:]
		offs = offs[:min(len(offs), nSyn, senses)]
		row := table[key]
		if row == nil {
			row = &[numCols][]string{}
			table[key] = row
		}
		add := func(col int, words ...string) {
			for _, w := range words {
				if t, ok := term(w); ok && t != key {
					row[col] = append(row[col], t)
				}
			}
		}
		for _, off := range offs {
			s := synsets[pos+off]
			if s == nil {
				return fmt.Errorf("%s: %s: synset %s missing", path, fs[0], off)
			}
			self := slices.Index(s.words, fs[0]) + 1
			add(colSynonyms, s.words...)
			for _, p := range s.ptrs {
				t := synsets[p.target]
				if t == nil {
					continue
				}
				switch p.symbol {
				case "@", "@i":
					add(colBroader, t.words...)
				case "&", "\\", "+", "^", "=", "<":
					// A lexical pointer (source > 0) relates one word of
					// the synset: follow it only from that word.
					if p.source != 0 && p.source != self {
						continue
					}
					add(colRelated, t.words...)
				}
			}
		}
	}
	return sc.Err()
}
