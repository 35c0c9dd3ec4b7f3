package embed

import (
	"context"
	"encoding/json"
	"math"
)

// Rerank formats (spec.ranking.rerank.format).
const (
	FormatCohere = "Cohere"
	FormatTEI    = "TEI"
)

// Reranker asks a reranking endpoint to score documents against a query.
type Reranker struct {
	Endpoint
	// Format is FormatCohere ({model, query, documents, top_n}) or FormatTEI
	// ({query, texts}). Either answer shape is read, whatever the format.
	Format string
}

type cohereRequest struct {
	Model     string   `json:"model,omitempty"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
	TopN      int      `json:"top_n"`
}

type teiRequest struct {
	Query string   `json:"query"`
	Texts []string `json:"texts"`
}

// rerankResult is one entry of either answer: TEI's {index, score} or the
// Cohere shape's {index, relevance_score}.
type rerankResult struct {
	Index          *int     `json:"index"`
	Score          *float64 `json:"score"`
	RelevanceScore *float64 `json:"relevance_score"`
}

// rerankResponse reads [{index, score}] or {results: [{index, relevance_score}]}.
type rerankResponse struct{ results []rerankResult }

func (r *rerankResponse) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '[' {
		return json.Unmarshal(b, &r.results)
	}
	var obj struct {
		Results []rerankResult `json:"results"`
	}
	err := json.Unmarshal(b, &obj)
	r.results = obj.Results
	return err
}

// Rerank returns a score per document, in document order: higher is more
// relevant. Every document must be scored once.
func (r *Reranker) Rerank(ctx context.Context, query string, docs []string) ([]float64, error) {
	in := make([]string, len(docs))
	for i, d := range docs {
		in[i] = Cut(d)
	}
	var body []byte
	if r.Format == FormatTEI {
		body, _ = json.Marshal(teiRequest{Query: Cut(query), Texts: in})
	} else {
		body, _ = json.Marshal(cohereRequest{Model: r.Model, Query: Cut(query), Documents: in, TopN: len(in)})
	}
	var resp rerankResponse
	if err := r.post(ctx, body, &resp); err != nil {
		return nil, err
	}
	if len(resp.results) != len(docs) {
		return nil, r.failf(ReasonMalformed, "%d scores for %d documents", len(resp.results), len(docs))
	}
	scores := make([]float64, len(docs))
	seen := make([]bool, len(docs))
	for i, res := range resp.results {
		s := res.Score
		if s == nil {
			s = res.RelevanceScore
		}
		if res.Index == nil || s == nil || math.IsNaN(*s) || math.IsInf(*s, 0) {
			return nil, r.failf(ReasonMalformed, "result %d has no index or no finite score", i)
		}
		at := *res.Index
		if at < 0 || at >= len(docs) || seen[at] {
			return nil, r.failf(ReasonMalformed, "result %d: index %d is out of range or repeated", i, at)
		}
		seen[at] = true
		scores[at] = *s
	}
	return scores, nil
}
