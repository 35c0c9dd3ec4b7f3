package session_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

func ip(n int) *int { return &n }

// numbered is n lines "line 1" … "line n", with a final line break.
func numbered(n int) string {
	var b strings.Builder
	for k := 1; k <= n; k++ {
		fmt.Fprintf(&b, "line %d\n", k)
	}
	return b.String()
}

// drill is the answer of a view as JSON, or its error's message.
func drill(t *testing.T, content string, req session.DrillRequest) (string, error) {
	t.Helper()
	d, err := session.DrillDown("sha256:x", content, req)
	if err != nil {
		var de *session.DrillError
		if !errors.As(err, &de) {
			t.Fatalf("error %T %v, want a DrillError", err, err)
		}
		return "", err
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > session.MaxDrillTextBytes+session.MaxDrillLines*64+4096 {
		t.Fatalf("answer of %d bytes", len(b))
	}
	return string(b), nil
}

// drillCase is a view of content: want is a part of the answer's JSON,
// err a part of the error's message.
type drillCase struct {
	name    string
	content string
	req     session.DrillRequest
	want    string
	err     string
}

func runDrillCases(t *testing.T, tests []drillCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := drill(t, tc.content, tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %.3000s\nwant it to hold %s", got, tc.want)
			}
		})
	}
}

