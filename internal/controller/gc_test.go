package controller

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// startGarbageCollector runs the real garbage collector of
// kube-controller-manager (built from hack/controlplane like the API server)
// against the test API server, so deleting an owner deletes its children as
// in a cluster.
func startGarbageCollector(t *testing.T, env *testenv.Env) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.BinDir(), "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig,
		"--authorization-kubeconfig="+kubeconfig,
		"--controllers=garbagecollector",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
		"--cert-dir="+dir,
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), fmt.Sprintf("CONTEXTROUTER_CONTROLPLANE_PARENT_PID=%d", os.Getpid()))
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("kube-controller-manager: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("kube-controller-manager output:\n%s", tail(out.String(), 4000))
		}
	})
	select {
	case err := <-exited:
		t.Fatalf("kube-controller-manager exited at start: %v\n%s", err, tail(out.String(), 4000))
	case <-time.After(500 * time.Millisecond):
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestDeletingRouterCollectsChildren(t *testing.T) {
	env := testenv.Start(t)
	startGarbageCollector(t, env)
	startOperator(t, env, testr.New(t))
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)

	router := tRouter(ns, "acme")
	mustCreate(t, c, router, tInline(ns, "prompt", "Be brief."), tRoute(ns, "always", "", nil, "prompt"))
	waitRouter(t, c, ns, "acme", programmed)

	children := []client.Object{
		&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{},
	}
	keys := []types.NamespacedName{
		{Namespace: ns, Name: bundle.ConfigMapName("acme")},
		{Namespace: ns, Name: "acme"}, {Namespace: ns, Name: "acme"}, {Namespace: ns, Name: "acme"},
	}
	for i, obj := range children {
		eventually(t, fmt.Sprintf("%T %s exists", obj, keys[i]), func() error { return c.Get(ctx, keys[i], obj) })
	}

	if err := c.Delete(ctx, router); err != nil {
		t.Fatal(err)
	}
	for i, obj := range children {
		eventually(t, fmt.Sprintf("%T %s is garbage-collected", obj, keys[i]), func() error {
			err := c.Get(ctx, keys[i], obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("still present")
		})
	}
}
