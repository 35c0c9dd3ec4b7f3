package session

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// The lines and grep views (api.md §11.9): any line of an artifact by
// number, from either end, and a search, each answer bounded.

// Bounds of the lines and grep views.
const (
	// MaxDrillTextRunes cuts each line of a lines or grep answer.
	MaxDrillTextRunes = 2000
	// MaxDrillTextBytes bounds the line text of a lines or grep answer.
	MaxDrillTextBytes = 64 << 10
	// MaxPatternBytes bounds a grep pattern.
	MaxPatternBytes = 1024
	// MaxGrepContext bounds the context lines around a match.
	MaxGrepContext = 10
	// DefaultGrepMatches and MaxGrepMatches bound the matches answered.
	DefaultGrepMatches = 50
	MaxGrepMatches     = 200
)

// LineRange is a range of lines, 1-based and inclusive.
type LineRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// GrepMatch is a matching line with the context lines around it.
type GrepMatch struct {
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before"`
	After  []string `json:"after"`
}

// countLines counts the lines of text: a final line break ends the last
// line, it does not start another.
func countLines(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && text[len(text)-1] != '\n' {
		n++
	}
	return n
}

// lineBounds returns the end of the line of text that starts at start
// (before its line break) and the start of the next one.
func lineBounds(text string, start int) (end, next int) {
	i := strings.IndexByte(text[start:], '\n')
	if i < 0 {
		return len(text), len(text)
	}
	return start + i, start + i + 1
}

// lineEnd returns the line of text that starts at start, without its line
// break (nor a "\r" before it), and the start of the next one.
func lineEnd(text string, start int) (line string, next int) {
	end, next := lineBounds(text, start)
	return strings.TrimSuffix(text[start:end], "\r"), next
}

// lineStart is the offset of line n (1-based) of text, which has it.
func lineStart(text string, n int) int {
	off := 0
	for ; n > 1; n-- {
		off += strings.IndexByte(text[off:], '\n') + 1
	}
	return off
}

// resolveLine turns a line number of a request (negative from the end)
// into one from 1 of a text of n lines.
func resolveLine(k, n int) int {
	if k < 0 {
		return n + 1 + k
	}
	return k
}

// showLine writes a requested line number, with what it resolved to when
// it counted from the end.
func showLine(k, n int) string {
	if k < 0 {
		return fmt.Sprintf("%d (line %d)", k, resolveLine(k, n))
	}
	return fmt.Sprint(k)
}

// linesView answers the lines from req.From to req.To: at most
// MaxDrillLines lines and MaxDrillTextBytes of text, the next range to ask
// for, and a note when the range went past either end.
func linesView(d *Drill, content string, req DrillRequest) error {
	n := d.Lines
	for _, p := range [...]struct {
		name string
		v    *int
	}{{"from", req.From}, {"to", req.To}} {
		if p.v != nil && *p.v == 0 {
			return drillErrorf("%s: 0 is not a line number; lines count from 1, or from -1 at the end", p.name)
		}
	}
	asked, from, past := 1, 1, false
	if req.From != nil {
		asked = *req.From
		from = resolveLine(asked, n)
	}
	if from < 1 {
		from, past = 1, true
	}
	if from > n {
		return drillErrorf("from %s is past the end: the artifact has %d lines", showLine(asked, n), n)
	}
	to := min(from+DefaultDrillLines-1, n)
	if req.To != nil {
		to = resolveLine(*req.To, n)
		switch {
		case to < 1:
			return drillErrorf("to %d is before the first line: the artifact has %d lines", *req.To, n)
		case to < from:
			return drillErrorf("from %s is after to %s", showLine(asked, n), showLine(*req.To, n))
		case to > n:
			to, past = n, true
		}
	}
	off, size := lineStart(content, from), 0
	d.From, d.Content = from, []string{}
	for k := from; k <= to && len(d.Content) < MaxDrillLines; k++ {
		line, next := lineEnd(content, off)
		cut := textutil.CutRunes(line, MaxDrillTextRunes, textutil.Ellipsis)
		if len(d.Content) > 0 && size+len(cut) > MaxDrillTextBytes {
			break
		}
		d.Truncated = d.Truncated || len(cut) != len(line)
		d.Content = append(d.Content, cut)
		size += len(cut)
		off = next
	}
	d.To = from + len(d.Content) - 1
	switch {
	case d.To < to:
		d.Truncated = true
		d.Next = &LineRange{From: d.To + 1, To: to}
	case d.To < n:
		d.Next = &LineRange{From: d.To + 1, To: min(n, d.To+len(d.Content))}
	}
	if past {
		d.Note = fmt.Sprintf("the artifact has %d lines; answered %d–%d", n, d.From, d.To)
	}
	return nil
}

