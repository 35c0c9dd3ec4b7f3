// Package problem is the one way contextrouter says that something is wrong
// with an object: the manifest loader, the engine, the bundle, the webhook
// and the operator's status all report a Problem, so a mistake reads the same
// in `validate`, at `kubectl apply` and in `kubectl get -o yaml`.
package problem

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// Severity says whether a problem stops an object from being used.
type Severity uint8

const (
	// Error: the object cannot be used as it is.
	Error Severity = iota
	// Warning: worth knowing; the object is used anyway.
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Location is where an object or one of its fields was read: a manifest file
// and a 1-based line. Objects read from the API server have none.
type Location struct {
	File string
	Line int
	// Column is the 1-based column (in characters) of the offending
	// character, when known: inside a CEL condition.
	Column int
}

// String returns "file:line[:column]", the file alone when the line is
// unknown, or "".
func (l Location) String() string {
	if l.Line > 0 && l.File != "" {
		s := l.File + ":" + strconv.Itoa(l.Line)
		if l.Column > 0 {
			s += ":" + strconv.Itoa(l.Column)
		}
		return s
	}
	return l.File
}

// Problem is one thing wrong with one object.
type Problem struct {
	// Location of the field (or of the object) when it was read from a file.
	Location
	// Kind and Name of the object ("" when unknown, such as a file that is
	// not YAML).
	Kind, Name string
	// Field is the path of the offending field, like spec.sources[1].name
	// ("" for the whole object).
	Field string
	// Message says what is wrong, on one line.
	Message string
	// Severity is Error unless the object is used anyway.
	Severity Severity
	// Reason is the machine-readable reason a status reports for it
	// ("" for problems no status carries, such as a file that cannot be read).
	Reason v1alpha1.ConditionReason
}

// Error returns "file:line: Kind/name: field: message", leaving out the parts
// that are unknown.
func (p Problem) Error() string {
	var b strings.Builder
	if loc := p.Location.String(); loc != "" {
		b.WriteString(loc)
		b.WriteString(": ")
	}
	if p.Kind != "" {
		b.WriteString(p.Kind)
		if p.Name != "" {
			b.WriteString("/" + p.Name)
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Detail())
	return b.String()
}

// Detail returns "field: message", the part that concerns the object itself
// (what a status message of that object shows).
func (p Problem) Detail() string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

// IsWarning reports whether the problem is a warning.
func (p Problem) IsWarning() bool { return p.Severity == Warning }

// Of reports whether the problem concerns the object kind/name.
func (p Problem) Of(kind, name string) bool { return p.Kind == kind && p.Name == name }

// Covers reports whether p is about the same object as q and about a field
// that contains q's field, contains it or is it: q then adds nothing that
// p does not already say (the same rule checked twice, or a consequence).
func (p Problem) Covers(q Problem) bool {
	return p.Kind == q.Kind && p.Name == q.Name && (Within(q.Field, p.Field) || Within(p.Field, q.Field))
}

// Within reports whether the field path inner is path or lies inside it
// ("spec.sources[0].name" is within "spec.sources" and "spec"; "" is the
// whole object).
func Within(inner, path string) bool {
	if path == "" {
		return true
	}
	if !strings.HasPrefix(inner, path) {
		return false
	}
	rest := inner[len(path):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// List is a list of problems. As an error it prints one problem per line;
// use Err to return it, so that an empty list is a nil error.
type List []Problem

func (l List) Error() string {
	lines := make([]string, len(l))
	for i, p := range l {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns the list as an error, or nil when it holds no error (warnings
// alone are not one).
func (l List) Err() error {
	if !l.HasErrors() {
		return nil
	}
	return l
}

// HasErrors reports whether any problem is an error.
func (l List) HasErrors() bool {
	return slices.ContainsFunc(l, func(p Problem) bool { return p.Severity == Error })
}

// Errors returns the problems that are errors.
func (l List) Errors() List { return l.filter(func(p Problem) bool { return p.Severity == Error }) }

// Warnings returns the problems that are warnings.
func (l List) Warnings() List { return l.filter(func(p Problem) bool { return p.Severity == Warning }) }

// Of returns the problems of one object.
func (l List) Of(kind, name string) List {
	return l.filter(func(p Problem) bool { return p.Of(kind, name) })
}

// OfKind returns the problems of objects of one kind.
func (l List) OfKind(kind string) List {
	return l.filter(func(p Problem) bool { return p.Kind == kind })
}

func (l List) filter(keep func(Problem) bool) List {
	var out List
	for _, p := range l {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// Details joins the Detail of every problem with "; ", for a status message.
func (l List) Details() string {
	parts := make([]string, 0, len(l))
	for _, p := range l {
		if d := p.Detail(); !slices.Contains(parts, d) {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, "; ")
}

// Sort orders problems for printing: by file (in rank order; problems
// without a file last), line, kind, name, field and message. Problems that
// compare equal keep their order.
func (l List) Sort(rank func(file string) int) {
	kindOrder := func(k string) int {
		switch k {
		case v1alpha1.KindContextRouter:
			return 0
		case v1alpha1.KindContextRoute:
			return 1
		case v1alpha1.KindContextSource:
			return 2
		case v1alpha1.KindAgentPermission:
			return 3
		}
		return 4
	}
	fileKey := func(p Problem) int {
		if p.File == "" {
			return int(^uint(0) >> 1)
		}
		return rank(p.File)
	}
	slices.SortStableFunc(l, func(a, b Problem) int {
		if d := fileKey(a) - fileKey(b); d != 0 {
			return sign(d)
		}
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		if d := a.Line - b.Line; d != 0 {
			return sign(d)
		}
		if d := kindOrder(a.Kind) - kindOrder(b.Kind); d != 0 {
			return sign(d)
		}
		for _, c := range []int{strings.Compare(a.Name, b.Name), strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message)} {
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

func sign(d int) int {
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Dedup drops exact repeats (same object, field and message), keeping the
// first; the order is otherwise kept.
func (l List) Dedup() List {
	type key struct{ kind, name, field, msg string }
	seen := make(map[key]bool, len(l))
	var out List
	for _, p := range l {
		k := key{p.Kind, p.Name, p.Field, p.Message}
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

// FromFieldErrors turns the field errors of one object (api/v1alpha1
// Validate and the engine's checks) into errors with reason. The message is
// the error without its field, as the API server words it.
func FromFieldErrors(kind, name string, errs field.ErrorList, reason v1alpha1.ConditionReason) List {
	out := make(List, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem{Kind: kind, Name: name, Field: e.Field, Message: OneLine(e.ErrorBody()), Reason: reason})
	}
	return out
}

// OneLine makes a problem's message fit one line: each of its lines is
// made one clean line as textutil.OneLine makes any text, and the lines are
// joined by "; ", as separate issues. CEL puts an excerpt of the expression
// with a caret under each issue (lines starting with " | "); the issue line
// already names the column, so the excerpt is dropped.
func OneLine(msg string) string {
	if !strings.Contains(msg, "\n") {
		return textutil.OneLine(msg)
	}
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if strings.HasPrefix(line, " | ") {
			continue
		}
		if line = textutil.OneLine(line); line != "" && line != "|" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// Errorf returns an error of kind/name at field.
func Errorf(reason v1alpha1.ConditionReason, kind, name, fieldPath, format string, args ...any) Problem {
	return Problem{Kind: kind, Name: name, Field: fieldPath, Message: fmt.Sprintf(format, args...), Reason: reason}
}
