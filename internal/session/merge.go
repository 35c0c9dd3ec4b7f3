package session

import "fmt"

// Merge returns the session s after the write d, as every Store applies it
// (docs/api.md §11.8): items and episodes are appended in order (an id
// already in s is an error), a fact replaces the fact of the same key in
// place and a new key is appended. The result is checked whole with
// Validate; an error's index is the entry's position in d when the entry
// came from d. s is not changed. Fresh slices are returned, so the caller
// may keep or mutate the result.
func Merge(s *Session, d Delta) (*Session, error) {
	out := &Session{
		Items:    append(append(make([]Item, 0, len(s.Items)+len(d.Items)), s.Items...), d.Items...),
		Episodes: append(append(make([]Episode, 0, len(s.Episodes)+len(d.Episodes)), s.Episodes...), d.Episodes...),
		Facts:    append(make([]Fact, 0, len(s.Facts)+len(d.Facts)), s.Facts...),
	}
	// factFrom[i] is the position in d of the fact now at i, or -1.
	factFrom := make([]int, len(s.Facts), cap(out.Facts))
	for i := range factFrom {
		factFrom[i] = -1
	}
	at := make(map[string]int, len(out.Facts))
	for i, f := range out.Facts {
		at[f.Key] = i
	}
	for j, f := range d.Facts {
		if i, ok := at[f.Key]; ok && factFrom[i] < 0 {
			out.Facts[i] = f
			factFrom[i] = j
			continue
		}
		// A key twice in d is left for Validate to name.
		at[f.Key] = len(out.Facts)
		out.Facts = append(out.Facts, f)
		factFrom = append(factFrom, j)
	}
	// An id (or fact key) of d that is stored or repeated in d: say so with
	// the positions in d, before Validate reports it by merged positions.
	if err := unique("items", "id", len(s.Items), len(d.Items), func(i int) string { return out.Items[i].ID }); err != nil {
		return nil, err
	}
	if err := unique("episodes", "id", len(s.Episodes), len(d.Episodes), func(i int) string { return out.Episodes[i].ID }); err != nil {
		return nil, err
	}
	// Stored keys are replaced, not refused.
	if err := unique("facts", "key", 0, len(d.Facts), func(i int) string { return d.Facts[i].Key }); err != nil {
		return nil, err
	}
	if err := Validate(out); err != nil {
		if e, ok := err.(*Error); ok {
			e2 := *e
			switch e.Entry {
			case "items":
				if e.Index >= len(s.Items) {
					e2.Index -= len(s.Items)
				}
			case "episodes":
				if e.Index >= len(s.Episodes) {
					e2.Index -= len(s.Episodes)
				}
			case "facts":
				if e.Index < len(factFrom) && factFrom[e.Index] >= 0 {
					e2.Index = factFrom[e.Index]
				}
			}
			return nil, &e2
		}
		return nil, err
	}
	return out, nil
}

// unique reports the first of the n new entries (after old stored ones)
// whose id a stored entry or an earlier new entry has; positions are in d.
func unique(entry, field string, old, n int, id func(int) string) error {
	have := make(map[string]int, old+n)
	for i := range old {
		have[id(i)] = -1
	}
	for j := range n {
		k := id(old + j)
		switch at, dup := have[k]; {
		case dup && at < 0:
			return &Error{Entry: entry, Index: j, Field: field, Msg: fmt.Sprintf("%q is already in the session", k)}
		case dup:
			return &Error{Entry: entry, Index: j, Field: field, Msg: fmt.Sprintf("%q is also the %s of %s[%d]", k, field, entry, at)}
		}
		have[k] = j
	}
	return nil
}
