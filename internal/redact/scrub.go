package redact

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinValueLen is the shortest value masked wherever it appears. A secret (a
// token, a password, a Secret's value) shorter than this is masked only
// where it stands alone, not inside a longer word, so that a one-letter
// password does not turn every "a" of a message into ***; a value that is
// not known to be a secret (a literal header, an environment variable)
// shorter than this is not masked at all: it hides nothing.
const MinValueLen = 4

// Credentials lists what one request carried that a server may echo: the
// secrets and header values it sent and the forms it sent them in (a Basic
// value, a URL's user part). Scrubber compiles them into a matcher for every
// encoding a server's text may hold them in. The zero value is empty.
type Credentials struct {
	vals []credValue
}

type credValue struct {
	s string
	// secret values are masked below MinValueLen too (as whole words).
	secret bool
	// basic is a Basic value: a server may echo it in base64url or
	// without its padding.
	basic bool
}

// AddSecret records a secret sent as is: a token, a password, an API key, a
// header value read from a Secret.
func (c *Credentials) AddSecret(v string) { c.add(v, true, false) }

// AddValue records a value sent that may hold a credential but is not known
// to be one (a literal header value, an environment variable's value).
func (c *Credentials) AddValue(v string) { c.add(v, false, false) }

// AddBasic records "Authorization: Basic base64(user:password)", what
// net/http's SetBasicAuth (and with it go-git's BasicAuth) sends: the
// password and the encoded pair. The user name alone is not a secret.
func (c *Credentials) AddBasic(user, password string) {
	c.AddSecret(password)
	c.addBasicPair(user, password)
}

func (c *Credentials) addBasicPair(user, password string) {
	c.add(base64.StdEncoding.EncodeToString([]byte(user+":"+password)), true, true)
}

// AddURL records the credentials of raw's user part: those URLSecrets
// returns, and the Basic value net/http and go-git make of the user part
// (user name and password, or the user name alone: GitHub's
// https://<token>@github.com form).
func (c *Credentials) AddURL(raw string) {
	for _, s := range URLSecrets(raw) {
		c.AddSecret(s)
	}
	if !schemeRe.MatchString(raw) {
		return
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		c.addBasicPair(u.User.Username(), pw)
	}
}

// AddHeader records a header value as sent, with secret set when it came
// from a Secret: the whole value, the credential after a scheme ("Bearer
// <token>", "Basic <pair>"), the user:password pair a Basic credential
// decodes to, and the percent-decoded value, since a server may echo what
// it decoded.
func (c *Credentials) AddHeader(v string, secret bool) {
	c.add(v, secret, false)
	if d, err := url.PathUnescape(v); err == nil && d != v {
		c.add(d, secret, false)
	}
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok {
		return
	}
	cred = strings.TrimSpace(cred)
	c.add(cred, secret, false)
	if !strings.EqualFold(scheme, "Basic") {
		return
	}
	c.add(cred, secret, true)
	if b, err := base64.StdEncoding.DecodeString(cred); err == nil && utf8.Valid(b) {
		pair := string(b)
		c.add(pair, secret, false)
		if _, pw, ok := strings.Cut(pair, ":"); ok {
			c.add(pw, secret, false)
		}
	}
}

func (c *Credentials) add(v string, secret, basic bool) {
	if basic {
		v = strings.TrimRight(v, "=") // the padding hides nothing
	}
	if v == "" || (!secret && len(v) < MinValueLen) {
		return
	}
	for i, have := range c.vals {
		if have.s == v && have.basic == basic {
			c.vals[i].secret = have.secret || secret
			return
		}
	}
	c.vals = append(c.vals, credValue{s: v, secret: secret, basic: basic})
}

// Scrubber masks in a text every value of a Credentials, in any of the
// encodings a server's text may hold it in, and the user part of every URL
// (as String). It is safe for concurrent use; a nil or zero Scrubber masks
// URL user parts only.
type Scrubber struct {
	ms []*matcher
	// lookahead is the longest text one match spans.
	lookahead int
}

// Scrubber compiles the values for scrubbing. Each value is found in any mix
// of these encodings of its characters: as is; percent-encoded (either case
// of hex digits, "+" for a space, and a space for a "+" a server
// form-decoded); backslash-escaped (\" \\ \/ \' \n \r \t); as a
// JSON \uXXXX escape (characters other than letters and digits); and as an
// HTML entity (&amp; &lt; &gt; &quot; &#39;). A Basic value is also found in
// the base64url alphabet and with or without its padding.
func (c *Credentials) Scrubber() *Scrubber {
	sc := &Scrubber{}
	if c == nil {
		return sc
	}
	for _, v := range c.vals {
		m := newMatcher(v)
		sc.ms = append(sc.ms, m)
		sc.lookahead = max(sc.lookahead, m.maxLen)
	}
	return sc
}

// Lookahead is how many bytes past an excerpt's end one echo of a value can
// reach: a caller that reads a capped body for Excerpt(s, n, …) should read
// n+Lookahead bytes (more when whitespace is collapsed first), so that an
// echo starting before n is seen whole.
func (sc *Scrubber) Lookahead() int {
	if sc == nil {
		return 0
	}
	return sc.lookahead
}

// String returns s with every value and every URL user part replaced by Mask.
func (sc *Scrubber) String(s string) string { return sc.Excerpt(s, len(s), false) }

// Excerpt is String for the first n bytes of s only (cut on a character
// boundary; only s[:n+Lookahead] is read): a value whose echo starts before
// n is masked whole, even where it runs past n. Set more when s is itself
// cut from a longer text (a capped read): then text close enough to the end
// of s to be the start of a value cut off there is dropped too.
func (sc *Scrubber) Excerpt(s string, n int, more bool) string {
	keep := min(max(n, 0), len(s))
	if more {
		keep = min(keep, max(len(s)-sc.Lookahead(), 0))
	}
	for keep > 0 && keep < len(s) && !utf8.RuneStart(s[keep]) {
		keep--
	}
	var b strings.Builder
	pos := 0
	for _, sp := range sc.spans(s[:min(len(s), keep+sc.Lookahead())]) {
		if sp[0] >= keep {
			break
		}
		b.WriteString(s[pos:sp[0]])
		b.WriteString(Mask)
		pos = sp[1]
	}
	if pos < keep {
		b.WriteString(s[pos:keep])
	}
	return b.String()
}

// spans returns what to mask in s: sorted, overlapping spans merged. A span
// may be empty (an empty URL user part still shows as ***).
func (sc *Scrubber) spans(s string) [][2]int {
	var out [][2]int
	out = appendUserParts(s, out)
	if sc != nil {
		for _, m := range sc.ms {
			out = m.findAll(s, out)
		}
	}
	if len(out) < 2 {
		return out
	}
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	merged := out[:1]
	for _, sp := range out[1:] {
		last := &merged[len(merged)-1]
		// Overlapping or touching spans are one mask; an empty one stays apart.
		if sp[0] < last[1] || (sp[0] == last[1] && sp[0] > last[0] && sp[1] > sp[0]) {
			last[1] = max(last[1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// Error returns err with its message scrubbed by String; errors.Is and
// errors.As still see the original chain. It returns err itself when there
// is nothing to scrub.
func (sc *Scrubber) Error(err error) error { return sc.ErrorExcerpt(err, -1) }

// ErrorExcerpt is Error with the message cut to n bytes as Excerpt cuts (n <
// 0: no cut), for errors that carry a server's text of any length.
func (sc *Scrubber) ErrorExcerpt(err error, n int) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if n < 0 {
		n = len(msg)
	}
	clean := sc.Excerpt(msg, n, false)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// appendUserParts appends the user part of every "scheme://userinfo@" in
// free text: from after "://" to the last "@" before the path. A scheme is
// a letter and then letters, digits, "+", "." or "-"; the user part cannot
// hold white space, quotes or a backslash (which end a quoted URL in an
// error message).
func appendUserParts(s string, out [][2]int) [][2]int {
	done := 0 // the end of the last user part: URLs do not overlap
	for k := 0; ; {
		i := strings.Index(s[k:], "://")
		if i < 0 {
			return out
		}
		k += i
		start := k
		for start > done && isSchemeByte(s[start-1]) {
			start--
		}
		for start < k && !isASCIILetter(s[start]) {
			start++
		}
		from, at := k+len("://"), -1
		for j := from; j < len(s) && !strings.ContainsRune(" \t\n\f\r/?#\"<>\\`", rune(s[j])); j++ {
			if s[j] == '@' {
				at = j
			}
		}
		if start == k || at < 0 {
			k++
			continue
		}
		out = append(out, [2]int{from, at})
		done, k = at+1, at+1
	}
}

func isSchemeByte(c byte) bool {
	return isASCIILetter(c) || (c >= '0' && c <= '9') || c == '+' || c == '.' || c == '-'
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// matcher finds one value in any of its encodings: a sequence of
// characters, each of which may be written in any of its encodings. It
// backtracks where encodings overlap ("%" and "%25", "&" and "&amp;").
type matcher struct {
	chars [][]encoding
	// padding is the encodings of "=", of which up to two may follow (a
	// Basic value's padding).
	padding []encoding
	// bounded: a short secret is masked only as a whole word, so "1" is
	// masked in "pin 1" but not in "HTTP 401". The check applies where the
	// first and last characters are written as is and are word characters.
	bounded bool
	// first marks the bytes a match can start with.
	first [256]bool
	// maxLen is the longest text a match spans.
	maxLen int
}

// encoding is one way of writing a character; fold: in either case (hex
// digits, entity names).
type encoding struct {
	s    string
	fold bool
}

func (e encoding) at(s string, p int) bool {
	if len(s)-p < len(e.s) {
		return false
	}
	if e.fold {
		return strings.EqualFold(s[p:p+len(e.s)], e.s)
	}
	return s[p:p+len(e.s)] == e.s
}

func newMatcher(v credValue) *matcher {
	m := &matcher{bounded: len(v.s) < MinValueLen}
	for i, w := 0, 0; i < len(v.s); i += w {
		var r rune
		r, w = utf8.DecodeRuneInString(v.s[i:])
		encs := charEncodings(r, v.s[i:i+w])
		if alt, ok := base64URL[r]; ok && v.basic {
			encs = slices.Concat(encs, asciiEncodings[alt])
		}
		m.chars = append(m.chars, encs)
		longest := 0
		for _, e := range encs {
			longest = max(longest, len(e.s))
		}
		m.maxLen += longest
	}
	if v.basic {
		// Padding hides nothing; masked with the value, none is left over.
		m.padding = asciiEncodings['=']
		m.maxLen += 2 * 6
	}
	for _, e := range m.chars[0] {
		m.first[e.s[0]] = true
		if e.fold {
			m.first[lowerASCII(e.s[0])], m.first[upperASCII(e.s[0])] = true, true
		}
	}
	return m
}

// findAll appends the spans of s that are the value.
func (m *matcher) findAll(s string, out [][2]int) [][2]int {
	var failed map[[2]int]bool
	for p := 0; p < len(s); p++ {
		if !m.first[s[p]] {
			continue
		}
		if end := m.match(s, 0, p, false, &failed); end >= 0 {
			out = append(out, [2]int{p, end})
			p = end - 1
		}
	}
	return out
}

// match returns where the value's characters from i on, written from p on,
// end; -1 if they are not there. Where two encodings of a character both
// fit (revisit), later states can be reached twice: failed remembers those
// tried in vain, which keeps the work within characters × positions.
func (m *matcher) match(s string, i, p int, revisit bool, failed *map[[2]int]bool) int {
	if i == len(m.chars) {
		for range 2 {
			for _, e := range m.padding {
				if e.at(s, p) {
					p += len(e.s)
					break
				}
			}
		}
		return p
	}
	if revisit && (*failed)[[2]int{i, p}] {
		return -1
	}
	fits := 0
	for j := range m.chars[i] {
		if m.fits(s, i, j, p) {
			fits++
		}
	}
	for j, e := range m.chars[i] {
		if !m.fits(s, i, j, p) {
			continue
		}
		if end := m.match(s, i+1, p+len(e.s), revisit || fits > 1, failed); end >= 0 {
			return end
		}
	}
	if revisit {
		if *failed == nil {
			*failed = map[[2]int]bool{}
		}
		(*failed)[[2]int{i, p}] = true
	}
	return -1
}

// fits says whether encoding j of character i is written at p.
func (m *matcher) fits(s string, i, j, p int) bool {
	e := m.chars[i][j]
	if !e.at(s, p) {
		return false
	}
	if j > 0 || !m.bounded {
		return true
	}
	end := p + len(e.s)
	return !(i == 0 && p > 0 && isWordByte(s[p-1]) && isWordByte(s[p])) &&
		!(i == len(m.chars)-1 && end < len(s) && isWordByte(s[end]) && isWordByte(s[end-1]))
}

// base64URL maps the characters of the standard base64 alphabet that
// base64url writes differently.
var base64URL = map[rune]rune{'+': '-', '/': '_'}

// asciiEncodings are the encodings of the ASCII characters, made once:
// values are mostly ASCII.
var asciiEncodings = func() (t [utf8.RuneSelf][]encoding) {
	for c := range t {
		t[c] = encodings(rune(c), string(rune(c)))
	}
	return t
}()

// charEncodings are the encodings of one character of a value (raw: its
// bytes there); the shared table's for ASCII, which callers must not modify.
func charEncodings(r rune, raw string) []encoding {
	if len(raw) == 1 && raw[0] < utf8.RuneSelf {
		return asciiEncodings[raw[0]]
	}
	return encodings(r, raw)
}

// encodings are the ways of writing one character (raw: its bytes in the
// value); the first is the character as is.
func encodings(r rune, raw string) []encoding {
	out := []encoding{{s: raw}}
	var pct strings.Builder
	for i := 0; i < len(raw); i++ {
		pct.WriteString("%" + hexByte(raw[i]))
	}
	out = append(out, encoding{s: pct.String(), fold: true})
	switch r {
	case ' ':
		out = append(out, encoding{s: "+"})
	case '+':
		out = append(out, encoding{s: " "}) // form decoding
	}
	if !isWordByte(raw[0]) && r < 0x10000 && !(r == utf8.RuneError && len(raw) == 1) {
		out = append(out, encoding{s: `\u` + hexByte(byte(r>>8)) + hexByte(byte(r)), fold: true})
	}
	switch r {
	case '"', '\\', '/', '\'':
		out = append(out, encoding{s: `\` + string(r)})
	case '\n':
		out = append(out, encoding{s: `\n`})
	case '\r':
		out = append(out, encoding{s: `\r`})
	case '\t':
		out = append(out, encoding{s: `\t`})
	}
	for _, ent := range entities[r] {
		out = append(out, encoding{s: ent, fold: true})
	}
	return out
}

// entities are the HTML entities of the characters HTML escapes.
var entities = map[rune][]string{
	'&':  {"&amp;", "&#38;"},
	'<':  {"&lt;", "&#60;"},
	'>':  {"&gt;", "&#62;"},
	'"':  {"&quot;", "&#34;"},
	'\'': {"&#39;", "&#x27;", "&apos;"},
}

func hexByte(b byte) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[b>>4], digits[b&15]})
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upperASCII(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
