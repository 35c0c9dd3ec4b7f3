package sources

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// DefaultMaxChunkTokens is the default of spec.chunking.maxChunkTokens, which
// SplitDocument applies when ChunkOptions.MaxTokens is not positive.
var DefaultMaxChunkTokens = func() int {
	var s v1alpha1.ContextSource
	s.Default()
	return int(s.Spec.Chunking.MaxChunkTokens)
}()

// Document is one file (or inline text) before chunking.
type Document struct {
	Source  string    // ContextSource name
	Path    string    // slash-separated, relative to the source root ("" for inline)
	Title   string    // fallback title (inline title, or file name); the first "# " H1 wins for markdown
	Content string    // the text
	ModTime time.Time // zero if unknown
	Commit  string    // git commit ("" for other sources)
}

// ChunkOptions says how SplitDocument cuts a document.
type ChunkOptions struct {
	Strategy    v1alpha1.ChunkingStrategy // MarkdownSections (default when "") or WholeFile
	MaxTokens   int                       // maxChunkTokens; <=0 means DefaultMaxChunkTokens
	CountTokens func(string) int          // nil = ceil(runes/4)
	// Raw returns every document as one chunk holding its text as read, even
	// blank (tool catalog files, which are parsed, not searched).
	Raw bool
}

// chunkOptions are the options a static source passes to SplitDocument.
func chunkOptions(spec *v1alpha1.ContextSource, env Env) ChunkOptions {
	c := spec.Spec.Chunking
	return ChunkOptions{Strategy: c.Strategy, MaxTokens: int(c.MaxChunkTokens), CountTokens: env.CountTokens}
}

// SplitDocument turns a document into chunks (Index 0..n-1), never returning
// empty or whitespace-only chunks.
//
// MarkdownSections cuts at "## " headings outside fenced code blocks; the
// text before the first such heading is a chunk of its own. Sections longer
// than MaxTokens are cut at paragraphs, then lines, then words. WholeFile
// returns the whole document as one chunk.
func SplitDocument(doc Document, opts ChunkOptions) []Chunk {
	if opts.Raw {
		return []Chunk{{Source: doc.Source, Title: doc.Title, Path: doc.Path, Content: doc.Content, ModTime: doc.ModTime, Commit: doc.Commit}}
	}
	maxTokens := opts.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxChunkTokens
	}
	count := opts.CountTokens
	if count == nil {
		count = approxTokenCount
	}

	text := NormalizeNewlines(doc.Content)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	fenced := markFences(lines)
	h1 := firstH1(lines, fenced)

	var out []Chunk
	emit := func(title, content string) {
		if strings.TrimSpace(content) == "" {
			return
		}
		out = append(out, Chunk{
			Source:  doc.Source,
			Title:   title,
			Path:    doc.Path,
			Content: content,
			Index:   len(out),
			ModTime: doc.ModTime,
			Commit:  doc.Commit,
		})
	}

	docTitle := doc.Title
	if h1 != "" {
		docTitle = h1
	}
	if opts.Strategy == v1alpha1.ChunkingWholeFile {
		emit(docTitle, trimBlankLines(lines))
		return out
	}

	s := chunkSplitter{max: maxTokens, count: count}
	secs := mdSections(lines, fenced)
	for _, sec := range secs {
		secLines := lines[sec.start:sec.end]
		title := docTitle
		if sec.heading {
			switch {
			case h1 != "" && sec.text != "":
				title = h1 + " - " + sec.text
			case sec.text != "":
				title = sec.text
			}
		} else if len(secs) > 1 && onlyH1(secLines, fenced[sec.start:sec.end]) {
			// A preamble that is nothing but the H1 carries no text of its own:
			// the H1 is already part of every section's title.
			continue
		}
		content := trimBlankLines(secLines)
		if count(content) <= s.max {
			emit(title, content)
			continue
		}
		for _, piece := range s.splitSection(secLines, fenced[sec.start:sec.end]) {
			emit(title, piece)
		}
	}
	return out
}

