// Package server serves a compiled router over HTTP (API.md "Query API"):
// POST /v1/query, GET /v1/status, /mcp (an MCP server), /healthz, /readyz
// and /metrics.
//
// It keeps the snapshot current without a restart. A change to the manifest
// files (fsnotify, including the `..data` symlink swap of a mounted
// ConfigMap, with a periodic content check as a fallback), to the folder of a
// Directory source, or a new commit of a GitRepo source builds a new snapshot
// beside the serving one and swaps it in atomically: a query runs on the
// snapshot it started with, so every answer comes from one whole
// configuration. A configuration that fails to build leaves the old snapshot
// serving and is reported in /v1/status, the log and the metrics.
package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/storeselect"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes    = 1 << 20
	DefaultQueryTimeout    = 30 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultDebounce        = 200 * time.Millisecond
	DefaultPollInterval    = 10 * time.Second
)

// CacheStats is what the server reads from a result cache for its metrics.
type CacheStats interface {
	Stats() (hits, misses uint64)
}

// Options configure a Server.
type Options struct {
	// Paths are the manifest files and directories (-f).
	Paths []string
	// Router selects the ContextRouter when the manifests hold several.
	Router string
	// Engine are the compile options. The server wraps Open (calling the one
	// given, if any) to keep git sources across reloads and to time fetches.
	Engine engine.Options
	// Configure, when set, adjusts the compile options for each configuration
	// before it is compiled (settings read from the router spec, such as its
	// result cache). An error fails the load.
	Configure func(cfg *engine.Config, opts *engine.Options) error
	// Agent pins the agent identity (sidecar mode): a request without an
	// agent is answered as Agent, one naming another agent gets 403. A pinned
	// server does not verify tokens: it serves one pod on its loopback address.
	Agent string
	// Kube returns the connection to the Kubernetes API that auth.mode
	// ServiceAccountToken needs: TokenReview for callers' tokens,
	// SubjectAccessReview for /metrics. It is called when a configuration
	// first needs it; until it succeeds, such a configuration fails to load.
	Kube func() (*rest.Config, error)
	// MaxBodyBytes limits a query body (0 = DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// QueryTimeout bounds one query, fetches and route conditions included
	// (0 = DefaultQueryTimeout); a query stopped by it is answered 504.
	QueryTimeout time.Duration
	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// once shutdown begins (0 = DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long the server keeps serving, with /readyz
	// failing, after shutdown begins and before it stops accepting
	// connections, so that load balancers stop sending first.
	ShutdownDelay time.Duration
	// Debounce is the quiet time after a file event before reloading
	// (0 = DefaultDebounce).
	Debounce time.Duration
	// PollInterval is how often the manifest files are hashed to catch
	// changes the file watcher missed (0 = DefaultPollInterval, negative = never).
	PollInterval time.Duration
	// AllowEmpty loads configurations that no ContextRoute attaches to, as
	// the router's spec.allowEmpty does; otherwise they fail to load.
	AllowEmpty bool
	// LiteralManifests leaves ${NAME} in manifests as written (serve
	// --expand-env=false, which router pods use: their objects come from the
	// API server, and their authors must not read the router's environment).
	LiteralManifests bool
	// Cache, when set, has its hit and miss counts exported as metrics.
	Cache CacheStats
	// Logger for the server (nil = slog.Default()).
	Logger *slog.Logger
	// ReportToolsStatus writes, through Kube, the router's entry of each
	// Tools and MCP source's status.tools and an Event per tool newly held
	// back (serve --report-tools-status, api.md §10.9).
	ReportToolsStatus bool
	// Version is the server's version in the MCP handshake ("" = "dev").
	Version string
	// AuditLog is where audit lines go (serve --audit-log): a file path, or
	// "-" for AuditOutput. Given, it turns auditing on whatever the router's
	// spec.audit.enabled says; "" leaves that to spec.audit, whose lines go to
	// AuditOutput (api.md §6.5).
	AuditLog string
	// AuditOutput is the standard output of audit lines (nil = os.Stdout).
	AuditOutput io.Writer
	// Sessions are the embedded session store's own settings: Dir (serve
	// --session-dir) and, for tests and embedders, bounds and a clock that
	// take precedence over the router's spec.sessions (api.md §11.9).
	Sessions memstore.Config
	// SessionStore, when set, replaces the embedded store; its owner closes it.
	SessionStore session.Store

	// auditSampleKey, set by tests, replaces the random key of audit sampling.
	auditSampleKey []byte
	// auditQueueBytes, auditStallAfter and auditFlushTimeout, set by tests,
	// replace DefaultAuditQueueBytes, DefaultAuditStallAfter and
	// AuditFlushTimeout.
	auditQueueBytes   int
	auditStallAfter   time.Duration
	auditFlushTimeout time.Duration
}

