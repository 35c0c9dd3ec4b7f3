package embed_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/embed"
	"github.com/contextrouter/contextrouter/internal/embed/embedtest"
	"github.com/contextrouter/contextrouter/internal/redact/redacttest"
)

const testKey = "sk-test-0123456789abcdef"

func embedder(s *embedtest.Server) *embed.Embedder {
	return &embed.Embedder{Endpoint: embed.Endpoint{URL: s.EmbeddingsURL(), Model: "test-model", APIKey: testKey,
		Timeout: 2 * time.Second, Attempts: embed.DefaultAttempts}, BatchSize: 3}
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("text number %d about topic%d", i, i%3)
	}
	return out
}

func TestEmbedBatchesInOrder(t *testing.T) {
	s := embedtest.New(t)
	s.Key = testKey
	in := texts(7)
	vecs, err := embedder(s).Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Batches(); !slices.Equal(got, []int{3, 3, 1}) {
		t.Errorf("batches = %v, want [3 3 1]", got)
	}
	for i, v := range vecs {
		want := s.Vector(in[i])
		embed.Normalize(want)
		if !slices.Equal(v, want) {
			t.Fatalf("vector %d is not the server's vector of %q", i, in[i])
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		if math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d has squared length %v, want 1", i, n)
		}
	}
}

func TestEmbedFailures(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(s *embedtest.Server, e *embed.Embedder)
		reason string
		msg    string
		// requests the server must have seen.
		requests int
	}{
		{"503 then success", func(s *embedtest.Server, e *embed.Embedder) { s.FailFirst = 2 }, "", "", 3},
		{"429 with Retry-After then success", func(s *embedtest.Server, e *embed.Embedder) {
			s.FailFirst, s.FailStatus, s.RetryAfter = 1, http.StatusTooManyRequests, "0"
		}, "", "", 2},
		{"503 every time", func(s *embedtest.Server, e *embed.Embedder) { s.FailAlways = true }, embed.ReasonStatus, "HTTP 503 Service Unavailable", embed.DefaultAttempts},
		{"401 is not retried", func(s *embedtest.Server, e *embed.Embedder) { s.Key = "other" }, embed.ReasonStatus, "HTTP 401", 1},
		{"timeout", func(s *embedtest.Server, e *embed.Embedder) {
			s.Delay = time.Second
			e.Timeout, e.Attempts = 50*time.Millisecond, 2
		}, embed.ReasonTimeout, "timeout after 50ms (after 2 attempts)", 2},
		{"dimension mismatch with the spec", func(s *embedtest.Server, e *embed.Embedder) { e.Dimensions = 32 }, embed.ReasonDimensions,
			`model "test-model" returned a vector of 64 dimensions; spec.ranking.embedding.dimensions is 32`, 1},
		{"vectors past the length limit without spec.dimensions", func(s *embedtest.Server, e *embed.Embedder) { s.Dims = 200_000 }, embed.ReasonDimensions,
			`model "test-model" returned a vector of 200000 dimensions; vectors are limited to 8192`, 1},
		{"vectors at the length limit", func(s *embedtest.Server, e *embed.Embedder) { s.Dims = v1alpha1.MaxEmbeddingDimensions }, "", "", 1},
		{"vectors disagree", func(s *embedtest.Server, e *embed.Embedder) { s.ShortAt = "text number 1 about topic1" }, embed.ReasonDimensions,
			`model "test-model" returned a vector of 63 dimensions; the other vectors have 64`, 1},
		{"response past the size limit", func(s *embedtest.Server, e *embed.Embedder) { s.Padding = embed.MaxResponseBytes }, embed.ReasonTooLarge, "response larger than 64 MiB", 1},
		{"query-time response past its 4 MiB limit", func(s *embedtest.Server, e *embed.Embedder) {
			s.Padding = embed.MaxQueryResponseBytes
			e.ForQueries()
		}, embed.ReasonTooLarge, "response larger than 4 MiB", 1},
		{"a chunk response may be larger", func(s *embedtest.Server, e *embed.Embedder) { s.Padding = embed.MaxQueryResponseBytes }, "", "", 1},
		{"malformed response", func(s *embedtest.Server, e *embed.Embedder) { s.Malformed = true }, embed.ReasonMalformed, "invalid JSON response", 1},
		{"unreachable", func(s *embedtest.Server, e *embed.Embedder) { s.Close(); e.Attempts = 2 }, embed.ReasonNetwork, "connection refused", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := embedtest.New(t)
			s.Key = testKey
			s.EchoAuth = true
			e := embedder(s)
			tt.setup(s, e)
			_, err := e.Embed(context.Background(), texts(3))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Embed: %v", err)
				}
			} else {
				var ee *embed.Error
				if !errors.As(err, &ee) || ee.Reason != tt.reason || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("Embed error = %v, want reason %s and %q", err, tt.reason, tt.msg)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testKey[:10]) {
					t.Errorf("the key leaks: %v", err)
				}
				if n := strings.Count(err.Error(), s.EmbeddingsURL()); n != 1 {
					t.Errorf("the error names the endpoint %d times, want once: %v", n, err)
				}
				if strings.Contains(err.Error(), "overloaded") || strings.Contains(err.Error(), "invalid api key") {
					t.Errorf("the endpoint's error body reaches the caller: %v", err)
				}
			}
			if got := s.Requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
		})
	}
}

