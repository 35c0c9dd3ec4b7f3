package secrets

import (
	"slices"
	"strings"
)

// span is a range of the text to mask and the rule that found it.
type span struct {
	start, end int
	rule       ruleID
}

// Character classes, indexed by byte.
var (
	// minProviderLen is, for the first byte of a word, the length of the
	// shortest provider format starting with it; 0 when none does.
	minProviderLen [256]uint8
	// afterWord is a byte after a word that may make it a name (mayName);
	// afterBlank one after a blank that may (" = ", "  :").
	afterWord, afterBlank [256]bool
	// wordByte is a character of a word: the anchors and most tokens
	// are made of these, so the scan looks at each word once, at its start.
	wordByte [256]bool
	// b64Byte is a character of standard base64.
	b64Byte [256]bool
	// tokenByte is a character of the values keys and tokens use: base64,
	// base64url, hex, and the separators of generated identifiers.
	tokenByte [256]bool
)

func init() {
	for c := 0; c < 256; c++ {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		wordByte[c] = alnum || c == '_' || c == '-'
		b64Byte[c] = alnum || c == '+' || c == '/' || c == '='
		tokenByte[c] = alnum || strings.IndexByte("+/=_.~-", byte(c)) >= 0
	}
	for _, c := range []byte(":=\"'\\> \t") {
		afterWord[c] = true
	}
	for _, c := range []byte(" \t=:") {
		afterBlank[c] = true
	}
	for c, n := range map[byte]uint8{
		'A': 20, 'b': 9, 'e': 15, 'g': 25, 'h': 5, 'n': 40, 'p': 58, 'r': 24, 's': 24, 'w': 30,
		'x': 15, 'G': 31, 'M': 24, 'N': 24, 'O': 24, 'S': 2, '-': 10,
		'0': 4, '1': 4, '2': 4, '3': 4, '4': 4, '5': 4, '6': 4, '7': 4, '8': 4, '9': 4,
	} {
		minProviderLen[c] = n
	}
}

// scanner holds one scan of a text. Its first spans are kept in an array,
// so that a scan finding nothing allocates nothing (an append through a
// pointer would move them to the heap).
type scanner struct {
	s     string
	n     int
	first [8]span
	more  []span
	// stopFrom, stopAt: no bare value starting in [stopFrom, stopAt) ends
	// before stopAt (bareEnd).
	stopFrom, stopAt int
	// endFrom, endAt: the first "-----END " at or after endFrom is at
	// endAt, -1 when there is none (pemEnd).
	endFrom, endAt int
	// resume is where the scan goes on after a long masked value.
	resume int
}

func (sc *scanner) add(start, end int, r ruleID) {
	if end <= start {
		return
	}
	if sc.n < len(sc.first) {
		sc.first[sc.n] = span{start, end, r}
		sc.n++
		return
	}
	sc.more = append(sc.more, span{start, end, r})
}

// scan returns the spans to mask in s, unsorted and possibly overlapping
// (settle orders them), or nil.
func scan(s string) []span {
	var sc scanner
	sc.s = s
	sc.endFrom = -1
	n := len(s)
	for i := 0; i < n; {
		c := s[i]
		if !wordByte[c] {
			i++
			continue
		}
		j := i + 1
		for j < n && wordByte[s[j]] {
			j++
		}
		// Most words start no provider format, follow no '[' (a mask) or
		// '\' (an escape) and precede no separator: they cost this test.
		switch {
		case i > 0 && (s[i-1] == '[' || s[i-1] == '\\'):
			i = sc.word(i, j)
		case minProviderLen[c] != 0 && j-i >= int(minProviderLen[c]) ||
			j < n && afterWord[s[j]] && (s[j] != ' ' || j-i == 6 || c == '-' || j+1 < n && afterBlank[s[j+1]]) && mayName(s, i, j):
			i, _ = sc.at(i, j)
		default:
			i = j
		}
	}
	if sc.n == 0 {
		return nil
	}
	out := make([]span, 0, sc.n+len(sc.more))
	out = append(out, sc.first[:sc.n]...)
	return append(out, sc.more...)
}

