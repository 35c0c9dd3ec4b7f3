//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/test/e2e/cluster"
)

// Flux as `make flux-binaries` builds it: FLUX_VERSION in the Makefile.
const (
	fluxVersion   = "v1.9.0"
	fluxNamespace = "flux-system"
	// sourceControllerIP is the fixed ClusterIP of source-controller's
	// Service. The cluster runs no DNS, so kustomize-controller cannot
	// resolve the artifact URL source-controller advertises by default
	// (source-controller.flux-system.svc.cluster.local.); it advertises this
	// address instead. It lies in the low part of the Service range, which
	// the API server keeps for fixed addresses.
	sourceControllerIP = "10.96.0.90"
	gitopsRepo         = "platform"       // the GitRepository and the repository
	gitopsKustomize    = samplesNamespace // the Kustomization
	gitopsPath         = "acme"           // folder of the repository it applies
	// zebraDoc is the document the change adds to hr-docs; zebraMarker is
	// in its text and in no other.
	zebraDoc    = "zebra-crossings.md"
	zebraMarker = "zebra crossing in front of the Munich office"
)

// TestGitOpsFlux runs the samples through a real Flux: source-controller
// and kustomize-controller (built from their Go modules) apply a git
// repository holding a kustomization of config/samples, wait for our
// objects' health, roll a commit out, refuse a broken commit with the
// webhook's message while the router keeps serving, and recover on a
// revert. A client queries the router's Service from the first commit on,
// and no query may fail.
func TestGitOpsFlux(t *testing.T) {
	s := &scenario{}
	s.checkPrerequisites(t)
	g := &gitops{s: s}
	g.checkPrerequisites(t)
	s.c = Up(t)
	// The repository lives as long as the test, not one step.
	g.repo = newGitServer(t, s.c.NodeIP, gitopsRepo)
	t.Cleanup(g.stopClient)
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"helm install: the operator runs and serves its webhooks", s.installChart},
		{"Flux: source-controller and kustomize-controller run", g.installFlux},
		{"sync: the Kustomization is Ready once our objects are, and the router answers like the quickstart", g.sync},
		{"rollout: a commit changing a route and a document reaches the router", g.rollout},
		{"broken commit: Flux reports the webhook's message, the router keeps serving", g.brokenCommit},
		{"revert: Ready again at the new revision, no failed query throughout", g.revert},
		{"deleting the Kustomization prunes the router", g.prune},
		{"teardown leaves the host clean", s.teardown},
	}
	for _, step := range steps {
		if !t.Run(step.name, step.run) {
			t.Fatalf("step %q failed; the later steps depend on it", step.name)
		}
		s.c.CheckRunning(t)
	}
	g.logTimings()
}

type gitops struct {
	s       *scenario
	fluxDir string // bin/flux/<version>
	repo    *gitServer

	// The files of the last good commit (path -> content), the expected
	// answer to reloadQuestion once the change is out, and the commits.
	good       map[string]string
	changed    answer
	goodCommit string

	client  *queryClient
	timings []string
}

func (g *gitops) checkPrerequisites(t *testing.T) {
	g.fluxDir = filepath.Join(g.s.root, "bin", "flux", fluxVersion)
	paths := map[string]string{}
	for _, c := range []string{"source-controller", "kustomize-controller"} {
		paths[filepath.Join(imagesDir(g.s.root), c+".tar")] = "make flux-images"
		for _, dir := range []string{"crd", "rbac", "manager"} {
			paths[filepath.Join(g.fluxDir, "config", c, dir)] = "make flux-binaries"
		}
	}
	if missing := missingPaths(paths); len(missing) > 0 {
		t.Fatalf("TestGitOpsFlux needs Flux %s as `make e2e` builds it; missing:\n  %s", fluxVersion, strings.Join(missing, "\n  "))
	}
}

