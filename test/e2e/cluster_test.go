//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// TestCluster is step 1: the node itself. A pod with a native sidecar runs
// two containers of the test agent; both reach a server on the host, the
// host reaches them on the pod IP and through a ClusterIP Service
// (kube-proxy), a ConfigMap update reaches the running pod, `kubectl logs`
// works (API server -> kubelet). Then the cluster is killed without a
// teardown, and the next bring-up must clean up after it and work; the
// final teardown must leave the host clean.
func TestCluster(t *testing.T) {
	c := Up(t)
	agentImage := c.Image(t, "agent.tar")
	host := newHostRouter(t, c.NodeIP)
	ns := c.Namespace(t, "e2e-cluster")

	c.Apply(t, agentPodManifest(ns, agentImage, host.URL, "first question"), "-n", ns)
	pod := c.WaitPodReady(t, ns, "agent", 90*time.Second)

	t.Run("containers reach the host and the host reaches the pod IP", func(t *testing.T) {
		for _, port := range []int{8080, 8081} { // app, sidecar
			var r AgentResult
			url := fmt.Sprintf("http://%s:%d/result", pod.Status.PodIP, port)
			c.WaitFor(t, url+" answered", 30*time.Second, func(ctx context.Context) (bool, string, error) {
				err := GetJSONURL(ctx, url, &r)
				return err == nil, fmt.Sprint(err), nil
			})
			if r.Status != http.StatusOK || r.Error != "" {
				t.Fatalf("%s: the agent got status %d, error %q", url, r.Status, r.Error)
			}
			want := host.answerFor(r.RequestText())
			if string(r.Response) != want {
				t.Errorf("%s: the agent got %s, the host server answered %s", url, r.Response, want)
			}
		}
		got := host.texts()
		for _, want := range []string{"first question", "sidecar question"} {
			if !contains(got, want) {
				t.Errorf("the host server saw queries %q, want %q among them", got, want)
			}
		}
	})

	t.Run("native sidecar started before the app and runs beside it", func(t *testing.T) {
		var p corev1.Pod
		c.GetJSON(t, &p, "get", "pod", "agent", "-n", ns)
		if len(p.Status.InitContainerStatuses) != 1 {
			t.Fatalf("want one init container status, got %d", len(p.Status.InitContainerStatuses))
		}
		sc := p.Status.InitContainerStatuses[0]
		if sc.Started == nil || !*sc.Started || sc.State.Running == nil || !sc.Ready {
			t.Errorf("sidecar %s: started=%v ready=%t state=%+v, want a running, ready sidecar", sc.Name, sc.Started, sc.Ready, sc.State)
		}
		app := p.Status.ContainerStatuses[0]
		if app.State.Running == nil || sc.State.Running.StartedAt.After(app.State.Running.StartedAt.Time) {
			t.Errorf("sidecar started %v, app %+v: want the sidecar first", sc.State.Running.StartedAt, app.State)
		}
	})

	t.Run("ClusterIP Service through kube-proxy", func(t *testing.T) {
		var svc corev1.Service
		c.GetJSON(t, &svc, "get", "service", "agent", "-n", ns)
		url := fmt.Sprintf("http://%s/result", net.JoinHostPort(svc.Spec.ClusterIP, "80"))
		var r AgentResult
		c.WaitFor(t, "Service "+url+" answered", 30*time.Second, func(ctx context.Context) (bool, string, error) {
			err := GetJSONURL(ctx, url, &r)
			return err == nil, fmt.Sprint(err), nil
		})
		if r.RequestText() != "first question" {
			t.Errorf("through the Service the agent reports query %q, want %q", r.RequestText(), "first question")
		}
	})

	t.Run("ConfigMap update reaches the running pod", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.Kubectl(ctx, "patch", "configmap", "agent-query", "-n", ns, "--type", "merge",
			"-p", `{"data":{"query":"second question"}}`); err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("http://%s:8080/query", pod.Status.PodIP)
		c.WaitFor(t, "ConfigMap volume refreshed in the pod", 45*time.Second, func(ctx context.Context) (bool, string, error) {
			var r AgentResult
			if err := GetJSONURL(ctx, url, &r); err != nil {
				return false, err.Error(), nil
			}
			return r.RequestText() == "second question" && r.Status == http.StatusOK, string(r.Request), nil
		})
	})

	t.Run("kubectl logs reaches the kubelet", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := c.Kubectl(ctx, "logs", "agent", "-n", ns, "-c", "agent")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, `"first question"`) {
			t.Errorf("kubectl logs: want the agent's result line with its query, got:\n%s", out)
		}
	})

	if t.Failed() {
		return
	}

	t.Run("a crashed run's leftovers do not break the next", func(t *testing.T) {
		// Kill everything as a CI timeout would: no pod deletion, no
		// unmounting, containers and shims left running.
		c.crash(t)
		if len(cluster.ShimPIDs(c.RunDir)) == 0 {
			t.Fatal("the crash left no containerd shim: the test does not exercise the cleanup")
		}
		if _, err := net.InterfaceByName(bridgeName); err != nil {
			t.Fatalf("the crash left no %s bridge: the test does not exercise the cleanup", bridgeName)
		}
		c2 := Up(t)
		ns := c2.Namespace(t, "e2e-after-crash")
		c2.Apply(t, agentPodManifest(ns, agentImage, host.URL, "after the crash"), "-n", ns)
		pod := c2.WaitPodReady(t, ns, "agent", 90*time.Second)
		var r AgentResult
		url := fmt.Sprintf("http://%s:8080/result", pod.Status.PodIP)
		c2.WaitFor(t, url+" answered", 30*time.Second, func(ctx context.Context) (bool, string, error) {
			err := GetJSONURL(ctx, url, &r)
			return err == nil, fmt.Sprint(err), nil
		})
		if r.RequestText() != "after the crash" || r.Status != http.StatusOK {
			t.Errorf("after the crash the agent reports %q with status %d", r.RequestText(), r.Status)
		}

		if err := c2.Down(); err != nil {
			t.Fatalf("teardown: %v", err)
		}
		for _, leftover := range hostLeftovers(c2.RunDir) {
			t.Errorf("after teardown: %s", leftover)
		}
	})
}

