package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxLineBytes bounds one line of a JSONL session file: an item at
// MaxItemBytes with room for JSON escapes.
const MaxLineBytes = 4 * MaxItemBytes

// line is one line of a session file: an item, or a fact, or an episode.
type line struct {
	Item
	Fact    *Fact    `json:"fact"`
	Episode *Episode `json:"episode"`
}

// ReadJSONL reads a session file (api.md §11.6): one JSON object a line,
// an item, {"fact": {"key", "value"}} or {"episode": {"id", "text"}}; blank
// lines are skipped. Errors name the file, the line and the field.
func ReadJSONL(name string, r io.Reader) (*Session, error) {
	s := &Session{}
	var itemLines, factLines, episodeLines []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l line
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("%s:%d: %s", name, n, jsonError(err))
		}
		if dec.More() {
			return nil, fmt.Errorf("%s:%d: more than one JSON value on the line", name, n)
		}
		isItem := l.ID != "" || l.Kind != "" || l.Text != "" || l.ParentID != "" || l.Sensitivity != "" ||
			l.Tags != nil || l.Metadata != nil || l.TokenEstimate != 0 || l.Pinned
		switch {
		case l.Fact != nil && (l.Episode != nil || isItem), l.Episode != nil && isItem:
			return nil, fmt.Errorf("%s:%d: a line holds one item, one fact or one episode", name, n)
		case l.Fact != nil:
			if len(s.Facts) == MaxFacts {
				return nil, fmt.Errorf("%s:%d: fact: a session holds at most %d facts", name, n, MaxFacts)
			}
			s.Facts = append(s.Facts, *l.Fact)
			factLines = append(factLines, n)
		case l.Episode != nil:
			if len(s.Episodes) == MaxEpisodes {
				return nil, fmt.Errorf("%s:%d: episode: a session holds at most %d episodes", name, n, MaxEpisodes)
			}
			s.Episodes = append(s.Episodes, *l.Episode)
			episodeLines = append(episodeLines, n)
		default:
			if len(s.Items) == MaxItems {
				return nil, fmt.Errorf("%s:%d: a session holds at most %d items", name, n, MaxItems)
			}
			s.Items = append(s.Items, l.Item)
			itemLines = append(itemLines, n)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, n+1, MaxLineBytes)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := Validate(s); err != nil {
		var e *Error
		if errors.As(err, &e) {
			lines := map[string][]int{"items": itemLines, "facts": factLines, "episodes": episodeLines}[e.Entry]
			field := e.Field
			switch e.Entry {
			case "facts":
				field = "fact." + field
			case "episodes":
				field = "episode." + field
			}
			if e.Index < len(lines) {
				return nil, fmt.Errorf("%s:%d: %s: %s", name, lines[e.Index], field, e.Msg)
			}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// jsonError words a decoding error without Go type names.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: want a %s, not a JSON %s", strings.TrimPrefix(te.Field, "Item."), jsonType(te.Type.Kind().String()), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Sprintf("%s: unknown field (an item has id, kind, text, parent_id, sensitivity, tags, metadata, token_estimate, pinned; or write {\"fact\": {\"key\", \"value\"}} or {\"episode\": {\"id\", \"text\"}})", strings.Trim(f, `"`))
	}
	return "not a JSON object: " + strings.TrimPrefix(msg, "json: ")
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64":
		return "number"
	case "slice":
		return "list"
	case "map", "struct", "ptr":
		return "object"
	}
	return kind
}
