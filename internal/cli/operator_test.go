package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

func TestOperatorFlags(t *testing.T) {
	t.Setenv(RouterImageEnv, "")
	cmd := newOperatorCommand()
	if err := cmd.Flags().Parse(nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"namespace":                 "[]",
		"leader-elect":              "false",
		"leader-election-id":        "contextrouter-operator",
		"metrics-bind-address":      ":8443",
		"metrics-secure":            "true",
		"health-probe-bind-address": ":8081",
		"router-image":              "ghcr.io/contextrouter/contextrouter:" + Version,
		"disable-webhooks":          "false",
		"webhook-port":              "9443",
		"cert-dir":                  "",
		"manage-webhook-certs":      "true",
		"log-format":                "json",
		"enable-http2":              "false",
	} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("--%s default %q, want %q", name, got, want)
		}
	}

	t.Setenv(RouterImageEnv, "registry.example.com/router:v7")
	if got := newOperatorCommand().Flags().Lookup("router-image").DefValue; got != "registry.example.com/router:v7" {
		t.Errorf("--router-image default %q, want $%s", got, RouterImageEnv)
	}

	ns := newOperatorCommand()
	if err := ns.Flags().Parse([]string{"--namespace", "a", "--namespace", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := ns.Flags().Lookup("namespace").Value.String(); got != "[a,b]" {
		t.Errorf("--namespace repeated = %s", got)
	}

	for _, tt := range []struct {
		flags operatorFlags
		want  string
	}{
		{operatorFlags{routerImage: "", logFormat: "json", webhookPort: 9443}, "--router-image"},
		{operatorFlags{routerImage: "x", logFormat: "xml", webhookPort: 9443}, "--log-format"},
		{operatorFlags{routerImage: "x", logFormat: "text", webhookPort: 0}, "--webhook-port"},
		{operatorFlags{routerImage: "x", logFormat: "text", webhookPort: 9443, namespaces: []string{""}}, "--namespace"},
	} {
		if err := tt.flags.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate(%+v) = %v, want an error about %s", tt.flags, err, tt.want)
		}
	}
}

// syncBuffer collects the operator's log from concurrent goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func poll(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last = check(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, last)
		}
	}
}

// TestOperatorCommand runs `contextrouter operator` against a real API
// server with the webhook configuration installed: probes, the webhook,
// a programmed router, the namespace scope, authorized metrics and a clean
// shutdown.
func TestOperatorCommand(t *testing.T) {
	env := testenv.Start(t, testenv.WithWebhooks())
	c := env.Client
	ctx := context.Background()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	watched, ignored := env.Namespace(t), env.Namespace(t)
	probePort, metricsPort := freePort(t), freePort(t)
	wh := env.WebhookInstallOptions

	root := NewRootCommand()
	logs := &syncBuffer{}
	root.SetOut(io.Discard)
	root.SetErr(logs)
	root.SetArgs([]string{"operator",
		"--kubeconfig", kubeconfig,
		"--namespace", watched,
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(probePort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--webhook-port", strconv.Itoa(wh.LocalServingPort),
		"--cert-dir", wh.LocalServingCertDir,
		"--manage-webhook-certs=false",
		"--router-image", "example.com/router:e2e",
		"--log-format", "text",
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(runCtx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(45 * time.Second):
			return errors.New("the operator did not stop within 45s")
		}
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("%v\nlog:\n%s", err, logs)
		}
	})

	poll(t, "readyz", func() error {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("the operator exited: %v\nlog:\n%s", err, logs)
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})

	t.Run("the webhook refuses invalid CEL", func(t *testing.T) {
		route := &v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "bad"},
			Spec: v1alpha1.ContextRouteSpec{When: "text ==", Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}}}}
		err := c.Create(ctx, route)
		if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "spec.when") {
			t.Fatalf("create = %v, want the webhook to refuse it naming spec.when", err)
		}
	})

	t.Run("routers in the watched namespace are programmed, others are not", func(t *testing.T) {
		for _, ns := range []string{watched, ignored} {
			for _, o := range []client.Object{
				&v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acme"}},
				&v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docs"}, Spec: v1alpha1.ContextSourceSpec{
					Type: v1alpha1.SourceInline, Inline: &v1alpha1.InlineSource{Content: "Docs."}}},
				&v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "docs"},
					Spec: v1alpha1.ContextRouteSpec{Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}}}},
			} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatalf("create %T %s/%s: %v", o, ns, o.GetName(), err)
				}
			}
		}
		router := &v1alpha1.ContextRouter{}
		poll(t, "router programmed", func() error {
			if err := c.Get(ctx, types.NamespacedName{Namespace: watched, Name: "acme"}, router); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(router.Status.Conditions, v1alpha1.ConditionProgrammed) || router.Status.AttachedRoutes != 1 {
				return fmt.Errorf("status %+v", router.Status)
			}
			return nil
		})
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: watched, Name: "acme"}, dep); err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "example.com/router:e2e" {
			t.Errorf("router image %q, want --router-image", img)
		}
		// The other namespace's router was created with this one: had the
		// operator watched it, it would have a status by now.
		time.Sleep(2 * time.Second)
		if err := c.Get(ctx, types.NamespacedName{Namespace: ignored, Name: "acme"}, router); err != nil {
			t.Fatal(err)
		}
		if len(router.Status.Conditions) != 0 {
			t.Errorf("a router outside --namespace got status %+v", router.Status)
		}
	})

	t.Run("metrics need a token allowed to get /metrics", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: watched, Name: "prometheus"}}
		if err := c.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(watched).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		scrape := func(token string) (int, string) {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the endpoint's certificate is self-signed
			}}
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort), nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, _ := scrape(""); code != http.StatusUnauthorized {
			t.Errorf("no token: %d, want 401", code)
		}
		if code, _ := scrape("not-a-token"); code != http.StatusUnauthorized {
			t.Errorf("bad token: %d, want 401", code)
		}
		if code, _ := scrape(tr.Status.Token); code != http.StatusForbidden {
			t.Errorf("token without permission: %d, want 403", code)
		}

		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + watched},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + watched},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: watched}}}
		for _, o := range []client.Object{role, binding} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		// A fresh token: decisions are remembered for a minute per token.
		tr, err = cs.CoreV1().ServiceAccounts(watched).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		poll(t, "authorized scrape", func() error {
			code, body := scrape(tr.Status.Token)
			if code != http.StatusOK {
				return fmt.Errorf("status %d", code)
			}
			for _, want := range []string{"contextrouter_operator_bundle_compile_seconds", `controller_runtime_reconcile_total{controller="contextrouter"`} {
				if !strings.Contains(body, want) {
					return fmt.Errorf("metrics lack %s", want)
				}
			}
			return nil
		})
	})

	if err := stop(); err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logs)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("operator logged an error: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Errorf("no clean shutdown in the log:\n%s", logs)
	}
}
