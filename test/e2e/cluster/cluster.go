//go:build linux

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

// The cluster's fixed layout. One cluster per machine (see DefaultLockPath):
// the components bind fixed ports and the kubelet keeps some state in fixed
// host paths.
const (
	// DefaultNodeName is the e2e tests' node; make cluster-up names its own.
	DefaultNodeName = "contextrouter-e2e"
	// PodCIDR is the bridge network's range; the host is its first address.
	PodCIDR     = "10.244.0.0/24"
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	// kubernetesServiceIP is the first address of serviceCIDR, which the API
	// server gives the kubernetes Service.
	kubernetesServiceIP = "10.96.0.1"
	// BridgeName is the host's bridge the pods are attached to.
	BridgeName     = "cni0"
	cniNetworkName = "contextrouter-e2e"
	apiserverPort  = 6443
	// syncFrequency bounds how long the kubelet takes to refresh a ConfigMap
	// volume (up to 1.5x this); the default of 1m makes a test wait ~90 s.
	syncFrequency = "5s"
)

// componentPorts are what the components listen on; Start checks they are
// free before starting anything.
var componentPorts = []int{
	2379, 2380, // etcd
	apiserverPort,
	10250, 10248, // kubelet API, healthz
	10257,        // kube-controller-manager
	10259,        // kube-scheduler
	10249, 10256, // kube-proxy metrics, healthz
}

// Options say where a cluster lives and who runs it.
type Options struct {
	// RunDir holds everything the cluster writes, logs under logs/.
	RunDir string
	// ImagesDir holds the image tarballs to import; default bin/images.
	ImagesDir string
	// NodeName defaults to DefaultNodeName.
	NodeName string
	// Owner and Stop name the holder in the machine's lock: who runs this
	// cluster, and how it is stopped (for the refusal another one gets).
	Owner, Stop string
	// LockPath defaults to DefaultLockPath.
	LockPath string
	// Keep lets the components outlive this process (make cluster-up): they
	// do not die with it, and they inherit the lock, so it stays held until
	// the last of them exits.
	Keep bool
	// Logf reports progress; default: discarded.
	Logf func(format string, args ...any)
}

// Cluster is a single-node cluster: one being started, or one kept by an
// earlier process (Attach).
type Cluster struct {
	RepoRoot   string
	BinDir     string // bin/k8s/<version>: the Kubernetes binaries
	ImagesDir  string // image tarballs to import
	RunDir     string // everything the cluster writes, logs under logs/
	NodeName   string
	NodeIP     net.IP
	Kubeconfig string // the admin's (system:masters)
	// Images maps each imported tarball's base name to the image it holds,
	// e.g. "agent.tar" -> "localhost/e2e-agent:dev".
	Images map[string]string

	opts  Options
	t0    time.Time
	lock  *Lock
	procs []*proc // in start order
	pki   string
	api   *http.Client // admin client for health checks
}

func newCluster(opts Options) *Cluster {
	root := testenv.RepoRoot()
	if opts.ImagesDir == "" {
		opts.ImagesDir = filepath.Join(root, "bin", "images")
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.LockPath == "" {
		opts.LockPath = DefaultLockPath
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := &Cluster{
		RepoRoot:  root,
		BinDir:    filepath.Join(root, "bin", "k8s", testenv.KubernetesVersion),
		ImagesDir: filepath.Clean(opts.ImagesDir),
		RunDir:    filepath.Clean(opts.RunDir),
		NodeName:  opts.NodeName,
		opts:      opts,
		t0:        time.Now(),
	}
	c.pki = filepath.Join(c.RunDir, "pki")
	c.Kubeconfig = filepath.Join(c.pki, "admin.kubeconfig")
	return c
}

// New takes the machine's cluster lock for a cluster in opts.RunDir, or
// fails with a *BusyError naming the cluster that holds it. It starts
// nothing: Start does. Down releases the lock.
func New(opts Options) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the cluster needs root: it runs containerd and the kubelet and changes the network")
	}
	c := newCluster(opts)
	var err error
	c.lock, err = AcquireLock(c.opts.LockPath, c.holder())
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) holder() Holder {
	return Holder{Owner: c.opts.Owner, PID: os.Getpid(), RunDir: c.RunDir, Kubeconfig: c.Kubeconfig,
		Since: time.Now().UTC().Truncate(time.Second), Stop: c.opts.Stop}
}