// approxTokenCount is the default token estimate: ceil(runes/4).
func approxTokenCount(s string) int {
	return (utf8.RuneCountInString(s) + 3) / 4
}

// NormalizeNewlines turns CRLF and lone CR into LF and drops a UTF-8 byte
// order mark: how text read from files is split into lines (documents and
// manifests alike).
func NormalizeNewlines(s string) string {
	s = strings.TrimPrefix(s, "\ufeff")
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// markFences reports, per line, whether it belongs to a fenced code block
// (the fence lines included). An unclosed fence runs to the end, as in CommonMark.
func markFences(lines []string) []bool {
	fenced := make([]bool, len(lines))
	var open byte
	openLen := 0
	for i, line := range lines {
		if open != 0 {
			fenced[i] = true
			if c, n, rest, ok := fenceRun(line); ok && c == open && n >= openLen && strings.TrimSpace(rest) == "" {
				open = 0
			}
			continue
		}
		if c, n, rest, ok := fenceRun(line); ok {
			// A backtick fence's info string may not contain a backtick
			// (otherwise the line is inline code, not a fence).
			if c == '`' && strings.Contains(rest, "`") {
				continue
			}
			fenced[i] = true
			open, openLen = c, n
		}
	}
	return fenced
}

// fenceRun parses a possible fence line: up to three spaces of indentation,
// then three or more backticks or tildes.
func fenceRun(line string) (c byte, n int, rest string, ok bool) {
	body, ok := mdStripIndent(line)
	if !ok || len(body) < 3 || (body[0] != '`' && body[0] != '~') {
		return 0, 0, "", false
	}
	c = body[0]
	for n < len(body) && body[n] == c {
		n++
	}
	if n < 3 {
		return 0, 0, "", false
	}
	return c, n, body[n:], true
}

// mdStripIndent removes up to three leading spaces; more means an indented code block.
func mdStripIndent(line string) (string, bool) {
	i := 0
	for i < len(line) && i < 4 && line[i] == ' ' {
		i++
	}
	if i == 4 {
		return "", false
	}
	return line[i:], true
}

// atxHeading returns the text of an ATX heading of exactly the given level,
// without the optional closing sequence of '#'.
func atxHeading(line string, level int) (string, bool) {
	body, ok := mdStripIndent(line)
	if !ok || len(body) < level {
		return "", false
	}
	for i := 0; i < level; i++ {
		if body[i] != '#' {
			return "", false
		}
	}
	rest := body[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "###" is deeper, "##x" is not a heading
	}
	text := strings.TrimRight(rest, " \t")
	if trimmed := strings.TrimRight(text, "#"); trimmed != text {
		// The closing sequence must be preceded by a space (or be all there is).
		if trimmed == "" || strings.HasSuffix(trimmed, " ") || strings.HasSuffix(trimmed, "\t") {
			text = trimmed
		}
	}
	return strings.TrimSpace(text), true
}

// firstH1 returns the text of the first non-empty "# " heading outside fences.
func firstH1(lines []string, fenced []bool) string {
	for i, line := range lines {
		if fenced[i] {
			continue
		}
		if t, ok := atxHeading(line, 1); ok && t != "" {
			return t
		}
	}
	return ""
}

// onlyH1 reports whether lines hold nothing but blank lines and level-1 headings.
func onlyH1(lines []string, fenced []bool) bool {
	for i, line := range lines {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if fenced[i] {
			return false
		}
		if _, ok := atxHeading(line, 1); !ok {
			return false
		}
	}
	return true
}

// mdSection is a run of lines [start, end); heading is false for the preamble.
type mdSection struct {
	start, end int
	heading    bool
	text       string
}

func mdSections(lines []string, fenced []bool) []mdSection {
	var out []mdSection
	cur := mdSection{}
	for i, line := range lines {
		if fenced[i] {
			continue
		}
		if t, ok := atxHeading(line, 2); ok {
			cur.end = i
			if cur.heading || cur.end > cur.start {
				out = append(out, cur)
			}
			cur = mdSection{start: i, heading: true, text: t}
		}
	}
	cur.end = len(lines)
	return append(out, cur)
}

// trimBlankLines joins lines, leaving out leading blank lines and trailing whitespace.
func trimBlankLines(lines []string) string {
	start := 0
	for start < len(lines) && strings.TrimSpace(lines[start]) == "" {
		start++
	}
	return strings.TrimRightFunc(strings.Join(lines[start:], "\n"), isBlankRune)
}

func isBlankRune(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v'
}

// chunkSplitter cuts an oversized section into pieces of at most max tokens.
type chunkSplitter struct {
	max   int
	count func(string) int
}

// splitSection cuts at blank lines outside fences, so a code block with
// blank lines stays one paragraph when it fits.
func (s chunkSplitter) splitSection(lines []string, fenced []bool) []string {
	var paras []string
	start := -1
	for i, line := range lines {
		blank := !fenced[i] && strings.TrimSpace(line) == ""
		switch {
		case blank && start >= 0:
			paras = append(paras, strings.TrimRightFunc(strings.Join(lines[start:i], "\n"), isBlankRune))
			start = -1
		case !blank && start < 0:
			start = i
		}
	}
	if start >= 0 {
		paras = append(paras, strings.TrimRightFunc(strings.Join(lines[start:], "\n"), isBlankRune))
	}
	return s.pack(paras)
}

const (
	splitAtParagraphs = iota
	splitAtLines
	splitAtWords
)

// packUnit is a piece of text and the separator that joins it to the piece before.
type packUnit struct{ sep, text string }

// units breaks parts into pieces no larger than max where it can: a part
// that alone is too large is replaced by its lines, a line by its words; a
// single word is never cut. first is the separator before the first part.
func (s chunkSplitter) units(out []packUnit, parts []string, first, sep string, level int) []packUnit {
	for i, p := range parts {
		ps := sep
		if i == 0 {
			ps = first
		}
		switch {
		case level == splitAtWords || s.count(p) <= s.max:
			out = append(out, packUnit{ps, p})
		case level == splitAtParagraphs:
			out = s.units(out, strings.Split(p, "\n"), ps, "\n", splitAtLines)
		default:
			out = s.units(out, strings.Fields(p), ps, " ", splitAtWords)
		}
	}
	return out
}

// pack joins consecutive paragraphs greedily while the result fits in max
// tokens, falling back to lines and words for paragraphs that never fit.
// The text around a cut paragraph is packed too, so a heading line is not
// left as a chunk of its own.
func (s chunkSplitter) pack(paras []string) []string {
	var out []string
	cur := ""
	for _, u := range s.units(nil, paras, "", "\n\n", splitAtParagraphs) {
		if cur != "" {
			if joined := cur + u.sep + u.text; s.count(joined) <= s.max {
				cur = joined
				continue
			}
			out = append(out, cur)
			cur = ""
		}
		// A chunk does not start with a blank line from a cut code block.
		if strings.TrimSpace(u.text) != "" {
			cur = u.text
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// IsText reports whether data is valid UTF-8 text without NUL bytes (binary
// files are skipped by callers).
func IsText(data []byte) bool {
	for _, b := range data {
		if b == 0 {
			return false
		}
	}
	return utf8.Valid(data)
}

// MatchPath applies doublestar include/exclude globs to a slash path. An
// empty include list matches every path; exclude wins over include.
// `**/*.md` matches the top-level "a.md" too, because "**/" may match no folder.
func MatchPath(path string, include, exclude []string) bool {
	for _, p := range exclude {
		if doublestar.MatchUnvalidated(p, path) {
			return false
		}
	}
	if len(include) == 0 {
		return true
	}
	for _, p := range include {
		if doublestar.MatchUnvalidated(p, path) {
			return true
		}
	}
	return false
}
