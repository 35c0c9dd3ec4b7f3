package secrets

import (
	"math"
	"strings"
)

// tier says which values of a name are masked.
type tier uint8

const (
	tierNone    tier = iota
	tierEntropy      // random-looking values only (key=, auth=)
	tierAny          // any value but a placeholder (password=, token=)
)

// Minimum lengths of a masked assigned value: shorter ones are flags,
// counts and examples ("token: abc"), and a mask of many short values
// would garble the text.
const (
	minPassword = 4
	minAssigned = 6
	// minEntropyLen is the shortest value the entropy rule considers; the
	// Shannon entropy of shorter strings says little.
	minEntropyLen = 16
	// minEntropy is in bits per character: random base64 or alphanumeric
	// values of 16 or more characters score 3.6 to 5, hex digests 3.6 to
	// 4, identifiers and words made of few letters less.
	minEntropy = 3.5
	// maxQuoted bounds the search for a closing quote, and the values the
	// placeholder and entropy rules look at.
	maxQuoted = 4 << 10
	// maxHeader bounds an unquoted header value, as HTTP servers bound a
	// header line (8 KiB).
	maxHeader = 8 << 10
)

// named looks after the word s[i:j] for what names a secret: a URL's user
// information ("://"), an Authorization header, a bare "Bearer" token, a
// --flag, an XML element or an assignment (=, :, :=, =>).
func (sc *scanner) named(i, j int) {
	s := sc.s
	w := s[i:j]
	switch {
	case s[j] == ':' && strings.HasPrefix(s[j:], "://"):
		sc.urlPassword(j + 3)
		return
	case s[j] == '>':
		// <password>value</password>, closed on the same line.
		if i > 0 && s[i-1] == '<' {
			if r, t := classifyKey(w); t != tierNone {
				e := j + 1 + strings.IndexByte(s[j+1:min(len(s), j+1+maxQuoted)], '<')
				if e > j && strings.IndexByte(s[j+1:e], '\n') < 0 && strings.HasPrefix(s[e:], "</") &&
					strings.HasPrefix(s[e+2:], w) && strings.HasPrefix(s[e+2+len(w):], ">") {
					sc.assigned(r, t, j+1, e, true)
				}
			}
		}
		return
	case s[j] == ' ' && len(w) == 6 && strings.EqualFold(w, "bearer"):
		sc.bearer(j + 1)
		return
	case (s[j] == ' ' || s[j] == '=') && (w == "-u" || w == "--user"):
		// curl -u user:password: the password is after the first ':'.
		vs, ve, quoted := sc.valueAt(j + 1)
		if c := strings.IndexByte(s[vs:ve], ':'); c > 0 && !all(s[vs+c+1:ve], isDigit) {
			sc.assigned(rPassword, tierAny, vs+c+1, ve, quoted)
		}
		return
	case s[j] == ' ' && len(w) > 2 && w[0] == '-' && w[1] == '-':
		if r, t := classifyKey(w[2:]); t != tierNone && j+1 < len(s) && s[j+1] != '-' {
			vs, ve, quoted := sc.valueAt(j + 1)
			sc.assigned(r, t, vs, ve, quoted)
		}
		return
	}
	auth := isAuthorizationName(w)
	if !auth && !keyEnding(w) || i > 0 && s[i-1] == '/' {
		return // not a name, or the end of a path ("/etc/passwd":)
	}
	v := separatorEnd(s, j)
	if v < 0 {
		return
	}
	if auth {
		sc.authorization(i, v)
		return
	}
	if r, t := classifyKey(w); t != tierNone {
		vs, ve, quoted := sc.valueAt(v)
		sc.assigned(r, t, vs, ve, quoted)
	}
}

// assigned masks s[vs:ve], the value of a name of rule r and tier t.
func (sc *scanner) assigned(r ruleID, t tier, vs, ve int, quoted bool) {
	if r, ok := assignedSecret(r, t, sc.s[vs:ve], sc.s[ve:], quoted); ok {
		sc.addValue(vs, ve, r)
	}
}

