package session

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	s := &Session{
		Items: []Item{{ID: "c1", Kind: KindToolCall, Text: "x"}},
		Facts: []Fact{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}},
	}
	got, err := Merge(s, Delta{
		Items:    []Item{{ID: "r1", Kind: KindToolResult, ParentID: "c1", Text: "y"}},
		Facts:    []Fact{{Key: "c", Value: "3"}, {Key: "a", Value: "one"}},
		Episodes: []Episode{{ID: "e1", Text: "t"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := &Session{
		Items:    []Item{{ID: "c1", Kind: KindToolCall, Text: "x"}, {ID: "r1", Kind: KindToolResult, ParentID: "c1", Text: "y"}},
		Facts:    []Fact{{Key: "a", Value: "one"}, {Key: "b", Value: "2"}, {Key: "c", Value: "3"}},
		Episodes: []Episode{{ID: "e1", Text: "t"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge =\n%+v\nwant\n%+v", got, want)
	}
	if s.Facts[0].Value != "1" || len(s.Items) != 1 {
		t.Error("Merge changed its input")
	}
	// Errors name the entry's position in the write.
	for _, c := range []struct {
		name string
		d    Delta
		want string
	}{
		{"stored id", Delta{Items: []Item{{ID: "u", Kind: KindUserTurn}, {ID: "c1", Kind: KindToolCall}}}, `items[1].id: "c1" is already in the session`},
		{"bad parent", Delta{Items: []Item{{ID: "u", Kind: KindUserTurn, ParentID: "zz"}}}, `items[0].parent_id: no item has id "zz"`},
		{"fact key twice", Delta{Facts: []Fact{{Key: "k", Value: "1"}, {Key: "k", Value: "2"}}}, `facts[1].key: "k" is also the key of facts[0]`},
		{"item id twice", Delta{Items: []Item{{ID: "u", Kind: KindUserTurn}, {ID: "u", Kind: KindUserTurn}}}, `items[1].id: "u" is also the id of items[0]`},
		{"stored episode", Delta{Episodes: []Episode{{ID: "e", Text: "1"}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Merge(s, c.d)
			if c.want == "" {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || err.Error() != c.want {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// TestMergeChecksWhatTheWriteAdds: Merge checks only what a write adds
// (issue 23); mergeWhole is the merge it replaced, which validated the whole
// merged session. Over random sessions and writes, valid and not, both give
// the same session or the same error, and Replay the same as merging write
// after write.
func TestMergeChecksWhatTheWriteAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	rare := func(p int, usual, odd string) string {
		if rng.IntN(p) == 0 {
			return odd
		}
		return usual
	}
	item := func() Item {
		it := Item{ID: rare(30, pick(ids...), pick("x\u2028y", "")), Kind: Kind(rare(30, pick("user_turn", "tool_call", "tool_result"), pick("thought", ""))), Text: pick("t", "some text", "")}
		if rng.IntN(2) == 0 {
			it.ParentID = pick(ids...)
		}
		if rng.IntN(50) == 0 {
			it.Text = strings.Repeat("x", MaxItemBytes+1)
		}
		if rng.IntN(50) == 0 {
			it.TokenEstimate = -1
		}
		return it
	}
	keyed := func() (string, string) {
		k, v := rare(20, pick("k1", "k2", "k3", "e1", "e2"), pick("", "k\x1b")), pick("v", "")
		if rng.IntN(40) == 0 {
			v = strings.Repeat("v", MaxEpisodeBytes+1)
		}
		return k, v
	}
	write := func() Delta {
		var d Delta
		for range rng.IntN(4) {
			d.Items = append(d.Items, item())
		}
		for range rng.IntN(3) {
			k, v := keyed()
			d.Facts = append(d.Facts, Fact{Key: k, Value: v})
		}
		for range rng.IntN(2) {
			k, v := keyed()
			d.Episodes = append(d.Episodes, Episode{ID: k, Text: v})
		}
		return d
	}
	errs := 0
	kinds := []string{"parent chain loops", "is already in the session", "is also the", "no item has id", "is limited to", "unknown kind", "control character", "token_estimate"}
	seen := map[string]int{}
	for n := range 3000 {
		s := &Session{}
		var r Replay
		for w := range 6 {
			d := write()
			got, gerr := Merge(s, d)
			want, werr := mergeWhole(s, d)
			sameMerge(t, fmt.Sprintf("run %d write %d", n, w), got, want, gerr, werr)
			if werr != nil {
				errs++
				for _, k := range kinds {
					if strings.Contains(werr.Error(), k) {
						seen[k]++
					}
				}
				break
			}
			rerr := r.Apply(d)
			sameMerge(t, fmt.Sprintf("run %d replay %d", n, w), r.Session(), want, rerr, nil)
			s = want
		}
	}
	for _, k := range kinds {
		if seen[k] == 0 {
			t.Errorf("no write was refused with %q; the cases do not reach every error (%d refused)", k, errs)
		}
	}
}

// TestMergeLimits: a write past the limits of a whole session, onto a
// session at or near them, gives the error the whole-session check gave.
func TestMergeLimits(t *testing.T) {
	full := &Session{}
	for i := range MaxItems {
		full.Items = append(full.Items, Item{ID: fmt.Sprint(i), Kind: KindUserTurn, Text: strings.Repeat("x", MaxSessionBytes/MaxItems)})
	}
	for i := range MaxFacts {
		full.Facts = append(full.Facts, Fact{Key: fmt.Sprint(i), Value: "v"})
	}
	for i := range MaxEpisodes - 1 {
		full.Episodes = append(full.Episodes, Episode{ID: fmt.Sprint(i), Text: "v"})
	}
	almost := &Session{Items: full.Items[:MaxItems-2], Facts: full.Facts[:MaxFacts-1], Episodes: full.Episodes}
	for _, c := range []struct {
		name string
		s    *Session
		d    Delta
	}{
		{"one item too many", full, Delta{Items: []Item{{ID: "n", Kind: KindUserTurn}}}},
		{"items past the limit", almost, Delta{Items: []Item{{ID: "n1", Kind: KindUserTurn}, {ID: "n2", Kind: KindUserTurn}, {ID: "n3", Kind: KindUserTurn}}}},
		{"texts past the session's bytes", almost, Delta{Items: []Item{{ID: "n1", Kind: KindUserTurn, Text: strings.Repeat("y", 2000)}, {ID: "n2", Kind: KindUserTurn, Text: strings.Repeat("y", 2000)}}}},
		{"a fact too many", almost, Delta{Facts: []Fact{{Key: "1", Value: "replaced"}, {Key: "new1", Value: "v"}, {Key: "new2", Value: "v"}}}},
		{"a replaced fact within the limit", almost, Delta{Facts: []Fact{{Key: "1", Value: "replaced"}, {Key: "new1", Value: "v"}}}},
		{"an episode too many", almost, Delta{Episodes: []Episode{{ID: "n1", Text: "v"}, {ID: "n2", Text: "v"}}}},
		{"a replaced fact too long", almost, Delta{Facts: []Fact{{Key: "new1", Value: "v"}, {Key: "3", Value: strings.Repeat("v", MaxFactBytes+1)}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, gerr := Merge(c.s, c.d)
			want, werr := mergeWhole(c.s, c.d)
			sameMerge(t, c.name, got, want, gerr, werr)
		})
	}
}

// sameMerge fails t unless two merges gave the same session or error.
func sameMerge(t *testing.T, what string, got, want *Session, gerr, werr error) {
	t.Helper()
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || tooLarge(gerr) != tooLarge(werr) {
		t.Fatalf("%s: err = %v, want %v", what, gerr, werr)
	}
	// An empty list and none are the same session.
	norm := func(s *Session) Session {
		return Session{Items: append([]Item{}, s.Items...), Facts: append([]Fact{}, s.Facts...), Episodes: append([]Episode{}, s.Episodes...)}
	}
	if werr == nil && !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("%s: session =\n%+v\nwant\n%+v", what, got, want)
	}
}

func tooLarge(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.TooLarge
}

// mergeWhole is Merge as it was before issue 23: the merged session
// checked whole with Validate, the error's index mapped back into the
// write. It is the oracle of TestMergeChecksWhatTheWriteAdds.
func mergeWhole(s *Session, d Delta) (*Session, error) {
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
	if err := uniqueWhole("items", "id", len(s.Items), len(d.Items), func(i int) string { return out.Items[i].ID }); err != nil {
		return nil, err
	}
	if err := uniqueWhole("episodes", "id", len(s.Episodes), len(d.Episodes), func(i int) string { return out.Episodes[i].ID }); err != nil {
		return nil, err
	}
	// Stored keys are replaced, not refused.
	if err := uniqueWhole("facts", "key", 0, len(d.Facts), func(i int) string { return d.Facts[i].Key }); err != nil {
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
func uniqueWhole(entry, field string, old, n int, id func(int) string) error {
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
