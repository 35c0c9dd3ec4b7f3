package engine

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/cache"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/embed"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/redact"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Dense ranking (api.md §5.3): settings and the chunk vectors of a snapshot.
const (
	// rrfK is the k of reciprocal rank fusion: 1/(k + rank).
	rrfK = 60
	// denseTopK chunks (or max_chunks, if more) come from the dense search.
	denseTopK = 100
	// denseOverFetch: when admitChunk may drop a row searched (path denies,
	// stale Drop, sensitivity Drop), the search fetches this many times
	// denseTopK and keeps the first denseTopK it lets through.
	denseOverFetch = 4
	// queryVectors is the size of the query vector LRU.
	queryVectors = 1024
)

// Ranking endpoints, as reported in RankingFailure.Endpoint.
const (
	EndpointEmbedding = "embedding"
	EndpointRerank    = "rerank"
	// ReasonUnavailable: the chunk vectors could not be computed at compile.
	ReasonUnavailable = "unavailable"
)

// RankingFailure is a ranking endpoint that did not help a query, which was
// then ranked without it (api.md §5.3); the server counts them.
type RankingFailure struct {
	Endpoint string
	Reason   string
}

// EmbeddingStatus reports a snapshot's chunk vectors (/v1/status).
type EmbeddingStatus struct {
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions,omitempty"`
	// Vectors is the number of chunk vectors; Embedded how many of them the
	// endpoint computed for this snapshot (the rest came from the cache).
	Vectors  int `json:"vectors"`
	Embedded int `json:"embedded"`
	// Error is why the vectors are unavailable: queries are ranked by BM25.
	Error string `json:"error,omitempty"`
}

type denseState struct {
	embedder    *embed.Embedder // nil without spec.ranking.embedding
	store       *embed.Store    // nil when the vectors are unavailable
	err         error
	embedded    int
	queries     *embed.LRU
	denseWeight float64
	reranker    *embed.Reranker // nil without spec.ranking.rerank
	rerankTopN  int
	// keys is a digest of the resolved API keys, mixed into the snapshot
	// hash so that a rotated key alone replaces the serving snapshot.
	keys [sha256.Size]byte
	// logger takes what callers are not shown: the endpoints' error bodies.
	logger *slog.Logger
}

// Embedding reports the chunk vectors; nil without spec.ranking.embedding.
func (s *Snapshot) Embedding() *EmbeddingStatus {
	if s.dense == nil || s.dense.embedder == nil {
		return nil
	}
	d := s.dense
	st := &EmbeddingStatus{Model: d.embedder.Model, Embedded: d.embedded}
	if d.store != nil {
		st.Dimensions, st.Vectors = d.store.Dims(), d.store.Len()
	}
	if d.err != nil {
		st.Error = d.err.Error()
	}
	return st
}

// setDense takes spec.ranking.embedding, hybrid and rerank of a defaulted
// router; the endpoints' keys are read when the chunks are embedded.
func (s *Snapshot) setDense(rs *v1alpha1.RankingSpec, add func(field, msg string)) {
	d := &denseState{}
	weight := v1alpha1.DefaultDenseWeight
	if h := rs.Hybrid; h != nil {
		weight = h.DenseWeight
	}
	w, err := strconv.ParseFloat(weight, 64)
	if err != nil || w < 0 || w > 1 {
		add("spec.ranking.hybrid.denseWeight", fmt.Sprintf("%q is not a number from 0 to 1", weight))
	}
	d.denseWeight = w
	dense := s.strategy == v1alpha1.RankingEmbedding || s.strategy == v1alpha1.RankingHybrid
	if dense && rs.Embedding == nil {
		// Validate refuses it first; a hand-built config fails here rather than at a query.
		add("spec.ranking.embedding", fmt.Sprintf("required for the %s strategy", s.strategy))
	}
	if rs.Embedding == nil && rs.Rerank == nil {
		return
	}
	// Only these strategies use vectors: another never calls the endpoint.
	if e := rs.Embedding; e != nil && dense {
		d.embedder = &embed.Embedder{Endpoint: endpoint(e.Endpoint, e.Model, e.Timeout), BatchSize: int(e.BatchSize)}
		if e.Dimensions != nil {
			d.embedder.Dimensions = int(*e.Dimensions)
		}
		d.queries = embed.NewLRU(queryVectors)
	}
	if r := rs.Rerank; r != nil {
		d.reranker = &embed.Reranker{Endpoint: endpoint(r.Endpoint, r.Model, r.Timeout), Format: string(r.Format)}
		d.reranker.ForQueries() // it is asked at query time only
		d.rerankTopN = int(r.TopN)
	}
	s.dense = d
}

