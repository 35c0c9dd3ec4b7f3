// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes module so envtest needs no downloaded release binaries.
package main

import (
	"os"
	_ "time/tzdata" // CronJob spec.timeZone must resolve without a system zoneinfo.

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // kubernetes_build_info metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/contextrouter/contextrouter/hack/controlplane/internal/parentwatch"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
