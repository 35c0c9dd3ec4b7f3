package budget

import (
	"strconv"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func mustNew(t testing.TB, kind v1alpha1.TokenEstimator) Estimator {
	t.Helper()
	est, err := New(kind)
	if err != nil {
		t.Fatalf("New(%q): %v", kind, err)
	}
	return est
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		kind    v1alpha1.TokenEstimator
		want    Estimator
		wantErr string
	}{
		{kind: "", want: charsDiv4{}},
		{kind: v1alpha1.EstimatorCharsDiv4, want: charsDiv4{}},
		{kind: v1alpha1.EstimatorWords, want: words{}},
		{kind: v1alpha1.EstimatorWhitespace, want: whitespaceFields{}},
		{kind: v1alpha1.EstimatorO200kBase, want: bpe{o200kBase.get()}},
		{kind: v1alpha1.EstimatorCl100kBase, want: bpe{cl100kBase.get()}},
		{kind: "Tiktoken", wantErr: `unknown token estimator "Tiktoken": want one of CharsDiv4, Words, Whitespace, O200kBase, Cl100kBase`},
		{kind: "o200k_base", wantErr: `unknown token estimator "o200k_base"`},
		{kind: "charsdiv4", wantErr: `unknown token estimator "charsdiv4"`},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			est, err := New(tc.kind)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New(%q) error = %v, want it to contain %q", tc.kind, err, tc.wantErr)
				}
				if est != nil {
					t.Errorf("New(%q) returned estimator %T with an error", tc.kind, est)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tc.kind, err)
			}
			if est != tc.want {
				t.Errorf("New(%q) = %T, want %T", tc.kind, est, tc.want)
			}
		})
	}
}

func TestCharsDiv4(t *testing.T) {
	est := mustNew(t, v1alpha1.EstimatorCharsDiv4)
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"one rune", "a", 1},
		{"four runes", "abcd", 1},
		{"five runes", "abcde", 2},
		{"spaces count", "        ", 2},
		{"accents are one rune each", "héllo", 2},         // 5 runes
		{"cjk", "日本語です", 2},                               // 5 runes, 15 bytes
		{"emoji is one rune", "🙂", 1},                     // 4 bytes
		{"combining mark is its own rune", "e\u0301", 1},  // 2 runes
		{"crlf", "a\r\nb", 1},                             // 4 runes
		{"invalid bytes count one each", "\xff\xfeab", 1}, // 4 "runes"
		{"sentence", "The quick brown fox jumps.", 7},     // 26 runes
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := est.Count(tc.in); got != tc.want {
				t.Errorf("Count(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestWords(t *testing.T) {
	est := mustNew(t, v1alpha1.EstimatorWords)
	for _, tc := range []struct {
		name string
		in   string
		want int // ceil(words*4/3)
	}{
		{"empty", "", 0},
		{"only whitespace", " \t\r\n\u00a0", 0},
		{"one word", "hello", 2},                                // 1
		{"two words", "hello world", 3},                         // 2
		{"three words", "one two three", 4},                     // 3
		{"punctuation splits", "Hello, world!", 6},              // Hello , world ! = 4
		{"apostrophe", "don't", 4},                              // don ' t = 3
		{"operators", "x=1+2", 7},                               // x = 1 + 2 = 5
		{"digits and letters join", "abc123 v2", 3},             // 2
		{"underscore is a symbol", "foo_bar", 4},                // foo _ bar = 3
		{"repeated punctuation", "...", 4},                      // 3
		{"accented latin", "naïve café", 3},                     // 2
		{"decomposed accent stays in word", "cafe\u0301 ok", 3}, // 2
		{"cyrillic", "Привет, мир", 4},                          // Привет , мир = 3
		{"cjk one per character", "日本語", 4},                     // 3
		{"cjk mixed", "Go言語です", 7},                              // Go 言 語 で す = 5 (hiragana too)
		{"emoji is a symbol", "ok 🙂", 3},                        // 2
		{"crlf", "a\r\nb", 3},                                   // 2
		{"invalid byte is a symbol", "a\xffb", 4},               // a \xff b = 3
		{"nbsp separates", "a\u00a0b", 3},                       // 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := est.Count(tc.in); got != tc.want {
				t.Errorf("Count(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestWhitespace(t *testing.T) {
	est := mustNew(t, v1alpha1.EstimatorWhitespace)
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"only whitespace", " \t\r\n\v\f", 0},
		{"one field", "hello", 1},
		{"surrounding space", "  a  b\tc\n", 3},
		{"punctuation does not split", "a,b;c", 1},
		{"unicode spaces split", "a\u00a0b\u2003c\u0085d", 4},
		{"zero width space is not a space", "a\u200bb", 1},
		{"crlf lines", "one two\r\nthree\r\n", 3},
		{"cjk without spaces", "日本語です", 1},
		{"invalid bytes are not space", "\xff \xfe", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := est.Count(tc.in)
			if got != tc.want {
				t.Errorf("Count(%q) = %d, want %d", tc.in, got, tc.want)
			}
			if fields := len(strings.Fields(tc.in)); got != fields {
				t.Errorf("Count(%q) = %d, strings.Fields gives %d", tc.in, got, fields)
			}
		})
	}
}

// TestCountDoesNotAllocate backs the hot-path promise in the Estimator contract.
func TestCountDoesNotAllocate(t *testing.T) {
	text := benchText()
	for _, kind := range allKinds {
		est := mustNew(t, kind)
		if allocs := testing.AllocsPerRun(20, func() { est.Count(text) }); allocs != 0 {
			t.Errorf("%s: Count allocates %.0f times per call", kind, allocs)
		}
	}
}

var allKinds = []v1alpha1.TokenEstimator{
	v1alpha1.EstimatorCharsDiv4, v1alpha1.EstimatorWords, v1alpha1.EstimatorWhitespace,
	v1alpha1.EstimatorO200kBase, v1alpha1.EstimatorCl100kBase,
}

// benchText is about 2 KB of mixed prose, code and a little non-ASCII, like a typical chunk.
func benchText() string {
	const para = "Remote work policy: employees may work remotely up to 3 days/week (see §4.2). " +
		"Managers approve requests via the HR portal — décisions are final.\n" +
		"```go\nfunc Count(s string) int { return (len(s) + 3) / 4 }\n```\n"
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(para)
	}
	return b.String()
}

func BenchmarkCount(b *testing.B) {
	text := benchText()
	for _, kind := range allKinds {
		b.Run(string(kind), func(b *testing.B) {
			est := mustNew(b, kind)
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				est.Count(text)
			}
		})
	}
}

// englishText is n bytes of English prose (cut at a rune boundary), for Count's speed per size.
func englishText(n int) string {
	const para = "The router keeps a snapshot of every source: chunks, their token counts and a BM25 index. " +
		"A query walks the routes, checks the agent's permissions, ranks what matched and fills the budget " +
		"in rank order; a chunk that does not fit is dropped or cut at a word boundary. Sessions work the " +
		"same way, phase by phase, so an agent's prompt never grows past what its model accepts.\n\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(para)
	}
	return strings.ToValidUTF8(b.String()[:n], "")
}

func BenchmarkCountEnglish(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10} {
		text := englishText(size)
		for _, kind := range allKinds {
			b.Run(strconv.Itoa(size>>10)+"KiB/"+string(kind), func(b *testing.B) {
				est := mustNew(b, kind)
				b.ReportAllocs()
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					est.Count(text)
				}
			})
		}
	}
}
