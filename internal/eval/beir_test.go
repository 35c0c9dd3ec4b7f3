package eval

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// writeTree writes files (relative path -> content) under a fresh temp dir and returns the dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyFiles is a small hand-made dataset exercising the format's corners.
func tinyFiles() map[string]string {
	long := strings.Repeat("lorem ipsum ", 20000) // ~240 KB: beyond bufio.Scanner's default 64 KiB
	return map[string]string{
		"corpus.jsonl": "\ufeff" + `{"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {"year": 2020}}` + "\n" +
			`{"_id": "d2", "title": "", "text": "Line one\nline two \"quoted\""}` + "\n" +
			"\n" + // blank lines are tolerated
			`{"_id": 42, "title": "Numeric id", "text": "` + long + `"}` + "\n",
		"queries.jsonl": `{"_id": "q3", "text": "third listed first"}` + "\n" +
			`{"_id": "q1", "text": "what do cats do"}` + "\n" +
			`{"_id": "q2", "text": "only in train"}` + "\n" +
			`{"_id": "q4", "text": "judged irrelevant only"}` + "\n",
		"qrels/test.tsv": "query-id\tcorpus-id\tscore\r\n" +
			"q1\td1\t2\r\n" +
			"q1\td2\t1\r\n" +
			"q1\td3\t0\r\n" +
			"q3\t42\t1\r\n" +
			"q3\tmissing-doc\t1\r\n" +
			"q4\td1\t0\r\n",
		"qrels/train.tsv": "query-id\tcorpus-id\tscore\nq2\td2\t1\n",
		"qrels/dev.tsv":   "q1\td1\t1\n", // no header
		"qrels/README":    "not a split",
		"qrels/old/x.tsv": "q1\td1\t1\n",
	}
}

func TestLoadBEIR(t *testing.T) {
	dir := writeTree(t, tinyFiles())
	long := strings.Repeat("lorem ipsum ", 20000)
	tests := []struct {
		name    string
		split   string
		corpus  []Doc
		queries []Query
		qrels   map[string]map[string]int
	}{
		{
			name:  "default split is test",
			split: "",
			corpus: []Doc{
				{ID: "d1", Title: "Cats", Text: "Cats purr."},
				{ID: "d2", Text: "Line one\nline two \"quoted\""},
				{ID: "42", Title: "Numeric id", Text: long},
			},
			// queries.jsonl order, not qrels order; q2 belongs to train only.
			queries: []Query{
				{ID: "q3", Text: "third listed first"},
				{ID: "q1", Text: "what do cats do"},
				{ID: "q4", Text: "judged irrelevant only"},
			},
			qrels: map[string]map[string]int{
				"q1": {"d1": 2, "d2": 1},
				"q3": {"42": 1, "missing-doc": 1},
				"q4": {},
			},
		},
		{
			name:    "train",
			split:   "train",
			queries: []Query{{ID: "q2", Text: "only in train"}},
			qrels:   map[string]map[string]int{"q2": {"d2": 1}},
		},
		{
			name:    "headerless dev",
			split:   "dev",
			queries: []Query{{ID: "q1", Text: "what do cats do"}},
			qrels:   map[string]map[string]int{"q1": {"d1": 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := LoadBEIR(dir, tt.split)
			if err != nil {
				t.Fatal(err)
			}
			if tt.corpus != nil && !reflect.DeepEqual(ds.Corpus, tt.corpus) {
				t.Errorf("Corpus = %q, want %q", abbreviate(ds.Corpus), abbreviate(tt.corpus))
			}
			if len(ds.Corpus) != 3 {
				t.Errorf("len(Corpus) = %d, want 3", len(ds.Corpus))
			}
			if !reflect.DeepEqual(ds.Queries, tt.queries) {
				t.Errorf("Queries = %v, want %v", ds.Queries, tt.queries)
			}
			if !reflect.DeepEqual(ds.Qrels, tt.qrels) {
				t.Errorf("Qrels = %v, want %v", ds.Qrels, tt.qrels)
			}
		})
	}
}

// abbreviate keeps failure output readable when a doc text is huge.
func abbreviate(docs []Doc) []string {
	var out []string
	for _, d := range docs {
		text := d.Text
		if len(text) > 40 {
			text = text[:40] + "…"
		}
		out = append(out, d.ID+"|"+d.Title+"|"+text)
	}
	return out
}

func TestSplits(t *testing.T) {
	got, err := Splits(writeTree(t, tinyFiles()))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dev", "test", "train"}; !slices.Equal(got, want) {
		t.Errorf("Splits = %v, want %v", got, want)
	}
	if _, err := Splits(t.TempDir()); err == nil || !strings.Contains(err.Error(), "qrels") {
		t.Errorf("Splits on a dir without qrels/: err = %v, want one naming qrels", err)
	}
}

func TestLoadBEIRErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  map[string]string // replaces (or, with "", removes) files of tinyFiles
		split string
		want  []string // substrings of the error, in order-independent form
	}{
		{
			name: "malformed corpus line",
			edit: map[string]string{"corpus.jsonl": `{"_id": "d1", "text": "ok"}` + "\n" + `{"_id": "d2", "text": }` + "\n"},
			want: []string{"corpus.jsonl:2:", "invalid character"},
		},
		{
			name: "duplicate doc id",
			edit: map[string]string{"corpus.jsonl": `{"_id": "d1"}` + "\n" + `{"_id": "d2"}` + "\n" + `{"_id": "d1"}` + "\n"},
			want: []string{"corpus.jsonl:3:", `duplicate doc id "d1" (first on line 1)`},
		},
		{
			name: "missing doc id",
			edit: map[string]string{"corpus.jsonl": `{"title": "t", "text": "x"}` + "\n"},
			want: []string{"corpus.jsonl:1:", `missing "_id"`},
		},
		{
			name: "empty doc id",
			edit: map[string]string{"corpus.jsonl": `{"_id": "d1"}` + "\n" + `{"_id": ""}` + "\n"},
			want: []string{"corpus.jsonl:2:", `empty "_id"`},
		},
		{
			name: "non-string doc id",
			edit: map[string]string{"corpus.jsonl": `{"_id": ["d1"]}` + "\n"},
			want: []string{"corpus.jsonl:1:", `"_id" must be a string`},
		},
		{
			name: "text of wrong type",
			edit: map[string]string{"corpus.jsonl": `{"_id": "d1", "text": 7}` + "\n"},
			want: []string{"corpus.jsonl:1:", "string"},
		},
		{
			name: "duplicate query id",
			edit: map[string]string{"queries.jsonl": `{"_id": "q1", "text": "a"}` + "\n" + `{"_id": "q3", "text": "b"}` + "\n" + `{"_id": "q1", "text": "c"}` + "\n"},
			want: []string{"queries.jsonl:3:", `duplicate query id "q1" (first on line 1)`},
		},
		{
			name: "qrels query missing from queries",
			edit: map[string]string{"queries.jsonl": `{"_id": "q1", "text": "a"}` + "\n"},
			// q3 first appears on line 5 of test.tsv (header is line 1); q4 is missing too but comes later.
			want: []string{filepath.Join("qrels", "test.tsv") + ":5:", `query "q3" is not in`, "queries.jsonl"},
		},
		{
			name: "score not an integer",
			edit: map[string]string{"qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1.5\n"},
			want: []string{"test.tsv:2:", `score "1.5" is not an integer`},
		},
		{
			name: "wrong field count",
			edit: map[string]string{"qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1 d2 1\n"},
			want: []string{"test.tsv:3:", "want 3 tab-separated fields", "got 1"},
		},
		{
			name: "duplicate qrels pair",
			edit: map[string]string{"qrels/test.tsv": "q1\td1\t1\nq3\t42\t1\nq1\td1\t2\n"},
			want: []string{"test.tsv:3:", `query "q1", doc "d1" already listed on line 1`},
		},
		{
			name: "header only valid on first line",
			edit: map[string]string{"qrels/test.tsv": "q1\td1\t1\nquery-id\tcorpus-id\tscore\n"},
			want: []string{"test.tsv:2:", `score "score" is not an integer`},
		},
		{
			name:  "unknown split names the available ones",
			split: "validation",
			want:  []string{`split "validation"`, "validation.tsv does not exist", "available splits: dev, test, train"},
		},
		{
			name:  "split escaping qrels",
			split: "../corpus",
			want:  []string{`split "../corpus": must be a plain name`},
		},
		{
			name: "missing corpus",
			edit: map[string]string{"corpus.jsonl": ""},
			want: []string{"corpus.jsonl", "no such file"},
		},
		{
			name: "missing queries",
			edit: map[string]string{"queries.jsonl": ""},
			want: []string{"queries.jsonl", "no such file"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := tinyFiles()
			for k, v := range tt.edit {
				if v == "" {
					delete(files, k)
				} else {
					files[k] = v
				}
			}
			ds, err := LoadBEIR(writeTree(t, files), tt.split)
			if err == nil {
				t.Fatalf("LoadBEIR succeeded with %d docs, want an error containing %q", len(ds.Corpus), tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// findEvalDir locates the shared evaluation data: $CONTEXTROUTER_EVAL_DIR, or a `shared/eval` directory
// beside one of the working directory's ancestors (the repo lives next to it in the development layout).
func findEvalDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("CONTEXTROUTER_EVAL_DIR"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "shared", "eval")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// TestLoadBEIRSciFact checks the loader against the real SciFact conversion and the counts its README states.
func TestLoadBEIRSciFact(t *testing.T) {
	root := findEvalDir(t)
	dir := filepath.Join(root, "scifact")
	if _, err := os.Stat(filepath.Join(dir, "corpus.jsonl")); root == "" || err != nil {
		t.Skip("scifact evaluation data not found; set CONTEXTROUTER_EVAL_DIR")
	}
	splits, err := Splits(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"test", "train"}; !slices.Equal(splits, want) {
		t.Errorf("Splits = %v, want %v", splits, want)
	}
	tests := []struct {
		split          string
		queries, pairs int
	}{
		{"test", 300, 339},
		{"train", 809, 919},
	}
	for _, tt := range tests {
		t.Run(tt.split, func(t *testing.T) {
			ds, err := LoadBEIR(dir, tt.split)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Corpus) != 5183 {
				t.Errorf("corpus = %d docs, want 5183", len(ds.Corpus))
			}
			if len(ds.Queries) != tt.queries || len(ds.Qrels) != tt.queries {
				t.Errorf("queries = %d (qrels %d), want %d", len(ds.Queries), len(ds.Qrels), tt.queries)
			}
			pairs := 0
			for _, q := range ds.Queries {
				if len(ds.Qrels[q.ID]) == 0 {
					t.Errorf("query %s has no relevant docs", q.ID)
				}
				pairs += len(ds.Qrels[q.ID])
				if strings.TrimSpace(q.Text) == "" {
					t.Errorf("query %s has empty text", q.ID)
				}
			}
			if pairs != tt.pairs {
				t.Errorf("pairs = %d, want %d", pairs, tt.pairs)
			}
		})
	}
}
