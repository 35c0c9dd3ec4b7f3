package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/contextrouter/contextrouter/internal/digest"
)

// BenchmarkHandlerQueryAudit is BenchmarkHandlerQuery with the audit log on:
// every delivery is formatted (chunk hashes included) and written, to a
// file (one write per line) or discarded (the formatting alone).
func BenchmarkHandlerQueryAudit(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts func(b *testing.B) Options
	}{
		{"file", func(b *testing.B) Options { return Options{AuditLog: filepath.Join(b.TempDir(), "audit.jsonl")} }},
		{"discard", func(b *testing.B) Options { return Options{AuditLog: "-", AuditOutput: io.Discard} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			opts := tc.opts(b)
			opts.Paths, opts.Logger = []string{quickstart}, slog.New(slog.NewTextHandler(io.Discard, nil))
			srv, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Reload(context.Background()); err != nil {
				b.Fatal(err)
			}
			h := srv.Handler()
			body := []byte(benchQuery)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/query", bytes.NewReader(body)))
					if w.Code != http.StatusOK || w.Header().Get(RequestIDHeader) == "" {
						b.Fatalf("status %d, request id %q", w.Code, w.Header().Get(RequestIDHeader))
					}
				}
			})
		})
	}
}

// BenchmarkAuditSampled is the sampling decision of one delivery at a rate
// below 1 (a caller-sized request id).
func BenchmarkAuditSampled(b *testing.B) {
	p := &auditPolicy{threshold: 1 << 62, macs: digest.NewMAC(digest.NewKey())}
	id := "0b9c6f1e-4a7d-4e55-9d1b-2f3c4a5b6c7d"
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		if p.sampled(id) {
			n++
		}
	}
	_ = n
}
