//go:build linux

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// DefaultLockPath is the machine-wide lock every cluster takes. Two clusters
// cannot share a machine whatever their run directories: they would share
// the cni0 bridge, the KUBE-* and CNI-* iptables chains, the kubepods
// cgroups, /run/netns/cni-* and the components' ports, and each one's
// cleanup removes the other's. /run is emptied at boot, as the cluster is.
const DefaultLockPath = "/run/contextrouter-cluster.lock"

// Holder describes who holds the lock; it is written into the lock file so
// that a refused second cluster can name the first.
type Holder struct {
	Owner      string    `json:"owner"`
	PID        int       `json:"pid"`
	RunDir     string    `json:"runDir"`
	Kubeconfig string    `json:"kubeconfig,omitempty"`
	Since      time.Time `json:"since"`
	// Stop says how the holder's cluster is stopped.
	Stop string `json:"stop,omitempty"`
}

func (h Holder) String() string {
	if h.Owner == "" {
		return "an unknown process (the lock file names no holder)"
	}
	s := fmt.Sprintf("%s (started by pid %d at %s), state in %s", h.Owner, h.PID, h.Since.UTC().Format(time.RFC3339), h.RunDir)
	if h.Kubeconfig != "" {
		s += ", kubeconfig " + h.Kubeconfig
	}
	return s
}

// BusyError is the refusal when another cluster holds the lock.
type BusyError struct {
	Path   string
	Holder Holder
}

func (e *BusyError) Error() string {
	stop := "wait for it to end"
	if e.Holder.Stop != "" {
		stop = e.Holder.Stop
	}
	return fmt.Sprintf("another cluster runs on this machine: %s; only one can run at a time "+
		"(they would share the cni0 bridge, the KUBE-* iptables chains and the ports of the components); "+
		"to stop it: %s (lock %s)", e.Holder, stop, e.Path)
}

// Lock is a held flock on the lock file. The lock belongs to the open file
// description, so it stays held while this process or any child that
// inherited the file (the components of a kept cluster) has it open: the
// kernel releases it when the last of them exits, however they exit.
type Lock struct {
	f    *os.File
	path string
	// Prev is the holder an earlier owner left in the file without
	// releasing it cleanly (a crash): its run directory may hold leftovers.
	Prev Holder
}

// AcquireLock takes the lock at path for h without waiting; a held lock
// gives a *BusyError naming its holder.
func AcquireLock(path string, h Holder) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster lock: %w", err)
	}
	if err := flockOrBusy(f, path); err != nil {
		f.Close()
		return nil, err
	}
	l := &Lock{f: f, path: path}
	l.Prev, _ = readHolder(f)
	if err := l.write(h); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// ProbeLock reports whether the lock at path is free, as AcquireLock would
// (a *BusyError naming the holder when not), without taking it or touching
// its record.
func ProbeLock(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cluster lock: %w", err)
	}
	defer f.Close()
	return flockOrBusy(f, path)
}

// flockOrBusy takes the flock on f without waiting.
func flockOrBusy(f *os.File, path string) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder, _ := readHolder(f)
		return &BusyError{Path: path, Holder: holder}
	}
	if err != nil {
		return fmt.Errorf("cluster lock %s: %w", path, err)
	}
	return nil
}

// ReadHolder returns who holds (or last held) the lock at path.
func ReadHolder(path string) (Holder, error) {
	f, err := os.Open(path)
	if err != nil {
		return Holder{}, err
	}
	defer f.Close()
	return readHolder(f)
}

func readHolder(f *os.File) (Holder, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil {
		return Holder{}, err
	}
	var h Holder
	if strings.TrimSpace(string(b)) == "" {
		return h, nil
	}
	err = json.Unmarshal(b, &h)
	return h, err
}

func (l *Lock) write(h Holder) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("cluster lock %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("cluster lock %s: %w", l.path, err)
	}
	return nil
}

// File is the locked file, for a child process to inherit.
func (l *Lock) File() *os.File { return l.f }

// Release empties the holder record (the cluster is gone cleanly) and
// closes this process's hold on the lock. A child that inherited the file
// still holds it. Releasing twice is harmless.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Truncate(0)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// Drop closes this process's hold without touching the record, as a crash
// would, or as the starter of a kept cluster does when it exits.
func (l *Lock) Drop() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
