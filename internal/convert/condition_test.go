package convert

import (
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// req is a request a translated condition is evaluated on.
type req struct {
	text, agent string
	tags        []string
	metadata    map[string]string
}

func (r req) activation(vars map[string]any) map[string]any {
	tags, md := r.tags, r.metadata
	if tags == nil {
		tags = []string{}
	}
	if md == nil {
		md = map[string]string{}
	}
	return map[string]any{"text": r.text, "agent": r.agent, "tags": tags, "metadata": md, "vars": vars,
		"detected": map[string]any{}, "entities": []map[string]any{}}
}

var testVars = map[string]any{"company_domain": "acme.com", "vip": []any{"vip", "exec"}, "strict": true, "tier": 2.0}

// Each operator, precedence and quoting: the exact CEL, which must compile,
// and what it answers for requests (the theaios reading of the condition).
func TestTranslateConditions(t *testing.T) {
	type want struct {
		r     req
		match bool
	}
	tests := []struct {
		name, in string
		words    bool
		cel      string
		cases    []want
	}{
		{"contains is a case-sensitive substring", `text contains "PTO"`, false, `text.contains("PTO")`,
			[]want{{req{text: "my PTO days"}, true}, {req{text: "my pto days"}, false}, {req{text: "PTOs"}, true}}},
		{"--words: whole words, any case, stemmed", `text contains "policy"`, true, `containsAnyWord(text, ["policy"])`,
			[]want{{req{text: "our Policies"}, true}, {req{text: "policymaker"}, false}}},
		{"--words merges neighbouring word tests of one text", `text contains "pto" or "vacation" in text or agent == "hr" or text contains "leave" or text starts_with "x"`, true,
			`containsAnyWord(text, ["pto", "vacation"]) || agent == "hr" || containsAnyWord(text, ["leave"]) || text.startsWith("x")`,
			[]want{{req{text: "Vacations"}, true}, {req{text: "on leave"}, true}, {req{agent: "hr"}, true}, {req{text: "pt"}, false}}},
		{"--words inside and", `(text contains "pto" or text contains "leave") and not text contains "salary"`, true,
			`containsAnyWord(text, ["pto", "leave"]) && !containsAnyWord(text, ["salary"])`,
			[]want{{req{text: "PTO"}, true}, {req{text: "PTO salary"}, false}}},
		{"--words keeps list membership", `tags contains "hr"`, true, `"hr" in tags`,
			[]want{{req{tags: []string{"hr"}}, true}, {req{tags: []string{"hrx"}}, false}}},
		{"contains on tags is membership", `tags contains "urgent"`, false, `"urgent" in tags`,
			[]want{{req{tags: []string{"a", "urgent"}}, true}, {req{tags: []string{"urgently"}}, false}}},
		{"in a list", `"urgent" in tags`, false, `"urgent" in tags`,
			[]want{{req{tags: []string{"urgent"}}, true}, {req{}, false}}},
		{"not in", `"urgent" not in tags`, false, `!("urgent" in tags)`,
			[]want{{req{tags: []string{"urgent"}}, false}, {req{}, true}}},
		{"in a string is a substring", `"pto" in text`, false, `text.contains("pto")`,
			[]want{{req{text: "a pto day"}, true}, {req{text: "PTO"}, false}}},
		{"in a list literal", `agent in ["hr", "ops"]`, false, `agent in ["hr", "ops"]`,
			[]want{{req{agent: "ops"}, true}, {req{agent: "eng"}, false}}},
		{"starts_with", `text starts_with 'Ticket'`, false, `text.startsWith("Ticket")`,
			[]want{{req{text: "Ticket 4"}, true}, {req{text: "a Ticket"}, false}}},
		{"ends_with", `text ends_with "?"`, false, `text.endsWith("?")`,
			[]want{{req{text: "why?"}, true}, {req{text: "why"}, false}}},
		{"matches a regular expression", `text matches "^INC-[0-9]+"`, false, `text.matches("^INC-[0-9]+")`,
			[]want{{req{text: "INC-42 down"}, true}, {req{text: "see INC-42"}, false}}},
		{"equality", `agent == "hr-assistant"`, false, `agent == "hr-assistant"`,
			[]want{{req{agent: "hr-assistant"}, true}, {req{agent: "hr"}, false}}},
		{"inequality", `agent != "hr"`, false, `agent != "hr"`,
			[]want{{req{agent: "ops"}, true}, {req{agent: "hr"}, false}}},
		{"a metadata key is guarded", `department == "engineering"`, false, `("department" in metadata && metadata["department"] == "engineering")`,
			[]want{{req{metadata: map[string]string{"department": "engineering"}}, true}, {req{}, false}}},
		{"a missing key differs", `department != "hr"`, false, `(!("department" in metadata) || metadata["department"] != "hr")`,
			[]want{{req{}, true}, {req{metadata: map[string]string{"department": "hr"}}, false}, {req{metadata: map[string]string{"department": "eng"}}, true}}},
		{"metadata.key and metadata[key]", `metadata.team == "a" or metadata["team"] == "b"`, false,
			`("team" in metadata && metadata["team"] == "a") || ("team" in metadata && metadata["team"] == "b")`,
			[]want{{req{metadata: map[string]string{"team": "b"}}, true}, {req{}, false}}},
		{"a metadata key against a number", `priority >= 3`, false, `("priority" in metadata && double(metadata["priority"]) >= 3.0)`,
			[]want{{req{metadata: map[string]string{"priority": "5"}}, true}, {req{metadata: map[string]string{"priority": "1"}}, false}, {req{}, false}}},
		{"ordering", `$tier < 3 and $tier > 1.5 and $tier <= 2 and $tier >= 2`, false, `vars.tier < 3.0 && vars.tier > 1.5 && vars.tier <= 2.0 && vars.tier >= 2.0`,
			[]want{{req{}, true}}},
		{"== null tests presence", `department == null`, false, `!("department" in metadata)`,
			[]want{{req{}, true}, {req{metadata: map[string]string{"department": "x"}}, false}}},
		{"!= None", `department != None`, false, `"department" in metadata`,
			[]want{{req{}, false}, {req{metadata: map[string]string{"department": "x"}}, true}}},
		{"variables", `$company_domain in text`, false, `text.contains(vars.company_domain)`,
			[]want{{req{text: "mail bob@acme.com"}, true}, {req{text: "mail"}, false}}},
		{"a list variable", `agent in $vip`, false, `agent in vars.vip`,
			[]want{{req{agent: "exec"}, true}, {req{agent: "bob"}, false}}},
		{"a bool variable alone", `$strict`, false, `vars.strict == true`, []want{{req{}, true}}},
		{"truth of tags", `not tags`, false, `!(size(tags) > 0)`,
			[]want{{req{}, true}, {req{tags: []string{"x"}}, false}}},
		{"and binds tighter than or", `agent == "a" or agent == "b" and text contains "x"`, false,
			`agent == "a" || agent == "b" && text.contains("x")`,
			[]want{{req{agent: "a"}, true}, {req{agent: "b"}, false}, {req{agent: "b", text: "x"}, true}}},
		{"parentheses are kept where needed", `(agent == "a" or agent == "b") and text contains "x"`, false,
			`(agent == "a" || agent == "b") && text.contains("x")`,
			[]want{{req{agent: "a"}, false}, {req{agent: "a", text: "x"}, true}}},
		{"not binds tighter than and", `not text contains "salary" and agent == "hr"`, false,
			`!text.contains("salary") && agent == "hr"`,
			[]want{{req{agent: "hr", text: "pto"}, true}, {req{agent: "hr", text: "salary"}, false}}},
		{"not of a group", `not (agent == "a" or agent == "b")`, false, `!(agent == "a" || agent == "b")`,
			[]want{{req{agent: "c"}, true}, {req{agent: "a"}, false}}},
		{"right-nested or keeps its parentheses", `agent == "a" and (agent == "b" or text contains "x")`, false,
			`agent == "a" && (agent == "b" || text.contains("x"))`, []want{{req{agent: "a", text: "x"}, true}}},
		{"keywords in any case", `text CONTAINS "a" AND NOT text contains "b" Or agent == "z"`, false,
			`text.contains("a") && !text.contains("b") || agent == "z"`, []want{{req{text: "a"}, true}, {req{text: "ab"}, false}}},
		{"quotes and escapes", `text contains "say \"hi\"\\now" or text contains 'it\'s' or text contains "tab\there"`, false,
			`text.contains("say \"hi\"\\now") || text.contains("it's") || text.contains("tab\there")`,
			[]want{{req{text: `they say "hi"\now`}, true}, {req{text: "it's"}, true}, {req{text: "tab\there"}, true}, {req{text: `say "hi"`}, false}}},
		{"unicode", `text contains "café" or text contains "\u00e9t\u00e9"`, false, `text.contains("café") || text.contains("été")`,
			[]want{{req{text: "un café"}, true}, {req{text: "cafe"}, false}, {req{text: "été"}, true}}},
		{"booleans", `true and not false`, false, `true && !false`, []want{{req{}, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree, err := parseCondition(tt.in)
			if err != nil {
				t.Fatalf("parse %q: %v", tt.in, err)
			}
			e, err := (&translator{vars: testVars, words: tt.words}).translate(tree)
			if err != nil {
				t.Fatalf("translate %q: %v", tt.in, err)
			}
			if e.s != tt.cel {
				t.Fatalf("translate %q\n got %s\nwant %s", tt.in, e.s, tt.cel)
			}
			prg, err := engine.CompileCondition(e.s)
			if err != nil {
				t.Fatalf("%s does not compile: %v", e.s, err)
			}
			for _, c := range tt.cases {
				out, _, err := prg.Eval(c.r.activation(testVars))
				if err != nil {
					t.Fatalf("%s on %+v: %v", e.s, c.r, err)
				}
				if out.Value() != c.match {
					t.Errorf("%s on %+v = %v, want %v", e.s, c.r, out.Value(), c.match)
				}
			}
		})
	}
}

// Conditions that do not parse are errors at their character; those that
// parse but have no CEL equivalent are untranslatable (the route is left out).
func TestConditionErrors(t *testing.T) {
	tests := []struct {
		in      string
		pos     int // -1: untranslatable
		message string
	}{
		{`text includes "x"`, 5, `unknown operator "includes"`},
		{`text contains "x" AND`, 21, "unexpected end of the condition"},
		{`text contains "x`, 14, "unclosed string"},
		{`(text contains "x"`, 18, "unclosed parenthesis"},
		{`text = "x"`, 5, `unknown operator "="`},
		{`text contains "x" "y"`, 18, "an operator is missing"},
		{`text && agent`, 5, "unexpected character"},
		{`agent in ["a", "b"`, 9, "unclosed list"},
		{`$nope == "x"`, 0, "$nope is not defined in variables"},
		{`contains "x"`, 0, `expected a value before "contains"`},
		{`text matches email`, -1, "named matcher"},
		{`text matches "(?<=a)b"`, -1, "is not RE2"},
		{`user.role == "admin"`, -1, "dotted path has no equivalent"},
		{`text < null`, -1, "with null"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tree, err := parseCondition(tt.in)
			if err == nil {
				_, err = (&translator{vars: testVars}).translate(tree)
			}
			if err == nil || !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("error = %v, want %q", err, tt.message)
			}
			if ce, ok := err.(*condError); ok {
				if ce.pos != tt.pos {
					t.Errorf("at %d, want %d", ce.pos, tt.pos)
				}
			} else if _, ok := err.(*untranslatable); !ok || tt.pos != -1 {
				t.Errorf("error %T %v, want a condError at %d", err, err, tt.pos)
			}
		})
	}
}

// The fnmatch deny_paths become doublestar globs that deny the same paths.
func TestDenyGlobs(t *testing.T) {
	tests := []struct {
		in    string
		out   []string
		exact bool
	}{
		{"**/secrets/**", []string{"**/secrets/**"}, true},
		{"salaries/report.md", []string{"salaries/report.md"}, true},
		{"*.env", []string{"**/*.env"}, true},
		{"secret*", []string{"secret*", "secret*/**"}, true},
		{"*secret*", []string{"**/*secret*", "**/*secret*/**"}, true},
		{"salaries/*", []string{"salaries/**"}, true},
		{"a*/b*.md", []string{"a*/b*.md"}, false},
		{"a*b", []string{"a*b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			out, exact := denyGlobs(tt.in)
			if strings.Join(out, " ") != strings.Join(tt.out, " ") || exact != tt.exact {
				t.Errorf("denyGlobs(%q) = %q, %v; want %q, %v", tt.in, out, exact, tt.out, tt.exact)
			}
		})
	}
}
