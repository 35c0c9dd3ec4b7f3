// Package eval loads retrieval benchmarks in the BEIR directory layout and computes the ranking metrics
// reported by `contextrouter eval retrieval`. Everything here is pure: the caller runs the queries through
// the engine and feeds the ranked document ids back into an Accumulator.
package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DefaultSplit is the qrels split LoadBEIR reads when none is named.
const DefaultSplit = "test"

// maxLineBytes bounds one JSONL or TSV line. Corpus documents can be whole articles on one line, far beyond
// bufio.Scanner's 64 KiB default; 64 MiB is generous while still stopping a runaway file without newlines.
const maxLineBytes = 64 << 20

// qrelsHeader is the first row BEIR writes into every qrels file.
const qrelsHeader = "query-id"

// Doc is one corpus document.
type Doc struct {
	ID, Title, Text string
}

// Query is one benchmark query.
type Query struct {
	ID, Text string
}

// Dataset is a BEIR-layout directory: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.
type Dataset struct {
	// Corpus holds every document in corpus.jsonl order.
	Corpus []Doc
	// Queries holds only the queries the split's qrels reference, in queries.jsonl order.
	Queries []Query
	// Qrels maps query id -> doc id -> graded relevance (> 0). Every query in Queries has an entry; it is
	// empty when the split lists the query only with non-positive scores (the Accumulator then skips it).
	// Relevant docs missing from the corpus are kept: standard BEIR scoring counts them as unretrievable.
	Qrels map[string]map[string]int
}

