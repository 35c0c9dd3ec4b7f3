package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/lru"
)

func TestCELEnvironment(t *testing.T) {
	vars := types.DefaultTypeAdapter.NativeToValue(map[string]any{"region": "eu", "tier": 2, "teams": []any{"hr", "eng"}})
	req := &Request{
		Text:     "How many Vacation-days do new employees get? Ptolemy asks.",
		Agent:    "hr-assistant",
		Tags:     []string{"hr", "onboarding"},
		Metadata: map[string]string{"department": "people", "priority": "high"},
	}
	tests := []struct {
		when string
		want bool
		err  string
	}{
		// containsAnyWord: case-insensitive, whole words, stemmed, phrases.
		{`containsAnyWord(text, ["vacation"])`, true, ""},
		{`containsAnyWord(text, ["VACATIONS"])`, true, ""},
		{`containsAnyWord(text, ["employee"])`, true, ""},
		{`containsAnyWord(text, ["pto"])`, false, ""}, // "Ptolemy" is not the word "pto"
		{`containsAnyWord(text, ["vacation days"])`, true, ""},
		{`containsAnyWord(text, ["days vacation"])`, false, ""},
		{`containsAnyWord(text, ["how"])`, true, ""}, // stopwords can be asked for
		{`containsAnyWord(text, [])`, false, ""},
		{`containsAllWords(text, ["new", "employees", "vacation"])`, true, ""},
		{`containsAllWords(text, ["new", "salary"])`, false, ""},
		{`containsAllWords(text, [])`, false, ""},
		{`containsAnyWord(metadata["department"], ["people"])`, true, ""},
		// Variables and the ext libraries.
		{`agent == "hr-assistant" && "onboarding" in tags`, true, ""},
		{`tags.exists(t, t.startsWith("onb"))`, true, ""},
		{`vars.region == "eu" && vars.tier >= 2 && "eng" in vars.teams`, true, ""},
		{`text.lowerAscii().contains("vacation-days")`, true, ""},
		{`text.split(" ").size() > 3`, true, ""},
		{`metadata[?"missing"].orValue("none") == "none"`, true, ""},
		{`[3, 1, 2].sort() == [1, 2, 3]`, true, ""},
		// Runtime errors are errors (the pipeline reports them as route_errors).
		{`metadata["missing"] == "x"`, false, "no such key"},
		{`vars.nope == 1`, false, "no such key"},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			checkCondition(t, tt.when, newActivation(req, vars), tt.want, tt.err)
		})
	}
}

// checkCondition evaluates a condition and checks its result, or its error
// when wantErr is set.
func checkCondition(t *testing.T, when string, act *activation, want bool, wantErr string) {
	t.Helper()
	c, err := compileCached(when)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	got, err := c.eval(context.Background(), act)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want %q", err, wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("= %v, %v; want %v", got, err, want)
	}
}

func TestCompileConditionErrors(t *testing.T) {
	tests := []struct{ when, want string }{
		{`text +`, "Syntax error"},
		{`unknownVar == 1`, "undeclared reference to 'unknownVar'"},
		{`containsAnyWord(text, "pto")`, "found no matching overload for 'containsAnyWord'"},
		{`size(text)`, "must evaluate to bool, not int"},
		{`tags`, "must evaluate to bool, not list(string)"},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			_, err := CompileCondition(tt.when)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
	if prg, err := CompileCondition(""); prg != nil || err != nil {
		t.Errorf("empty condition = %v, %v; want nil, nil", prg, err)
	}
}

// A condition in theaios syntax fails to compile with a hint at CEL and at
// convert; a CEL error on a CEL-looking condition gets no hint.
func TestCompileConditionTheaiosHint(t *testing.T) {
	tests := []struct {
		when string
		hint bool
	}{
		{`text contains "pto"`, true},
		{`text CONTAINS 'pto'`, true},
		{`agent == "hr" and text contains "x"`, true},
		{`agent == "hr" OR agent == "ops"`, true},
		{`not (text contains "salary")`, true},
		{`"urgent" not in tags`, true},
		{`text starts_with "Ticket"`, true},
		{`department == "eng" AND $tier > 2`, true},
		{`text.contains("pto") &&`, false},
		{`unknownVar == 1`, false},
		{`text.contains(contains)`, false},
		{`text.contains("salt and pepper") &&`, false},
		{`text.contains('not in stock') ||`, false},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			_, err := CompileCondition(tt.when)
			if err == nil {
				t.Fatal("compiled; want an error")
			}
			if got := strings.Contains(err.Error(), "this looks like theaios condition syntax; conditions are CEL: text.contains(\"x\")"); got != tt.hint {
				t.Errorf("hint = %v, want %v; error: %v", got, tt.hint, err)
			}
		})
	}
	// The route check (validate, the webhook) carries the hint on one line, after CEL's column.
	r := &v1alpha1.ContextRoute{Spec: v1alpha1.ContextRouteSpec{When: `text contains "pto"`, Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}}}}
	r.Name = "pto"
	errs := CheckRoute(r)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "<input>:1:6: Syntax error") || !strings.HasSuffix(errs[0].Error(), "(see contextrouter convert --from theaios)") {
		t.Errorf("CheckRoute = %v", errs)
	}
}

// TestCompiledCacheEvictsLeastRecentlyUsed: past its bound the program
// cache drops the condition used longest ago, not every condition (it
// emptied itself, so one expression too many recompiled them all). The
// cache is swapped for one of the same kind with a bound of 4, so the test
// compiles a few programs, not 16,384.
func TestCompiledCacheEvictsLeastRecentlyUsed(t *testing.T) {
	saved := compiled
	compiled = lru.New[string, compileResult](4)
	t.Cleanup(func() { compiled = saved })
	const keep, drop = `text.contains("keep")`, `text.contains("drop")`
	kept, err := compileCached(keep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compileCached(drop); err != nil {
		t.Fatal(err)
	}
	// Fill to one past the bound; keep is used halfway, drop never again.
	for i := range 3 {
		if _, err := compileCached(fmt.Sprintf(`text.contains("x%d")`, i)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if c, _ := compileCached(keep); c != kept {
				t.Fatal("keep was recompiled below the bound")
			}
		}
	}
	if n := compiled.Len(); n != 4 {
		t.Errorf("%d programs cached, want the bound, 4", n)
	}
	if _, ok := compiled.Get(drop); ok {
		t.Error("the least recently used condition was kept past the bound")
	}
	if c, _ := compileCached(keep); c != kept {
		t.Error("a recently used condition was dropped (recompiled)")
	}
}
