package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/notready", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error": "no snapshot yet"}`, http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/readyz"
	l.Close()

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  []string
	}{
		{"2xx exits 0", []string{srv.URL + "/readyz"}, 0, nil},
		{"503 exits 1 with status and body", []string{srv.URL + "/notready"}, 1,
			[]string{"503 Service Unavailable", `{"error": "no snapshot yet"}`}},
		{"nothing listening", []string{closed}, 1, []string{"GET " + closed, "connection refused"}},
		{"timeout", []string{"--timeout", "200ms", srv.URL + "/slow"}, 1, []string{"context deadline exceeded"}},
		{"not a URL", []string{"127.0.0.1:8787/readyz"}, 1, []string{`"127.0.0.1:8787/readyz" is not an http(s) URL`}},
		{"zero timeout", []string{"--timeout", "0s", srv.URL + "/readyz"}, 1, []string{"--timeout: must be positive"}},
		{"credentials in the URL are not printed", []string{strings.Replace(closed, "http://", "http://probe:pr0be-s3cret@", 1)}, 1,
			[]string{"GET http://***@" + strings.TrimPrefix(closed, "http://"), "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out, stderr, code := run(t, append([]string{"probe"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, stderr)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if strings.Contains(stderr, "pr0be-s3cret") {
				t.Errorf("stderr %q shows the password", stderr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s: the timeout was not applied", took)
			}
		})
	}
}