// addValue adds the span of a masked value. The scan goes on inside a
// short value, where a provider's format names the mask ("token=ghp_…"
// reads [secret:github-token]), and skips a long one, so that the names
// in it (password=password=…) cost nothing.
func (sc *scanner) addValue(vs, ve int, r ruleID) {
	sc.add(vs, ve, r)
	if ve-vs > 256 {
		sc.resume = max(sc.resume, ve)
	}
}

// separatorEnd returns where the value starts after the name ending at
// s[j]: past a closing quote of the name, "=", ":", ":=" or "=>", and the
// blanks around them; -1 when no assignment follows ("==", "::", "://").
func separatorEnd(s string, j int) int {
	switch {
	case j < len(s) && (s[j] == '"' || s[j] == '\''):
		j++
	case strings.HasPrefix(s[j:], `\"`):
		j += 2
	}
	for n := 0; n < 4 && j < len(s) && isSpace(s[j]); n++ {
		j++
	}
	if j >= len(s) {
		return -1
	}
	next := byte(0)
	if j+1 < len(s) {
		next = s[j+1]
	}
	switch s[j] {
	case '=':
		switch next {
		case '=', '~':
			return -1
		case '>':
			j++
		}
	case ':':
		switch next {
		case ':', '/':
			return -1
		case '=':
			j++
		}
	default:
		return -1
	}
	j++
	for n := 0; n < 8 && j < len(s) && isSpace(s[j]); n++ {
		j++
	}
	return j
}

// valueAt returns the value starting at s[v]: the inside of a quoted string
// (", ', `, or \" in escaped JSON) closed on the same line within
// maxQuoted, or else a bare value (bareEnd) less trailing punctuation.
func (sc *scanner) valueAt(v int) (vs, ve int, quoted bool) {
	s := sc.s
	if v >= len(s) {
		return v, v, false
	}
	lim := min(len(s), v+maxQuoted)
	switch q := s[v]; {
	case isQuote(q):
		if e := closingQuote(s[v+1:lim], q); e >= 0 {
			return v + 1, v + 1 + e, true
		}
		v++
	case q == '\\' && v+1 < len(s) && s[v+1] == '"':
		line := s[v+2 : lim]
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl]
		}
		if e := strings.Index(line, `\"`); e >= 0 {
			return v + 2, v + 2 + e, true
		}
		v += 2
	}
	e := sc.bareEnd(v)
	for e > v && strings.IndexByte(".,;:)]}>", s[e-1]) >= 0 {
		e--
	}
	return v, e, false
}

// closingQuote returns the index in s of the quote q that closes a string
// opened before s, on the same line; a backslash escapes a double quote or
// backquote. -1 when there is none.
func closingQuote(s string, q byte) int {
	for off := 0; ; {
		k := strings.IndexByte(s[off:], q)
		if k < 0 {
			return -1
		}
		k += off
		if strings.IndexByte(s[off:k], '\n') >= 0 || strings.IndexByte(s[off:k], '\r') >= 0 {
			return -1
		}
		if q != '\'' {
			b := k
			for b > 0 && s[b-1] == '\\' {
				b--
			}
			if (k-b)%2 == 1 {
				off = k + 1
				continue
			}
		}
		return k
	}
}

