package redact

import (
	"regexp"
	"strings"

	"github.com/contextrouter/contextrouter/internal/secrets"
)

var (
	// assignmentRe is a credential named in the text: "password=…",
	// "api_key: …", "Authorization: Bearer …"; the value (up to white space
	// or a quote) is masked, the name kept.
	assignmentRe = regexp.MustCompile(`(?i)\b((?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|private[_-]?key|auth(?:orization)?)["']?\s*[:=]\s*["']?(?:bearer\s+|basic\s+)?)[^\s"'` + "`" + `]+`)
	// bearerRe is a bare "Bearer <token>".
	bearerRe = regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+`)
	// keyLikeRe is a run that looks like a generated key: 24 or more
	// characters of the alphabets keys and tokens use (base64, base32, hex,
	// JWT); whether it mixes letters and digits is checked in Text.
	keyLikeRe = regexp.MustCompile(`[A-Za-z0-9_+/=.-]{24,}`)
)

// Text masks what looks like a credential in free text a person wrote,
// such as a question recorded in the audit log: URL user parts (as String),
// the value of a named credential (password=…, token: …, Authorization:
// Bearer …), and any run of 24 or more key characters that mixes letters
// and digits (API keys, JWTs, hex digests). It errs on the side of masking:
// a long identifier with digits is masked too. What is left then goes
// through the session scanner's rules (secrets.Default: AWS key ids, card
// numbers and the other formats it knows, as [secret:RULE]), so a question
// never keeps what a session item could not.
func Text(s string) string {
	s = String(s)
	s = assignmentRe.ReplaceAllString(s, "${1}"+Mask)
	s = bearerRe.ReplaceAllString(s, "${1}"+Mask)
	s = keyLikeRe.ReplaceAllStringFunc(s, func(run string) string {
		if strings.ContainsAny(run, "0123456789") && strings.IndexFunc(run, isLetter) >= 0 {
			return Mask
		}
		return run
	})
	s, _ = secrets.Default().Mask(s)
	return s
}

func isLetter(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') }
