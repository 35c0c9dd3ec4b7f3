package cli

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/cache"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/memlimit"
	"github.com/contextrouter/contextrouter/internal/server"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
)

// serveFlags are the flags of `contextrouter serve`.
type serveFlags struct {
	sourceFlags
	listen          string
	agent           string
	kubeconfig      string
	reportTools     bool
	maxBody         string
	memoryLimit     string
	gcHeadroom      string
	queryTimeout    time.Duration
	shutdownTimeout time.Duration
	shutdownDelay   time.Duration
	pollInterval    time.Duration
	logFormat       string
	allowEmpty      bool
	expandEnv       bool
	auditLog        string
	sessionDir      string
	cache           *routerCache
	// Process-wide memory settings, applied by RunE.
	memLimit        memlimit.Limit
	gcHeadroomBytes int64
}

func newServeCommand() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve -f PATH... [--listen :8080] [--agent NAME]",
		Short: "Serve the query API over HTTP, reloading on changes",
		Long: `serve answers POST /v1/query for the router in the manifests, with GET /v1/status,
/healthz, /readyz and /metrics (Prometheus). It reloads without a restart when the
manifest files change (a mounted ConfigMap included) and when a GitRepo source gets
a new commit; a configuration that fails to load leaves the previous one serving. So
does one that no ContextRoute attaches to (an emptied file), unless the router sets
spec.allowEmpty or --allow-empty is given.

It also keeps agents' sessions and builds their context packs (/v1/sessions/{id}/...,
GET /v1/artifacts/{ref}; api.md §11) in the store the router's spec.sessions names:
in memory (with --session-dir also in files that a restart reads back), or in Redis
shared by the replicas. A sidecar (--agent) always keeps them in memory.

--agent pins the agent identity, as the injected sidecar does: requests without an
agent are answered as that agent and requests naming another get 403. Otherwise a
router with auth.mode ServiceAccountToken verifies each caller's bearer token with
TokenReview (in-cluster config, or --kubeconfig), for /v1/status too, and serves
/metrics only to tokens allowed to get /metrics (SubjectAccessReview); with auth.mode
None the request's agent field is trusted and every endpoint is open. It logs at info level unless --log-level is given.

The Go runtime's soft memory limit is, first match wins: $GOMEMLIMIT;
--memory-limit; 90% of the container's memory limit ($` + memlimit.ContainerLimitEnv + `,
which the operator sets from the Downward API, else the cgroup's memory.max or
memory.limit_in_bytes); none. Near the limit the garbage collector runs as often
as it must. Below it, --gc-headroom lets the heap grow that far past the live
heap between collections, which saves CPU when the live heap is small.`,
		Example: `  contextrouter serve -f examples/quickstart --listen 127.0.0.1:8080
  curl -s localhost:8080/v1/query -d '{"text": "How many vacation days do I get?", "agent": "hr-assistant"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts, err := f.options(cmd)
			if err != nil {
				return err
			}
			defer f.applyMemory(cmd)()
			srv, err := server.New(opts)
			if err != nil {
				return err
			}
			defer reopenOnHangup(srv)()
			ln, err := net.Listen("tcp", f.listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			err = srv.Run(ctx, ln)
			// Results still being written to the on-disk cache are kept for the next start.
			f.cache.flush()
			return err
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", ":8080", "address to serve on")
	fl.StringVar(&f.agent, "agent", "", "pin the agent identity (sidecar mode): requests naming another agent get 403")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for TokenReview when the router sets auth.mode ServiceAccountToken (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&f.maxBody, "max-body-size", "1Mi", "largest accepted query body (a quantity such as 64Ki or 1Mi); larger ones get 413")
	fl.StringVar(&f.memoryLimit, "memory-limit", "", "soft memory limit of the Go runtime (a quantity such as 900Mi; 0 = none); default: 90% of the container's memory limit, none without one; $GOMEMLIMIT wins when set")
	fl.StringVar(&f.gcHeadroom, "gc-headroom", "32Mi", "heap growth allowed past the live heap before a garbage collection, re-computed after every collection and capped by the memory limit (0 = Go's default pacing); ignored when $GOGC is set")
	fl.DurationVar(&f.queryTimeout, "query-timeout", server.DefaultQueryTimeout, "longest a query may take, fetches and route conditions included (answered 504 past it)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long in-flight queries may take to finish on SIGTERM")
	fl.DurationVar(&f.shutdownDelay, "shutdown-delay", 0, "how long to keep serving, with /readyz failing, after SIGTERM before closing the listener")
	fl.DurationVar(&f.pollInterval, "poll-interval", server.DefaultPollInterval, "how often the manifest files are checked for changes the file watcher missed (0 disables)")
	fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fl.BoolVar(&f.expandEnv, "expand-env", true, "replace ${NAME} in the manifest fields that take it from the environment (api.md §1.0); router pods set it to false")
	fl.StringVar(&f.auditLog, "audit-log", "", `write the audit log (one JSON line per delivery, api.md §6.5) to this file, or "-" for standard output, whatever the router's spec.audit.enabled says; the file is reopened on SIGHUP (log rotation)`)
	fl.StringVar(&f.sessionDir, "session-dir", "", "keep the sessions of the embedded session store in files in this directory, so a restart loses none (api.md §11.9); default: memory only")
	fl.BoolVar(&f.reportTools, "report-tools-status", false, "write the router's entry of each Tools and MCP source's status.tools in the cluster (catalog digest, tools held back) and an Event per tool newly held back (api.md §10.9), through --kubeconfig or the in-cluster config")
	fl.BoolVar(&f.allowEmpty, "allow-empty", false, "serve a configuration that no ContextRoute attaches to (it answers every query with no context); without it such a configuration is refused like an invalid one")
	return cmd
}

