package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// TestPatternStepsMatchOneScan: matched in small steps, a pattern finds
// what one scan of the whole text finds, with the assertions that look at
// the text around a step's edges (\b, \B, ^, $, \A), leftmost-first choices
// that need text past a match, multi-byte and invalid UTF-8.
func TestPatternStepsMatchOneScan(t *testing.T) {
	patterns := []string{
		`\b[A-Z]{1,3}-[0-9]{1,2}\b`, `(?m)^[a-z]{1,3}`, `^[a-z]{1,2}`, `\A.`, `[a-z]{1,3}$`, `(?m)[a-z]$`,
		`\B[0-9]{1,2}`, `é{1,2}|\x{FFFD}`, `(?i)ab|a`, `a(?:bc)?`, `\bx?`, `[^ ]{1,4}`, `\Qa)\E|c`,
	}
	alphabet := []string{"A", "B", "-", "1", "2", " ", "\n", "a", "b", "c", "x", "é", "\xff", "\xc3", "AB-12 ", "ab\n", "abc", "1a"}
	texts := append([]string{"", "a", "AB-1 CD-22", "abc\nab\nx", "ééé a", "\xff\xc3a"}, randomTexts(22, alphabet, 600, 30)...)
	for _, p := range patterns {
		t.Run(p, func(t *testing.T) {
			pat := mustPattern(t, p)
			for _, text := range texts {
				var want []Entity
				for _, m := range pat.re.FindAllStringIndex(text, -1) {
					if m[0] < m[1] {
						want = append(want, Entity{Type: "x", Value: text[m[0]:m[1]], Start: m[0], End: m[1]})
					}
				}
				for _, window := range []int{1, 2, 3, 5, 8} {
					// Steps of window bytes reading 12 more: more than any
					// match of these patterns, as patternLookahead is more
					// than the longest value reported.
					stepped := *pat
					stepped.window, stepped.lookahead = window, 12
					got, err := stepped.find(context.Background(), text, "x", nil)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%q in steps of %d: %+v; one scan: %+v", text, window, got, want)
					}
				}
			}
		})
	}
}

// TestPatternScanBytes: a pattern finds the matches that start in the
// first PatternScanCost ÷ instructions bytes of the question: all of a
// question at the text bound for a small pattern, 4 KiB at the limit.
func TestPatternScanBytes(t *testing.T) {
	if got := PatternScanBytes(v1alpha1.MaxPatternInstructions); got < 4000 {
		t.Fatalf("a pattern at the limit reads %d bytes, want about 4 KiB", got)
	}
	long := `ID-[0-9]{200}`
	cases := []struct {
		pattern, id string
		scan        int // the bytes the pattern reads, at most the question's
	}{
		{`ID-[0-9]{2}`, "ID-77", MaxTextBytes},
		{long, "ID-" + strings.Repeat("7", 200), PatternScanBytes(instructionsOf(t, long))},
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			id := tc.id
			filler := func(n int) string { return strings.Repeat("x", n) }
			// A match starting at the last byte read is found; one starting
			// just past it is not, nor later ones.
			for _, start := range []int{0, tc.scan - 1, tc.scan} {
				if start+len(id) > MaxTextBytes {
					start = MaxTextBytes - len(id)
				}
				text := filler(start) + id
				text += filler(MaxTextBytes - len(text))
				got := mustExtract(t, text, []extractor{{typ: "id", pat: mustPattern(t, tc.pattern)}})
				want := start < tc.scan
				if (len(got) == 1 && got[0].Start == start) != want {
					t.Errorf("match at %d of %d bytes read: got %+v, want found=%v", start, tc.scan, got, want)
				}
			}
		})
	}
}

