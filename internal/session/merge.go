package session

import "fmt"

// Merge returns the session s after the write d, as every Store applies it
// (docs/api.md §11.8): items and episodes are appended in order (an id
// already in s is an error), a fact replaces the fact of the same key in
// place and a new key is appended. s must be valid, as every stored session
// is: only what d adds is checked (its entries, their ids against s, their
// parents, the session's limits), so a write costs a scan of s's item ids
// rather than a Validate of the whole; the result is what Validate accepts,
// and an error is the one Validate would give for the merged session, its
// index the entry's position in d. s is not changed. Fresh slices are
// returned, so the caller may keep or mutate the result.
func Merge(s *Session, d Delta) (*Session, error) {
	out := &Session{
		Items:    append(make([]Item, 0, len(s.Items)+len(d.Items)), s.Items...),
		Episodes: append(make([]Episode, 0, len(s.Episodes)+len(d.Episodes)), s.Episodes...),
		Facts:    s.Facts, // grow replaces them when d writes facts
	}
	// The ids d names (its items' and their parents'), and which s holds.
	stored := make(map[string]bool, 2*len(d.Items))
	for i := range d.Items {
		stored[d.Items[i].ID] = false
		if p := d.Items[i].ParentID; p != "" {
			stored[p] = false
		}
	}
	texts := 0
	for i := range s.Items {
		texts += len(s.Items[i].Text)
		if _, ok := stored[s.Items[i].ID]; ok {
			stored[s.Items[i].ID] = true
		}
	}
	if err := grow(out, d, func(id string) bool { return stored[id] }, texts); err != nil {
		return nil, err
	}
	if len(d.Facts) == 0 {
		out.Facts = append(make([]Fact, 0, len(s.Facts)), s.Facts...)
	}
	return out, nil
}

// Replay rebuilds a session from its writes, in order, as a store reads its
// log back: each write is checked as Merge checks it, against an index of
// the session's item ids kept from write to write, so the whole takes time
// linear in the writes. The zero value is an empty session.
type Replay struct {
	s     Session
	ids   map[string]struct{}
	texts int
}

// Apply adds the next write; an error is Merge's, and leaves the replay
// unusable.
func (r *Replay) Apply(d Delta) error {
	if r.ids == nil {
		r.ids = map[string]struct{}{}
	}
	if err := grow(&r.s, d, func(id string) bool { _, ok := r.ids[id]; return ok }, r.texts); err != nil {
		return err
	}
	for i := range d.Items {
		r.ids[d.Items[i].ID] = struct{}{}
		r.texts += len(d.Items[i].Text)
	}
	return nil
}

// Session is the session so far; its slices are the replay's, with spare
// room a later Apply may fill.
func (r *Replay) Session() *Session { return &r.s }

