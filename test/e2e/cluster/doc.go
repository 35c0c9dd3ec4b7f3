// Package cluster runs a real single-node Kubernetes cluster on this
// machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kubelet and kube-proxy from bin/k8s, containerd, runc and the CNI plugins
// from the distribution (installed with apt-get when missing), and the image
// tarballs of bin/images imported into containerd. It needs root.
//
// The end-to-end tests (test/e2e) start one per test and tear it down;
// `make cluster-up` (hack/cluster) starts one that keeps running, with the
// operator installed from the chart, until `make cluster-down`. Only one
// cluster can run on a machine: each takes the lock DefaultLockPath, and a
// second one is refused with a message naming the first.
package cluster
