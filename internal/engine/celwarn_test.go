package engine

import (
	"reflect"
	"strings"
	"testing"
)

func TestUnguardedMetadataKeys(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`metadata.role == "admin"`, []string{"role"}},
		{`metadata["team"] == "ops" || metadata.role == "x"`, []string{"role", "team"}},
		{`has(metadata.role) && metadata.role == "admin"`, nil},
		{`"team" in metadata && metadata["team"] == "ops"`, nil},
		{`metadata[?"role"].orValue("") == "admin"`, nil},
		{`metadata.?role.orValue("") == "admin"`, nil},
		{`has(metadata.role) && metadata.team == "x"`, []string{"team"}},
		{`"my-key" in metadata ? metadata["my-key"] == "1" : metadata["other-key"] == "2"`, []string{"other-key"}},
		{`size(metadata) > 0 && metadata.exists(k, k == "a")`, nil},
		{`vars.region == "eu" && tags.exists(t, t == "x")`, nil},
		{`metadata[agent] == "x"`, nil}, // not a constant key: nothing to name
		{`metadata.role ==`, nil},       // does not parse: the compile error says so
		{``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			if got := UnguardedMetadataKeys(tt.expr); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("UnguardedMetadataKeys(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestUnguardedMetadataMessage(t *testing.T) {
	for key, guard := range map[string]string{"role": "has(metadata.role)", "my-key": `"my-key" in metadata`} {
		msg := UnguardedMetadataMessage(key)
		for _, want := range []string{guard, `metadata[?"` + key + `"].orValue("")`, "no such key: " + key} {
			if !strings.Contains(msg, want) {
				t.Errorf("message for %q = %q, want it to name %s", key, msg, want)
			}
		}
	}
}

// BenchmarkUnguardedMetadataKeys: the warning is found while compiling
// (a few allocations more per cold compile) and asking for it again costs
// a cache look-up, not a parse.
func BenchmarkUnguardedMetadataKeys(b *testing.B) {
	const expr = `containsAnyWord(text, ["pto", "vacation", "holiday"]) || "hr" in tags || metadata.department == "hr"`
	b.Run("warning", func(b *testing.B) {
		for b.Loop() {
			UnguardedMetadataKeys(expr)
		}
	})
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			if _, err := compileCondition(expr); err != nil {
				b.Fatal(err)
			}
		}
	})
}