// bareEnd returns the end of a bare value starting at s[v]: white space, a
// quote, an escape (\n), "&", "<", or a "," or ";" that ends the value
// (listEnds). The end depends on the position only, so it is remembered:
// the values that overlap (password=password=…) cost one pass.
func (sc *scanner) bareEnd(v int) int {
	s := sc.s
	if sc.stopAt > 0 && sc.stopFrom <= v && v <= sc.stopAt {
		return sc.stopAt
	}
	e := v
loop:
	for ; e < len(s); e++ {
		switch c := s[e]; {
		case c <= ' ' || isQuote(c) || c == '&' || c == '<' || c == 0x7f:
			break loop
		case c == '\\' && e+1 < len(s) && strings.IndexByte(`nrt"'\`, s[e+1]) >= 0:
			break loop
		case (c == ',' || c == ';') && listEnds(s, e+1):
			break loop
		}
	}
	sc.stopFrom, sc.stopAt = v, e
	return e
}

// listEnds reports whether a "," or ";" before s[k] ends a bare value: white
// space or the end follows, or another name= (";EndpointSuffix=…").
func listEnds(s string, k int) bool {
	if k >= len(s) || s[k] <= ' ' {
		return true
	}
	e := k
	for e < len(s) && e-k < 64 && isWordOrDot(s[e]) {
		e++
	}
	return e > k && e < len(s) && (s[e] == '=' || s[e] == ':')
}

// assignedSecret decides whether v, assigned to a name of rule r and tier t
// and followed by rest, is a secret, and under which rule.
func assignedSecret(r ruleID, t tier, v, rest string, quoted bool) (ruleID, bool) {
	if len(v) > maxQuoted {
		// Too long for a placeholder or a key of the entropy rule: what a
		// credential's name is given, masked without looking further.
		return r, t == tierAny && !placeholderStart(v)
	}
	if placeholder(v, quoted) || !quoted && prose(v, rest) {
		return r, false
	}
	switch t {
	case tierAny:
		if len(v) < minAssigned && (r != rPassword || len(v) < minPassword) {
			return r, false
		}
		if r == rAWSSecretKey && (len(v) != 40 || !all(v, isB64)) {
			return rAPIKey, true
		}
		return r, true
	case tierEntropy:
		return rHighEntropy, highEntropy(v)
	}
	return r, false
}

// placeholder reports a value that stands for a secret without being one:
// empty, masked ("[secret:…]", "***", "<redacted>"), elided ("…"), a
// variable, template or format verb ("$X", "${X}", "%X%", "%s", "{{ x }}",
// "<your token>"), a repeated character ("xxxx"), a word such as null,
// true or password, "your_token_here", a sentence of six words or more,
// or unquoted code ("os.getenv(…)", "cfg.Token", "corev1.Secret{").
func placeholder(v string, quoted bool) bool {
	if placeholderStart(v) || strings.Contains(v, maskPrefix) || strings.Contains(v, "***") ||
		strings.Contains(v, "…") || strings.Contains(v, "...") {
		return true
	}
	if strings.Count(v, v[:1]) == len(v) || strings.Count(v, " ") >= 5 {
		return true
	}
	if len(v) <= 64 && (oneOfFold(v, placeholderWords) || containsFold(v, "redacted") || hasPrefixFold(v, "your")) {
		return true
	}
	if !quoted && (strings.ContainsAny(v, "()[]{}") || dottedIdentifier(v)) {
		return true
	}
	return false
}

// placeholderStart reports an empty value or one that starts as a
// variable, template, list or format verb does ("$", "{", "<", "[", "(",
// "%s").
func placeholderStart(v string) bool {
	if len(v) == 0 {
		return true
	}
	switch v[0] {
	case '$', '{', '<', '[', '(':
		return true
	case '%':
		return len(v) > 1 && isLetter(v[1])
	}
	return false
}

// prose reports a bare word of letters followed by a lower-case word:
// "password: must be 8 characters", "Secret: Update says why" are
// sentences, not passwords.
func prose(v, rest string) bool {
	if !all(v, isLetter) || len(rest) < 3 || rest[0] != ' ' {
		return false
	}
	e := 1
	for e < len(rest) && isLower(rest[e]) {
		e++
	}
	return e >= 3 && (e == len(rest) || !wordByte[rest[e]])
}

// dottedIdentifier reports code such as "config.token", "o.Password" or
// "process.env.API_KEY": identifiers joined by dots, the first lower-case.
func dottedIdentifier(v string) bool {
	if !isLower(v[0]) || !strings.Contains(v, ".") {
		return false
	}
	for part := range strings.SplitSeq(v, ".") {
		if len(part) == 0 || isDigit(part[0]) || !all(part, isIdentByte) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return isLower(c) || isUpper(c) }

func isIdentByte(c byte) bool { return isAlnum(c) || c == '_' }

// highEntropy reports a value that looks generated: at least
// minEntropyLen key characters mixing letters and digits, not a UUID, with
// a run of at least 12 between separators (so not a name like
// "eu-west-1-orders-cache-v2"), and a Shannon entropy of at least
// minEntropy bits per character.
func highEntropy(v string) bool {
	if len(v) < minEntropyLen || len(v) > maxQuoted || isUUID(v) {
		return false
	}
	var letter, digit bool
	run, longest := 0, 0
	var counts [256]uint16
	var seen [256]byte
	distinct := 0
	for k := 0; k < len(v); k++ {
		c := v[k]
		if !tokenByte[c] && c != '%' { // '%': percent-encoded base64 (sig=…%2B…)
			return false
		}
		if counts[c] == 0 {
			seen[distinct] = c
			distinct++
		}
		counts[c]++
		switch {
		case isDigit(c):
			digit = true
		case isLower(c) || isUpper(c):
			letter = true
		}
		if strings.IndexByte("-_./~", c) >= 0 {
			run = 0
		} else {
			run++
			longest = max(longest, run)
		}
	}
	if !letter || !digit || longest < 12 {
		return false
	}
	sum := 0.0
	for _, c := range seen[:distinct] {
		sum += cLog2C(int(counts[c]))
	}
	return entropy(sum, len(v)) >= minEntropy
}

// entropy is the Shannon entropy, in bits per byte, of n bytes whose
// counts c add up to sum = Σ c·log2(c): log2(n) - sum/n.
func entropy(sum float64, n int) float64 {
	return math.Log2(float64(n)) - sum/float64(n)
}

// cLog2CTable holds c·log2(c) for the counts most values have.
var cLog2CTable = func() (t [257]float64) {
	for c := 2; c < len(t); c++ {
		t[c] = float64(c) * math.Log2(float64(c))
	}
	return t
}()

func cLog2C(c int) float64 {
	if c < len(cLog2CTable) {
		return cLog2CTable[c]
	}
	return float64(c) * math.Log2(float64(c))
}

// isUUID reports the 8-4-4-4-12 hex form of RFC 9562.
func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for k := 0; k < len(v); k++ {
		if k == 8 || k == 13 || k == 18 || k == 23 {
			if v[k] != '-' {
				return false
			}
		} else if !isHex(v[k]) {
			return false
		}
	}
	return true
}

// classifyKey tells what a name says of its value, from its last words
// (split at _, -, . and camelCase): password, passwd, pwd, passphrase and
// a qualified pass are passwords; *token a token (not max_tokens or
// token_count: the last word decides); *secret and *credentials a secret;
// api_key, access_key, secret_key, private_key… an API key, AccountKey and
// SharedAccessKey Azure's, an AWS secret key name AWS's. Those mask any
// value but a placeholder. A bare key, auth, pass or sig, and other *_key
// names, mask random-looking values only.
func classifyKey(key string) (ruleID, tier) {
	if len(key) > 64 || !keyEnding(key) {
		return 0, tierNone
	}
	var w [4]string
	n := lastWords(key, &w)
	if n == 0 {
		return 0, tierNone
	}
	prev := ""
	if n > 1 {
		prev = w[1]
	}
	var buf [24]byte
	if len(w[0]) > len(buf) {
		return 0, tierNone
	}
	last := lowerInto(&buf, w[0])
	if n == 1 {
		// One word of one case: PGPASSWORD, githubtoken, CLIENTSECRET.
		for _, suffix := range []string{"password", "passwd", "token", "secret", "apikey"} {
			if len(last) > len(suffix) && strings.HasSuffix(last, suffix) {
				last = suffix
				break
			}
		}
	}
	switch last {
	case "password", "passwd", "passphrase":
		return rPassword, tierAny
	case "pwd":
		if n == 1 { // the shell's working directory
			return 0, tierNone
		}
		return rPassword, tierAny
	case "pass":
		if n == 1 {
			return rHighEntropy, tierEntropy
		}
		return rPassword, tierAny
	case "token":
		if oneOfFold(prev, countWords) {
			return 0, tierNone
		}
		return rToken, tierAny
	case "secret", "credential", "credentials", "creds":
		return rSecret, tierAny
	case "apikey":
		return rAPIKey, tierAny
	case "key":
		return classifyKeyName(w[:n])
	case "base":
		if n >= 3 && strings.EqualFold(prev, "key") && strings.EqualFold(w[2], "secret") { // Rails' secret_key_base
			return rSecret, tierAny
		}
	case "auth", "sig":
		return rHighEntropy, tierEntropy
	}
	return 0, tierNone
}

// lowerInto returns w in lower case, written into buf (len(w) <= len(buf)).
func lowerInto(buf *[24]byte, w string) string {
	for k := 0; k < len(w); k++ {
		buf[k] = w[k]
		if isUpper(w[k]) {
			buf[k] += 'a' - 'A'
		}
	}
	return string(buf[:len(w)])
}

// keyEnding reports whether key can end in one of the words classifyKey
// looks for: most names are rejected here, before they are split into words.
func keyEnding(key string) bool {
	if len(key) < 3 {
		return false
	}
	switch uint16(key[len(key)-2]|0x20)<<8 | uint16(key[len(key)-1]|0x20) {
	case 'r'<<8 | 'd', 'w'<<8 | 'd', 's'<<8 | 'e', 's'<<8 | 's', 'e'<<8 | 'n', 'e'<<8 | 't', 'a'<<8 | 'l',
		'l'<<8 | 's', 'd'<<8 | 's', 'e'<<8 | 'y', 't'<<8 | 'h', 'i'<<8 | 'g':
		return true
	}
	return false
}

// classifyKeyName classifies a name ending in "key", its words last first.
func classifyKeyName(w []string) (ruleID, tier) {
	if len(w) == 1 {
		return rHighEntropy, tierEntropy
	}
	eq := strings.EqualFold
	prev := w[1]
	has := func(word string) bool {
		for _, x := range w {
			if eq(x, word) {
				return true
			}
		}
		return false
	}
	switch {
	case has("aws") && has("secret"), eq(prev, "access") && len(w) >= 3 && eq(w[2], "secret"):
		return rAWSSecretKey, tierAny
	case eq(prev, "account") && len(w) == 2:
		return rAzureStorageKey, tierAny
	case eq(prev, "access") && len(w) == 3 && eq(w[2], "shared"):
		return rAzureSharedAccessKey, tierAny
	case eq(prev, "public"):
		return 0, tierNone
	}
	if oneOfFold(prev, keyQualifiers) {
		return rAPIKey, tierAny
	}
	return rHighEntropy, tierEntropy
}

// lastWords puts the last words of key, last first, into w and returns
// their number. Words are split at '_', '-', '.' and camelCase
// ("SecretAccessKey", "APIKey").
func lastWords(key string, w *[4]string) int {
	n, end := 0, len(key)
	for end > 0 && n < len(w) {
		for end > 0 && (key[end-1] == '_' || key[end-1] == '-' || key[end-1] == '.') {
			end--
		}
		if end == 0 {
			break
		}
		start := end - 1
		for start > 0 {
			c, cur := key[start-1], key[start]
			if c == '_' || c == '-' || c == '.' {
				break
			}
			if isUpper(cur) && (isLower(c) || isDigit(c)) ||
				isUpper(cur) && isUpper(c) && start+1 < end && isLower(key[start+1]) {
				break
			}
			start--
		}
		w[n] = key[start:end]
		n++
		end = start
	}
	return n
}

// isAuthorizationName reports an HTTP Authorization or
// Proxy-Authorization header name (also HTTP_AUTHORIZATION).
func isAuthorizationName(w string) bool {
	const a = "authorization"
	if len(w) < len(a) || w[len(w)-1]|0x20 != 'n' || !strings.EqualFold(w[len(w)-len(a):], a) {
		return false
	}
	return len(w) == len(a) || w[len(w)-len(a)-1] == '-' || w[len(w)-len(a)-1] == '_'
}

// authorization masks the credentials of an Authorization header whose name
// starts at s[i] and whose value starts at s[v]: all of the value after the
// scheme (Bearer, Basic, Digest…), which stays. Unquoted, a header value
// runs to the line's end.
func (sc *scanner) authorization(i, v int) {
	s := sc.s
	vs, ve, quoted := v, v, false
	if v < len(s) && (isQuote(s[v]) || strings.HasPrefix(s[v:], `\"`)) {
		vs, ve, quoted = sc.valueAt(v)
	}
	if !quoted {
		// To the line's end, or to the quote that opened the header
		// ("-H 'Authorization: Bearer x'").
		var open byte
		if i > 0 && isQuote(s[i-1]) {
			open = s[i-1]
		}
		lim := min(len(s), vs+maxHeader)
		for ve < lim && !isLineEnd(s[ve]) && s[ve] != open &&
			!(s[ve] == '\\' && ve+1 < len(s) && strings.IndexByte(`nr"`, s[ve+1]) >= 0) {
			ve++
		}
		for ve > vs && (isSpace(s[ve-1]) || s[ve-1] == '\\') {
			ve--
		}
	}
	cred := vs
	if e := wordRun(s, vs); e > vs && e < ve && s[e] == ' ' {
		cred = e
		for cred < ve && s[cred] == ' ' {
			cred++
		}
	}
	first := cred
	for first < ve && s[first] != ' ' {
		first++
	}
	if ve-cred < 8 || !tokenByte[s[cred]] || placeholder(s[cred:ve], quoted) || prose(s[cred:first], s[first:ve]) {
		return
	}
	sc.addValue(cred, ve, rAuthorization)
}

// bearer masks a bare bearer token at s[p:]: 16 or more token68 characters
// with a digit ("Bearer 7fQ…" in a log line, without its header name).
func (sc *scanner) bearer(p int) {
	s := sc.s
	e := p
	for e < len(s) && (tokenByte[s[e]]) {
		e++
	}
	if e-p < 16 || strings.IndexAny(s[p:e], "0123456789") < 0 || strings.HasPrefix(s[p:], maskPrefix) {
		return
	}
	sc.add(p, e, rAuthorization)
}

// urlPassword masks the password of a URL whose authority starts at s[a]:
// "scheme://user:PASSWORD@host". The user, host and the rest stay. The
// authority ends at '/', '?', white space, a quote or a bracket of text;
// the user information at its last '@', as URL parsers end it. Unlike a
// URL parser, a '#' does not end it: people write passwords with '#'
// unescaped, and a fragment before an '@' is rare.
func (sc *scanner) urlPassword(a int) {
	s := sc.s
	e := a
	for e < len(s) && e-a < 1024 {
		c := s[e]
		if c <= ' ' || strings.IndexByte("/?\"'`<>\\", c) >= 0 {
			break
		}
		e++
	}
	at := strings.LastIndexByte(s[a:e], '@')
	if at < 0 {
		return
	}
	userinfo := s[a : a+at]
	colon := strings.IndexByte(userinfo, ':')
	if colon < 0 || strings.Contains(userinfo, maskPrefix) {
		return // no password, or masked already (a mask has a ':')
	}
	pw := s[a+colon+1 : a+at]
	if placeholder(pw, true) {
		return
	}
	sc.add(a+colon+1, a+at, rURLPassword)
}

var (
	// placeholderWords are values that stand for a secret in examples,
	// schemas and redacted output.
	placeholderWords = []string{"null", "nil", "none", "true", "false", "yes", "no", "on", "off",
		"undefined", "empty", "required", "optional", "string", "str", "int", "integer", "bool",
		"boolean", "number", "object", "secret", "password", "passwd", "token", "example",
		"placeholder", "value", "todo", "tbd", "n/a", "unset", "default", "hidden", "masked",
		"pass", "pwd", "key", "apikey", "api_key"}
	// countWords before "token" make a count of tokens (max_token).
	countWords = []string{"max", "min", "num", "total", "count"}
	// keyQualifiers before "key" make a credential's name (api_key,
	// signing_key); other *_key names (cache_key, sort_key) are checked
	// for random-looking values only.
	keyQualifiers = []string{"api", "access", "secret", "private", "signing", "encryption", "master",
		"client", "app", "application", "account", "consumer", "subscription", "admin", "service", "license",
		"session", "shared", "storage", "webhook", "auth", "deploy", "root", "hmac", "jwt"}
)

// oneOfFold reports whether s equals one of words, ignoring case.
func oneOfFold(s string, words []string) bool {
	for _, w := range words {
		if len(s) == len(w) && strings.EqualFold(s, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring case.
func containsFold(s, sub string) bool {
	for k := 0; k+len(sub) <= len(s); k++ {
		if s[k]|0x20 == sub[0] && strings.EqualFold(s[k:k+len(sub)], sub) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