func endpoint(url, model string, timeout *metav1.Duration) embed.Endpoint {
	ep := embed.Endpoint{URL: url, Model: model, Attempts: embed.DefaultAttempts}
	if timeout != nil {
		ep.Timeout = timeout.Duration
	}
	return ep
}

// embedText is what is embedded or reranked for a chunk.
func embedText(title, content string) string {
	if title == "" {
		return content
	}
	return title + "\n\n" + content
}

// compileDense reads the endpoints' keys and computes the vectors of every
// static chunk, reusing those the cache file under opts.CacheDir holds. A
// failure leaves the snapshot without vectors: it serves, ranked by BM25,
// and says why in Embedding(), Warnings() and every such query.
func (s *Snapshot) compileDense(ctx context.Context, r *v1alpha1.ContextRouter, opts Options, logger *slog.Logger, origin problem.Location) {
	d := s.dense
	if d == nil {
		return
	}
	d.logger = logger.With("router", r.Name)
	rs := &r.Spec.Ranking
	var keyErr error
	key := func(ref *v1alpha1.SecretKeySelector, field string) string {
		if ref == nil || opts.Secrets == nil {
			return ""
		}
		v, err := opts.Secrets.SecretValue(ref.Name, ref.Key)
		if err != nil && keyErr == nil {
			keyErr = fmt.Errorf("%s: %w", field, err)
		}
		return v
	}
	if d.reranker != nil {
		d.reranker.APIKey = key(rs.Rerank.APIKeySecretRef, "spec.ranking.rerank.apiKeySecretRef")
		if keyErr != nil {
			// Without its key the reranker would fail every query: it is left out, and said so.
			s.warnings = append(s.warnings, problem.Problem{Location: origin, Kind: v1alpha1.KindContextRouter, Name: r.Name,
				Field: "spec.ranking.rerank", Severity: problem.Warning,
				Message: "reranking is off: " + redact.Error(keyErr).Error()})
			d.reranker, keyErr = nil, nil
		}
	}
	if d.embedder == nil {
		d.digestKeys()
		return
	}
	d.embedder.APIKey = key(rs.Embedding.APIKeySecretRef, "spec.ranking.embedding.apiKeySecretRef")
	d.digestKeys()
	err := keyErr
	if err == nil {
		texts := make([]string, len(s.docs))
		for i := range s.docs {
			texts[i] = embedText(s.docs[i].chunk.Title, s.docs[i].chunk.Content)
		}
		path := d.embedder.CachePath(cache.Base(opts.CacheDir), r.Namespace+"/"+r.Name)
		var got embed.Cached
		got, err = d.embedder.EmbedCached(ctx, path, texts)
		if got.CacheErr != nil {
			logger.Warn("embedding cache", "error", got.CacheErr)
		}
		if err == nil {
			d.store, d.embedded = embed.NewStore(got.Dims, got.Vectors), got.Sent
		}
	}
	d.embedder.ForQueries()
	if err != nil {
		d.err = redact.Error(err)
		logger.Warn("chunk embeddings failed; queries are ranked by BM25", "router", r.Name, "error", d.err, "detail", endpointDetail(err))
		s.warnings = append(s.warnings, problem.Problem{Location: origin, Kind: v1alpha1.KindContextRouter, Name: r.Name,
			Field: "spec.ranking.embedding", Severity: problem.Warning,
			Message: "chunk embeddings failed, so queries are ranked by BM25 until a reload succeeds: " + d.err.Error()})
	}
}

