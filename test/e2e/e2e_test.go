//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/testenv"
	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// The names the scenario installs under.
const (
	releaseName      = cluster.ReleaseName
	releaseNamespace = cluster.ReleaseNamespace
	operatorName     = cluster.OperatorName
	samplesNamespace = "acme"
	routerName       = "acme" // config/samples/router.yaml
	vacationQuestion = "How many vacation days do I get, and can I carry them over?"
	rollbackQuestion = "How do I roll back a bad deploy of fleet-api?"
	budgetQuestion   = "What is the engineering budget this quarter?"
	// incidentQuestion shares no word with the engineering route's condition:
	// only the intent classifier (ContextClassifier "intent") routes it.
	incidentQuestion  = "Our robots stopped moving and customers see nothing"
	reloadQuestion    = "Is there a zebra crossing policy for the Munich office?"
	reloadWord        = "zebra"
	changedRouteName  = "hr-policies"
	gitSourceName     = "e2e-wiki"
	gitAgent          = "wiki-reader"
	gitQuestion       = "Which colour is the zebra crossing at gate 4?"
	injectedAgentName = "hr-assistant"
)

// TestScenario installs contextrouter with helm and walks through what a
// user does, on a real cluster: the operator and its webhooks, the samples'
// router answering like the quickstart, sidecar injection, hot reload of a
// changed route under load, a git source following new commits, and the
// clean removal of it all. Each step needs the previous ones; the first
// failure ends the test.
func TestScenario(t *testing.T) {
	s := &scenario{}
	s.checkPrerequisites(t)
	s.c = Up(t)
	// A failed step that later ones build on ends the test; the others
	// (hot reload, git) only fail it, so one run reports on every step.
	steps := []struct {
		name     string
		run      func(t *testing.T)
		required bool
	}{
		{"helm install: the operator runs and serves its webhooks", s.installChart, true},
		{"samples: the router becomes Ready and answers like the quickstart", s.applySamples, true},
		{"sessions: a router pod keeps a session and packs it as the CLI does", s.sessionPack, false},
		{"injection: an agent pod gets the sidecar and its context", s.injectSidecar, true},
		{"hot reload: a changed route reaches the running routers without a failed request", s.hotReload, false},
		{"GitRepo source: a new commit reaches the answers", s.gitSource, false},
		{"deleting the router and uninstalling the chart clean up", s.uninstall, true},
		{"teardown leaves the host clean", s.teardown, true},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) && step.required {
			t.Fatalf("step %q failed; the later steps depend on it", step.name)
		}
		s.c.CheckRunning(t)
	}
}

type scenario struct {
	c          *Cluster
	root       string
	helm       string
	cli        string // bin/contextrouter, for the expected answers
	routerPods []corev1.Pod
	agentPod   *corev1.Pod
}

// checkPrerequisites fails, naming everything missing at once, when the
// project's parts are not built: `make e2e` builds them all.
func (s *scenario) checkPrerequisites(t *testing.T) {
	root := testenv.RepoRoot()
	s.root = root
	s.helm = filepath.Join(root, "bin", "helm")
	s.cli = filepath.Join(root, "bin", "contextrouter")
	missing := missingPaths(map[string]string{
		filepath.Join(imagesDir(root), "contextrouter.tar"): "make images",
		filepath.Join(imagesDir(root), "agent.tar"):         "make images",
		filepath.Join(imagesDir(root), "pause.tar"):         "make images",
		s.helm: "make helm",
		s.cli:  "make build",
		filepath.Join(root, "charts", "contextrouter", "Chart.yaml"): "the Helm chart",
		filepath.Join(root, "config", "samples", "router.yaml"):      "the samples",
	})
	if len(missing) > 0 {
		t.Fatalf("the scenario needs what `make e2e` builds; missing:\n  %s", strings.Join(missing, "\n  "))
	}
	if out, err := exec.Command(s.cli, "serve", "--help").CombinedOutput(); err != nil {
		t.Fatalf("%s has no working `serve` command, which the router pods run: %v\n%s", s.cli, err, out)
	}
}

