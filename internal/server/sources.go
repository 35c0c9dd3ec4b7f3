package server

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// sourcePool keeps the static sources across reloads, for the state they
// carry: git sources (their clone, last good commit and loaded chunks, and the
// sync loops running for them) and Directory sources (the chunks they last
// read, served while their folder cannot be read), and tool sources (their
// last good catalog). A source is reused while
// everything it was built from is unchanged.
type sourcePool struct {
	// live are the reusable sources of the serving snapshot, by name.
	live map[string]*pooled
}

type pooled struct {
	key string
	src sources.Source
}

func newSourcePool() *sourcePool { return &sourcePool{live: map[string]*pooled{}} }

// opening is the source set of one compile; it becomes the pool's live set
// only when its snapshot is swapped in.
type opening struct {
	pool   *sourcePool
	cfg    *engine.Config
	base   func(*v1alpha1.ContextSource, sources.Env) (sources.Source, error)
	m      *metrics
	mu     sync.Mutex
	next   map[string]*pooled
	opened []string // git sources built anew, for their first-sync result
	fresh  map[string]sources.Source
	// background leaves the listings of MCP sources built anew to their
	// sync loops (sources.Env.ListInBackground).
	background bool
}

// begin starts a compile of cfg; base is the caller's Open (nil =
// sources.New). serving says whether a configuration serves already: then
// the compile waits for no MCP listing. A reload of anything (a permission
// revoked) must not wait behind a slow server; the new source serves no
// tools until its sync loop's first listing rebuilds the configuration.
// The first configuration still lists before it serves, so that a router
// is ready with its tools (the listing's deadline bounds the wait).
func (p *sourcePool) begin(cfg *engine.Config, base func(*v1alpha1.ContextSource, sources.Env) (sources.Source, error), m *metrics, serving bool) *opening {
	if base == nil {
		base = sources.New
	}
	return &opening{pool: p, cfg: cfg, base: base, m: m, next: map[string]*pooled{}, fresh: map[string]sources.Source{}, background: serving}
}

// open is the engine.Options.Open of the compile.
func (o *opening) open(spec *v1alpha1.ContextSource, env sources.Env) (sources.Source, error) {
	key := o.key(spec, env)
	o.mu.Lock()
	if p := o.pool.live[spec.Name]; p != nil && p.key == key {
		o.next[spec.Name] = p
		o.mu.Unlock()
		return p.src, nil
	}
	o.mu.Unlock()
	env.ListInBackground = o.background
	src, err := o.base(spec, env)
	if err != nil {
		return src, err
	}
	if keep(src) {
		o.mu.Lock()
		o.next[spec.Name] = &pooled{key: key, src: src}
		if _, ok := src.(sources.Syncer); ok {
			o.fresh[spec.Name] = src
		}
		o.mu.Unlock()
	}
	if q, ok := src.(sources.QuerySource); ok {
		return timeQuerySource(q, o.m.fetchDuration.WithLabelValues(spec.Name)), nil
	}
	return src, nil
}

// keep reports whether a source is worth keeping across reloads: static
// and tool sources carry what they last read (and git and MCP sources a
// clone or a session and their sync loop); query sources carry nothing.
func keep(src sources.Source) bool {
	switch src.(type) {
	case sources.StaticSource, sources.ToolSource:
		return true
	}
	return false
}

// key identifies what a source is built from: its spec and the parts of the
// environment that change its chunks (folder, router's token estimator).
func (o *opening) key(spec *v1alpha1.ContextSource, env sources.Env) string {
	b, _ := json.Marshal(struct {
		Namespace, Name, BaseDir, CacheDir string
		Estimator                          v1alpha1.TokenEstimator
		Spec                               v1alpha1.ContextSourceSpec
	}{spec.Namespace, spec.Name, env.BaseDir, env.CacheDir, o.cfg.Router.Spec.Budget.Estimator, spec.Spec})
	return string(b)
}

// failedGit names the git sources built by this compile whose first sync failed.
func (o *opening) failedGit() []string {
	var out []string
	for name, src := range o.fresh {
		if g, ok := src.(interface{ Status() sources.GitStatus }); ok && g.Status().LastError != "" {
			out = append(out, name)
		}
	}
	return out
}

// commit makes the compile's sources the live set and returns the sources
// that are no longer used (their sync loops stop).
func (p *sourcePool) commit(o *opening) []any {
	var retired []any
	for name, old := range p.live {
		if n := o.next[name]; n == nil || n.src != old.src {
			retired = append(retired, old.src)
		}
	}
	p.live = o.next
	return retired
}

