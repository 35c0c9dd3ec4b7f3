// Package redistest runs a real redis-server for tests: on 127.0.0.1, a
// free port, a temporary directory, stopped when the test ends. Tests skip,
// saying why, only when redis-server is not installed (`make redis-server`
// installs the Debian package).
package redistest

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http/httptest"
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
	// RootCAs holds the CA of a TLS server's certificate.
	RootCAs *x509.CertPool
	dir     string
	args    []string
	cmd     *exec.Cmd
	t       testing.TB
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
	// MaxMemoryPolicy replaces the server's maxmemory-policy (noeviction).
	MaxMemoryPolicy string
	// NoConfig renames CONFIG away, as managed services do: the server
	// answers it "unknown command".
	NoConfig bool
	// TLS serves TLS only, with httptest's certificate for 127.0.0.1
	// (Server.RootCAs trusts it).
	TLS bool
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
	var roots *x509.CertPool
	if c.TLS {
		var files []string
		roots, files = certificates(t, dir)
		args[1] = "0"
		args = append(args, "--tls-port", strconv.Itoa(port), "--tls-cert-file", files[0], "--tls-key-file", files[1],
			"--tls-ca-cert-file", files[2], "--tls-auth-clients", "no")
	}
	if c.Password != "" {
		args = append(args, "--requirepass", c.Password)
	}
	if c.MaxMemory != "" {
		args = append(args, "--maxmemory", c.MaxMemory)
	}
	args = append(args, "--maxmemory-policy", cmp.Or(c.MaxMemoryPolicy, "noeviction"))
	if c.NoConfig {
		args = append(args, "--rename-command", "CONFIG", "")
	}
	if c.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: c.Password, RootCAs: roots, dir: dir, t: t}
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
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: time.Second}
	if s.RootCAs != nil {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr, &tls.Config{RootCAs: s.RootCAs, MinVersion: tls.VersionTLS12})
	} else {
		c, err = d.Dial("tcp", s.Addr)
	}
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

// certificates writes the certificate and key net/http/httptest serves
// TLS with (for 127.0.0.1, its own CA) as the server's cert, key and CA
// files, and returns it as a pool.
func certificates(t testing.TB, dir string) (*x509.CertPool, []string) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	cert, key := ts.Certificate(), ts.TLS.Certificates[0].PrivateKey
	ts.Close()
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	files := []string{filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")}
	for i, b := range [][]byte{certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), certPEM} {
		if err := os.WriteFile(files[i], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, files
}
