// Package redistest runs a real redis-server for tests: on 127.0.0.1, a
// free port, a temporary directory, stopped when the test ends. Tests skip,
// saying why, only when redis-server is not installed (`make redis-server`
// installs the Debian package).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr     string
	Password string
	dir      string
	args     []string
	cmd      *exec.Cmd
	t        testing.TB
}

// Config of a server.
type Config struct {
	// Password, when set, is required (requirepass).
	Password string
	// AppendOnly persists every write (appendfsync always), so a restart
	// loses nothing.
	AppendOnly bool
	// MaxMemory, when set, is the server's maxmemory (noeviction: a full
	// server refuses writes).
	MaxMemory string
}

// Start starts a server and stops it when t ends.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (make redis-server installs it): the Redis session store tests need a real server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir,
		"--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log")}
	if c.Password != "" {
		args = append(args, "--requirepass", c.Password)
	}
	if c.MaxMemory != "" {
		args = append(args, "--maxmemory", c.MaxMemory, "--maxmemory-policy", "noeviction")
	}
	if c.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: c.Password, dir: dir, t: t}
	s.args = append([]string{bin}, args...)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	// Ready when it answers PING (bounded: 10 s).
	for range 200 {
		if s.ping() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.Stop()
	s.t.Fatalf("redis-server on %s did not answer within 10 s; its log:\n%s", s.Addr, log)
}

// ping speaks the protocol by hand, so the helper needs no client.
func (s *Server) ping() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	cmd := "PING\r\n"
	if s.Password != "" {
		cmd = fmt.Sprintf("AUTH %s\r\nPING\r\n", s.Password)
	}
	if _, err := c.Write([]byte(cmd)); err != nil {
		return false
	}
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if strings.HasPrefix(line, "+PONG") {
			return true
		}
		if strings.HasPrefix(line, "-") {
			return false
		}
	}
}

// Stop stops the server (SIGTERM: it writes its append-only file first) and
// waits for it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Restart stops the server and starts it again on the same port and
// directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}