// Attach returns the cluster an earlier process kept in opts.RunDir (its
// components recorded in <run>/pids), for Down. When that cluster's
// components hold the lock, Attach proceeds without it; when another
// cluster does, it fails with a *BusyError.
func Attach(opts Options) (*Cluster, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("stopping the cluster needs root")
	}
	c := newCluster(opts)
	lock, err := AcquireLock(c.opts.LockPath, c.holder())
	var busy *BusyError
	switch {
	case errors.As(err, &busy) && busy.Holder.RunDir == c.RunDir:
		// Held by the kept cluster's own components.
	case err != nil:
		return nil, err
	default:
		c.lock = lock
	}
	recs, err := readPidRecords(c.RunDir)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		c.procs = append(c.procs, &proc{name: r.Name, logPath: filepath.Join(c.RunDir, "logs", r.Name+".log"), rec: r})
	}
	if c.running("kube-apiserver") {
		if c.api, err = c.adminHTTPClient(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Status lists the components recorded in the run directory that run and
// those that do not.
func (c *Cluster) Status() (running, stopped []string) {
	for _, p := range c.procs {
		if done, _ := p.exited(); done {
			stopped = append(stopped, p.name)
		} else {
			running = append(running, p.name)
		}
	}
	return running, stopped
}

// Logf reports progress through Options.Logf, with the seconds since the
// cluster was made.
func (c *Cluster) Logf(format string, args ...any) {
	c.opts.Logf("[%6.1fs] "+format, append([]any{time.Since(c.t0).Seconds()}, args...)...)
}

func (c *Cluster) logf(format string, args ...any) { c.Logf(format, args...) }

// Start brings up a fresh cluster: it installs the runtime packages when
// they are missing, removes what an earlier run left behind, and returns
// once the node is Ready, kube-proxy has programmed the Services and the
// default ServiceAccount and kube-root-ca.crt exist. On an error the caller
// tears down with Down.
func (c *Cluster) Start(ctx context.Context) error {
	if c.lock == nil {
		return errors.New("cluster: Start without the lock (use New)")
	}
	if err := c.checkBinaries(); err != nil {
		return err
	}
	if err := ensureHostPackages(ctx, c.logf); err != nil {
		return err
	}
	c.logf("host packages present")
	images, err := c.readImages()
	if err != nil {
		return err
	}
	// A cluster in another run directory that crashed while holding the
	// lock left its processes and mounts there.
	if prev := c.lock.Prev.RunDir; prev != "" && prev != c.RunDir && dirExists(prev) {
		c.logf("cleanup: %s, of %s, did not release the lock", prev, c.lock.Prev.Owner)
		if err := Cleanup(ctx, prev, c.logf); err != nil {
			return fmt.Errorf("removing the leftovers of %s: %w", prev, err)
		}
	}
	if err := Cleanup(ctx, c.RunDir, c.logf); err != nil {
		return fmt.Errorf("removing the leftovers of an earlier run: %w", err)
	}
	if err := checkPortsFree(componentPorts); err != nil {
		return err
	}
	if c.NodeIP, err = nodeIP(); err != nil {
		return err
	}
	for _, d := range []string{"logs", "pids", "pki", "cni/net.d", "kubelet", "etcd"} {
		if err := os.MkdirAll(filepath.Join(c.RunDir, d), 0o755); err != nil {
			return err
		}
	}
	if err := saveHostState(c.RunDir); err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiserverPort)
	if err := writePKI(c.pki, server, c.NodeName, c.NodeIP, net.ParseIP(kubernetesServiceIP)); err != nil {
		return fmt.Errorf("PKI: %w", err)
	}
	if c.api, err = c.adminHTTPClient(); err != nil {
		return err
	}
	cniDir, err := cniBinDir()
	if err != nil {
		return err
	}
	sandbox, ok := images["pause.tar"]
	if !ok {
		return fmt.Errorf("%s/pause.tar is missing: the pod sandbox image; build the images with `make images`", c.ImagesDir)
	}
	if err := c.writeConfigs(cniDir, sandbox); err != nil {
		return err
	}
	c.logf("node %s at %s; PKI, kubeconfigs and configs in %s (cgroup driver %s, CNI plugins in %s)",
		c.NodeName, c.NodeIP, c.RunDir, cgroupDriver(), cniDir)

	// containerd first: the image import overlaps with etcd and the API
	// server coming up.
	if err := c.start("containerd", "containerd", "--config", c.path("containerd/config.toml")); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd", 30*time.Second, func(ctx context.Context) (bool, string, error) {
		out, err := c.ctr(ctx, "version")
		return err == nil, out, nil
	}); err != nil {
		return err
	}
	c.logf("containerd up")
	importErr := make(chan error, 1)
	go func() { importErr <- c.importImages(ctx, images) }()

	if err := c.start("etcd", c.bin("etcd"),
		"--name", "e2e", "--data-dir", c.path("etcd/data"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "e2e=http://127.0.0.1:2380",
		// A test cluster does not need durability; fsync dominates etcd's
		// latency on a shared disk.
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd", 30*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := HTTPGet(ctx, http.DefaultClient, "http://127.0.0.1:2379/health")
		return err == nil && strings.Contains(body, `"health":"true"`), body, nil
	}); err != nil {
		return err
	}
	c.logf("etcd healthy")

	if err := c.start("kube-apiserver", append([]string{c.bin("kube-apiserver")}, c.apiserverArgs()...)...); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver", 90*time.Second, func(ctx context.Context) (bool, string, error) {
		body, err := HTTPGet(ctx, c.api, server+"/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(body) == "ok", body, nil
	}); err != nil {
		return err
	}
	c.logf("kube-apiserver ready")
	if err := <-importErr; err != nil {
		return err
	}

	for _, comp := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", c.controllerManagerArgs()},
		{"kube-scheduler", c.schedulerArgs()},
		{"kubelet", c.kubeletArgs()},
		{"kube-proxy", []string{"--config", c.path("kube-proxy.yaml")}},
	} {
		if err := c.start(comp.name, append([]string{c.bin(comp.name)}, comp.args...)...); err != nil {
			return err
		}
	}

	if err := c.waitFor(ctx, "node Ready", 120*time.Second, func(ctx context.Context) (bool, string, error) {
		var node corev1.Node
		if err := c.getJSON(ctx, &node, "get", "node", c.NodeName); err != nil {
			return false, err.Error(), nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message), nil
			}
		}
		return false, "no Ready condition yet", nil
	}); err != nil {
		return err
	}
	c.logf("node %s Ready", c.NodeName)

	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, hc := range []struct{ name, url string }{
		// Their serving certificates are self-signed; only liveness is read.
		{"kube-controller-manager", "https://127.0.0.1:10257/healthz"},
		{"kube-scheduler", "https://127.0.0.1:10259/healthz"},
		// 200 once the proxy has programmed the rules at least once.
		{"kube-proxy", "http://127.0.0.1:10256/healthz"},
	} {
		if err := c.waitFor(ctx, hc.name+" healthy", 60*time.Second, func(ctx context.Context) (bool, string, error) {
			body, err := HTTPGet(ctx, insecure, hc.url)
			if err != nil {
				return false, err.Error(), nil
			}
			return true, body, nil
		}); err != nil {
			return err
		}
	}
	c.logf("controller manager, scheduler and kube-proxy healthy")

	// Pods cannot be created before their ServiceAccount exists, and they
	// mount kube-root-ca.crt; both come from the controller manager.
	if err := c.waitFor(ctx, "default ServiceAccount and kube-root-ca.crt", 60*time.Second, func(ctx context.Context) (bool, string, error) {
		if _, err := c.Kubectl(ctx, "get", "serviceaccount", "default", "-n", "default"); err != nil {
			return false, err.Error(), nil
		}
		if _, err := c.Kubectl(ctx, "get", "configmap", "kube-root-ca.crt", "-n", "default"); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	c.logf("cluster up: default ServiceAccount and kube-root-ca.crt present")
	return nil
}

// Path is rel in the run directory.
func (c *Cluster) Path(rel string) string { return filepath.Join(c.RunDir, rel) }

// Bin is a Kubernetes binary of bin/k8s.
func (c *Cluster) Bin(name string) string { return filepath.Join(c.BinDir, name) }

func (c *Cluster) path(rel string) string { return c.Path(rel) }
func (c *Cluster) bin(name string) string { return c.Bin(name) }

// checkBinaries fails with the make target that builds what is missing.
func (c *Cluster) checkBinaries() error {
	targets := map[string]string{
		"etcd": "controlplane", "kube-apiserver": "controlplane", "kubectl": "controlplane",
		"kube-controller-manager": "controlplane",
		"kube-scheduler":          "node-binaries", "kubelet": "node-binaries", "kube-proxy": "node-binaries",
	}
	var missing []string
	need := map[string]bool{}
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if fi, err := os.Stat(c.bin(b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
			need[targets[b]] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var mk []string
	for _, t := range []string{"controlplane", "node-binaries"} {
		if need[t] {
			mk = append(mk, t)
		}
	}
	return fmt.Errorf("missing %s in %s: run `make %s`", strings.Join(missing, ", "), c.BinDir, strings.Join(mk, " "))
}

// start runs a component and records it for Down.
func (c *Cluster) start(name string, args ...string) error {
	var keep *os.File
	if c.opts.Keep {
		keep = c.lock.File()
	}
	p, err := startProc(c.RunDir, name, keep, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// WaitUntil polls check every 250 ms until it reports done, for at most
// timeout. It fails early when a component has exited, with the end of its
// log, and on timeout with the last thing check saw.
func (c *Cluster) WaitUntil(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) error {
	return c.waitFor(ctx, what, timeout, check)
}

func (c *Cluster) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var seen string
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
		done, s, err := check(callCtx)
		callCancel()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		seen = s
		if err := c.checkProcs(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not reached within %s; last seen: %s", what, timeout, strings.TrimSpace(seen))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// CheckProcs reports the first component that exited, with its log's end.
func (c *Cluster) CheckProcs() error { return c.checkProcs() }

func (c *Cluster) checkProcs() error {
	for _, p := range c.procs {
		if done, err := p.exited(); done && !p.stopped {
			return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.name, err, p.logPath, tail(p.logPath, 30))
		}
	}
	return nil
}

func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	args = append([]string{"--address", c.path("containerd/containerd.sock")}, args...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImages loads every tarball into containerd's k8s.io namespace,
// where the CRI looks for images; pods use imagePullPolicy: Never.
func (c *Cluster) importImages(ctx context.Context, images map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, file := range sortedKeys(images) {
		if _, err := c.ctr(ctx, "-n", "k8s.io", "images", "import", filepath.Join(c.ImagesDir, file)); err != nil {
			return fmt.Errorf("importing %s: %w", file, err)
		}
	}
	c.Images = images
	c.logf("imported %d images: %s", len(images), describeImages(images))
	return nil
}

func describeImages(images map[string]string) string {
	var parts []string
	for _, f := range sortedKeys(images) {
		parts = append(parts, f+"="+images[f])
	}
	return strings.Join(parts, ", ")
}

// readImages finds the tarballs in ImagesDir and the image each holds.
func (c *Cluster) readImages() (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(c.ImagesDir, "*.tar"))
	if err != nil {
		return nil, err
	}
	images := map[string]string{}
	for _, f := range files {
		ref, err := archiveImageRef(f)
		if err != nil {
			return nil, err
		}
		images[filepath.Base(f)] = ref
	}
	return images, nil
}

func (c *Cluster) adminHTTPClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(c.pki, "admin.crt"), filepath.Join(c.pki, "admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(c.pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	}}, nil
}

func HTTPGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// Kubectl runs the built kubectl as the cluster admin and returns stdout;
// the error carries stderr. Each call is bounded by ctx, and by a minute
// when ctx has no deadline.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.kubectlIn(ctx, "", args...)
}

// KubectlApply applies manifests given as YAML text.
func (c *Cluster) KubectlApply(ctx context.Context, manifest string, args ...string) (string, error) {
	return c.kubectlIn(ctx, manifest, append([]string{"apply", "-f", "-"}, args...)...)
}

func (c *Cluster) kubectlIn(ctx context.Context, stdin string, args ...string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// KubectlJSON runs kubectl with -o json and decodes the output into v.
func (c *Cluster) KubectlJSON(ctx context.Context, v any, args ...string) error {
	return c.getJSON(ctx, v, args...)
}

func (c *Cluster) getJSON(ctx context.Context, v any, args ...string) error {
	out, err := c.Kubectl(ctx, append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("kubectl %s: decoding the output: %w", strings.Join(args, " "), err)
	}
	return nil
}

// DumpDiagnostics logs what a reader of a failed run needs: the state of
// every pod, recent events and the end of each component's log.
func (c *Cluster) DumpDiagnostics() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.running("kube-apiserver") {
		for _, args := range [][]string{
			{"get", "nodes,pods,services,endpointslices", "-A", "-o", "wide"},
			{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		} {
			out, err := c.Kubectl(ctx, args...)
			if err != nil {
				out += err.Error()
			}
			c.logf("diagnostics: kubectl %s:\n%s", strings.Join(args, " "), lastLines(out, 60))
		}
	}
	if c.running("kube-apiserver", "kubelet") {
		c.dumpPodLogs(ctx)
	}
	for _, p := range c.procs {
		c.logf("diagnostics: end of %s:\n%s", p.logPath, tail(p.logPath, 25))
	}
}

// Down tears the cluster down in the order that leaves nothing behind:
// pods first, through the kubelet, so that the CNI plugin releases their
// addresses and NAT rules; then the components, containerd and its shims;
// then the host state (mounts, cni0, iptables chains, network namespaces,
// cgroups).
func (c *Cluster) Down() error { return c.down(false) }

// Remove is Down, then Cleanup of the run directory: nothing of the cluster
// is left, not even its logs.
func (c *Cluster) Remove() error { return c.down(true) }

func (c *Cluster) down(remove bool) error {
	ctx := context.Background()
	start := time.Now()
	var errs []error
	byName := map[string]*proc{}
	for _, p := range c.procs {
		byName[p.name] = p
	}
	stop := func(names ...string) {
		for _, n := range names {
			if p := byName[n]; p != nil {
				if err := p.stop(15 * time.Second); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if c.running("kube-apiserver", "kubelet") {
		// Without the controller manager and the scheduler nothing
		// recreates a deleted pod.
		stop("kube-controller-manager", "kube-scheduler")
		if err := c.deleteAllPods(ctx); err != nil {
			errs = append(errs, err)
		} else {
			c.logf("teardown: every pod deleted through the kubelet")
		}
	}
	stop("kube-proxy", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd")
	if p := byName["containerd"]; p != nil {
		if done, _ := p.exited(); !done {
			if err := c.removeContainers(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		stop("containerd")
	}
	c.procs = nil
	if err := cleanupHost(ctx, c.RunDir, c.bin("kube-proxy")); err != nil {
		errs = append(errs, err)
	}
	if remove {
		if err := Cleanup(ctx, c.RunDir, c.logf); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.releaseLock(len(errs) == 0); err != nil {
		errs = append(errs, err)
	}
	c.logf("teardown done in %.1fs", time.Since(start).Seconds())
	return errors.Join(errs...)
}

// releaseLock lets the next cluster start. A cluster attached to while its
// components held the lock takes it now that they are gone. After a failed
// teardown the holder record stays, so that the next cluster cleans up this
// one's run directory.
func (c *Cluster) releaseLock(clean bool) error {
	if c.lock == nil {
		l, err := AcquireLock(c.opts.LockPath, c.holder())
		if err != nil {
			return fmt.Errorf("after teardown: %w", err)
		}
		c.lock = l
	}
	if !clean {
		c.lock.Drop()
		return nil
	}
	return c.lock.Release()
}

// Detach lets a kept cluster (Options.Keep) run on after this process
// exits: its components hold the lock from now on.
func (c *Cluster) Detach() {
	c.lock.Drop()
	c.procs = nil
}

// Kill kills every component with SIGKILL and forgets them, leaving the
// machine as a killed run would: containers, mounts and the bridge stay.
func (c *Cluster) Kill() {
	for _, p := range c.procs {
		if p.cmd != nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.procs = nil
	c.lock.Drop()
	c.logf("crashed: every component killed, nothing cleaned")
}

func (c *Cluster) running(names ...string) bool {
	for _, n := range names {
		found := false
		for _, p := range c.procs {
			if p.name == n {
				done, _ := p.exited()
				found = !done
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// deleteAllPods deletes every pod and waits until the kubelet has stopped
// them (a pod object disappears only once its containers are gone).
func (c *Cluster) deleteAllPods(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := c.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--wait=false", "--grace-period=5"); err != nil {
		return err
	}
	return c.waitFor(ctx, "every pod gone", 80*time.Second, func(ctx context.Context) (bool, string, error) {
		out, err := c.Kubectl(ctx, "get", "pods", "--all-namespaces", "-o", "name")
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.TrimSpace(out) == "", out, nil
	})
}

// removeContainers kills and deletes whatever containers are left in
// containerd (pods the kubelet did not get to), so that their shims exit.
func (c *Cluster) removeContainers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return removeContainersVia(ctx, c.ctr)
}

func removeContainersVia(ctx context.Context, ctr func(context.Context, ...string) (string, error)) error {
	out, err := ctr(ctx, "-n", "k8s.io", "tasks", "list", "-q")
	if err != nil {
		return err
	}
	tasks := strings.Fields(out)
	for _, id := range tasks {
		_, _ = ctr(ctx, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range tasks {
		_, _ = ctr(ctx, "-n", "k8s.io", "tasks", "delete", "-f", id)
	}
	out, err = ctr(ctx, "-n", "k8s.io", "containers", "list", "-q")
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(out) {
		_, _ = ctr(ctx, "-n", "k8s.io", "containers", "delete", id)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dumpPodLogs logs the end of every container's log outside kube-system:
// the operator's, the routers' and the agents'.
func (c *Cluster) dumpPodLogs(ctx context.Context) {
	var pods corev1.PodList
	if err := c.getJSON(ctx, &pods, "get", "pods", "--all-namespaces"); err != nil {
		c.logf("diagnostics: %v", err)
		return
	}
	for _, p := range pods.Items {
		if p.Namespace == "kube-system" {
			continue
		}
		out, err := c.Kubectl(ctx, "logs", "-n", p.Namespace, p.Name, "--all-containers", "--prefix", "--tail", "25")
		if err != nil {
			out += err.Error()
		}
		c.logf("diagnostics: logs of pod %s/%s:\n%s", p.Namespace, p.Name, out)
	}
}
