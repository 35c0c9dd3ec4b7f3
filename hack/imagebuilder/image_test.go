package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// pauseBin is the pause program, built static once for the whole package: a
// real executable to pack.
var pauseBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "imagebuilder-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pauseBin = filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-o", pauseBin, "./pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ./pause: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// entry is one file of a layer.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// readArchive loads the docker-archive at path as tag and returns its config
// and the entries of its only layer, in order.
func readArchive(t *testing.T, path, ref string) (*v1.ConfigFile, []entry) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("read %s as %s: %v", path, ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("image has %d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var entries []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{h, data})
	}
	return cf, entries
}

func find(entries []entry, name string) (entry, bool) {
	for _, e := range entries {
		if strings.TrimSuffix(e.hdr.Name, "/") == name {
			return e, true
		}
	}
	return entry{}, false
}

const testPEM = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// copyBinary copies the pause program to a file called name, for images
// whose entrypoint defaults to the binary's name.
func copyBinary(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(pauseBin)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, string(data), 0o755)
}

func TestBuildMatchesTheDockerfile(t *testing.T) {
	bin := copyBinary(t, "contextrouter")
	spec := DefaultSpec(bin)
	spec.CACerts = writeFile(t, "ca.crt", testPEM, 0o644)
	spec.Labels = map[string]string{"org.opencontainers.image.version": "v1.2.3"}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "images", "contextrouter.tar")
	if err := WriteArchive(out, "localhost/contextrouter:dev", img); err != nil {
		t.Fatal(err)
	}
	cf, entries := readArchive(t, out, "localhost/contextrouter:dev")

	t.Run("config", func(t *testing.T) {
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
		}
		c := cf.Config
		if c.User != "65532:65532" {
			t.Errorf("user %q, want 65532:65532 (the Dockerfile's USER)", c.User)
		}
		if !slices.Equal(c.Entrypoint, []string{"/contextrouter"}) || c.Cmd != nil {
			t.Errorf("entrypoint %q cmd %q, want [/contextrouter] and none", c.Entrypoint, c.Cmd)
		}
		if c.WorkingDir != "/home/nonroot" {
			t.Errorf("workdir %q, want /home/nonroot", c.WorkingDir)
		}
		if !slices.Contains(c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
			t.Errorf("env %q lacks SSL_CERT_FILE", c.Env)
		}
		if c.Labels["org.opencontainers.image.version"] != "v1.2.3" {
			t.Errorf("labels %v", c.Labels)
		}
		if !cf.Created.Equal(time.Unix(0, 0)) {
			t.Errorf("created %v, want the epoch", cf.Created)
		}
	})

	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	files := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
		content  string // checked unless empty
	}{
		{"contextrouter", tar.TypeReg, 0o755, 0, 0, string(want)},
		{"tmp", tar.TypeDir, 0o1777, 0, 0, ""},
		{"home/nonroot", tar.TypeDir, 0o700, 65532, 65532, ""},
		{"home", tar.TypeDir, 0o755, 0, 0, ""},
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, 0, testPEM},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, 0, ""},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			e, ok := find(entries, f.name)
			if !ok {
				t.Fatalf("not in the layer")
			}
			h := e.hdr
			if h.Typeflag != f.typ || h.Mode != f.mode || h.Uid != f.uid || h.Gid != f.gid {
				t.Errorf("type %c mode %o owner %d:%d, want %c %o %d:%d", h.Typeflag, h.Mode, h.Uid, h.Gid, f.typ, f.mode, f.uid, f.gid)
			}
			if f.content != "" && string(e.data) != f.content {
				t.Errorf("content differs (%d bytes, want %d)", len(e.data), len(f.content))
			}
			if !h.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("mtime %v, want the epoch", h.ModTime)
			}
		})
	}

	t.Run("passwd names nonroot", func(t *testing.T) {
		e, _ := find(entries, "etc/passwd")
		if !strings.Contains(string(e.data), "nonroot:x:65532:65532:") {
			t.Errorf("/etc/passwd:\n%s", e.data)
		}
	})
	t.Run("parents before children", func(t *testing.T) {
		seen := map[string]bool{}
		for _, e := range entries {
			n := strings.TrimSuffix(e.hdr.Name, "/")
			if d := filepath.Dir(n); d != "." && !seen[d] {
				t.Errorf("%s comes before its directory %s", n, d)
			}
			seen[n] = true
		}
	})
}

