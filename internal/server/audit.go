package server

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/session"
)

// The audit log (api.md §6.5): one JSON line per delivery of context to an
// agent, written by deliver. Everything here runs after the answer is made;
// with auditing off a delivery costs the deliveries_total counter only.

// AuditRecordType is the "type" of every audit line, so that a log store
// can tell them from other lines of the same stream.
const AuditRecordType = "contextrouter.audit.v1"

// RequestIDHeader carries a caller's request id; an answer that was audited
// carries the id it was recorded under.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDBytes bounds a caller's request id; a longer or odd one is
// replaced by a generated id.
const maxRequestIDBytes = 128

// otherAgent is the agent label of deliveries to agents no AgentPermission names.
const otherAgent = "other"

// Delivery is what one answered request delivered to an agent. Every
// endpoint that delivers context (query, tools, MCP get_context and
// find_tools, session packs: packDelivery) fills one and calls
// Server.deliver after the answer is made and before it is written, then
// sets X-Request-Id to the id deliver returns (when not ""). Only the hashes
// of the chunks' contents are recorded.
type Delivery struct {
	// Endpoint: "query", "tools", "mcp:get_context", "mcp:find_tools", "session".
	Endpoint string
	// Agent is the settled agent ("" when none was named or pinned).
	Agent string
	// Text is the question; the audit policy decides whether it is kept.
	Text          string
	Routes        []string
	Chunks        []engine.Chunk
	Tools         []engine.ToolCard
	DeniedSources []string
	FailedSources []engine.SourceFailure
	Tokens        int
	// Session is the session a pack was built from ("" for other endpoints).
	Session string
}

// DeliveryFromResponse is the Delivery of an answered query.
func DeliveryFromResponse(endpoint, text string, agent string, r *engine.Response) Delivery {
	return Delivery{Endpoint: endpoint, Agent: agent, Text: text, Routes: r.MatchedRoutes, Chunks: r.Chunks, Tools: r.Tools,
		DeniedSources: r.DeniedSources, FailedSources: r.FailedSources, Tokens: r.TotalTokens}
}

// packDelivery is the Delivery of a session pack: its knowledge chunks and
// tool cards (the session's own items are the agent's, not delivered
// context) and, when the pack ran a query, that query's routes and sources.
func packDelivery(sessionID, agent, query string, p *session.Pack, r *engine.Response) Delivery {
	d := Delivery{Endpoint: "session", Session: sessionID, Agent: agent, Text: query, Chunks: p.Chunks, Tools: p.Tools, Tokens: p.TotalTokens}
	if r != nil {
		d.Routes, d.DeniedSources, d.FailedSources = r.MatchedRoutes, r.DeniedSources, r.FailedSources
	}
	return d
}

// toolsDelivery is the Delivery of an answered tool shortlist.
func toolsDelivery(endpoint string, req engine.Request, r *engine.ToolsResponse) Delivery {
	return Delivery{Endpoint: endpoint, Agent: req.Agent, Text: req.Text, Routes: r.MatchedRoutes, Tools: r.Tools,
		DeniedSources: r.DeniedSources, FailedSources: r.FailedSources}
}

// callHeader is the HTTP header of an MCP call (nil when it came another way).
func callHeader(call *mcp.CallToolRequest) http.Header {
	if call.Extra == nil {
		return nil
	}
	return call.Extra.Header
}

// auditPolicy is a snapshot's audit settings; nil means no audit.
type auditPolicy struct {
	// all: sampleRate 1; otherwise a delivery is recorded when the first 8
	// bytes of the HMAC-SHA-256 of its request id (macs), big-endian, are
	// below threshold.
	all       bool
	threshold uint64
	// macs is HMAC-SHA-256 under the server's sampling key.
	macs      *digest.MAC
	queryText v1alpha1.AuditQueryText
}

// auditPolicyFor reads spec.audit: auditing is on when the router enables
// it or serve was given --audit-log.
func (s *Server) auditPolicyFor(cfg *engine.Config) *auditPolicy {
	a := cfg.Router.Spec.Audit.DeepCopy()
	if a == nil {
		a = &v1alpha1.AuditSpec{}
	}
	a.Default()
	if !a.Enabled && s.opts.AuditLog == "" {
		return nil
	}
	rate, _ := a.Rate() // Validate has checked it
	p := &auditPolicy{queryText: a.QueryText, all: rate >= 1}
	if !p.all {
		p.threshold = uint64(rate * math.Exp2(64))
		p.macs = s.auditMACs
	}
	return p
}

