// Command loadgen measures the throughput and latency of an HTTP endpoint,
// by default `contextrouter serve`'s POST /v1/query. Each worker sends the
// same request over its own keep-alive HTTP/1.1 connection as fast as it is
// answered, for a duration (-d) or a number of requests (-n), after a
// warm-up that is not measured. The request is serialised once and answers
// are parsed with net/http's reader, so the generator costs little CPU on
// the machine it measures.
//
//	go run ./hack/loadgen -url http://127.0.0.1:8080/v1/query -c 16 -d 10s \
//	  -body '{"text": "How many vacation days do I get?", "agent": "hr-assistant"}'
//
// It prints queries/s, latency percentiles and status counts (-json for one
// JSON object) and exits 1 when any request failed or was not answered 2xx.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// headers collects repeated -H flags.
type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

type config struct {
	url         string
	addr        string // host:port to dial
	raw         []byte // the request, serialised once
	method      string
	body        []byte
	header      http.Header
	concurrency int
	duration    time.Duration
	requests    int
	warmup      time.Duration
	timeout     time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      config
		body     string
		hs       headers
		jsonOut  bool
		defaults = `{"text": "How many vacation days do I get, and can I carry them over?", "agent": "hr-assistant"}`
	)
	fs.StringVar(&cfg.url, "url", "http://127.0.0.1:8080/v1/query", "endpoint to load")
	fs.StringVar(&cfg.method, "method", http.MethodPost, "HTTP method")
	fs.StringVar(&body, "body", defaults, "request body, or @FILE to read it from a file")
	fs.Var(&hs, "H", `request header "Name: value" (repeatable)`)
	fs.IntVar(&cfg.concurrency, "c", 16, "concurrent workers (one connection each)")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "how long to measure (ignored with -n)")
	fs.IntVar(&cfg.requests, "n", 0, "measure this many requests instead of a duration")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured load before measuring")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "timeout of one request")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := cfg.complete(body, hs); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	rep := load(context.Background(), cfg)
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	if rep.Failed > 0 {
		return 1
	}
	return 0
}

func (c *config) complete(body string, hs headers) error {
	if c.concurrency < 1 {
		return fmt.Errorf("-c: %d workers; want at least 1", c.concurrency)
	}
	if c.requests < 0 || (c.requests == 0 && c.duration <= 0) {
		return errors.New("-d must be positive, or -n a number of requests")
	}
	if c.warmup < 0 || c.timeout <= 0 {
		return errors.New("-warmup must not be negative and -timeout must be positive")
	}
	if name, ok := strings.CutPrefix(body, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return fmt.Errorf("-body: %w", err)
		}
		body = string(b)
	}
	c.body = []byte(body)
	c.header = http.Header{}
	if len(c.body) > 0 {
		c.header.Set("Content-Type", "application/json")
	}
	for _, h := range hs {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf(`-H %q: want "Name: value"`, h)
		}
		c.header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	u, err := url.Parse(c.url)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: want an absolute http:// URL", c.url)
	}
	c.addr = u.Host
	if u.Port() == "" {
		c.addr = net.JoinHostPort(u.Hostname(), "80")
	}
	req, err := http.NewRequest(c.method, c.url, bytes.NewReader(c.body))
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	req.Header = c.header
	var raw bytes.Buffer
	if err := req.Write(&raw); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	c.raw = raw.Bytes()
	return nil
}

// Report is the outcome of a run.
type Report struct {
	URL         string  `json:"url"`
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Seconds     float64 `json:"seconds"`
	QPS         float64 `json:"qps"`
	// Latencies in milliseconds.
	Latency Latency `json:"latency_ms"`
	// Status counts the answers by HTTP status code.
	Status map[string]int `json:"status"`
	// Failed counts transport errors and non-2xx answers.
	Failed int `json:"failed"`
	// Errors are examples of transport errors, with their counts.
	Errors map[string]int `json:"errors,omitempty"`
}

// Latency summarises the measured requests.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
}

// worker results are kept apart until the end: no shared state while measuring.
type workerResult struct {
	lat    []time.Duration
	status map[int]int
	errs   map[string]int
}

