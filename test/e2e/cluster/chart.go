//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The names the chart is installed under.
const (
	ReleaseName      = "contextrouter"
	ReleaseNamespace = "contextrouter-system"
	OperatorName     = "contextrouter-controller-manager"
	// OperatorImage is the tarball in ImagesDir the operator and the
	// routers run.
	OperatorImage = "contextrouter.tar"
)

// Helm runs bin/helm against the cluster with its caches under the run
// directory, so the host's helm configuration neither leaks in nor changes.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.RepoRoot, "bin", "helm"), append(args, "--kubeconfig", c.Kubeconfig)...)
	home := c.Path("helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// helmSummary is the release part of helm's answer ("NAME: contextrouter,
// NAMESPACE: …, STATUS: deployed, REVISION: 1"), without the chart's notes.
func helmSummary(out string) string {
	var parts []string
	for _, line := range strings.Split(out, "\n") {
		for _, key := range []string{"NAME:", "NAMESPACE:", "STATUS:", "REVISION:"} {
			if strings.HasPrefix(line, key) {
				parts = append(parts, strings.TrimSpace(line))
			}
		}
	}
	if len(parts) == 0 {
		return lastLines(out, 8)
	}
	return strings.Join(parts, ", ")
}

// SplitImage splits "localhost/contextrouter:dev" into repository and tag.
func SplitImage(ref string) (string, string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// WaitDeploymentAvailable waits until a Deployment has a ready pod and
// every pod runs its current template.
func (c *Cluster) WaitDeploymentAvailable(ctx context.Context, ns, name string, timeout time.Duration) error {
	return c.waitFor(ctx, "Deployment "+ns+"/"+name+" available", timeout, func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := c.getJSON(ctx, &d, "get", "deployment", name, "-n", ns); err != nil {
			return false, err.Error(), nil
		}
		if d.Status.ReadyReplicas < 1 || d.Status.UpdatedReplicas != d.Status.Replicas {
			return false, fmt.Sprintf("ready %d/%d; pods: %s", d.Status.ReadyReplicas, d.Status.Replicas, c.PodStates(ctx, ns, "")), nil
		}
		return true, "", nil
	})
}

// InstallOperator installs charts/contextrouter with the imported operator
// image and returns once the operator Deployment is available and it has
// written its CA into every webhook configuration of the release.
func (c *Cluster) InstallOperator(ctx context.Context) error {
	ref, ok := c.Images[OperatorImage]
	if !ok {
		return fmt.Errorf("image %s/%s is missing: build the images with `make images`", c.ImagesDir, OperatorImage)
	}
	repo, tag := SplitImage(ref)
	hctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := c.Helm(hctx, "install", ReleaseName, filepath.Join(c.RepoRoot, "charts", "contextrouter"),
		"--namespace", ReleaseNamespace, "--create-namespace",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag,
		// The image is imported, not in a registry.
		"--set", "image.pullPolicy=Never")
	if err != nil {
		return err
	}
	c.logf("helm install: %s", helmSummary(out))

	if err := c.WaitDeploymentAvailable(ctx, ReleaseNamespace, OperatorName, 3*time.Minute); err != nil {
		return err
	}
	c.logf("operator Deployment available")

	// The operator manages its webhook certificate itself: it writes the CA
	// into every webhook configuration of the chart.
	if err := c.waitFor(ctx, "webhook configurations carry the operator's CA", time.Minute, func(ctx context.Context) (bool, string, error) {
		var missing []string
		for _, kind := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"} {
			var list struct {
				Items []struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
					Webhooks []struct {
						Name         string `json:"name"`
						ClientConfig struct {
							CABundle []byte `json:"caBundle"`
						} `json:"clientConfig"`
					} `json:"webhooks"`
				} `json:"items"`
			}
			if err := c.getJSON(ctx, &list, "get", kind, "-l", "app.kubernetes.io/instance="+ReleaseName); err != nil {
				return false, err.Error(), nil
			}
			if len(list.Items) == 0 {
				missing = append(missing, "no "+kind+" of the release")
			}
			for _, item := range list.Items {
				for _, w := range item.Webhooks {
					if len(w.ClientConfig.CABundle) == 0 {
						missing = append(missing, item.Metadata.Name+"/"+w.Name)
					}
				}
			}
		}
		return len(missing) == 0, "without caBundle: " + strings.Join(missing, ", "), nil
	}); err != nil {
		return err
	}
	c.logf("webhook configurations carry the operator's CA")
	return nil
}

// PodStates summarises the pods of a namespace (matching selector when not
// empty) for a wait's last-seen message.
func (c *Cluster) PodStates(ctx context.Context, ns, selector string) string {
	var pods corev1.PodList
	args := []string{"get", "pods", "-n", ns}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	if err := c.getJSON(ctx, &pods, args...); err != nil {
		return err.Error()
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, p.Name+": "+DescribePod(&p))
	}
	if len(parts) == 0 {
		return "no pods"
	}
	return strings.Join(parts, " | ")
}

// PodReady reports whether the pod runs with every container ready.
func PodReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DescribePod summarises a pod's phase and each container's state, the
// part of `kubectl describe` that says why a pod is not ready.
func DescribePod(pod *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", pod.Status.Phase)
	if pod.Status.Reason != "" {
		fmt.Fprintf(&b, " (%s: %s)", pod.Status.Reason, pod.Status.Message)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "; %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		fmt.Fprintf(&b, "; container %s ready=%t restarts=%d", s.Name, s.Ready, s.RestartCount)
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s %s", s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit %d %s", s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
		case s.State.Running != nil:
			b.WriteString(" running")
		}
	}
	return b.String()
}
