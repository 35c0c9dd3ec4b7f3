// Package jsonpath reads the JSON paths of docs/api.md §11.9: what a
// drill-down's json and columns views select, and the paths of the
// firewall's keep-list (spec.sessions.firewall.keep, checked by the API's
// Validate). One parser, so a path the API accepts is one the router reads.
//
// A path selects a value: "" or "." is the whole document; then steps of
// .name (letters, digits, '_', '-' and '$'), ["any name"] (a JSON string)
// and [N] (an array index, 0-based; [-1] is the last element). Example:
// .items[0].name, .["a.b"][2].
package jsonpath

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of a path.
const (
	MaxBytes = 1024
	MaxSteps = 64
)

// Step is one step of a path: a key, or an index when IsIndex.
type Step struct {
	Key     string
	Index   int
	IsIndex bool
}

// Parse reads a path. Its errors say what is wrong and where.
func Parse(p string) ([]Step, error) {
	if len(p) > MaxBytes {
		return nil, fmt.Errorf("path is %d bytes; it is limited to %d bytes", len(p), MaxBytes)
	}
	bad := func(at int, what string) error {
		return fmt.Errorf("path %q: %s at byte %d; a path is like .items[0].name or .[\"a key\"]", p, what, at)
	}
	var steps []Step
	i := 0
	if p == "." {
		return nil, nil
	}
	for i < len(p) {
		if len(steps) == MaxSteps {
			return nil, fmt.Errorf("path has more than %d steps", MaxSteps)
		}
		switch p[i] {
		case '.':
			i++
			if i < len(p) && p[i] == '[' {
				continue // .["key"]
			}
			j := i
			for j < len(p) && isNameByte(p[j]) {
				j++
			}
			if j == i {
				return nil, bad(i, "a name is missing")
			}
			steps = append(steps, Step{Key: p[i:j]})
			i = j
		case '[':
			i++
			if i < len(p) && p[i] == '"' {
				dec := json.NewDecoder(strings.NewReader(p[i:]))
				var key string
				if err := dec.Decode(&key); err != nil {
					return nil, bad(i, "a JSON string is malformed")
				}
				i += int(dec.InputOffset())
				steps = append(steps, Step{Key: key})
			} else {
				j := i
				if j < len(p) && p[j] == '-' {
					j++
				}
				for j < len(p) && p[j] >= '0' && p[j] <= '9' {
					j++
				}
				n, err := strconv.Atoi(p[i:j])
				if err != nil || j-i > 9 {
					return nil, bad(i, "an index or a quoted name is missing")
				}
				steps = append(steps, Step{Index: n, IsIndex: true})
				i = j
			}
			if i >= len(p) || p[i] != ']' {
				return nil, bad(i, "']' is missing")
			}
			i++
		default:
			return nil, bad(i, fmt.Sprintf("unexpected %q", p[i]))
		}
	}
	return steps, nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '$'
}

// Format writes steps back in the canonical form Parse reads.
func Format(steps []Step) string {
	if len(steps) == 0 {
		return "."
	}
	var b strings.Builder
	for _, s := range steps {
		switch {
		case s.IsIndex:
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
		case s.Key != "" && strings.IndexFunc(s.Key, func(r rune) bool { return r >= utf8.RuneSelf || !isNameByte(byte(r)) }) < 0:
			b.WriteString("." + s.Key)
		default:
			q, _ := json.Marshal(s.Key)
			b.WriteString(`.[` + string(q) + `]`)
		}
	}
	return b.String()
}