// agentPodManifest is a ConfigMap holding the query, a pod running the test
// agent as the app and again as a native sidecar (an init container with
// restartPolicy Always and a startup probe, the shape sidecar injection
// uses), and a Service for the app's port.
func agentPodManifest(ns, image, routerURL, query string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: agent-query, namespace: %[1]s}
data: {query: %[4]q}
---
apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: %[1]s
  labels: {app: agent}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: sidecar
    image: %[2]s
    imagePullPolicy: Never
    restartPolicy: Always
    args: [sidecar, question]
    env:
    - {name: CONTEXTROUTER_URL, value: %[3]q}
    - {name: AGENT_LISTEN, value: ":8081"}
    startupProbe:
      httpGet: {path: /healthz, port: 8081}
      periodSeconds: 1
  containers:
  - name: agent
    image: %[2]s
    imagePullPolicy: Never
    env:
    - {name: CONTEXTROUTER_URL, value: %[3]q}
    - {name: AGENT_QUERY_FILE, value: /etc/agent/query}
    readinessProbe:
      httpGet: {path: /result, port: 8080}
      periodSeconds: 1
    volumeMounts:
    - {name: query, mountPath: /etc/agent}
  volumes:
  - name: query
    configMap: {name: agent-query}
---
apiVersion: v1
kind: Service
metadata: {name: agent, namespace: %[1]s}
spec:
  selector: {app: agent}
  ports:
  - {port: 80, targetPort: 8080}
`, ns, image, routerURL, query)
}

// hostRouter is an HTTP server on the node's address that answers the
// agent's queries with a JSON document derived from the question, so a test
// can tell which request an answer belongs to.
type hostRouter struct {
	URL string
	mu  sync.Mutex
	got []string
}

func newHostRouter(t *testing.T, ip net.IP) *hostRouter {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	h := &hostRouter{URL: "http://" + l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/query", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Text string `json:"text"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, req.Text)
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, h.answerFor(req.Text))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return h
}

func (h *hostRouter) answerFor(text string) string {
	b, _ := json.Marshal(map[string]any{"text": "answer to " + text, "matched_routes": []string{"host"}})
	return string(b)
}

func (h *hostRouter) texts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// crash kills every component and forgets them, leaving the machine as a
// killed test run would.
func (c *Cluster) crash(t testing.TB) {
	t.Helper()
	c.Kill()
}

// hostLeftovers lists what a torn-down cluster left on the host.
func hostLeftovers(runDir string) []string { return cluster.Leftovers(runDir) }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
