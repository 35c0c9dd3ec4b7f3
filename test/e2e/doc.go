// Package e2e is the end-to-end suite: it brings up a real single-node
// Kubernetes cluster on this machine (package test/e2e/cluster: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
// kube-proxy from bin/k8s, containerd, runc and the CNI plugins from the
// distribution), installs contextrouter with helm and drives it with
// kubectl.
//
// The tests carry the build tag e2e so that `go test ./...` leaves them out;
// they need root and change the host (network bridge, iptables, mounts).
// Run them with `make e2e`, or only the cluster check with
//
//	go test -tags e2e -run TestCluster -v ./test/e2e/
//
// Each test's cluster goes down with it. For a cluster that keeps running,
// with the operator installed, use `make cluster-up` and `make cluster-down`.
package e2e