// timedQuery reports the duration of every fetch of a query source.
type timedQuery struct {
	sources.QuerySource
	obs prometheus.Observer
}

func (t *timedQuery) Fetch(ctx context.Context, query string) ([]sources.Chunk, error) {
	start := time.Now()
	chunks, err := t.QuerySource.Fetch(ctx, query)
	t.obs.Observe(time.Since(start).Seconds())
	return chunks, err
}

// timedQueryTimeout keeps the Timeout method the engine looks for.
type timedQueryTimeout struct {
	timedQuery
	timeout interface{ Timeout() time.Duration }
}

func (t *timedQueryTimeout) Timeout() time.Duration { return t.timeout.Timeout() }

func timeQuerySource(q sources.QuerySource, obs prometheus.Observer) sources.Source {
	tq := timedQuery{QuerySource: q, obs: obs}
	if to, ok := q.(interface{ Timeout() time.Duration }); ok {
		return &timedQueryTimeout{timedQuery: tq, timeout: to}
	}
	return &tq
}

// syncLoop is the goroutine syncing one git or MCP source.
type syncLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// syncKind is what a sync loop says and counts for a type of source.
type syncKind struct {
	failures *prometheus.CounterVec
	failed   string // the log line of a failed sync
}

func (s *Server) syncKind(src sources.Source) syncKind {
	switch src.(type) {
	case sources.Notifier: // MCP
		return syncKind{s.metrics.mcpSyncFailures, "MCP listing failed; serving the last good catalog"}
	case sources.Fetcher: // spec.tools.http
		return syncKind{s.metrics.catalogFetchFailures, "tool catalog fetch failed; serving the last good catalog"}
	}
	return syncKind{s.metrics.gitSyncFailures, "git sync failed; serving the last good commit"}
}

// startLoopsLocked starts a sync loop for every syncer of st that has none.
// The caller holds bgMu and bgCtx is set.
func (s *Server) startLoopsLocked(st *state) {
	for _, info := range st.snap.Sources() {
		src := st.snap.Source(info.Name)
		sy, ok := src.(sources.Syncer)
		if !ok || s.loops[src] != nil {
			continue
		}
		every := sy.Interval()
		if every <= 0 {
			continue // only a hand-built spec has one; Validate refuses it
		}
		ctx, cancel := context.WithCancel(s.bgCtx)
		l := &syncLoop{cancel: cancel, done: make(chan struct{})}
		s.loops[src] = l
		kind := s.syncKind(src)
		go func() {
			defer close(l.done)
			s.syncLoop(ctx, info.Name, kind, sy, every)
		}()
	}
}

// stopLoops stops every sync loop and waits for them, then closes the
// sources that hold a connection (MCP sessions).
func (s *Server) stopLoops() {
	s.bgMu.Lock()
	loops := s.loops
	s.loops = map[any]*syncLoop{}
	s.bgMu.Unlock()
	for _, l := range loops {
		l.cancel()
	}
	for src, l := range loops {
		<-l.done
		closeSource(src)
	}
}

// closeSource ends what a source holds open, if anything.
func closeSource(src any) {
	if c, ok := src.(io.Closer); ok {
		_ = c.Close()
	}
}

// syncLoop syncs a source every interval (the first sync happened when the
// snapshot was built) and asks for a rebuild when its content changed. A
// rebuild never blocks queries: they keep using the serving snapshot. A
// Notifier (MCP) also syncs when it signals a change upstream (the source
// debounces its notifications), and once at the start: its first sync,
// made while nothing listened, did not keep the session that notifications
// arrive on, and a source built while a configuration served has not
// listed at all (sourcePool.begin). A Fetcher that has not fetched (built
// while a configuration served) fetches at the start too.
func (s *Server) syncLoop(ctx context.Context, name string, kind syncKind, sy sources.Syncer, every time.Duration) {
	failures := kind.failures.WithLabelValues(name)
	first := every
	var notify <-chan struct{}
	if n, ok := sy.(sources.Notifier); ok {
		notify, first = n.Changed(), 0
	}
	if f, ok := sy.(sources.Fetcher); ok && !f.Fetched() {
		first = 0
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-notify:
			t.Stop() // Reset below restarts the interval
		}
		changed, err := sy.Sync(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures.Inc()
			s.log.Warn(kind.failed, "source", name, "error", err.Error())
		}
		if changed {
			s.requestReload(false)
		}
		t.Reset(every)
	}
}
