//go:build linux

// Command pause is the process of a pod's sandbox container: it holds the
// pod's namespaces open, reaps the zombies it inherits as PID 1 of a shared
// process namespace, and exits cleanly on SIGINT or SIGTERM.
//
// Build it static (CGO_ENABLED=0) and pack it with `imagebuilder -pause`.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (contextrouter hack/imagebuilder)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Printed once the handlers are in place, so a caller reading it knows
	// a signal from now on is handled.
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: not running as PID 1; zombies of other processes are not reaped here")
	}
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: shutting down on %v\n", sig)
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child; signals coalesce, so one SIGCHLD may
// stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