// runHelm runs bin/helm against the cluster (see cluster.Cluster.Helm).
func (s *scenario) runHelm(t *testing.T, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := s.c.Helm(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (s *scenario) installChart(t *testing.T) {
	c := s.c
	if err := c.InstallOperator(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The validating webhook, not the CRD schema, compiles CEL: a route
	// whose condition does not compile is refused only if it is serving.
	ns := c.Namespace(t, "e2e-webhook")
	bad := `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: broken}
spec:
  when: 'text.startsWith('
  sources: [{name: anything}]
`
	c.WaitFor(t, "validating webhook refuses a route whose CEL does not compile", time.Minute, func(ctx context.Context) (bool, string, error) {
		_, err := c.KubectlApply(ctx, bad, "-n", ns, "--dry-run=server")
		if err == nil {
			return false, "the route was admitted", nil
		}
		// CEL's own parser message: only the webhook compiles conditions.
		msg := err.Error()
		return strings.Contains(msg, "spec.when") && strings.Contains(msg, "Syntax error"), msg, nil
	})
}

func (s *scenario) podStates(ctx context.Context, ns, selector string) string {
	return s.c.PodStates(ctx, ns, selector)
}

func (s *scenario) applySamples(t *testing.T) {
	c := s.c
	c.Namespace(t, samplesNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "apply", "-n", samplesNamespace, "-f", filepath.Join(s.root, "config", "samples")); err != nil {
		t.Fatal(err)
	}
	s.checkSampleAnswers(t)
}

// sampleQuestions are the quickstart's questions the routers must answer
// as the CLI does.
var sampleQuestions = []question{
	{"hr-assistant", vacationQuestion},
	{"eng-assistant", rollbackQuestion},
	{"hr-assistant", budgetQuestion}, // finance-docs denied
	{"eng-assistant", incidentQuestion},
}

type question struct{ agent, text string }

// checkSampleAnswers waits for the samples' router to become Ready and
// checks that every router pod and the Service answer the quickstart's
// questions as the CLI does on examples/quickstart.
func (s *scenario) checkSampleAnswers(t *testing.T) {
	c := s.c
	router := s.waitRouterReady(t, 3*time.Minute)
	c.logf("ContextRouter %s Ready: %d routes, %d sources, bundle %s, %d/%d replicas ready", routerName,
		router.Status.AttachedRoutes, router.Status.Sources, router.Status.Bundle.Hash, router.Status.ReadyReplicas, router.Status.Replicas)

	wants := make([]answer, len(sampleQuestions))
	for i, q := range sampleQuestions {
		wants[i] = s.expectedAnswer(t, q.agent, q.text)
	}
	// The classifier travels in the bundle and is trained in the router pods:
	// the same routes as the CLI prove it there.
	if last := wants[len(wants)-1]; !slices.Contains(last.MatchedRoutes, "incident-help") {
		t.Fatalf("the quickstart routes %q through %v; the scenario needs the classifier's route incident-help", incidentQuestion, last.MatchedRoutes)
	}
	s.waitAnswers(t, "every router pod and the Service answer like the quickstart", sampleQuestions, wants)
	s.routerPods = s.readyRouterPods(t, router.Status.ReadyReplicas)
}

// serviceURL is the base URL of the samples' router Service.
func (s *scenario) serviceURL(t *testing.T) string {
	t.Helper()
	var svc corev1.Service
	s.c.GetJSON(t, &svc, "get", "service", routerName, "-n", samplesNamespace)
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")
}

// waitAnswers waits until every pod of the router's rolled-out Deployment
// and its Service give the answers wants to questions. The operator may
// still be settling what was applied, so the answers are polled; a
// difference that stays fails.
func (s *scenario) waitAnswers(t *testing.T, what string, questions []question, wants []answer) {
	t.Helper()
	serviceURL := s.serviceURL(t)
	var targets []string
	s.c.WaitFor(t, what, time.Minute, func(ctx context.Context) (bool, string, error) {
		urls, waiting, err := s.routerTargets(ctx)
		if err != nil || waiting != "" {
			return false, waiting + fmt.Sprint(err), nil
		}
		targets = append(urls, serviceURL)
		for i, q := range questions {
			for _, u := range targets {
				got, err := postQuery(ctx, u, q.agent, q.text)
				if err != nil {
					return false, err.Error(), nil
				}
				if d := wants[i].diff(got); d != "" {
					return false, fmt.Sprintf("%s, agent %s, %q: %s", u, q.agent, q.text, d), nil
				}
			}
		}
		return true, "", nil
	})
	for i, q := range questions {
		s.c.logf("%d routers answer %s's %q like the CLI: routes %v, denied %v, %d chunks, %d tokens",
			len(targets), q.agent, q.text, wants[i].MatchedRoutes, wants[i].DeniedSources, len(wants[i].Chunks), wants[i].TotalTokens)
	}
}

// waitRouterReady waits for the samples' ContextRouter to report Ready=True
// for its current generation and returns it.
func (s *scenario) waitRouterReady(t *testing.T, timeout time.Duration) *v1alpha1.ContextRouter {
	t.Helper()
	var router v1alpha1.ContextRouter
	s.c.WaitFor(t, "ContextRouter "+routerName+" Ready", timeout, func(ctx context.Context) (bool, string, error) {
		router = v1alpha1.ContextRouter{}
		if err := s.c.getJSON(ctx, &router, "get", "contextrouter", routerName, "-n", samplesNamespace); err != nil {
			return false, err.Error(), nil
		}
		ready := meta.FindStatusCondition(router.Status.Conditions, "Ready")
		seen, _ := json.Marshal(router.Status)
		return ready != nil && ready.Status == metav1.ConditionTrue && router.Status.ObservedGeneration == router.Generation &&
			router.Status.Bundle != nil && router.Status.ReadyReplicas >= 1, string(seen), nil
	})
	return &router
}

const routerSelector = "app.kubernetes.io/name=contextrouter,app.kubernetes.io/instance=" + routerName + ",app.kubernetes.io/component=router"

// routerPodsNow returns the router's pods if its Deployment has rolled out
// completely (as `kubectl rollout status` judges it) and every pod of it is
// ready; else what it is waiting for. Mid-rollout the expected number of
// ready pods can be a mix of old and new ones.
func (s *scenario) routerPodsNow(ctx context.Context) ([]corev1.Pod, string, error) {
	var d appsv1.Deployment
	if err := s.c.getJSON(ctx, &d, "get", "deployment", routerName, "-n", samplesNamespace); err != nil {
		return nil, "", err
	}
	st := d.Status
	if d.Spec.Replicas == nil || st.ObservedGeneration != d.Generation || st.UpdatedReplicas != *d.Spec.Replicas ||
		st.Replicas != *d.Spec.Replicas || st.AvailableReplicas != *d.Spec.Replicas {
		return nil, fmt.Sprintf("rollout: generation %d observed %d, replicas %d updated %d available %d",
			d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas), nil
	}
	var pods corev1.PodList
	if err := s.c.getJSON(ctx, &pods, "get", "pods", "-n", samplesNamespace, "-l", routerSelector); err != nil {
		return nil, "", err
	}
	ready := 0
	for i := range pods.Items {
		if podReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
			ready++
		}
	}
	if ready != int(*d.Spec.Replicas) || len(pods.Items) != ready {
		return nil, s.podStates(ctx, samplesNamespace, routerSelector), nil
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items, "", nil
}

// routerTargets is routerPodsNow as base URLs.
func (s *scenario) routerTargets(ctx context.Context) ([]string, string, error) {
	pods, waiting, err := s.routerPodsNow(ctx)
	var urls []string
	for _, p := range pods {
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, "8080"))
	}
	return urls, waiting, err
}

// readyRouterPods waits for routerPodsNow to find want pods.
func (s *scenario) readyRouterPods(t *testing.T, want int32) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	s.c.WaitFor(t, fmt.Sprintf("router Deployment rolled out, %d pods ready", want), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		var waiting string
		var err error
		pods, waiting, err = s.routerPodsNow(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return waiting == "" && len(pods) == int(want), fmt.Sprintf("%s (%d pods)", waiting, len(pods)), nil
	})
	return pods
}

