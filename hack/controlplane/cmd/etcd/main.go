// Command etcd is the etcd server at the version k8s.io/kubernetes v1.36.3
// itself depends on, so the API server talks to the etcd it was tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/contextrouter/contextrouter/hack/controlplane/internal/parentwatch"
)

func main() {
	parentwatch.Start()
	etcdmain.Main(os.Args)
}