func TestDrillLines(t *testing.T) {
	log := numbered(400)
	long := strings.Repeat("é", session.MaxDrillTextRunes+7)
	// 40 lines of 2,000 characters of 2 bytes: 4,000 bytes each, so 16 pass 64 KiB.
	wide := strings.Repeat(strings.Repeat("ü", session.MaxDrillTextRunes)+"\n", 40)
	tests := []drillCase{
		{"default", log, session.DrillRequest{View: session.ViewLines}, `"lines":400,"from":1,"to":20,"content":["line 1",` + `"line 2","line 3","line 4","line 5","line 6","line 7","line 8","line 9","line 10","line 11","line 12","line 13","line 14","line 15","line 16","line 17","line 18","line 19","line 20"],"next":{"from":21,"to":40}}`, ""},
		{"from and to", log, session.DrillRequest{View: session.ViewLines, From: ip(5), To: ip(7)}, `"from":5,"to":7,"content":["line 5","line 6","line 7"],"next":{"from":8,"to":10}}`, ""},
		{"from alone", log, session.DrillRequest{View: session.ViewLines, From: ip(390)}, `"from":390,"to":400,"content":["line 390",`, ""},
		{"from alone reaches the end without a note", log, session.DrillRequest{View: session.ViewLines, From: ip(390)}, `"line 400"]}`, ""},
		{"last three", log, session.DrillRequest{View: session.ViewLines, From: ip(-3)}, `"from":398,"to":400,"content":["line 398","line 399","line 400"]}`, ""},
		{"negative both", log, session.DrillRequest{View: session.ViewLines, From: ip(-10), To: ip(-9)}, `"from":391,"to":392,"content":["line 391","line 392"],"next":{"from":393,"to":394}}`, ""},
		{"to from the end", log, session.DrillRequest{View: session.ViewLines, From: ip(1), To: ip(-399)}, `"from":1,"to":2,`, ""},
		{"one line", log, session.DrillRequest{View: session.ViewLines, From: ip(400), To: ip(400)}, `"from":400,"to":400,"content":["line 400"]}`, ""},
		{"to past the end", log, session.DrillRequest{View: session.ViewLines, From: ip(398), To: ip(500)}, `"from":398,"to":400,"content":["line 398","line 399","line 400"],"note":"the artifact has 400 lines; answered 398–400"}`, ""},
		{"from before the start", log, session.DrillRequest{View: session.ViewLines, From: ip(-1000), To: ip(2)}, `"from":1,"to":2,"content":["line 1","line 2"],"next":{"from":3,"to":4},"note":"the artifact has 400 lines; answered 1–2"}`, ""},
		{"200 lines at most", log, session.DrillRequest{View: session.ViewLines, From: ip(1), To: ip(1000)}, `"to":200,`, ""},
		{"the rest of the range next", log, session.DrillRequest{View: session.ViewLines, From: ip(101), To: ip(1000)}, `"from":101,"to":300,`, ""},
		{"next after a cut range", log, session.DrillRequest{View: session.ViewLines, From: ip(101), To: ip(1000)}, `"next":{"from":301,"to":400},"note":"the artifact has 400 lines; answered 101–300","truncated":true}`, ""},
		{"no final line break", "a\nb\nc", session.DrillRequest{View: session.ViewLines, From: ip(-1)}, `"lines":3,"from":3,"to":3,"content":["c"]}`, ""},
		{"CRLF", "a\r\nb\r\n", session.DrillRequest{View: session.ViewLines}, `"lines":2,"from":1,"to":2,"content":["a","b"]}`, ""},
		{"empty lines", "\n\nx\n", session.DrillRequest{View: session.ViewLines}, `"lines":3,"from":1,"to":3,"content":["","","x"]}`, ""},
		{"a huge line is cut", "short\n" + long + "\n", session.DrillRequest{View: session.ViewLines, From: ip(2)}, `"from":2,"to":2,"content":["` + long[:2*session.MaxDrillTextRunes] + `…"],"truncated":true}`, ""},
		{"64 KiB bound", wide, session.DrillRequest{View: session.ViewLines, To: ip(40)}, `"from":1,"to":16,`, ""},
		{"64 KiB bound gives the rest next", wide, session.DrillRequest{View: session.ViewLines, To: ip(40)}, `"next":{"from":17,"to":40},"truncated":true}`, ""},
		{"from 0", log, session.DrillRequest{View: session.ViewLines, From: ip(0)}, "", "from: 0 is not a line number; lines count from 1, or from -1 at the end"},
		{"to 0", log, session.DrillRequest{View: session.ViewLines, To: ip(0)}, "", "to: 0 is not a line number"},
		{"from past the end", log, session.DrillRequest{View: session.ViewLines, From: ip(401)}, "", "from 401 is past the end: the artifact has 400 lines"},
		{"from after to", log, session.DrillRequest{View: session.ViewLines, From: ip(-3), To: ip(10)}, "", "from -3 (line 398) is after to 10"},
		{"to before the start", log, session.DrillRequest{View: session.ViewLines, To: ip(-401)}, "", "to -401 is before the first line: the artifact has 400 lines"},
		{"empty artifact", "", session.DrillRequest{View: session.ViewLines}, "", "from 1 is past the end: the artifact has 0 lines"},
		{"lines is head's", log, session.DrillRequest{View: session.ViewLines, Lines: 5}, "", "lines applies to view=head and view=csv only"},
		{"from is lines'", log, session.DrillRequest{View: session.ViewHead, From: ip(1)}, "", "from applies to view=lines only"},
		{"to is lines'", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x", To: ip(1)}, "", "to applies to view=lines only"},
	}
	runDrillCases(t, tests)
}

// TestDrillLinesPaging: following next from line 1 reads every line of
// the text once, in order, whatever the range asked.
func TestDrillLinesPaging(t *testing.T) {
	text := numbered(1234)
	for _, span := range []int{1, 7, 20, 333, 5000} {
		t.Run(fmt.Sprint(span), func(t *testing.T) {
			var got []string
			req := session.DrillRequest{View: session.ViewLines, From: ip(1), To: ip(span)}
			for range 2000 {
				d, err := session.DrillDown("r", text, req)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d.Content...)
				if d.Next == nil {
					break
				}
				req.From, req.To = ip(d.Next.From), ip(d.Next.To)
			}
			if strings.Join(got, "\n")+"\n" != text {
				t.Fatalf("paged %d lines, want the 1234 lines in order", len(got))
			}
		})
	}
}

