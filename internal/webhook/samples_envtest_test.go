package webhook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

// TestSamplesApplyWithKubectl applies config/samples with the kubectl built
// from hack/controlplane to the test API server, with the CRDs and the
// validating webhooks installed: what a user does after installing.
func TestSamplesApplyWithKubectl(t *testing.T) {
	env := servingWebhooks(t)
	ns := env.Namespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(testenv.BinDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := kubectl("apply", "-n", ns, "-f", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if err != nil {
		t.Fatalf("kubectl apply -f config/samples: %v\n%s", err, out)
	}
	for _, want := range []string{
		"contextrouter.contextrouter.dev/acme created",
		"contextroute.contextrouter.dev/hr-policies created",
		"contextsource.contextrouter.dev/system-prompt created",
		"agentpermission.contextrouter.dev/finance-analyst created",
		"configmap/hr-docs created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}

	// Applying again changes nothing: the samples are stable under defaulting.
	out, err = kubectl("apply", "-n", ns, "-f", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if err != nil || strings.Contains(out, "configured") {
		t.Errorf("second apply: %v\n%s", err, out)
	}

	out, err = kubectl("get", "ctxroute", "-n", ns, "-o", "name")
	if err != nil || !strings.Contains(out, "contextroute.contextrouter.dev/engineering") {
		t.Errorf("kubectl get ctxroute: %v\n%s", err, out)
	}

	// The CRD schemas carry real descriptions (published to OpenAPI shortly after the CRDs).
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err = kubectl("explain", "contextroute.spec.when")
		if err == nil && strings.Contains(out, "CEL") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl explain contextroute.spec.when: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A broken condition is refused at apply time with the CEL message.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: broken}
spec:
  when: 'containsAnyWord(txt, ["pto"])'
  sources: [{name: hr-docs}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = kubectl("apply", "-n", ns, "-f", bad)
	if err == nil || !strings.Contains(out, "undeclared reference to 'txt'") {
		t.Errorf("broken route was not refused with the CEL message: %v\n%s", err, out)
	}
}
