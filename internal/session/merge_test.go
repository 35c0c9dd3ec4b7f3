package session

import (
	"errors"
	"reflect"
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