// grepParams checks the grep view's parameters and returns its matcher,
// context and match bound.
func grepParams(req DrillRequest) (m *matcher, context, maxMatches int, err error) {
	p := req.Pattern
	switch {
	case p == "":
		return nil, 0, 0, drillErrorf("view=grep needs a pattern: an RE2 expression, or a plain string with literal=true")
	case len(p) > MaxPatternBytes:
		return nil, 0, 0, drillErrorf("pattern is %d bytes; it is limited to %d bytes", len(p), MaxPatternBytes)
	}
	if c := req.Context; c != nil {
		if *c < 0 || *c > MaxGrepContext {
			return nil, 0, 0, drillErrorf("context is %d; it must be between 0 and %d", *c, MaxGrepContext)
		}
		context = *c
	}
	maxMatches = DefaultGrepMatches
	if x := req.Max; x != nil {
		if *x < 1 || *x > MaxGrepMatches {
			return nil, 0, 0, drillErrorf("max is %d; it must be between 1 and %d", *x, MaxGrepMatches)
		}
		maxMatches = *x
	}
	m, err = newMatcher(p, req.Literal)
	return m, context, maxMatches, err
}

// matcher finds a pattern in text.
type matcher struct {
	literal string
	re      *regexp.Regexp
	// lits hold one of them every match of re holds (lower-case when
	// fold: the match may have them in any case); nil when there are none
	// worth looking for.
	lits []string
	fold bool
}

// newMatcher compiles a grep pattern. An expression is read line by line:
// ^ and $ match at line ends, and character classes such as [^a] or \s do
// not match a line break (only \n or (?s) can).
func newMatcher(p string, literal bool) (*matcher, error) {
	if literal {
		return &matcher{literal: p}, nil
	}
	re, err := syntax.Parse(p, syntax.Perl&^(syntax.OneLine|syntax.ClassNL))
	if err != nil {
		msg := err.Error()
		if se, ok := err.(*syntax.Error); ok {
			msg = fmt.Sprintf("%s in %q", se.Code, se.Expr)
		}
		return nil, drillErrorf("pattern %q is not RE2: %s", p, msg)
	}
	c, err := regexp.Compile(re.String())
	if err != nil {
		return nil, drillErrorf("pattern %q is not RE2: %v", p, err)
	}
	m := &matcher{re: c}
	if lits, fold := engine.RequiredLiterals(re); len(lits) <= maxLits && !slices.ContainsFunc(lits, func(l string) bool { return len(l) < 2 }) {
		m.lits, m.fold = lits, fold // (literals of a byte are too common to help)
	}
	return m, nil
}

// maxLits bounds the literals searched for one at a time.
const maxLits = 8