// options validates the flags and turns them into server options.
func (f *serveFlags) options(cmd *cobra.Command) (server.Options, error) {
	if !slices.Contains([]string{"json", "text"}, f.logFormat) {
		return server.Options{}, fmt.Errorf("--log-format: %q is not json or text", f.logFormat)
	}
	q, err := resource.ParseQuantity(f.maxBody)
	if err != nil || q.Value() <= 0 {
		return server.Options{}, fmt.Errorf("--max-body-size: %q is not a positive size such as 64Ki or 1Mi", f.maxBody)
	}
	headroom, err := resource.ParseQuantity(f.gcHeadroom)
	if err != nil || headroom.Sign() < 0 {
		return server.Options{}, fmt.Errorf("--gc-headroom: %q is not a size such as 32Mi (0 disables)", f.gcHeadroom)
	}
	// Compared as quantities: Value() of one past int64 (8Ei) is not its size.
	if maxHeadroom := resource.NewQuantity(memlimit.MaxGCHeadroom, resource.BinarySI); headroom.Cmp(*maxHeadroom) > 0 {
		return server.Options{}, fmt.Errorf("--gc-headroom: %q is more than %s, the largest accepted (the memory limit caps the heap in any case)", f.gcHeadroom, maxHeadroom)
	}
	f.gcHeadroomBytes = headroom.Value()
	var memFlag *int64
	if cmd.Flags().Changed("memory-limit") {
		q, err := resource.ParseQuantity(f.memoryLimit)
		if err != nil || q.Sign() < 0 {
			return server.Options{}, fmt.Errorf("--memory-limit: %q is not a size such as 900Mi (0 = no limit)", f.memoryLimit)
		}
		memFlag = ptr.To(q.Value())
	}
	if f.memLimit, err = memlimit.Resolve(memFlag, os.Getenv, os.DirFS("/")); err != nil {
		return server.Options{}, err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		zero bool
	}{
		{"--query-timeout", f.queryTimeout, false},
		{"--shutdown-timeout", f.shutdownTimeout, false},
		{"--shutdown-delay", f.shutdownDelay, true},
		{"--poll-interval", f.pollInterval, true},
	} {
		switch {
		case d.v < 0 && d.zero:
			return server.Options{}, fmt.Errorf("%s: %s must not be negative", d.name, d.v)
		case d.v <= 0 && !d.zero:
			return server.Options{}, fmt.Errorf("%s: %s must be positive", d.name, d.v)
		}
	}
	logger, err := operatorLogger(cmd, f.logFormat)
	if err != nil {
		return server.Options{}, err
	}
	klog.SetLogger(logger.WithName("client-go"))
	poll := f.pollInterval
	if poll == 0 {
		poll = -1
	}
	kubeconfig := f.kubeconfig
	f.cache = &routerCache{base: f.cacheDir}
	return server.Options{
		Paths:             f.files,
		Router:            f.router,
		Engine:            f.sourceFlags.options(),
		Agent:             f.agent,
		MaxBodyBytes:      q.Value(),
		QueryTimeout:      f.queryTimeout,
		ShutdownTimeout:   f.shutdownTimeout,
		ShutdownDelay:     f.shutdownDelay,
		PollInterval:      poll,
		AllowEmpty:        f.allowEmpty,
		LiteralManifests:  !f.expandEnv,
		Logger:            slog.Default(),
		Version:           Version,
		Configure:         f.cache.configure,
		Cache:             f.cache,
		Kube:              func() (*rest.Config, error) { return restConfig(kubeconfig) },
		ReportToolsStatus: f.reportTools,
		AuditLog:          f.auditLog,
		AuditOutput:       cmd.OutOrStdout(),
		Sessions:          memstore.Config{Dir: f.sessionDir},
	}, nil
}

