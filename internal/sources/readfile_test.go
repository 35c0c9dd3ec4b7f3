package sources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// ReadFile reads one file whole from a folder or a repository, whatever the
// source's include says, with glob characters in the name taken literally.
func TestReadFile(t *testing.T) {
	const body = "{\"text\": \"where is my parcel\", \"label\": \"shipping\"}\n\n## not a heading to split at\n"
	dir := t.TempDir()
	for name, content := range map[string]string{"intents/train.jsonl": body, "intents/[x].jsonl": "literal", "intents/a.jsonl": "a"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u := newGitUpstream(t, "main")
	commit := u.commit("examples", map[string]string{"intents/train.jsonl": body, "docs/a.md": "# A\n"})
	env, _ := gitEnv(t, nil)

	dirSrc := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "examples"}, Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{Path: dir, Include: []string{"**/*.md"}}}}
	gitSrc := gitSpec("repo", v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main", Include: []string{"**/*.md"}})
	for _, s := range []*v1alpha1.ContextSource{dirSrc, gitSrc} {
		s.Default()
	}
	inline := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "prompt"}, Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{Content: "x"}}}
	cases := []struct {
		name       string
		src        *v1alpha1.ContextSource
		path, want string
		commit     string
		err        string
	}{
		{"folder", dirSrc, "intents/train.jsonl", body, "", ""},
		{"glob characters are literal", dirSrc, "intents/[x].jsonl", "literal", "", ""},
		{"folder, missing", dirSrc, "intents/nope.jsonl", "", "", `intents/nope.jsonl: file not found in ContextSource "examples"`},
		{"repository", gitSrc, "intents/train.jsonl", body, commit.String(), ""},
		{"repository, missing", gitSrc, "intents/nope.jsonl", "", "", `intents/nope.jsonl: file not found in ContextSource "repo"`},
		{"inline", inline, "a.jsonl", "", "", `ContextSource "prompt" is of type Inline; files are read from Directory and GitRepo sources`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, gotCommit, err := ReadFile(context.Background(), tc.src, env, tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				if strings.Contains(tc.err, "not found") && !errors.Is(err, ErrFileNotFound) {
					t.Errorf("%v is not ErrFileNotFound", err)
				}
				return
			}
			if err != nil || got != tc.want || gotCommit != tc.commit {
				t.Fatalf("got %q at %q, %v; want %q at %q", got, gotCommit, err, tc.want, tc.commit)
			}
		})
	}
}
