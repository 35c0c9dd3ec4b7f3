//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// Namespace creates a namespace for a test and waits for its default
// ServiceAccount, without which no pod is admitted. Nothing deletes it:
// Down deletes every pod, and the next bring-up starts from an empty etcd.
func (c *Cluster) Namespace(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "create", "namespace", name); err != nil {
		t.Fatal(err)
	}
	if err := c.waitFor(ctx, "ServiceAccount default in "+name, 30*time.Second, func(ctx context.Context) (bool, string, error) {
		_, err := c.Kubectl(ctx, "get", "serviceaccount", "default", "-n", name)
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// Apply applies manifest text, failing the test on error.
func (c *Cluster) Apply(t testing.TB, manifest string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.KubectlApply(ctx, manifest, args...); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls check until it reports done, failing the test after
// timeout with the last thing check saw.
func (c *Cluster) WaitFor(t testing.TB, what string, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) {
	t.Helper()
	start := time.Now()
	if err := c.waitFor(context.Background(), what, timeout, check); err != nil {
		t.Fatal(err)
	}
	c.logf("%s (%.1fs)", what, time.Since(start).Seconds())
}

// WaitPodReady waits until the pod is Running with every container ready
// and returns it. On timeout the failure shows the pod's container states
// and events.
func (c *Cluster) WaitPodReady(t testing.TB, ns, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	start := time.Now()
	err := c.waitFor(context.Background(), "pod "+ns+"/"+name+" ready", timeout, func(ctx context.Context) (bool, string, error) {
		pod = corev1.Pod{}
		if err := c.getJSON(ctx, &pod, "get", "pod", name, "-n", ns); err != nil {
			return false, err.Error(), nil
		}
		return podReady(&pod), describePod(&pod), nil
	})
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		events, _ := c.Kubectl(ctx, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name, "--sort-by=.lastTimestamp")
		t.Fatalf("%v\nevents:\n%s", err, events)
	}
	c.logf("pod %s/%s ready at %s (%.1fs)", ns, name, pod.Status.PodIP, time.Since(start).Seconds())
	return &pod
}

func podReady(pod *corev1.Pod) bool { return cluster.PodReady(pod) }

func describePod(pod *corev1.Pod) string { return cluster.DescribePod(pod) }

// hostClient talks to pods and Services from the host.
var hostClient = &http.Client{Timeout: 10 * time.Second}

// GetJSONURL fetches url and decodes a 200 answer into v.
func GetJSONURL(ctx context.Context, url string, v any) error {
	body, err := cluster.HTTPGet(ctx, hostClient, url)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: decoding %q: %w", url, body, err)
	}
	return nil
}

// PostJSON posts body as JSON and returns the status and the answer.
func PostJSON(ctx context.Context, url string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(b)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hostClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, out, err
}

// AgentResult is what the test agent (test/e2e/agent) reports.
type AgentResult struct {
	URL      string          `json:"url"`
	Request  json.RawMessage `json:"request"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response"`
	Body     string          `json:"body"`
	Error    string          `json:"error"`
	Attempts int             `json:"attempts"`
}

// RequestText is the query text the agent sent.
func (r AgentResult) RequestText() string {
	var req struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(r.Request, &req)
	return req.Text
}

// missingPaths lists which of paths do not exist under root, sorted.
func missingPaths(paths map[string]string) []string {
	var missing []string
	for p, hint := range paths {
		if !fileExists(p) {
			missing = append(missing, p+" ("+hint+")")
		}
	}
	sort.Strings(missing)
	return missing
}
