// Package embedtest runs an embeddings and reranking server for tests: a
// real HTTP server on 127.0.0.1 that speaks the OpenAI embeddings wire
// format and both rerank formats, with deterministic vectors (a hashed bag
// of words), and that can be told to fail.
package embedtest

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// Server is a test embeddings and rerank API. Set its fields before the
// first request; read the counters with the methods.
type Server struct {
	*httptest.Server
	// Dims is the vector length (default 64).
	Dims int
	// Synonyms map a word to the word whose bucket it shares, so that
	// "automobile" lands where "car" does: what a model knows and BM25 does not.
	Synonyms map[string]string
	// Key, when set, is the bearer token every request must carry (401 otherwise).
	Key string
	// FailFirst requests (of each endpoint) are answered with FailStatus (default 503), with
	// RetryAfter as the Retry-After header when set.
	FailFirst  int
	FailStatus int
	RetryAfter string
	// FailAlways answers every request with FailStatus.
	FailAlways bool
	// Delay holds every answer this long.
	Delay time.Duration
	// ShortAt returns a vector one element short for the input with this
	// text (a dimension mismatch).
	ShortAt string
	// Malformed answers a body that is not the expected JSON.
	Malformed bool
	// Padding is written (as spaces) before each embeddings answer.
	Padding int
	// EchoAuth puts the request's Authorization header in error bodies, as
	// a careless server might.
	EchoAuth bool
	// RerankScore scores a document for the rerank endpoints (nil = the
	// number of query words in the document).
	RerankScore func(query, doc string) float64

	mu       sync.Mutex
	requests int
	inputs   []string
	batches  []int
	reranks  int
}

// New starts a server; it is closed when the test ends. Embeddings are
// served at /v1/embeddings, TEI reranking at /rerank and the Cohere shape
// at /v1/rerank.
func New(t testing.TB) *Server {
	s := &Server{Dims: 64, FailStatus: http.StatusServiceUnavailable}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/embeddings", s.embeddings)
	mux.HandleFunc("/rerank", s.rerank)
	mux.HandleFunc("/v1/rerank", s.rerank)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// EmbeddingsURL is the embeddings endpoint.
func (s *Server) EmbeddingsURL() string { return s.URL + "/v1/embeddings" }

// Requests counts the embeddings requests, failed ones included.
func (s *Server) Requests() int { s.mu.Lock(); defer s.mu.Unlock(); return s.requests }

// Inputs lists every text the server embedded, in arrival order.
func (s *Server) Inputs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.inputs...)
}

// Batches lists the size of each successful embeddings request.
func (s *Server) Batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batches...)
}

// Reranks counts the rerank requests.
func (s *Server) Reranks() int { s.mu.Lock(); defer s.mu.Unlock(); return s.reranks }

// Reset clears the counters.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.inputs, s.batches, s.reranks = 0, nil, nil, 0
}

// gate applies the failure settings; it reports whether to go on.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, n int) bool {
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-r.Context().Done():
			return false
		}
	}
	fail := func(code int, msg string) bool {
		if s.EchoAuth {
			msg += " (got " + r.Header.Get("Authorization") + ")"
		}
		if s.RetryAfter != "" {
			w.Header().Set("Retry-After", s.RetryAfter)
		}
		http.Error(w, `{"error": "`+msg+`"}`, code)
		return false
	}
	if s.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.Key {
		return fail(http.StatusUnauthorized, "invalid api key")
	}
	if s.FailAlways || n <= s.FailFirst {
		return fail(s.FailStatus, "overloaded")
	}
	if s.Malformed {
		_, _ = w.Write([]byte(`{"data": [{"embedding": "not a vector"`))
		return false
	}
	return true
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.mu.Unlock()
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
		return
	}
	if !s.gate(w, r, n) {
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
	}{Object: "list", Model: req.Model}
	// Answered in reverse order: clients must place vectors by index.
	for i := len(req.Input) - 1; i >= 0; i-- {
		v := s.Vector(req.Input[i])
		if s.ShortAt != "" && req.Input[i] == s.ShortAt {
			v = v[:len(v)-1]
		}
		out.Data = append(out.Data, datum{Object: "embedding", Index: i, Embedding: v})
	}
	s.mu.Lock()
	s.inputs = append(s.inputs, req.Input...)
	s.batches = append(s.batches, len(req.Input))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if s.Padding > 0 {
		_, _ = w.Write([]byte(strings.Repeat(" ", s.Padding)))
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) rerank(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reranks++
	n := s.reranks
	s.mu.Unlock()
	var req struct {
		Query     string   `json:"query"`
		Texts     []string `json:"texts"`
		Documents []string `json:"documents"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error": "bad request"}`, http.StatusBadRequest)
		return
	}
	if !s.gate(w, r, n) {
		return
	}
	score := s.RerankScore
	if score == nil {
		score = func(q, d string) float64 {
			n := 0
			for _, w := range s.words(q) {
				if strings.Contains(strings.ToLower(d), w) {
					n++
				}
			}
			return float64(n)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/rerank" { // TEI
		type res struct {
			Index int     `json:"index"`
			Score float64 `json:"score"`
		}
		out := []res{}
		for i, d := range req.Texts {
			out = append(out, res{i, score(req.Query, d)})
		}
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	type res struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
	}
	out := struct {
		Results []res `json:"results"`
	}{Results: []res{}}
	for i, d := range req.Documents {
		out.Results = append(out.Results, res{i, score(req.Query, d)})
	}
	_ = json.NewEncoder(w).Encode(out)
}

// words are the lower-cased words of text, synonyms replaced.
func (s *Server) words(text string) []string {
	ws := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range ws {
		if c, ok := s.Synonyms[w]; ok {
			ws[i] = c
		}
	}
	return ws
}

// Vector is the server's (unnormalised) vector of text: word counts hashed
// into Dims buckets.
func (s *Server) Vector(text string) []float32 {
	v := make([]float32, s.Dims)
	for _, w := range s.words(text) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[h.Sum32()%uint32(s.Dims)]++
	}
	return v
}
