//go:build !linux

package secrets

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