// sampled is the sampling rule. The request id is the caller's to choose,
// so it is hashed under the process's secret key: a caller cannot pick ids
// that are never recorded (a plain hash of the id would let it).
func (p *auditPolicy) sampled(requestID string) bool {
	if p.all {
		return true
	}
	sum := p.macs.Sum(requestID)
	return binary.BigEndian.Uint64(sum[:8]) < p.threshold
}

// auditMetrics are the audit log's series; the writer's counts are read
// from the auditLog, which keeps them.
type auditMetrics struct {
	deliveries *prometheus.CounterVec
}

func newAuditMetrics(reg prometheus.Registerer, l *auditLog) *auditMetrics {
	m := &auditMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "deliveries_total",
			Help: "Answered deliveries of context by agent (those AgentPermissions name; others are \"other\") and by source of the delivered chunks and tools.",
		}, []string{"agent", "source"}),
	}
	count := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help},
			func() float64 { return float64(v.Load()) })
	}
	reg.MustRegister(m.deliveries,
		count("audit_records_total", "Audit log lines written.", &l.written),
		count("audit_write_errors_total", "Audit log lines that could not be written (the deliveries were answered).", &l.writeErrors),
		count("audit_dropped_total", "Audit log lines dropped because the queue to the sink was full (a stalled or slow sink), or still queued at shutdown (the deliveries were answered).", &l.dropped),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "audit_queue_bytes",
			Help: fmt.Sprintf("Bytes of audit log lines queued for the sink or being written (at most %d).", l.limit)},
			func() float64 { return float64(l.status(time.Now()).QueuedBytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "audit_sink_stalled",
			Help: fmt.Sprintf("1 while a write to the audit log has not returned for %s (the sink is stalled; lines queue, then are dropped), else 0.", l.stallAfter)},
			func() float64 {
				if l.status(time.Now()).Stalled {
					return 1
				}
				return 0
			}),
	)
	return m
}

// deliveryCounters resolve deliveries_total series for one snapshot: the
// agent label is bounded by the agents its permissions name, the source
// label by its sources.
type deliveryCounters struct {
	vec     *prometheus.CounterVec
	agents  map[string]bool
	sources map[string]bool
	// resolved holds prometheus.Counter by deliveryKey.
	resolved sync.Map
}

type deliveryKey struct{ agent, source string }

func newDeliveryCounters(vec *prometheus.CounterVec, snap *engine.Snapshot) *deliveryCounters {
	c := &deliveryCounters{vec: vec, agents: map[string]bool{}, sources: map[string]bool{}}
	for _, a := range snap.KnownAgents() {
		c.agents[a] = true
	}
	for _, src := range snap.Sources() {
		c.sources[src.Name] = true
	}
	return c
}

// add counts one delivery from source to agent.
func (c *deliveryCounters) add(agent, source string) {
	if !c.agents[agent] {
		agent = otherAgent
	}
	k := deliveryKey{agent, source}
	ctr, ok := c.resolved.Load(k)
	if !ok {
		ctr, _ = c.resolved.LoadOrStore(k, c.vec.WithLabelValues(agent, source))
	}
	ctr.(prometheus.Counter).Inc()
}

// retire drops the series of agents and sources cur no longer has.
func (c *deliveryCounters) retire(cur *deliveryCounters) {
	for a := range c.agents {
		if !cur.agents[a] {
			c.vec.DeletePartialMatch(prometheus.Labels{"agent": a})
		}
	}
	for src := range c.sources {
		if !cur.sources[src] {
			c.vec.DeletePartialMatch(prometheus.Labels{"source": src})
		}
	}
}

// deliver counts an answered delivery and, when the snapshot audits and the
// request is sampled, queues its audit line for the writer. It returns the
// request id the line was recorded under ("" when auditing is off). It never
// waits for the sink: a line the queue cannot take is dropped and counted,
// and the answer goes out anyway.
func (s *Server) deliver(header http.Header, st *state, d *Delivery, start time.Time) string {
	s.countDelivery(st, d)
	p := st.audit
	if p == nil || s.auditLog == nil {
		return ""
	}
	id := requestID(header)
	if !p.sampled(id) {
		return id
	}
	bp := respPool.Get().(*[]byte)
	line := s.appendAuditRecord((*bp)[:0], st, p, d, id, start)
	s.auditLog.enqueue(line)
	if cap(line) <= maxPooledBuffer {
		*bp = line[:0]
		respPool.Put(bp)
	}
	return id
}

// countDelivery adds one to deliveries_total for each source that delivered
// a chunk or a tool.
func (s *Server) countDelivery(st *state, d *Delivery) {
	var seen [8]string
	srcs := seen[:0]
	note := func(src string) {
		if !slices.Contains(srcs, src) {
			srcs = append(srcs, src)
			st.deliveries.add(d.Agent, src)
		}
	}
	for i := range d.Chunks {
		note(d.Chunks[i].Source)
	}
	for i := range d.Tools {
		note(d.Tools[i].Source)
	}
}

