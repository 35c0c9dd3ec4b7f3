// Package testenv starts a real Kubernetes control plane (etcd and
// kube-apiserver, built from Go modules by `make controlplane`) for tests,
// with the contextrouter CRDs installed and, on request, the webhook
// configurations pointed at a local serving port.
//
// Per test:
//
//	env := testenv.Start(t)
//	env.Client.Create(ctx, obj)
//
// One control plane per package, from TestMain:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) {
//		var err error
//		if env, err = testenv.New(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		if err := env.Stop(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//		}
//		os.Exit(code)
//	}
//
// Tests sharing a control plane should each work in their own namespace
// (Env.Namespace).
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

const (
	// startTimeout bounds each of etcd and kube-apiserver becoming ready.
	// envtest's 20s default is too tight on a loaded 2-core machine; the
	// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT variable still overrides it.
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second

	// parentPIDEnv makes the etcd and kube-apiserver built in hack/controlplane
	// exit when the process that started them dies (see
	// hack/controlplane/internal/parentwatch), so a test binary killed by
	// `go test -timeout` or a signal leaves no servers behind.
	parentPIDEnv = "CONTEXTROUTER_CONTROLPLANE_PARENT_PID"

	// logTail is how much of each server's output is kept for error messages.
	logTail = 8 << 10
)

// Default manifest locations, relative to the repository root.
const (
	DefaultCRDDir     = "config/crd/bases"
	DefaultWebhookDir = "config/webhook"
)

// Env is a running control plane and a client for it.
type Env struct {
	// Config authenticates as a member of system:masters.
	Config *rest.Config
	// Client uses Scheme: client-go's built-in kinds plus contextrouter.dev/v1alpha1.
	Client client.Client
	Scheme *runtime.Scheme
	// KubeConfig is Config as a kubeconfig file's content, for programs
	// under test that take --kubeconfig.
	KubeConfig []byte
	// WebhookInstallOptions says where the installed webhook configurations
	// send requests (LocalServingHost, LocalServingPort) and holds the serving
	// certificate for that address (LocalServingCertDir, tls.crt and tls.key);
	// a webhook server under test must listen there. envtest prepares the
	// address and certificate even without WithWebhooks.
	WebhookInstallOptions *envtest.WebhookInstallOptions

	env      *envtest.Environment
	stopOnce sync.Once
	stopErr  error
}

// Option configures Start and New.
type Option func(*options)

type options struct {
	crdPaths     []string
	crdsExplicit bool
	webhookPaths []string
	webhooksOn   bool
}

// WithCRDs installs the CRDs in the given files or directories instead of
// the default config/crd/bases (which is installed when it exists). Relative
// paths are taken from the repository root; each must exist. WithCRDs() with
// no paths installs no CRDs.
func WithCRDs(paths ...string) Option {
	return func(o *options) {
		o.crdPaths = append([]string(nil), paths...)
		o.crdsExplicit = true
	}
}

// WithWebhooks installs the Validating/MutatingWebhookConfigurations found in
// the given files or directories (default config/webhook), rewritten to call
// https://<Env.WebhookInstallOptions.LocalServingHost>:<LocalServingPort>/<path>
// with a test CA. Relative paths are taken from the repository root.
func WithWebhooks(paths ...string) Option {
	return func(o *options) {
		o.webhookPaths = append([]string(nil), paths...)
		o.webhooksOn = true
	}
}

// Start starts a control plane for t and stops it when t and its subtests
// finish. Missing binaries or a failed start end the test with t.Fatal.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	began := time.Now()
	env, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	t.Logf("testenv: Kubernetes %s control plane at %s ready in %s", KubernetesVersion, env.Config.Host, time.Since(began).Round(time.Millisecond))
	return env
}