// word looks at the word s[i:j] and returns where the scan goes on.
func (sc *scanner) word(i, j int) int {
	s := sc.s
	c := s[i]
	// A mask of an earlier pass is skipped whole: masking is idempotent.
	if c == 's' && i > 0 && s[i-1] == '[' {
		if e := maskEnd(s, i-1); e > 0 {
			return e
		}
	}
	// "\nAKIA…", "\tpassword=…": text escaped for JSON or a shell; the
	// word proper starts after the escape's letter.
	if i > 0 && s[i-1] == '\\' && j-i > 1 && (c == 'n' || c == 'r' || c == 't') {
		if next, ok := sc.at(i+1, j); ok {
			return next
		}
	}
	next, _ := sc.at(i, j)
	return next
}

// at runs the rules anchored at the word s[i:j]. It returns where the scan
// goes on and whether a rule consumed the word.
func (sc *scanner) at(i, j int) (int, bool) {
	if e := sc.provider(i, j); e > 0 {
		return e, true
	}
	if j < len(sc.s) && mayName(sc.s, i, j) {
		sc.named(i, j)
	}
	return max(j, sc.resume), false
}

// mayName reports whether what follows the word s[i:j] may make it a name
// of a secret: a separator, a quote or escape before one, "://", "<name>",
// or a blank after "Bearer", a --flag or before " = ".
func mayName(s string, i, j int) bool {
	switch s[j] {
	case ':':
		if j+2 < len(s) && s[j+1] == '/' && s[j+2] == '/' {
			return true
		}
	case ' ':
		if j-i == 6 || s[i] == '-' {
			return true
		}
	case '=':
		if s[i] == '-' { // --user=…
			return true
		}
	case '>':
		return i > 0 && s[i-1] == '<'
	}
	if w := s[i:j]; !keyEnding(w) && !isAuthorizationName(w) {
		return false
	}
	switch s[j] {
	case ':', '=':
		return true
	case '"', '\'', '\\':
		// The closing quote of a JSON or Python key ("password": …), not
		// the end of a quoted value.
		k := j + 1
		if s[j] == '\\' {
			k++
		}
		c := nextNonBlank(s, k)
		return c == ':' || c == '='
	case ' ', '\t':
		c := nextNonBlank(s, j)
		return c == ':' || c == '='
	}
	return false
}

// nextNonBlank returns the first byte at or after s[j] that is not a space
// or tab, or 0.
func nextNonBlank(s string, j int) byte {
	for ; j < len(s); j++ {
		if !isSpace(s[j]) {
			return s[j]
		}
	}
	return 0
}

// maskEnd returns the end of the mask "[secret:<id>]" at s[i:], or 0.
func maskEnd(s string, i int) int {
	if !strings.HasPrefix(s[i:], maskPrefix) {
		return 0
	}
	k := i + len(maskPrefix)
	for e := k; e < len(s) && e-k <= 32; e++ {
		switch c := s[e]; {
		case c == ']':
			if e > k {
				return e + 1
			}
			return 0
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-':
		default:
			return 0
		}
	}
	return 0
}