// requestID is the caller's X-Request-Id when it is 1–128 printable ASCII
// characters without quotes or backslashes, else a new random id.
func requestID(h http.Header) string {
	if id := h.Get(RequestIDHeader); id != "" && len(id) <= maxRequestIDBytes {
		ok := true
		for i := 0; i < len(id) && ok; i++ {
			c := id[i]
			ok = c > ' ' && c < 0x7f && c != '"' && c != '\\'
		}
		if ok {
			return id
		}
	}
	return rand.Text()
}

// authOf is how the caller's identity was established: "pinned" (serve
// --agent), "token" (a verified ServiceAccount token) or "none" (the
// request's agent field, trusted).
func (s *Server) authOf(st *state) string {
	switch {
	case s.opts.Agent != "":
		return "pinned"
	case st.tokens:
		return "token"
	}
	return "none"
}

// ChunkHash is the short content hash of a delivered chunk in the audit
// log: the first 16 hex digits (64 bits) of the SHA-256 of its content as
// delivered (after redaction or truncation).
func ChunkHash(content string) string {
	sum := digest.SHA256(content)
	return hex.EncodeToString(sum[:8])
}

// appendAuditRecord appends one audit line (api.md §6.5), keys in a fixed order.
func (s *Server) appendAuditRecord(b []byte, st *state, p *auditPolicy, d *Delivery, id string, start time.Time) []byte {
	now := time.Now()
	b = append(b, `{"time":"`...)
	b = now.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":"`+AuditRecordType+`","request_id":`...)
	b = appendString(b, id)
	b = append(b, `,"endpoint":`...)
	b = appendString(b, d.Endpoint)
	if d.Session != "" {
		b = append(b, `,"session":`...)
		b = appendString(b, d.Session)
	}
	b = append(b, `,"router":`...)
	b = appendString(b, st.cfg.Router.Name)
	b = append(b, `,"namespace":`...)
	b = appendString(b, st.cfg.Router.Namespace)
	b = append(b, `,"snapshot":`...)
	b = appendString(b, st.snap.Hash())
	b = append(b, `,"agent":`...)
	b = appendString(b, d.Agent)
	b = append(b, `,"auth":`...)
	b = appendString(b, s.authOf(st))
	switch p.queryText {
	case v1alpha1.AuditQueryHash:
		b = append(b, `,"query_sha256":"`...)
		sum := digest.SHA256(d.Text)
		b = hex.AppendEncode(b, sum[:])
		b = append(b, '"')
	case v1alpha1.AuditQueryFull:
		b = append(b, `,"query":`...)
		b = appendString(b, redact.Text(d.Text))
	}
	b = append(b, `,"routes":`...)
	b = appendStrings(b, nonNil(d.Routes))
	b = append(b, `,"sources":[`...)
	var seen [8]string
	srcs := seen[:0]
	for i := range d.Chunks {
		if src := d.Chunks[i].Source; !slices.Contains(srcs, src) {
			srcs = append(srcs, src)
		}
	}
	for i := range d.Tools {
		if src := d.Tools[i].Source; !slices.Contains(srcs, src) {
			srcs = append(srcs, src)
		}
	}
	slices.Sort(srcs)
	for i, src := range srcs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, src)
	}
	b = append(b, `],"chunks":[`...)
	for i := range d.Chunks {
		c := &d.Chunks[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"source":`...)
		b = appendString(b, c.Source)
		b = append(b, `,"path":`...)
		b = appendString(b, c.Path)
		b = append(b, `,"chunk":`...)
		b = strconv.AppendInt(b, int64(c.Metadata.Chunk), 10)
		b = append(b, `,"sha256":"`...)
		sum := digest.SHA256(c.Content)
		b = hex.AppendEncode(b, sum[:8])
		b = append(b, '"')
		if c.Metadata.Stale != nil && *c.Metadata.Stale {
			b = append(b, `,"stale":true`...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"tools":[`...)
	for i := range d.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, (&v1alpha1.Tool{Name: d.Tools[i].Name, Namespace: d.Tools[i].Namespace}).ID())
	}
	b = append(b, `],"denied_sources":`...)
	b = appendStrings(b, nonNil(d.DeniedSources))
	b = append(b, `,"failed_sources":[`...)
	for i := range d.FailedSources {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, d.FailedSources[i].Source)
	}
	b = append(b, `],"tokens":`...)
	b = strconv.AppendInt(b, int64(d.Tokens), 10)
	b = append(b, `,"latency_ms":`...)
	b = appendFloat(b, math.Round(float64(now.Sub(start).Microseconds()))/1000)
	return append(b, "}\n"...)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