// digestKeys records a digest of the keys in use (each value hashed on its
// own: the snapshot hash is public and must not help to guess a key).
func (d *denseState) digestKeys() {
	h := sha256.New()
	for _, ep := range []*embed.Endpoint{d.embedderEndpoint(), d.rerankerEndpoint()} {
		var k [sha256.Size]byte
		if ep != nil && ep.APIKey != "" {
			k = digest.SHA256(ep.APIKey)
		}
		h.Write(k[:])
	}
	h.Sum(d.keys[:0])
}

func (d *denseState) embedderEndpoint() *embed.Endpoint {
	if d.embedder == nil {
		return nil
	}
	return &d.embedder.Endpoint
}

func (d *denseState) rerankerEndpoint() *embed.Endpoint {
	if d.reranker == nil {
		return nil
	}
	return &d.reranker.Endpoint
}

// denseQuery is the dense side of one query.
type denseQuery struct {
	vec  []float32
	hits []embed.Hit // best first
}

// searchDense embeds the question (or takes its vector from the LRU) and
// finds the chunks of the allowed sources nearest to it. nil when the query
// is ranked without vectors; the response then says why.
func (s *Snapshot) searchDense(ctx context.Context, text string, allowed []bool, access *Access, now time.Time, k int, resp *Response) *denseQuery {
	d := s.dense
	if d.store == nil {
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("%s ranking is unavailable (chunk embeddings failed: %v); ranked by BM25", s.strategy, d.err))
		resp.RankingFailures = append(resp.RankingFailures, RankingFailure{Endpoint: EndpointEmbedding, Reason: ReasonUnavailable})
		return nil
	}
	if d.store.Len() == 0 {
		return nil // no chunk to compare with: BM25 has all there is
	}
	vec, ok := d.queries.Get(embed.Cut(text))
	if !ok {
		vecs, err := d.embedder.Embed(ctx, []string{text})
		if err == nil && len(vecs[0]) != d.store.Dims() {
			err = fmt.Errorf("model %q returned a query vector of %d dimensions; the chunk vectors have %d", d.embedder.Model, len(vecs[0]), d.store.Dims())
		}
		if err != nil {
			d.logFailure(EndpointEmbedding, err)
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("embedding endpoint failed (%v); ranked by BM25", err))
			resp.RankingFailures = append(resp.RankingFailures, RankingFailure{Endpoint: EndpointEmbedding, Reason: failureReason(err)})
			return nil
		}
		vec = vecs[0]
		d.queries.Put(embed.Cut(text), vec)
	}
	var ranges []embed.Range
	filter := false // whether admitChunk may drop a row searched
	for _, st := range s.byGroup {
		if allowed[st.group] && st.chunks > 0 && st.typ != v1alpha1.SourceInline {
			ranges = append(ranges, embed.Range{Lo: st.first, Hi: st.first + uint32(st.chunks)})
			filter = filter || mayDrop(st, access)
		}
	}
	if !filter {
		return &denseQuery{vec: vec, hits: d.store.Search(vec, ranges, k)}
	}
	// The nearest chunks the agent may not be given would take places (and
	// dense ranks) from ones it may: fetch more, keep the first k that the
	// rule the pipeline filters candidates by (admitChunk) lets through.
	hits := d.store.Search(vec, ranges, denseOverFetch*k)
	kept := hits[:0]
	for _, h := range hits {
		if !s.admitRow(h.Row, access, now).verdict.dropped() {
			if kept = append(kept, h); len(kept) == k {
				break
			}
		}
	}
	return &denseQuery{vec: vec, hits: kept}
}

// endpointDetail is the excerpt of the endpoint's error body in err, for
// the log only ("" when none).
func endpointDetail(err error) string {
	var e *embed.Error
	if errors.As(err, &e) {
		return e.Detail()
	}
	return ""
}

