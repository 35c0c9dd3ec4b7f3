package v1alpha1

import (
	"fmt"
	"path"
	"regexp"
	"regexp/syntax"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// labelNamePattern is the markers' pattern of a label name and an entity type.
var labelNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)

// MaxPatternInstructions bounds the compiled program of an entity pattern:
// RE2 matches in time linear in the text times the program, so the program's
// size is the cost that a short pattern like `(?:a|aa){1,995}b` hides (4,977
// instructions: 4 s on a 64 KiB question). The engine also bounds the text a
// pattern reads by its size (engine.PatternScanBytes).
const MaxPatternInstructions = 1000

// Default fills the fields the kubebuilder markers default. It is idempotent.
func (c *ContextClassifier) Default() {
	setDefault(&c.Spec.Threshold, "0")
	setDefault(&c.Spec.MaxAlternatives, int32(DefaultMaxAlternatives))
}

// Validate reports every invalid field of a defaulted ContextClassifier.
// Labels that only an examplesFrom file provides are checked when the file
// is read (the engine); everything else is checked here.
func (c *ContextClassifier) Validate() field.ErrorList {
	allErrs := validateObjectMeta(&c.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	s := &c.Spec
	allErrs = append(allErrs, validateParentRefs(spec.Child("parentRefs"), s.ParentRefs)...)
	if len(s.Labels) == 0 && s.ExamplesFrom == nil {
		allErrs = append(allErrs, field.Required(spec.Child("labels"), "set labels or examplesFrom (or both)"))
	}
	lp := spec.Child("labels")
	if len(s.Labels) > MaxClassifierLabels {
		allErrs = append(allErrs, field.TooMany(lp, len(s.Labels), MaxClassifierLabels))
	}
	seen := make(map[string]bool, len(s.Labels))
	examples, exampleBytes := 0, 0
	for i, l := range s.Labels {
		p := lp.Index(i)
		allErrs = append(allErrs, ValidateLabelName(p.Child("name"), l.Name)...)
		if seen[l.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), l.Name))
		}
		seen[l.Name] = true
		ep := p.Child("examples")
		switch {
		case len(l.Examples) == 0:
			allErrs = append(allErrs, field.Required(ep, "a label needs at least one example"))
		case len(l.Examples) > MaxExamplesPerLabel:
			allErrs = append(allErrs, field.TooMany(ep, len(l.Examples), MaxExamplesPerLabel))
		}
		for j, ex := range l.Examples {
			if msg := ExampleTextError(ex); msg != "" {
				allErrs = append(allErrs, field.Invalid(ep.Index(j), truncateValue(ex), msg))
			}
			examples, exampleBytes = examples+1, exampleBytes+len(ex)
		}
	}
	if msg := ExampleTotalsError(examples, exampleBytes, len(s.Labels)); msg != "" {
		allErrs = append(allErrs, field.Forbidden(lp, msg))
	}
	allErrs = append(allErrs, validateSourceFile(spec.Child("examplesFrom"), s.ExamplesFrom)...)
	if s.OutOfScopeLabel != "" {
		allErrs = append(allErrs, ValidateLabelName(spec.Child("outOfScopeLabel"), s.OutOfScopeLabel)...)
	}
	if !validDedupThreshold(s.Threshold) {
		allErrs = append(allErrs, field.Invalid(spec.Child("threshold"), s.Threshold, "must be a decimal in [0, 1], such as \"0.5\""))
	}
	if s.MaxAlternatives < 0 || s.MaxAlternatives > MaxAlternativesLimit {
		allErrs = append(allErrs, field.Invalid(spec.Child("maxAlternatives"), s.MaxAlternatives, fmt.Sprintf("must be between 0 and %d", MaxAlternativesLimit)))
	}
	xp := spec.Child("entities")
	if len(s.Entities) > MaxEntityExtractors {
		allErrs = append(allErrs, field.TooMany(xp, len(s.Entities), MaxEntityExtractors))
	}
	for i := range s.Entities {
		allErrs = append(allErrs, validateEntityExtractor(xp.Index(i), &s.Entities[i])...)
	}
	return allErrs
}

// ValidateLabelName checks a label name or an entity type.
func ValidateLabelName(p *field.Path, name string) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(p, "")}
	case len(name) > MaxLabelNameLength:
		return field.ErrorList{field.TooLong(p, name, MaxLabelNameLength)}
	case !labelNamePattern.MatchString(name):
		return field.ErrorList{field.Invalid(p, name, "must start with a letter or digit and hold only letters, digits, '_', '.', ':' and '-'")}
	}
	return nil
}

// ExampleTextError says what is wrong with an example's text, or "": the
// rule of inline examples and of the lines of an examplesFrom file.
func ExampleTextError(text string) string {
	switch {
	case strings.TrimSpace(text) == "":
		return "an example must not be blank"
	case len(text) > MaxExampleBytes:
		return fmt.Sprintf("%d bytes; examples are limited to %d bytes", len(text), MaxExampleBytes)
	}
	return ""
}