// state is one serving configuration: queries load it once and use it to the end.
type state struct {
	snap *engine.Snapshot
	cfg  *engine.Config
	// tokens is set when callers must present a ServiceAccount token.
	tokens   bool
	counters *stateCounters
	// audit is the router's audit policy (nil = off); deliveries counts
	// deliveries by agent and source.
	audit      *auditPolicy
	deliveries *deliveryCounters
	// secrets is the digest of the router's own Secret values when it was
	// built (secretsDigest).
	secrets [sha256.Size]byte
	// policy is the router's spec.phases and firewall bound for packs,
	// computed once per configuration rather than per pack.
	policy *session.Policy
}

// guard is what a configuration asks of callers of /v1/query, /v1/status
// and /metrics.
type guard struct {
	// tokens: callers present a ServiceAccount token (auth.mode
	// ServiceAccountToken, no pinned agent).
	tokens bool
	// namespace of the router, whose ServiceAccounts are the agents.
	namespace string
}

// Server answers queries on the current snapshot and keeps it current.
type Server struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	handler http.Handler
	auth    *tokenAuth
	// plainMetrics is /metrics without authentication.
	plainMetrics http.Handler
	// mcp is the /mcp endpoint.
	mcp http.Handler
	// auditLog receives audit lines; audit counts deliveries and lines.
	auditLog *auditLog
	audit    *auditMetrics
	// auditMACs hash request ids for audit sampling under a key callers
	// never learn (auditSampleKey in tests, else drawn at start).
	auditMACs *digest.MAC
	// sessions is the store Options.SessionStore gave; otherwise holder
	// keeps the store each configuration names.
	sessions session.Store
	holder   *storeselect.Holder
	// outcomes holds the answers request ids name and the outcome rate (outcomes.go).
	outcomes outcomeState
	// sessionMux routes the session API (sessions.go).
	sessionMux *http.ServeMux

	// firstGuard is the guard of the last configuration read while none
	// serves yet, so that a token-mode router's status and metrics are not
	// open while its first snapshot builds or fails to.
	firstGuard atomic.Pointer[guard]

	state    atomic.Pointer[state]
	draining atomic.Bool

	// reloadMu serialises snapshot builds; pool is only changed under it.
	reloadMu sync.Mutex
	pool     *sourcePool

	// filesHash is the manifest content hash read at the start of the last
	// file reload, for the poller.
	filesHash atomic.Pointer[string]

	statusMu     sync.Mutex
	lastReloadAt time.Time
	lastSuccess  time.Time
	lastErr      string

	// Reload requests, coalesced for the reload worker.
	reqMu       sync.Mutex
	wantFiles   bool
	wantRebuild bool
	wake        chan struct{}

	// reporter writes tool sources' status into the cluster (nil = off).
	reporter *toolReporter

	// Background work, set while Run runs.
	bgMu    sync.Mutex
	bgCtx   context.Context
	bgWG    sync.WaitGroup
	loops   map[any]*syncLoop
	watcher *watcher
}