func TestBuildPause(t *testing.T) {
	img, err := Build(PauseSpec(pauseBin))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pause.tar")
	if err := WriteArchive(out, "localhost/pause:dev", img); err != nil {
		t.Fatal(err)
	}
	cf, entries := readArchive(t, out, "localhost/pause:dev")
	if cf.Config.User != PauseUser || !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) || cf.Config.WorkingDir != "/" {
		t.Errorf("config user %q entrypoint %q workdir %q", cf.Config.User, cf.Config.Entrypoint, cf.Config.WorkingDir)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.hdr.Name)
	}
	if !slices.Equal(names, []string{"pause"}) {
		t.Errorf("layer holds %q, want only pause", names)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	digest := func(created time.Time) v1.Hash {
		t.Helper()
		spec := PauseSpec(pauseBin)
		spec.Created = created
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	epoch := time.Unix(0, 0)
	if a, b := digest(epoch), digest(time.Time{}); a != b {
		t.Errorf("same inputs, different digests: %s and %s", a, b)
	}
	if a, b := digest(epoch), digest(epoch.Add(time.Hour)); a == b {
		t.Errorf("a different timestamp gave the same digest %s", a)
	}
}

// dynamicBinary returns a dynamically linked executable of the host, if any.
func dynamicBinary(t *testing.T) string {
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return p
			}
		}
	}
	t.Skip("no dynamically linked executable on this host")
	return ""
}