func (s *scenario) routerURLs() []string {
	var urls []string
	for _, p := range s.routerPods {
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, "8080"))
	}
	return urls
}

// answer is the part of a query answer the scenario compares.
type answer struct {
	Chunks []struct {
		Content  string         `json:"content"`
		Source   string         `json:"source"`
		Title    string         `json:"title"`
		Path     string         `json:"path"`
		Metadata map[string]any `json:"metadata"`
	} `json:"chunks"`
	Text          string   `json:"text"`
	TotalTokens   int      `json:"total_tokens"`
	WasTruncated  bool     `json:"was_truncated"`
	MatchedRoutes []string `json:"matched_routes"`
	DeniedSources []string `json:"denied_sources"`
	FailedSources []struct {
		Source string `json:"source"`
		Error  string `json:"error"`
	} `json:"failed_sources"`
	RouteErrors []json.RawMessage `json:"route_errors"`
}

// diff names the first difference that matters: which chunks in which
// order with which content, the routes, the denials and the token count.
func (a answer) diff(b answer) string {
	switch {
	case !slices.Equal(a.MatchedRoutes, b.MatchedRoutes):
		return fmt.Sprintf("matched_routes %v, want %v", b.MatchedRoutes, a.MatchedRoutes)
	case !slices.Equal(a.DeniedSources, b.DeniedSources):
		return fmt.Sprintf("denied_sources %v, want %v", b.DeniedSources, a.DeniedSources)
	case len(b.FailedSources) > 0:
		return fmt.Sprintf("failed_sources %+v", b.FailedSources)
	case len(a.Chunks) != len(b.Chunks):
		return fmt.Sprintf("%d chunks (%s), want %d (%s)", len(b.Chunks), b.chunkList(), len(a.Chunks), a.chunkList())
	}
	for i := range a.Chunks {
		x, y := a.Chunks[i], b.Chunks[i]
		if x.Source != y.Source || x.Title != y.Title || x.Path != y.Path || x.Content != y.Content {
			return fmt.Sprintf("chunk %d is %s/%s %q, want %s/%s %q", i, y.Source, y.Path, y.Title, x.Source, x.Path, x.Title)
		}
	}
	if a.TotalTokens != b.TotalTokens || a.Text != b.Text {
		return fmt.Sprintf("total_tokens %d, want %d (or the joined text differs)", b.TotalTokens, a.TotalTokens)
	}
	return ""
}

func (a answer) chunkList() string {
	var parts []string
	for _, c := range a.Chunks {
		parts = append(parts, c.Source+":"+c.Title)
	}
	return strings.Join(parts, "; ")
}

// expectedAnswer is what the quickstart gives outside a cluster: the CLI on
// examples/quickstart, which config/samples mirrors.
func (s *scenario) expectedAnswer(t *testing.T, agent, text string) answer {
	t.Helper()
	return s.cliAnswer(t, filepath.Join(s.root, "examples", "quickstart"), agent, text)
}

// cliAnswer is the CLI's answer on the manifests in dir.
func (s *scenario) cliAnswer(t *testing.T, dir, agent, text string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.cli, "query", "-f", dir, "-a", agent, "-o", "json", text).Output()
	if err != nil {
		t.Fatalf("contextrouter query -f %s -a %s %q: %v", dir, agent, text, err)
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("contextrouter query -o json: %v", err)
	}
	return a
}

