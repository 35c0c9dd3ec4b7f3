package tokenize

import (
	"reflect"
	"strings"
	"testing"
)

func TestEachWord(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"PTO-policy v2.1", []string{"pto", "policy", "v2", "1"}},
		{"don't", []string{"don", "t"}},
		{"Größe ÉTÉ naïve", []string{"größe", "été", "naïve"}},
		{"  tabs\tand\nnewlines ", []string{"tabs", "and", "newlines"}},
		{"日本語 text", []string{"日本語", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got []string
			EachWord(tt.in, func(w []byte) { got = append(got, string(w)) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EachWord(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"The vacations of the employees", []string{"vacat", "employe"}},
		{"Running runs ran", []string{"run", "run", "ran"}},
		{"What is a PTO policy?", []string{"pto", "polici"}},
		{"deploy 2026 k8s", []string{"deploy", "2026", "k8s"}},
		{"x y z", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := Terms(nil, tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Terms(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestUniqueTermsAndWordStems(t *testing.T) {
	if got, want := UniqueTerms("deploy deploys deployment the deploy"), []string{"deploy"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UniqueTerms = %q, want %q", got, want)
	}
	if got, want := WordStems("The Vacations"), []string{"the", "vacat"}; !reflect.DeepEqual(got, want) {
		t.Errorf("WordStems = %q, want %q", got, want)
	}
}

func TestKeywords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"What is the remote-work policy?", []string{"remote-work", "policy"}},
		{"(PTO) pto, PTO!", []string{"pto"}},
		{"a b c I x", nil},
		{"Deploy \"staging\" now...", []string{"deploy", "staging", "now"}},
		// The reference trims only .,;:!?"'()[]{}/- : other marks stay.
		{"Ask #ops or @alice about C++ and $100", []string{"ask", "#ops", "@alice", "c++", "$100"}},
		{"e.g. U.S. --flag /path/ [x] {y}", []string{"e.g", "u.s", "flag", "path"}},
		{"don't stop—now «quoted»", []string{"don't", "stop—now", "«quoted»"}},
		// Its stopwords, "not" and "here" among them.
		{"not here: no, very few!", nil},
		// Python's str.split also splits on U+001C–U+001F.
		{"rota\u001cschedule\u001fdays", []string{"rota", "schedule", "days"}},
		{"ÉTÉ Ünïcode", []string{"été", "ünïcode"}},
		// Python's lower(): a final capital sigma becomes ς, İ becomes i and a combining dot.
		{"ΟΔΟΣ ΣΑΣ. Σα ΑΣ'Β", []string{"οδος", "σας", "σα", "ασ'β"}},
		{"İstanbul", []string{"i\u0307stanbul"}},
		// ª and Ⓐ are cased (Other_Lowercase, Other_Uppercase): the Σ after them is final.
		{"ªΣ ⒶΣ", []string{"ªς", "ⓐς"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := Keywords(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Keywords(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func BenchmarkTerms(b *testing.B) {
	text := "Employees may work remotely up to three days per week after their probation period, subject to manager approval and the security requirements of the remote work policy."
	b.ReportAllocs()
	var dst []string
	for b.Loop() {
		dst = Terms(dst[:0], text)
	}
}

// EachWordStarting yields exactly EachWord's words whose first byte is
// marked, on ASCII, mixed case, digits and other scripts.
func TestEachWordStarting(t *testing.T) {
	texts := []string{
		"",
		"ERROR deploy aborted: migration 0042_add failed; caused by Lock-wait",
		"Ärger über Éclairs, ÉTÉ été; Ωmega ωmega σς İstanbul",
		"日本語のテキスト and x86-64 v2.1 café\u0301 naïve",
		"  --  ,, ",
		"trailing word",
	}
	for _, marks := range []string{"eacl", "0xv", "\xc3\xcf\xe6", "abcdefghijklmnopqrstuvwxyz0123456789"} {
		var first [256]bool
		for i := 0; i < len(marks); i++ {
			first[marks[i]] = true
		}
		for _, s := range texts {
			var want, got []string
			EachWord(s, func(w []byte) {
				if first[w[0]] {
					want = append(want, string(w))
				}
			})
			EachWordStarting(s, &first, func(w []byte) { got = append(got, string(w)) })
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("marks %q, %q: got %q, want %q", marks, s, got, want)
			}
		}
	}
}