func TestBuildRefuses(t *testing.T) {
	text := writeFile(t, "script", "#!/bin/sh\necho hi\n", 0o755)
	noPEM := writeFile(t, "ca.crt", "not a certificate\n", 0o644)
	tests := []struct {
		name   string
		modify func(*Spec)
		want   string
	}{
		{"a script", func(s *Spec) { s.Binary = text }, "not an ELF executable"},
		{"a missing binary", func(s *Spec) { s.Binary = filepath.Join(t.TempDir(), "nope") }, "binary: open"},
		{"a dynamic binary", func(s *Spec) { s.Binary = dynamicBinary(t) }, "dynamically linked"},
		{"a user name", func(s *Spec) { s.User = "nonroot" }, `user "nonroot": want numeric uid:gid`},
		{"a uid alone", func(s *Spec) { s.User = "65532" }, "want numeric uid:gid"},
		{"a negative uid", func(s *Spec) { s.User = "-1:0" }, "want numeric uid:gid"},
		{"a relative entrypoint", func(s *Spec) { s.Entrypoint = "contextrouter" }, "clean absolute file path"},
		{"the root as entrypoint", func(s *Spec) { s.Entrypoint = "/" }, "clean absolute file path"},
		{"a relative workdir", func(s *Spec) { s.WorkingDir = "home" }, "clean absolute path"},
		{"a missing CA bundle", func(s *Spec) { s.CACerts = filepath.Join(t.TempDir(), "none.crt") }, "CA certificates"},
		{"a CA bundle without PEM", func(s *Spec) { s.CACerts = noPEM }, "no PEM certificate"},
		{"the binary over /tmp", func(s *Spec) { s.Entrypoint = "/tmp" }, "layer: /tmp added twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSpec(pauseBin)
			s.CACerts = ""
			tt.modify(&s)
			_, err := Build(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteArchiveRefusesABadTag(t *testing.T) {
	img, err := Build(PauseSpec(pauseBin))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	err = WriteArchive(out, "Not A Tag", img)
	if err == nil || !strings.Contains(err.Error(), `tag "Not A Tag"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed write left %s behind", out)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	bin := copyBinary(t, "agent")
	ca := writeFile(t, "ca.crt", testPEM, 0o644)
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		ref      string
		wantUser string
		wantEP   []string
		wantCmd  []string
	}{
		{name: "missing binary", args: []string{"-tag", "localhost/a:1", "-out", dir + "/a.tar"}, wantErr: "-binary is required"},
		{name: "missing tag", args: []string{"-binary", bin, "-out", dir + "/a.tar"}, wantErr: "-tag is required"},
		{name: "stray argument", args: []string{"-binary", bin, "x"}, wantErr: "unexpected arguments"},
		{name: "bad label", args: []string{"-label", "novalue"}, wantErr: "not KEY=VALUE"},
		{
			name: "defaults",
			args: []string{"-binary", bin, "-tag", "localhost/agent:dev", "-out", dir + "/agent.tar", "-ca-certs", ca},
			ref:  "localhost/agent:dev", wantUser: "65532:65532", wantEP: []string{"/agent"},
		},
		{
			name: "pause",
			args: []string{"-pause", "-binary", bin, "-tag", "localhost/pause:dev", "-out", dir + "/pause.tar"},
			ref:  "localhost/pause:dev", wantUser: "65535:65535", wantEP: []string{"/pause"},
		},
		{
			name: "overrides",
			args: []string{"-binary", bin, "-tag", "localhost/x:1", "-out", dir + "/x.tar", "-ca-certs", "",
				"-entrypoint", "/bin/x", "-user", "1000:1000", "-workdir", "/", "-arg", "serve", "-arg", "--listen=:8080"},
			ref: "localhost/x:1", wantUser: "1000:1000", wantEP: []string{"/bin/x"}, wantCmd: []string{"serve", "--listen=:8080"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(tt.args, &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.ref) || !strings.Contains(stdout.String(), "sha256:") {
				t.Errorf("stdout %q names neither the tag nor the digest", stdout.String())
			}
			out := tt.args[slices.Index(tt.args, "-out")+1]
			cf, _ := readArchive(t, out, tt.ref)
			if cf.Config.User != tt.wantUser || !slices.Equal(cf.Config.Entrypoint, tt.wantEP) || !slices.Equal(cf.Config.Cmd, tt.wantCmd) {
				t.Errorf("user %q entrypoint %q cmd %q, want %q %q %q",
					cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd, tt.wantUser, tt.wantEP, tt.wantCmd)
			}
		})
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	got, err := sourceDateEpoch()
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("got %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDateEpoch(); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("err = %v", err)
	}
}

func TestPauseExitsOnSIGTERM(t *testing.T) {
	cmd := exec.Command(pauseBin)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	// The first line comes after the signal handlers are installed.
	r := bufio.NewReader(stderr)
	if line, err := r.ReadString('\n'); err != nil || !strings.Contains(line, "not running as PID 1") {
		t.Fatalf("first line %q, %v", line, err)
	}
	type result struct {
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		// Wait closes the pipe, so read it to the end first.
		b, _ := io.ReadAll(r)
		done <- result{string(b), cmd.Wait()}
	}()

	if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		t.Fatalf("pause exited on SIGCHLD: %v\n%s", res.err, res.stderr)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-time.After(5 * time.Second):
		t.Fatal("pause did not exit within 5s of SIGTERM")
	case res := <-done:
		if res.err != nil {
			t.Fatalf("pause exited with %v; stderr:\n%s", res.err, res.stderr)
		}
		if !strings.Contains(res.stderr, "shutting down on terminated") {
			t.Errorf("stderr %q", res.stderr)
		}
	}
}

// DefaultSpec must describe the Dockerfile's final stage, so that the images
// the end-to-end test runs behave like the released one.
func TestDefaultSpecMatchesTheDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Instructions of the last stage, comments and continuations aside.
	final := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, arg, _ := strings.Cut(line, " ")
		switch instr = strings.ToUpper(instr); instr {
		case "FROM":
			final = map[string]string{"FROM": arg}
		case "USER", "WORKDIR", "ENTRYPOINT":
			final[instr] = arg
		}
	}
	spec := DefaultSpec("/build/bin/contextrouter")
	want := map[string]string{
		"FROM":       "gcr.io/distroless/static:nonroot",
		"USER":       spec.User,
		"WORKDIR":    spec.WorkingDir,
		"ENTRYPOINT": fmt.Sprintf("[%q]", spec.Entrypoint),
	}
	for k, v := range want {
		if final[k] != v {
			t.Errorf("Dockerfile final stage %s %q, imagebuilder's default %q", k, final[k], v)
		}
	}
	if spec.Entrypoint != "/contextrouter" {
		t.Errorf("entrypoint %q, want /contextrouter", spec.Entrypoint)
	}
	// The same user distroless/static:nonroot names, so runAsNonRoot holds.
	if spec.User != "65532:65532" || spec.WorkingDir != "/home/nonroot" {
		t.Errorf("user %q workdir %q", spec.User, spec.WorkingDir)
	}
}