// queryRouter posts a query to a router's /v1/query and fails the test
// unless the answer is a 200 with a JSON answer.
func queryRouter(t *testing.T, base, agent, text string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	a, err := postQuery(ctx, base, agent, text)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func postQuery(ctx context.Context, base, agent, text string) (answer, error) {
	status, body, err := PostJSON(ctx, base+"/v1/query", map[string]string{"text": text, "agent": agent})
	if err != nil {
		return answer{}, err
	}
	if status != http.StatusOK {
		return answer{}, fmt.Errorf("POST %s/v1/query: status %d: %s", base, status, body)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return answer{}, fmt.Errorf("POST %s/v1/query: %w", base, err)
	}
	return a, nil
}

// sessionPack writes the example session to one router pod (the samples'
// store is the embedded one, per pod) in two writes over the session API
// and asks for the answer-phase pack: it must be the pack `contextrouter
// session build` makes from the same file, byte for byte.
func (s *scenario) sessionPack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := filepath.Join(s.root, "examples", "sessions", "pto.jsonl")
	want, err := exec.CommandContext(ctx, s.cli, "session", "build", "-f", filepath.Join(s.root, "examples", "quickstart"),
		"--items", file, "--phase", "answer", "-a", "hr-assistant", "-o", "json").Output()
	if err != nil {
		t.Fatalf("contextrouter session build: %v", err)
	}
	var wantPack struct {
		Text  string `json:"text"`
		Stats struct {
			Candidates, Included, Firewalled int
		} `json:"stats"`
	}
	if err := json.Unmarshal(want, &wantPack); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	var facts [][2]string // in file order: a pack lists facts in the order they were set
	var episodes []json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var l struct {
			Fact    *struct{ Key, Value string } `json:"fact"`
			Episode json.RawMessage              `json:"episode"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		switch {
		case l.Fact != nil:
			facts = append(facts, [2]string{l.Fact.Key, l.Fact.Value})
		case l.Episode != nil:
			episodes = append(episodes, l.Episode)
		default:
			items = append(items, json.RawMessage(line))
		}
	}
	urls, waiting, err := s.routerTargets(ctx)
	if err != nil || len(urls) == 0 {
		t.Fatalf("router pods: %v %s", err, waiting)
	}
	base := urls[0] + "/v1/sessions/e2e"
	post := func(url string, body any) []byte {
		t.Helper()
		status, out, err := PostJSON(ctx, url, body)
		if err != nil || status != http.StatusOK {
			t.Fatalf("POST %s: %d %s %v", url, status, out, err)
		}
		return out
	}
	half := len(items) / 2
	post(base+"/items", map[string]any{"agent": "hr-assistant", "items": items[:half]})
	post(base+"/items", map[string]any{"agent": "hr-assistant", "items": items[half:]})
	for _, f := range facts {
		k := f[0]
		body, _ := json.Marshal(map[string]string{"agent": "hr-assistant", "value": f[1]})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, base+"/facts/"+url.PathEscape(k), strings.NewReader(string(body)))
		resp, err := hostClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT fact %s: %v %v", k, resp, err)
		}
		resp.Body.Close()
	}
	for _, e := range episodes {
		var ep map[string]any
		_ = json.Unmarshal(e, &ep)
		ep["agent"] = "hr-assistant"
		post(base+"/episodes", ep)
	}
	var got struct {
		Text  string `json:"text"`
		Stats struct {
			Candidates, Included, Firewalled int
		} `json:"stats"`
	}
	if err := json.Unmarshal(post(base+"/context", map[string]any{"agent": "hr-assistant", "phase": "answer"}), &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != wantPack.Text || got.Stats != wantPack.Stats {
		t.Fatalf("the router pod's pack differs from the CLI's: stats %+v, want %+v\n%s\nwant:\n%s", got.Stats, wantPack.Stats, got.Text, wantPack.Text)
	}
	if status, body, _ := PostJSON(ctx, base+"/context", map[string]any{"agent": "eng-assistant", "phase": "answer"}); status != http.StatusForbidden {
		t.Errorf("another agent's pack: %d %s, want 403", status, body)
	}
	s.c.logf("router pod %s packs session e2e as the CLI does: %d of %d entries, %d firewalled", urls[0], got.Stats.Included, got.Stats.Candidates, got.Stats.Firewalled)
}

func (s *scenario) injectSidecar(t *testing.T) {
	c := s.c
	image := c.Image(t, "agent.tar")
	// No CONTEXTROUTER_URL here: the injected sidecar provides it, and the
	// agent exits without it.
	c.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: %[1]s
  labels: {app: agent, contextrouter.dev/inject: "true"}
  annotations:
    contextrouter.dev/router: %[2]s
    contextrouter.dev/agent: %[3]s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: agent
    image: %[4]s
    imagePullPolicy: Never
    env:
    - {name: AGENT_QUERY, value: %[5]q}
    readinessProbe:
      httpGet: {path: /result, port: 8080}
      periodSeconds: 1
`, samplesNamespace, routerName, injectedAgentName, image, vacationQuestion))
	pod := c.WaitPodReady(t, samplesNamespace, "agent", 2*time.Minute)
	s.agentPod = pod

	if got := pod.Annotations["contextrouter.dev/status"]; got != "injected" {
		t.Errorf("annotation contextrouter.dev/status = %q, want injected", got)
	}
	var sidecar *corev1.Container
	for i, ic := range pod.Spec.InitContainers {
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecar = &pod.Spec.InitContainers[i]
		}
	}
	if sidecar == nil {
		t.Fatalf("no native sidecar (init container with restartPolicy Always) in the pod; init containers: %+v", pod.Spec.InitContainers)
	}
	if sidecar.Image != c.Images["contextrouter.tar"] {
		t.Errorf("sidecar image %s, want the router image %s", sidecar.Image, c.Images["contextrouter.tar"])
	}
	routerURL := ""
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == "CONTEXTROUTER_URL" {
			routerURL = e.Value
		}
	}
	if !strings.HasPrefix(routerURL, "http://127.0.0.1:") {
		t.Errorf("CONTEXTROUTER_URL = %q, want the sidecar on http://127.0.0.1:<port>", routerURL)
	}
	for _, st := range pod.Status.InitContainerStatuses {
		if st.Name == sidecar.Name && (st.State.Running == nil || !st.Ready) {
			t.Errorf("sidecar %s is not running and ready: %+v", st.Name, st.State)
		}
	}

	var r AgentResult
	resultURL := fmt.Sprintf("http://%s/result", net.JoinHostPort(pod.Status.PodIP, "8080"))
	if err := GetJSONURL(context.Background(), resultURL, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK {
		t.Fatalf("the agent's request to %s: status %d, error %q, body %s%s", r.URL, r.Status, r.Error, r.Response, r.Body)
	}
	var got answer
	if err := json.Unmarshal(r.Response, &got); err != nil {
		t.Fatalf("the agent's answer: %v", err)
	}
	// The agent names no agent in its request: the sidecar's pinned
	// identity (the annotation) decides what it may read.
	want := s.expectedAnswer(t, injectedAgentName, vacationQuestion)
	if d := want.diff(got); d != "" {
		t.Errorf("the agent's context through the sidecar differs from the quickstart's for %s: %s", injectedAgentName, d)
	}
	c.logf("agent pod got %d chunks (%d tokens) for %s from the sidecar at %s after %d attempts",
		len(got.Chunks), got.TotalTokens, injectedAgentName, r.URL, r.Attempts)

	// The sidecar speaks for the pod's agent only: a request naming
	// another one is refused.
	var other AgentResult
	otherURL := fmt.Sprintf("http://%s/query?agent=finance-analyst&text=%s", net.JoinHostPort(pod.Status.PodIP, "8080"), url.QueryEscape(budgetQuestion))
	if err := GetJSONURL(context.Background(), otherURL, &other); err != nil {
		t.Fatal(err)
	}
	if other.Status != http.StatusForbidden {
		t.Errorf("a request naming agent finance-analyst through %s's sidecar: status %d, want 403; answer %s%s",
			injectedAgentName, other.Status, other.Response, other.Body)
	}

	// Tools over MCP through the sidecar, with the SDK's client in the
	// agent: the pod's agent may not use the engineering tools, so the
	// shortlist is empty and says why.
	var viaMCP AgentResult
	mcpURL := fmt.Sprintf("http://%s/mcp?tool=find_tools&text=%s", net.JoinHostPort(pod.Status.PodIP, "8080"), url.QueryEscape(rollbackQuestion))
	if err := GetJSONURL(context.Background(), mcpURL, &viaMCP); err != nil {
		t.Fatal(err)
	}
	var shortlist toolsAnswer
	if viaMCP.Error != "" || json.Unmarshal(viaMCP.Response, &shortlist) != nil {
		t.Fatalf("find_tools through %s's sidecar: error %q, answer %s", injectedAgentName, viaMCP.Error, viaMCP.Response)
	}
	if len(shortlist.Tools) != 0 || !slices.Contains(shortlist.DeniedSources, "eng-tools") {
		t.Errorf("find_tools through %s's sidecar: tools %+v, denied %q; want none, eng-tools denied", injectedAgentName, shortlist.Tools, shortlist.DeniedSources)
	}
	s.toolsOverMCP(t)
}

