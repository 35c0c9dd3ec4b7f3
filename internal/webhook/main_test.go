package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

// One control plane per package, started by the first test that needs it, so
// the pure unit tests run without one.
var (
	envOnce sync.Once
	shared  *testenv.Env
	envErr  error

	hooksOnce   sync.Once
	hooksErr    error
	hooksTried  bool
	stopManager context.CancelFunc = func() {}
	managerDone                    = make(chan struct{})
)

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	code := m.Run()
	stopManager()
	if shared != nil {
		if hooksTried {
			<-managerDone
		}
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// controlPlane returns the package's API server, with the CRDs and the
// webhook configurations of config/ installed.
func controlPlane(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { shared, envErr = testenv.New(testenv.WithWebhooks()) })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return shared
}

// servingWebhooks returns the control plane once a manager set up by Setup
// serves the webhooks where the installed configurations send requests.
func servingWebhooks(t *testing.T) *testenv.Env {
	t.Helper()
	env := controlPlane(t)
	hooksOnce.Do(func() {
		wio := env.WebhookInstallOptions
		var ctx context.Context
		ctx, stopManager = context.WithCancel(context.Background())
		hooksTried = true
		hooksErr = startManager(ctx, env, crwebhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}, Options{DisableCertManagement: true, RouterImage: testImage}, managerDone)
	})
	if hooksErr != nil {
		t.Fatal(hooksErr)
	}
	return env
}

// startManager runs a manager with only the webhooks (as the operator would
// run them) until ctx ends, closing done when it has stopped. It returns once
// the webhook server accepts TLS connections and the cache has synced. done
// is closed in every case, once nothing runs any more.
func startManager(ctx context.Context, env *testenv.Env, server crwebhook.Options, opts Options, done chan struct{}) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          crwebhook.NewServer(server),
	})
	if err == nil {
		err = Setup(mgr, opts)
	}
	if err != nil {
		close(done)
		return err
	}
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		errc <- mgr.Start(ctx)
	}()
	addr := net.JoinHostPort(server.Host, strconv.Itoa(server.Port))
	if server.Host == "" {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(server.Port))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-errc:
			return fmt.Errorf("manager stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s not serving: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	return nil
}

// warningRecorder collects the warnings the API server returns.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings recorded since the last call.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// warningClient is a direct client whose warnings land in the recorder.
func warningClient(t *testing.T, env *testenv.Env) (client.Client, *warningRecorder) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