// candidates finds the lines of text that hold one of m.lits and calls
// add for each the expression matches, the line alone.
func (m *matcher) candidates(text string, add func(line, start, end, at int)) {
	hay := text
	if m.fold {
		// Lower-case in place of case folding; the two runes outside ASCII
		// that fold to ASCII letters (the Kelvin sign and the long s) would
		// hide a match from it.
		if strings.Contains(text, "\u212a") || strings.Contains(text, "\u017f") {
			m.everyLine(text, 0, 1, add)
			return
		}
		hay = asciiLower(text)
	}
	next := make([]int, len(m.lits)) // where each literal is next found at or after pos; -1: nowhere
	for i := range next {
		next[i] = -2
	}
	pos, line := 0, 1
	for pos < len(text) {
		c := -1
		for i, l := range m.lits {
			if next[i] == -2 || (next[i] >= 0 && next[i] < pos) {
				next[i] = strings.Index(hay[pos:], l)
				if next[i] >= 0 {
					next[i] += pos
				}
			}
			if next[i] >= 0 && (c < 0 || next[i] < c) {
				c = next[i]
			}
		}
		if c < 0 {
			return
		}
		line += strings.Count(text[pos:c], "\n")
		start := strings.LastIndexByte(text[:c], '\n') + 1
		end, after := lineBounds(text, start)
		if loc := m.re.FindStringIndex(strings.TrimSuffix(text[start:end], "\r")); loc != nil {
			add(line, start, end, loc[0])
		}
		pos, line = after, line+1
	}
}

// everyLine matches each line of text alone, from the one at byte pos,
// numbered line, on.
func (m *matcher) everyLine(text string, pos, line int, add func(line, start, end, at int)) {
	for ; pos < len(text); line++ {
		end, next := lineBounds(text, pos)
		if s, _ := m.find(strings.TrimSuffix(text[pos:end], "\r")); s >= 0 {
			add(line, pos, end, s)
		}
		pos = next
	}
}

// asciiLower is s with its ASCII letters in lower case, byte for byte.
// Eight bytes at a time: a 256 KiB artifact takes some 30 µs, not 250.
func asciiLower(s string) string {
	if s == "" {
		return ""
	}
	b := make([]byte, len(s))
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		h := x &^ highs // each byte's low seven bits
		// A byte's high bit in geA: its low seven bits are 'A' or more; in
		// gtZ: more than 'Z'. An upper case letter has the first, not the
		// second, and no high bit of its own.
		geA := h + ones*(0x80-'A')
		gtZ := h + ones*(0x7f-'Z')
		upper := (geA &^ gtZ) &^ x & highs
		binary.LittleEndian.PutUint64(b[i:], x|upper>>2)
	}
	for ; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	// b is not written again: the string may share it.
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// find returns the start and end of the first match in s, or -1.
func (m *matcher) find(s string) (start, end int) {
	if m.re == nil {
		i := strings.Index(s, m.literal)
		return i, i + len(m.literal)
	}
	loc := m.re.FindStringIndex(s)
	if loc == nil {
		return -1, -1
	}
	return loc[0], loc[1]
}

// hit is a matching line: its number, its bytes and where the match starts.
type hit struct {
	line, start, end, at int
}

// grepLines finds the matching lines of text: the first max of them (and
// the line of the one after, which bounds the last one's context) and how
// many there are. An expression with literals runs on the lines that hold
// one; otherwise one search runs from each line start on, so a text with
// few matches is searched in one pass. From a match that runs past its
// line on (a "\n" or (?s) in the pattern), and in a text with "\r\n" line
// ends (which $ would not match before), each line is matched alone,
// without its line break: what every way here agrees with.
func grepLines(text string, m *matcher, max int) (hits []hit, nextLine, total int) {
	add := func(line, start, end, at int) {
		total++
		switch {
		case len(hits) < max:
			hits = append(hits, hit{line: line, start: start, end: end, at: at})
		case nextLine == 0:
			nextLine = line
		}
	}
	switch {
	case len(m.lits) > 0:
		m.candidates(text, add)
		return hits, nextLine, total
	case m.re != nil && strings.Contains(text, "\r"):
		m.everyLine(text, 0, 1, add)
		return hits, nextLine, total
	}
	for pos, line := 0, 1; pos < len(text); line++ {
		s, e := m.find(text[pos:])
		if s < 0 {
			break
		}
		s, e = pos+s, pos+e
		line += strings.Count(text[pos:s], "\n")
		start := strings.LastIndexByte(text[:s], '\n') + 1
		if start == len(text) {
			break // the empty "line" after a final line break
		}
		end, next := lineBounds(text, start)
		if e > start+len(strings.TrimSuffix(text[start:end], "\r")) {
			m.everyLine(text, start, line, add)
			break
		}
		add(line, start, end, s-start)
		pos = next
	}
	return hits, nextLine, total
}

