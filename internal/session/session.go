// Package session builds context packs from an agent's session: the items it
// accumulated (turns, tool calls and results, facts, plans), cut to the budget
// of one LLM call phase (docs/api.md §11). It holds the model and its
// validation (Validate, Merge, ReadJSONL), the packs (Build, the firewall),
// drill-down into artifacts, and the Store contract with its errors. It
// does no I/O of its own (BuildFor runs the engine's query): the stores are
// its subpackages memstore (embedded) and redisstore, both held to
// storetest; storeselect picks one from spec.sessions; sessiontest holds the
// tests' fixtures; the HTTP API is internal/server.
package session

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Kind is the kind of a session item.
type Kind string

const (
	KindUserTurn     Kind = "user_turn"
	KindAgentMessage Kind = "agent_message"
	KindToolCall     Kind = "tool_call"
	KindToolResult   Kind = "tool_result"
	KindDocSnippet   Kind = "doc_snippet"
	KindMemoryFact   Kind = "memory_fact"
	KindPlanState    Kind = "plan_state"
	KindPolicy       Kind = "policy"
)

// Kinds lists every kind, in the order of the documentation.
var Kinds = []Kind{KindUserTurn, KindAgentMessage, KindToolCall, KindToolResult, KindDocSnippet, KindMemoryFact, KindPlanState, KindPolicy}

// Item is one entry of a session, in the order it happened.
type Item struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	Text string `json:"text"`
	// ParentID names an earlier item this one needs to be understood (a
	// tool_result its tool_call): a pack that includes the item includes the
	// whole parent chain.
	ParentID    string               `json:"parent_id,omitempty"`
	Sensitivity v1alpha1.Sensitivity `json:"sensitivity,omitempty"`
	Tags        []string             `json:"tags,omitempty"`
	Metadata    map[string]string    `json:"metadata,omitempty"`
	// TokenEstimate is the caller's count; a pack counts the item at least
	// at the router's own estimate, so a low value never overfills it.
	TokenEstimate int `json:"token_estimate,omitempty"`
	// Pinned keeps the item in every phase that takes its kind, before any
	// scored entry (api.md §11.3). The session's first user_turn, its task,
	// is pinned whatever this says.
	Pinned bool `json:"pinned,omitempty"`
}

// Fact is one remembered key → value.
type Fact struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Episode is a short summary of a past interaction.
type Episode struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Session is what a pack is built from.
type Session struct {
	Items    []Item
	Facts    []Fact
	Episodes []Episode
}

// Limits (api.md §11.7). They are checked by Validate, where input enters.
const (
	MaxItems         = 10_000
	MaxItemBytes     = 256 << 10
	MaxSessionBytes  = 16 << 20
	MaxIDBytes       = 128
	MaxTags          = 32
	MaxTagBytes      = 256
	MaxMetadata      = 32
	MaxMetadataKey   = 256
	MaxMetadataValue = 1024
	MaxFacts         = 1_000
	MaxFactKeyBytes  = 256
	MaxFactBytes     = 4 << 10
	MaxEpisodes      = 1_000
	MaxEpisodeBytes  = 16 << 10
	MaxTokenEstimate = 1 << 24
)

// Error is an input error of one entry of a session. Entry is "items",
// "facts" or "episodes" and Index its position there, so a reader can map it
// back to a file line.
type Error struct {
	Entry string
	Index int
	Field string
	Msg   string
	// TooLarge marks a size limit (a text, or the session's entries or
	// bytes) rather than a malformed entry: errors.Is(e, ErrTooLarge), HTTP
	// 413.
	TooLarge bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s[%d].%s: %s", e.Entry, e.Index, e.Field, e.Msg) }

// Is makes an error past a size limit ErrTooLarge.
func (e *Error) Is(target error) bool { return e.TooLarge && target == ErrTooLarge }

// BadNameRune says what a name must not hold, at its first offence, or ""
// when it holds none. Names are what a pack or a session file shows as
// labels, not as text: item ids and parent ids, fact keys, episode ids (and
// session ids, which ValidateSessionID holds to ASCII besides). They must be
// valid UTF-8 without control characters (Unicode Cc: NUL, ESC, tabs, line
// breaks, U+0085), format characters (Cf: bidi overrides, zero-width and tag
// characters) or line and paragraph separators (Zl, Zp: U+2028, U+2029):
// such a rune would start a line of the pack its writer did not (a forged
// "## Facts" section) or hide what the label says.
func BadNameRune(name string) string {
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		var what string
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("byte %d is not valid UTF-8", i)
		case unicode.Is(unicode.Cc, r):
			what = "a control character"
		case unicode.Is(unicode.Cf, r):
			what = "a format character"
		case unicode.Is(unicode.Zl, r):
			what = "a line separator"
		case unicode.Is(unicode.Zp, r):
			what = "a paragraph separator"
		}
		if what != "" {
			return fmt.Sprintf("%U at byte %d is %s", r, i, what)
		}
		i += size
	}
	return ""
}

