// Command contextrouter is the context router: standalone CLI and server,
// router Deployment, sidecar and operator, all from one binary.
package main

import (
	"os"

	"github.com/contextrouter/contextrouter/internal/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:], os.Stdout, os.Stderr))
}
