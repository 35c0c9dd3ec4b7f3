package manifest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// LookupEnv finds an environment variable for a ${NAME} reference in a
// manifest. Load uses os.LookupEnv; nil turns expansion off.
type LookupEnv func(name string) (string, bool)

// envFields are the fields in which ${NAME} is replaced when manifests are
// loaded (api.md §1.0): where a value differs per machine or deployment.
// httpAPI header values are not here: they are resolved per request
// (api.md §4.4), so a token read from the environment never sits in a
// snapshot.
func envFields(s *v1alpha1.ContextSourceSpec) []struct {
	field string
	value *string
} {
	type f = struct {
		field string
		value *string
	}
	var out []f
	if s.Inline != nil {
		out = append(out, f{"spec.inline.title", &s.Inline.Title}, f{"spec.inline.content", &s.Inline.Content})
	}
	if s.Directory != nil {
		out = append(out, f{"spec.directory.path", &s.Directory.Path})
	}
	if s.GitRepo != nil {
		out = append(out, f{"spec.gitRepo.url", &s.GitRepo.URL}, f{"spec.gitRepo.ref", &s.GitRepo.Ref})
	}
	if s.HTTPAPI != nil {
		out = append(out, f{"spec.httpAPI.url", &s.HTTPAPI.URL}, f{"spec.httpAPI.body", &s.HTTPAPI.Body})
	}
	return out
}

// EnvFieldPaths are the ContextSource field paths in which ${NAME} is
// replaced at load (envFields of a spec with every block set).
func EnvFieldPaths() []string {
	var paths []string
	for _, f := range envFields(&v1alpha1.ContextSourceSpec{Inline: &v1alpha1.InlineSource{}, Directory: &v1alpha1.DirectorySource{},
		GitRepo: &v1alpha1.GitRepoSource{}, HTTPAPI: &v1alpha1.HTTPAPISource{}}) {
		paths = append(paths, f.field)
	}
	return paths
}

// expandEnv replaces ${NAME} in every source's envFields. An unset variable
// is a problem naming the object, the field and the variable, never a value.
func (s *Set) expandEnv(lookup LookupEnv) problem.List {
	if lookup == nil {
		return nil
	}
	var problems problem.List
	for i := range s.Sources {
		src := &s.Sources[i]
		for _, f := range envFields(&src.Spec) {
			out, unset := ExpandEnv(*f.value, lookup)
			if len(unset) > 0 {
				if s.unexpanded == nil {
					s.unexpanded = map[string]bool{}
				}
				s.unexpanded[v1alpha1.KindContextSource+"/"+src.Name+"/"+f.field] = true
				problems = append(problems, problem.Problem{
					Kind: v1alpha1.KindContextSource, Name: src.Name, Field: f.field,
					Message: fmt.Sprintf("environment variable %s is not set (write $${%s} for a literal ${%s})", strings.Join(unset, ", "), unset[0], unset[0]),
				})
				continue
			}
			*f.value = out
		}
	}
	s.Locate(problems)
	return problems
}

// ExpandEnv replaces each ${NAME} (NAME: letters, digits and _, not starting
// with a digit) with the variable's value; $${ is a literal ${. Anything else,
// a lone $ or ${ not closed by a valid name and }, stays as written. It
// returns the names of unset variables, in order of first use.
func ExpandEnv(s string, lookup LookupEnv) (string, []string) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	var unset []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1]) // $${ → ${
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 || !sources.ValidEnvName(s[i+2:i+2+end]) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		name := s[i+2 : i+2+end]
		b.WriteString(s[:i])
		if v, ok := lookup(name); ok {
			b.WriteString(v)
		} else if !slices.Contains(unset, name) {
			unset = append(unset, name)
		}
		s = s[i+3+end:]
	}
	return b.String(), unset
}
