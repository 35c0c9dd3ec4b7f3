// Command kubelet is the upstream kubelet from k8s.io/kubernetes v1.36.3
// (for the single-node cluster tests).
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // kubernetes_build_info metric
	"k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/contextrouter/contextrouter/hack/controlplane/internal/parentwatch"
)

func main() {
	parentwatch.Start()
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