// logFailure logs a query-time endpoint failure with the endpoint's own
// words, which the response leaves out.
func (d *denseState) logFailure(endpoint string, err error) {
	logger := d.logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("ranking endpoint failed; the query is ranked without it", "endpoint", endpoint, "error", err, "detail", endpointDetail(err))
}

func failureReason(err error) string {
	if e, ok := err.(*embed.Error); ok {
		return e.Reason
	}
	return embed.ReasonDimensions
}

// rescoreDense replaces the BM25 scores of the unpinned candidates: by
// cosine similarity (Embedding), or by reciprocal rank fusion of the BM25
// rank and the dense rank (Hybrid). A candidate without a vector (an
// HTTPAPI result) has cosine 0, and only its BM25 rank in the fusion.
func (s *Snapshot) rescoreDense(cands []candidate, dq *denseQuery) {
	if s.strategy == v1alpha1.RankingEmbedding {
		for i := range cands {
			c := &cands[i]
			if c.pinned {
				continue
			}
			c.score = 0
			if c.doc >= 0 {
				c.score = max(float64(s.dense.store.Dot(dq.vec, int(c.doc))), 0)
			}
		}
		return
	}
	denseRank := make(map[uint32]int, len(dq.hits))
	for i, h := range dq.hits {
		denseRank[h.Row] = i + 1
	}
	// BM25 ranks: candidates with a positive score, best first.
	order := make([]int, 0, len(cands))
	for i := range cands {
		if !cands[i].pinned && cands[i].score > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := &cands[a], &cands[b]
		switch {
		case ca.score > cb.score:
			return -1
		case ca.score < cb.score:
			return 1
		case tieLess(ca, cb):
			return -1
		case tieLess(cb, ca):
			return 1
		}
		return 0
	})
	bm25Rank := make([]int, len(cands))
	for r, i := range order {
		bm25Rank[i] = r + 1
	}
	w := s.dense.denseWeight
	for i := range cands {
		c := &cands[i]
		if c.pinned {
			continue
		}
		var f float64
		if r := bm25Rank[i]; r > 0 {
			f += (1 - w) / float64(rrfK+r)
		}
		if c.doc >= 0 {
			if r, ok := denseRank[uint32(c.doc)]; ok {
				f += w / float64(rrfK+r)
			}
		}
		c.score = f
	}
}

// rerank sends the best topN unpinned, unredacted candidates (in the order
// of less) to the rerank endpoint and puts them, in its order, before the
// rest. On failure the order stays and the response says why.
func (s *Snapshot) rerank(ctx context.Context, query string, cands []candidate, less func(a, b *candidate) bool, resp *Response) {
	d := s.dense
	var top []int
	for i := range cands {
		if !cands[i].pinned && !cands[i].redacted {
			top = append(top, i)
		}
	}
	if len(top) < 2 {
		return
	}
	slices.SortFunc(top, func(a, b int) int {
		if less(&cands[a], &cands[b]) {
			return -1
		}
		if less(&cands[b], &cands[a]) {
			return 1
		}
		return 0
	})
	top = top[:min(len(top), d.rerankTopN)]
	docs := make([]string, len(top))
	for j, i := range top {
		docs[j] = embedText(cands[i].chunk.Title, cands[i].chunk.Content)
	}
	scores, err := d.reranker.Rerank(ctx, query, docs)
	if err != nil {
		d.logFailure(EndpointRerank, err)
		resp.Warnings = append(resp.Warnings, fmt.Sprintf("rerank endpoint failed (%v); the order is not reranked", err))
		resp.RankingFailures = append(resp.RankingFailures, RankingFailure{Endpoint: EndpointRerank, Reason: failureReason(err)})
		return
	}
	pos := make([]int, len(top)) // positions into top, by reranker score
	for j := range pos {
		pos[j] = j
	}
	slices.SortStableFunc(pos, func(a, b int) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		return 0
	})
	// Scores above every other candidate (all ≤ 1 after normalisation), in
	// the reranker's order; Query normalises them again.
	n := float64(len(pos))
	for rank, j := range pos {
		cands[top[j]].score = 1 + (n-float64(rank))/n
	}
}
