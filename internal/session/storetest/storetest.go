// Package storetest is the conformance test every session.Store passes: the
// embedded store and the Redis store run the same table, so they keep one
// set of semantics (docs/api.md §11.8).
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// Run runs every case against fresh stores made by newStore, which must
// return an empty store (its own, or one with a prefix no other case uses)
// and close it when t ends.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore(t))
		})
	}
}

// Items of the cases: a call, its result, a turn.
var (
	call   = session.Item{ID: "c1", Kind: session.KindToolCall, Text: "hr.balance(user=me)"}
	result = session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: `{"days": 28, "taken": 9}`,
		Tags: []string{"hr"}, Metadata: map[string]string{"tool": "hr.balance"}, TokenEstimate: 12, Sensitivity: "Confidential", Pinned: true}
	turn = session.Item{ID: "u1", Kind: session.KindUserTurn, Text: "How many days do I have left?"}
)

const (
	alice = "alice"
	bob   = "bob"
)

var ctx = context.Background()

var cases = []struct {
	name string
	run  func(t *testing.T, s session.Store)
}{
	{"append then load returns the session in order", func(t *testing.T, s session.Store) {
		ids := mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call, result},
			Facts: []session.Fact{{Key: "customer", Value: "ACME"}}, Episodes: []session.Episode{{ID: "e1", Text: "asked about PTO"}}})
		if want := []string{"c1", "r1"}; !reflect.DeepEqual(ids, want) {
			t.Errorf("ids = %v, want %v", ids, want)
		}
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{turn}})
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call, result, turn},
			Facts: []session.Fact{{Key: "customer", Value: "ACME"}}, Episodes: []session.Episode{{ID: "e1", Text: "asked about PTO"}}})
	}},
	{"a parent may be an item of an earlier write", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call}})
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{result}})
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call, result}})
	}},
	{"a fact replaces the fact of its key in place; new keys are appended", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Facts: []session.Fact{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}})
		mustAppend(t, s, "s1", alice, session.Delta{Facts: []session.Fact{{Key: "c", Value: "3"}, {Key: "a", Value: "one"}}})
		expect(t, s, "s1", alice, &session.Session{Facts: []session.Fact{{Key: "a", Value: "one"}, {Key: "b", Value: "2"}, {Key: "c", Value: "3"}}})
	}},
	{"sessions are separate", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call}})
		mustAppend(t, s, "s2", alice, session.Delta{Items: []session.Item{turn}})
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call}})
		expect(t, s, "s2", alice, &session.Session{Items: []session.Item{turn}})
	}},
	{"an unknown session is not found", func(t *testing.T, s session.Store) {
		if _, err := s.Load(ctx, "nope", alice); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Load: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "nope", alice); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Delete: %v, want ErrNotFound", err)
		}
	}},
	{"another agent is forbidden and changes nothing", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call}})
		if _, err := s.Append(ctx, "s1", bob, session.Delta{Items: []session.Item{turn}}); !errors.Is(err, session.ErrForbidden) {
			t.Errorf("Append by bob: %v, want ErrForbidden", err)
		}
		if _, err := s.Load(ctx, "s1", bob); !errors.Is(err, session.ErrForbidden) {
			t.Errorf("Load by bob: %v, want ErrForbidden", err)
		}
		if err := s.Delete(ctx, "s1", bob); !errors.Is(err, session.ErrForbidden) {
			t.Errorf("Delete by bob: %v, want ErrForbidden", err)
		}
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call}})
	}},
	{"an invalid write is refused whole and writes nothing", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call}, Facts: []session.Fact{{Key: "a", Value: "1"}}})
		bad := []struct {
			name  string
			d     session.Delta
			entry string
			index int
			field string
		}{
			{"unknown parent", session.Delta{Items: []session.Item{turn, {ID: "x", Kind: session.KindToolResult, ParentID: "missing"}},
				Facts: []session.Fact{{Key: "a", Value: "changed"}}}, "items", 1, "parent_id"},
			{"id already stored", session.Delta{Items: []session.Item{turn, call}}, "items", 1, "id"},
			{"unknown kind", session.Delta{Items: []session.Item{{ID: "t", Kind: "thought"}}}, "items", 0, "kind"},
			{"parent loop", session.Delta{Items: []session.Item{{ID: "p", Kind: session.KindToolCall, ParentID: "q"},
				{ID: "q", Kind: session.KindToolCall, ParentID: "p"}}}, "items", 0, "parent_id"},
			{"fact key twice", session.Delta{Facts: []session.Fact{{Key: "b", Value: "1"}, {Key: "b", Value: "2"}}}, "facts", 1, "key"},
			{"episode id twice", session.Delta{Episodes: []session.Episode{{ID: "e", Text: "x"}, {ID: "e", Text: "y"}}}, "episodes", 1, "id"},
			{"item text past the limit", session.Delta{Items: []session.Item{{ID: "big", Kind: session.KindToolResult,
				Text: strings.Repeat("x", session.MaxItemBytes+1)}}}, "items", 0, "text"},
			// One fact is stored: the 1000th of the write is the first past the limit.
			{"facts past the limit", session.Delta{Facts: manyFacts(session.MaxFacts)}, "facts", session.MaxFacts - 1, "key"},
		}
		for _, b := range bad {
			_, err := s.Append(ctx, "s1", alice, b.d)
			var e *session.Error
			if !errors.As(err, &e) {
				t.Errorf("%s: err = %v, want a *session.Error", b.name, err)
				continue
			}
			if e.Entry != b.entry || e.Index != b.index || e.Field != b.field {
				t.Errorf("%s: err = %v, want %s[%d].%s", b.name, err, b.entry, b.index, b.field)
			}
		}
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call}, Facts: []session.Fact{{Key: "a", Value: "1"}}})
	}},
	{"an invalid first write creates no session", func(t *testing.T, s session.Store) {
		if _, err := s.Append(ctx, "s1", alice, session.Delta{Items: []session.Item{result}}); err == nil {
			t.Fatal("a result whose call is missing was stored")
		}
		if _, err := s.Load(ctx, "s1", alice); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Load: %v, want ErrNotFound", err)
		}
		// Nor does it claim the id: another agent may create it.
		mustAppend(t, s, "s1", bob, session.Delta{Items: []session.Item{turn}})
	}},
	{"delete removes the session and frees its id", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call, result}})
		if err := s.Delete(ctx, "s1", alice); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, "s1", alice); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Load after delete: %v, want ErrNotFound", err)
		}
		if _, err := s.Artifact(ctx, alice, session.ArtifactRef(result.Text)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Artifact after delete: %v, want ErrNotFound", err)
		}
		mustAppend(t, s, "s1", bob, session.Delta{Items: []session.Item{turn}})
		expect(t, s, "s1", bob, &session.Session{Items: []session.Item{turn}})
	}},
	{"artifacts are found by ref for their agent only", func(t *testing.T, s session.Store) {
		big := session.Item{ID: "r2", Kind: session.KindToolResult, ParentID: "c1", Text: strings.Repeat("row,", 1500)}
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call, result}})
		mustAppend(t, s, "s2", alice, session.Delta{Items: []session.Item{call, big}})
		for _, it := range []session.Item{result, big} {
			got, err := s.Artifact(ctx, alice, session.ArtifactRef(it.Text))
			if err != nil || got != it.Text {
				t.Errorf("Artifact(%s) = %.40q, %v; want the result's text", it.ID, got, err)
			}
		}
		if _, err := s.Artifact(ctx, bob, session.ArtifactRef(big.Text)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Artifact by bob: %v, want ErrNotFound", err)
		}
		// A tool call's text is no artifact.
		if _, err := s.Artifact(ctx, alice, session.ArtifactRef(call.Text)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Artifact of a call: %v, want ErrNotFound", err)
		}
		if _, err := s.Artifact(ctx, alice, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("unknown ref: %v, want ErrNotFound", err)
		}
	}},
	{"a ref not in ArtifactRef's form is refused, upper-case hex included", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call, result}})
		ref := session.ArtifactRef(result.Text)
		for _, bad := range []string{strings.ToUpper(ref), "sha256:" + strings.ToUpper(ref[len("sha256:"):]), ref[:len(ref)-1], "SHA256" + ref[len("sha256"):], ref + "0", ""} {
			_, want := session.ParseArtifactRef(bad)
			got, err := s.Artifact(ctx, alice, bad)
			if !errors.Is(err, session.ErrBadArtifactRef) || want == nil || err.Error() != want.Error() {
				t.Errorf("Artifact(%q) = %.20q, %v; want the error of ParseArtifactRef: %v", bad, got, err, want)
			}
		}
	}},
	{"concurrent writes to one session lose nothing", func(t *testing.T, s session.Store) {
		const writers, per = 4, 10
		var wg sync.WaitGroup
		errs := make(chan error, writers*per)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					it := session.Item{ID: fmt.Sprintf("w%d-%d", w, i), Kind: session.KindAgentMessage, Text: "x"}
					if _, err := s.Append(ctx, "s1", alice, session.Delta{Items: []session.Item{it}}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := s.Load(ctx, "s1", alice)
		if err != nil {
			t.Fatal(err)
		}
		next := make([]int, writers)
		for _, it := range got.Items {
			var w, i int
			if _, err := fmt.Sscanf(it.ID, "w%d-%d", &w, &i); err != nil || i != next[w] {
				t.Fatalf("item %s out of its writer's order (want w%d-%d)", it.ID, w, next[w])
			}
			next[w]++
		}
		if len(got.Items) != writers*per {
			t.Errorf("%d items, want %d", len(got.Items), writers*per)
		}
	}},
	{"a loaded session is the caller's copy", func(t *testing.T, s session.Store) {
		mustAppend(t, s, "s1", alice, session.Delta{Items: []session.Item{call, result}, Facts: []session.Fact{{Key: "a", Value: "1"}}})
		got, err := s.Load(ctx, "s1", alice)
		if err != nil {
			t.Fatal(err)
		}
		got.Items[0].Text = "changed"
		got.Items[1].Tags[0] = "changed"
		got.Items[1].Metadata["tool"] = "changed"
		got.Facts[0].Value = "changed"
		expect(t, s, "s1", alice, &session.Session{Items: []session.Item{call, result}, Facts: []session.Fact{{Key: "a", Value: "1"}}})
	}},
}