// provider matches the provider formats that start at the word s[i:j]:
// it adds their span and returns where the scan goes on, or 0.
func (sc *scanner) provider(i, j int) int {
	s := sc.s
	w := s[i:j]
	if m := minProviderLen[w[0]]; m == 0 || len(w) < int(m) {
		return 0
	}
	r, end := numRules, 0
	switch w[0] {
	case 'A':
		switch {
		case len(w) == 20 && (strings.HasPrefix(w, "AKIA") || strings.HasPrefix(w, "ASIA") ||
			strings.HasPrefix(w, "ABIA") || strings.HasPrefix(w, "ACCA")) && all(w[4:], isUpperDigit):
			r, end = rAWSAccessKey, j
		case len(w) == 39 && strings.HasPrefix(w, "AIza"):
			r, end = rGCPAPIKey, j
		}
	case 'g':
		switch {
		case len(w) >= 40 && w[1] == 'h' && w[3] == '_' && strings.IndexByte("pousr", w[2]) >= 0 && all(w[4:], isAlnum):
			r, end = rGitHubToken, j
		case len(w) >= 51 && strings.HasPrefix(w, "github_pat_") && all(w[11:], isAlnumUnderscore):
			r, end = rGitHubToken, j
		case w[1] == 'l':
			if k := strings.IndexByte(w, '-'); k > 0 && len(w)-k-1 >= 20 && isGitLabPrefix(w[:k+1]) {
				r, end = rGitLabToken, dottedTail(s, j)
			}
		}
	case 'x':
		if len(w) >= 15 && (strings.HasPrefix(w, "xox") && strings.IndexByte("bpaerso", w[3]) >= 0 && w[4] == '-' ||
			strings.HasPrefix(w, "xapp-")) && all(w[5:], isAlnumDash) {
			r, end = rSlackToken, j
		}
	case 'h':
		switch {
		case len(w) >= 33 && strings.HasPrefix(w, "hf_") && all(w[3:], isAlnum):
			r, end = rHuggingFaceToken, j
		case w == "hooks":
			return sc.slackWebhook(j)
		}
	case 's':
		switch {
		case len(w) >= 24 && (strings.HasPrefix(w, "sk_live_") || strings.HasPrefix(w, "sk_test_")) && all(w[8:], isAlnum):
			r, end = rStripeKey, j
		case len(w) >= 39 && strings.HasPrefix(w, "sk-ant-"):
			r, end = rAnthropicKey, j
		case len(w) >= 28 && strings.HasPrefix(w, "sk-proj-"),
			len(w) >= 31 && strings.HasPrefix(w, "sk-svcacct-"),
			len(w) >= 29 && strings.HasPrefix(w, "sk-admin-"):
			r, end = rOpenAIKey, j
		case len(w) >= 35 && strings.HasPrefix(w, "sk-") && mixedCase(w[3:]):
			r, end = rOpenAIKey, j
		}
	case 'r':
		if len(w) >= 24 && (strings.HasPrefix(w, "rk_live_") || strings.HasPrefix(w, "rk_test_")) && all(w[8:], isAlnum) {
			r, end = rStripeKey, j
		}
	case 'w':
		if len(w) >= 30 && strings.HasPrefix(w, "whsec_") && all(w[6:], isAlnum) {
			r, end = rStripeKey, j
		}
	case 'S':
		switch {
		case len(w) == 34 && w[1] == 'K' && all(w[2:], isHex):
			r, end = rTwilioAPIKey, j
		case w == "SG":
			r, end = rSendGridKey, dotted(s, j, 22, 22, 43, 43)
		}
	case 'n':
		if len(w) == 40 && strings.HasPrefix(w, "npm_") && all(w[4:], isAlnum) {
			r, end = rNPMToken, j
		}
	case 'p':
		if len(w) >= 58 && strings.HasPrefix(w, "pypi-AgE") {
			r, end = rPyPIToken, j
		}
	case 'G':
		if len(w) >= 31 && strings.HasPrefix(w, "GOCSPX-") {
			r, end = rGoogleOAuthSecret, j
		}
	case 'b':
		// The Bot API's URLs: https://api.telegram.org/bot<token>/getMe.
		if strings.HasPrefix(w, "bot") {
			if e := telegramEnd(s, i+3, j); e > 0 {
				sc.add(i+3, e, rTelegramBotToken)
				return e
			}
		}
	case 'e':
		if len(w) >= 15 && strings.HasPrefix(w, "eyJ") {
			r, end = rJWT, jwtEnd(s, j)
		}
	case 'M', 'N', 'O':
		if len(w) >= 24 && len(w) <= 28 {
			r, end = rDiscordBotToken, dotted(s, j, 6, 6, 27, 40)
		}
	case '-':
		if strings.HasPrefix(s[i:], "-----BEGIN ") {
			r, end = rPrivateKey, sc.pemEnd(i)
		}
	case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if e := telegramEnd(s, i, j); e > 0 {
			r, end = rTelegramBotToken, e
		} else if i == 0 || s[i-1] != '.' && s[i-1] != '+' {
			r, end = rCardNumber, cardEnd(s, i)
		}
	}
	if end == 0 {
		return 0
	}
	sc.add(i, end, r)
	return end
}

// isGitLabPrefix reports a GitLab token prefix (GitLab docs, token prefixes).
func isGitLabPrefix(p string) bool {
	switch p {
	case "glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-":
		return true
	}
	return false
}

// dottedTail extends a token ending at j through ".part" suffixes (GitLab's
// routable tokens end in ".01.<id>").
func dottedTail(s string, j int) int {
	for n := 0; n < 4 && j+1 < len(s) && s[j] == '.' && wordByte[s[j+1]]; n++ {
		j = wordRun(s, j+1)
	}
	return j
}

