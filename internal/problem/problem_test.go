package problem

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestProblemError(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"everything", Problem{Location: Location{File: "f.yaml", Line: 3}, Kind: "ContextSource", Name: "docs", Field: "spec.type", Message: "bad"},
			"f.yaml:3: ContextSource/docs: spec.type: bad"},
		{"file without line", Problem{Location: Location{File: "f.yaml"}, Message: "no such file or directory"}, "f.yaml: no such file or directory"},
		{"kind without name", Problem{Kind: "ContextRoute", Message: "m"}, "ContextRoute: m"},
		{"cluster object", Problem{Kind: "ContextRoute", Name: "r", Field: "spec.when", Message: "m"}, "ContextRoute/r: spec.when: m"},
		{"message only", Problem{Message: "m"}, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
	l := List{tests[0].p, tests[1].p}
	if got := l.Error(); got != tests[0].want+"\n"+tests[1].want {
		t.Errorf("List.Error() = %q", got)
	}
}

func TestListErr(t *testing.T) {
	if err := List(nil).Err(); err != nil {
		t.Errorf("empty list: Err() = %v, want nil", err)
	}
	warn := List{{Message: "w", Severity: Warning}}
	if err := warn.Err(); err != nil {
		t.Errorf("warnings only: Err() = %v, want nil", err)
	}
	both := List{{Message: "w", Severity: Warning}, {Kind: "ContextRoute", Name: "r", Message: "e"}}
	var got List
	if !errors.As(both.Err(), &got) || len(got) != 2 {
		t.Fatalf("Err() = %v, want the list as an error", both.Err())
	}
	if e, w := both.Errors(), both.Warnings(); len(e) != 1 || e[0].Message != "e" || len(w) != 1 || w[0].Message != "w" {
		t.Errorf("Errors() = %v, Warnings() = %v", e, w)
	}
	if of := both.Of("ContextRoute", "r"); len(of) != 1 || of[0].Message != "e" {
		t.Errorf("Of = %v", of)
	}
}

func TestWithinAndCovers(t *testing.T) {
	tests := []struct {
		inner, path string
		want        bool
	}{
		{"spec.sources[0].name", "spec.sources", true},
		{"spec.sources[0].name", "spec", true},
		{"spec.sources", "spec.sources", true},
		{"spec.sourcesX", "spec.sources", false},
		{"spec.when", "spec.sources", false},
		{"spec", "spec.when", false},
		{"anything", "", true},
	}
	for _, tt := range tests {
		if got := Within(tt.inner, tt.path); got != tt.want {
			t.Errorf("Within(%q, %q) = %v, want %v", tt.inner, tt.path, got, tt.want)
		}
	}
	p := Problem{Kind: "ContextRouter", Name: "r", Field: "spec.ranking.scorer", Message: "Unsupported value"}
	q := Problem{Kind: "ContextRouter", Name: "r", Field: "spec.ranking.scorer", Message: "unsupported value, other wording"}
	if !p.Covers(q) {
		t.Error("the same field of the same object is covered")
	}
	if p.Covers(Problem{Kind: "ContextRouter", Name: "other", Field: "spec.ranking.scorer"}) {
		t.Error("another object is not covered")
	}
	if p.Covers(Problem{Kind: "ContextRouter", Name: "r", Field: "spec.budget"}) {
		t.Error("another field is not covered")
	}
}

func TestOneLine(t *testing.T) {
	cel := "ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>'\n | text.contains(\n | ..............^"
	if got, want := OneLine(cel), "ERROR: <input>:1:15: Syntax error: mismatched input '<EOF>'"; got != want {
		t.Errorf("OneLine(CEL) = %q, want %q", got, want)
	}
	two := "ERROR: <input>:1:1: a\n | x\n | ^\nERROR: <input>:1:5: b\n | x\n | ....^"
	if got, want := OneLine(two), "ERROR: <input>:1:1: a; ERROR: <input>:1:5: b"; got != want {
		t.Errorf("OneLine(two issues) = %q, want %q", got, want)
	}
	if got := OneLine("plain"); got != "plain" {
		t.Errorf("OneLine(plain) = %q", got)
	}
	// Each line is made one clean line as textutil.OneLine makes any text.
	for msg, want := range map[string]string{
		"a\x1b[2Jb":             "a[2Jb",
		"first\r\nsecond\r\n":   "first; second",
		"tab\there\n  \n|\nend": "tab here; end",
	} {
		if got := OneLine(msg); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestSort(t *testing.T) {
	rank := map[string]int{"b.yaml": 0, "a.yaml": 1}
	l := List{
		{Message: "no file"},
		{Location: Location{File: "a.yaml", Line: 2}, Message: "a2"},
		{Location: Location{File: "b.yaml", Line: 9}, Message: "b9"},
		{Location: Location{File: "a.yaml", Line: 1}, Kind: v1alpha1.KindContextSource, Name: "s", Message: "a1-source"},
		{Location: Location{File: "a.yaml", Line: 1}, Kind: v1alpha1.KindContextRouter, Name: "r", Message: "a1-router"},
		{Location: Location{File: "b.yaml", Line: 3}, Message: "b3"},
	}
	l.Sort(func(f string) int { return rank[f] })
	var got []string
	for _, p := range l {
		got = append(got, p.Message)
	}
	if want := "b3 b9 a1-router a1-source a2 no file"; strings.Join(got, " ") != want {
		t.Errorf("order %q, want %q", strings.Join(got, " "), want)
	}
}

func TestFromFieldErrors(t *testing.T) {
	errs := field.ErrorList{
		field.NotSupported(field.NewPath("spec", "scorer"), "bm", []string{"BM25"}),
		field.Invalid(field.NewPath("spec", "when"), "x", "ERROR: <input>:1:1: bad\n | x\n | ^"),
	}
	got := FromFieldErrors("ContextRouter", "r", errs, v1alpha1.ReasonInvalidSpec)
	want := []string{
		`ContextRouter/r: spec.scorer: Unsupported value: "bm": supported values: "BM25"`,
		`ContextRouter/r: spec.when: Invalid value: "x": ERROR: <input>:1:1: bad`,
	}
	for i := range want {
		if got[i].Error() != want[i] || got[i].Reason != v1alpha1.ReasonInvalidSpec {
			t.Errorf("problem %d = %q (%s), want %q", i, got[i].Error(), got[i].Reason, want[i])
		}
	}
	if d := got.Details(); !strings.HasPrefix(d, "spec.scorer: Unsupported value") || !strings.Contains(d, "; spec.when: ") {
		t.Errorf("Details() = %q", d)
	}
}
