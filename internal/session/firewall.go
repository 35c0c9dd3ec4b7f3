package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// DefaultFirewallMaxChars is the size (characters) above which a tool result
// is stored as an artifact and replaced by a summary.
const DefaultFirewallMaxChars = int(v1alpha1.DefaultFirewallMaxChars)

// Summary bounds: a summary stays a few hundred tokens whatever the result.
const (
	headLines     = 5
	headLineRunes = 160
	shapeKeys     = 16
	keyBytes      = 40
	factCount     = 8
	factBytes     = 80
	maxJSONDepth  = 64
)

// Artifact is a tool result the firewall took out of the prompt, as a
// pack lists it: by reference, never its text (drill-down reads that from
// the store). Ref is the SHA-256 of the text, so equal results share a ref.
type Artifact struct {
	Ref       string `json:"ref"`
	ItemID    string `json:"item_id"`
	MediaType string `json:"media_type"`
	Bytes     int    `json:"bytes"`
	Lines     int    `json:"lines"`
	// Summary is what stands for the text in the pack.
	Summary string `json:"summary"`
}

// ArtifactRef names the artifact of a tool result's text: "sha256:" and
// the lower-case hex SHA-256 of the text (ArtifactDigest). Stores index
// tool results by it; ParseArtifactRef reads it back.
func ArtifactRef(text string) string {
	sum := ArtifactDigest(text)
	return artifactRefPrefix + hex.EncodeToString(sum[:])
}

// ArtifactDigest is the SHA-256 of a tool result's text, which its ref
// spells in hex. The text is hashed in place (digest.SHA256): a copy of
// every oversized result was a quarter of a pack's allocations.
func ArtifactDigest(text string) [sha256.Size]byte { return digest.SHA256(text) }

const artifactRefPrefix = "sha256:"

// ErrBadArtifactRef is a ref not in ArtifactRef's form (HTTP 400); the
// error ParseArtifactRef returns wraps it and says what a ref is.
var ErrBadArtifactRef = errors.New("bad artifact ref")

// maxRefEcho bounds the part of a bad ref its error repeats.
const maxRefEcho = 100

// ParseArtifactRef is the one reading of an artifact ref, for every store,
// the HTTP API and the MCP drilldown tool: "sha256:" and 64 lower-case hex
// digits, exactly as ArtifactRef writes it (upper-case digits name no
// artifact, so they are refused rather than looked up). It returns the
// digest the ref spells.
func ParseArtifactRef(ref string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h, ok := strings.CutPrefix(ref, artifactRefPrefix)
	if !ok || len(h) != hex.EncodedLen(len(sum)) || strings.Trim(h, "0123456789abcdef") != "" {
		return sum, badRefError{ref}
	}
	_, _ = hex.Decode(sum[:], []byte(h)) // lower-case hex of the right length: cannot fail
	return sum, nil
}

type badRefError struct{ ref string }

func (e badRefError) Error() string {
	return fmt.Sprintf("artifact ref %q: want sha256: and 64 lower-case hex digits, as a pack's artifacts name it", textutil.CutBytes(e.ref, maxRefEcho, textutil.Ellipsis))
}

func (e badRefError) Is(target error) bool { return target == ErrBadArtifactRef }

