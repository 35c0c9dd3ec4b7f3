package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Defaults that mirror the Dockerfile's final stage (distroless/static:nonroot
// with the binary at the root): keep the two in step.
const (
	NonrootUser    = "65532:65532"
	NonrootHome    = "/home/nonroot"
	DefaultCACerts = "/etc/ssl/certs/ca-certificates.crt"
	// PauseUser is the user of the upstream pause image: an ID no other
	// container on the node uses.
	PauseUser = "65535:65535"
)

// imageCACertPath is where Go's crypto/x509 and distroless look for the CA
// bundle on Linux.
const imageCACertPath = "etc/ssl/certs/ca-certificates.crt"

// defaultEnv is distroless/static's environment.
var defaultEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/" + imageCACertPath,
}

// Spec describes one single-binary image.
type Spec struct {
	// Binary is the static executable to pack.
	Binary string
	// Entrypoint is the binary's absolute path in the image; its arguments
	// follow in Args.
	Entrypoint string
	Args       []string
	// User is "uid:gid", numeric so that runAsNonRoot can verify it.
	User string
	// WorkingDir is created (owned by User) unless it is "/".
	WorkingDir string
	// CACerts is a PEM bundle copied to /etc/ssl/certs/ca-certificates.crt;
	// empty leaves it out.
	CACerts string
	// Minimal adds /etc/passwd and /etc/group naming root, nobody and
	// nonroot (for programs that look the user up), /tmp and the CA bundle.
	// A pause image needs none of it.
	Minimal bool
	// Labels are the image config's labels.
	Labels map[string]string
	// Created is the timestamp of the config and of every file, fixed so
	// that the same inputs give the same digest.
	Created time.Time
}

// PauseSpec returns the Spec of a pod sandbox ("pause") image for binary.
func PauseSpec(binary string) Spec {
	return Spec{Binary: binary, Entrypoint: "/pause", User: PauseUser, WorkingDir: "/"}
}

// DefaultSpec returns the Spec of an image like the Dockerfile's: the binary
// at /<name>, user 65532, working directory /home/nonroot, CA certificates
// from the build host.
func DefaultSpec(binary string) Spec {
	return Spec{
		Binary:     binary,
		Entrypoint: "/" + filepath.Base(binary),
		User:       NonrootUser,
		WorkingDir: NonrootHome,
		CACerts:    DefaultCACerts,
		Minimal:    true,
	}
}