// LoadBEIR reads dir/corpus.jsonl, dir/queries.jsonl and dir/qrels/<split>.tsv (split "" means "test").
// Errors name the file and, for content problems, the 1-based line.
func LoadBEIR(dir, split string) (*Dataset, error) {
	if split == "" {
		split = DefaultSplit
	}
	// The split becomes a path component; refuse anything that would leave qrels/.
	if strings.ContainsAny(split, `/\`) || split == "." || split == ".." {
		return nil, fmt.Errorf("split %q: must be a plain name such as %q", split, DefaultSplit)
	}
	qrelsPath := filepath.Join(dir, "qrels", split+".tsv")
	if _, err := os.Stat(qrelsPath); errors.Is(err, os.ErrNotExist) {
		// Name the splits that do exist: a typo is the common cause.
		avail, lerr := Splits(dir)
		if lerr != nil {
			return nil, fmt.Errorf("split %q: %w", split, lerr)
		}
		if len(avail) == 0 {
			return nil, fmt.Errorf("split %q: %s does not exist and %s holds no *.tsv files",
				split, qrelsPath, filepath.Join(dir, "qrels"))
		}
		return nil, fmt.Errorf("split %q: %s does not exist (available splits: %s)",
			split, qrelsPath, strings.Join(avail, ", "))
	}

	// Qrels first: they are small, and a broken split should fail before the corpus is read.
	qrels, order, firstLine, err := readQrels(qrelsPath)
	if err != nil {
		return nil, err
	}
	queriesPath := filepath.Join(dir, "queries.jsonl")
	queries, err := readQueries(queriesPath, qrels)
	if err != nil {
		return nil, err
	}
	if len(queries) != len(qrels) {
		have := make(map[string]bool, len(queries))
		for _, q := range queries {
			have[q.ID] = true
		}
		// Report the earliest qrels row whose query is missing, so the message is deterministic.
		for _, qid := range order {
			if !have[qid] {
				return nil, fmt.Errorf("%s:%d: query %q is not in %s", qrelsPath, firstLine[qid], qid, queriesPath)
			}
		}
	}
	corpus, err := readCorpus(filepath.Join(dir, "corpus.jsonl"))
	if err != nil {
		return nil, err
	}
	return &Dataset{Corpus: corpus, Queries: queries, Qrels: qrels}, nil
}

// Splits lists the qrels/*.tsv split names in dir, sorted.
func Splits(dir string) ([]string, error) {
	qdir := filepath.Join(dir, "qrels")
	entries, err := os.ReadDir(qdir)
	if err != nil {
		return nil, fmt.Errorf("listing splits: %w", err)
	}
	var splits []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".tsv") || name == ".tsv" {
			continue
		}
		splits = append(splits, strings.TrimSuffix(name, ".tsv"))
	}
	sort.Strings(splits)
	return splits, nil
}

// readQrels parses a BEIR qrels file. It returns the relevance map, the query ids in first-seen order and
// the line each query id first appears on (for error messages raised later).
func readQrels(path string) (map[string]map[string]int, []string, map[string]int, error) {
	qrels := map[string]map[string]int{}
	var order []string
	firstLine := map[string]int{}
	// Remember where each (query, doc) pair was listed to reject contradicting or repeated rows.
	pairLine := map[[2]string]int{}
	err := scanLines(path, func(n int, line []byte) error {
		s := strings.TrimRight(string(line), "\r")
		if strings.TrimSpace(s) == "" {
			return nil
		}
		fields := strings.Split(s, "\t")
		if len(order) == 0 && len(pairLine) == 0 && fields[0] == qrelsHeader {
			return nil
		}
		if len(fields) != 3 {
			return fmt.Errorf("%s:%d: want 3 tab-separated fields (query-id, corpus-id, score), got %d",
				path, n, len(fields))
		}
		qid, did := strings.TrimSpace(fields[0]), strings.TrimSpace(fields[1])
		if qid == "" || did == "" {
			return fmt.Errorf("%s:%d: empty query-id or corpus-id", path, n)
		}
		score, err := strconv.Atoi(strings.TrimSpace(fields[2]))
		if err != nil {
			return fmt.Errorf("%s:%d: score %q is not an integer", path, n, fields[2])
		}
		key := [2]string{qid, did}
		if prev, dup := pairLine[key]; dup {
			return fmt.Errorf("%s:%d: query %q, doc %q already listed on line %d", path, n, qid, did, prev)
		}
		pairLine[key] = n
		rels, seen := qrels[qid]
		if !seen {
			rels = map[string]int{}
			qrels[qid] = rels
			order = append(order, qid)
			firstLine[qid] = n
		}
		// Non-positive grades mean "judged not relevant"; the query still belongs to the split.
		if score > 0 {
			rels[did] = score
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return qrels, order, firstLine, nil
}

// jsonlRecord is the union of the corpus and query line shapes. Other fields (BEIR's "metadata") are ignored.
type jsonlRecord struct {
	ID    json.RawMessage `json:"_id"`
	Title string          `json:"title"`
	Text  string          `json:"text"`
}

// decodeRecord parses one JSONL line and returns its id. Ids are strings in BEIR, but some exporters write
// numeric ids; those are taken verbatim so they still match the qrels' text ids.
func decodeRecord(path string, n int, line []byte) (jsonlRecord, string, error) {
	var rec jsonlRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, "", fmt.Errorf("%s:%d: %w", path, n, err)
	}
	raw := bytes.TrimSpace(rec.ID)
	var id string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return rec, "", fmt.Errorf("%s:%d: missing \"_id\"", path, n)
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &id); err != nil {
			return rec, "", fmt.Errorf("%s:%d: \"_id\": %w", path, n, err)
		}
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		id = string(raw)
	default:
		return rec, "", fmt.Errorf("%s:%d: \"_id\" must be a string, got %s", path, n, raw)
	}
	if id == "" {
		return rec, "", fmt.Errorf("%s:%d: empty \"_id\"", path, n)
	}
	return rec, id, nil
}

// readQueries keeps the queries that appear in qrels, in file order.
func readQueries(path string, qrels map[string]map[string]int) ([]Query, error) {
	var out []Query
	seen := map[string]int{}
	err := scanLines(path, func(n int, line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		rec, id, err := decodeRecord(path, n, line)
		if err != nil {
			return err
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("%s:%d: duplicate query id %q (first on line %d)", path, n, id, prev)
		}
		seen[id] = n
		if _, ok := qrels[id]; ok {
			out = append(out, Query{ID: id, Text: rec.Text})
		}
		return nil
	})
	return out, err
}

// readCorpus reads every document in file order.
func readCorpus(path string) ([]Doc, error) {
	var out []Doc
	seen := map[string]int{}
	err := scanLines(path, func(n int, line []byte) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		rec, id, err := decodeRecord(path, n, line)
		if err != nil {
			return err
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("%s:%d: duplicate doc id %q (first on line %d)", path, n, id, prev)
		}
		seen[id] = n
		out = append(out, Doc{ID: id, Title: rec.Title, Text: rec.Text})
		return nil
	})
	return out, err
}

// scanLines calls fn for each line of path with its 1-based number. A UTF-8 byte-order mark on the first
// line is dropped so files saved by Windows tools parse.
func scanLines(path string, fn func(n int, line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), maxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s:%d: line longer than %d bytes", path, n+1, maxLineBytes)
		}
		return fmt.Errorf("%s:%d: %w", path, n+1, err)
	}
	return nil
}
