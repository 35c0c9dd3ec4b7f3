package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name       string
		est, exact []int
		want       stats
	}{
		{
			// Relative errors +0.5 and +1/6 (the counts of "hello world" and
			// "antidisestablishmentarianism" under CharsDiv4 and O200kBase).
			name: "overestimates", est: []int{3, 7}, exact: []int{2, 6},
			want: stats{Texts: 2, SumRatio: 10.0 / 8, MeanSigned: (0.5 + 1.0/6) / 2, MeanAbs: (0.5 + 1.0/6) / 2, P95Abs: 0.5},
		},
		{
			// -0.5 and +0.5 cancel in the signed mean, not in the absolute one.
			name: "errors of both signs", est: []int{1, 3}, exact: []int{2, 2},
			want: stats{Texts: 2, SumRatio: 1, MeanSigned: 0, MeanAbs: 0.5, P95Abs: 0.5},
		},
		{
			// Nearest rank: of 20 errors 0.01..0.20 the 95th percentile is the 19th.
			name: "percentile", est: seq(101, 120), exact: repeat(100, 20),
			want: stats{Texts: 20, SumRatio: 2210.0 / 2000, MeanSigned: 0.105, MeanAbs: 0.105, P95Abs: 0.19},
		},
		{
			name: "empty texts are left out", est: []int{1, 4}, exact: []int{0, 4},
			want: stats{Texts: 1, SumRatio: 1},
		},
		{name: "nothing", want: stats{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compare(tc.est, tc.exact)
			if got.Texts != tc.want.Texts || !near(got.SumRatio, tc.want.SumRatio) || !near(got.MeanSigned, tc.want.MeanSigned) ||
				!near(got.MeanAbs, tc.want.MeanAbs) || !near(got.P95Abs, tc.want.P95Abs) {
				t.Errorf("compare = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func seq(from, to int) (out []int) {
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func repeat(v, n int) (out []int) {
	for range n {
		out = append(out, v)
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRun builds the tables from a small BEIR folder, a session file and a documents folder, and
// skips a missing SciFact with a message.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), Mode: 0o644} }
	err := os.CopyFS(dir, fstest.MapFS{
		"beir/corpus.jsonl": file(`{"_id": "d1", "title": "", "text": "hello world"}` + "\n" +
			`{"_id": "d2", "title": "", "text": "antidisestablishmentarianism"}` + "\n"),
		"beir/queries.jsonl":  file(`{"_id": "q1", "text": "hello"}` + "\n"),
		"beir/qrels/test.tsv": file("query-id\tcorpus-id\tscore\nq1\td1\t1\n"),
		"s.jsonl":             file(`{"id": "u1", "kind": "user_turn", "text": "hello world"}` + "\n"),
		"docs/a.md":           file("# A\n\nSome text.\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	beir := filepath.Join(dir, "beir")

	var out, errOut bytes.Buffer
	code := run([]string{"-scifact", beir, "-sessions", filepath.Join(dir, "*.jsonl"), "-docs", filepath.Join(dir, "docs")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	// The SciFact stand-in holds two texts counted "\n\n" + text: O200kBase 3 and 7 ("\n\n" is
	// one token), CharsDiv4 ceil(13/4) = 4 and ceil(30/4) = 8.
	for _, want := range []string{
		"SciFact abstracts: 2 texts",
		"| O200kBase | CharsDiv4 | 1.200 | +23.8 % | 23.8 % | 33.3 % |",
		"session turns, messages, snippets, facts and episodes (1 session files and the 200-item benchmark session)",
		"session tool calls and results",
		"quickstart documents: 1 texts",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	errOut.Reset()
	code = run([]string{"-scifact", filepath.Join(dir, "absent"), "-sessions", filepath.Join(dir, "*.jsonl"), "-docs", filepath.Join(dir, "docs")}, &out, &errOut)
	if code != 0 || !strings.Contains(errOut.String(), "SciFact skipped") || strings.Contains(out.String(), "SciFact") {
		t.Errorf("missing SciFact: exit %d, stderr %q", code, errOut.String())
	}

	if code := run([]string{"-sessions", filepath.Join(dir, "nope", "[")}, &out, &errOut); code != 1 {
		t.Errorf("bad glob: exit %d, want 1", code)
	}
}
