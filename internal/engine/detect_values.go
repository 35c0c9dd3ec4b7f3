package engine

import (
	"reflect"

	"github.com/contextrouter/contextrouter/internal/classify"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// record is a CEL map with a few fixed string keys — a classifier result,
// an alternative, an entity — that conditions read by key. A query builds
// several; a Go map each (types.NewRefValMap) was most of detection's
// allocations. Lookups scan the keys; what a condition rarely does
// (iterate, compare whole maps, convert) goes through a real CEL map built
// on first use.
type record struct {
	keys []types.String
	// src makes the value of keys[i] when a condition reads it: a field no
	// condition reads is never boxed.
	src  fields
	full traits.Mapper
}

// fields makes the values of a record's keys.
type fields interface{ field(i int) ref.Val }

var _ traits.Mapper = (*record)(nil)

// resultFields are a classifier's result: label, confidence, alternatives
// (the list is made on first read).
type resultFields struct {
	r    classify.Result
	alts ref.Val
}

func (f *resultFields) field(i int) ref.Val {
	switch i {
	case 0:
		return types.String(f.r.Label)
	case 1:
		return types.Double(f.r.Confidence)
	}
	if f.alts == nil {
		vals := make([]ref.Val, len(f.r.Alternatives))
		for j := range f.r.Alternatives {
			vals[j] = &record{keys: alternativeKeys, src: alternativeFields{&f.r.Alternatives[j]}}
		}
		f.alts = types.NewRefValList(types.DefaultTypeAdapter, vals)
	}
	return f.alts
}

type alternativeFields struct{ a *classify.Alternative }

func (f alternativeFields) field(i int) ref.Val {
	if i == 0 {
		return types.String(f.a.Label)
	}
	return types.Double(f.a.Confidence)
}

type entityFields struct{ e *Entity }

func (f entityFields) field(i int) ref.Val {
	switch i {
	case 0:
		return types.String(f.e.Type)
	case 1:
		return types.String(f.e.Value)
	case 2:
		return types.Int(f.e.Start)
	}
	return types.Int(f.e.End)
}

// Key sets of the records, shared by every record of a kind.
var (
	resultKeys      = []types.String{"label", "confidence", "alternatives"}
	alternativeKeys = []types.String{"label", "confidence"}
	entityKeys      = []types.String{"type", "value", "start", "end"}
)

func (r *record) mapper() traits.Mapper {
	if r.full == nil {
		m := make(map[ref.Val]ref.Val, len(r.keys))
		for i, k := range r.keys {
			m[k] = r.src.field(i)
		}
		r.full = types.NewRefValMap(types.DefaultTypeAdapter, m).(traits.Mapper)
	}
	return r.full
}

func (r *record) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		for i, rk := range r.keys {
			if rk == k {
				return r.src.field(i), true
			}
		}
		return nil, false
	}
	return r.mapper().Find(key)
}

func (r *record) Get(key ref.Val) ref.Val {
	if v, ok := r.Find(key); ok {
		return v
	}
	return r.mapper().Get(key) // the error CEL gives for a missing key
}

func (r *record) Contains(key ref.Val) ref.Val {
	_, ok := r.Find(key)
	return types.Bool(ok)
}

func (r *record) Size() ref.Val                    { return types.Int(len(r.keys)) }
func (r *record) Iterator() traits.Iterator        { return r.mapper().Iterator() }
func (r *record) Type() ref.Type                   { return types.MapType }
func (r *record) Value() any                       { return r.mapper().Value() }
func (r *record) Equal(other ref.Val) ref.Val      { return r.mapper().Equal(other) }
func (r *record) ConvertToType(t ref.Type) ref.Val { return r.mapper().ConvertToType(t) }
func (r *record) ConvertToNative(t reflect.Type) (any, error) {
	return r.mapper().ConvertToNative(t)
}
