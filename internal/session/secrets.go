package session

import (
	"maps"

	"github.com/contextrouter/contextrouter/internal/secrets"
)

// Masked counts the values masked in a write, per rule id of
// internal/secrets. It holds counts only, never a value.
type Masked map[string]int

// Total is the number of values masked.
func (m Masked) Total() int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// MaskSecrets masks the secrets of a write before it is stored (api.md
// §11.10): items' text and metadata values, fact values and episode texts.
// sc nil (spec.sessions.secrets: Off) masks nothing. Entries that change are
// copied, so the caller's slices and maps are never written to: the Go API
// masks a session its caller still holds. Ids, kinds and tags are names,
// checked by Validate, and are not scanned.
func MaskSecrets(sc *secrets.Scanner, d *Delta) Masked {
	if sc == nil {
		return nil
	}
	var m Masked
	count := func(found []secrets.Finding) bool {
		if len(found) == 0 {
			return false
		}
		m = secrets.Counts(m, found)
		return true
	}
	copied := false
	for i := range d.Items {
		it := d.Items[i]
		changed := false
		if t, found := sc.Mask(it.Text); count(found) {
			it.Text, changed = t, true
		}
		if md, ok := maskMetadata(sc, it.Metadata, count); ok {
			it.Metadata, changed = md, true
		}
		if changed {
			if !copied {
				d.Items, copied = append([]Item(nil), d.Items...), true
			}
			d.Items[i] = it
		}
	}
	copied = false
	for i, f := range d.Facts {
		if v, found := sc.MaskValue(f.Key, f.Value); count(found) {
			if !copied {
				d.Facts, copied = append([]Fact(nil), d.Facts...), true
			}
			d.Facts[i].Value = v
		}
	}
	copied = false
	for i, e := range d.Episodes {
		if t, found := sc.Mask(e.Text); count(found) {
			if !copied {
				d.Episodes, copied = append([]Episode(nil), d.Episodes...), true
			}
			d.Episodes[i].Text = t
		}
	}
	return m
}

// maskMetadata masks the values of an item's metadata, each as the value of
// its key; a changed map is a new map.
func maskMetadata(sc *secrets.Scanner, md map[string]string, count func([]secrets.Finding) bool) (map[string]string, bool) {
	var out map[string]string
	for k, v := range md {
		if mv, found := sc.MaskValue(k, v); count(found) {
			if out == nil {
				out = maps.Clone(md)
			}
			out[k] = mv
		}
	}
	return out, out != nil
}

// MaskSessionSecrets masks a whole session as MaskSecrets masks a write: for
// sessions that enter whole (a session file, the Go API). It returns s itself
// when nothing is masked, else a copy.
func MaskSessionSecrets(sc *secrets.Scanner, s *Session) (*Session, Masked) {
	d := Delta{Items: s.Items, Facts: s.Facts, Episodes: s.Episodes}
	m := MaskSecrets(sc, &d)
	if m == nil {
		return s, nil
	}
	return &Session{Items: d.Items, Facts: d.Facts, Episodes: d.Episodes}, m
}
