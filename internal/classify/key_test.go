package classify

import (
	"reflect"
	"testing"
)

// keyValues returns two different non-zero values of a field's type, for
// TestOptionsKeyCoversEveryField; ok is false for a type it cannot set yet.
func keyValues(t reflect.Type) (a, b reflect.Value, ok bool) {
	switch {
	case t.Kind() == reflect.String:
		return reflect.ValueOf("x").Convert(t), reflect.ValueOf("y").Convert(t), true
	case t.Kind() == reflect.Bool:
		// A bool has one non-zero value: b is the zero, a the other.
		return reflect.ValueOf(true).Convert(t), reflect.ValueOf(false).Convert(t), true
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return reflect.ValueOf(int64(2)).Convert(t), reflect.ValueOf(int64(-3)).Convert(t), true
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		return reflect.ValueOf(uint64(2)).Convert(t), reflect.ValueOf(uint64(3)).Convert(t), true
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return reflect.ValueOf(0.25).Convert(t), reflect.ValueOf(0.75).Convert(t), true
	case t == reflect.TypeFor[[]string]():
		return reflect.ValueOf([]string{"x"}), reflect.ValueOf([]string{"x", "y"}), true
	case t == reflect.TypeFor[[]Example]():
		return reflect.ValueOf([]Example{{Text: "a", Label: "x"}}), reflect.ValueOf([]Example{{Text: "a", Label: "y"}}), true
	}
	return reflect.Value{}, reflect.Value{}, false
}

// TestOptionsKeyCoversEveryField: every field of Options, set to a value
// and then to another, changes the key. A field added to Options and not
// to Key fails here, so a trained-model cache cannot serve a model trained
// with other options.
func TestOptionsKeyCoversEveryField(t *testing.T) {
	examples := []Example{{Text: "refund please", Label: "refund"}}
	base := Options{}.Key(examples)
	typ := reflect.TypeFor[Options]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			a, b, ok := keyValues(f.Type)
			if !ok || !f.IsExported() {
				t.Fatalf("Options.%s (%s): teach keyValues to set it, and make sure Options.Key covers it", f.Name, f.Type)
			}
			var oa, ob Options
			reflect.ValueOf(&oa).Elem().Field(i).Set(a)
			reflect.ValueOf(&ob).Elem().Field(i).Set(b)
			ka, kb := oa.Key(examples), ob.Key(examples)
			if ka == base {
				t.Errorf("setting %s to %v leaves the key unchanged", f.Name, a)
			}
			if ka == kb {
				t.Errorf("%s = %v and %s = %v give one key", f.Name, a, f.Name, b)
			}
		})
	}
}

// TestKeyOfExamples: the key is the same for the same run and differs for
// any change of the examples, their order and their boundaries included.
func TestKeyOfExamples(t *testing.T) {
	opts := Options{OutOfScopeLabel: "oos", Threshold: 0.4, Labels: []string{"a", "b"}}
	exs := []Example{{Text: "one", Label: "a"}, {Text: "two", Label: "b"}}
	key := opts.Key(exs)
	if again := opts.Key([]Example{{Text: "one", Label: "a"}, {Text: "two", Label: "b"}}); again != key {
		t.Errorf("equal runs, keys %s and %s", key, again)
	}
	if len(key) != 64 {
		t.Errorf("key %q: want 64 hex digits", key)
	}
	for name, other := range map[string][]Example{
		"a text":           {{Text: "one!", Label: "a"}, {Text: "two", Label: "b"}},
		"a label":          {{Text: "one", Label: "b"}, {Text: "two", Label: "b"}},
		"the order":        {{Text: "two", Label: "b"}, {Text: "one", Label: "a"}},
		"one less":         {{Text: "one", Label: "a"}},
		"a boundary moved": {{Text: "on", Label: "ea"}, {Text: "two", Label: "b"}},
		"none":             nil,
	} {
		if opts.Key(other) == key {
			t.Errorf("%s changed, the key did not", name)
		}
	}
	// Validation examples and training examples are not interchangeable.
	withVal := opts
	withVal.Validation = exs
	if withVal.Key(nil) == opts.Key(exs) {
		t.Error("the same examples as validation and as training give one key")
	}
}
