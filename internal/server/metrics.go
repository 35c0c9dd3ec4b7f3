package server

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources"
)

const metricsNamespace = "contextrouter"

// metrics are the server's Prometheus series, on a registry of their own.
type metrics struct {
	reg *prometheus.Registry

	queryDuration   prometheus.Histogram
	queryTimeouts   prometheus.Counter
	requests        *prometheus.CounterVec
	routeMatches    *prometheus.CounterVec
	routeErrors     *prometheus.CounterVec
	routeDuration   *prometheus.HistogramVec
	routeFallbacks  *prometheus.CounterVec
	routeAlternates *prometheus.CounterVec
	fetchDuration   *prometheus.HistogramVec
	sourceFailures  *prometheus.CounterVec
	reloads         *prometheus.CounterVec
	lastReload      *prometheus.GaugeVec
	gitSyncFailures *prometheus.CounterVec
	mcpSyncFailures *prometheus.CounterVec
	// catalogFetchFailures: failed fetches of a tool catalog over HTTP.
	catalogFetchFailures *prometheus.CounterVec
	mcpToolCalls         *prometheus.CounterVec
	toolOutcomes         *prometheus.CounterVec
	tokenReviews         *prometheus.CounterVec
	toolsReturned        prometheus.Histogram
	// classifierConfidence: the confidence of each classifier that ran, by classifier.
	classifierConfidence *prometheus.HistogramVec
	sessionPacks         *prometheus.CounterVec
	secretsMasked        *prometheus.CounterVec
	packDuration         prometheus.Histogram
	// embeddingErrors: queries ranked without an embedding or rerank endpoint's help.
	embeddingErrors *prometheus.CounterVec
}

// stateCounters are the per-route and per-source counters of one snapshot,
// resolved once so that a query does no label lookups.
type stateCounters struct {
	routeMatches   map[string]prometheus.Counter
	routeErrors    map[string]prometheus.Counter
	sourceFailures map[string]prometheus.Counter
	routeDuration  map[string]prometheus.Observer
	routeFallbacks map[string]prometheus.Counter
	// routeAlternates are by route; the alternate is the one the snapshot configures.
	routeAlternates map[string]prometheus.Counter
	// classifierConfidence is by classifier name.
	classifierConfidence map[string]prometheus.Observer
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.queryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "query_duration_seconds",
		Help:    "Time to answer POST /v1/query, from reading the request to writing the response.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})
	m.queryTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "query_timeouts_total",
		Help: "Queries stopped by --query-timeout while evaluating route conditions (answered 504).",
	})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "http_requests_total",
		Help: "HTTP requests by handler and status code.",
	}, []string{"handler", "code"})
	m.routeMatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "route_matches_total",
		Help: "Queries a route matched.",
	}, []string{"route"})
	m.routeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "route_errors_total",
		Help: "Queries for which a route's condition failed to evaluate (counted as no match).",
	}, []string{"route"})
	m.routeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "route_duration_seconds",
		Help:    "Time to answer a query (the engine's evaluation time), once for each route that served it.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"route"})
	m.routeFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "route_fallbacks_total",
		Help: "Queries a fallback route served because no other route matched.",
	}, []string{"route"})
	m.routeAlternates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "route_alternates_total",
		Help: "Queries in which every source of a route failed and its alternate route served instead.",
	}, []string{"route", "alternate"})
	m.fetchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "source_fetch_duration_seconds",
		Help:    "Time of one fetch from a per-query (HTTPAPI) source, failures included.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"source"})
	m.sourceFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "source_failures_total",
		Help: "Queries in which a source failed (listed in failed_sources): fetch errors and timeouts, and sources that could not be loaded.",
	}, []string{"source"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "snapshot_reloads_total",
		Help: "Snapshot builds by result; after a failure the previous snapshot keeps serving.",
	}, []string{"result"})
	m.lastReload = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "snapshot_last_reload_timestamp_seconds",
		Help: "Unix time of the last snapshot build, by result.",
	}, []string{"result"})
	m.gitSyncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "git_sync_failures_total",
		Help: "Failed syncs of a GitRepo source; it keeps serving its last good commit.",
	}, []string{"source"})
	m.mcpSyncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "mcp_sync_failures_total",
		Help: "Failed listings of an MCP source; it keeps serving its last good catalog.",
	}, []string{"source"})
	m.catalogFetchFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "catalog_fetch_failures_total",
		Help: "Failed fetches of a tool catalog or OpenAPI document over HTTP (spec.tools.http); it keeps serving its last good catalog.",
	}, []string{"source"})
	m.mcpToolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "mcp_tool_calls_total",
		Help: "Calls of the /mcp endpoint's tools by tool and result (success, refused: a bad request or another agent, failure).",
	}, []string{"tool", "result"})
	m.tokenReviews = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "token_reviews_total",
		Help: "TokenReview calls by result (authenticated, rejected, error); cached answers are not counted.",
	}, []string{"result"})
	m.toolsReturned = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "tools_returned",
		Help:    "Tool cards in an answer of POST /v1/tools, or of POST /v1/query when a matched route names a tool source.",
		Buckets: []float64{0, 1, 2, 3, 5, 10, 20, 50, 100},
	})
	m.classifierConfidence = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "classifier_confidence",
		Help:    "Confidence of a ContextClassifier's label in the queries that ran it (api.md §1.5).",
		Buckets: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1},
	}, []string{"classifier"})
	m.sessionPacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "session_packs_total",
		Help: "Context packs built by POST /v1/sessions/{id}/context, by phase.",
	}, []string{"phase"})
	m.packDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Name: "session_pack_duration_seconds",
		Help:    "Time to build a context pack, from reading the request to the pack (the query pipeline included when the request has a query).",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})
	m.secretsMasked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "session_secrets_masked_total",
		Help: "Secrets masked in session text when it was written, by rule of the scanner (api.md §11.10); never a value.",
	}, []string{"rule"})
	m.reg.MustRegister(m.sessionPacks, m.packDuration, m.secretsMasked)
	m.reg.MustRegister(sessionsCollector{s})
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.queryDuration, m.queryTimeouts, m.requests, m.routeMatches, m.routeErrors, m.fetchDuration, m.sourceFailures,
		m.routeDuration, m.routeFallbacks, m.routeAlternates,
		m.reloads, m.lastReload, m.gitSyncFailures, m.mcpSyncFailures, m.catalogFetchFailures, m.mcpToolCalls, m.tokenReviews, m.toolsReturned,
		&snapshotCollector{s: s},
	)
	m.reg.MustRegister(m.classifierConfidence)
	m.embeddingErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "embedding_errors_total",
		Help: "Queries that an embedding or rerank endpoint failed (ranked by BM25, or not reranked), by endpoint (embedding, rerank) and reason (api.md §5.3).",
	}, []string{"endpoint", "reason"})
	m.reg.MustRegister(m.embeddingErrors)
	m.toolOutcomes = newOutcomesCounter()
	m.reg.MustRegister(m.toolOutcomes)
	if c := s.opts.Cache; c != nil {
		m.reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: metricsNamespace, Name: "cache_hits_total",
				Help: "HTTPAPI fetches answered from the result cache.",
			}, func() float64 { h, _ := c.Stats(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Namespace: metricsNamespace, Name: "cache_misses_total",
				Help: "HTTPAPI fetches the result cache could not answer.",
			}, func() float64 { _, mi := c.Stats(); return float64(mi) }),
		)
	}
	return m
}

