package sources

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// titledContent is a chunk reduced to what the table tests compare.
type titledContent struct{ Title, Content string }

func titleContents(chunks []Chunk) []titledContent {
	out := make([]titledContent, 0, len(chunks))
	for _, c := range chunks {
		out = append(out, titledContent{c.Title, c.Content})
	}
	return out
}

func TestSplitDocumentSections(t *testing.T) {
	tests := []struct {
		name     string
		title    string
		content  string
		strategy v1alpha1.ChunkingStrategy
		want     []titledContent
	}{
		{
			name:    "preamble and sections under an H1",
			title:   "guide.md",
			content: "# Guide\nIntro text.\n\n## Install\nRun it.\n\n## Use\nCall it.\n",
			want: []titledContent{
				{"Guide", "# Guide\nIntro text."},
				{"Guide - Install", "## Install\nRun it."},
				{"Guide - Use", "## Use\nCall it."},
			},
		},
		{
			name:    "no H1: section heading, preamble gets the document title",
			title:   "notes.md",
			content: "Some intro.\n## Alpha\na\n## Beta\nb",
			want: []titledContent{
				{"notes.md", "Some intro."},
				{"Alpha", "## Alpha\na"},
				{"Beta", "## Beta\nb"},
			},
		},
		{
			name:    "preamble that is only the H1 is dropped",
			title:   "x.md",
			content: "# Title\n\n\n## A\na\n",
			want:    []titledContent{{"Title - A", "## A\na"}},
		},
		{
			name:    "document that is only an H1 keeps it",
			title:   "x.md",
			content: "# Title\n",
			want:    []titledContent{{"Title", "# Title"}},
		},
		{
			name:    "blank preamble is not a chunk",
			title:   "x.md",
			content: "\n  \n## A\na",
			want:    []titledContent{{"A", "## A\na"}},
		},
		{
			name:    "deeper headings stay in their section",
			title:   "x.md",
			content: "## A\n### A.1\none\n#### A.1.1\ntwo\n## B\nb",
			want: []titledContent{
				{"A", "## A\n### A.1\none\n#### A.1.1\ntwo"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "heading inside a backtick fence does not split",
			title:   "x.md",
			content: "## A\n```md\n## not a heading\n# nor an H1\n```\nafter\n## B\nb",
			want: []titledContent{
				{"A", "## A\n```md\n## not a heading\n# nor an H1\n```\nafter"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "tilde fence is closed by tildes only",
			title:   "x.md",
			content: "## A\n~~~\n```\n## inside\n~~~\n## B\nb",
			want: []titledContent{
				{"A", "## A\n~~~\n```\n## inside\n~~~"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "shorter fence does not close a longer one",
			title:   "x.md",
			content: "## A\n````\n```\n## inside\n````\n## B\nb",
			want: []titledContent{
				{"A", "## A\n````\n```\n## inside\n````"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "closing fence with an info string does not close",
			title:   "x.md",
			content: "## A\n```\n```go\n## inside\n```\n## B\nb",
			want: []titledContent{
				{"A", "## A\n```\n```go\n## inside\n```"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "backticks in the info string make it not a fence",
			title:   "x.md",
			content: "## A\n``` a`b\n## B\nb",
			want: []titledContent{
				{"A", "## A\n``` a`b"},
				{"B", "## B\nb"},
			},
		},
		{
			name:    "unclosed fence runs to the end",
			title:   "x.md",
			content: "## A\n```\n## B\nb",
			want:    []titledContent{{"A", "## A\n```\n## B\nb"}},
		},
		{
			name:    "indented fence and heading forms",
			title:   "x.md",
			content: "   ## A\n    ## indented code\n##nospace\n## B ##\nb\n## C#\nc",
			want: []titledContent{
				{"A", "   ## A\n    ## indented code\n##nospace"},
				{"B", "## B ##\nb"},
				{"C#", "## C#\nc"},
			},
		},
		{
			name:    "H1 later in the file still names the sections",
			title:   "x.md",
			content: "## A\na\n# Late Title\n## B\nb",
			want: []titledContent{
				{"Late Title - A", "## A\na\n# Late Title"},
				{"Late Title - B", "## B\nb"},
			},
		},
		{
			name:    "CRLF and BOM are normalised",
			title:   "x.md",
			content: "\ufeff# T\r\nintro\r\n\r\n## A\r\nline one\r\nline two\r\n",
			want: []titledContent{
				{"T", "# T\nintro"},
				{"T - A", "## A\nline one\nline two"},
			},
		},
		{
			name:    "plain text has no headings",
			title:   "readme.txt",
			content: "Just text.\n\nMore text.\n",
			want:    []titledContent{{"readme.txt", "Just text.\n\nMore text."}},
		},
		{
			name:     "WholeFile keeps one chunk with the H1 title",
			title:    "x.md",
			strategy: v1alpha1.ChunkingWholeFile,
			content:  "\n# T\n## A\na\n## B\nb\n\n",
			want:     []titledContent{{"T", "# T\n## A\na\n## B\nb"}},
		},
		{
			name:     "WholeFile without H1 uses the document title",
			title:    "x.txt",
			strategy: v1alpha1.ChunkingWholeFile,
			content:  "## A\na",
			want:     []titledContent{{"x.txt", "## A\na"}},
		},
		{name: "empty document", title: "x.md", content: "", want: []titledContent{}},
		{name: "whitespace-only document", title: "x.md", content: " \n\t\r\n\u00a0\n", want: []titledContent{}},
		{
			name:     "whitespace-only WholeFile",
			title:    "x.md",
			strategy: v1alpha1.ChunkingWholeFile,
			content:  "\n\n  ",
			want:     []titledContent{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := Document{Source: "src", Path: "dir/x.md", Title: tt.title, Content: tt.content}
			got := SplitDocument(doc, ChunkOptions{Strategy: tt.strategy})
			if g := titleContents(got); !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("chunks:\n got %q\nwant %q", g, tt.want)
			}
		})
	}
}

func TestSplitDocumentCopiesMetadata(t *testing.T) {
	mt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	doc := Document{Source: "s", Path: "a/b.md", Title: "b.md", Content: "p\n## A\na\n## B\nb", ModTime: mt, Commit: "abc123"}
	got := SplitDocument(doc, ChunkOptions{})
	if len(got) != 3 {
		t.Fatalf("got %d chunks, want 3", len(got))
	}
	for i, c := range got {
		if c.Index != i || c.Source != "s" || c.Path != "a/b.md" || !c.ModTime.Equal(mt) || c.Commit != "abc123" {
			t.Errorf("chunk %d metadata = %+v", i, c)
		}
	}
}

// fieldsOf returns the whitespace-separated words of s, for checking that
// splitting loses and invents nothing.
func fieldsOf(s string) []string { return strings.Fields(s) }

func TestSplitDocumentLongSections(t *testing.T) {
	wordCount := func(s string) int { return len(strings.Fields(s)) }

	para := func(n int, tag string) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = fmt.Sprintf("%s%d", tag, i)
		}
		return strings.Join(ws, " ")
	}
	manyParas := func() string {
		var b strings.Builder
		b.WriteString("# Doc\n\n## Long\n")
		for i := range 30 {
			fmt.Fprintf(&b, "%s\n\n", para(7, fmt.Sprintf("p%dw", i)))
		}
		b.WriteString("## Short\nend\n")
		return b.String()
	}()
	manyLines := func() string {
		var b strings.Builder
		b.WriteString("## Lines\n")
		for i := range 40 {
			fmt.Fprintf(&b, "%s\n", para(5, fmt.Sprintf("l%dw", i)))
		}
		return b.String()
	}()
	oneLine := "## Words\n" + para(500, "w")
	fenceWithBlanks := "## Code\nintro paragraph here\n\n```\nline a\n\nline b\n\nline c\n```\n\n" + para(12, "tail")

	tests := []struct {
		name    string
		content string
		max     int
		count   func(string) int
		// unit checks that every chunk is made of whole units of the input.
		unit        string
		wantTitle   string // title of every chunk of the split section
		wantPieces  int    // minimum number of chunks
		dropped     string // text SplitDocument leaves out on purpose (an H1-only preamble)
		checkChunks func(t *testing.T, chunks []Chunk)
	}{
		{
			name: "section split at paragraphs", content: manyParas, max: 40,
			unit: "\n\n", wantTitle: "Doc - Long", wantPieces: 5, dropped: "# Doc",
		},
		{
			name: "custom counter is used", content: manyParas, max: 20, count: wordCount,
			unit: "\n\n", wantTitle: "Doc - Long", wantPieces: 10, dropped: "# Doc",
		},
		{
			name: "one paragraph split at lines", content: manyLines, max: 30,
			unit: "\n", wantTitle: "Lines", wantPieces: 5,
		},
		{
			name: "one huge line split at words", content: oneLine, max: 50,
			unit: " ", wantTitle: "Words", wantPieces: 10,
			checkChunks: func(t *testing.T, chunks []Chunk) {
				// The heading is packed with the first words, not left alone.
				if !strings.HasPrefix(chunks[0].Content, "## Words\nw0 w1 ") {
					t.Errorf("first chunk = %q", chunks[0].Content)
				}
			},
		},
		{
			name: "fenced block with blank lines stays whole", content: fenceWithBlanks, max: 12,
			wantTitle: "Code", wantPieces: 2,
			checkChunks: func(t *testing.T, chunks []Chunk) {
				for _, c := range chunks {
					if strings.Contains(c.Content, "line a") && !strings.Contains(c.Content, "line c\n```") {
						t.Errorf("code block was cut: %q", c.Content)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count := tt.count
			if count == nil {
				count = approxTokenCount
			}
			got := SplitDocument(Document{Title: "x.md", Content: tt.content}, ChunkOptions{MaxTokens: tt.max, CountTokens: tt.count})
			var split []Chunk
			for i, c := range got {
				if c.Index != i {
					t.Errorf("chunk %d has Index %d", i, c.Index)
				}
				if n := count(c.Content); n > tt.max {
					t.Errorf("chunk %d has %d tokens > max %d: %q", i, n, tt.max, c.Content)
				}
				if strings.TrimSpace(c.Content) == "" {
					t.Errorf("chunk %d is blank", i)
				}
				if c.Title == tt.wantTitle {
					split = append(split, c)
				}
			}
			if len(split) < tt.wantPieces {
				t.Fatalf("section %q became %d chunks, want >= %d: %q", tt.wantTitle, len(split), tt.wantPieces, titleContents(got))
			}
			// The first piece keeps the heading line.
			if !strings.HasPrefix(split[0].Content, "## ") {
				t.Errorf("first piece does not start with its heading: %q", split[0].Content)
			}
			// Nothing lost, nothing invented, order kept.
			var all []string
			for _, c := range got {
				all = append(all, fieldsOf(c.Content)...)
			}
			if want := fieldsOf(strings.Replace(tt.content, tt.dropped, "", 1)); !reflect.DeepEqual(all, want) {
				t.Errorf("words differ after splitting:\n got %d words\nwant %d words", len(all), len(want))
			}
			if tt.unit != "" {
				units := map[string]bool{}
				for _, u := range strings.Split(tt.content, tt.unit) {
					units[strings.TrimSpace(u)] = true
				}
				for _, c := range split[1:] {
					for _, u := range strings.Split(c.Content, tt.unit) {
						if !units[strings.TrimSpace(u)] {
							t.Errorf("chunk was not cut at %q boundaries: piece %q", tt.unit, u)
						}
					}
				}
			}
			if tt.checkChunks != nil {
				tt.checkChunks(t, got)
			}
		})
	}
}

func TestSplitDocumentWordLongerThanMax(t *testing.T) {
	long := strings.Repeat("x", 200) // 50 tokens
	doc := Document{Title: "x.txt", Content: "short words before " + long + " and after"}
	got := SplitDocument(doc, ChunkOptions{MaxTokens: 16})
	want := []titledContent{
		{"x.txt", "short words before"},
		{"x.txt", long},
		{"x.txt", "and after"},
	}
	if g := titleContents(got); !reflect.DeepEqual(g, want) {
		t.Fatalf("got %q\nwant %q", g, want)
	}
}

func TestSplitDocumentMaxTokensDefault(t *testing.T) {
	// 600 tokens of text in one section: above the default 512.
	body := strings.Repeat("abc ", 300) + "\n\n" + strings.Repeat("def ", 300)
	got := SplitDocument(Document{Title: "x", Content: "## S\n" + body}, ChunkOptions{})
	if len(got) != 2 {
		t.Fatalf("got %d chunks, want 2 (split at the paragraph)", len(got))
	}
	for _, c := range got {
		if n := approxTokenCount(c.Content); n > DefaultMaxChunkTokens {
			t.Errorf("chunk has %d tokens > %d", n, DefaultMaxChunkTokens)
		}
	}
}

func TestIsText(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want bool
	}{
		{"empty", nil, true},
		{"ascii", []byte("hello\n"), true},
		{"utf-8", []byte("grüße, 日本語"), true},
		{"NUL byte", []byte("abc\x00def"), false},
		{"invalid UTF-8", []byte("abc\xff\xfe"), false},
		{"truncated rune", []byte("\xe6\x97"), false},
		{"latin-1", []byte("gr\xfc\xdfe"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsText(tt.data); got != tt.want {
				t.Fatalf("IsText(%q) = %v, want %v", tt.data, got, tt.want)
			}
		})
	}
}

func TestMatchPath(t *testing.T) {
	md := []string{"**/*.md", "**/*.txt"}
	tests := []struct {
		name             string
		path             string
		include, exclude []string
		want             bool
	}{
		{"top-level file matches **/", "a.md", md, nil, true},
		{"nested file", "a/b/c.md", md, nil, true},
		{"other extension", "a/b/c.go", md, nil, false},
		{"txt", "notes.txt", md, nil, true},
		{"exclude wins", "drafts/a.md", md, []string{"drafts/**"}, false},
		{"exclude only its folder", "published/a.md", md, []string{"drafts/**"}, true},
		{"nested exclude", "a/secret/b.md", md, []string{"**/secret/**"}, false},
		{"exclude a top-level file", "README.md", md, []string{"README.md"}, false},
		{"single star does not cross folders", "docs/a/b.md", []string{"docs/*.md"}, nil, false},
		{"single star in folder", "docs/b.md", []string{"docs/*.md"}, nil, true},
		{"prefix folder", "docs/x/y.md", []string{"docs/**/*.md"}, nil, true},
		{"prefix folder direct child", "docs/y.md", []string{"docs/**/*.md"}, nil, true},
		{"empty include matches all", "x.bin", nil, nil, true},
		{"empty include with exclude", "x.bin", nil, []string{"*.bin"}, false},
		{"braces", "a/b.markdown", []string{"**/*.{md,markdown}"}, nil, true},
		{"dotfile", ".github/a.md", md, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchPath(tt.path, tt.include, tt.exclude); got != tt.want {
				t.Fatalf("MatchPath(%q, %q, %q) = %v, want %v", tt.path, tt.include, tt.exclude, got, tt.want)
			}
		})
	}
}

// benchmarkMarkdown builds a ~50 KB markdown document with sections, code
// fences and some sections long enough to need splitting.
func benchmarkMarkdown(size int) string {
	r := rand.New(rand.NewPCG(1, 2))
	vocab := strings.Fields("the router gathers chunks from sources and scores them with bm25 before trimming to a budget of tokens for each agent query")
	var b strings.Builder
	b.WriteString("# Benchmark Handbook\n\nIntro paragraph.\n\n")
	for s := 0; b.Len() < size; s++ {
		fmt.Fprintf(&b, "## Section %d\n\n", s)
		paras := 1 + r.IntN(12)
		for p := 0; p < paras; p++ {
			if p%4 == 3 {
				b.WriteString("```go\nfunc f() {\n\n\treturn\n}\n```\n\n")
				continue
			}
			n := 20 + r.IntN(80)
			for w := 0; w < n; w++ {
				if w > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(vocab[r.IntN(len(vocab))])
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

func BenchmarkSplitDocument(b *testing.B) {
	doc := Document{Source: "bench", Path: "handbook.md", Title: "handbook.md", Content: benchmarkMarkdown(50 << 10)}
	b.SetBytes(int64(len(doc.Content)))
	b.ReportAllocs()
	for b.Loop() {
		if len(SplitDocument(doc, ChunkOptions{MaxTokens: 256})) == 0 {
			b.Fatal("no chunks")
		}
	}
}
