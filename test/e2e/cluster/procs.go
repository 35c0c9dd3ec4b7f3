//go:build linux

package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a component process. Its PID and start time are recorded in
// <run>/pids/<name>.json so that a later run can stop it by PID: a kept
// cluster's, or one whose starter died before tearing down.
type proc struct {
	name    string
	logPath string
	rec     pidRecord
	cmd     *exec.Cmd     // nil for a process of an earlier run (Attach)
	done    chan struct{} // closed once the process has exited
	err     error         // exit status, valid after done
	stopped bool          // stop was called: an exit is expected
}

// pidRecord identifies a process without trusting a bare PID: the kernel
// reuses PIDs, the (PID, start time) pair is unique for the boot.
type pidRecord struct {
	Name  string   `json:"name"`
	PID   int      `json:"pid"`
	Start uint64   `json:"start"` // field 22 of /proc/PID/stat, clock ticks since boot
	Args  []string `json:"args"`
}

// startProc runs args with stdout and stderr appended to <logDir>/<name>.log.
// The process gets its own process group, so a signal to the starter (^C,
// a test's timeout) does not reach it half-way. Without keep it dies with
// the starter (Pdeathsig) if that is killed before it can tear down; Cleanup
// handles what it leaves. With keep it outlives the starter and inherits
// keep, the locked lock file, as fd 3.
func startProc(runDir, name string, keep *os.File, args ...string) (*proc, error) {
	logPath := filepath.Join(runDir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "### %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if keep != nil {
		cmd.SysProcAttr.Pdeathsig = 0
		cmd.ExtraFiles = []*os.File{keep}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	rec := pidRecord{Name: name, PID: cmd.Process.Pid, Args: args}
	rec.Start, _ = procStartTime(rec.PID)
	p.rec = rec
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runDir, "pids", name+".json"), b, 0o644); err != nil {
		return p, err
	}
	return p, nil
}

// exited reports whether the process ended, and how.
func (p *proc) exited() (bool, error) {
	if p.cmd == nil {
		return !p.rec.alive(), nil
	}
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM and waits up to grace for the process to exit before
// killing it.
func (p *proc) stop(grace time.Duration) error {
	p.stopped = true
	if p.cmd == nil {
		return stopRecorded(p.rec, grace)
	}
	if done, _ := p.exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", p.name, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for 10s", p.name, p.cmd.Process.Pid)
	}
}

// procStartTime reads a process's start time from /proc/PID/stat.
func procStartTime(pid int) (uint64, error) {
	start, _, err := procStat(pid)
	return start, err
}

// procStat reads a process's start time and state from /proc/PID/stat. The
// command name (field 2) may contain spaces and parentheses, so the fields
// are counted from the last ')'.
func procStat(pid int) (start uint64, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	return start, fields[0], err
}

// alive reports whether the recorded process still runs: same PID and same
// start time, and not a zombie (dead, waiting for a parent to reap it: the
// starter of a kept cluster is gone, and init may take a while).
func (r pidRecord) alive() bool {
	start, state, err := procStat(r.PID)
	return err == nil && start == r.Start && state != "Z" && state != "X"
}

// stopRecorded stops a process of an earlier run by its record: SIGTERM,
// up to grace to exit, then SIGKILL.
func stopRecorded(r pidRecord, grace time.Duration) error {
	if !r.alive() {
		return nil
	}
	_ = syscall.Kill(r.PID, syscall.SIGTERM)
	if waitGone(r, grace) {
		return nil
	}
	_ = syscall.Kill(r.PID, syscall.SIGKILL)
	if waitGone(r, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) of an earlier run survived SIGKILL", r.Name, r.PID)
}

func waitGone(r pidRecord, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for r.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// readPidRecords returns the records under <run>/pids in a stable order.
func readPidRecords(runDir string) ([]pidRecord, error) {
	files, err := filepath.Glob(filepath.Join(runDir, "pids", "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var recs []pidRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r pidRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// findProcs returns the PIDs of processes whose command line contains every
// one of needles, e.g. the containerd shims of our containerd socket.
func findProcs(needles ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		match := true
		for _, n := range needles {
			if !strings.Contains(cmdline, n) {
				match = false
				break
			}
		}
		if match {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "(no log)"
	}
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}