// New prepares a server; nothing is loaded until Reload or Run.
func New(opts Options) (*Server, error) {
	if len(opts.Paths) == 0 {
		return nil, errors.New("no manifest files or directories given")
	}
	if opts.ReportToolsStatus && opts.Kube == nil {
		return nil, errors.New("reporting tool sources' status needs a connection to the Kubernetes API")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:  opts,
		log:   opts.Logger,
		pool:  newSourcePool(),
		wake:  make(chan struct{}, 1),
		loops: map[any]*syncLoop{},
	}
	key := opts.auditSampleKey
	if key == nil {
		key = digest.NewKey()
	}
	s.auditMACs = digest.NewMAC(key)
	out := opts.AuditOutput
	if out == nil {
		out = os.Stdout
	}
	path := opts.AuditLog
	if path == "" {
		path = "-"
	}
	var err error
	if s.auditLog, err = openAuditLog(path, out, opts.auditQueueBytes, opts.auditStallAfter, opts.Logger); err != nil {
		return nil, err
	}
	if err := s.openSessionStore(); err != nil {
		s.auditLog.close(context.Background())
		return nil, err
	}
	if opts.ReportToolsStatus {
		s.reporter = newToolReporter(opts.Kube, opts.Logger)
	}
	s.metrics = newMetrics(s)
	s.audit = newAuditMetrics(s.metrics.reg, s.auditLog)
	s.auth = newTokenAuth(s.metrics)
	s.mcp = s.newMCPHandler()
	s.sessionMux = s.newSessionMux()
	s.handler = s.routes()
	return s, nil
}

// ReopenAuditLog opens the --audit-log file again, after log rotation moved
// it away (serve calls it on SIGHUP); on failure the old file stays in use.
func (s *Server) ReopenAuditLog() error { return s.auditLog.Reopen() }

// Handler serves the HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry holds the server's metrics (Go and process collectors included).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Snapshot returns the serving snapshot, or nil before the first successful load.
func (s *Server) Snapshot() *engine.Snapshot {
	if st := s.state.Load(); st != nil {
		return st.snap
	}
	return nil
}

// Ready reports whether a snapshot is serving and shutdown has not begun.
func (s *Server) Ready() bool { return s.state.Load() != nil && !s.draining.Load() }

// Reload reads the manifests and, when they compile, swaps in the new
// snapshot. On error the serving snapshot stays and the error is recorded
// for /v1/status and the metrics.
func (s *Server) Reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	// Hashed before reading: a change made while loading is seen by the next poll.
	h := manifestHash(s.opts.Paths)
	s.filesHash.Store(&h)
	start := time.Now()
	cfg, set, err := s.loadConfig()
	swapped := false
	if err == nil {
		if s.state.Load() == nil {
			s.firstGuard.Store(&guard{tokens: s.needsTokens(cfg), namespace: cfg.Router.Namespace})
		}
		swapped, err = s.build(ctx, cfg)
	} else if s.state.Load() == nil {
		g := s.failedReadGuard(set, err)
		s.firstGuard.Store(&g)
		if g.tokens {
			// Callers with a token may read the error in /v1/status; without
			// the API server nobody can, which is the safe side.
			if err := s.auth.ensure(s.opts.Kube, s.log, s.plainMetrics); err != nil {
				s.log.Debug("no token verification for /v1/status while no configuration serves", "error", err.Error())
			}
		}
	}
	s.recordReload(ctx, "files", start, swapped, err)
	return err
}

// rebuild compiles the serving configuration again, reusing its sources: a
// git source moved to a new commit, or a Directory source's files changed.
func (s *Server) rebuild(ctx context.Context, trigger string) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	st := s.state.Load()
	if st == nil {
		return nil
	}
	start := time.Now()
	swapped, err := s.build(ctx, st.cfg)
	s.recordReload(ctx, trigger, start, swapped, err)
	return err
}

// loadConfig reads and checks the manifests like `contextrouter validate`
// and selects the router's configuration. set is what was read, also on
// error (nil when nothing was).
func (s *Server) loadConfig() (cfg *engine.Config, set *manifest.Set, err error) {
	lookup := manifest.LookupEnv(os.LookupEnv)
	if s.opts.LiteralManifests {
		lookup = nil
	}
	set, err = manifest.LoadEnv(lookup, s.opts.Paths...)
	if err != nil {
		return nil, set, err
	}
	var errs []string
	for _, p := range set.Check() {
		if p.IsWarning() {
			s.log.Warn("manifest warning", "problem", p.Error())
			continue
		}
		errs = append(errs, p.Error())
	}
	if len(errs) > 0 {
		return nil, set, fmt.Errorf("invalid manifests:\n%s", strings.Join(errs, "\n"))
	}
	if cfg, err = set.Config(s.opts.Router); err != nil {
		return nil, set, err
	}
	// An emptied file must not silently replace a working router with one that answers nothing.
	if len(cfg.Routes) == 0 && !cfg.Router.Spec.AllowEmpty && !s.opts.AllowEmpty {
		lines := []string{fmt.Sprintf("%s/%s: %s", v1alpha1.KindContextRouter, cfg.Router.Name, manifest.NoRoutesMessage)}
		for _, f := range set.EmptyFiles() {
			lines = append(lines, f+": "+manifest.EmptyFileMessage)
		}
		return nil, set, fmt.Errorf("configuration refused:\n%s", strings.Join(lines, "\n"))
	}
	return cfg, set, nil
}

