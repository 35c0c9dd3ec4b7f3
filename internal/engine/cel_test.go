package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
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
