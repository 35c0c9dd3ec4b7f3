package sources

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// fieldPath is a parsed dotted path into decoded JSON, such as "data.0.items".
// A segment of decimal digits indexes a list; applied to an object it is an
// ordinary key, so objects keyed by numbers still work. Keys containing a dot
// cannot be addressed.
type fieldPath struct {
	raw  string
	segs []pathSeg
}

type pathSeg struct {
	key   string
	index int // list index when key is a decimal number; -1 otherwise
}

// parseFieldPath parses a dotted path. The empty string is the path to the
// value itself.
func parseFieldPath(s string) (fieldPath, error) {
	p := fieldPath{raw: s}
	if s == "" {
		return p, nil
	}
	for i, key := range strings.Split(s, ".") {
		if key == "" {
			return fieldPath{}, fmt.Errorf("empty segment %d in %q", i+1, s)
		}
		seg := pathSeg{key: key, index: -1}
		if isDecimalDigits(key) {
			// Atoi fails only on overflow; such an index can never match a list.
			if n, err := strconv.Atoi(key); err == nil {
				seg.index = n
			}
		}
		p.segs = append(p.segs, seg)
	}
	return p, nil
}

func isDecimalDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String returns the path as written.
func (p fieldPath) String() string { return p.raw }

// isEmpty reports whether the path selects the value itself.
func (p fieldPath) isEmpty() bool { return len(p.segs) == 0 }

// lookup follows the path through v (as produced by encoding/json). found is
// false when a key or index is missing or a segment meets a scalar; a JSON
// null at the end of the path is found with a nil value.
func (p fieldPath) lookup(v any) (value any, found bool) {
	for _, seg := range p.segs {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[seg.key]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			if seg.index < 0 || seg.index >= len(node) {
				return nil, false
			}
			v = node[seg.index]
		default:
			return nil, false
		}
	}
	return v, true
}

// scalarText formats a JSON scalar as text: strings as they are, numbers as
// written in the document (the decoder must use UseNumber), booleans as
// true/false. Null, objects and lists have no text.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case float64: // a decoder without UseNumber
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	default:
		return "", false
	}
}

// resultTime reads a result's date (httpAPI.timeField): an RFC 3339 string,
// or a number of Unix seconds (fractions allowed); zero otherwise.
func resultTime(v any) time.Time {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(x)); err == nil {
			return t
		}
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return unixSeconds(f)
		}
	case float64:
		return unixSeconds(x)
	}
	return time.Time{}
}

// unixSeconds is a Unix time in seconds; zero for a value no date has
// (not finite, before 1970 or after 9999).
func unixSeconds(f float64) time.Time {
	if math.IsNaN(f) || f <= 0 || f > 253402300799 {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

// jsonKind names the JSON type of a decoded value for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}
