// Package redact removes credentials from text that leaves the process:
// URLs and errors shown in status, conditions, events, logs, metrics and
// query responses. It is the one place that decides how a URL is shown.
//
// The rule: the whole user part of a URL (user name and password, as written,
// percent-encoded or not) is replaced by Mask, whatever the scheme; this also
// covers the user of git's scp-like user@host:path form. The host, port and
// path stay, so people can still tell which URL is meant. A URL that does not
// parse is never echoed.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a user part or a secret value.
const Mask = "***"

// InvalidURL is shown instead of a URL that does not parse: the parser's
// idea of where the user part ends cannot be trusted, so no part is shown.
const InvalidURL = "<invalid URL>"

// minUserLen is the shortest user name that is also scrubbed as a value
// (see URLSecrets): tokens are long, and scrubbing an account name such as
// "git" would garble messages like "git fetch".
const minUserLen = 8

var (
	// schemeRe is RFC 3986's scheme followed by "://".
	schemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// quotedRe is a Go-quoted fragment in a url.Parse error message.
	quotedRe = regexp.MustCompile(`\s*"(?:[^"\\]|\\.)*"`)
)

// URL returns raw fit for display: "https://***@git.example.com/org/repo.git"
// for "https://ghp_x@git.example.com/org/repo.git", "***@host:path" for
// git's scp-like "git@host:path", InvalidURL when raw has a scheme but does
// not parse, and raw itself when it has no user part (a local path
// included). Everything but the user part is kept as written. Without a
// scheme, whatever precedes an "@" before the first "/" counts as a user
// part, so a mistyped "https:token@host/repo" is masked too.
func URL(raw string) string {
	if schemeRe.MatchString(raw) {
		if _, err := url.Parse(raw); err != nil {
			return InvalidURL
		}
		start := strings.Index(raw, "://") + len("://")
		end := len(raw)
		if i := strings.IndexAny(raw[start:], "/?#"); i >= 0 {
			end = start + i
		}
		// url.Parse, too, ends the user part at the authority's last "@".
		if at := strings.LastIndexByte(raw[start:end], '@'); at >= 0 {
			return raw[:start] + Mask + raw[start+at:]
		}
		return raw
	}
	end := strings.IndexByte(raw, '/')
	if end < 0 {
		end = len(raw)
	}
	if at := strings.LastIndexByte(raw[:end], '@'); at >= 0 {
		return Mask + raw[at:]
	}
	return raw
}

// URLSecrets returns the credentials written in raw's user part, decoded,
// for String to scrub wherever a library repeats them outside a URL: the
// password, and the user name when it is at least minUserLen bytes long
// (GitHub's https://<token>@github.com form puts the token there). A URL
// that does not parse yields nothing; URL already hides it whole.
func URLSecrets(raw string) []string {
	if !schemeRe.MatchString(raw) {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	var out []string
	if name := u.User.Username(); len(name) >= minUserLen {
		out = append(out, name)
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		out = append(out, pw)
	}
	return out
}

// String scrubs text: the user part of every scheme://user@host URL in it,
// and every secret value in every encoding Credentials.Scrubber lists.
// Empty secrets are ignored; a secret shorter than MinValueLen is masked
// only as a whole word.
func String(s string, secrets ...string) string { return secretScrubber(secrets).String(s) }

// Error returns err with its message scrubbed by String; errors.Is and
// errors.As still see the original chain. It returns err itself when there
// is nothing to scrub.
func Error(err error, secrets ...string) error { return secretScrubber(secrets).Error(err) }

func secretScrubber(secrets []string) *Scrubber {
	if len(secrets) == 0 {
		return nil
	}
	var c Credentials
	for _, s := range secrets {
		c.AddSecret(s)
	}
	return c.Scrubber()
}

// ParseError is the message of a url.Parse error without the URL and without
// the quoted fragments the parser repeats ("invalid port \":tok\" after host"
// becomes "invalid port after host"): with a malformed user part, a fragment
// may be part of a password.
func ParseError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return strings.TrimSpace(quotedRe.ReplaceAllString(err.Error(), ""))
}