// dotted matches ".<a1…a2 word bytes>.<b1…b2 word bytes>" at s[j:], the tail
// of a three-part token, and returns its end, or 0.
func dotted(s string, j, a1, a2, b1, b2 int) int {
	for _, r := range [2][2]int{{a1, a2}, {b1, b2}} {
		if j >= len(s) || s[j] != '.' {
			return 0
		}
		e := wordRun(s, j+1)
		if n := e - j - 1; n < r[0] || n > r[1] {
			return 0
		}
		j = e
	}
	return j
}

// jwtEnd matches the parts after a JWT's header ending at j: a payload of
// at least 8 base64url characters and a signature, possibly empty (and two
// more parts of a JWE). It returns the token's end, or 0.
func jwtEnd(s string, j int) int {
	if j+1 >= len(s) || s[j] != '.' {
		return 0
	}
	e := wordRun(s, j+1)
	if e-j-1 < 8 || e >= len(s) || s[e] != '.' {
		return 0
	}
	e = wordRun(s, e+1)
	for n := 0; n < 2 && e+1 < len(s) && s[e] == '.' && wordByte[s[e+1]]; n++ {
		e = wordRun(s, e+1)
	}
	return e
}

// pemEnd returns the end of the private key block whose "-----BEGIN " is at
// s[i:], or 0 when the block is not a private key (a certificate, a
// public key). Without an END line, the block ends with its base64 body.
func (sc *scanner) pemEnd(i int) int {
	const begin, dashes = "-----BEGIN ", "-----"
	s := sc.s
	k := i + len(begin)
	l := strings.Index(s[k:min(len(s), k+64)], dashes)
	if l < 0 || !all(s[k:k+l], isLabelByte) || !strings.Contains(s[k:k+l], "PRIVATE KEY") {
		return 0
	}
	body := k + l + len(dashes)
	// A 16384-bit RSA key's block is about 12 KiB; PGP blocks can be larger.
	const maxBlock = 64 << 10
	if e := sc.nextEND(body); e >= 0 && e-body <= maxBlock {
		e += len("-----END ")
		if t := strings.Index(s[e:min(len(s), e+64)], dashes); t >= 0 && strings.Contains(s[e:e+t], "PRIVATE KEY") {
			return e + t + len(dashes)
		}
	}
	// No END line of a private key (the block was cut short): its body.
	return pemBodyEnd(s, body)
}

// nextEND returns the index of the first "-----END " at or after p, or -1.
// It is remembered, so that many BEGIN lines without an END line cost one
// search of the text.
func (sc *scanner) nextEND(p int) int {
	if sc.endFrom < 0 || p < sc.endFrom || sc.endAt >= 0 && p > sc.endAt {
		sc.endFrom, sc.endAt = p, strings.Index(sc.s[p:], "-----END ")
		if sc.endAt >= 0 {
			sc.endAt += p
		}
	}
	return sc.endAt
}

// pemBodyEnd returns the end of a base64 body starting at s[p:] after a
// BEGIN line: header lines first ("Proc-Type: 4,ENCRYPTED"), then chunks of
// base64 separated by line ends (also escaped as \n), spaces or tabs. A
// chunk of under 16 characters ends the body unless a line end or the
// text's end follows it (the short last line).
func pemBodyEnd(s string, p int) int {
	end, headers := p, true
	for end < len(s) {
		q := skipPEMSpace(s, end)
		if q == end && end != p || q >= len(s) {
			break
		}
		if headers {
			if h := pemHeaderEnd(s, q); h > 0 {
				end = h
				continue
			}
		}
		c := q
		for c < len(s) && b64Byte[s[c]] {
			c++
		}
		if c == q || c-q < 16 && c < len(s) && s[c] != '\n' && s[c] != '\r' && !strings.HasPrefix(s[c:], `\n`) && !strings.HasPrefix(s[c:], `\r`) {
			break
		}
		end, headers = c, false
	}
	return end
}

func skipPEMSpace(s string, p int) int {
	for p < len(s) {
		switch {
		case s[p] == '\n' || s[p] == '\r' || s[p] == ' ' || s[p] == '\t':
			p++
		case s[p] == '\\' && p+1 < len(s) && (s[p+1] == 'n' || s[p+1] == 'r'):
			p += 2
		default:
			return p
		}
	}
	return p
}

func pemHeaderEnd(s string, p int) int {
	k := p
	for k < len(s) && (isAlnum(s[k]) || s[k] == '-') {
		k++
	}
	if k == p || !strings.HasPrefix(s[k:], ": ") {
		return 0
	}
	for k < len(s) && s[k] != '\n' && s[k] != '\r' && s[k] != '\\' {
		k++
	}
	return k
}

