package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/session"
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

// benchItems are n session items as an agent writes them: turns, tool
// calls and results (every tenth result an 11 kB JSON document, over the
// firewall threshold), agent messages.
func benchItems(prefix string, from, n int) []session.Item {
	var rows []string
	for i := range 200 {
		rows = append(rows, fmt.Sprintf(`{"id": %d, "status": "paid", "amount": %d, "customer": "c-%d"}`, i, i*12, i%7))
	}
	big := `{"invoices": [` + strings.Join(rows, ", ") + `]}`
	items := make([]session.Item, 0, n)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("%s%03d", prefix, i)
		it := session.Item{ID: id, Kind: session.KindUserTurn, Text: fmt.Sprintf("please check invoice %d status for customer %d", i, i%7)}
		switch i % 4 {
		case 1:
			it.Kind, it.Text = session.KindToolCall, fmt.Sprintf("invoices.get(id=%d)", i)
		case 2:
			it.Kind, it.ParentID, it.Text = session.KindToolResult, fmt.Sprintf("%s%03d", prefix, i-1), fmt.Sprintf(`{"id": %d, "status": "paid"}`, i)
			if i%20 == 2 {
				it.Text = big
			}
		case 3:
			it.Kind, it.Text = session.KindAgentMessage, fmt.Sprintf("invoice %d is paid; it settled on day %d", i, i%30)
		}
		items = append(items, it)
	}
	return items
}

func benchPost(b *testing.B, client *http.Client, url string, body []byte) time.Duration {
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: status %d", url, resp.StatusCode)
	}
	return time.Since(start)
}

// reportP50 adds the median of single calls to a benchmark's output.
func reportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
}

// BenchmarkHTTPSessionContext is POST /v1/sessions/{id}/context over
// loopback HTTP for a session of 200 items (10 of them oversized tool
// results), written in 4 writes: load, pack, encode, transport.
func BenchmarkHTTPSessionContext(b *testing.B) {
	ts := httptest.NewServer(benchServer(b).Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	for w := range 4 {
		body, _ := json.Marshal(map[string]any{"agent": "hr-assistant", "items": benchItems("i", w*50, 50)})
		benchPost(b, client, ts.URL+"/v1/sessions/bench/items", body)
	}
	for _, bc := range []struct{ name, body string }{
		{"answer", `{"phase": "answer", "agent": "hr-assistant"}`},
		{"answer+query", `{"phase": "answer", "agent": "hr-assistant", "query": "How many vacation days do I get?"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for range b.N {
				d = append(d, benchPost(b, client, ts.URL+"/v1/sessions/bench/context", []byte(bc.body)))
			}
			reportP50(b, d)
		})
	}
}

// BenchmarkHTTPSessionAppend is POST /v1/sessions/{id}/items of 5 items
// over loopback HTTP, sessions growing to 200 items: append throughput.
func BenchmarkHTTPSessionAppend(b *testing.B) {
	ts := httptest.NewServer(benchServer(b).Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	bodies := make([][]byte, 40)
	for w := range bodies {
		bodies[w], _ = json.Marshal(map[string]any{"agent": "hr-assistant", "items": benchItems("i", w*5, 5)})
	}
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d = append(d, benchPost(b, client, fmt.Sprintf("%s/v1/sessions/s%d/items", ts.URL, i/40), bodies[i%40]))
	}
	reportP50(b, d)
}