// failedReadGuard is what callers must present while no configuration
// serves and the last one read failed to load: what its router asks when
// the files say for sure, else a token (the load error describes the
// configuration, and a router in token mode must not show it to anyone).
// The files say for sure when no ContextRouter, list or unreadable document
// failed to decode: a token-mode router could hide in one.
func (s *Server) failedReadGuard(set *manifest.Set, loadErr error) guard {
	closed := guard{tokens: s.opts.Agent == ""}
	if set == nil {
		return closed
	}
	closed.namespace = set.Namespace
	var problems problem.List
	if loadErr != nil && errors.As(loadErr, &problems) {
		for _, p := range problems.Errors() {
			switch p.Kind {
			case "", "List", v1alpha1.KindContextRouter, v1alpha1.KindContextRouter + "List":
				return closed
			}
		}
	}
	cfg, err := set.Config(s.opts.Router)
	if err != nil {
		return closed
	}
	return guard{tokens: s.needsTokens(cfg), namespace: cfg.Router.Namespace}
}

// build compiles cfg and swaps the result in, unless it equals the serving
// snapshot (swapped is then false). The caller holds reloadMu.
func (s *Server) build(ctx context.Context, cfg *engine.Config) (swapped bool, err error) {
	opts := s.opts.Engine
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	if s.opts.Configure != nil {
		if err := s.opts.Configure(cfg, &opts); err != nil {
			return false, err
		}
	}
	open := s.pool.begin(cfg, opts.Open, s.metrics, s.state.Load() != nil)
	opts.Open = open.open
	snap, err := engine.Compile(ctx, cfg, opts)
	if err != nil {
		return false, err
	}
	tokens := s.needsTokens(cfg)
	if tokens {
		if err := s.auth.ensure(s.opts.Kube, s.log, s.plainMetrics); err != nil {
			return false, fmt.Errorf("%s %q: spec.auth.mode %s: %w", v1alpha1.KindContextRouter, cfg.Router.Name, v1alpha1.AuthServiceAccountToken, err)
		}
	}
	s.updateSessionStore(cfg)
	old := s.state.Load()
	if old != nil && old.snap.Hash() == snap.Hash() {
		// Same configuration and content: keep the warm snapshot and its sources.
		return false, nil
	}
	policy, err := session.NewPolicy(snap.RouterSpec())
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", v1alpha1.KindContextRouter, cfg.Router.Name, err)
	}
	// The engine's warnings, as validate prints them; once per new configuration.
	for _, p := range snap.Warnings() {
		s.log.Warn("manifest warning", "problem", p.Error())
	}
	st := &state{snap: snap, cfg: cfg, tokens: tokens, secrets: s.secretsDigest(cfg), policy: policy, counters: s.metrics.forSnapshot(snap),
		audit: s.auditPolicyFor(cfg), deliveries: newDeliveryCounters(s.audit.deliveries, snap)}
	s.state.Store(st)
	fresh := newlyPending(old, st)
	s.logPending(fresh)
	s.reporter.enqueue(st, fresh)
	retired := s.pool.commit(open)
	s.metrics.retire(old, st)
	if old != nil {
		old.deliveries.retire(st.deliveries)
	}
	for _, o := range open.failedGit() {
		s.metrics.gitSyncFailures.WithLabelValues(o).Inc()
	}
	s.updateBackground(st, retired)
	return true, nil
}

// needsTokens reports whether cfg's callers must present ServiceAccount
// tokens: auth.mode ServiceAccountToken, unless the agent is pinned.
func (s *Server) needsTokens(cfg *engine.Config) bool {
	return cfg.Router.Spec.Auth.Mode == v1alpha1.AuthServiceAccountToken && s.opts.Agent == ""
}

