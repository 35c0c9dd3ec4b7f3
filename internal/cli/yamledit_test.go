package cli

import (
	"strings"
	"testing"
)

func TestSetAnnotation(t *testing.T) {
	const key = "contextrouter.dev/approved-tools"
	other := "---\n# another object\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: other}\nspec: {type: Tools}\n"
	for _, tc := range []struct {
		name, in, value, want string
	}{
		{
			name:  "no annotations yet, comments and flow style kept",
			in:    "# head\nkind: ContextSource\nmetadata:\n  name: s   # the source\n  labels: {a: b}\nspec:\n  tools: {approval: Manual}  # keep\n" + other,
			value: "a=1\n",
			want:  "# head\nkind: ContextSource\nmetadata:\n  name: s # the source\n  labels: {a: b}\n  annotations:\n    contextrouter.dev/approved-tools: |\n      a=1\nspec:\n  tools: {approval: Manual}  # keep\n" + other,
		},
		{
			name:  "replaces the old value, other annotations kept",
			in:    "kind: ContextSource\nmetadata:\n  name: s\n  annotations:\n    team: ops\n    contextrouter.dev/approved-tools: |\n      a=1\nspec: {}\n",
			value: "a=2\nb=3\n",
			want:  "kind: ContextSource\nmetadata:\n  name: s\n  annotations:\n    team: ops\n    contextrouter.dev/approved-tools: |\n      a=2\n      b=3\nspec: {}\n",
		},
		{
			name:  "flow metadata becomes a block",
			in:    "kind: ContextSource\nmetadata: {name: s}\nspec: {}\n",
			value: "a=1",
			want:  "kind: ContextSource\nmetadata:\n  name: s\n  annotations:\n    contextrouter.dev/approved-tools: a=1\nspec: {}\n",
		},
		{
			name:  "second document, CRLF kept",
			in:    strings.ReplaceAll(other+"---\nkind: ContextSource\nmetadata:\n  name: s\nspec: {}\n", "\n", "\r\n"),
			value: "a=1",
			want:  strings.ReplaceAll(other+"---\nkind: ContextSource\nmetadata:\n  name: s\n  annotations:\n    contextrouter.dev/approved-tools: a=1\nspec: {}\n", "\n", "\r\n"),
		},
		{
			name:  "indented document (metadata not first)",
			in:    "apiVersion: v1\nspec: {}\nkind: ContextSource\nmetadata:\n    name: s\n    # trailing comment\nstatus: {}\n",
			value: "a=1",
			want:  "apiVersion: v1\nspec: {}\nkind: ContextSource\nmetadata:\n  name: s\n  annotations:\n    contextrouter.dev/approved-tools: a=1\n    # trailing comment\nstatus: {}\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := setAnnotation([]byte(tc.in), "s", key, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, in, want string }{
		{"missing", other, `ContextSource "s": not found in the file as a YAML document`},
		{"list item", "kind: List\nitems:\n- kind: ContextSource\n  metadata: {name: s}\n", `ContextSource "s" is an item of a List`},
		{"metadata not a mapping", "kind: ContextSource\nmetadata: [s]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := setAnnotation([]byte(tc.in), "s", key, "a=1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
