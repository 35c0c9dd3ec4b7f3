package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// encoded lists the encodings, made by the standard library's encoders, in
// which a server may echo v.
func encoded(v string) []string {
	j, _ := json.Marshal(v) // HTML-safe: & < > as \u0026 …
	out := []string{
		v,
		url.QueryEscape(v),
		url.PathEscape(v),
		pctRe.ReplaceAllStringFunc(url.QueryEscape(v), strings.ToLower), // %2f, not %2F
		everyByteEscaped(v),
		string(j[1 : len(j)-1]),
		strings.ReplaceAll(string(j[1:len(j)-1]), "/", `\/`), // PHP's json_encode
		fmt.Sprintf("%q", v)[1 : len(fmt.Sprintf("%q", v))-1],
		html.EscapeString(v),
	}
	return out
}

var pctRe = regexp.MustCompile(`%[0-9A-F]{2}`)

// everyByteEscaped percent-encodes every byte, letters and digits too.
func everyByteEscaped(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&b, "%%%02X", v[i])
	}
	return b.String()
}

// basicForms are the forms of the Basic value of user:password.
func basicForms(user, password string) []string {
	pair := []byte(user + ":" + password)
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, encoded(enc.EncodeToString(pair))...)
	}
	return out
}

func TestScrubberEncodings(t *testing.T) {
	const (
		token    = "ghp_Tok3nSecret42abcXYZ"
		password = `p@ss/w+rd&"x y<9>'`
		apiKey   = "key-ä/é+1"
	)
	tests := []struct {
		name string
		add  func(*Credentials)
		// echoes are texts a server may answer with; none may keep any of gone.
		echoes []string
		gone   []string
	}{
		{
			name:   "git token as go-git sends it",
			add:    func(c *Credentials) { c.AddBasic("x-access-token", token) },
			echoes: append(basicForms("x-access-token", token), encoded(token)...),
			gone:   append(basicForms("x-access-token", token), token),
		},
		{
			name:   "user and password",
			add:    func(c *Credentials) { c.AddBasic("alice", password) },
			echoes: append(basicForms("alice", password), encoded(password)...),
			gone:   append(basicForms("alice", password), encoded(password)...),
		},
		{
			name:   "API key header from a Secret",
			add:    func(c *Credentials) { c.AddHeader(apiKey, true) },
			echoes: encoded(apiKey),
			gone:   encoded(apiKey),
		},
		{
			name:   "bearer token",
			add:    func(c *Credentials) { c.AddHeader("Bearer "+token, true) },
			echoes: append(encoded("Bearer "+token), encoded(token)...),
			gone:   []string{token},
		},
		{
			name: "literal Basic header echoed decoded",
			add: func(c *Credentials) {
				c.AddHeader("Basic "+base64.StdEncoding.EncodeToString([]byte("svc:"+password)), false)
			},
			echoes: append(basicForms("svc", password), encoded("svc:"+password)...),
			gone:   append(basicForms("svc", password), encoded(password)...),
		},
		{
			name:   "literal header echoed percent-decoded",
			add:    func(c *Credentials) { c.AddHeader("abc%2Fdef%2B123", false) },
			echoes: []string{"abc%2Fdef%2B123", "abc/def+123", "abc%2fdef%2b123"},
			gone:   []string{"abc%2Fdef%2B123", "abc/def+123", "abc%2fdef%2b123"},
		},
		{
			name:   "token as the URL's user name",
			add:    func(c *Credentials) { c.AddURL("https://" + token + "@github.com/org/repo.git") },
			echoes: append(basicForms(token, ""), encoded(token)...),
			gone:   append(basicForms(token, ""), token),
		},
		{
			name: "URL user and password",
			add: func(c *Credentials) {
				c.AddURL((&url.URL{Scheme: "https", User: url.UserPassword("alice", password), Host: "host", Path: "/r.git"}).String())
			},
			echoes: append(basicForms("alice", password), encoded(password)...),
			gone:   append(basicForms("alice", password), encoded(password)...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Credentials
			tc.add(&c)
			sc := c.Scrubber()
			for _, echo := range tc.echoes {
				text := "denied: " + echo + " (try again)"
				got := sc.String(text)
				for _, g := range tc.gone {
					if strings.Contains(got, g) {
						t.Errorf("String(%q) = %q still holds %q", text, got, g)
					}
				}
				if !strings.HasPrefix(got, "denied: ") || !strings.HasSuffix(got, " (try again)") || !strings.Contains(got, Mask) {
					t.Errorf("String(%q) = %q: not masked, or more than the value masked", text, got)
				}
			}
		})
	}
}

