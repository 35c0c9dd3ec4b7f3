// Command agent is the test agent of the end-to-end suite: a stand-in for an
// AI agent's pod that asks the router what to put into its context window.
//
// It posts one query to $CONTEXTROUTER_URL/v1/query (retrying until it gets
// an HTTP answer or AGENT_RETRY_FOR runs out), prints what it got as one JSON
// line on stdout, and serves that result on :8080 so that the test, which
// cannot exec into the pod, reads it over the pod IP:
//
//	GET /result         the first query's result (503 until there is one)
//	GET /query[?text=][&agent=]  a fresh query now, with the configured
//	                    text and agent or the given ones
//	GET /mcp?tool=T[&text=][&name=][&agent=]  calls tool T of the router's
//	                    MCP endpoint ($CONTEXTROUTER_URL/mcp) with the
//	                    official MCP Go SDK client; Response holds the
//	                    tool's structured result, Error its error text
//	GET /healthz        200
//
// The query is the arguments joined by spaces, else $AGENT_QUERY, else the
// first line of the file $AGENT_QUERY_FILE, re-read for every query so that a
// mounted ConfigMap can change it. $AGENT_NAME, $AGENT_TAGS (comma-separated)
// fill the request's agent and tags; a sidecar that pins the agent answers a
// request without one as its own agent.
//
// It is a static program packed into the image localhost/e2e-agent:dev
// (bin/images/agent.tar) by `make images`.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is what the agent reports for one query. Response holds the
// router's answer verbatim so that the test decodes it with its own types.
type Result struct {
	URL      string          `json:"url"`
	Request  json.RawMessage `json:"request"`
	Status   int             `json:"status,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	// Body is the answer when it is not JSON.
	Body     string `json:"body,omitempty"`
	Error    string `json:"error,omitempty"`
	Attempts int    `json:"attempts"`
	Time     string `json:"time"`
}

type config struct {
	url       string
	text      string
	textFile  string
	agent     string
	tags      []string
	listen    string
	retryFor  time.Duration
	timeout   time.Duration
	retryWait time.Duration
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("agent: ")
	cfg, err := loadConfig(os.Args[1:], os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		log.Fatal(err)
	}
}

func loadConfig(args []string, getenv func(string) string) (config, error) {
	cfg := config{
		url:       strings.TrimRight(getenv("CONTEXTROUTER_URL"), "/"),
		text:      strings.Join(args, " "),
		textFile:  getenv("AGENT_QUERY_FILE"),
		agent:     getenv("AGENT_NAME"),
		listen:    getenv("AGENT_LISTEN"),
		retryFor:  60 * time.Second,
		timeout:   10 * time.Second,
		retryWait: 500 * time.Millisecond,
	}
	if cfg.url == "" {
		return cfg, errors.New("CONTEXTROUTER_URL is not set")
	}
	if cfg.text == "" {
		cfg.text = getenv("AGENT_QUERY")
	}
	if cfg.text == "" && cfg.textFile == "" {
		return cfg, errors.New("no query: pass it as arguments, $AGENT_QUERY or $AGENT_QUERY_FILE")
	}
	for _, t := range strings.Split(getenv("AGENT_TAGS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.tags = append(cfg.tags, t)
		}
	}
	if cfg.listen == "" {
		cfg.listen = ":8080"
	}
	for _, d := range []struct {
		env string
		dst *time.Duration
	}{{"AGENT_RETRY_FOR", &cfg.retryFor}, {"AGENT_TIMEOUT", &cfg.timeout}} {
		if s := getenv(d.env); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v <= 0 {
				return cfg, fmt.Errorf("%s=%q: want a positive duration such as 30s", d.env, s)
			}
			*d.dst = v
		}
	}
	return cfg, nil
}

// queryURL accepts both the base URL the sidecar injection sets and a full
// /v1/query URL.
func (c config) queryURL() string {
	if strings.HasSuffix(c.url, "/v1/query") {
		return c.url
	}
	return c.url + "/v1/query"
}

// queryText is the configured text; the file wins so that a ConfigMap update
// shows in the next query.
func (c config) queryText() (string, error) {
	if c.textFile == "" {
		return c.text, nil
	}
	b, err := os.ReadFile(c.textFile)
	if err != nil {
		return "", fmt.Errorf("AGENT_QUERY_FILE: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("AGENT_QUERY_FILE %s: first line is empty", c.textFile)
	}
	return line, nil
}

type agent struct {
	cfg    config
	client *http.Client

	mu    sync.Mutex
	first *Result
}

func run(ctx context.Context, cfg config) error {
	a := &agent{cfg: cfg, client: &http.Client{Timeout: cfg.timeout}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /result", a.serveResult)
	mux.HandleFunc("GET /query", a.serveQuery)
	mux.HandleFunc("GET /mcp", a.serveMCP)
	srv := &http.Server{Addr: cfg.listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()

	go func() {
		r := a.queryUntilAnswered(ctx)
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		a.mu.Lock()
		a.first = &r
		a.mu.Unlock()
	}()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func (a *agent) serveResult(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	r := a.first
	a.mu.Unlock()
	if r == nil {
		http.Error(w, "no result yet", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, r)
}

func (a *agent) serveQuery(w http.ResponseWriter, req *http.Request) {
	text := req.URL.Query().Get("text")
	if text == "" {
		var err error
		if text, err = a.cfg.queryText(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	agent := a.cfg.agent
	if v := req.URL.Query().Get("agent"); v != "" {
		agent = v
	}
	r := a.query(req.Context(), text, agent)
	r.Attempts = 1
	writeJSON(w, &r)
}

// serveMCP calls one tool of the router's MCP endpoint in a session of its
// own, as an agent framework's MCP client would.
func (a *agent) serveMCP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	args := map[string]any{}
	for _, k := range []string{"text", "name", "agent"} {
		if v := q.Get(k); v != "" {
			args[k] = v
		}
	}
	r := a.callTool(req.Context(), q.Get("tool"), args)
	r.Attempts = 1
	writeJSON(w, &r)
}

func (a *agent) callTool(ctx context.Context, tool string, args map[string]any) Result {
	base := strings.TrimSuffix(a.cfg.queryURL(), "/v1/query")
	body, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args})
	r := Result{URL: base + "/mcp", Request: body, Time: now()}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.timeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.URL, HTTPClient: a.client}, nil)
	if err != nil {
		r.Error = "connect: " + err.Error()
		return r
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		r.Error = "call: " + err.Error()
		return r
	}
	r.Status = http.StatusOK
	if res.IsError {
		var texts []string
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				texts = append(texts, t.Text)
			}
		}
		r.Error = strings.Join(texts, "\n")
		return r
	}
	if res.StructuredContent != nil {
		r.Response, _ = json.Marshal(res.StructuredContent)
	}
	return r
}

func writeJSON(w http.ResponseWriter, r *Result) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(r)
}

// queryUntilAnswered retries while the router cannot be reached (a sidecar
// or Service that is not ready yet). Any HTTP answer, error statuses
// included, ends it: the test judges the status.
func (a *agent) queryUntilAnswered(ctx context.Context) Result {
	deadline := time.Now().Add(a.cfg.retryFor)
	for attempt := 1; ; attempt++ {
		var r Result
		text, err := a.cfg.queryText()
		if err != nil {
			r = Result{URL: a.cfg.queryURL(), Error: err.Error(), Time: now()}
		} else {
			r = a.query(ctx, text, a.cfg.agent)
		}
		r.Attempts = attempt
		if r.Status != 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return r
		}
		log.Printf("attempt %d: %s; retrying", attempt, r.Error)
		select {
		case <-ctx.Done():
		case <-time.After(a.cfg.retryWait):
		}
	}
}

func (a *agent) query(ctx context.Context, text, agentName string) Result {
	body, _ := json.Marshal(struct {
		Text  string   `json:"text"`
		Agent string   `json:"agent,omitempty"`
		Tags  []string `json:"tags,omitempty"`
	}{text, agentName, a.cfg.tags})
	r := Result{URL: a.cfg.queryURL(), Request: body, Time: now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	r.Status = resp.StatusCode
	if err != nil {
		r.Error = "reading the answer: " + err.Error()
	}
	if json.Valid(b) {
		r.Response = b
	} else {
		r.Body = string(b)
	}
	return r
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
