package docs

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTextPattern: the comparison of an example with an output can fail.
func TestTextPattern(t *testing.T) {
	tests := []struct {
		name, want, got string
		match           bool
	}{
		{"equal", "a\nb", "a\nb\n", true},
		{"wildcard in a line", "time: … ms", "time: 0.12 ms\n", true},
		{"line of … skips lines", "a\n…\nd", "a\nb\nc\nd\n", true},
		{"… line matches none", "a\n…\nb", "a\nb\n", true},
		{"a different count", "chunks: 12 of 26", "chunks: 13 of 26\n", false},
		{"a missing line", "a\nb\nc", "a\nc\n", false},
		{"extra output", "a", "a\nb\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := textPattern(tt.want).MatchString(strings.TrimRight(tt.got, "\n") + "\n"); got != tt.match {
				t.Errorf("match = %v, want %v", got, tt.match)
			}
		})
	}
}

func TestDiffJSON(t *testing.T) {
	tests := []struct {
		name, want, got string
		diffs           int
	}{
		{"equal", `{"a": [1, 2], "s": "x"}`, `{"a": [1, 2], "s": "x"}`, 0},
		{"a trimmed string", `{"s": "Full-time …"}`, `{"s": "Full-time employees\nget 28 days"}`, 0},
		{"a prefix of a list with its count", `{"a": [1, "…more:2"]}`, `{"a": [1, 2, 3]}`, 0},
		{"the count is wrong", `{"a": [1, "…more:1"]}`, `{"a": [1, 2, 3]}`, 1},
		{"a list without a count must be whole", `{"a": [1]}`, `{"a": [1, 2]}`, 1},
		{"a value differs", `{"n": 13}`, `{"n": 12}`, 1},
		{"volatile values only need their type", `{"evaluation_time_ms": 0.1}`, `{"evaluation_time_ms": 0.3}`, 0},
		{"a key left out of the example", `{"a": 1}`, `{"a": 1, "b": 2}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w, g any
			dw := json.NewDecoder(strings.NewReader(tt.want))
			dw.UseNumber()
			dg := json.NewDecoder(strings.NewReader(tt.got))
			dg.UseNumber()
			if dw.Decode(&w) != nil || dg.Decode(&g) != nil {
				t.Fatal("bad test JSON")
			}
			if d := diffJSON("", w, g); len(d) != tt.diffs {
				t.Errorf("diffs = %q, want %d", d, tt.diffs)
			}
		})
	}
}