// ExampleTotalsError says what is wrong with the size of a classifier's
// examples, n of them with textBytes bytes of text and labels distinct
// labels, or "": the rule of the inline examples (Validate), of an
// examplesFrom file, line by line, and of both together (the router's load).
func ExampleTotalsError(n, textBytes, labels int) string {
	switch {
	case n > MaxClassifierExamples:
		return fmt.Sprintf("%d examples; a classifier is limited to %d", n, MaxClassifierExamples)
	case textBytes > MaxClassifierExampleBytes:
		return fmt.Sprintf("%d bytes of example text; a classifier is limited to %d (1 MiB)", textBytes, MaxClassifierExampleBytes)
	case labels*textBytes > MaxClassifierTrainingSize:
		return fmt.Sprintf("%d labels × %d bytes of example text is %d; a classifier is limited to %d (%d Mi), which trains in seconds: fewer labels or less text",
			labels, textBytes, labels*textBytes, MaxClassifierTrainingSize, MaxClassifierTrainingSize>>20)
	}
	return ""
}

func truncateValue(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// validateSourceFile checks a reference to a file of a source (nil is fine).
func validateSourceFile(p *field.Path, f *SourceFile) field.ErrorList {
	if f == nil {
		return nil
	}
	return append(validateRefName(p.Child("source"), f.Source), validateRelativeFile(p.Child("path"), f.Path)...)
}

// validateRelativeFile checks a slash path relative to a source root.
func validateRelativeFile(p *field.Path, file string) field.ErrorList {
	switch {
	case file == "":
		return field.ErrorList{field.Required(p, "")}
	case len(file) > MaxExamplesPathLength:
		return field.ErrorList{field.TooLong(p, file, MaxExamplesPathLength)}
	case strings.HasPrefix(file, "/") || strings.Contains(file, "\\"):
		return field.ErrorList{field.Invalid(p, file, "must be a relative path with '/' separators")}
	case path.Clean(file) != file || file == "." || strings.HasPrefix(file, "../"):
		return field.ErrorList{field.Invalid(p, file, "must be a clean relative path inside the source (no '.', '..' or empty segments)")}
	}
	return nil
}

func validateEntityExtractor(p *field.Path, x *EntityExtractor) field.ErrorList {
	allErrs := ValidateLabelName(p.Child("type"), x.Type)
	switch {
	case (x.Dictionary == nil) == (x.Pattern == ""):
		allErrs = append(allErrs, field.Invalid(p, x.Type, "set exactly one of dictionary and pattern"))
	case x.Dictionary != nil:
		vp := p.Child("dictionary", "values")
		vs := x.Dictionary.Values
		allErrs = append(allErrs, validateSourceFile(p.Child("dictionary", "valuesFrom"), x.Dictionary.ValuesFrom)...)
		switch {
		case (len(vs) == 0) == (x.Dictionary.ValuesFrom == nil):
			allErrs = append(allErrs, field.Invalid(p.Child("dictionary"), x.Type, "set exactly one of values and valuesFrom"))
		case len(vs) > MaxDictionaryValues:
			allErrs = append(allErrs, field.TooMany(vp, len(vs), MaxDictionaryValues))
		}
		allErrs = append(allErrs, validateStringSet(vp, vs)...)
		for i, v := range vs {
			if len(v) > MaxDictionaryValueSize {
				allErrs = append(allErrs, field.TooLong(vp.Index(i), truncateValue(v), MaxDictionaryValueSize))
			}
		}
	default:
		if _, _, err := CompileEntityPattern(x.Pattern); err != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("pattern"), truncateValue(x.Pattern), err.Error()))
		}
	}
	return allErrs
}

// CompileEntityPattern compiles an entity pattern: RE2, at most
// MaxPatternLength characters and MaxPatternInstructions instructions, and
// not matching the empty string (it would match between every two
// characters). It returns the size of the compiled program, the pattern's
// cost per byte of text. validate, admission and the router's load all call
// it, so they refuse the same patterns.
func CompileEntityPattern(pattern string) (re *regexp.Regexp, instructions int, err error) {
	if n := len([]rune(pattern)); n > MaxPatternLength {
		return nil, 0, fmt.Errorf("%d characters; patterns are limited to %d", n, MaxPatternLength)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, 0, err
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, 0, err
	}
	instructions = len(prog.Inst)
	if instructions > MaxPatternInstructions {
		return nil, 0, fmt.Errorf("compiles to %d instructions; patterns are limited to %d (repetitions like {1,100} multiply the size)", instructions, MaxPatternInstructions)
	}
	re, err = regexp.Compile(pattern)
	if err != nil {
		return nil, 0, err
	}
	if re.MatchString("") {
		return nil, 0, fmt.Errorf("matches the empty string; an entity needs at least one character")
	}
	return re, instructions, nil
}