// toolsAnswer is the part of a find_tools answer the scenario checks.
type toolsAnswer struct {
	Tools []struct {
		Name        string `json:"name"`
		Namespace   string `json:"namespace"`
		Source      string `json:"source"`
		SideEffects string `json:"side_effects"`
	} `json:"tools"`
	DeniedSources []string `json:"denied_sources"`
}

// toolsOverMCP asks a router pod's /mcp, as an agent framework's MCP client
// would, for eng-assistant's tools: the shortlist holds only what its tool
// rules allow, and describe_tool gives the schema of one of them.
func (s *scenario) toolsOverMCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.routerURLs()[0] + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("MCP session with %s: %v", s.routerURLs()[0], err)
	}
	defer cs.Close()
	text := func(res *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "find_tools", Arguments: map[string]any{"text": rollbackQuestion, "agent": "eng-assistant"}})
	if err != nil || res.IsError {
		t.Fatalf("find_tools: %v %s", err, text(res))
	}
	var got toolsAnswer
	if err := json.Unmarshal([]byte(text(res)), &got); err != nil || len(got.Tools) == 0 {
		t.Fatalf("find_tools for eng-assistant: %v, %s", err, text(res))
	}
	for _, c := range got.Tools {
		// eng-assistant: at most Write, nothing that pages people.
		if c.SideEffects == string(v1alpha1.SideEffectsDestructive) || c.Name == "open_incident" {
			t.Errorf("eng-assistant got the card of %s.%s (%s)", c.Namespace, c.Name, c.SideEffects)
		}
	}
	first := got.Tools[0].Namespace + "." + got.Tools[0].Name
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "describe_tool", Arguments: map[string]any{"name": first, "agent": "eng-assistant"}})
	if err != nil || res.IsError || !strings.Contains(text(res), `"inputSchema"`) {
		t.Errorf("describe_tool %s: %v %s", first, err, text(res))
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "describe_tool", Arguments: map[string]any{"name": "deploys.rollback_deploy", "agent": "eng-assistant"}})
	if err != nil || !res.IsError {
		t.Errorf("describe_tool of a tool eng-assistant may not use: %v %s", err, text(res))
	}
	s.c.logf("MCP: %d tool cards for eng-assistant (first %s), none through %s's sidecar", len(got.Tools), first, injectedAgentName)
}

