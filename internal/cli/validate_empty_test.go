package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/manifest"
)

// A configuration that answers nothing is valid but says so: validate warns about a file without
// objects and a router no route attaches to, and still exits 0.
func TestValidateWarnsAboutEmptiness(t *testing.T) {
	const router = "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: acme}\n"
	const source = "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: notes}\nspec: {type: Inline, inline: {content: hello}}\n"
	const route = "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: all}\nspec: {sources: [{name: notes}]}\n"
	tests := []struct {
		name  string
		files map[string]string
		want  []string // lines of the output, in order, {dir} standing for the folder
	}{
		{
			name:  "an emptied file beside a good one",
			files: map[string]string{"a.yaml": router + source + route, "b.yaml": ""},
			want: []string{
				"warning: {dir}/b.yaml: " + manifest.EmptyFileMessage,
				"valid: 1 routers, 1 routes, 1 sources, 0 permissions; 1 warnings",
			},
		},
		{
			name:  "a file of comments only",
			files: map[string]string{"a.yaml": router + source + route, "b.yaml": "# routes moved to c.yaml\n---\n"},
			want: []string{
				"warning: {dir}/b.yaml: " + manifest.EmptyFileMessage,
				"valid: 1 routers, 1 routes, 1 sources, 0 permissions; 1 warnings",
			},
		},
		{
			name:  "no route attaches to the router",
			files: map[string]string{"a.yaml": router + source},
			want: []string{
				"warning: {dir}/a.yaml:1: ContextRouter/acme: " + manifest.NoRoutesMessage,
				"valid: 1 routers, 0 routes, 1 sources, 0 permissions; 1 warnings",
			},
		},
		{
			name:  "nothing at all",
			files: map[string]string{"a.yaml": "\n"},
			want: []string{
				"warning: {dir}/a.yaml: " + manifest.EmptyFileMessage,
				"warning: ContextRouter/default: " + manifest.NoRoutesMessage,
				"valid: 1 routers, 0 routes, 0 sources, 0 permissions (implied default router); 2 warnings",
			},
		},
		{
			name:  "allowEmpty says it is intended",
			files: map[string]string{"a.yaml": router + "spec: {allowEmpty: true}\n" + source},
			want:  []string{"valid: 1 routers, 0 routes, 1 sources, 0 permissions"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				write(t, filepath.Join(dir, name), content)
			}
			out, _, code := run(t, "validate", "-f", dir)
			want := strings.ReplaceAll(strings.Join(tt.want, "\n"), "{dir}", dir) + "\n"
			if code != 0 || out != want {
				t.Errorf("exit %d, output:\n%s\nwant exit 0 and:\n%s", code, out, want)
			}
		})
	}
}