// firewall makes the artifact of an oversized tool result and the summary
// that stands for it (api.md §11.4): a header with the artifact's ref and
// size; for JSON the shape (top-level keys and kinds, array lengths),
// scalar facts, the kept paths and the first lines; for text the first and
// last lines and the signal lines. The summary, keep lines aside, is cut
// to about half of maxChars at a line boundary.
func firewall(id, text string, maxChars int, keep []keepPath) Artifact {
	lines := countLines(text)
	a := Artifact{Ref: ArtifactRef(text), ItemID: id, MediaType: "text/plain", Bytes: len(text), Lines: lines}
	out := []string{fmt.Sprintf("[%d bytes, %d lines; stored as artifact %s]", a.Bytes, lines, a.Ref)}
	limit := max(maxChars/2, 200)
	var kept []string
	keepAt := -1
	if shape, facts, ok := jsonSummary(text); ok {
		a.MediaType = "application/json"
		out = append(out, shape)
		if len(facts) > 0 {
			out = append(out, "facts: "+strings.Join(facts, "; "))
		}
		kept, keepAt = keepLines(text, keep), len(out)
		out = append(out, "head:")
		rest := text
		for n := 0; n < headLines && rest != ""; n++ {
			line, after, _ := strings.Cut(rest, "\n")
			rest = after
			out = append(out, "  "+textutil.CutRunes(strings.TrimRight(line, "\r"), headLineRunes, textutil.Ellipsis))
		}
	} else {
		out = append(out, textSummary(text, lines, limit-utf8.RuneCountInString(out[0])-1)...)
	}
	var b strings.Builder
	used, full := 0, false
	for i, l := range out {
		if i == keepAt {
			for _, k := range kept {
				b.WriteString("\n" + k)
			}
		}
		n := utf8.RuneCountInString(l) + 1
		if full || (i > 0 && used+n > limit) {
			full = true
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
		used += n
	}
	a.Summary = b.String()
	return a
}

// longerThan reports whether s has more than n characters, counting only
// as far as needed.
func longerThan(s string, n int) bool {
	switch {
	case len(s) <= n:
		return false
	case len(s) > 4*n: // a character is at most 4 bytes
		return true
	}
	return utf8.RuneCountInString(s) > n
}

// jsonSummary describes a JSON document in one line, with the scalar
// top-level fields as facts. A hand-written scanner instead of a full decode
// keeps a 10 kB result at a few microseconds; anything it cannot read is not
// JSON (ok false) and gets the plain-text summary.
func jsonSummary(text string) (shape string, facts []string, ok bool) {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return "", nil, false
	}
	p := &scan{s: t}
	switch t[0] {
	case '{':
		var keys []string
		p.i++
		p.ws()
		if p.peek() == '}' {
			p.i++
		} else {
			for {
				p.ws()
				ks, ke, good := p.str()
				if !good {
					return "", nil, false
				}
				p.ws()
				if p.peek() != ':' {
					return "", nil, false
				}
				p.i++
				p.ws()
				vs := p.i
				kind, n, good := p.value(1)
				if !good {
					return "", nil, false
				}
				p.members++
				key := unquote(t[ks:ke])
				if len(keys) < shapeKeys {
					keys = append(keys, textutil.CutRunes(key, keyBytes, textutil.Ellipsis)+" ("+describe(kind, n)+")")
				} else if len(keys) == shapeKeys {
					keys = append(keys, "…")
				}
				if len(facts) < factCount && (kind == 's' || kind == 'n' || kind == 'b') && p.i-vs <= factBytes+2 {
					v := t[vs:p.i]
					if kind == 's' {
						v = unquote(v)
					}
					facts = append(facts, textutil.CutRunes(key, keyBytes, textutil.Ellipsis)+" = "+v)
				}
				p.ws()
				c := p.peek()
				p.i++
				if c == '}' {
					break
				}
				if c != ',' {
					return "", nil, false
				}
			}
		}
		if p.ws(); p.i != len(t) {
			return "", nil, false
		}
		return fmt.Sprintf("JSON object with %d keys: %s", p.members, strings.Join(keys, ", ")), facts, true
	default:
		kind, n, good := p.value(0)
		if !good || kind != 'a' {
			return "", nil, false
		}
		if p.ws(); p.i != len(t) {
			return "", nil, false
		}
		shape = fmt.Sprintf("JSON array of %d elements", n)
		if p.first != 0 {
			shape += ", the first " + describe(p.first, p.firstN)
		}
		return shape, nil, true
	}
}

func describe(kind byte, n int) string {
	switch kind {
	case 'o':
		return fmt.Sprintf("object of %d keys", n)
	case 'a':
		return fmt.Sprintf("array of %d", n)
	case 's':
		return "string"
	case 'n':
		return "number"
	case 'b':
		return "boolean"
	}
	return "null"
}

func unquote(s string) string {
	var v string
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	return v
}

// scan walks JSON text. value returns a value's kind (o a s n b z) and, for
// objects and arrays, their member count. members counts the keys of a
// top-level object; first/firstN describe the first element of a
// top-level array.
type scan struct {
	s       string
	i       int
	members int
	first   byte
	firstN  int
}

func (p *scan) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *scan) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// str reads a string; start and end include the quotes.
func (p *scan) str() (start, end int, ok bool) {
	if p.peek() != '"' {
		return 0, 0, false
	}
	start = p.i
	p.i++
	for {
		q := strings.IndexByte(p.s[p.i:], '"')
		if q < 0 {
			return 0, 0, false
		}
		p.i += q + 1
		// The quote ends the string unless an odd run of backslashes escapes it.
		bs := 0
		for k := p.i - 2; k > start && p.s[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return start, p.i, true
		}
	}
}

func (p *scan) value(depth int) (kind byte, n int, ok bool) {
	if depth > maxJSONDepth {
		return 0, 0, false
	}
	switch c := p.peek(); {
	case c == '"':
		_, _, ok = p.str()
		return 's', 0, ok
	case c == '{' || c == '[':
		closer := byte('}')
		kind = 'o'
		if c == '[' {
			closer, kind = ']', 'a'
		}
		p.i++
		p.ws()
		if p.peek() == closer {
			p.i++
			return kind, 0, true
		}
		for {
			p.ws()
			if kind == 'o' {
				if _, _, good := p.str(); !good {
					return 0, 0, false
				}
				p.ws()
				if p.peek() != ':' {
					return 0, 0, false
				}
				p.i++
				p.ws()
			}
			k, m, good := p.value(depth + 1)
			if !good {
				return 0, 0, false
			}
			if depth == 0 && n == 0 {
				p.first, p.firstN = k, m
			}
			n++
			p.ws()
			c := p.peek()
			p.i++
			if c == closer {
				return kind, n, true
			}
			if c != ',' {
				return 0, 0, false
			}
		}
	case c == 't' && strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return 'b', 0, true
	case c == 'f' && strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return 'b', 0, true
	case c == 'n' && strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return 'z', 0, true
	case c == '-' || (c >= '0' && c <= '9'):
		s := p.i
	number:
		for ; p.i < len(p.s); p.i++ {
			switch p.s[p.i] {
			case '+', '-', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			default:
				break number
			}
		}
		return 'n', 0, p.i > s
	}
	return 0, 0, false
}