// forSnapshot resolves the counters of a snapshot's routes and sources.
func (m *metrics) forSnapshot(snap *engine.Snapshot) *stateCounters {
	c := &stateCounters{
		routeMatches:   map[string]prometheus.Counter{},
		routeErrors:    map[string]prometheus.Counter{},
		sourceFailures: map[string]prometheus.Counter{},
		routeDuration:  map[string]prometheus.Observer{}, routeFallbacks: map[string]prometheus.Counter{},
		routeAlternates: map[string]prometheus.Counter{}, classifierConfidence: map[string]prometheus.Observer{},
	}
	for _, cl := range snap.Classifiers() {
		c.classifierConfidence[cl.Name] = m.classifierConfidence.WithLabelValues(cl.Name)
	}
	for _, r := range snap.Routes() {
		c.routeMatches[r] = m.routeMatches.WithLabelValues(r)
		c.routeErrors[r] = m.routeErrors.WithLabelValues(r)
		c.routeDuration[r] = m.routeDuration.WithLabelValues(r)
		c.routeFallbacks[r] = m.routeFallbacks.WithLabelValues(r)
	}
	for r, alt := range snap.Alternates() {
		c.routeAlternates[r] = m.routeAlternates.WithLabelValues(r, alt)
	}
	for _, src := range snap.Sources() {
		c.sourceFailures[src.Name] = m.sourceFailures.WithLabelValues(src.Name)
	}
	return c
}

// observe counts what a response reports.
func (c *stateCounters) observe(matched []string, routeErrors []engine.RouteError, failed []engine.SourceFailure) {
	for _, r := range matched {
		if ctr := c.routeMatches[r]; ctr != nil {
			ctr.Inc()
		}
	}
	for _, e := range routeErrors {
		if ctr := c.routeErrors[e.Route]; ctr != nil {
			ctr.Inc()
		}
	}
	for _, f := range failed {
		if ctr := c.sourceFailures[f.Source]; ctr != nil {
			ctr.Inc()
		}
	}
}