// telegramEnd matches a Telegram bot token "<6–12 digits>:<35 of
// [A-Za-z0-9_-]>" whose digits are the word s[i:j], and returns its end.
func telegramEnd(s string, i, j int) int {
	if j-i < 6 || j-i > 12 || j+1 >= len(s) || s[j] != ':' || !all(s[i:j], isDigit) {
		return 0
	}
	if e := wordRun(s, j+1); e-j-1 == 35 {
		return e
	}
	return 0
}

// slackWebhook masks the path of a Slack webhook URL whose host starts with
// the word "hooks" ending at j; it returns where the scan goes on, or 0.
func (sc *scanner) slackWebhook(j int) int {
	s := sc.s
	p := j
	switch {
	case strings.HasPrefix(s[p:], ".slack.com/"):
		p += len(".slack.com/")
	case strings.HasPrefix(s[p:], ".slack-gov.com/"):
		p += len(".slack-gov.com/")
	default:
		return 0
	}
	for _, kind := range []string{"services/", "workflows/", "triggers/"} {
		if strings.HasPrefix(s[p:], kind) {
			p += len(kind)
			e := p
			for e < len(s) && (wordByte[s[e]] || s[e] == '/') {
				e++
			}
			if e-p < 16 {
				return 0
			}
			sc.add(p, e, rSlackWebhook)
			return e
		}
	}
	return 0
}

// cardEnd matches a payment card number at s[i:] and returns its end, or 0:
// 13 to 19 digits, plain or in groups split by one space or dash each (the
// first group of 4, the others of 3 to 6), of a card network's prefix and
// length, with a valid Luhn check digit. The longest valid prefix of the
// groups wins, so "4111 1111 1111 1111 2024" masks the card, not the year.
func cardEnd(s string, i int) int {
	switch d := digitRun(s, i) - i; {
	case d == 4:
		// Grouped: a blank or dash and a group of 3 or more digits follow.
		if i+4 >= len(s) || s[i+4] != ' ' && s[i+4] != '-' || digitRun(s, i+5)-(i+5) < 3 {
			return 0
		}
	case d < 13 || d > 19:
		return 0
	}
	var digits [19]byte
	var ends [8]int // ends[g]: end in s of group g; counts[g]: digits through it
	var counts [8]int
	nd, ng := 0, 0
	var sep byte
	k := i
	for ng < len(ends) {
		g := k
		for k < len(s) && isDigit(s[k]) {
			if nd == len(digits) {
				if ng == 0 {
					return 0 // a longer number: an id, not a card
				}
				break
			}
			digits[nd] = s[k]
			nd++
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			break // this group does not fit; the groups before may
		}
		if gl := k - g; ng > 0 && (gl < 3 || gl > 6) || ng == 0 && gl != 4 && gl < 13 {
			break
		}
		ends[ng], counts[ng] = k, nd
		ng++
		if k+1 < len(s) && (s[k] == ' ' || s[k] == '-') && (sep == 0 || sep == s[k]) && isDigit(s[k+1]) && counts[0] == 4 {
			sep = s[k]
			k++
			continue
		}
		break
	}
	for g := ng - 1; g >= 0; g-- {
		e := ends[g]
		if e < len(s) && (wordByte[s[e]] && s[e] != '-' || s[e] == '.' && e+1 < len(s) && isDigit(s[e+1])) {
			continue
		}
		if d := digits[:counts[g]]; len(d) >= 13 && cardNetwork(d) && luhn(d) {
			return e
		}
	}
	return 0
}

// cardNetwork reports whether d has the prefix and length of a card network
// (ISO/IEC 7812 issuer identification numbers as the networks publish them).
func cardNetwork(d []byte) bool {
	n := len(d)
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p4 := p2*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	p3 := p4 / 10
	switch {
	case d[0] == '4': // Visa
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720: // Mastercard
		return n == 16
	case p2 == 34 || p2 == 37: // American Express
		return n == 15
	case p4 == 6011, p3 >= 644 && p3 <= 649, p2 == 65: // Discover
		return n >= 16
	case p3 >= 300 && p3 <= 305, p2 == 36, p2 == 38, p2 == 39: // Diners Club
		return n >= 14
	case p4 >= 3528 && p4 <= 3589: // JCB
		return n >= 16
	case p2 == 62: // UnionPay
		return n >= 16
	case p4 >= 2200 && p4 <= 2204: // Mir
		return n >= 16
	case p2 == 50, p2 >= 56 && p2 <= 69: // Maestro
		return n >= 13
	}
	return false
}

