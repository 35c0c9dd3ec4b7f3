// Package parentwatch ends a server when the process that started it dies.
//
// envtest starts etcd and kube-apiserver as plain children. When the test
// binary is killed (go test -timeout, SIGKILL, a crash) its cleanups never
// run, and the servers would live on, holding ports, memory and CPU on a
// shared machine. internal/testenv sets EnvVar to its own PID; a server
// started with it watches its parent and shuts down when the parent changes
// (the orphan gets re-parented). Without the variable nothing happens, so the
// binaries behave like upstream's when run by hand.
package parentwatch

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// EnvVar holds the PID of the process whose death should end this one.
// internal/testenv in the main module uses the same name.
const EnvVar = "CONTEXTROUTER_CONTROLPLANE_PARENT_PID"

const (
	pollInterval = time.Second
	// graceTime lets the server shut down cleanly on SIGTERM before it is
	// ended hard.
	graceTime = 15 * time.Second
)

// Start begins watching when EnvVar names this process's parent. A value
// naming another process is ignored: it was inherited through a process in
// between (e.g. a shell), which is not the one to follow.
func Start() {
	want, err := strconv.Atoi(os.Getenv(EnvVar))
	if err != nil || want <= 1 || os.Getppid() != want {
		return
	}
	go func() {
		for range time.Tick(pollInterval) {
			if os.Getppid() == want {
				continue
			}
			fmt.Fprintf(os.Stderr, "parentwatch: parent process %d is gone, shutting down\n", want)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			time.Sleep(graceTime)
			os.Exit(1)
		}
	}()
}