// applyMemory sets the soft memory limit and starts the GC headroom tuner;
// the returned func stops the tuner.
func (f *serveFlags) applyMemory(cmd *cobra.Command) (stop func()) {
	l := f.memLimit
	l.Apply()
	switch {
	case l.Bytes > 0:
		slog.Info("memory limit", "bytes", l.Bytes, "from", l.From, "container_bytes", l.Container)
	case l.From != "":
		slog.Info("no memory limit", "from", l.From)
	default:
		slog.Info("no memory limit: none set and the container has none")
	}
	if l.From == memlimit.FromGOMEMLIMIT && cmd.Flags().Changed("memory-limit") {
		slog.Warn("--memory-limit is ignored: $GOMEMLIMIT is set and takes precedence")
	}
	if _, set := os.LookupEnv("GOGC"); set {
		// An explicit GOGC is the operator's choice.
		if cmd.Flags().Changed("gc-headroom") {
			slog.Warn("--gc-headroom is ignored: $GOGC is set and takes precedence")
		}
		return func() {}
	}
	if f.gcHeadroomBytes == 0 {
		return func() {}
	}
	return memlimit.TuneGC(f.gcHeadroomBytes, slog.Default())
}

// routerCache is the httpAPI result cache of the served router. One cache
// lives across reloads, so a reload does not empty it; each configuration
// applies its spec.cache limits. It is created with the first configuration,
// whose namespace and name pick the on-disk folder `contextrouter cache` reads.
type routerCache struct {
	base string

	mu  sync.Mutex
	dir string
	c   *cache.Cache
}

func (r *routerCache) configure(cfg *engine.Config, opts *engine.Options) error {
	o := cache.OptionsFor(cfg.Router.Spec.Cache, cache.Dir(r.base, cfg.Router.Namespace, cfg.Router.Name))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.c == nil || r.dir != o.Dir:
		c, err := cache.New(o)
		if err != nil {
			return fmt.Errorf("%s %q: spec.cache: %w", v1alpha1.KindContextRouter, cfg.Router.Name, err)
		}
		r.c, r.dir = c, o.Dir
	default:
		if err := r.c.SetLimits(o.TTL, o.MaxEntries, o.MaxBytes); err != nil {
			return fmt.Errorf("%s %q: spec.cache: %w", v1alpha1.KindContextRouter, cfg.Router.Name, err)
		}
	}
	opts.Cache = r.c
	return nil
}

// Stats implements server.CacheStats.
func (r *routerCache) Stats() (hits, misses uint64) {
	r.mu.Lock()
	c := r.c
	r.mu.Unlock()
	if c == nil {
		return 0, 0
	}
	return c.Stats()
}

func (r *routerCache) flush() {
	if r == nil {
		return
	}
	r.mu.Lock()
	c := r.c
	r.mu.Unlock()
	c.Flush()
}

// reopenOnHangup reopens the audit log file on SIGHUP, as log rotation
// (logrotate's postrotate) expects; the returned func stops listening.
func reopenOnHangup(srv *server.Server) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if err := srv.ReopenAuditLog(); err != nil {
					slog.Error("SIGHUP: cannot reopen the audit log; writing to the old file", "error", err.Error())
				} else {
					slog.Info("SIGHUP: audit log reopened")
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
