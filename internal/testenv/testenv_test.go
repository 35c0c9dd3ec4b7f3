package testenv

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admission "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// webhookManifest denies ConfigMaps carrying the label webhookLabel, so
// only the request made on purpose reaches the test's webhook server. The
// Service is what kubebuilder generates beside it; envtest must ignore it.
const webhookManifest = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: testenv-check
webhooks:
- name: configmaps.testenv.contextrouter.dev
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  timeoutSeconds: 10
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-configmaps
  objectSelector:
    matchLabels:
      testenv.contextrouter.dev/webhook: deny
  rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["configmaps"]
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
  namespace: system
spec:
  ports:
  - port: 443
`

const webhookLabel = "testenv.contextrouter.dev/webhook"

// TestStart runs the real control plane: it fails, never skips, when the
// binaries are missing.
func TestStart(t *testing.T) {
	hookDir := filepath.Dir(writeFile(t, "manifests.yaml", webhookManifest))
	_, crdErr := os.Stat(filepath.Join(RepoRoot(), DefaultCRDDir))
	haveCRDs := crdErr == nil

	var env *Env
	t.Run("running", func(t *testing.T) {
		env = Start(t, WithWebhooks(hookDir))
		ctx := t.Context()

		t.Run("server version is the built one", func(t *testing.T) {
			dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
			if err != nil {
				t.Fatal(err)
			}
			v, err := dc.ServerVersion()
			if err != nil {
				t.Fatal(err)
			}
			if v.GitVersion != KubernetesVersion {
				t.Errorf("server gitVersion = %q, want %q", v.GitVersion, KubernetesVersion)
			}
		})

		t.Run("configmap round trip", func(t *testing.T) {
			ns := env.Namespace(t)
			want := map[string]string{"bundle.yaml": "kind: ContextRouter\n", "hash": "abc123"}
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: ns},
				Data:       want,
			}
			if err := env.Client.Create(ctx, cm); err != nil {
				t.Fatalf("create: %v", err)
			}
			var got corev1.ConfigMap
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bundle"}, &got); err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.UID == "" || got.ResourceVersion == "" {
				t.Errorf("object not stored by the server: uid %q, resourceVersion %q", got.UID, got.ResourceVersion)
			}
			if len(got.Data) != len(want) {
				t.Errorf("data = %v, want %v", got.Data, want)
			}
			for k, v := range want {
				if got.Data[k] != v {
					t.Errorf("data[%q] = %q, want %q", k, got.Data[k], v)
				}
			}
		})

		t.Run("namespaces are unique and named after the test", func(t *testing.T) {
			a, b := env.Namespace(t), env.Namespace(t)
			if a == b {
				t.Fatalf("two namespaces named %q", a)
			}
			for _, ns := range []string{a, b} {
				if !strings.HasPrefix(ns, "teststart-running-namespaces-are-unique") {
					t.Errorf("namespace %q does not start with the test name", ns)
				}
				var got corev1.Namespace
				if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &got); err != nil {
					t.Errorf("get namespace %s: %v", ns, err)
				}
			}
		})

		t.Run("contextrouter kinds are served", func(t *testing.T) {
			if !haveCRDs {
				// Nothing to list before the CRDs are generated; the kinds
				// must then be unknown, which proves no CRDs came from elsewhere.
				err := env.Client.List(ctx, &v1alpha1.ContextRouterList{})
				if err == nil {
					t.Fatalf("listing ContextRouters succeeded without %s", DefaultCRDDir)
				}
				return
			}
			ns := env.Namespace(t)
			for _, list := range []client.ObjectList{
				&v1alpha1.ContextRouterList{},
				&v1alpha1.ContextRouteList{},
				&v1alpha1.ContextSourceList{},
				&v1alpha1.AgentPermissionList{},
			} {
				if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
					t.Errorf("list %T: %v", list, err)
				}
			}
		})

		t.Run("webhook calls reach the local serving address", func(t *testing.T) {
			opts := env.WebhookInstallOptions
			if opts.LocalServingPort == 0 || opts.LocalServingHost == "" {
				t.Fatalf("no local serving address: %+v", opts)
			}
			var got admissionv1.ValidatingWebhookConfiguration
			if err := env.Client.Get(ctx, client.ObjectKey{Name: "testenv-check"}, &got); err != nil {
				t.Fatalf("webhook configuration not installed: %v", err)
			}
			if len(got.Webhooks) != 1 {
				t.Fatalf("webhooks = %d, want 1", len(got.Webhooks))
			}
			cc := got.Webhooks[0].ClientConfig
			if cc.Service != nil {
				t.Errorf("clientConfig.service = %+v, want nil", cc.Service)
			}
			if !bytes.Equal(cc.CABundle, opts.LocalServingCAData) || len(cc.CABundle) == 0 {
				t.Errorf("caBundle does not match LocalServingCAData")
			}

			calls := serveDenyingWebhook(t, opts)
			ns := env.Namespace(t)
			denied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: "denied", Namespace: ns, Labels: map[string]string{webhookLabel: "deny"},
			}}
			err := env.Client.Create(ctx, denied)
			if err == nil || !strings.Contains(err.Error(), "denied by the testenv webhook") {
				t.Fatalf("create labelled ConfigMap: err = %v, want the webhook's denial", err)
			}
			plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}
			if err := env.Client.Create(ctx, plain); err != nil {
				t.Fatalf("create unlabelled ConfigMap: %v", err)
			}
			if got := calls(); len(got) != 1 || got[0] != "POST /validate-configmaps denied" {
				t.Errorf("webhook calls = %q, want exactly [POST /validate-configmaps denied]", got)
			}
		})

		t.Run("kubectl reaches the server with KubeConfig", func(t *testing.T) {
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, filepath.Join(BinDir(), "kubectl"), "version", "-o", "json", "--kubeconfig", kubeconfig)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl version: %v\n%s", err, out)
			}
			var v struct {
				ClientVersion struct{ GitVersion string } `json:"clientVersion"`
				ServerVersion struct{ GitVersion string } `json:"serverVersion"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("kubectl version output %q: %v", out, err)
			}
			if v.ClientVersion.GitVersion != KubernetesVersion || v.ServerVersion.GitVersion != KubernetesVersion {
				t.Errorf("kubectl reports client %q, server %q; want %s for both",
					v.ClientVersion.GitVersion, v.ServerVersion.GitVersion, KubernetesVersion)
			}
		})
	})
	if env == nil {
		return // Start failed and reported why
	}

	t.Run("cleanup stopped the control plane", func(t *testing.T) {
		u, err := url.Parse(env.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("API server at %s still accepts connections", u.Host)
		}
		if err := env.Stop(); err != nil {
			t.Errorf("second Stop = %v, want the first call's nil", err)
		}
		if _, err := os.Stat(env.WebhookInstallOptions.LocalServingCertDir); !os.IsNotExist(err) {
			t.Errorf("webhook certificate dir %s not removed: %v", env.WebhookInstallOptions.LocalServingCertDir, err)
		}
	})
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		env  map[string]string
		want []string
	}{
		{
			name: "missing binaries name the build command",
			env:  map[string]string{assetsEnv: t.TempDir()},
			want: []string{"etcd is missing", "kube-apiserver is missing", "kubectl is missing", "run `make controlplane`"},
		},
		{
			name: "missing CRD path",
			opts: []Option{WithCRDs("config/does-not-exist")},
			want: []string{"CRD manifests", "config/does-not-exist"},
		},
		{
			name: "webhook path without webhook configurations",
			opts: []Option{WithCRDs(), WithWebhooks(writeFile(t, "service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n"))},
			want: []string{"no Validating/MutatingWebhookConfiguration in", "service.yaml"},
		},
		{
			name: "missing webhook path",
			opts: []Option{WithWebhooks(filepath.Join(t.TempDir(), "nope"))},
			want: []string{"webhook manifests", "nope"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			env, err := New(tt.opts...)
			if err == nil {
				env.Stop()
				t.Fatal("New succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// writeFile writes content to name in a new temporary directory and returns
// the file's path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindRepoRoot(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("repo/go.mod", "// comment\nmodule github.com/contextrouter/contextrouter\n\ngo 1.26.0\n")
	write("repo/internal/pkg/x.go", "package pkg\n")
	write("repo/hack/controlplane/go.mod", "module github.com/contextrouter/contextrouter/hack/controlplane\n")
	write("repo/hack/controlplane/cmd/etcd/main.go", "package main\n")
	write("other/go.mod", "module example.com/other\n")

	tests := []struct {
		name    string
		wd      string
		want    string
		wantErr string
	}{
		{name: "root itself", wd: "repo", want: "repo"},
		{name: "package directory", wd: "repo/internal/pkg", want: "repo"},
		{name: "nested module is skipped", wd: "repo/hack/controlplane/cmd/etcd", want: "repo"},
		{name: "other module", wd: "other", wantErr: "no go.mod of module github.com/contextrouter/contextrouter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(filepath.Join(root, tt.wd))
			got, err := findRepoRoot()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("findRepoRoot() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := filepath.EvalSymlinks(filepath.Join(root, tt.want))
			if gotReal, _ := filepath.EvalSymlinks(got); gotReal != want {
				t.Errorf("findRepoRoot() = %q, want %q", got, want)
			}
		})
	}
}

func TestBinDir(t *testing.T) {
	t.Run("repository default", func(t *testing.T) {
		t.Setenv(assetsEnv, "")
		want := filepath.Join(RepoRoot(), "bin", "k8s", KubernetesVersion)
		if got := BinDir(); got != want {
			t.Errorf("BinDir() = %q, want %q", got, want)
		}
	})
	t.Run("KUBEBUILDER_ASSETS wins", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv(assetsEnv, dir)
		if got := BinDir(); got != dir {
			t.Errorf("BinDir() = %q, want %q", got, dir)
		}
	})
}

func TestCheckBinaries(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string // substrings of the error (<dir> is the directory); nil means no error
	}{
		{
			name:  "all present",
			setup: func(t *testing.T, dir string) {},
		},
		{
			name: "one missing",
			setup: func(t *testing.T, dir string) {
				mustRemove(t, filepath.Join(dir, "kubectl"))
			},
			want: []string{"kubectl is missing", "<dir>", "make controlplane"},
		},
		{
			name: "not executable",
			setup: func(t *testing.T, dir string) {
				if err := os.Chmod(filepath.Join(dir, "etcd"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"etcd is not an executable file"},
		},
		{
			name: "directory in place of a binary",
			setup: func(t *testing.T, dir string) {
				p := filepath.Join(dir, "kube-apiserver")
				mustRemove(t, p)
				if err := os.Mkdir(p, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"kube-apiserver is not an executable file"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			for _, name := range controlPlaneBinaries {
				if err := os.WriteFile(filepath.Join(d, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			tt.setup(t, d)
			err := checkBinaries(d)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("checkBinaries: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("checkBinaries succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), strings.ReplaceAll(w, "<dir>", d)) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func TestNamespacePrefix(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"TestStart", "teststart-"},
		{"TestStart/running/configmap round trip", "teststart-running-configmap-round-trip-"},
		{"Test__x//y", "test-x-y-"},
		{"/leading", "leading-"},
		{"123", "t-123-"},
		{"", "t-"},
		{strings.Repeat("a", 80), strings.Repeat("a", 56) + "-"},
		{strings.Repeat("a", 55) + "/b", strings.Repeat("a", 55) + "-"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := namespacePrefix(tt.in)
			if got != tt.want {
				t.Errorf("namespacePrefix(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if len(got) > 57 {
				t.Errorf("prefix %q longer than 57", got)
			}
		})
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"under the limit", 10, []string{"abc", "def"}, "abcdef"},
		{"exactly the limit", 6, []string{"abc", "def"}, "abcdef"},
		{"keeps the end", 4, []string{"abc", "def"}, "cdef"},
		{"one large write", 3, []string{"abcdefgh"}, "fgh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTail(tt.max)
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if got := w.String(); got != tt.want {
				t.Errorf("kept %q, want %q", got, tt.want)
			}
		})
	}
	if got := newTail(8).describe("etcd"); got != "" {
		t.Errorf("describe of empty output = %q, want empty", got)
	}
}

// serveDenyingWebhook serves the webhook address envtest registered, with
// its certificate, denying every review. It returns the calls seen so far as
// "METHOD path object-name".
func serveDenyingWebhook(t *testing.T, opts *envtest.WebhookInstallOptions) func() []string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(opts.LocalServingCertDir, "tls.crt"), filepath.Join(opts.LocalServingCertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort)),
		&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		calls []string
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admission.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path+" "+review.Request.Name)
		mu.Unlock()
		review.Response = &admission.AdmissionResponse{
			UID:     review.Request.UID,
			Allowed: false,
			Result:  &metav1.Status{Message: "denied by the testenv webhook"},
		}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}
