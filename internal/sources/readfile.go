package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// ErrFileNotFound is returned by ReadFile when the source holds no such file
// (or skips it: too large, excluded by a dot folder).
var ErrFileNotFound = errors.New("file not found")

// ReadFile reads one file of a Directory or GitRepo source whole, as the
// source reads it (its folder or repository, its maxFileSize), for data
// kept next to the documents, such as a classifier's examples. rel is a
// clean slash path relative to the source root. It returns the content and
// the git commit ("" for a folder).
func ReadFile(ctx context.Context, spec *v1alpha1.ContextSource, env Env, rel string) (string, string, error) {
	inner := spec.DeepCopy()
	// Only this file: include is the path itself with glob characters escaped.
	include := []string{escapeGlob(rel)}
	var src Source
	var err error
	switch {
	case inner.Spec.Directory != nil:
		inner.Spec.Directory.Include, inner.Spec.Directory.Exclude = include, nil
		if src, err = newDirectory(inner, env); err == nil {
			src.(*directorySource).chunking.Raw = true
		}
	case inner.Spec.GitRepo != nil:
		inner.Spec.GitRepo.Include, inner.Spec.GitRepo.Exclude = include, nil
		if src, err = newGitRepo(inner, env); err == nil {
			src.(*GitRepo).chunking.Raw = true
		}
	default:
		return "", "", fmt.Errorf("ContextSource %q is of type %s; files are read from Directory and GitRepo sources", spec.Name, spec.Spec.Type)
	}
	if err != nil {
		return "", "", err
	}
	chunks, err := src.(StaticSource).Load(ctx)
	var stale *StaleError
	if err != nil && !errors.As(err, &stale) {
		return "", "", err
	}
	for _, c := range chunks {
		if c.Path == rel {
			return c.Content, c.Commit, nil
		}
	}
	return "", "", fmt.Errorf("%s: %w in ContextSource %q", rel, ErrFileNotFound, spec.Name)
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]{}\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