func TestScrubberShortValues(t *testing.T) {
	tests := []struct {
		name, in, want string
		add            func(*Credentials)
	}{
		{"short secret alone", "pin=ab; retry", "pin=***; retry", func(c *Credentials) { c.AddSecret("ab") }},
		{"short secret inside a word stays", "the table is ab-free", "the table is ***-free", func(c *Credentials) { c.AddSecret("ab") }},
		{"one-digit secret not in a status", "HTTP 401: pin 1 refused", "HTTP 401: pin *** refused", func(c *Credentials) { c.AddSecret("1") }},
		{"short literal value ignored", "Accept: v1", "Accept: v1", func(c *Credentials) { c.AddValue("v1") }},
		{"literal value from four bytes", "tenant acme refused", "tenant *** refused", func(c *Credentials) { c.AddValue("acme") }},
		{"longer value masked whole", "token abcdef", "token ***", func(c *Credentials) { c.AddSecret("abc"); c.AddSecret("abcdef") }},
		{"overlapping values one mask", "x abcdefgh y", "x *** y", func(c *Credentials) { c.AddSecret("abcdef"); c.AddSecret("defgh") }},
		{"URL user part", "GET https://u:p@h/x: 401", "GET https://***@h/x: 401", func(*Credentials) {}},
		{"multi-line secret Go-quoted", `bad key "-----BEGIN KEY-----\nabc\tdef\n" here`, `bad key "***" here`,
			func(c *Credentials) { c.AddSecret("-----BEGIN KEY-----\nabc\tdef\n") }},
		{"literal percent or its encoding", "k=50%25off; k=50%off", "k=***; k=***", func(c *Credentials) { c.AddSecret("50%off") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Credentials
			tc.add(&c)
			if got := c.Scrubber().String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestScrubberExcerpt(t *testing.T) {
	const secret = "s3cret-value"
	var c Credentials
	c.AddSecret(secret)
	sc := c.Scrubber()
	if sc.Lookahead() < 3*len(secret) {
		t.Fatalf("Lookahead() = %d, shorter than the value percent-encoded", sc.Lookahead())
	}
	tests := []struct {
		name string
		in   string
		n    int
		more bool
		want string
	}{
		{"echo across the cut is masked whole", "key " + secret + " is wrong", 8, false, "key ***"},
		{"percent-encoded echo across the cut", "key s3cret%2Dvalue x", 6, false, "key ***"},
		{"cut on a character boundary", "héllo wörld", 2, false, "h"},
		{"whole text kept", "short", 100, false, "short"},
		// The read stopped inside an echo: without more, "s3cr" would stay.
		{"a capped read drops a partial echo", "key s3cr", 100, true, ""},
		{"a capped read keeps what is far from its end", "key " + secret + strings.Repeat(".", 100), 10, true, "key ***"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sc.Excerpt(tc.in, tc.n, tc.more); got != tc.want {
				t.Errorf("Excerpt(%q, %d, %v) = %q, want %q", tc.in, tc.n, tc.more, got, tc.want)
			}
		})
	}
}

func TestScrubberErrorExcerpt(t *testing.T) {
	var c Credentials
	c.AddBasic("x-access-token", "tok-123456")
	base := fmt.Errorf("authentication required: echo Basic %s%s: %w",
		base64.StdEncoding.EncodeToString([]byte("x-access-token:tok-123456")), strings.Repeat("x", 5000), errFixture)
	err := c.Scrubber().ErrorExcerpt(base, 64)
	// The Basic value starts before the cut and runs past it: masked whole, padding included.
	if got := err.Error(); got != "authentication required: echo Basic ***" {
		t.Errorf("ErrorExcerpt = %q", got)
	}
	if !errors.Is(err, errFixture) {
		t.Error("the scrubbed error lost its chain")
	}
}

var errFixture = errors.New("fixture")

// The user-part scan finds what this expression finds (the rule as a
// regular expression, which was the implementation before): on tricky
// texts and on many random ones from an alphabet of URL characters.
func TestUserPartsAsExpression(t *testing.T) {
	re := regexp.MustCompile("([A-Za-z][A-Za-z0-9+.-]*://)[^\\s/?#\"<>\\\\`]*@")
	want := func(s string) [][2]int {
		var out [][2]int
		for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
			out = append(out, [2]int{m[3], m[1] - 1})
		}
		return out
	}
	texts := []string{
		"", "://@", "a://@", "1a://u@h", "1://u@h", "a://b://c@h", "http://a://b@h", "x https://u:p@h/a@b ssh://git@h2:22/y.",
		"http://a@b@c/d@e", `"http://u@h" and http://v@h`, "ab://x ab://y@h", "git+ssh://u@h", ".a://u@h", "a-b.c+d://u@h",
		"http://u@h\thttp://\n@h", "http://u\\@h", "ftp://u`@h", "HTTP://TOK@HOST",
	}
	rng := rand.New(rand.NewPCG(22, 2))
	pieces := []string{"a", "B", "1", "+", ".", "-", ":", "/", "@", " ", "\t", "?", "#", `"`, `\`, "`", "://", "://", "@h"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(16) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, w := appendUserParts(s, nil), want(s); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("user parts of %q: %v, the expression finds %v", s, got, w)
		}
	}
}