// observeRoutes records how the routes served a query that took evalTime.
func (c *stateCounters) observeRoutes(matches []engine.RouteMatch, evalTime time.Duration) {
	for _, rm := range matches {
		if o := c.routeDuration[rm.Route]; o != nil {
			o.Observe(evalTime.Seconds())
		}
		switch rm.MatchedBy {
		case engine.MatchedByFallback:
			if ctr := c.routeFallbacks[rm.Route]; ctr != nil {
				ctr.Inc()
			}
		case engine.MatchedByAlternate:
			if ctr := c.routeAlternates[rm.AlternateFor]; ctr != nil {
				ctr.Inc()
			}
		}
	}
}

// retire drops the series of routes, classifiers and sources the new snapshot no longer
// has, so that removed objects do not linger in every scrape.
func (m *metrics) retire(old, cur *state) {
	if old == nil {
		return
	}
	curRoutes := cur.snap.Routes()
	for _, r := range old.snap.Routes() {
		if !slices.Contains(curRoutes, r) {
			m.routeMatches.DeleteLabelValues(r)
			m.routeErrors.DeleteLabelValues(r)
			m.routeDuration.DeleteLabelValues(r)
			m.routeFallbacks.DeleteLabelValues(r)
		}
	}
	curAlternates := cur.snap.Alternates()
	for r, alt := range old.snap.Alternates() {
		if curAlternates[r] != alt {
			m.routeAlternates.DeleteLabelValues(r, alt)
		}
	}
	for name := range old.counters.classifierConfidence {
		if cur.counters.classifierConfidence[name] == nil {
			m.classifierConfidence.DeleteLabelValues(name)
		}
	}
	for name := range old.counters.sourceFailures {
		if cur.counters.sourceFailures[name] == nil {
			m.sourceFailures.DeleteLabelValues(name)
			m.fetchDuration.DeleteLabelValues(name)
			m.gitSyncFailures.DeleteLabelValues(name)
			m.mcpSyncFailures.DeleteLabelValues(name)
			m.catalogFetchFailures.DeleteLabelValues(name)
		}
	}
}

// snapshotCollector reports the serving snapshot, read at scrape time.
type snapshotCollector struct{ s *Server }

var (
	snapshotInfoDesc = prometheus.NewDesc(metricsNamespace+"_snapshot_info",
		"The serving snapshot (value 1): router name and snapshot hash.", []string{"router", "hash"}, nil)
	snapshotBuiltDesc = prometheus.NewDesc(metricsNamespace+"_snapshot_built_timestamp_seconds",
		"Unix time the serving snapshot was built.", nil, nil)
	snapshotChunksDesc = prometheus.NewDesc(metricsNamespace+"_snapshot_chunks",
		"Indexed chunks of the serving snapshot.", nil, nil)
	readyDesc = prometheus.NewDesc(metricsNamespace+"_ready",
		"1 when a snapshot is serving and the server is not shutting down.", nil, nil)
	gitSyncAgeDesc = prometheus.NewDesc(metricsNamespace+"_git_sync_age_seconds",
		"Seconds since a GitRepo source last synced successfully (+Inf before its first success).", []string{"source"}, nil)
	contentAgeDesc = prometheus.NewDesc(metricsNamespace+"_source_content_age_seconds",
		"Age of a source's newest content (file mtime, commit time, fetch time; api.md §4.7), for sources whose content time is known.", []string{"source"}, nil)
)

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- snapshotInfoDesc
	ch <- snapshotBuiltDesc
	ch <- snapshotChunksDesc
	ch <- readyDesc
	ch <- gitSyncAgeDesc
	ch <- contentAgeDesc
	ch <- pendingApprovalDesc
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	ready := 0.0
	if c.s.Ready() {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	st := c.s.state.Load()
	if st == nil {
		return
	}
	snap := st.snap
	ch <- prometheus.MustNewConstMetric(snapshotInfoDesc, prometheus.GaugeValue, 1, snap.Router(), snap.Hash())
	ch <- prometheus.MustNewConstMetric(snapshotBuiltDesc, prometheus.GaugeValue, float64(snap.BuiltAt().UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(snapshotChunksDesc, prometheus.GaugeValue, float64(snap.Chunks()))
	now := time.Now()
	for _, info := range snap.Sources() {
		collectPending(ch, &info)
		if age, _, ok := info.ContentAge(now); ok {
			ch <- prometheus.MustNewConstMetric(contentAgeDesc, prometheus.GaugeValue, float64(age), info.Name)
		}
		g, ok := snap.Source(info.Name).(interface{ Status() sources.GitStatus })
		if !ok {
			continue
		}
		age := math.Inf(1)
		if last := g.Status().LastSync; !last.IsZero() {
			age = now.Sub(last).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(gitSyncAgeDesc, prometheus.GaugeValue, age, info.Name)
	}
}