// A key echoed by the server, and a key in the URL's user part, never reach the error.
func TestEmbedErrorHidesKeys(t *testing.T) {
	s := embedtest.New(t)
	s.FailAlways, s.EchoAuth = true, true
	e := embedder(s)
	e.Attempts = 1
	e.URL = strings.Replace(s.EmbeddingsURL(), "http://", "http://user:url-secret-777@", 1)
	_, err := e.Embed(context.Background(), texts(1))
	if err == nil {
		t.Fatal("no error")
	}
	for _, secret := range []string{testKey, "url-secret-777", "Bearer sk-"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error holds %q: %v", secret, err)
		}
	}
	if !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("error = %v, want the status", err)
	}
	// The body is for the log only, and without the key either.
	var ee *embed.Error
	if !errors.As(err, &ee) || !strings.Contains(ee.Detail(), "overloaded") || strings.Contains(err.Error(), "overloaded") {
		t.Errorf("error %q, detail %q: want the body in the detail only", err, ee.Detail())
	}
	for _, secret := range []string{testKey, "url-secret-777", "Bearer sk-"} {
		if strings.Contains(ee.Detail(), secret) {
			t.Errorf("detail holds %q: %q", secret, ee.Detail())
		}
	}
}

// An endpoint that echoes the Authorization header URL-encoded and
// form-decoded, and the Basic value of the URL's user part: neither the
// error nor its detail (logged) holds the key or the URL password in any
// encoding.
func TestEmbedErrorHidesEncodedKeys(t *testing.T) {
	const key = "sk-proj/echo+key=0123"
	srv := httptest.NewServer(redacttest.EchoHandler(http.StatusUnauthorized, "Authorization"))
	defer srv.Close()
	e := &embed.Embedder{Endpoint: embed.Endpoint{URL: strings.Replace(srv.URL, "http://", "http://user:url%2Fpw@", 1) + "/v1/embeddings",
		Model: "m", APIKey: key, Attempts: 1}, BatchSize: 1}
	_, err := e.Embed(context.Background(), texts(1))
	var ee *embed.Error
	if !errors.As(err, &ee) || !strings.Contains(ee.Detail(), "access denied. Authorization: ***; encoded: ***; decoded: ***;") {
		t.Fatalf("error %v, detail %q: want the body, masked", err, ee.Detail())
	}
	forms := append(redacttest.Forms(key), redacttest.Forms("url/pw")...)
	for what, text := range map[string]string{"error": err.Error(), "detail": ee.Detail()} {
		if leaks := redacttest.Leaks(text, forms); len(leaks) > 0 {
			t.Errorf("%s shows %q: %s", what, leaks, text)
		}
	}
}

func TestEmbedCutsLongInputs(t *testing.T) {
	s := embedtest.New(t)
	long := strings.Repeat("é", embed.MaxInputBytes) // 2 bytes each
	if _, err := embedder(s).Embed(context.Background(), []string{long, "short"}); err != nil {
		t.Fatal(err)
	}
	in := s.Inputs()
	if len(in[0]) != embed.MaxInputBytes || !strings.HasPrefix(long, in[0]) {
		t.Errorf("sent %d bytes of the long input, want its first %d", len(in[0]), embed.MaxInputBytes)
	}
	if in[1] != "short" {
		t.Errorf("short input sent as %q", in[1])
	}
	if got := embed.Cut("aé" + strings.Repeat("x", embed.MaxInputBytes)); len(got) != embed.MaxInputBytes-1 {
		// "a" + 2-byte "é" + x…: a cut at MaxInputBytes lands inside no rune here, so check a boundary case too.
		if len(got) != embed.MaxInputBytes {
			t.Errorf("Cut kept %d bytes", len(got))
		}
	}
	odd := "a" + strings.Repeat("é", embed.MaxInputBytes/2)
	if got := embed.Cut(odd); len(got) != embed.MaxInputBytes-1 || !strings.HasPrefix(odd, got) {
		t.Errorf("Cut split a character: kept %d bytes", len(got))
	}
}

