package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/controller"
	"github.com/contextrouter/contextrouter/internal/kubeauth"
	"github.com/contextrouter/contextrouter/internal/webhook"
)

// RouterImageEnv overrides the default router image.
const RouterImageEnv = "CONTEXTROUTER_IMAGE"

// defaultRouterImage is the image router Deployments run unless a router or
// --router-image names another: this build's own release image.
func defaultRouterImage() string {
	if img := os.Getenv(RouterImageEnv); img != "" {
		return img
	}
	return "ghcr.io/contextrouter/contextrouter:" + Version
}

// operatorFlags are the flags of `contextrouter operator`.
type operatorFlags struct {
	kubeconfig              string
	namespaces              []string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	enableHTTP2             bool
	probeAddr               string
	routerImage             string
	disableWebhooks         bool
	webhookPort             int
	certDir                 string
	manageWebhookCerts      bool
	injection               bool
	logFormat               string
	gracefulShutdown        time.Duration
}

func newOperatorCommand() *cobra.Command {
	f := &operatorFlags{}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Kubernetes operator (controllers and admission webhooks)",
		Long: `operator runs the controller manager: it compiles every ContextRouter with the
routes, sources and permissions attached to it into a bundle ConfigMap, runs a
router Deployment on it, writes the status of all four kinds and serves the
validating webhook. Only one replica is active at a time with --leader-elect.
It logs at info level unless --log-level is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runOperator(ctx, cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, $KUBECONFIG or ~/.kube/config)")
	fl.StringArrayVar(&f.namespaces, "namespace", nil, "namespace to watch (repeatable; default: every namespace)")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so that only one operator replica reconciles")
	fl.StringVar(&f.leaderElectionID, "leader-election-id", "contextrouter-operator", "name of the leader election Lease")
	fl.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the operator's own namespace)")
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", `address of the metrics endpoint; "0" disables it`)
	fl.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose token grants get on /metrics (TokenReview and SubjectAccessReview); false serves plain HTTP to anyone")
	fl.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate)")
	fl.BoolVar(&f.enableHTTP2, "enable-http2", false, "allow HTTP/2 on the metrics and webhook servers (off: HTTP/2 rapid-reset attacks)")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz; "0" disables them`)
	fl.StringVar(&f.routerImage, "router-image", defaultRouterImage(), "image of router Deployments whose ContextRouter sets no spec.deployment.image ($"+RouterImageEnv+" sets the default)")
	fl.BoolVar(&f.disableWebhooks, "disable-webhooks", false, "do not serve the admission webhooks")
	fl.IntVar(&f.webhookPort, "webhook-port", 9443, "port of the webhook server")
	fl.StringVar(&f.certDir, "cert-dir", "", "folder of the webhook serving certificate (default: <tmp>/k8s-webhook-server/serving-certs)")
	fl.BoolVar(&f.injection, "sidecar-injection", true, "serve the sidecar injection webhook and keep its MutatingWebhookConfiguration's caBundle current")
	fl.BoolVar(&f.manageWebhookCerts, "manage-webhook-certs", true, "generate and rotate the webhook certificate and patch caBundle; false when cert-manager provides them")
	fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	fl.DurationVar(&f.gracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may take to finish on shutdown")
	return cmd
}

func (f *operatorFlags) validate() error {
	if f.routerImage == "" {
		return errors.New("--router-image: must not be empty")
	}
	if !slices.Contains([]string{"json", "text"}, f.logFormat) {
		return fmt.Errorf("--log-format: %q is not json or text", f.logFormat)
	}
	if f.webhookPort < 1 || f.webhookPort > 65535 {
		return fmt.Errorf("--webhook-port: %d is not a port", f.webhookPort)
	}
	for _, ns := range f.namespaces {
		if ns == "" {
			return errors.New("--namespace: must not be empty")
		}
	}
	return nil
}

// operatorLogger returns a structured logger for controller-runtime and
// client-go. The level is --log-level when given, else info: an operator's
// reconcile log is its audit trail.
func operatorLogger(cmd *cobra.Command, format string) (logr.Logger, error) {
	lvl := slog.LevelInfo
	if fl := cmd.Flags().Lookup("log-level"); fl != nil && fl.Changed {
		if err := lvl.UnmarshalText([]byte(fl.Value.String())); err != nil {
			return logr.Logger{}, fmt.Errorf("--log-level: %w", err)
		}
	}
	opts := logOptions(lvl)
	var h slog.Handler = slog.NewJSONHandler(cmd.ErrOrStderr(), opts)
	if format == "text" {
		h = slog.NewTextHandler(cmd.ErrOrStderr(), opts)
	}
	slog.SetDefault(slog.New(h))
	return logr.FromSlogHandler(h), nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

// OperatorScheme holds the kinds the operator reads and writes.
func OperatorScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// metricsAuthFilter is a metricsserver.FilterProvider: a scrape needs a
// bearer token whose user may get the nonResourceURL /metrics
// (TokenReview and SubjectAccessReview, as kube-rbac-proxy did).
func metricsAuthFilter(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	rv, err := kubeauth.NewReviewer(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return rv.Filter(next, kubeauth.PlainRefuse, func(err error) { log.Error(err, "metrics authorization failed") }), nil
	}, nil
}

func runOperator(ctx context.Context, cmd *cobra.Command, f *operatorFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	log, err := operatorLogger(cmd, f.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	klog.SetLogger(log.WithName("client-go"))
	setupLog := log.WithName("setup")

	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := OperatorScheme()
	if err != nil {
		return err
	}

	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metrics := metricsserver.Options{
		BindAddress:   f.metricsAddr,
		SecureServing: f.metricsSecure,
		CertDir:       f.metricsCertDir,
		TLSOpts:       tlsOpts,
	}
	if f.metricsSecure {
		metrics.FilterProvider = metricsAuthFilter
	}
	opts := ctrl.Options{
		Scheme:                        scheme,
		Logger:                        log,
		Cache:                         controller.CacheOptions(f.namespaces),
		Metrics:                       metrics,
		HealthProbeBindAddress:        f.probeAddr,
		LeaderElection:                f.leaderElect,
		LeaderElectionID:              f.leaderElectionID,
		LeaderElectionNamespace:       f.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // the process exits right after, so the next leader need not wait out the lease
		GracefulShutdownTimeout:       &f.gracefulShutdown,
	}
	if !f.disableWebhooks {
		opts.WebhookServer = crwebhook.NewServer(crwebhook.Options{Port: f.webhookPort, CertDir: f.certDir, TLSOpts: tlsOpts})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("create the manager: %w", err)
	}

	if err := controller.Setup(mgr, controller.Options{RouterImage: f.routerImage, Namespaces: f.namespaces}); err != nil {
		return err
	}
	if !f.disableWebhooks {
		if err := webhook.Setup(mgr, webhook.Options{CertDir: f.certDir, DisableCertManagement: !f.manageWebhookCerts, RouterImage: f.routerImage, DisableInjection: !f.injection}); err != nil {
			return err
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add the readiness check: %w", err)
	}
	if !f.disableWebhooks {
		// Not ready until the webhook server answers: the API server calls it
		// for every apply of the four kinds.
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return fmt.Errorf("add the webhook readiness check: %w", err)
		}
	}

	scope := "all namespaces"
	if len(f.namespaces) > 0 {
		scope = fmt.Sprint(f.namespaces)
	}
	setupLog.Info("starting the operator", "version", Version, "namespaces", scope, "routerImage", f.routerImage,
		"leaderElection", f.leaderElect, "webhooks", !f.disableWebhooks)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	setupLog.Info("stopped")
	return nil
}
