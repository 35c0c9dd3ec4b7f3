package sources

import (
	"context"
	"errors"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func init() { Register(v1alpha1.SourceInline, newInline) }

// inlineSource is text written in the manifest. It is chunked once, in the
// factory: the content cannot change without a new spec.
type inlineSource struct {
	name   string
	chunks []Chunk
}

func newInline(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	in := spec.Spec.Inline
	if in == nil {
		return nil, errors.New("spec.inline: must be set when spec.type is Inline")
	}
	title := in.Title
	if title == "" {
		title = spec.Name
	}
	return &inlineSource{
		name:   spec.Name,
		chunks: SplitDocument(Document{Source: spec.Name, Title: title, Content: in.Content}, chunkOptions(spec, env)),
	}, nil
}

func (s *inlineSource) Name() string { return s.name }

// Load returns a copy, so callers may modify the slice.
func (s *inlineSource) Load(ctx context.Context) ([]Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return append([]Chunk(nil), s.chunks...), nil
}
