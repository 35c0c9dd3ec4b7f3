// Command imagebuilder packs one static binary into a container image and
// writes it as a docker-archive tarball, without a Docker engine:
//
//	imagebuilder -binary bin/contextrouter -tag localhost/contextrouter:dev -out bin/images/contextrouter.tar
//	imagebuilder -pause -binary bin/pause -tag localhost/pause:dev -out bin/images/pause.tar
//	ctr -n k8s.io images import bin/images/contextrouter.tar
//
// By default the image matches the Dockerfile's final stage
// (gcr.io/distroless/static:nonroot plus the binary): the binary at
// /<name> as the entrypoint, user 65532:65532, working directory
// /home/nonroot, /etc/passwd and /etc/group, /tmp, and the build host's CA
// certificates so that HTTPS and git sources work. -pause makes a pod sandbox
// image instead: /pause as user 65535, nothing else.
//
// The output is reproducible: every timestamp is $SOURCE_DATE_EPOCH (default
// 0), so the same inputs give the same image digest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "imagebuilder:", err)
		}
		os.Exit(2)
	}
}

// labelFlag collects repeated -label KEY=VALUE.
type labelFlag map[string]string

func (l labelFlag) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + l[k])
	}
	return b.String()
}

func (l labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	l[k] = v
	return nil
}

// argsFlag collects repeated -arg values, the image's default arguments.
type argsFlag []string

func (a *argsFlag) String() string     { return strings.Join(*a, " ") }
func (a *argsFlag) Set(s string) error { *a = append(*a, s); return nil }

func run(argv []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagebuilder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		binary     = fs.String("binary", "", "static Linux executable to pack (required)")
		tag        = fs.String("tag", "", "image reference to tag the archive with, e.g. localhost/contextrouter:dev (required)")
		out        = fs.String("out", "", "docker-archive tarball to write (required)")
		pause      = fs.Bool("pause", false, "make a pod sandbox image: /pause as "+PauseUser+", no other files")
		entrypoint = fs.String("entrypoint", "", "path of the binary in the image (default /<binary name>, or /pause)")
		user       = fs.String("user", "", "numeric uid:gid (default "+NonrootUser+", or "+PauseUser+")")
		workdir    = fs.String("workdir", "", "working directory (default "+NonrootHome+", or /)")
		caCerts    = fs.String("ca-certs", DefaultCACerts, `PEM CA bundle to copy into the image; "" leaves it out (ignored with -pause)`)
		labels     = labelFlag{}
		args       argsFlag
	)
	fs.Var(labels, "label", "image label KEY=VALUE (repeatable)")
	fs.Var(&args, "arg", "default argument after the entrypoint (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: imagebuilder -binary FILE -tag REF -out FILE [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(argv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, req := range []struct{ name, value string }{{"binary", *binary}, {"tag", *tag}, {"out", *out}} {
		if req.value == "" {
			return fmt.Errorf("-%s is required", req.name)
		}
	}

	spec := DefaultSpec(*binary)
	spec.CACerts = *caCerts
	if *pause {
		spec = PauseSpec(*binary)
	}
	if *entrypoint != "" {
		spec.Entrypoint = *entrypoint
	}
	if *user != "" {
		spec.User = *user
	}
	if *workdir != "" {
		spec.WorkingDir = *workdir
	}
	spec.Args = args
	if len(labels) > 0 {
		spec.Labels = labels
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	spec.Created = created

	img, err := Build(spec)
	if err != nil {
		return err
	}
	if err := WriteArchive(*out, *tag, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s (%s/%s, user %s) %s\n", *out, *tag, cf.OS, cf.Architecture, cf.Config.User, digest)
	return nil
}

// sourceDateEpoch is the reproducible-builds timestamp convention.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}
