package v1alpha1

import (
	"strings"
	"testing"
)

func validClassifier() *ContextClassifier {
	c := &ContextClassifier{}
	c.Name = "intent"
	c.Spec.Labels = []ClassifierLabel{{Name: "refund", Examples: []string{"money back"}}, {Name: "deploy", Examples: []string{"roll out"}}}
	c.Spec.Entities = []EntityExtractor{{Type: "ticket", Pattern: `[A-Z]+-[0-9]+`}, {Type: "team", Dictionary: &EntityDictionary{Values: []string{"payments"}}}}
	return c
}

func TestContextClassifierValidate(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := []struct {
		name  string
		edit  func(c *ContextClassifier)
		field string // "" = valid
		msg   string
	}{
		{"valid", func(*ContextClassifier) {}, "", ""},
		{"examplesFrom only", func(c *ContextClassifier) {
			c.Spec.Labels = nil
			c.Spec.ExamplesFrom = &SourceFile{Source: "ex", Path: "a/train.jsonl"}
		}, "", ""},
		{"no labels nor file", func(c *ContextClassifier) { c.Spec.Labels = nil }, "spec.labels", "set labels or examplesFrom"},
		{"label without examples", func(c *ContextClassifier) { c.Spec.Labels[1].Examples = nil }, "spec.labels[1].examples", "at least one example"},
		{"blank example", func(c *ContextClassifier) { c.Spec.Labels[0].Examples = []string{"  "} }, "spec.labels[0].examples[0]", "must not be blank"},
		{"example too long", func(c *ContextClassifier) {
			c.Spec.Labels[0].Examples = []string{strings.Repeat("a", MaxExampleBytes+1)}
		}, "spec.labels[0].examples[0]", "limited to 1024 bytes"},
		{"too many examples", func(c *ContextClassifier) {
			c.Spec.Labels[0].Examples = many(MaxExamplesPerLabel+1, func(i int) string { return "x" })
		}, "spec.labels[0].examples", "must have at most 1000 items"},
		{"too many examples in all", func(c *ContextClassifier) {
			c.Spec.Labels = nil
			for i := 0; i*MaxExamplesPerLabel <= MaxClassifierExamples; i++ {
				c.Spec.Labels = append(c.Spec.Labels, ClassifierLabel{Name: "l" + itoa(i), Examples: many(MaxExamplesPerLabel, func(int) string { return "x" })})
			}
		}, "spec.labels", "21000 examples; a classifier is limited to 20000"},
		{"examples at the limit of text", func(c *ContextClassifier) {
			long := strings.Repeat("a", MaxExampleBytes)
			c.Spec.Labels[0].Examples = many(MaxExamplesPerLabel, func(int) string { return long })
			c.Spec.Labels[1].Examples = many(MaxClassifierExampleBytes/MaxExampleBytes-MaxExamplesPerLabel, func(int) string { return long })
		}, "", ""},
		{"examples past the limit of text", func(c *ContextClassifier) {
			long := strings.Repeat("a", MaxExampleBytes)
			c.Spec.Labels[0].Examples = many(MaxExamplesPerLabel, func(int) string { return long })
			c.Spec.Labels[1].Examples = many(MaxClassifierExampleBytes/MaxExampleBytes-MaxExamplesPerLabel, func(int) string { return long })
			c.Spec.Labels[1].Examples[0] += "!"
		}, "spec.labels", "1048577 bytes of example text; a classifier is limited to 1048576 (1 MiB)"},
		{"labels × text at the limit", func(c *ContextClassifier) {
			// 256 labels of 512 bytes each: 256 × 131,072 bytes = 32 Mi.
			c.Spec.Labels = nil
			for i := range MaxClassifierLabels {
				c.Spec.Labels = append(c.Spec.Labels, ClassifierLabel{Name: "l" + itoa(i), Examples: []string{strings.Repeat("a", 256), strings.Repeat("b", 256)}})
			}
		}, "", ""},
		{"labels × text past the limit", func(c *ContextClassifier) {
			c.Spec.Labels = nil
			for i := range MaxClassifierLabels {
				c.Spec.Labels = append(c.Spec.Labels, ClassifierLabel{Name: "l" + itoa(i), Examples: []string{strings.Repeat("a", 256), strings.Repeat("b", 257)}})
			}
		}, "spec.labels", "256 labels × 131328 bytes of example text is 33619968; a classifier is limited to 33554432 (32 Mi)"},
		{"too many labels", func(c *ContextClassifier) {
			c.Spec.Labels = nil
			for i := 0; i <= MaxClassifierLabels; i++ {
				c.Spec.Labels = append(c.Spec.Labels, ClassifierLabel{Name: "l" + itoa(i), Examples: []string{"x"}})
			}
		}, "spec.labels", "must have at most 256 items"},
		{"duplicate label", func(c *ContextClassifier) { c.Spec.Labels[1].Name = "refund" }, "spec.labels[1].name", "Duplicate value"},
		{"bad label name", func(c *ContextClassifier) { c.Spec.Labels[1].Name = "-x" }, "spec.labels[1].name", "must start with a letter or digit"},
		{"threshold", func(c *ContextClassifier) { c.Spec.Threshold = "1.5" }, "spec.threshold", "decimal in [0, 1]"},
		{"maxAlternatives", func(c *ContextClassifier) { c.Spec.MaxAlternatives = 11 }, "spec.maxAlternatives", "between 0 and 10"},
		{"path escapes", func(c *ContextClassifier) { c.Spec.ExamplesFrom = &SourceFile{Source: "ex", Path: "../x.jsonl"} }, "spec.examplesFrom.path", "clean relative path"},
		{"absolute path", func(c *ContextClassifier) { c.Spec.ExamplesFrom = &SourceFile{Source: "ex", Path: "/x.jsonl"} }, "spec.examplesFrom.path", "relative path"},
		{"pattern does not compile", func(c *ContextClassifier) { c.Spec.Entities[0].Pattern = "([a-z" }, "spec.entities[0].pattern", "missing closing ]"},
		{"pattern matches empty", func(c *ContextClassifier) { c.Spec.Entities[0].Pattern = "a*" }, "spec.entities[0].pattern", "matches the empty string"},
		{"pattern program too large", func(c *ContextClassifier) {
			c.Spec.Entities[0].Pattern = `[a-z]{1,1000}[0-9]{1,1000}[a-z]{1,1000}[0-9]{1,1000}[a-z]{1,1000}[0-9]{1,1000}`
		}, "spec.entities[0].pattern", "instructions"},
		// A short pattern whose program is large: accepted before issue 22
		// (4,977 instructions), 4 s on a 64 KiB question.
		{"pattern past the instruction limit", func(c *ContextClassifier) { c.Spec.Entities[0].Pattern = `(?:a|aa){1,995}b` },
			"spec.entities[0].pattern", "compiles to 4977 instructions; patterns are limited to 1000"},
		{"pattern at the instruction limit", func(c *ContextClassifier) { c.Spec.Entities[0].Pattern = `(?:a|aa){1,199}b` }, "", ""},
		{"pattern too long", func(c *ContextClassifier) { c.Spec.Entities[0].Pattern = strings.Repeat("a", MaxPatternLength+1) }, "spec.entities[0].pattern", "limited to 1024"},
		{"both dictionary and pattern", func(c *ContextClassifier) { c.Spec.Entities[1].Pattern = "x+" }, "spec.entities[1]", "exactly one of dictionary and pattern"},
		{"dictionary too large", func(c *ContextClassifier) {
			c.Spec.Entities[1].Dictionary.Values = many(MaxDictionaryValues+1, func(i int) string { return "v" + itoa(i) })
		}, "spec.entities[1].dictionary.values", "must have at most 10000 items"},
		{"dictionary value too long", func(c *ContextClassifier) {
			c.Spec.Entities[1].Dictionary.Values = []string{strings.Repeat("v", MaxDictionaryValueSize+1)}
		}, "spec.entities[1].dictionary.values[0]", "may not be more than 256"},
		{"dictionary from a file", func(c *ContextClassifier) {
			c.Spec.Entities[1].Dictionary = &EntityDictionary{ValuesFrom: &SourceFile{Source: "lists", Path: "teams.txt"}}
		}, "", ""},
		{"dictionary with values and a file", func(c *ContextClassifier) {
			c.Spec.Entities[1].Dictionary.ValuesFrom = &SourceFile{Source: "lists", Path: "teams.txt"}
		}, "spec.entities[1].dictionary", "set exactly one of values and valuesFrom"},
		{"dictionary with neither", func(c *ContextClassifier) { c.Spec.Entities[1].Dictionary.Values = nil },
			"spec.entities[1].dictionary", "set exactly one of values and valuesFrom"},
		{"dictionary file escapes the source", func(c *ContextClassifier) {
			c.Spec.Entities[1].Dictionary = &EntityDictionary{ValuesFrom: &SourceFile{Source: "lists", Path: "a/../../teams.txt"}}
		}, "spec.entities[1].dictionary.valuesFrom.path", "clean relative path"},
		{"too many extractors", func(c *ContextClassifier) {
			for len(c.Spec.Entities) <= MaxEntityExtractors {
				c.Spec.Entities = append(c.Spec.Entities, EntityExtractor{Type: "t", Pattern: "x+"})
			}
		}, "spec.entities", "must have at most 32 items"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClassifier()
			tc.edit(c)
			c.Default()
			errs := c.Validate()
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.msg) {
					return
				}
			}
			t.Fatalf("want an error at %s containing %q, got %v", tc.field, tc.msg, errs)
		})
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestContextClassifierDefault(t *testing.T) {
	c := validClassifier()
	c.Default()
	if c.Spec.Threshold != "0" || c.Spec.MaxAlternatives != DefaultMaxAlternatives {
		t.Fatalf("defaults: threshold %q, maxAlternatives %d", c.Spec.Threshold, c.Spec.MaxAlternatives)
	}
}
