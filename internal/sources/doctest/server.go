// Package doctest serves a document over HTTP for tests: a real server on
// 127.0.0.1 whose answer a test can change, and that records what it was
// asked (tool catalogs and OpenAPI documents of spec.tools.http).
package doctest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server answers every request with its status and body, after its delay.
type Server struct {
	*httptest.Server
	mu      sync.Mutex
	status  int
	body    string
	delay   time.Duration
	headers []http.Header
	queries []string
}

// New starts a server answering 200 with body; it stops when the test ends.
func New(t testing.TB, body string) *Server {
	t.Helper()
	s := &Server{status: http.StatusOK, body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.queries = append(s.queries, r.URL.RawQuery)
		status, body, delay := s.status, s.body, s.delay
		s.mu.Unlock()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s
}

// Serve changes the answer.
func (s *Server) Serve(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// Delay makes every answer wait d (or until the client gives up).
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Requests is the number of requests answered or being answered.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.headers)
}

// Request returns the headers and the query string of the i-th request.
func (s *Server) Request(i int) (http.Header, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[i], s.queries[i]
}