func TestEmbedCachedReusesVectors(t *testing.T) {
	s := embedtest.New(t)
	e := embedder(s)
	path := e.CachePath(t.TempDir(), "r")
	in := texts(5)
	first, err := e.EmbedCached(context.Background(), path, in)
	if err != nil || first.Sent != 5 || first.CacheErr != nil {
		t.Fatalf("first: sent %d, cache %v, err %v", first.Sent, first.CacheErr, err)
	}
	s.Reset()
	in[2] = "a changed chunk"
	second, err := e.EmbedCached(context.Background(), path, in)
	if err != nil || second.Sent != 1 {
		t.Fatalf("second: sent %d, err %v", second.Sent, err)
	}
	if got := s.Inputs(); !slices.Equal(got, []string{"a changed chunk"}) {
		t.Errorf("server saw %q, want only the changed chunk", got)
	}
	for i := range in {
		if i != 2 && !slices.Equal(first.Vectors[i], second.Vectors[i]) {
			t.Errorf("vector %d differs after the reload", i)
		}
	}
	// A damaged file is not trusted: everything is asked for again.
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Reset()
	third, err := e.EmbedCached(context.Background(), path, in)
	if err != nil || third.Sent != 5 || third.CacheErr == nil {
		t.Errorf("damaged file: sent %d, cache error %v, err %v", third.Sent, third.CacheErr, err)
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		t.Error(err)
	}
}

func TestRerankFormats(t *testing.T) {
	for _, tt := range []struct{ format, path string }{{embed.FormatTEI, "/rerank"}, {embed.FormatCohere, "/v1/rerank"}} {
		t.Run(tt.format, func(t *testing.T) {
			s := embedtest.New(t)
			s.RerankScore = func(q, d string) float64 { return float64(len(d)) }
			r := &embed.Reranker{Endpoint: embed.Endpoint{URL: s.URL + tt.path, Model: "rr", Timeout: time.Second}, Format: tt.format}
			scores, err := r.Rerank(context.Background(), "q", []string{"aaa", "a", "aa"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(scores, []float64{3, 1, 2}) {
				t.Errorf("scores = %v, want [3 1 2]", scores)
			}
		})
	}
}

func TestSearchIsExact(t *testing.T) {
	const dims, n = 24, 10000
	vecs := make([][]float32, n)
	for i := range vecs {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(math.Sin(float64(i*dims + j)))
		}
		embed.Normalize(v)
		vecs[i] = v
	}
	st := embed.NewStore(dims, vecs)
	q := append([]float32(nil), vecs[1234]...)
	ranges := []embed.Range{{Lo: 0, Hi: 5000}, {Lo: 6000, Hi: n}}
	hits := st.Search(q, ranges, 10)
	// The brute-force answer.
	var all []embed.Hit
	for _, r := range ranges {
		for i := r.Lo; i < r.Hi; i++ {
			all = append(all, embed.Hit{Row: i, Score: st.Dot(q, int(i))})
		}
	}
	slices.SortFunc(all, func(a, b embed.Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return int(a.Row) - int(b.Row)
	})
	if !slices.Equal(hits, all[:10]) {
		t.Errorf("Search = %v, want %v", hits, all[:10])
	}
	if hits[0].Row != 1234 {
		t.Errorf("best hit %d, want the query's own row", hits[0].Row)
	}
	if got := st.Search(q, []embed.Range{{Lo: 5000, Hi: 5003}}, 10); len(got) != 3 {
		t.Errorf("3 rows gave %d hits", len(got))
	}
}

func TestLRU(t *testing.T) {
	c := embed.NewLRU(2)
	c.Put("a", []float32{1})
	c.Put("b", []float32{2})
	c.Get("a")
	c.Put("c", []float32{3})
	if _, ok := c.Get("b"); ok {
		t.Error("b should be evicted (least recently used)")
	}
	if v, ok := c.Get("a"); !ok || v[0] != 1 {
		t.Error("a should be kept")
	}
}

// sameFile reports whether path is still the file info was taken of (a
// rewrite renames a new file over it).
func sameFile(t *testing.T, path string, info os.FileInfo) bool {
	t.Helper()
	now, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return os.SameFile(info, now)
}

func TestEmbedCachedModelChanges(t *testing.T) {
	t.Run("vectors of a new size replace the file's", func(t *testing.T) {
		s := embedtest.New(t)
		e := embedder(s)
		path := e.CachePath(t.TempDir(), "r")
		in := texts(5)
		if _, err := e.EmbedCached(context.Background(), path, in); err != nil {
			t.Fatal(err)
		}
		s.Dims = 32 // the model behind the endpoint changed
		in[0] = "a changed chunk"
		got, err := e.EmbedCached(context.Background(), path, in)
		if err != nil || got.Dims != 32 || got.Sent != 5 {
			t.Fatalf("after the change: dims %d, sent %d, err %v; want 32 dims, all 5 sent", got.Dims, got.Sent, err)
		}
		s.Reset()
		again, err := e.EmbedCached(context.Background(), path, in)
		if err != nil || again.Dims != 32 || again.Sent != 0 || again.CacheErr != nil {
			t.Errorf("next reload: dims %d, sent %d, cache %v, err %v; want the 32-dim vectors from the file", again.Dims, again.Sent, again.CacheErr, err)
		}
	})
	t.Run("a file of another endpoint is not read", func(t *testing.T) {
		a, b := embedtest.New(t), embedtest.New(t)
		ea, eb := embedder(a), embedder(b)
		dir := t.TempDir()
		if ea.CachePath(dir, "r") == eb.CachePath(dir, "r") {
			t.Errorf("two endpoints share the file %s", ea.CachePath(dir, "r"))
		}
		path := ea.CachePath(dir, "r")
		in := texts(4)
		if _, err := ea.EmbedCached(context.Background(), path, in); err != nil {
			t.Fatal(err)
		}
		// The same file (a path clash, a copied cache) read for endpoint b.
		got, err := eb.EmbedCached(context.Background(), path, in)
		if err != nil || got.Sent != 4 || b.Requests() == 0 {
			t.Fatalf("endpoint b: sent %d, requests %d, err %v; want all 4 asked of b", got.Sent, b.Requests(), err)
		}
		b.Reset()
		if again, err := eb.EmbedCached(context.Background(), path, in); err != nil || again.Sent != 0 {
			t.Errorf("endpoint b again: sent %d, err %v; want its own vectors from the rewritten file", again.Sent, err)
		}
	})
}

// A damaged header is refused before anything is allocated from it.
func TestEmbedCachedCraftedHeader(t *testing.T) {
	const magic = len("contextrouter-vectors-2\n") + 32 // then dims, count
	tests := []struct {
		name    string
		dims, n uint32
		want    string
	}{
		// rec = 2^34 bytes, and 2^30 of them wrap a 64-bit product to 0.
		{"dims past the limit, count overflowing the size", 1<<32 - 8, 1 << 30, "dimensions is not from 1 to 8192"},
		{"count past the body", 64, 1<<32 - 1, "truncated or damaged"},
		{"zero dims", 0, 0, "dimensions is not from 1 to 8192"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := embedtest.New(t)
			e := embedder(s)
			path := e.CachePath(t.TempDir(), "r")
			in := texts(3)
			if _, err := e.EmbedCached(context.Background(), path, in); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b[:magic], tt.dims), tt.n)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := e.EmbedCached(context.Background(), path, in)
			if err != nil || got.Sent != 3 || got.CacheErr == nil || !strings.Contains(got.CacheErr.Error(), tt.want) {
				t.Errorf("sent %d, cache error %v, err %v; want all 3 sent and %q", got.Sent, got.CacheErr, err, tt.want)
			}
		})
	}
}