func instructionsOf(t *testing.T, p string) int {
	t.Helper()
	_, n, err := v1alpha1.CompileEntityPattern(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// heavyClassifier has MaxEntityExtractors patterns at the instruction
// limit that read a question of a's to the end of what they may read.
func heavyClassifier(name string) v1alpha1.ContextClassifier {
	c := intentClassifier()
	c.Name = name
	c.Spec.Entities = nil
	for range v1alpha1.MaxEntityExtractors {
		c.Spec.Entities = append(c.Spec.Entities, v1alpha1.EntityExtractor{Type: "run", Pattern: `(?:a|aa){1,199}b`})
	}
	return c
}

// heavyQuestion is a question at the text bound that every pattern of
// heavyClassifier must read as far as it may: the b it needs is at the end.
var heavyQuestion = strings.Repeat("a", MaxTextBytes-1) + "b"

// TestEntityExtractionStopsAtDeadline: extraction stops when the query's
// context ends, between patterns and inside one, and the query stops with
// a *StoppedError instead of answering without the entities (issue 22:
// 13.7 s under a 2 s timeout). Without the checks this test takes seconds
// of CPU per query; with them, about the deadline.
func TestEntityExtractionStopsAtDeadline(t *testing.T) {
	heavy := func(routes ...v1alpha1.ContextRoute) *Snapshot {
		cfg := detectConfig(routes...)
		cfg.Classifiers = []v1alpha1.ContextClassifier{heavyClassifier("heavy")}
		s := compile(t, cfg)
		if n := len(s.extractors); n != v1alpha1.MaxEntityExtractors {
			t.Fatalf("%d extractors compiled, want %d", n, v1alpha1.MaxEntityExtractors)
		}
		return s
	}
	s := heavy()
	byEntity := heavy(routeTo("by-entity", `entities.exists(e, e.type == "run")`, "deploys"))

	t.Run("inside one pattern", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		_, err := s.extractors[0].pat.find(ctx, heavyQuestion, "run", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("find = %v, want the deadline", err)
		}
	})
	for _, tc := range []struct {
		name, route string
		s           *Snapshot
		req         Request
	}{
		{"detect", "", s, Request{Text: heavyQuestion, Detect: []string{"*"}}},
		{"a condition reading entities", "by-entity", byEntity, Request{Text: heavyQuestion}},
		{"a condition reading entities, and detect", "by-entity", byEntity, Request{Text: heavyQuestion, Detect: []string{"heavy"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			resp, err := tc.s.Query(ctx, tc.req)
			var stopped *StoppedError
			if !errors.As(err, &stopped) || !errors.Is(err, context.DeadlineExceeded) || stopped.Route != tc.route {
				t.Fatalf("Query = %v, %v; want a *StoppedError at route %q", resp, err, tc.route)
			}
		})
	}
	msg := (&StoppedError{Err: context.DeadlineExceeded}).TimeoutMessage(2 * time.Second)
	if msg != "query exceeded the 2s timeout while extracting the entities of detect" {
		t.Errorf("timeout message %q", msg)
	}
	// A short question is answered, with its entities.
	resp, err := s.Query(context.Background(), Request{Text: "ab then aab", Detect: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.Detection.Entities); got != 2 || resp.Detection.Entities[1] != (Entity{"run", "aab", 8, 11}) {
		t.Errorf("entities %+v, want ab and aab (once each: the extractors share a type and value)", resp.Detection.Entities)
	}
}

// TestEntityPatternOverCostRefusedAtLoad: the pattern (4,977
// instructions) is refused when the router loads, naming the object and
// the field, and the limit.
func TestEntityPatternOverCostRefusedAtLoad(t *testing.T) {
	cfg := detectConfig()
	c := heavyClassifier("heavy")
	c.Spec.Entities[3].Pattern = `(?:a|aa){1,995}b`
	cfg.Classifiers = []v1alpha1.ContextClassifier{c}
	_, err := Compile(context.Background(), cfg, Options{})
	want := "ContextClassifier/heavy: spec.entities[3].pattern: compiles to 4977 instructions; patterns are limited to 1000"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Compile = %v, want an error containing %q", err, want)
	}
}