// loadTarget is one place the concurrent client queries during a reload.
type loadTarget struct {
	name  string
	query func(ctx context.Context) (answer, error)

	requests, failures atomic.Int64
	changedAt          atomic.Int64 // unix nanos of the first changed answer
	lastOK             atomic.Int64 // unix nanos of the last answer
}

func (s *scenario) hotReload(t *testing.T) {
	c := s.c
	before := s.waitRouterReady(t, time.Minute)
	podsBefore := map[string]string{} // name -> UID
	for _, p := range s.routerPods {
		podsBefore[p.Name] = string(p.UID)
	}
	changed := func(a answer) bool { return slices.Contains(a.MatchedRoutes, changedRouteName) }

	var targets []*loadTarget
	for _, u := range s.routerURLs() {
		targets = append(targets, &loadTarget{name: "router " + u, query: func(ctx context.Context) (answer, error) {
			return postQuery(ctx, u, "hr-assistant", reloadQuestion)
		}})
	}
	var svc corev1.Service
	c.GetJSON(t, &svc, "get", "service", routerName, "-n", samplesNamespace)
	serviceURL := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80")
	targets = append(targets, &loadTarget{name: "Service " + serviceURL, query: func(ctx context.Context) (answer, error) {
		return postQuery(ctx, serviceURL, "hr-assistant", reloadQuestion)
	}})
	agentQuery := fmt.Sprintf("http://%s/query?text=%s", net.JoinHostPort(s.agentPod.Status.PodIP, "8080"), url.QueryEscape(reloadQuestion))
	targets = append(targets, &loadTarget{name: "sidecar via the agent", query: func(ctx context.Context) (answer, error) {
		var r AgentResult
		if err := GetJSONURL(ctx, agentQuery, &r); err != nil {
			return answer{}, err
		}
		if r.Status != http.StatusOK {
			return answer{}, fmt.Errorf("sidecar: status %d %s %s%s", r.Status, r.Error, r.Response, r.Body)
		}
		var a answer
		err := json.Unmarshal(r.Response, &a)
		return a, err
	}})

	// Every target answers the old way before the change.
	for _, tg := range targets {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		a, err := tg.query(ctx)
		cancel()
		if err != nil {
			t.Fatalf("%s before the change: %v", tg.name, err)
		}
		if changed(a) {
			t.Fatalf("%s: route %s already matches %q before the change: %v", tg.name, changedRouteName, reloadQuestion, a.MatchedRoutes)
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var failures []string
	for _, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				a, err := tg.query(qctx)
				cancel()
				if ctx.Err() != nil {
					return // stopped mid-request: not the router's failure
				}
				tg.requests.Add(1)
				if err == nil {
					tg.lastOK.Store(time.Now().UnixNano())
				}
				if err != nil {
					tg.failures.Add(1)
					failMu.Lock()
					msg := fmt.Sprintf("%s: %v", tg.name, err)
					if len(failures) < 10 && !slices.Contains(failures, msg) {
						failures = append(failures, msg)
					}
					failMu.Unlock()
				} else if changed(a) {
					tg.changedAt.CompareAndSwap(0, time.Now().UnixNano())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	applied := time.Now()
	for _, tg := range targets {
		tg.lastOK.Store(applied.UnixNano())
	}
	c.Apply(t, s.changedRoute(t), "-n", samplesNamespace)
	c.logf("applied route %s with %q added to its condition; %d clients querying", changedRouteName, reloadWord, len(targets))
	waitErr := c.waitFor(context.Background(), "every router and the sidecar answer with the changed route", 2*time.Minute, func(context.Context) (bool, string, error) {
		var waiting []string
		for _, tg := range targets {
			if tg.changedAt.Load() != 0 {
				continue
			}
			// A router that stopped answering will not change its answer:
			// its pod is gone. No use waiting out the timeout.
			if silent := time.Since(time.Unix(0, tg.lastOK.Load())); silent > 20*time.Second {
				return false, "", fmt.Errorf("%s has not answered for %s and never answered with the changed route", tg.name, silent.Round(time.Second))
			}
			waiting = append(waiting, tg.name)
		}
		return len(waiting) == 0, "still the old answer: " + strings.Join(waiting, ", "), nil
	})
	if waitErr == nil {
		// The clients go on until the router has settled on the new bundle
		// (whatever the operator does with its Deployment for it) and a
		// little longer, so that a rollout's failures are counted too.
		waitErr = c.waitFor(context.Background(), "router settled on the new bundle", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
			var r v1alpha1.ContextRouter
			if err := c.getJSON(ctx, &r, "get", "contextrouter", routerName, "-n", samplesNamespace); err != nil {
				return false, err.Error(), nil
			}
			if r.Status.Bundle == nil || r.Status.Bundle.Hash == before.Status.Bundle.Hash {
				return false, "status still shows the old bundle", nil
			}
			_, waiting, err := s.routerPodsNow(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			return waiting == "", waiting, nil
		})
		time.Sleep(2 * time.Second)
	}
	stop()
	wg.Wait()

	// Everything the clients saw is reported, also when the wait failed:
	// failed requests tell a rollout from a reload.
	if waitErr != nil {
		t.Error(waitErr)
	}
	for _, tg := range targets {
		when := "never"
		if at := tg.changedAt.Load(); at != 0 {
			when = fmt.Sprintf("%.1fs after the apply", time.Duration(at-applied.UnixNano()).Seconds())
		}
		c.logf("%s: %d requests, %d failed, changed answer %s", tg.name, tg.requests.Load(), tg.failures.Load(), when)
		if tg.requests.Load() < 10 {
			t.Errorf("%s: only %d requests during the reload: the client did not exercise it", tg.name, tg.requests.Load())
		}
		if tg.failures.Load() > 0 {
			t.Errorf("%s: %d of %d requests failed during the reload", tg.name, tg.failures.Load(), tg.requests.Load())
		}
	}
	if len(failures) > 0 {
		t.Errorf("distinct failures (up to 10):\n  %s", strings.Join(failures, "\n  "))
	}

	after := s.waitRouterReady(t, time.Minute)
	if after.Status.Bundle.Hash == before.Status.Bundle.Hash {
		t.Errorf("bundle hash stayed %s after the route changed", after.Status.Bundle.Hash)
	}
	// The running engines reloaded: the same pods, not restarted.
	pods := s.readyRouterPods(t, after.Status.ReadyReplicas)
	for _, p := range pods {
		if uid, ok := podsBefore[p.Name]; !ok || uid != string(p.UID) {
			t.Errorf("router pod %s was not there before the change (before: %v): the change rolled the pods instead of reloading them", p.Name, podsBefore)
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount > 0 {
				t.Errorf("router pod %s container %s restarted %d times", p.Name, st.Name, st.RestartCount)
			}
		}
	}
	s.routerPods = pods
}

// changedRoute is config/samples' hr-policies route with reloadWord added to
// its condition, as a user would edit and re-apply it.
func (s *scenario) changedRoute(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "config", "samples", "routes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, doc := editRoute(t, string(b), changedRouteName, withReloadWord)
	return doc
}

// withReloadWord is a route condition that also matches reloadWord.
func withReloadWord(when string) string {
	return fmt.Sprintf("(%s) || containsAnyWord(text, [%q])", when, reloadWord)
}

// editRoute sets the condition of route name in routes, a multi-document
// YAML file of ContextRoutes, to when(its condition). It returns the whole
// file with that document rewritten (the others as they were) and the
// rewritten document alone.
func editRoute(t *testing.T, routes, name string, when func(string) string) (file, doc string) {
	t.Helper()
	docs := strings.Split(routes, "\n---")
	for i, d := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatalf("routes: %v", err)
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil || md["name"] != name {
			continue
		}
		spec := obj["spec"].(map[string]any)
		old, _ := spec["when"].(string)
		spec["when"] = when(old)
		out, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = "\n" + string(out)
		return strings.Join(docs, "\n---"), string(out)
	}
	t.Fatalf("routes have no route %s", name)
	return "", ""
}

func (s *scenario) gitSource(t *testing.T) {
	c := s.c
	repo := newGitServer(t, c.NodeIP, "wiki")
	first := repo.commit(t, "zebra crossing v1", map[string]string{
		"docs/zebra.md": "# Zebra crossings\n\n## Gate 4\n\nThe zebra crossing at gate 4 is painted blue.\n",
	})
	c.Apply(t, fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: %[1]s}
spec:
  type: GitRepo
  description: Site notes served from a git repository on the host.
  gitRepo:
    url: %[2]s
    ref: main
    include: ["docs/**/*.md"]
    interval: 5s
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: wiki}
spec:
  parentRefs: [{name: %[3]s}]
  when: containsAnyWord(text, ["zebra", "gate"])
  sources: [{name: %[1]s}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: %[4]s}
spec:
  parentRefs: [{name: %[3]s}]
  agents: [%[4]s]
  allowSources: [system-prompt, %[1]s]
  default: Deny
  maxSensitivity: Internal
`, gitSourceName, repo.URL, routerName, gitAgent), "-n", samplesNamespace)
	c.logf("applied GitRepo source %s for %s at commit %s", gitSourceName, repo.URL, first[:12])

	s.waitGitAnswer(t, "painted blue", first)
	second := repo.commit(t, "zebra crossing v2", map[string]string{
		"docs/zebra.md": "# Zebra crossings\n\n## Gate 4\n\nThe zebra crossing at gate 4 was repainted green in November.\n",
	})
	c.logf("committed %s to the repository", second[:12])
	s.waitGitAnswer(t, "repainted green", second)
}

// waitGitAnswer waits until every router pod answers the git question with
// a chunk of the git source that contains want (and, when the answer says,
// comes from commit). Adding the source may roll the pods, so they are
// looked up anew on every poll.
func (s *scenario) waitGitAnswer(t *testing.T, want, commit string) {
	t.Helper()
	s.c.WaitFor(t, fmt.Sprintf("every router answers %q from commit %s", want, commit[:12]), 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		urls, waiting, err := s.routerTargets(ctx)
		if err != nil || waiting != "" {
			return false, waiting + fmt.Sprint(err), nil
		}
		for _, u := range urls {
			a, err := postQuery(ctx, u, gitAgent, gitQuestion)
			if err != nil {
				return false, err.Error(), nil
			}
			found := false
			for _, ch := range a.Chunks {
				if ch.Source != gitSourceName || !strings.Contains(ch.Content, want) {
					continue
				}
				if got, ok := ch.Metadata["commit"].(string); ok && got != commit {
					return false, fmt.Sprintf("%s: chunk from commit %s", u, got), nil
				}
				found = true
			}
			if !found {
				seen, _ := json.Marshal(a)
				return false, fmt.Sprintf("%s: %s", u, seen), nil
			}
		}
		return true, "", nil
	})
}

func (s *scenario) uninstall(t *testing.T) {
	c := s.c
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bundleCM := ""
	var router v1alpha1.ContextRouter
	c.GetJSON(t, &router, "get", "contextrouter", routerName, "-n", samplesNamespace)
	if router.Status.Bundle != nil {
		bundleCM = router.Status.Bundle.ConfigMapName
	}
	if _, err := c.Kubectl(ctx, "delete", "contextrouter", routerName, "-n", samplesNamespace, "--wait=true", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	children := []string{"deployment/" + routerName, "service/" + routerName}
	if bundleCM != "" {
		children = append(children, "configmap/"+bundleCM)
	}
	selector := "app.kubernetes.io/instance=" + routerName + ",app.kubernetes.io/component=router"
	c.WaitFor(t, "the router's Deployment, Service, bundle and pods are gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		out, err := c.Kubectl(ctx, append([]string{"get", "-n", samplesNamespace, "--ignore-not-found", "-o", "name"}, children...)...)
		if err != nil {
			return false, err.Error(), nil
		}
		pods, err := c.Kubectl(ctx, "get", "pods", "-n", samplesNamespace, "-l", selector, "-o", "name")
		if err != nil {
			return false, err.Error(), nil
		}
		left := strings.TrimSpace(out + pods)
		return left == "", "left: " + left, nil
	})

	out := s.runHelm(t, 3*time.Minute, "uninstall", releaseName, "--namespace", releaseNamespace)
	c.logf("helm uninstall: %s", strings.TrimSpace(out))
	c.WaitFor(t, "the operator's pods and webhook configurations are gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		left, err := c.Kubectl(ctx, "get", "pods", "-n", releaseNamespace, "-o", "name")
		if err != nil {
			return false, err.Error(), nil
		}
		hooks, err := c.Kubectl(ctx, "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations",
			"-l", "app.kubernetes.io/instance="+releaseName, "-o", "name")
		if err != nil {
			return false, err.Error(), nil
		}
		all := strings.TrimSpace(left + hooks)
		return all == "", "left: " + all, nil
	})
	// Without the webhooks pods are created as they are: no sidecar.
	c.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: after-uninstall
  namespace: %s
  labels: {contextrouter.dev/inject: "true"}
  annotations: {contextrouter.dev/router: %s}
spec:
  containers:
  - {name: pause, image: %s, imagePullPolicy: Never}
`, samplesNamespace, routerName, c.Images["pause.tar"]))
	var pod corev1.Pod
	c.GetJSON(t, &pod, "get", "pod", "after-uninstall", "-n", samplesNamespace)
	if len(pod.Spec.InitContainers) > 0 || pod.Annotations["contextrouter.dev/status"] != "" {
		t.Errorf("a pod created after the uninstall was still injected: %d init containers, annotations %v", len(pod.Spec.InitContainers), pod.Annotations)
	}
}

func (s *scenario) teardown(t *testing.T) {
	if err := s.c.Down(); err != nil {
		t.Fatalf("teardown: %v", err)
	}
	for _, leftover := range hostLeftovers(s.c.RunDir) {
		t.Errorf("after teardown: %s", leftover)
	}
}