// New starts a control plane; the caller must Stop it. It is meant for
// TestMain, where there is no testing.TB; tests use Start.
func New(opts ...Option) (*Env, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	root, err := findRepoRoot()
	if err != nil {
		return nil, err
	}
	crdPaths, err := resolve(root, o.crdPaths, "CRD")
	if err != nil {
		return nil, err
	}
	if !o.crdsExplicit {
		// The default directory is optional: packages that need no CRDs must
		// work before the manifests are generated.
		if _, err := os.Stat(filepath.Join(root, DefaultCRDDir)); err == nil {
			crdPaths = []string{filepath.Join(root, DefaultCRDDir)}
		}
	}
	var webhookPaths []string
	if o.webhooksOn {
		if len(o.webhookPaths) == 0 {
			o.webhookPaths = []string{DefaultWebhookDir}
		}
		if webhookPaths, err = resolve(root, o.webhookPaths, "webhook"); err != nil {
			return nil, err
		}
	}

	bins, err := binDir()
	if err != nil {
		return nil, err
	}
	if err := checkBinaries(bins); err != nil {
		return nil, err
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("testenv: scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("testenv: scheme: %w", err)
	}

	// The servers learn the test process's PID so they can exit with it.
	if err := os.Setenv(parentPIDEnv, strconv.Itoa(os.Getpid())); err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}

	etcdLog, apiLog := newTail(logTail), newTail(logTail)
	useExisting := false
	te := &envtest.Environment{
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{Path: filepath.Join(bins, "etcd"), Out: etcdLog, Err: etcdLog},
			APIServer: &envtest.APIServer{Path: filepath.Join(bins, "kube-apiserver"), Out: apiLog, Err: apiLog},
		},
		// Never talk to whatever cluster USE_EXISTING_CLUSTER would select:
		// tests create and delete objects freely.
		UseExistingCluster:    &useExisting,
		BinaryAssetsDirectory: bins,
		Scheme:                scheme,
		CRDInstallOptions: envtest.CRDInstallOptions{
			Paths:              crdPaths,
			ErrorIfPathMissing: true,
		},
		WebhookInstallOptions:   envtest.WebhookInstallOptions{Paths: webhookPaths},
		ControlPlaneStopTimeout: stopTimeout,
	}
	te.ControlPlane.KubectlPath = filepath.Join(bins, "kubectl")
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		te.ControlPlaneStartTimeout = startTimeout
	}
	if os.Getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT") == "true" {
		// envtest only attaches when the writers are unset.
		te.ControlPlane.Etcd.Out, te.ControlPlane.Etcd.Err = nil, nil
		te.ControlPlane.APIServer.Out, te.ControlPlane.APIServer.Err = nil, nil
	}

	cfg, err := te.Start()
	if err != nil {
		// The servers' output explains failures before envtest had a working
		// API server (te.Config is set from then on); later failures (CRDs,
		// webhooks) carry the API server's own message and need no log.
		var logs string
		if te.Config == nil {
			logs = apiLog.describe("kube-apiserver") + etcdLog.describe("etcd")
		}
		// Start leaves the processes running when a late step fails.
		stopErr := te.Stop()
		return nil, errors.Join(fmt.Errorf("testenv: start Kubernetes %s control plane from %s: %w%s",
			KubernetesVersion, bins, err, logs), stopErr)
	}
	if hooks := len(te.WebhookInstallOptions.ValidatingWebhooks) + len(te.WebhookInstallOptions.MutatingWebhooks); o.webhooksOn && hooks == 0 {
		// envtest skips files without webhook configurations silently; asking
		// for webhooks and getting none is a stale or missing manifest.
		return nil, errors.Join(fmt.Errorf("testenv: no Validating/MutatingWebhookConfiguration in %s", strings.Join(webhookPaths, ", ")), te.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("testenv: client: %w", err), te.Stop())
	}
	if err := warmUp(c, te.CRDs); err != nil {
		return nil, errors.Join(err, te.Stop())
	}
	env := &Env{
		Config:     cfg,
		Client:     c,
		Scheme:     scheme,
		KubeConfig: te.KubeConfig,
		env:        te,
	}
	env.WebhookInstallOptions = &te.WebhookInstallOptions
	return env, nil
}

// warmUp makes the API server fill its watch cache of every served custom
// resource version now, all at once. The server creates a CRD's storage on
// first use, and until that cache is filled it answers the lists it cannot
// pass on to etcd with 429 and Retry-After: 1, so without this the first
// test to list each kind would wait a second for it. The limited list starts
// the cache cheaply (such lists go to etcd); the full one confirms it serves.
func warmUp(c client.Client, crds []*apiextensionsv1.CustomResourceDefinition) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.ListKind}
			wg.Go(func() {
				for _, opts := range [][]client.ListOption{{client.Limit(1)}, nil} {
					list := &unstructured.UnstructuredList{}
					list.SetGroupVersionKind(gvk)
					if err := c.List(ctx, list, opts...); err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("testenv: list %s of CRD %s: %w", gvk, crd.Name, err))
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stop stops the control plane and removes its files. Later calls return
// the first call's result.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		if err := e.env.Stop(); err != nil {
			e.stopErr = fmt.Errorf("testenv: stop control plane: %w", err)
		}
	})
	return e.stopErr
}

// Namespace creates a namespace with a unique name for t and deletes it when
// t finishes, so tests sharing one control plane do not see each other's
// objects. (The test control plane runs no namespace controller: deletion only
// marks the namespace Terminating, which is enough to keep it out of the way.)
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("testenv: create namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		if err := e.Client.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testenv: delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// namespacePrefix turns a test name into a valid GenerateName prefix: a DNS
// label of at most 57 characters (the server appends 5 random ones) ending
// in "-".
func namespacePrefix(testName string) string {
	var b strings.Builder
	dash := true // no leading dash
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	switch {
	case s == "":
		s = "t"
	case s[0] < 'a' || s[0] > 'z':
		s = "t-" + s
	}
	const maxPrefix = 56 // plus the trailing dash
	if len(s) > maxPrefix {
		s = strings.TrimSuffix(s[:maxPrefix], "-")
	}
	return s + "-"
}

// resolve makes paths absolute against root and checks they exist.
func resolve(root string, paths []string, what string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("testenv: %s manifests: %w", what, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// tail keeps the last max bytes written to it: enough of a server's log to
// tell why it did not start, without holding a whole run in memory.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTail(max int) *tail { return &tail{max: max} }

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// describe renders the kept output for an error message, or nothing.
func (w *tail) describe(name string) string {
	s := strings.TrimSpace(w.String())
	if s == "" {
		return ""
	}
	return fmt.Sprintf("\n--- last output of %s ---\n%s", name, s)
}