// installFlux applies the controllers' own config/ (CRDs, RBAC,
// Deployments, source-controller's Service) with a kustomization that only
// points them at the imported images and at the fixed artifact address.
func (g *gitops) installFlux(t *testing.T) {
	c := g.s.c
	dir := c.path("flux")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// kustomize accepts relative paths only.
	config, err := filepath.Rel(dir, filepath.Join(g.fluxDir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var resources, images []string
	for _, ctl := range []string{"source-controller", "kustomize-controller"} {
		for _, sub := range []string{"crd", "rbac", "manager"} {
			resources = append(resources, "- "+filepath.Join(config, ctl, sub))
		}
		repo, tag := cluster.SplitImage(c.Image(t, ctl+".tar"))
		images = append(images, fmt.Sprintf("- {name: fluxcd/%s, newName: %s, newTag: %s}", ctl, repo, tag))
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %[1]s
resources:
%[2]s
images:
%[3]s
patches:
- target: {kind: Deployment}
  patch: |
    - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
- target: {kind: Service, name: source-controller}
  patch: |
    - {op: add, path: /spec/clusterIP, value: %[4]s}
- target: {kind: Deployment, name: source-controller}
  patch: |
    - op: replace
      path: /spec/template/spec/containers/0/args
      value:
      - --watch-all-namespaces
      - --log-level=info
      - --log-encoding=json
      - --enable-leader-election
      - --storage-path=/data
      - --storage-adv-addr=%[4]s
`, fluxNamespace, strings.Join(resources, "\n"), strings.Join(images, "\n"), sourceControllerIP)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Namespace(t, fluxNamespace)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Server-side: the CRDs are too large for the last-applied annotation.
	out, err := c.Kubectl(ctx, "apply", "--server-side", "-k", dir)
	if err != nil {
		t.Fatal(err)
	}
	c.logf("Flux %s applied from its modules' config/: %d objects", fluxVersion, strings.Count(strings.TrimSpace(out), "\n")+1)
	for _, d := range []string{"source-controller", "kustomize-controller"} {
		if err := c.WaitDeploymentAvailable(ctx, fluxNamespace, d, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		c.logf("Deployment %s/%s available", fluxNamespace, d)
	}
}

// sampleFiles is config/samples as the repository holds it: the YAML files
// under gitopsPath and a kustomization listing them.
func (g *gitops) sampleFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(g.s.root, "config", "samples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("config/samples: no YAML files (%v)", err)
	}
	files := map[string]string{}
	var list []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[gitopsPath+"/"+filepath.Base(p)] = string(b)
		list = append(list, "- "+filepath.Base(p))
	}
	files[gitopsPath+"/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n" +
		strings.Join(list, "\n") + "\n"
	return files
}

// kustomization is the part of a Flux Kustomization the scenario reads.
type kustomization struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Status   struct {
		ObservedGeneration    int64              `json:"observedGeneration"`
		Conditions            []metav1.Condition `json:"conditions"`
		LastAppliedRevision   string             `json:"lastAppliedRevision"`
		LastAttemptedRevision string             `json:"lastAttemptedRevision"`
		Inventory             *struct {
			Entries []struct {
				ID string `json:"id"`
			} `json:"entries"`
		} `json:"inventory"`
	} `json:"status"`
}

func (k *kustomization) ready() *metav1.Condition {
	return meta.FindStatusCondition(k.Status.Conditions, "Ready")
}

// fluxLine is the Kustomization as `flux get kustomizations` prints it.
func (k *kustomization) fluxLine() string {
	status, msg := "Unknown", ""
	if r := k.ready(); r != nil {
		status, msg = string(r.Status), r.Message
	}
	return fmt.Sprintf("NAME\tREVISION\tSUSPENDED\tREADY\tMESSAGE\n%s\t%s\tFalse\t%s\t%s",
		k.Metadata.Name, k.Status.LastAppliedRevision, status, msg)
}

// fluxRevision is how Flux names a commit of branch main.
func fluxRevision(commit string) string { return "main@sha1:" + commit }

func (g *gitops) getKustomization(ctx context.Context) (*kustomization, error) {
	var k kustomization
	err := g.s.c.getJSON(ctx, &k, "get", "kustomizations.kustomize.toolkit.fluxcd.io", gitopsKustomize, "-n", fluxNamespace)
	return &k, err
}

// waitKustomization waits until the Kustomization has judged commit and
// its Ready condition has status want, and returns it with the time taken.
func (g *gitops) waitKustomization(t *testing.T, what, commit string, want metav1.ConditionStatus, timeout time.Duration, each func(context.Context, *kustomization) error) (*kustomization, time.Duration) {
	t.Helper()
	start := time.Now()
	var k *kustomization
	var seen []string // distinct Ready messages on the way, for the log
	g.s.c.WaitFor(t, what, timeout, func(ctx context.Context) (bool, string, error) {
		var err error
		if k, err = g.getKustomization(ctx); err != nil {
			return false, err.Error(), nil
		}
		r := k.ready()
		if r != nil {
			msg := string(r.Status) + " " + r.Reason + ": " + r.Message
			if !slices.Contains(seen, msg) {
				seen = append(seen, msg)
			}
		}
		if each != nil {
			if err := each(ctx, k); err != nil {
				return false, "", err
			}
		}
		// Ready=True is the commit's only once it is the applied revision:
		// the attempted one moves first, while Ready still tells of the
		// revision before.
		judged := k.Status.LastAttemptedRevision == fluxRevision(commit)
		if want == metav1.ConditionTrue {
			judged = judged && k.Status.LastAppliedRevision == fluxRevision(commit)
		}
		done := r != nil && r.Status == want && k.Status.ObservedGeneration == k.Metadata.Generation && judged
		return done, k.fluxLine(), nil
	})
	took := time.Since(start)
	g.s.c.logf("Kustomization %s on the way: %s", gitopsKustomize, strings.Join(seen, " | "))
	return k, took
}

// ourObjectsReady returns which of the objects of the samples (every kind
// of ours in the namespace) are not Ready for their current generation.
func (g *gitops) ourObjectsNotReady(ctx context.Context) ([]string, error) {
	var list struct {
		Items []struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Status   struct {
				ObservedGeneration int64              `json:"observedGeneration"`
				Conditions         []metav1.Condition `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := g.s.c.getJSON(ctx, &list, "get", ourKinds, "-n", samplesNamespace); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return []string{"none of our objects exist"}, nil
	}
	var notReady []string
	for _, o := range list.Items {
		r := meta.FindStatusCondition(o.Status.Conditions, "Ready")
		if r == nil || r.Status != metav1.ConditionTrue || o.Status.ObservedGeneration != o.Metadata.Generation {
			notReady = append(notReady, fmt.Sprintf("%s/%s (%v)", o.Kind, o.Metadata.Name, r))
		}
	}
	return notReady, nil
}

// ourKinds are the five kinds, for kubectl get.
const ourKinds = "contextrouters.contextrouter.dev,contextroutes.contextrouter.dev,contextsources.contextrouter.dev," +
	"agentpermissions.contextrouter.dev,contextclassifiers.contextrouter.dev"

func (g *gitops) sync(t *testing.T) {
	c := g.s.c
	c.Namespace(t, samplesNamespace)
	g.good = g.sampleFiles(t)
	first := g.repo.commit(t, "the quickstart samples", g.good)
	c.Apply(t, fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  url: %[3]s
  ref: {branch: main}
  interval: 5s
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: %[4]s, namespace: %[2]s}
spec:
  sourceRef: {kind: GitRepository, name: %[1]s}
  path: ./%[5]s
  targetNamespace: %[6]s
  prune: true
  wait: true
  timeout: 3m
  interval: 10m
  retryInterval: 5s
`, gitopsRepo, fluxNamespace, g.repo.URL, gitopsKustomize, gitopsPath, samplesNamespace))
	c.logf("applied GitRepository %s (%s at %s) and Kustomization %s (wait: true)", gitopsRepo, g.repo.URL, first[:12], gitopsKustomize)

	// While Flux waits, our objects settle; the moment it says Ready, every
	// one of them must already be Ready: kstatus read our conditions.
	k, took := g.waitKustomization(t, "Kustomization "+gitopsKustomize+" Ready at the first commit", first, metav1.ConditionTrue, 4*time.Minute,
		func(ctx context.Context, k *kustomization) error {
			if r := k.ready(); r == nil || r.Status != metav1.ConditionTrue {
				return nil
			}
			notReady, err := g.ourObjectsNotReady(ctx)
			if err != nil {
				return nil // asked again on the next poll
			}
			if len(notReady) > 0 {
				return fmt.Errorf("Flux reports Ready while these are not: %s", strings.Join(notReady, ", "))
			}
			return nil
		})
	if k.Status.LastAppliedRevision != fluxRevision(first) {
		t.Errorf("lastAppliedRevision %s, want %s", k.Status.LastAppliedRevision, fluxRevision(first))
	}
	kinds := map[string]int{}
	for _, e := range k.Status.Inventory.Entries {
		// namespace_name_group_kind
		parts := strings.Split(e.ID, "_")
		kinds[parts[len(parts)-1]]++
	}
	for _, kind := range []string{"ContextRouter", "ContextRoute", "ContextSource", "AgentPermission", "ContextClassifier", "ConfigMap"} {
		if kinds[kind] == 0 {
			t.Errorf("the Kustomization's inventory has no %s: %v", kind, kinds)
		}
	}
	g.timing("sync: GitRepository and Kustomization applied -> Ready (wait: true, router rolled out)", took)
	c.logf("inventory: %v", kinds)
	g.goodCommit = first
	g.s.checkSampleAnswers(t)
}

// changedQuickstart is examples/quickstart with the change the rollout
// step commits: the route hr-policies also matches reloadWord, and hr-docs
// gets zebraDoc. The CLI's answers on it are what the cluster must give.
func (g *gitops) changedQuickstart(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "quickstart")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(g.s.root, "examples", "quickstart"))); err != nil {
		t.Fatal(err)
	}
	routes := filepath.Join(dir, "routes.yaml")
	b, err := os.ReadFile(routes)
	if err != nil {
		t.Fatal(err)
	}
	file, _ := editRoute(t, string(b), changedRouteName, withReloadWord)
	for p, content := range map[string]string{routes: file, filepath.Join(dir, "docs", "hr", zebraDoc): zebraDocText} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const zebraDocText = `# Zebra crossings

Owner: Facilities. Last reviewed: 3 March 2026.

The ` + zebraMarker + ` is the only safe way across Leopoldstrasse: use it, not the car park exit.
`

// changedFiles is files with the rollout step's change.
func (g *gitops) changedFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	routes := gitopsPath + "/routes.yaml"
	out[routes], _ = editRoute(t, files[routes], changedRouteName, withReloadWord)
	cmPath := gitopsPath + "/configmap-hr-docs.yaml"
	var cm map[string]any
	if err := yaml.Unmarshal([]byte(files[cmPath]), &cm); err != nil {
		t.Fatalf("%s: %v", cmPath, err)
	}
	cm["data"].(map[string]any)[zebraDoc] = zebraDocText
	b, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	out[cmPath] = string(b)
	return out
}

func (g *gitops) rollout(t *testing.T) {
	c := g.s.c
	g.changed = g.s.cliAnswer(t, g.changedQuickstart(t), "hr-assistant", reloadQuestion)
	if !g.changed.mentions(zebraMarker) {
		t.Fatalf("the CLI on the changed quickstart does not answer %q with %s: %s", reloadQuestion, zebraDoc, g.changed.chunkList())
	}
	before := g.s.cliAnswer(t, filepath.Join(g.s.root, "examples", "quickstart"), "hr-assistant", reloadQuestion)
	if before.mentions(zebraMarker) || slices.Contains(before.MatchedRoutes, changedRouteName) {
		t.Fatalf("the quickstart already answers %q with the change: %v", reloadQuestion, before.MatchedRoutes)
	}

	g.client = startQueryClient(g.s.serviceURL(t), "hr-assistant", reloadQuestion, func(a answer) bool { return a.mentions(zebraMarker) })
	// The client must see the old answer first.
	c.WaitFor(t, "the querying client gets answers", 30*time.Second, func(context.Context) (bool, string, error) {
		return g.client.ok.Load() >= 5, fmt.Sprintf("%d answers", g.client.ok.Load()), nil
	})
	if at := g.client.changedAt.Load(); at != 0 {
		t.Fatalf("the router answered with %s before the commit", zebraDoc)
	}

	g.good = g.changedFiles(t, g.good)
	committed := time.Now()
	commit := g.repo.commit(t, "hr-policies: zebra crossings", g.good)
	c.logf("committed %s: route %s matches %q, hr-docs has %s", commit[:12], changedRouteName, reloadWord, zebraDoc)
	k, took := g.waitKustomization(t, "Kustomization Ready at the change", commit, metav1.ConditionTrue, 4*time.Minute, nil)
	if k.Status.LastAppliedRevision != fluxRevision(commit) {
		t.Errorf("lastAppliedRevision %s, want %s", k.Status.LastAppliedRevision, fluxRevision(commit))
	}
	g.timing("rollout: commit -> Kustomization Ready at the new revision", took)
	c.WaitFor(t, "the Service answers with "+zebraDoc, 2*time.Minute, func(context.Context) (bool, string, error) {
		return g.client.changedAt.Load() != 0, fmt.Sprintf("%d answers, %d failed", g.client.ok.Load(), g.client.failed.Load()), nil
	})
	g.timing("rollout: commit -> first answer with the new document through the Service", time.Duration(g.client.changedAt.Load()-committed.UnixNano()))
	g.s.waitAnswers(t, "every router pod and the Service answer like the CLI on the changed quickstart",
		[]question{{"hr-assistant", reloadQuestion}}, []answer{g.changed})
	g.timing("rollout: commit -> every router pod answers like the CLI", time.Since(committed))
	g.goodCommit = commit
}

// brokenCondition is a CEL condition that does not parse.
func brokenCondition(when string) string { return "(" + when + ") || text.startsWith(" }

func (g *gitops) brokenCommit(t *testing.T) {
	c := g.s.c
	broken := map[string]string{}
	for k, v := range g.good {
		broken[k] = v
	}
	routes := gitopsPath + "/routes.yaml"
	broken[routes], _ = editRoute(t, g.good[routes], changedRouteName, brokenCondition)
	commit := g.repo.commit(t, "hr-policies: a condition that does not parse", broken)
	c.logf("committed %s: route %s with a CEL syntax error", commit[:12], changedRouteName)
	k, took := g.waitKustomization(t, "Kustomization not Ready at the broken commit", commit, metav1.ConditionFalse, 3*time.Minute, nil)
	g.timing("broken commit: commit -> Kustomization Ready=False with the webhook's message", took)
	r := k.ready()
	c.logf("what Flux reports (flux get kustomizations):\n%s\nReady reason %s", k.fluxLine(), r.Reason)
	// The validating webhook's located message, through Flux: the object,
	// the field and CEL's own parser message.
	for _, want := range []string{"ContextRoute/" + samplesNamespace + "/" + changedRouteName, "spec.when", "Syntax error", "denied the request"} {
		if !strings.Contains(r.Message, want) {
			t.Errorf("the Kustomization's Ready message does not contain %q: %s", want, r.Message)
		}
	}
	if k.Status.LastAppliedRevision != fluxRevision(g.goodCommit) {
		t.Errorf("lastAppliedRevision %s, want the last good %s", k.Status.LastAppliedRevision, fluxRevision(g.goodCommit))
	}
	// Nothing of the broken commit reached the cluster: the route keeps
	// its good condition and the routers the good answer.
	var route struct {
		Spec struct {
			When string `json:"when"`
		} `json:"spec"`
	}
	c.GetJSON(t, &route, "get", "contextroute", changedRouteName, "-n", samplesNamespace)
	if strings.Contains(route.Spec.When, "text.startsWith(") || !strings.Contains(route.Spec.When, reloadWord) {
		t.Errorf("route %s in the cluster has the condition %q, want the last good one", changedRouteName, route.Spec.When)
	}
	g.s.waitAnswers(t, "every router pod and the Service still answer with the last good configuration",
		[]question{{"hr-assistant", reloadQuestion}}, []answer{g.changed})
	if notReady, err := g.ourObjectsNotReady(context.Background()); err != nil || len(notReady) > 0 {
		t.Errorf("after the broken commit, not Ready: %v %v", notReady, err)
	}
}

func (g *gitops) revert(t *testing.T) {
	c := g.s.c
	committed := time.Now()
	commit := g.repo.commit(t, "Revert \"hr-policies: a condition that does not parse\"", g.good)
	c.logf("committed %s: the revert", commit[:12])
	k, took := g.waitKustomization(t, "Kustomization Ready at the revert", commit, metav1.ConditionTrue, 3*time.Minute, nil)
	g.timing("recovery: revert commit -> Kustomization Ready at the new revision", took)
	if k.Status.LastAppliedRevision != fluxRevision(commit) {
		t.Errorf("lastAppliedRevision %s, want %s", k.Status.LastAppliedRevision, fluxRevision(commit))
	}
	g.s.waitAnswers(t, "every router pod and the Service answer like the CLI on the changed quickstart",
		[]question{{"hr-assistant", reloadQuestion}}, []answer{g.changed})
	g.timing("recovery: revert commit -> routers checked", time.Since(committed))
	g.goodCommit = commit

	cl := g.client
	g.stopClient()
	c.logf("the client queried the Service %d times from before the change to after the revert: %d failed", cl.ok.Load()+cl.failed.Load(), cl.failed.Load())
	if cl.ok.Load() < 50 {
		t.Errorf("only %d answers: the client did not query throughout", cl.ok.Load())
	}
	if n := cl.failed.Load(); n > 0 {
		t.Errorf("%d queries failed; first failures:\n  %s", n, strings.Join(cl.failures(), "\n  "))
	}
}

// prune deletes the Kustomization: with prune: true Flux deletes what it
// applied, and the operator removes the router's Deployment and Service.
func (g *gitops) prune(t *testing.T) {
	c := g.s.c
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "delete", "kustomizations.kustomize.toolkit.fluxcd.io", gitopsKustomize, "-n", fluxNamespace, "--timeout=2m"); err != nil {
		t.Fatal(err)
	}
	c.WaitFor(t, "our objects, the router's Deployment, Service and pods are gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		out, err := c.Kubectl(ctx, "get", ourKinds+",deployments,services,configmaps,pods", "-n", samplesNamespace, "-o", "name")
		if err != nil {
			return false, err.Error(), nil
		}
		var left []string
		for _, name := range strings.Fields(out) {
			// The API server's CA ConfigMap is in every namespace.
			if name != "configmap/kube-root-ca.crt" {
				left = append(left, name)
			}
		}
		return len(left) == 0, "left: " + strings.Join(left, ", "), nil
	})
}

func (g *gitops) timing(what string, d time.Duration) {
	line := fmt.Sprintf("%-90s %6.1fs", what, d.Seconds())
	g.timings = append(g.timings, line)
	g.s.c.logf("timing: %s", line)
}

func (g *gitops) logTimings() {
	g.s.c.logf("GitOps timings (Flux %s):\n  %s", fluxVersion, strings.Join(g.timings, "\n  "))
}

func (g *gitops) stopClient() {
	if g.client != nil {
		g.client.stop()
		g.client = nil
	}
}

// mentions reports whether a chunk of the answer contains s.
func (a answer) mentions(s string) bool {
	for _, c := range a.Chunks {
		if strings.Contains(c.Content, s) {
			return true
		}
	}
	return false
}

// queryClient asks one question over and over until stopped, counting the
// answers and the failures (an error or a status other than 200) and
// noting when an answer first satisfied changed.
type queryClient struct {
	ok, failed atomic.Int64
	changedAt  atomic.Int64 // unix nanos

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []string
}

func startQueryClient(base, agent, text string, changed func(answer) bool) *queryClient {
	ctx, cancel := context.WithCancel(context.Background())
	q := &queryClient{cancel: cancel}
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		for ctx.Err() == nil {
			qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
			a, err := postQuery(qctx, base, agent, text)
			qcancel()
			if ctx.Err() != nil {
				return // stopped mid-request: not the router's failure
			}
			if err != nil {
				q.failed.Add(1)
				q.mu.Lock()
				if len(q.errs) < 10 {
					q.errs = append(q.errs, time.Now().Format(time.TimeOnly)+" "+err.Error())
				}
				q.mu.Unlock()
			} else {
				q.ok.Add(1)
				if changed(a) {
					q.changedAt.CompareAndSwap(0, time.Now().UnixNano())
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return q
}

func (q *queryClient) stop() { q.cancel(); q.wg.Wait() }

func (q *queryClient) failures() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.errs)
}
