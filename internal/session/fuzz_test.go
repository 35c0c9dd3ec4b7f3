package session

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/budget"
)

// FuzzSessionFile feeds arbitrary session files through the reader and the
// pipeline: no panic, and every pack keeps its invariants.
func FuzzSessionFile(f *testing.F) {
	f.Add(`{"id":"c","kind":"tool_call","text":"x()"}` + "\n" + `{"id":"r","kind":"tool_result","parent_id":"c","text":"{\"a\":[1,2,{\"b\":\"\\\"\"}],\"c\":true}"}`)
	f.Add(`{"fact":{"key":"k","value":"v"}}` + "\n" + `{"episode":{"id":"e","text":"t"}}`)
	f.Add(`{"id":"a","kind":"user_turn","parent_id":"b"}` + "\n" + `{"id":"b","kind":"user_turn","parent_id":"a"}`)
	f.Add(`{"id":"r","kind":"tool_result","text":"[` + strings.Repeat(`[`, 70) + `"}`)
	est, _ := budget.New("")
	f.Fuzz(func(t *testing.T, file string) {
		s, err := ReadJSONL("f.jsonl", strings.NewReader(file))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.jsonl") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, ph := range Phases {
			p, err := Build(s, Options{Phase: ph, MaxTokens: 300, FirewallMaxChars: 40})
			if err != nil {
				t.Fatalf("a session the reader accepted was refused: %v", err)
			}
			if p.Stats.Included+p.Stats.Dropped.Total() != p.Stats.Candidates || est.Count(p.Text) > p.Budget {
				t.Fatalf("invariant broken: %+v, %d tokens", p.Stats, est.Count(p.Text))
			}
			if _, err := json.Marshal(p); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzJSONSummary: the scanner never panics and agrees with encoding/json
// on what is a JSON object or array.
func FuzzJSONSummary(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,"x",{"y":null}]`, `{"a":"\\"}`, `{"a":"\"}`, `{`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `[-]`, `{"a":tru}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, ok := jsonSummary(s)
		var v any
		valid := json.Unmarshal([]byte(s), &v) == nil
		t0 := strings.TrimSpace(s)
		container := t0 != "" && (t0[0] == '{' || t0[0] == '[')
		// The scanner is lenient about numbers and escapes, never stricter
		// than the JSON grammar: valid JSON containers are always recognised.
		if valid && container && !ok && !deep(t0) {
			t.Fatalf("valid JSON not recognised: %q", s)
		}
	})
}

// deep reports nesting past maxJSONDepth, which the scanner refuses.
func deep(s string) bool {
	d, m := 0, 0
	for _, c := range s {
		switch c {
		case '{', '[':
			d++
			m = max(m, d)
		case '}', ']':
			d--
		}
	}
	return m > maxJSONDepth
}

// FuzzDrillText: the lines and grep views never panic, refuse only with a
// DrillError, and keep their bounds: a lines answer is the range it names,
// within the text and the bounds, with next right after it; a grep answer
// lists matching lines in order, no more than it counts.
func FuzzDrillText(f *testing.F) {
	f.Add("a\nb\nc\n", "b", -2, 0, false, 1)
	f.Add("x\r\n\r\ny ERROR\n", "(?i)error|^$", 1, -1, false, 0)
	f.Add("no break", "(?s)o.*k", 0, 5, true, 10)
	f.Add("é\n\xff\n", "\\x{FFFD}", -9, 9, false, 3)
	f.Fuzz(func(t *testing.T, text, pattern string, from, to int, literal bool, context int) {
		lines := countLines(text)
		req := DrillRequest{View: ViewLines}
		if from != 0 {
			req.From = &from
		}
		if to != 0 {
			req.To = &to
		}
		d, err := DrillDown("r", text, req)
		var de *DrillError
		switch {
		case err != nil && !errors.As(err, &de):
			t.Fatalf("lines: %T %v", err, err)
		case err == nil:
			size := 0
			for _, l := range d.Content {
				size += len(l)
			}
			if d.From < 1 || d.To > lines || d.To-d.From+1 != len(d.Content) || len(d.Content) > MaxDrillLines || (size > MaxDrillTextBytes && len(d.Content) > 1) {
				t.Fatalf("lines %d–%d of %d, %d lines of %d bytes", d.From, d.To, lines, len(d.Content), size)
			}
			if d.Next != nil && (d.Next.From != d.To+1 || d.Next.To < d.Next.From || d.Next.To > lines) || d.Next == nil && d.To < lines && req.To == nil {
				t.Fatalf("next %+v after %d–%d of %d", d.Next, d.From, d.To, lines)
			}
		}
		g := DrillRequest{View: ViewGrep, Pattern: pattern, Literal: literal, Context: &context}
		d, err = DrillDown("r", text, g)
		if err != nil {
			if !errors.As(err, &de) {
				t.Fatalf("grep: %T %v", err, err)
			}
			return
		}
		if *d.TotalMatches < len(d.Matches) || len(d.Matches) > DefaultGrepMatches {
			t.Fatalf("%d matches of %d", len(d.Matches), *d.TotalMatches)
		}
		// The count agrees with matching each line alone.
		m, _ := newMatcher(pattern, literal)
		var want []int
		m.everyLine(text, 0, 1, func(line, _, _, _ int) { want = append(want, line) })
		if *d.TotalMatches != len(want) || len(d.Matches) > 0 && d.Matches[0].Line != want[0] {
			t.Fatalf("%d matches from line %v; line by line %d from %v", *d.TotalMatches, d.Matches, len(want), want)
		}
		for i, m := range d.Matches {
			if m.Line < 1 || m.Line > lines || i > 0 && m.Line <= d.Matches[i-1].Line || len(m.Before) > context || len(m.After) > context {
				t.Fatalf("match %d: %+v of %d lines", i, m, lines)
			}
		}
	})
}
