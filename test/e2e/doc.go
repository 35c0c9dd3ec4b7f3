// Package e2e is the end-to-end suite: it brings up a real single-node
// Kubernetes cluster on this machine (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet and kube-proxy from
// bin/k8s, containerd, runc and the CNI plugins from the distribution),
// installs contextrouter with helm and drives it with kubectl.
//
// The tests carry the build tag e2e so that `go test ./...` leaves them out;
// they need root and change the host (network bridge, iptables, mounts).
// Run them with `make e2e`, or only the cluster check with
//
//	go test -tags e2e -run TestCluster -v ./test/e2e/
package e2e
