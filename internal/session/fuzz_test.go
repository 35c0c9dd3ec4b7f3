package session

import (
	"encoding/json"
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
