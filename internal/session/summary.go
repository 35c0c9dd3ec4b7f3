package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/internal/textutil"
)

// The parts of a firewall summary beyond the JSON shape (api.md §11.4):
// the head, tail and signal lines of a text, and the kept paths of a JSON
// result.

// Bounds of a text summary.
const (
	textHeadLines  = 3
	textTailLines  = 3
	maxSignalLines = 5
	// minSummaryRunes is as short as the lines of a text summary get cut
	// to fit its bound.
	minSummaryRunes = 40
	// MaxKeepValueRunes cuts a kept value; MaxKeepRunes bounds the keep
	// lines of a summary together.
	MaxKeepValueRunes = 1000
	MaxKeepRunes      = 4000
)

// signalWords are the words of a signal line, by their first letter (lower
// case), longest first so "errors" is read whole.
var signalWords = [256][]string{
	'e': {"exceptions", "exception", "errors", "error"},
	'f': {"failures", "failure", "failed", "fails", "fatal", "fail"},
	'p': {"panicked", "panics", "panic"},
	't': {"traceback"},
}

// signalStart marks the bytes a signal word starts with, in either case.
var signalStart = func() (t [256]bool) {
	for c := range 256 {
		t[c] = signalWords[c|0x20] != nil
	}
	return t
}()

// wordByte reports a byte that continues a word: an ASCII letter or digit,
// '_', or a byte of a character past ASCII.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= utf8.RuneSelf
}

// signalAt returns the length of the signal word at text[i], or 0. A word
// counts alone (not inside another: terror, error_count, errorCount) or as
// the end of a CamelCase name (TypeError, NullPointerException).
func signalAt(text string, i int) int {
	c := text[i]
	words := signalWords[c|0x20]
	if words == nil {
		return 0
	}
	if i > 0 && wordByte(text[i-1]) {
		// Inside a word, unless a CamelCase part starts here: after a lower
		// case letter (TypeError), or after an upper case one when lower
		// case follows (IOError, not TERROR).
		prev := text[i-1]
		lowerNext := i+1 < len(text) && text[i+1] >= 'a' && text[i+1] <= 'z'
		if c >= 'a' || !(prev >= 'a' && prev <= 'z' || prev >= 'A' && prev <= 'Z' && lowerNext) {
			return 0
		}
	}
	for _, w := range words {
		if len(text)-i >= len(w) && strings.EqualFold(text[i:i+len(w)], w) &&
			(i+len(w) == len(text) || !wordByte(text[i+len(w)])) {
			return len(w)
		}
	}
	return 0
}

// textLine is a line of a text summary: its number, its bytes and the
// offset and length of a signal word in it (at -1: none).
type textLine struct {
	n, start, end, at, word int
}

func (l textLine) text(s string) string { return strings.TrimSuffix(s[l.start:l.end], "\r") }

// textSummary describes a text of n lines within about limit characters:
// its first and last lines, numbered, and the first lines elsewhere that
// hold a signal word, with their count. Lines are cut shorter, down to
// minSummaryRunes, until the whole fits.
func textSummary(text string, n, limit int) []string {
	head, tail := textHeadLines, textTailLines
	if n <= head+tail {
		head, tail = n, 0
	}
	var edges []textLine // the head and tail lines
	for off, k := 0, 1; k <= head; k++ {
		end, next := lineBounds(text, off)
		edges = append(edges, textLine{n: k, start: off, end: end, at: -1})
		off = next
	}
	if tail > 0 {
		off := len(text)
		if text[off-1] == '\n' {
			off--
		}
		for k := n; k > n-tail; k-- {
			start := strings.LastIndexByte(text[:off], '\n') + 1
			edges = append(edges, textLine{n: k, start: start, end: off, at: -1})
			off = max(start-1, 0)
		}
		slices.Reverse(edges[head:])
	}
	others, total := scanSignals(text, edges)
	var out []string
	for w := headLineRunes; ; w -= 20 {
		out = renderText(text, edges[:head], edges[head:], others, total, w)
		size := 0
		for _, l := range out {
			size += utf8.RuneCountInString(l) + 1
		}
		if size <= limit || w-20 < minSummaryRunes {
			return out
		}
	}
}