// grepView answers the lines that match req.Pattern, with context, at most
// req.Max of them and MaxDrillTextBytes of text.
func grepView(d *Drill, content string, req DrillRequest) error {
	m, context, maxMatches, err := grepParams(req)
	if err != nil {
		return err
	}
	hits, nextLine, total := grepLines(content, m, maxMatches)
	d.TotalMatches = &total
	d.Matches = []GrepMatch{}
	d.Truncated = total > len(hits)
	shown, size := 0, 0 // the last line shown, the bytes answered
	for i, h := range hits {
		after := nextLine
		if i+1 < len(hits) {
			after = hits[i+1].line
		}
		if after == 0 {
			after = d.Lines + 1
		}
		gm, cut := grepMatch(content, h, max(shown+1, h.line-context), min(h.line+context, after-1))
		n := matchBytes(gm)
		if i > 0 && size+n > MaxDrillTextBytes {
			d.Truncated = true
			break
		}
		for len(d.Matches) == 0 && n > MaxDrillTextBytes && len(gm.Before)+len(gm.After) > 0 {
			// A first match over the bound keeps as much context as fits.
			if len(gm.Before) >= len(gm.After) {
				gm.Before = gm.Before[1:]
			} else {
				gm.After = gm.After[:len(gm.After)-1]
			}
			n, cut = matchBytes(gm), true
		}
		d.Truncated = d.Truncated || cut
		d.Matches = append(d.Matches, gm)
		size += n
		shown = h.line + len(gm.After)
	}
	return nil
}

// grepMatch makes the match of h with the lines from..to around it, each
// cut at MaxDrillTextRunes (the matching line around the match); cut
// reports a line cut.
func grepMatch(content string, h hit, from, to int) (gm GrepMatch, cut bool) {
	line := strings.TrimSuffix(content[h.start:h.end], "\r")
	gm = GrepMatch{Line: h.line, Text: cutAround(line, h.at, MaxDrillTextRunes), Before: []string{}, After: []string{}}
	cut = len(gm.Text) != len(line)
	if from < h.line {
		off := h.start
		for k := h.line; k > from; k-- {
			off = strings.LastIndexByte(content[:off-1], '\n') + 1
		}
		for k := from; k < h.line; k++ {
			l, next := lineEnd(content, off)
			c := textutil.CutRunes(l, MaxDrillTextRunes, textutil.Ellipsis)
			cut = cut || len(c) != len(l)
			gm.Before = append(gm.Before, c)
			off = next
		}
	}
	_, off := lineEnd(content, h.start)
	for k := h.line + 1; k <= to && off < len(content); k++ {
		l, next := lineEnd(content, off)
		c := textutil.CutRunes(l, MaxDrillTextRunes, textutil.Ellipsis)
		cut = cut || len(c) != len(l)
		gm.After = append(gm.After, c)
		off = next
	}
	return gm, cut
}

func matchBytes(gm GrepMatch) int {
	n := len(gm.Text)
	for _, l := range gm.Before {
		n += len(l)
	}
	for _, l := range gm.After {
		n += len(l)
	}
	return n
}

// cutAround keeps n characters of line, those from its start when the
// byte at lies among them, else a window that starts a little before it;
// "…" marks each end cut.
func cutAround(line string, at, n int) string {
	at = min(at, len(line))
	if !longerThan(line, n) || utf8.RuneCountInString(line[:at]) < n-n/4 {
		return textutil.CutRunes(line, n, textutil.Ellipsis)
	}
	start := at
	for k := 0; k < n/4 && start > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(line[:start])
		start -= size
	}
	return "…" + textutil.CutRunes(line[start:], n, textutil.Ellipsis)
}
