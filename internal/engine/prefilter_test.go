package engine

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

func TestRequiredLiteral(t *testing.T) {
	cases := []struct {
		pattern, want string
	}{
		{`\b[A-Z][A-Z0-9]+-[0-9]+\b`, "-"},
		{`INC[0-9]{4,}`, "INC"},
		{`(?:ticket|issue) #[0-9]+`, " #"},
		{`(ab)+c`, "ab"},
		{`x{2,3}yz`, "xx"},        // the longest of the two required parts
		{`[0-9]+(\.[0-9]+)?`, ""}, // the dot is optional
		{`a?b*`, ""},
		{`(?i)ops-[0-9]+`, ""}, // case-folded: not one spelling
		{`foo|bar`, ""},
		{`[a-z]+@[a-z]+\.com`, ".com"},
		{`ü-[0-9]`, "ü-"},
		{`\x{FFFD}xy\x{FFFD}z`, "xy"}, // U+FFFD also matches an invalid byte
		{`[\x{FFFD}]`, ""},
		{`(`, ""}, // invalid: no prefilter
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			if got := requiredLiteral(tc.pattern); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPatternPrefilter: on generated texts, extraction with the prefilter
// finds exactly what the plain regular expressions find, and texts without
// the literal are the ones it skips.
func TestPatternPrefilter(t *testing.T) {
	patterns := []string{
		`\b[A-Z][A-Z0-9]+-[0-9]+\b`, `INC[0-9]{2,}`, `(?:ticket|issue) #[0-9]+`, `[a-z]+@[a-z]+\.com`,
		`ü-[0-9]`, `\x{FFFD}x`, `(ab)+c`, `[0-9]+(\.[0-9]+)?`,
	}
	alphabet := []string{"A", "B", "Z", "I", "N", "C", "a", "b", "c", "x", "z", "0", "7", "9", "-", "-", " ", " ", ".", "@",
		"#", "ticket", "issue", "INC", ".com", "ü", "\xff", "\uFFFD", "OPS-12", "ab", " #", "ticket #", "ü-", "\uFFFDx", "\xffx"}
	texts := append([]string{"", "OPS-12", "How many vacation days do I get?", "\xffx", "mail bob@acme.com", "INC00 and INC1"},
		randomTexts(9, alphabet, 3000, 12)...)
	for _, p := range patterns {
		t.Run(p, func(t *testing.T) {
			plainPat := *mustPattern(t, p)
			plainPat.lit = ""
			filteredPat := plainPat
			filteredPat.lit = requiredLiteral(p)
			plain := extractor{typ: "x", pat: &plainPat}
			filtered := extractor{typ: "x", pat: &filteredPat}
			if filteredPat.lit == "" && p != `[0-9]+(\.[0-9]+)?` {
				t.Fatalf("no literal for %s", p)
			}
			matched, skipped := 0, 0
			for _, text := range texts {
				want := mustExtract(t, text, []extractor{plain})
				got := mustExtract(t, text, []extractor{filtered})
				if !slices.Equal(got, want) {
					t.Fatalf("%q: prefiltered %+v, plain %+v", text, got, want)
				}
				if len(want) > 0 {
					matched++
				}
				if !strings.Contains(text, filteredPat.lit) {
					skipped++
					if len(want) > 0 {
						t.Fatalf("%q matches but lacks %q", text, filteredPat.lit)
					}
				}
			}
			// The generated set exercises both sides.
			if matched == 0 || (filteredPat.lit != "" && skipped == 0) {
				t.Errorf("%d texts matched, %d skipped", matched, skipped)
			}
		})
	}
}

// randomTexts are n texts of fewer than parts pieces of alphabet each,
// drawn with a seeded generator.
func randomTexts(seed uint64, alphabet []string, n, parts int) []string {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range rng.IntN(parts) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		out[i] = b.String()
	}
	return out
}

func TestRequiredLiterals(t *testing.T) {
	cases := []struct {
		pattern string
		want    []string
		fold    bool
	}{
		{`ERROR`, []string{"ERROR"}, false},
		{`(?i)Error`, []string{"error"}, true},
		{`(?i)panic|fatal`, []string{"panic", "fatal"}, true},
		{`ERROR|(?i)warn`, []string{"error", "warn"}, true}, // one folded: all are looked for in any case
		{`timed out after \d+s`, []string{"timed out after "}, false},
		{`x(?i:ab)c`, []string{"xabc"}, true},
		{`(?:ticket|issue) #[0-9]+`, []string{"ticket", "issue"}, false}, // longer than " #"
		{`[0-9]+(\.[0-9]+)?`, nil, false},
		{`error|\d+`, nil, false}, // an alternative without a literal
		{`(?i)ü-x`, nil, false},   // folded past ASCII
		{`\x{FFFD}xy`, []string{"xy"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.pattern, func(t *testing.T) {
			re, err := syntax.Parse(tc.pattern, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			lits, fold := RequiredLiterals(re)
			if !slices.Equal(lits, tc.want) || fold != tc.fold {
				t.Errorf("got %q fold %v, want %q fold %v", lits, fold, tc.want, tc.fold)
			}
		})
	}
}

// TestRequiredLiteralsHold: on generated texts, a text the expression
// matches holds one of the literals (in any case when fold).
func TestRequiredLiteralsHold(t *testing.T) {
	patterns := []string{`(?i)error`, `(?i)panic|fatal`, `ERROR|(?i)warn`, `x(?i:ab)c`, `(?i)fail(ed|ure)?`, `(ab)+c|(?i)ZZ`, `INC[0-9]{2,}`}
	alphabet := []string{"e", "E", "r", "R", "o", "O", "error", "ERROR", "Error", "panic", "PaNiC", "fatal", "FATAL", "warn", "WARN",
		"x", "a", "A", "b", "B", "c", "xAbc", "fail", "FAILED", "z", "Z", "INC", "0", "7", " ", "\xff", "\uFFFD"}
	texts := randomTexts(23, alphabet, 4000, 10)
	for _, p := range patterns {
		t.Run(p, func(t *testing.T) {
			re, _ := syntax.Parse(p, syntax.Perl)
			lits, fold := RequiredLiterals(re)
			if len(lits) == 0 {
				t.Fatalf("no literals for %s", p)
			}
			c := regexp.MustCompile(p)
			matched := 0
			for _, text := range texts {
				hay := text
				if fold {
					hay = strings.ToLower(text)
				}
				holds := slices.ContainsFunc(lits, func(l string) bool { return strings.Contains(hay, l) })
				if c.MatchString(text) {
					matched++
					if !holds {
						t.Fatalf("%q matches %s but holds none of %q", text, p, lits)
					}
				}
			}
			if matched == 0 {
				t.Fatalf("no generated text matches %s", p)
			}
		})
	}
}
