package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

const benchQuery = `{"text": "How many vacation days do I get, and can I carry them over?", "agent": "hr-assistant"}`

func benchServer(b *testing.B) *Server {
	b.Helper()
	srv, err := New(Options{Paths: []string{quickstart}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Reload(context.Background()); err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkHandlerQuery is one POST /v1/query through the handler, without
// the network: decoding, identity, the engine's query, metrics, encoding.
func BenchmarkHandlerQuery(b *testing.B) {
	h := benchServer(b).Handler()
	body := []byte(benchQuery)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/query", bytes.NewReader(body)))
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}

// BenchmarkHTTPQuery is POST /v1/query over loopback HTTP with keep-alive
// connections: what a load generator sees, minus its own cost.
func BenchmarkHTTPQuery(b *testing.B) {
	ts := httptest.NewServer(benchServer(b).Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	body := []byte(benchQuery)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(ts.URL+"/v1/query", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