func manyFacts(n int) []session.Fact {
	out := make([]session.Fact, n+1)
	for i := range out {
		out[i] = session.Fact{Key: fmt.Sprintf("k%d", i), Value: "v"}
	}
	return out
}

func mustAppend(t *testing.T, s session.Store, id, agent string, d session.Delta) []string {
	t.Helper()
	ids, err := s.Append(ctx, id, agent, d)
	if err != nil {
		t.Fatalf("Append(%s, %s): %v", id, agent, err)
	}
	return ids
}

// expect loads a session and compares it with want; nil and empty lists are
// the same.
func expect(t *testing.T, s session.Store, id, agent string, want *session.Session) {
	t.Helper()
	got, err := s.Load(ctx, id, agent)
	if err != nil {
		t.Fatalf("Load(%s, %s): %v", id, agent, err)
	}
	if !Equal(got, want) {
		t.Errorf("Load(%s) =\n  %+v\nwant\n  %+v", id, *got, *want)
	}
}

// Equal compares sessions, nil and empty lists and maps alike.
func Equal(a, b *session.Session) bool {
	return reflect.DeepEqual(normal(a), normal(b))
}

func normal(s *session.Session) session.Session {
	out := session.Session{}
	for _, it := range s.Items {
		if len(it.Tags) == 0 {
			it.Tags = nil
		}
		if len(it.Metadata) == 0 {
			it.Metadata = nil
		}
		out.Items = append(out.Items, it)
	}
	out.Facts = append(out.Facts, s.Facts...)
	out.Episodes = append(out.Episodes, s.Episodes...)
	return out
}