func TestDrillGrep(t *testing.T) {
	log := sessiontest.BuildLog(400)
	ten := numbered(10)
	long := strings.Repeat("x", 3000) + " ERROR at the end " + strings.Repeat("y", 100)
	many := strings.Repeat("match\n", 300)
	// Lines of 2,000 characters: 32 of them pass 64 KiB.
	wide := strings.Repeat("hit "+strings.Repeat("w", session.MaxDrillTextRunes-4)+"\n", 50)
	tests := []drillCase{
		{"RE2", log, session.DrillRequest{View: session.ViewGrep, Pattern: "ERROR"}, `"matches":[{"line":400,"text":"2026-03-02T10:06:39Z ERROR payment-service: connection refused (dial tcp 10.0.3.7:5432)","before":[],"after":[]}],"total_matches":1}`, ""},
		{"RE2 alternation", log, session.DrillRequest{View: session.ViewGrep, Pattern: `ERROR|WARN`}, `"matches":[{"line":212,"text":"2026-03-02T10:03:31Z WARN retry 1/3 failed: timeout","before":[],"after":[]},{"line":400,`, ""},
		{"case matters", log, session.DrillRequest{View: session.ViewGrep, Pattern: "error"}, `"matches":[],"total_matches":0}`, ""},
		{"any case with (?i)", log, session.DrillRequest{View: session.ViewGrep, Pattern: "(?i)error"}, `"line":400,`, ""},
		{"any case past ASCII", "ok\nTRACEBAC\u212a (Kelvin sign)\nfailures: ſ\n", session.DrillRequest{View: session.ViewGrep, Pattern: "(?i)traceback|failures: s"}, "\"matches\":[{\"line\":2,\"text\":\"TRACEBAC\u212a (Kelvin sign)\",\"before\":[],\"after\":[]},{\"line\":3,", ""},
		{"line anchors", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `^line 1$`}, `"matches":[{"line":1,"text":"line 1","before":[],"after":[]}],"total_matches":1}`, ""},
		{"a class does not cross lines", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `line 3[^x]*line 4`}, `"matches":[],"total_matches":0}`, ""},
		{"a match across lines counts on its line alone", "a1\nb\nca2\n", session.DrillRequest{View: session.ViewGrep, Pattern: `(?s)a.*2`}, `"matches":[{"line":3,"text":"ca2","before":[],"after":[]}],"total_matches":1}`, ""},
		{"literal", "a.b\naxb\n", session.DrillRequest{View: session.ViewGrep, Pattern: "a.b", Literal: true}, `"matches":[{"line":1,"text":"a.b","before":[],"after":[]}],"total_matches":1}`, ""},
		{"the same as RE2", "a.b\naxb\n", session.DrillRequest{View: session.ViewGrep, Pattern: "a.b"}, `"total_matches":2}`, ""},
		{"literal special characters", "x (1+1)?\n", session.DrillRequest{View: session.ViewGrep, Pattern: "(1+1)?", Literal: true}, `"line":1,`, ""},
		{"context", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `^line 5$`, Context: ip(2)}, `"matches":[{"line":5,"text":"line 5","before":["line 3","line 4"],"after":["line 6","line 7"]}],"total_matches":1}`, ""},
		{"context at the edges", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `^line (1|10)$`, Context: ip(3)}, `"matches":[{"line":1,"text":"line 1","before":[],"after":["line 2","line 3","line 4"]},{"line":10,"text":"line 10","before":["line 7","line 8","line 9"],"after":[]}]`, ""},
		{"overlapping context shown once", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `^line [46]$`, Context: ip(2)}, `"matches":[{"line":4,"text":"line 4","before":["line 2","line 3"],"after":["line 5"]},{"line":6,"text":"line 6","before":[],"after":["line 7","line 8"]}]`, ""},
		{"max", many, session.DrillRequest{View: session.ViewGrep, Pattern: "match", Max: ip(2)}, `"matches":[{"line":1,"text":"match","before":[],"after":[]},{"line":2,"text":"match","before":[],"after":[]}],"total_matches":300,"truncated":true}`, ""},
		{"default max 50", many, session.DrillRequest{View: session.ViewGrep, Pattern: "match"}, `{"line":50,"text":"match","before":[],"after":[]}],"total_matches":300,"truncated":true}`, ""},
		{"context stops before the next match past max", ten, session.DrillRequest{View: session.ViewGrep, Pattern: `^line [47]$`, Max: ip(1), Context: ip(5)}, `"after":["line 5","line 6"]}],"total_matches":2,"truncated":true}`, ""},
		{"no match", log, session.DrillRequest{View: session.ViewGrep, Pattern: "panic"}, `"matches":[],"total_matches":0}`, ""},
		{"empty match on every line", "a\n\nb\n", session.DrillRequest{View: session.ViewGrep, Pattern: "x*"}, `"total_matches":3}`, ""},
		{"a long line is cut around the match", long, session.DrillRequest{View: session.ViewGrep, Pattern: "ERROR"}, `"text":"…` + strings.Repeat("x", 499) + ` ERROR at the end ` + strings.Repeat("y", 100) + `","before":[],"after":[]}],"total_matches":1,"truncated":true}`, ""},
		{"64 KiB bound", wide, session.DrillRequest{View: session.ViewGrep, Pattern: "^hit"}, `"total_matches":50,"truncated":true}`, ""},
		{"bad pattern", log, session.DrillRequest{View: session.ViewGrep, Pattern: "a(b"}, "", `pattern "a(b" is not RE2: missing closing ) in "a(b"`},
		{"bad class", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x[z-a]"}, "", `pattern "x[z-a]" is not RE2: invalid character class range in "z-a"`},
		{"no pattern", log, session.DrillRequest{View: session.ViewGrep}, "", "view=grep needs a pattern"},
		{"pattern too long", log, session.DrillRequest{View: session.ViewGrep, Pattern: strings.Repeat("a", session.MaxPatternBytes+1)}, "", "pattern is 1025 bytes; it is limited to 1024 bytes"},
		{"pattern at the bound", log, session.DrillRequest{View: session.ViewGrep, Pattern: strings.Repeat("a", session.MaxPatternBytes), Literal: true}, `"total_matches":0}`, ""},
		{"context past the bound", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x", Context: ip(11)}, "", "context is 11; it must be between 0 and 10"},
		{"negative context", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x", Context: ip(-1)}, "", "context is -1; it must be between 0 and 10"},
		{"max 0", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x", Max: ip(0)}, "", "max is 0; it must be between 1 and 200"},
		{"max past the bound", log, session.DrillRequest{View: session.ViewGrep, Pattern: "x", Max: ip(201)}, "", "max is 201; it must be between 1 and 200"},
		{"pattern is grep's", log, session.DrillRequest{View: session.ViewLines, Pattern: "x"}, "", "pattern applies to view=grep only"},
		{"literal is grep's", log, session.DrillRequest{View: session.ViewJSON, Literal: true}, "", "literal applies to view=grep only"},
		{"context is grep's", log, session.DrillRequest{View: session.ViewCSV, Context: ip(1)}, "", "context applies to view=grep only"},
		{"max is grep's", log, session.DrillRequest{View: session.ViewColumns, Max: ip(1)}, "", "max applies to view=grep only"},
	}
	runDrillCases(t, tests)
}

// TestDrillGrepCountsEveryLine: total_matches agrees with a line-by-line
// count, whatever the pattern and however lines end.
func TestDrillGrepCountsEveryLine(t *testing.T) {
	text := sessiontest.BigText(64<<10) + "last ERROR line without a break"
	lines := strings.Split(text, "\n")
	for _, p := range []string{"ERROR", "(?i)error", "worker-1[0-6]", `\d{3} ms$`, "^2026", "(?s)ERROR.*upstream", "batch 1\\d\\d of"} {
		t.Run(p, func(t *testing.T) {
			d, err := session.DrillDown("r", text, session.DrillRequest{View: session.ViewGrep, Pattern: p, Max: ip(session.MaxGrepMatches)})
			if err != nil {
				t.Fatal(err)
			}
			want, first := 0, 0
			for i, l := range lines {
				if matchLine(t, p, l) {
					want++
					if first == 0 {
						first = i + 1
					}
				}
			}
			if *d.TotalMatches != want || want == 0 || d.Matches[0].Line != first {
				t.Fatalf("total %d, first %v; want %d from line %d", *d.TotalMatches, d.Matches[:min(1, len(d.Matches))], want, first)
			}
		})
	}
}

// matchLine matches one line alone, as grep reads lines.
func matchLine(t *testing.T, p, line string) bool {
	t.Helper()
	d, err := session.DrillDown("r", line, session.DrillRequest{View: session.ViewGrep, Pattern: p})
	if err != nil {
		t.Fatal(err)
	}
	return *d.TotalMatches == 1
}

// TestDrillDownLog is the check: the last line of a 400-line log,
// which holds the error, is reached from the end and by a search.
func TestDrillDownLog(t *testing.T) {
	log := sessiontest.BuildLog(400)
	last := "2026-03-02T10:06:39Z ERROR payment-service: connection refused (dial tcp 10.0.3.7:5432)"
	d, err := session.DrillDown("r", log, session.DrillRequest{View: session.ViewLines, From: ip(-3)})
	if err != nil || d.From != 398 || d.To != 400 || len(d.Content) != 3 || d.Content[2] != last || d.Next != nil || d.Note != "" {
		t.Fatalf("from=-3: %+v %v", d, err)
	}
	d, err = session.DrillDown("r", log, session.DrillRequest{View: session.ViewGrep, Pattern: "ERROR"})
	if err != nil || *d.TotalMatches != 1 || d.Matches[0].Line != 400 || d.Matches[0].Text != last {
		t.Fatalf("grep ERROR: %+v %v", d, err)
	}
}
