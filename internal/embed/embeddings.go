package embed

import (
	"context"
	"encoding/json"
	"math"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Embedder asks an OpenAI-compatible embeddings endpoint for vectors.
type Embedder struct {
	Endpoint
	// Dimensions every vector must have (0 = whatever the model returns, as
	// long as all vectors agree and have at most MaxEmbeddingDimensions).
	Dimensions int
	// BatchSize is the number of texts per request (0 = 64).
	BatchSize int
}

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     *int      `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns one vector per text, in order, each of unit length (a zero
// vector stays zero). Texts are cut to MaxInputBytes and sent BatchSize at a
// time.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := e.BatchSize
	if batch <= 0 {
		batch = 64
	}
	out := make([][]float32, 0, len(texts))
	dims := e.Dimensions
	for lo := 0; lo < len(texts); lo += batch {
		hi := min(lo+batch, len(texts))
		in := make([]string, hi-lo)
		for i, t := range texts[lo:hi] {
			in[i] = Cut(t)
		}
		body, _ := json.Marshal(embeddingsRequest{Model: e.Model, Input: in})
		var resp embeddingsResponse
		if err := e.post(ctx, body, &resp); err != nil {
			return nil, err
		}
		vecs, err := e.vectors(&resp, len(in), &dims)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// vectors puts a response's vectors in input order and checks their count
// and size; *dims is set by the first vector when no size is configured.
func (e *Embedder) vectors(resp *embeddingsResponse, n int, dims *int) ([][]float32, error) {
	if len(resp.Data) != n {
		return nil, e.failf(ReasonMalformed, "%d vectors for %d inputs", len(resp.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range resp.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= n || out[at] != nil {
			return nil, e.failf(ReasonMalformed, "data[%d].index %d is out of range or repeated", i, at)
		}
		v := d.Embedding
		if len(v) == 0 {
			return nil, e.failf(ReasonMalformed, "data[%d].embedding is empty", i)
		}
		switch {
		case len(v) > v1alpha1.MaxEmbeddingDimensions:
			// Checked with or without spec.dimensions: the vectors of every
			// chunk are held in memory and cached, so their length is bounded
			// where they enter, by the rule the spec and the cache file use.
			return nil, e.failf(ReasonDimensions, "model %q returned a vector of %d dimensions; vectors are limited to %d", e.Model, len(v), v1alpha1.MaxEmbeddingDimensions)
		case *dims == 0:
			*dims = len(v)
		case len(v) != *dims:
			want := "the other vectors have"
			if e.Dimensions > 0 {
				want = "spec.ranking.embedding.dimensions is"
			}
			return nil, e.failf(ReasonDimensions, "model %q returned a vector of %d dimensions; %s %d", e.Model, len(v), want, *dims)
		}
		Normalize(v)
		out[at] = v
	}
	return out, nil
}

// Normalize scales v to unit length, so cosine similarity is a dot product.
// A zero vector, or one with a non-finite value, becomes all zeros.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsInf(sum, 0) || math.IsNaN(sum) {
		clear(v)
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}