// Texts that repeat are kept once: a reload of the same texts leaves the
// file alone.
func TestEmbedCachedDuplicateTexts(t *testing.T) {
	s := embedtest.New(t)
	e := embedder(s)
	path := e.CachePath(t.TempDir(), "r")
	in := []string{"same text", "other text", "same text", "same text"}
	first, err := e.EmbedCached(context.Background(), path, in)
	if err != nil {
		t.Fatal(err)
	}
	if first.Sent != 2 {
		t.Errorf("first: sent %d, want the 2 distinct texts once each", first.Sent)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.EmbedCached(context.Background(), path, in)
	if err != nil || second.Sent != 0 || !slices.Equal(second.Vectors[3], first.Vectors[0]) {
		t.Errorf("second: sent %d, err %v; want all from the file", second.Sent, err)
	}
	if !sameFile(t, path, info) {
		t.Error("a reload of the same texts rewrote the vector file")
	}
}

// A context that ends while a retry waits gives one error that names the
// endpoint once.
func TestEmbedContextEndsBetweenRetries(t *testing.T) {
	s := embedtest.New(t)
	s.FailAlways, s.RetryAfter = true, "5"
	e := embedder(s)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := e.Embed(ctx, texts(1))
	var ee *embed.Error
	want := s.EmbeddingsURL() + ": HTTP 503 Service Unavailable (context deadline exceeded after 1 of 4 attempts)"
	if !errors.As(err, &ee) || ee.Reason != embed.ReasonTimeout || err.Error() != want {
		t.Errorf("error = %v, want reason timeout and %q", err, want)
	}
	if got := s.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}
