package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// The Check functions are the whole per-object check: the API rules of
// api/v1alpha1 (Validate) and what only the engine knows — CEL conditions,
// the source factories' checks, the router settings this version supports.
// They need no other object and read nothing, so the webhook, `validate`,
// the manifest loader, the bundle and the operator's status all call them
// and word a mistake the same way. They expect a defaulted object. A field
// that Validate already reports is not reported again by the engine: one
// message per field.

// CheckRouter checks a router and its engine settings (such as the ranking
// strategies this version implements).
func CheckRouter(r *v1alpha1.ContextRouter) field.ErrorList {
	errs := r.Validate()
	var s Snapshot
	s.setRouter(r, func(path, msg string) {
		if !reported(errs, path) {
			errs = append(errs, field.Invalid(field.NewPath(path), valueAt(r, path), problem.OneLine(msg)))
		}
	})
	return errs
}

// CheckRoute checks a route and compiles spec.when exactly as the engine
// does; the CEL compiler's message names the column.
func CheckRoute(r *v1alpha1.ContextRoute) field.ErrorList {
	errs := r.Validate()
	when := field.NewPath("spec", "when")
	if !reported(errs, when.String()) {
		if _, err := CompileCondition(r.Spec.When); err != nil {
			errs = append(errs, field.Invalid(when, r.Spec.When, problem.OneLine(err.Error())))
		}
	}
	return errs
}

// CheckSource checks a source and runs its factory, which checks what the
// schema cannot (URL templates, JSON bodies, field paths, git refs) without
// reading files, cloning or calling anything, and without secrets.
func CheckSource(s *v1alpha1.ContextSource) field.ErrorList {
	errs := s.Validate()
	if t := s.Spec.Tools; t != nil && t.Catalog != nil {
		// Every problem of an inline catalog, not only the factory's first.
		for _, p := range sources.CheckInlineCatalog(t.Catalog) {
			if !reported(errs, p.Field) {
				errs = append(errs, field.Invalid(field.NewPath(p.Field), field.OmitValueType{}, problem.OneLine(p.Message)))
			}
		}
	}
	if _, err := sources.New(s, checkEnv); err != nil {
		// As in Compile: no URL user part in any message.
		path, msg := SplitFieldError(redact.Error(err).Error())
		if !reported(errs, path) {
			errs = append(errs, field.Invalid(field.NewPath(path), field.OmitValueType{}, problem.OneLine(msg)))
		}
	}
	return errs
}

// CheckPermission checks a permission: Validate covers everything the engine
// relies on (globs included).
func CheckPermission(p *v1alpha1.AgentPermission) field.ErrorList {
	return p.Validate()
}

// CheckClassifier checks a classifier: Validate covers every rule of the
// spec (patterns compile within their limits); examples in a source file
// are checked when the router reads them.
func CheckClassifier(c *v1alpha1.ContextClassifier) field.ErrorList {
	return c.Validate()
}

// RouteReason is the reason a status gives for a route problem at path:
// InvalidCondition for spec.when, InvalidSpec for the rest.
func RouteReason(path string) v1alpha1.ConditionReason {
	if problem.Within(path, "spec.when") {
		return v1alpha1.ReasonInvalidCondition
	}
	return v1alpha1.ReasonInvalidSpec
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// checkEnv lets a factory check a spec without any surroundings: no
// secrets, no environment variables, no base folder.
var checkEnv = sources.Env{
	Secrets: noSecrets{},
	Getenv:  func(string) string { return "" },
	Logger:  discardLogger,
}

// noSecrets resolves no secret; the factories only store the resolver.
type noSecrets struct{}

func (noSecrets) SecretValue(name, key string) (string, error) {
	return "", fmt.Errorf("secret %s key %s: %w", name, key, sources.ErrSecretNotFound)
}

// SplitFieldError splits a factory's "spec.x.y: message" into its parts; an
// error without a field path belongs to spec.
func SplitFieldError(s string) (path, msg string) {
	if p, m, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(p, "spec") && !strings.ContainsAny(p, " \t") {
		return p, m
	}
	return "spec", s
}

// reported reports whether errs already holds an error on path, on a field
// inside it or on a field containing it.
func reported(errs field.ErrorList, path string) bool {
	for _, e := range errs {
		if problem.Within(e.Field, path) || problem.Within(path, e.Field) {
			return true
		}
	}
	return false
}

// valueAt returns the scalar at a field path such as "spec.budget.maxTokens"
// for an error message, or field.OmitValueType when there is none.
func valueAt(obj any, path string) any {
	raw, err := json.Marshal(obj)
	if err != nil {
		return field.OmitValueType{}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return field.OmitValueType{}
	}
	for _, seg := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		if name != "" {
			m, ok := v.(map[string]any)
			if !ok {
				return field.OmitValueType{}
			}
			if v, ok = m[name]; !ok {
				return field.OmitValueType{}
			}
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			l, isList := v.([]any)
			if !ok || err != nil || !isList || i < 0 || i >= len(l) {
				return field.OmitValueType{}
			}
			v, rest = l[i], strings.TrimPrefix(after, "[")
		}
	}
	switch v.(type) {
	case string, bool:
		return v
	case float64:
		// JSON numbers of these fields are integers; print them as such.
		if f := v.(float64); f == float64(int64(f)) {
			return int64(f)
		}
		return v
	}
	return field.OmitValueType{}
}
