// Package redacttest helps tests check that no credential leaks: the
// encodings a server may echo one in, made with the standard library's
// encoders (not internal/redact's), and a server that echoes them.
package redacttest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Forms are the encodings in which a server may echo a value it was sent:
// as is, URL-encoded (query and path escaping, upper- and lower-case hex),
// form-decoded ("+" read as a space) and JSON-escaped.
func Forms(v string) []string {
	j, _ := json.Marshal(v)
	q := url.QueryEscape(v)
	return []string{v, q, url.PathEscape(v), hexRe.ReplaceAllStringFunc(q, strings.ToLower),
		strings.ReplaceAll(v, "+", " "), string(j[1 : len(j)-1])}
}

var hexRe = regexp.MustCompile(`%[0-9A-F]{2}`)

// BasicForms are the forms of "Authorization: Basic base64(user:password)"
// a server may echo: the base64 value in either alphabet, padded or not, and
// the password, each in every Forms encoding.
func BasicForms(user, password string) []string {
	pair := []byte(user + ":" + password)
	var out []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, Forms(enc.EncodeToString(pair))...)
	}
	if password != "" {
		out = append(out, Forms(password)...)
	}
	return out
}

// Leaks returns the forms text holds.
func Leaks(text string, forms []string) []string {
	var out []string
	for _, f := range forms {
		if f != "" && strings.Contains(text, f) {
			out = append(out, f)
		}
	}
	return out
}

// Echo is what a careless server says about the named headers of r: each
// value as received, URL-encoded (lower-case hex, as some servers write
// it) and form-decoded, and the user:password pair of a Basic value.
func Echo(r *http.Request, headers ...string) string {
	var b strings.Builder
	b.WriteString("access denied.")
	for _, name := range headers {
		v := r.Header.Get(name)
		fmt.Fprintf(&b, " %s: %s; encoded: %s;", name, v, hexRe.ReplaceAllStringFunc(url.QueryEscape(v), strings.ToLower))
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			fmt.Fprintf(&b, " decoded: %s;", d)
		}
	}
	if user, pw, ok := r.BasicAuth(); ok {
		fmt.Fprintf(&b, " you sent %s:%s", user, pw)
	}
	return b.String()
}

// EchoHandler answers every request with status and Echo's text.
func EchoHandler(status int, headers ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, Echo(r, headers...), status)
	})
}