// grow checks d against s, a valid session, and appends it to s. stored
// says whether s holds an item id and texts is the bytes of s's texts. The
// checks run in the order Merge's errors have always come in: ids unique
// (by position in d), the counts, each new item (its fields, then the
// session's text bytes), the new parents, their loops, the facts d
// writes, the new episodes. Nothing is changed on error.
func grow(s *Session, d Delta, stored func(string) bool, texts int) error {
	oldEpisodes := make(map[string]bool, len(s.Episodes))
	if len(d.Episodes) > 0 {
		for _, e := range s.Episodes {
			oldEpisodes[e.ID] = true
		}
	}
	if err := unique("items", "id", len(d.Items), stored, func(j int) string { return d.Items[j].ID }); err != nil {
		return err
	}
	if err := unique("episodes", "id", len(d.Episodes), func(id string) bool { return oldEpisodes[id] },
		func(j int) string { return d.Episodes[j].ID }); err != nil {
		return err
	}
	// Stored keys are replaced, not refused.
	if err := unique("facts", "key", len(d.Facts), func(string) bool { return false },
		func(j int) string { return d.Facts[j].Key }); err != nil {
		return err
	}
	// facts: where each fact of d goes (replacing a stored one, or after
	// them), and the facts of d in the order of the merged session.
	facts := mergeFacts(s.Facts, d.Facts)
	if err := checkCounts(len(s.Items)+len(d.Items), len(s.Facts)+len(facts.added), len(s.Episodes)+len(d.Episodes)); err != nil {
		switch err.Entry {
		case "items":
			err.Index -= len(s.Items)
		case "facts":
			err.Index = facts.added[err.Index-len(s.Facts)]
		case "episodes":
			err.Index -= len(s.Episodes)
		}
		return err
	}
	newAt := make(map[string]int, len(d.Items))
	for j := range d.Items {
		newAt[d.Items[j].ID] = j
	}
	for j := range d.Items {
		it := &d.Items[j]
		if err := ValidateItem(j, it); err != nil {
			return err
		}
		if texts += len(it.Text); texts > MaxSessionBytes {
			return sessionBytesError(j)
		}
	}
	for j := range d.Items {
		if p := d.Items[j].ParentID; p != "" && !stored(p) {
			if _, ok := newAt[p]; !ok {
				return noParentError(j, p)
			}
		}
	}
	// A stored item's chain ends among stored items, so a loop is new items only.
	if err := checkCycles(d.Items, newAt); err != nil {
		return err
	}
	for _, j := range facts.order {
		f := &d.Facts[j]
		if err := checkKeyed(factEntry, j, f.Key, f.Value); err != nil {
			return err
		}
	}
	for j := range d.Episodes {
		e := &d.Episodes[j]
		if err := checkKeyed(episodeEntry, j, e.ID, e.Text); err != nil {
			return err
		}
	}
	s.Items = append(s.Items, d.Items...)
	s.Episodes = append(s.Episodes, d.Episodes...)
	if len(d.Facts) > 0 {
		// A new array of the merged facts' length: s's may be shared.
		merged := make([]Fact, len(s.Facts)+len(facts.added))
		copy(merged, s.Facts)
		for j, i := range facts.at {
			merged[i] = d.Facts[j]
		}
		s.Facts = merged
	}
	return nil
}

// factMerge is where the facts of a write go.
type factMerge struct {
	// at is, per fact of the write, its position in the merged facts.
	at []int
	// added are the write's new keys, in order (after the stored facts).
	added []int
	// order is the write's facts in the order of the merged facts.
	order []int
}

func mergeFacts(old, d []Fact) factMerge {
	var m factMerge
	if len(d) == 0 {
		return m
	}
	pos := make(map[string]int, len(old))
	for i, f := range old {
		pos[f.Key] = i
	}
	m.at = make([]int, len(d))
	replaced := make([]int, len(old))
	for i := range replaced {
		replaced[i] = -1
	}
	for j, f := range d {
		if i, ok := pos[f.Key]; ok {
			m.at[j], replaced[i] = i, j
			continue
		}
		m.at[j] = len(old) + len(m.added)
		m.added = append(m.added, j)
	}
	for _, j := range replaced {
		if j >= 0 {
			m.order = append(m.order, j)
		}
	}
	m.order = append(m.order, m.added...)
	return m
}

// unique reports the first of the n entries of a write whose id is
// stored, or an earlier entry's of the write; positions are in the write.
func unique(entry, field string, n int, stored func(string) bool, id func(int) string) error {
	if n == 0 {
		return nil
	}
	seen := make(map[string]int, n)
	for j := range n {
		k := id(j)
		if stored(k) {
			return &Error{Entry: entry, Index: j, Field: field, Msg: fmt.Sprintf("%q is already in the session", k)}
		}
		if at, dup := seen[k]; dup {
			return &Error{Entry: entry, Index: j, Field: field, Msg: fmt.Sprintf("%q is also the %s of %s[%d]", k, field, entry, at)}
		}
		seen[k] = j
	}
	return nil
}