// scanSignals finds the lines with a signal word: it marks the edges that
// have one and returns the first maxSignalLines others and how many there
// are.
func scanSignals(text string, edges []textLine) (others []textLine, total int) {
	line, pos := 1, 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		// Most bytes start no signal word, and most that could sit inside a
		// word in lower case: both are told here, without a call.
		if !signalStart[c] || c >= 'a' && i > 0 && wordByte(text[i-1]) {
			continue
		}
		w := signalAt(text, i)
		if w == 0 {
			continue
		}
		line += strings.Count(text[pos:i], "\n")
		start := strings.LastIndexByte(text[:i], '\n') + 1
		end, next := lineBounds(text, start)
		edge := false
		for k := range edges {
			if edges[k].n == line {
				edge = true
				edges[k].at, edges[k].word = i-start, w
			}
		}
		if !edge {
			total++
			if len(others) < maxSignalLines {
				others = append(others, textLine{n: line, start: start, end: end, at: i - start, word: w})
			}
		}
		// The next line; the loop's i++ lands on its first byte.
		i, pos, line = next-1, next, line+1
	}
	return others, total
}

// renderText writes the head, tail and signal lines, each cut at w
// characters. An edge line whose signal word lies past its cut is a signal
// line too.
func renderText(text string, head, tail, others []textLine, total, w int) []string {
	out := []string{"head:"}
	var sig []textLine
	hidden := func(l textLine) bool {
		return l.at >= 0 && utf8.RuneCountInString(text[l.start:l.start+l.at])+l.word > w
	}
	for _, l := range head {
		out = append(out, fmt.Sprintf("  L%d: %s", l.n, textutil.CutRunes(l.text(text), w, textutil.Ellipsis)))
		if hidden(l) {
			sig = append(sig, l)
		}
	}
	sig = append(sig, others...)
	if len(tail) > 0 {
		out = append(out, "tail:")
	}
	for _, l := range tail {
		out = append(out, fmt.Sprintf("  L%d: %s", l.n, textutil.CutRunes(l.text(text), w, textutil.Ellipsis)))
		if hidden(l) {
			sig = append(sig, l)
			total++
		}
	}
	for _, l := range head {
		if hidden(l) {
			total++
		}
	}
	if len(sig) == 0 {
		return out
	}
	if len(sig) > maxSignalLines {
		sig = sig[:maxSignalLines]
	}
	if total > len(sig) {
		out = append(out, fmt.Sprintf("signals (%d of %d):", len(sig), total))
	} else {
		out = append(out, "signals:")
	}
	for _, l := range sig {
		out = append(out, fmt.Sprintf("  L%d: %s", l.n, cutAround(l.text(text), l.at, w)))
	}
	return out
}

// keepPath is a path of the keep-list, parsed.
type keepPath struct {
	path  string // canonical
	steps []PathStep
}

// keepLines renders the kept paths of a JSON text, "keep: PATH = VALUE",
// each value compact JSON cut at MaxKeepValueRunes, MaxKeepRunes in all; a
// path that does not resolve is skipped.
func keepLines(text string, keep []keepPath) []string {
	var out []string
	used, left := 0, 0
	for _, k := range keep {
		v, err := selectPath(json.RawMessage(text), k.steps)
		if err != nil {
			continue
		}
		var buf bytes.Buffer
		if json.Compact(&buf, v) != nil {
			continue
		}
		l := "keep: " + k.path + " = " + textutil.CutRunes(buf.String(), MaxKeepValueRunes, textutil.Ellipsis)
		n := utf8.RuneCountInString(l) + 1
		if left > 0 || used+n > MaxKeepRunes {
			left++
			continue
		}
		out = append(out, l)
		used += n
	}
	if left > 0 {
		out = append(out, fmt.Sprintf("keep: %d more paths left out: the keep lines' %d-character bound", left, MaxKeepRunes))
	}
	return out
}

// toolName is the tool of a tool result (api.md §11.4): its metadata.tool,
// else its parent tool_call's, else the tool_call's text up to the first
// '(' or white space. parent may be nil.
func toolName(it, parent *Item) string {
	if t := it.Metadata["tool"]; t != "" {
		return t
	}
	if parent == nil || parent.Kind != KindToolCall {
		return ""
	}
	if t := parent.Metadata["tool"]; t != "" {
		return t
	}
	call := strings.TrimLeft(parent.Text, " \t\r\n")
	if i := strings.IndexAny(call, "( \t\r\n"); i >= 0 {
		call = call[:i]
	}
	return call
}
