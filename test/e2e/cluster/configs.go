//go:build linux

package cluster

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// writeConfigs writes containerd's, the CNI network's, the kubelet's and
// kube-proxy's configuration files into the run directory.
func (c *Cluster) writeConfigs(cniBin, sandboxImage string) error {
	files := map[string]string{
		"containerd/config.toml":                       c.containerdConfig(cniBin, sandboxImage),
		"cni/net.d/10-" + cniNetworkName + ".conflist": c.cniConfig(),
	}
	kubelet, err := yaml.Marshal(c.kubeletConfig())
	if err != nil {
		return err
	}
	files["kubelet/config.yaml"] = string(kubelet)
	proxy, err := yaml.Marshal(c.kubeProxyConfig())
	if err != nil {
		return err
	}
	files["kube-proxy.yaml"] = string(proxy)
	for _, name := range sortedKeys(files) {
		p := c.path(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig keeps containerd's state under the run directory and its
// socket away from a system containerd's. Unset settings keep containerd's
// defaults.
func (c *Cluster) containerdConfig(cniBin, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # These VMs lack CAP_SYS_RESOURCE: runc cannot lower a sandbox's
  # oom_score_adj, and every sandbox would fail with "can't get final
  # child's PID from pipe: EOF". With this, containerd never asks for a value
  # below the current one.
  restrict_oom_score_adj = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = %[6]t
        Root = %[9]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`,
		c.path("containerd/root"), c.path("containerd/state"),
		c.path("containerd/containerd.sock"), c.path("containerd/containerd.sock.ttrpc"),
		sandboxImage, cgroupDriver() == "systemd", cniBin, c.path("cni/net.d"), c.path("containerd/runc"))
}

// cniConfig is one bridge network for every pod, with the host as the
// gateway and masquerading for traffic leaving the pod range.
func (c *Cluster) cniConfig() string {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetworkName,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      BridgeName,
				"isGateway":   true,
				"ipMasq":      true,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": c.path("cni/ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n"
}

func (c *Cluster) kubeletConfig() map[string]any {
	return map[string]any{
		"apiVersion":   "kubelet.config.k8s.io/v1beta1",
		"kind":         "KubeletConfiguration",
		"cgroupDriver": cgroupDriver(),
		// The kubelet of v1.36 refuses cgroup v1 hosts unless told not to;
		// these VMs are cgroup v1.
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"containerRuntimeEndpoint": "unix://" + c.path("containerd/containerd.sock"),
		"authentication": map[string]any{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": true},
			"x509":      map[string]string{"clientCAFile": filepath.Join(c.pki, "ca.crt")},
		},
		"authorization":     map[string]string{"mode": "Webhook"},
		"tlsCertFile":       filepath.Join(c.pki, "kubelet-serving.crt"),
		"tlsPrivateKeyFile": filepath.Join(c.pki, "kubelet-serving.key"),
		"clusterDomain":     "cluster.local",
		"resolvConf":        "/etc/resolv.conf",
		"syncFrequency":     syncFrequency,
		"podLogsDir":        c.path("pod-logs"),
		"volumePluginDir":   c.path("kubelet/volume-plugins"),
		// The images are imported, not pulled: image GC must never remove
		// them, and a fuller disk must not taint the node.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		"serializeImagePulls": false,
	}
}

func (c *Cluster) kubeletArgs() []string {
	return []string{
		"--config", c.path("kubelet/config.yaml"),
		"--kubeconfig", filepath.Join(c.pki, "kubelet.kubeconfig"),
		"--root-dir", c.path("kubelet/root"),
		"--cert-dir", c.path("kubelet/pki"),
		"--hostname-override", c.NodeName,
		"--node-ip", c.NodeIP.String(),
	}
}

func (c *Cluster) kubeProxyConfig() map[string]any {
	return map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"mode":             "iptables",
		"clusterCIDR":      clusterCIDR,
		"hostnameOverride": c.NodeName,
		"clientConnection": map[string]string{"kubeconfig": filepath.Join(c.pki, "kube-proxy.kubeconfig")},
		// 0 leaves nf_conntrack_max alone instead of raising it.
		"conntrack":          map[string]any{"maxPerCore": 0},
		"metricsBindAddress": "127.0.0.1:10249",
		"healthzBindAddress": "127.0.0.1:10256",
	}
}

func (c *Cluster) apiserverArgs() []string {
	p := func(f string) string { return filepath.Join(c.pki, f) }
	return []string{
		"--etcd-servers", "http://127.0.0.1:2379",
		"--secure-port", fmt.Sprint(apiserverPort),
		"--advertise-address", c.NodeIP.String(),
		"--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
		"--client-ca-file", p("ca.crt"),
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-cluster-ip-range", serviceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p("sa.pub"),
		"--service-account-signing-key-file", p("sa.key"),
		"--kubelet-client-certificate", p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key", p("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", p("ca.crt"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--allow-privileged=true",
		"--requestheader-client-ca-file", p("front-proxy-ca.crt"),
		"--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", p("front-proxy-client.crt"),
		"--proxy-client-key-file", p("front-proxy-client.key"),
	}
}

// componentArgs are the flags kube-controller-manager and kube-scheduler
// share: one kubeconfig for everything, no leader election on one node,
// serving on loopback.
func (c *Cluster) componentArgs(kubeconfig string) []string {
	k := filepath.Join(c.pki, kubeconfig)
	return []string{
		"--kubeconfig", k, "--authentication-kubeconfig", k, "--authorization-kubeconfig", k,
		"--leader-elect=false", "--bind-address", "127.0.0.1",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	return append(c.componentArgs("controller-manager.kubeconfig"),
		// Each controller acts as its own ServiceAccount, with the bootstrap
		// RBAC roles made for it (the garbage collector among them).
		"--use-service-account-credentials=true",
		"--service-account-private-key-file", filepath.Join(c.pki, "sa.key"),
		// Publishes kube-root-ca.crt into every namespace; projected
		// ServiceAccount volumes need it.
		"--root-ca-file", filepath.Join(c.pki, "ca.crt"),
		"--cluster-cidr", clusterCIDR,
		"--service-cluster-ip-range", serviceCIDR,
	)
}

func (c *Cluster) schedulerArgs() []string {
	return c.componentArgs("scheduler.kubeconfig")
}

// archiveImageRef returns the first tag of a docker-archive tarball (its
// manifest.json's RepoTags), the name containerd gives the imported image.
func archiveImageRef(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no manifest.json: not a docker-archive image tarball", path)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "manifest.json" {
			continue
		}
		var manifest []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return "", fmt.Errorf("%s: manifest.json: %w", path, err)
		}
		if len(manifest) == 0 || len(manifest[0].RepoTags) == 0 {
			return "", fmt.Errorf("%s: manifest.json names no tag", path)
		}
		return manifest[0].RepoTags[0], nil
	}
}