func load(ctx context.Context, cfg config) Report {
	var (
		measuring atomic.Bool
		tickets   atomic.Int64
		stop      atomic.Bool
		wg        sync.WaitGroup
	)
	// Without a warm-up every request counts, from the first.
	measuring.Store(cfg.warmup == 0)
	start := time.Now()
	results := make([]workerResult, cfg.concurrency)
	for w := range results {
		results[w] = workerResult{status: map[int]int{}, errs: map[string]int{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[w]
			c := &client{cfg: &cfg}
			defer c.close()
			for !stop.Load() && ctx.Err() == nil {
				counted := measuring.Load()
				if counted && cfg.requests > 0 && tickets.Add(1) > int64(cfg.requests) {
					return
				}
				began := time.Now()
				code, err := c.send()
				took := time.Since(began)
				if !counted {
					continue
				}
				res.lat = append(res.lat, took)
				if err != nil {
					res.errs[err.Error()]++
					continue
				}
				res.status[code]++
			}
		}()
	}
	if cfg.warmup > 0 {
		time.Sleep(cfg.warmup)
		start = time.Now()
		measuring.Store(true)
	}
	if cfg.requests == 0 {
		select {
		case <-time.After(cfg.duration):
		case <-ctx.Done():
		}
		stop.Store(true)
	}
	wg.Wait()
	return summarize(cfg, results, time.Since(start))
}

// client is one worker's keep-alive HTTP/1.1 connection. It writes a
// request serialised once and parses answers with net/http, so that the
// load generator spends little CPU per request on the machine it measures.
type client struct {
	cfg  *config
	conn net.Conn
	r    *bufio.Reader
}

func (c *client) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// send makes one request and reads the whole answer. A broken connection
// is replaced by the next request.
func (c *client) send() (int, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.cfg.addr, c.cfg.timeout)
		if err != nil {
			return 0, err
		}
		c.conn = conn
		if c.r == nil {
			c.r = bufio.NewReaderSize(conn, 64<<10)
		} else {
			c.r.Reset(conn)
		}
	}
	_ = c.conn.SetDeadline(time.Now().Add(c.cfg.timeout))
	if _, err := c.conn.Write(c.cfg.raw); err != nil {
		c.close()
		return 0, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	return resp.StatusCode, err
}

func summarize(cfg config, results []workerResult, elapsed time.Duration) Report {
	rep := Report{URL: cfg.url, Concurrency: cfg.concurrency, Seconds: elapsed.Seconds(), Status: map[string]int{}, Errors: map[string]int{}}
	var all []time.Duration
	for _, r := range results {
		all = append(all, r.lat...)
		for code, n := range r.status {
			rep.Status[strconv.Itoa(code)] += n
			if code < 200 || code > 299 {
				rep.Failed += n
			}
		}
		for msg, n := range r.errs {
			rep.Errors[msg] += n
			rep.Failed += n
		}
	}
	rep.Requests = len(all)
	if rep.Requests == 0 {
		return rep
	}
	// A run by count ends when the last request does, not at a fixed time.
	rep.QPS = float64(rep.Requests) / elapsed.Seconds()
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
	pct := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(all)))) - 1
		return ms(all[max(i, 0)])
	}
	rep.Latency = Latency{
		Mean: ms(sum / time.Duration(len(all))), P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), P999: pct(0.999),
		Max: ms(all[len(all)-1]),
	}
	return rep
}

func (r Report) print(w io.Writer) {
	fmt.Fprintf(w, "url:          %s\n", r.URL)
	fmt.Fprintf(w, "concurrency:  %d\n", r.Concurrency)
	fmt.Fprintf(w, "requests:     %d in %.2fs\n", r.Requests, r.Seconds)
	fmt.Fprintf(w, "throughput:   %.0f q/s\n", r.QPS)
	l := r.Latency
	fmt.Fprintf(w, "latency (ms): mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", l.Mean, l.P50, l.P90, l.P99, l.P999, l.Max)
	codes := make([]string, 0, len(r.Status))
	for c := range r.Status {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s: %d", c, r.Status[c]))
	}
	fmt.Fprintf(w, "status:       %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "failed:       %d\n", r.Failed)
	msgs := make([]string, 0, len(r.Errors))
	for m := range r.Errors {
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		fmt.Fprintf(w, "  %d× %s\n", r.Errors[m], m)
	}
}