// nameError is BadNameRune's finding as the message of an entry's error.
func nameError(name string) string {
	if bad := BadNameRune(name); bad != "" {
		return bad + "; ids and keys must be UTF-8 without control, format or separator characters"
	}
	return ""
}

func knownKind(k Kind) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// ValidateItem checks one item on its own (not its parent, see Validate).
// i is its index, for the error.
func ValidateItem(i int, it *Item) *Error {
	bad := func(field, format string, args ...any) *Error {
		return &Error{Entry: "items", Index: i, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case it.ID == "":
		return bad("id", "required")
	case len(it.ID) > MaxIDBytes:
		return bad("id", "%d bytes; ids are limited to %d bytes", len(it.ID), MaxIDBytes)
	case nameError(it.ID) != "":
		return bad("id", "%s", nameError(it.ID))
	case it.Kind == "":
		return bad("kind", "required: one of %s", kindList())
	case !knownKind(it.Kind):
		return bad("kind", "unknown kind %q: want one of %s", it.Kind, kindList())
	case len(it.Text) > MaxItemBytes:
		e := bad("text", "%d bytes; an item's text is limited to %d bytes", len(it.Text), MaxItemBytes)
		e.TooLarge = true
		return e
	case it.ParentID == it.ID:
		return bad("parent_id", "an item cannot be its own parent")
	case nameError(it.ParentID) != "":
		return bad("parent_id", "%s", nameError(it.ParentID))
	case it.TokenEstimate < 0 || it.TokenEstimate > MaxTokenEstimate:
		return bad("token_estimate", "%d: must be between 0 and %d", it.TokenEstimate, MaxTokenEstimate)
	case len(it.Tags) > MaxTags:
		return bad("tags", "%d tags; at most %d", len(it.Tags), MaxTags)
	case len(it.Metadata) > MaxMetadata:
		return bad("metadata", "%d pairs; at most %d", len(it.Metadata), MaxMetadata)
	}
	if it.Sensitivity != "" {
		if err := v1alpha1.ValidateSensitivity(it.Sensitivity); err != "" {
			return bad("sensitivity", "%s", err)
		}
	}
	for j, t := range it.Tags {
		if t == "" || len(t) > MaxTagBytes {
			return bad(fmt.Sprintf("tags[%d]", j), "%d bytes; tags are 1 to %d bytes", len(t), MaxTagBytes)
		}
	}
	for k, v := range it.Metadata {
		if k == "" || len(k) > MaxMetadataKey {
			return bad("metadata", "key of %d bytes; keys are 1 to %d bytes", len(k), MaxMetadataKey)
		}
		if len(v) > MaxMetadataValue {
			return bad(fmt.Sprintf("metadata[%q]", k), "%d bytes; values are limited to %d bytes", len(v), MaxMetadataValue)
		}
	}
	return nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Validate checks a whole session: every entry, unique ids, the limits,
// and parents: a parent_id must name another item, and parent chains must
// not loop.
func Validate(s *Session) error {
	if err := checkCounts(len(s.Items), len(s.Facts), len(s.Episodes)); err != nil {
		return err
	}
	total := 0
	pos := make(map[string]int, len(s.Items))
	for i := range s.Items {
		it := &s.Items[i]
		if err := ValidateItem(i, it); err != nil {
			return err
		}
		if j, dup := pos[it.ID]; dup {
			return &Error{Entry: "items", Index: i, Field: "id", Msg: fmt.Sprintf("%q is also the id of items[%d]", it.ID, j)}
		}
		pos[it.ID] = i
		if total += len(it.Text); total > MaxSessionBytes {
			return sessionBytesError(i)
		}
	}
	for i := range s.Items {
		if p := s.Items[i].ParentID; p != "" {
			if _, ok := pos[p]; !ok {
				return noParentError(i, p)
			}
		}
	}
	if err := checkCycles(s.Items, pos); err != nil {
		return err
	}
	if err := checkAllKeyed(factEntry, len(s.Facts), func(i int) (string, string) { return s.Facts[i].Key, s.Facts[i].Value }); err != nil {
		return err
	}
	return checkAllKeyed(episodeEntry, len(s.Episodes), func(i int) (string, string) { return s.Episodes[i].ID, s.Episodes[i].Text })
}

// checkCounts checks the entries of a session against MaxItems, MaxFacts
// and MaxEpisodes; the error's index is the first entry past the limit.
func checkCounts(items, facts, episodes int) *Error {
	switch {
	case items > MaxItems:
		return &Error{Entry: "items", Index: MaxItems, Field: "id", Msg: fmt.Sprintf("a session holds at most %d items", MaxItems), TooLarge: true}
	case facts > MaxFacts:
		return &Error{Entry: "facts", Index: MaxFacts, Field: "key", Msg: fmt.Sprintf("a session holds at most %d facts", MaxFacts), TooLarge: true}
	case episodes > MaxEpisodes:
		return &Error{Entry: "episodes", Index: MaxEpisodes, Field: "id", Msg: fmt.Sprintf("a session holds at most %d episodes", MaxEpisodes), TooLarge: true}
	}
	return nil
}

// sessionBytesError: the texts up to items[i] pass MaxSessionBytes.
func sessionBytesError(i int) *Error {
	return &Error{Entry: "items", Index: i, Field: "text", Msg: fmt.Sprintf("the session's texts pass %d bytes", MaxSessionBytes), TooLarge: true}
}

// noParentError: items[i] names a parent no item has.
func noParentError(i int, parent string) *Error {
	return &Error{Entry: "items", Index: i, Field: "parent_id", Msg: fmt.Sprintf("no item has id %q", parent)}
}

// keyedEntry describes facts and episodes: entries with a key (or id)
// within bounds and unique, and a text within bounds.
type keyedEntry struct {
	entry, keyField, textField, what string
	maxKey, maxText                  int
}

var (
	factEntry    = keyedEntry{"facts", "key", "value", "a fact's value", MaxFactKeyBytes, MaxFactBytes}
	episodeEntry = keyedEntry{"episodes", "id", "text", "an episode's text", MaxIDBytes, MaxEpisodeBytes}
)

// checkKeyed checks entry i on its own (not that its key is unique).
func checkKeyed(k keyedEntry, i int, key, text string) *Error {
	bad := func(field, format string, args ...any) *Error {
		return &Error{Entry: k.entry, Index: i, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case key == "" || len(key) > k.maxKey:
		return bad(k.keyField, "%d bytes; %ss are 1 to %d bytes", len(key), k.keyField, k.maxKey)
	case nameError(key) != "":
		return bad(k.keyField, "%s", nameError(key))
	case len(text) > k.maxText:
		e := bad(k.textField, "%d bytes; %s is limited to %d bytes", len(text), k.what, k.maxText)
		e.TooLarge = true
		return e
	}
	return nil
}

// checkAllKeyed checks the n entries of a kind, and that their keys are unique.
func checkAllKeyed(k keyedEntry, n int, at func(int) (key, text string)) error {
	seen := make(map[string]int, n)
	for i := range n {
		key, text := at(i)
		if err := checkKeyed(k, i, key, text); err != nil {
			return err
		}
		if j, dup := seen[key]; dup {
			return &Error{Entry: k.entry, Index: i, Field: k.keyField, Msg: fmt.Sprintf("%q is also the %s of %s[%d]", key, k.keyField, k.entry, j)}
		}
		seen[key] = i
	}
	return nil
}

// checkCycles walks each parent chain once (colouring visited items), so a
// loop is found in linear time; the error names the loop. A parent pos does
// not hold ends the chain (an item stored before a write, whose chain is
// checked already).
func checkCycles(items []Item, pos map[string]int) error {
	const (
		unseen = iota
		onPath
		done
	)
	state := make([]uint8, len(items))
	var path []int
	for start := range items {
		path = path[:0]
		i := start
		for state[i] == unseen {
			state[i] = onPath
			path = append(path, i)
			p := items[i].ParentID
			if p == "" {
				break
			}
			next, ok := pos[p]
			if !ok {
				break
			}
			i = next
			if state[i] == onPath {
				var ids []string
				k := 0
				for path[k] != i {
					k++
				}
				for _, j := range path[k:] {
					ids = append(ids, items[j].ID)
				}
				ids = append(ids, items[i].ID)
				return &Error{Entry: "items", Index: i, Field: "parent_id", Msg: "parent chain loops: " + strings.Join(ids, " → ")}
			}
		}
		for _, j := range path {
			state[j] = done
		}
	}
	return nil
}

// MaxSessionIDBytes bounds a session id; see ValidateSessionID.
const MaxSessionIDBytes = 128

// ValidateSessionID checks a session id: 1–128 bytes of ASCII letters,
// digits, '.', '_' and '-', not starting with '.' (it names a file of the
// embedded store and a key of Redis). The error names the first byte
// outside that set, or the rune BadNameRune finds.
func ValidateSessionID(id string) error {
	if id == "" || len(id) > MaxSessionIDBytes {
		return fmt.Errorf("session id is %d bytes; it must be 1 to %d bytes", len(id), MaxSessionIDBytes)
	}
	if bad := BadNameRune(id); bad != "" {
		return fmt.Errorf("session id %q: %s; only ASCII letters, digits, '.', '_' and '-' are allowed", id, bad)
	}
	if id[0] == '.' {
		return fmt.Errorf("session id %q must not start with '.'", id)
	}
	for i, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("session id %q: %q (%U) at byte %d is not allowed; only ASCII letters, digits, '.', '_' and '-' are allowed", id, c, c, i)
		}
	}
	return nil
}
