package redisstore

import (
	"reflect"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// FuzzItemRecord: any stored value decodes to an item or an error, never a
// panic; an item that decodes survives an encode and a decode unchanged.
func FuzzItemRecord(f *testing.F) {
	for _, it := range []session.Item{
		{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Sensitivity: "Restricted", Text: `{"a": 1}`,
			Tags: []string{"x"}, Metadata: map[string]string{"k": "v", "a": "b"}, TokenEstimate: 7},
		{ID: "u", Kind: session.KindUserTurn},
		{ID: "p", Kind: session.KindPlanState, Pinned: true},
	} {
		f.Add(encodeItem(&it))
	}
	f.Add("\x01\x05")
	f.Add(`{"id":"x"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var it session.Item
		if err := decodeItem(raw, &it); err != nil {
			return
		}
		var back session.Item
		if err := decodeItem(encodeItem(&it), &back); err != nil || !reflect.DeepEqual(it, back) {
			t.Fatalf("%+v does not survive a round trip: %+v, %v", it, back, err)
		}
	})
}