// luhn reports whether the last digit of d is its Luhn check digit.
func luhn(d []byte) bool {
	sum := 0
	for k := range d {
		v := int(d[len(d)-1-k] - '0')
		if k%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// maxRepeated bounds the distinct values settle looks for elsewhere in a
// text: each costs a search of the text.
const maxRepeated = 32

// settle orders the spans, merges overlapping ones (the rule of higher
// precedence names the merge), and adds every other occurrence in text of
// a masked value that could not be a common word, as a whole word, so that
// a password echoed elsewhere in the same text is masked too.
func settle(text string, spans []span) []span {
	spans = merge(spans)
	n := len(spans)
	var searched [maxRepeated]string
	ns := 0
	for k := 0; k < n && ns < maxRepeated; k++ {
		v := text[spans[k].start:spans[k].end]
		if !distinctive(v) || slices.Contains(searched[:ns], v) {
			continue
		}
		searched[ns] = v
		ns++
		for off := 0; off < len(text); {
			p := strings.Index(text[off:], v)
			if p < 0 {
				break
			}
			p += off
			e := p + len(v)
			if p != spans[k].start && bounded(text, p, e) {
				spans = append(spans, span{p, e, spans[k].rule})
			}
			off = e
		}
	}
	if len(spans) > n {
		spans = merge(spans)
	}
	return spans
}

// bounded reports whether text[p:e] does not cut a word at either end.
// Only such repeats of a value are masked: masking part of a word would
// make a new word of its rest, which a second pass could match.
func bounded(text string, p, e int) bool {
	return (p == 0 || !wordByte[text[p-1]] || !wordByte[text[p]]) &&
		(e == len(text) || !wordByte[text[e]] || !wordByte[text[e-1]])
}

func merge(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if s.start < last.end {
			last.end = max(last.end, s.end)
			if ruleTable[s.rule].prio < ruleTable[last.rule].prio {
				last.rule = s.rule
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// distinctive reports whether a masked value is unlikely to occur in text
// by chance: 8 bytes or more, of at least two of letters, digits and others.
func distinctive(v string) bool {
	if len(v) < 8 {
		return false
	}
	var letter, digit, other bool
	for k := 0; k < len(v); k++ {
		switch c := v[k]; {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		case isDigit(c):
			digit = true
		default:
			other = true
		}
	}
	return letter && digit || letter && other || digit && other
}

func digitRun(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func wordRun(s string, i int) int {
	for i < len(s) && wordByte[s[i]] {
		i++
	}
	return i
}

func all(s string, ok func(byte) bool) bool {
	for k := 0; k < len(s); k++ {
		if !ok(s[k]) {
			return false
		}
	}
	return true
}

// mixedCase reports a generated token: letters of both cases and digits.
func mixedCase(s string) bool {
	var lower, upper, digit bool
	for k := 0; k < len(s); k++ {
		switch c := s[k]; {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case isDigit(c):
			digit = true
		}
	}
	return lower && upper && digit
}

func isDigit(c byte) bool           { return c >= '0' && c <= '9' }
func isUpperDigit(c byte) bool      { return c >= 'A' && c <= 'Z' || isDigit(c) }
func isAlnum(c byte) bool           { return c >= 'a' && c <= 'z' || isUpperDigit(c) }
func isAlnumUnderscore(c byte) bool { return isAlnum(c) || c == '_' }
func isAlnumDash(c byte) bool       { return isAlnum(c) || c == '-' }
func isHex(c byte) bool             { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isLabelByte(c byte) bool       { return isUpperDigit(c) || c == ' ' } // RFC 7468 labels as used
func isLower(c byte) bool           { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool           { return c >= 'A' && c <= 'Z' }
func isSpace(c byte) bool           { return c == ' ' || c == '\t' }
func isLineEnd(c byte) bool         { return c == '\n' || c == '\r' }
func isQuote(c byte) bool           { return c == '"' || c == '\'' || c == '`' }
func isB64(c byte) bool             { return b64Byte[c] }
func isWordOrDot(c byte) bool       { return wordByte[c] || c == '.' }