// guard returns what callers must present now: the serving configuration's
// rule, or before one serves, the rule of the last configuration read.
func (s *Server) guard() guard {
	if st := s.state.Load(); st != nil {
		return guard{tokens: st.tokens, namespace: st.cfg.Router.Namespace}
	}
	if g := s.firstGuard.Load(); g != nil {
		return *g
	}
	return guard{}
}

// recordReload reports the outcome of a snapshot build in the log, the
// metrics and /v1/status. A build cut short by shutdown is not a failure.
func (s *Server) recordReload(ctx context.Context, trigger string, start time.Time, swapped bool, err error) {
	if err != nil && ctx.Err() != nil {
		s.log.Debug("snapshot build abandoned", "trigger", trigger, "error", err.Error())
		return
	}
	now := time.Now()
	result := "success"
	if err != nil {
		result = "failure"
	}
	s.metrics.reloads.WithLabelValues(result).Inc()
	s.metrics.lastReload.WithLabelValues(result).Set(float64(now.UnixNano()) / 1e9)
	s.statusMu.Lock()
	s.lastReloadAt = now
	if err != nil {
		s.lastErr = err.Error()
	} else {
		s.lastErr = ""
		s.lastSuccess = now
	}
	s.statusMu.Unlock()
	if err != nil {
		msg := "configuration not loaded; the previous snapshot keeps serving"
		if s.state.Load() == nil {
			msg = "configuration not loaded; not ready"
		}
		s.log.Error(msg, "trigger", trigger, "error", err.Error())
		return
	}
	if !swapped {
		s.log.Debug("configuration unchanged", "trigger", trigger)
		return
	}
	if st := s.state.Load(); st != nil {
		s.log.Info("snapshot serving", "trigger", trigger, "router", st.snap.Router(), "hash", st.snap.Hash(),
			"chunks", st.snap.Chunks(), "took", time.Since(start).Round(time.Millisecond))
		for _, src := range st.snap.Sources() {
			if src.Error != "" {
				s.log.Warn("source not loaded", "source", src.Name, "error", src.Error)
			}
		}
	}
}

// requestReload asks the reload worker for a file reload (files) or a
// rebuild of the serving configuration. Requests made while one runs are
// coalesced into one more run.
func (s *Server) requestReload(files bool) {
	s.reqMu.Lock()
	if files {
		s.wantFiles = true
	} else {
		s.wantRebuild = true
	}
	s.reqMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// reloadWorker runs reload requests one at a time until ctx ends.
func (s *Server) reloadWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.reqMu.Lock()
		files, rebuild := s.wantFiles, s.wantRebuild
		s.wantFiles, s.wantRebuild = false, false
		s.reqMu.Unlock()
		if files {
			// A successful reload also reads every source anew.
			if s.Reload(ctx) == nil {
				continue
			}
		}
		// A content change must not wait for a broken configuration to be fixed.
		if rebuild {
			_ = s.rebuild(ctx, "sources")
		}
	}
}

