// Command kubectl is the upstream kubectl from k8s.io/kubectl v0.36.3.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // exec and OIDC credential plugins in kubeconfigs
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// klog verbosity must be known before the command tree is built, because
	// building it already logs; cobra parses -v only later.
	_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		// CheckErr prints kubectl-style messages and exits with the right code.
		util.CheckErr(err)
	}
}
