package sources

import (
	"context"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func inlineSpec(name string, in *v1alpha1.InlineSource, chunking v1alpha1.ChunkingSpec) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceInline, Inline: in, Chunking: chunking},
	}
}

func TestInlineLoad(t *testing.T) {
	tests := []struct {
		name     string
		in       *v1alpha1.InlineSource
		chunking v1alpha1.ChunkingSpec
		want     []titledContent
	}{
		{
			name: "title from spec",
			in:   &v1alpha1.InlineSource{Title: "System prompt", Content: "Be brief.\nCite sources."},
			want: []titledContent{{"System prompt", "Be brief.\nCite sources."}},
		},
		{
			name: "title falls back to the source name",
			in:   &v1alpha1.InlineSource{Content: "Be brief."},
			want: []titledContent{{"policy", "Be brief."}},
		},
		{
			name: "markdown sections are chunked",
			in:   &v1alpha1.InlineSource{Title: "Rules", Content: "# Handbook\n## Leave\n20 days.\n## Travel\nBook early."},
			want: []titledContent{{"Handbook - Leave", "## Leave\n20 days."}, {"Handbook - Travel", "## Travel\nBook early."}},
		},
		{
			name:     "WholeFile",
			in:       &v1alpha1.InlineSource{Title: "Rules", Content: "## Leave\n20 days.\n## Travel\nBook early."},
			chunking: v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile},
			want:     []titledContent{{"Rules", "## Leave\n20 days.\n## Travel\nBook early."}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := New(inlineSpec("policy", tt.in, tt.chunking), Env{})
			if err != nil {
				t.Fatal(err)
			}
			if src.Name() != "policy" {
				t.Errorf("Name() = %q", src.Name())
			}
			st, ok := src.(StaticSource)
			if !ok {
				t.Fatalf("%T is not a StaticSource", src)
			}
			got, err := st.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if g := titleContents(got); !reflect.DeepEqual(g, tt.want) {
				t.Fatalf("got %q\nwant %q", g, tt.want)
			}
			for i, c := range got {
				if c.Source != "policy" || c.Path != "" || c.Index != i {
					t.Errorf("chunk %d: source %q path %q index %d", i, c.Source, c.Path, c.Index)
				}
			}
			// Callers may change what Load returns without changing the source.
			got[0].Content = "changed"
			again, _ := st.Load(context.Background())
			if again[0].Content == "changed" {
				t.Error("Load returned shared chunks")
			}
		})
	}
}

func TestInlineMaxChunkTokens(t *testing.T) {
	content := "## Long\n" + strings.Repeat("alpha beta gamma delta. ", 40) + "\n\n" + strings.Repeat("epsilon zeta eta theta. ", 40)
	src, err := New(inlineSpec("p", &v1alpha1.InlineSource{Content: content}, v1alpha1.ChunkingSpec{MaxChunkTokens: 300}), Env{
		CountTokens: func(s string) int { return len(strings.Fields(s)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.(StaticSource).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 322 words by the env counter: too many for one chunk of 300.
	if len(got) != 2 || !strings.HasPrefix(got[1].Content, "epsilon") {
		t.Fatalf("got %q", titleContents(got))
	}
}

func TestInlineInvalid(t *testing.T) {
	tests := []struct {
		name     string
		in       *v1alpha1.InlineSource
		chunking v1alpha1.ChunkingSpec
		wantErr  string
	}{
		{"missing block", nil, v1alpha1.ChunkingSpec{}, "spec.inline: must be set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(inlineSpec("p", tt.in, tt.chunking), Env{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want prefix %q", err, tt.wantErr)
			}
		})
	}
}