// Build returns the image that s describes: one layer on an empty base.
func Build(s Spec) (v1.Image, error) {
	uid, gid, err := parseUser(s.User)
	if err != nil {
		return nil, err
	}
	if !path.IsAbs(s.Entrypoint) || path.Clean(s.Entrypoint) != s.Entrypoint || s.Entrypoint == "/" {
		return nil, fmt.Errorf("entrypoint %q: must be a clean absolute file path", s.Entrypoint)
	}
	if !path.IsAbs(s.WorkingDir) || path.Clean(s.WorkingDir) != s.WorkingDir {
		return nil, fmt.Errorf("workdir %q: must be a clean absolute path", s.WorkingDir)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	arch, err := staticELFArch(s.Binary)
	if err != nil {
		return nil, err
	}

	if s.Created.IsZero() {
		s.Created = time.Unix(0, 0)
	}
	s.Created = s.Created.UTC().Truncate(time.Second)

	l := newLayer(s.Created)
	if s.Minimal {
		l.dir("etc", 0o755, 0, 0)
		l.file("etc/passwd", 0o644, 0, 0, []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n"+
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"))
		l.file("etc/group", 0o644, 0, 0, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"))
		// Sticky and world-writable, like every /tmp; pods usually mount
		// an emptyDir over it because the root filesystem is read-only.
		l.dir("tmp", 0o1777, 0, 0)
	}
	if s.CACerts != "" {
		pem, err := os.ReadFile(s.CACerts)
		if err != nil {
			return nil, fmt.Errorf("CA certificates (HTTPS and git sources need them; an empty -ca-certs leaves them out): %w", err)
		}
		if !bytes.Contains(pem, []byte("-----BEGIN CERTIFICATE-----")) {
			return nil, fmt.Errorf("CA certificates %s: no PEM certificate in the file", s.CACerts)
		}
		l.dir("etc/ssl/certs", 0o755, 0, 0)
		l.file(imageCACertPath, 0o644, 0, 0, pem)
	}
	if s.WorkingDir != "/" {
		l.dir(strings.TrimPrefix(s.WorkingDir, "/"), 0o700, uid, gid)
	}
	l.file(strings.TrimPrefix(s.Entrypoint, "/"), 0o755, 0, 0, bin)
	data, err := l.bytes()
	if err != nil {
		return nil, err
	}

	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: s.Created},
			CreatedBy: "imagebuilder: " + filepath.Base(s.Binary) + " as " + s.Entrypoint,
			Comment:   "github.com/contextrouter/contextrouter/hack/imagebuilder",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = v1.Time{Time: s.Created}
	cf.Config = v1.Config{
		User:       s.User,
		Entrypoint: []string{s.Entrypoint},
		Cmd:        slices.Clone(s.Args),
		WorkingDir: s.WorkingDir,
		Env:        slices.Clone(defaultEnv),
		Labels:     s.Labels,
	}
	if len(cf.Config.Cmd) == 0 {
		cf.Config.Cmd = nil
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// WriteArchive writes img as a docker-archive tarball (what `docker load`
// and `ctr images import` read) tagged ref. The file appears complete or
// not at all.
func WriteArchive(out, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("tag %q: %w", ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// parseUser splits "uid:gid"; names are refused because a kubelet cannot
// check that a named user is not root (runAsNonRoot).
func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if !ok {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", u)
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid:gid", u)
	}
	return uid, gid, nil
}

// elfArch maps ELF machines to OCI architecture names.
var elfArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// staticELFArch returns the architecture of the Linux executable at p, and
// an error when it is not one or needs a dynamic loader: the image has no
// libc, so such a binary would fail with a puzzling "no such file or
// directory" at container start.
func staticELFArch(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("binary %s: not an ELF executable: %w", p, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("binary %s: ELF type %s is not an executable", p, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "", fmt.Errorf("binary %s: dynamically linked (has an ELF interpreter); build it with CGO_ENABLED=0", p)
		}
	}
	arch, ok := elfArch[f.Machine]
	if !ok {
		return "", fmt.Errorf("binary %s: unsupported ELF machine %s", p, f.Machine)
	}
	if f.Machine == elf.EM_PPC64 && f.Data == elf.ELFDATA2MSB {
		arch = "ppc64"
	}
	return arch, nil
}

// layer collects tar entries, adding each missing parent directory (root
// owned, 0755) first, as container runtimes expect.
type layer struct {
	mtime   time.Time
	buf     bytes.Buffer
	tw      *tar.Writer
	written map[string]bool
	err     error
}

func newLayer(mtime time.Time) *layer {
	l := &layer{mtime: mtime, written: map[string]bool{}}
	l.tw = tar.NewWriter(&l.buf)
	return l
}

func (l *layer) parents(p string) {
	if d := path.Dir(p); d != "." {
		if !l.written[d] {
			l.dir(d, 0o755, 0, 0)
		}
	}
}

func (l *layer) dir(p string, mode int64, uid, gid int) {
	l.parents(p)
	l.header(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: gid})
	l.written[p] = true
}

func (l *layer) file(p string, mode int64, uid, gid int, data []byte) {
	l.parents(p)
	l.header(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Uid: uid, Gid: gid, Size: int64(len(data))})
	if l.err == nil {
		_, l.err = l.tw.Write(data)
	}
	l.written[p] = true
}

func (l *layer) header(h *tar.Header) {
	if l.err != nil {
		return
	}
	if p := strings.TrimSuffix(h.Name, "/"); l.written[p] {
		l.err = fmt.Errorf("layer: /%s added twice", p)
		return
	}
	h.ModTime = l.mtime
	l.err = l.tw.WriteHeader(h)
}

func (l *layer) bytes() ([]byte, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := l.tw.Close(); err != nil {
		return nil, errors.Join(errors.New("layer"), err)
	}
	return l.buf.Bytes(), nil
}