// Run loads the configuration, serves the HTTP API on ln and keeps the
// snapshot current until ctx ends; then it stops accepting connections,
// lets in-flight requests finish (up to ShutdownTimeout) and returns. The
// listener serves at once: /healthz answers while the first snapshot is
// built, /readyz once it serves.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	s.bgMu.Lock()
	if s.bgCtx != nil {
		s.bgMu.Unlock()
		return errors.New("server: Run called twice")
	}
	s.bgCtx = bg
	s.watcher = newWatcher(s)
	var cfg *engine.Config
	if st := s.state.Load(); st != nil {
		// Loaded before Run: start the sync loops that snapshot needs.
		s.startLoopsLocked(st)
		cfg = st.cfg
	}
	s.watcher.setRoots(watchRoots(s.opts.Paths, cfg))
	s.bgMu.Unlock()

	s.goBackground(func() { s.reloadWorker(bg) })
	if s.reporter != nil {
		s.goBackground(func() { s.reporter.run(bg) })
	}
	s.goBackground(func() { s.watcher.run(bg) })
	if s.opts.PollInterval > 0 {
		s.goBackground(func() { s.poll(bg) })
	}
	// The first load, or a look for changes made since an earlier Reload.
	s.requestReload(true)

	srv := &http.Server{
		Handler:           s.closeWhenDraining(s.handler),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A query may take QueryTimeout; the response must still get out.
		WriteTimeout: s.opts.QueryTimeout + 30*time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Requests outlive ctx: shutdown lets in-flight queries finish.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	s.log.Info("serving", "address", ln.Addr().String())

	var err error
	select {
	case err = <-serveErr:
	case <-ctx.Done():
		err = s.shutdown(srv)
	}
	stopBG()
	s.bgWG.Wait()
	s.stopLoops()
	s.closeSessionStore()
	// Answers are out; their audit lines get a bounded time to reach the sink.
	flushTimeout := AuditFlushTimeout
	if s.opts.auditFlushTimeout > 0 {
		flushTimeout = s.opts.auditFlushTimeout
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	s.auditLog.close(flushCtx)
	cancel()
	return err
}

// closeWhenDraining answers with "Connection: close" once shutdown has
// begun. A client's kept-alive connection stays on this pod whatever the
// load balancer does; closed after an answer, the client's next request
// opens a new connection, which goes to a ready pod. Otherwise a request
// sent on it as the listener closes after ShutdownDelay is reset.
func (s *Server) closeWhenDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// shutdown fails /readyz, waits ShutdownDelay, then stops accepting and
// waits for in-flight requests up to ShutdownTimeout.
func (s *Server) shutdown(srv *http.Server) error {
	s.draining.Store(true)
	s.log.Info("shutting down", "delay", s.opts.ShutdownDelay, "timeout", s.opts.ShutdownTimeout)
	if s.opts.ShutdownDelay > 0 {
		time.Sleep(s.opts.ShutdownDelay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: requests still running after %s were cut off", s.opts.ShutdownTimeout)
	}
	return nil
}

func (s *Server) goBackground(f func()) {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		f()
	}()
}

// poll hashes the manifest files every PollInterval and asks for a reload
// when they differ from what the last reload read: inotify misses events on
// some volume types. It also retries watches that could not be set.
func (s *Server) poll(ctx context.Context) {
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	var seen [sha256.Size]byte
	var seenFor *state
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.watcher.rewatch()
		// The router's own Secrets (API keys, the Redis password) are not in
		// the manifests: a rotated or added one rebuilds the configuration,
		// once per change even if that rebuild fails.
		if st := s.state.Load(); st != nil {
			if st != seenFor {
				seenFor, seen = st, st.secrets
			}
			if d := s.secretsDigest(st.cfg); d != seen {
				seen = d
				s.log.Info("a Secret the router reads changed (periodic check)")
				s.requestReload(false)
			}
		}
		h := manifestHash(s.opts.Paths)
		if last := s.filesHash.Load(); last == nil || *last != h {
			s.log.Info("manifest files changed (periodic check)")
			s.requestReload(true)
		}
	}
}

// secretsDigest hashes the values of the Secrets the router reads for itself
// (v1alpha1 SecretRefs); a missing one hashes as missing. Only the digest is
// kept: values never leave the resolver.
func (s *Server) secretsDigest(cfg *engine.Config) [sha256.Size]byte {
	var secrets sources.SecretResolver = sources.EnvFileSecrets{}
	if s.opts.Engine.Secrets != nil {
		secrets = s.opts.Engine.Secrets
	}
	h := sha256.New()
	for _, ref := range cfg.Router.SecretRefs() {
		v, err := secrets.SecretValue(ref.Name, ref.Key)
		fmt.Fprintf(h, "%s\x00%s\x00%t\x00%d:%s\x00", ref.Name, ref.Key, err == nil, len(v), v)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// updateBackground starts the git sync loops a new snapshot needs, stops
// those of retired sources and points the file watcher at the new folders.
func (s *Server) updateBackground(st *state, retired []any) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	for _, key := range retired {
		l := s.loops[key]
		if l == nil {
			closeSource(key)
			continue
		}
		l.cancel()
		delete(s.loops, key)
		// Closing waits for a sync in progress; the canceled one ends soon.
		go func() {
			<-l.done
			closeSource(key)
		}()
	}
	if s.bgCtx == nil {
		return
	}
	s.startLoopsLocked(st)
	if s.watcher != nil {
		s.watcher.setRoots(watchRoots(s.opts.Paths, st.cfg))
	}
}
