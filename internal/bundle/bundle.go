// Package bundle builds the compiled bundle of one ContextRouter: the
// manifests of the router and of everything attached to it, as one
// multi-document YAML file that a router pod loads with internal/manifest
// exactly like the standalone CLI loads files. It also says what the pod has
// to mount for the bundle to work (directory volumes, Secrets).
//
// The package is pure: it reads no cluster. The operator gathers the objects;
// Build leaves out what cannot work (routes with invalid CEL or missing
// sources, invalid sources), refuses what must not be guessed (an invalid
// router or permission), and checks and compiles the result with
// internal/manifest and internal/engine, as a router pod does after decoding
// the bundle.
package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// Layout of a router pod. The router container runs
// `contextrouter serve -f MountDir --secrets-dir SecretsDir --cache-dir CacheDir`.
const (
	// DataKey is the ConfigMap key (and file name) of the manifests.
	DataKey = "bundle.yaml"
	// HashKey is the ConfigMap key holding Hash, for tools that only read data.
	HashKey = "hash"
	// MountDir is where the bundle ConfigMap is mounted.
	MountDir = "/etc/contextrouter/bundle"
	// SecretsDir holds one folder per Secret the router reads (<SecretsDir>/<name>/<key>),
	// the layout sources.EnvFileSecrets reads.
	SecretsDir = "/etc/contextrouter/secrets"
	// CacheDir is the writable folder for git clones.
	CacheDir = "/var/cache/contextrouter"
	// TmpDir is a writable /tmp; the root filesystem is read-only.
	TmpDir = "/tmp"

	// MaxSize is the most a ConfigMap's data may hold (keys and values), the
	// limit the API server enforces.
	MaxSize = 1 << 20
)

// Problem is one reason an object cannot be part of a bundle.
type Problem struct {
	Kind, Name string
	// Field is the path of the offending field ("" for the whole object).
	Field   string
	Message string
}

// Error returns "Kind/name: field: message".
func (p Problem) Error() string {
	var b strings.Builder
	if p.Kind != "" {
		b.WriteString(p.Kind + "/" + p.Name + ": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// InvalidError means nothing can be built: the router itself or one of its
// permissions is invalid. Permissions are never left out, because dropping a
// deny rule would widen access; the last good bundle keeps serving instead.
type InvalidError struct{ Problems []Problem }

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// RouterProblems returns the problems of the router itself.
func (e *InvalidError) RouterProblems() []Problem { return e.ofKind(v1alpha1.KindContextRouter) }

// PermissionProblems returns the problems of permissions.
func (e *InvalidError) PermissionProblems() []Problem { return e.ofKind(v1alpha1.KindAgentPermission) }

func (e *InvalidError) ofKind(kind string) []Problem {
	var out []Problem
	for _, p := range e.Problems {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

// Input is what the operator found for one router, in any order.
type Input struct {
	Router *v1alpha1.ContextRouter
	// Routes attached to the router.
	Routes []v1alpha1.ContextRoute
	// Sources that exist among those the routes name (others count as missing).
	Sources []v1alpha1.ContextSource
	// Permissions that apply to the router.
	Permissions []v1alpha1.AgentPermission
}

// Exclusion is an object left out of the bundle and why.
type Exclusion struct {
	Kind, Name string
	Reason     string
}

// DirectoryMount is a Directory source's volume as the router pod mounts it.
type DirectoryMount struct {
	// Source is the ContextSource name.
	Source string
	// MountPath is where the pod mounts the volume, and the path the bundle tells the engine to read.
	MountPath string
	// ConfigMap or ClaimName names the volume (exactly one is set).
	ConfigMap string
	ClaimName string
}

// Bundle is the compiled bundle of one router.
type Bundle struct {
	Namespace, Router string
	// Data is the bundle.yaml content.
	Data []byte
	// Hash is "sha256:<hex>" of Data.
	Hash string
	// Routes, Sources and Permissions name what the bundle holds, sorted.
	Routes, Sources, Permissions []string
	// Excluded lists what was left out, sorted by kind then name.
	Excluded []Exclusion
	// Secrets names every Secret the router reads, sorted; they are mounted
	// at SecretsDir/<name> and never copied into the bundle.
	Secrets []string
	// Directories are the volumes of Directory sources, sorted by source.
	Directories []DirectoryMount
	// CompileTime is how long checking and compiling took (all passes).
	CompileTime time.Duration
}

// Size is what the bundle occupies in a ConfigMap's data (keys and values).
func (b *Bundle) Size() int { return len(DataKey) + len(b.Data) + len(HashKey) + len(b.Hash) }

// TooLarge reports whether the bundle exceeds what a ConfigMap can hold.
func (b *Bundle) TooLarge() bool { return b.Size() > MaxSize }

// FileName is the path a router pod reads the bundle from.
const FileName = MountDir + "/" + DataKey

// kindOrder is the order of kinds in the bundle: the router first, then what
// hangs off it.
var kindOrder = map[string]int{
	v1alpha1.KindContextRouter:   0,
	v1alpha1.KindContextRoute:    1,
	v1alpha1.KindContextSource:   2,
	v1alpha1.KindAgentPermission: 3,
}

// Build compiles a router's bundle. Routes whose condition does not compile
// or whose sources are missing or invalid are left out (see Bundle.Excluded),
// so one broken route never stops the others. An invalid router or
// permission fails the build with *InvalidError.
//
// The objects are checked and compiled the way a router pod treats the
// decoded bundle: manifest's Check and Config, then engine.Compile (SkipLoad:
// sources are read by the pod, not by the operator).
func Build(ctx context.Context, in Input) (*Bundle, error) {
	if in.Router == nil {
		return nil, errors.New("bundle: no router given")
	}
	b := newBuilder(in)

	start := time.Now()
	// Every pass either succeeds, fails for good, or leaves out at least one
	// object, so the loop ends; the bound is a guard against a bug.
	for pass := 0; pass <= len(b.routes)+len(b.sources)+1; pass++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		objs := b.objects()
		problems, err := compile(ctx, objs)
		if err != nil {
			return nil, err
		}
		if len(problems) == 0 {
			took := time.Since(start)
			data, err := objs.encode()
			if err != nil {
				return nil, err
			}
			return b.finish(data, took), nil
		}
		if fatal := b.leaveOut(problems); fatal != nil {
			return nil, fatal
		}
	}
	return nil, errors.New("bundle: compile did not converge (a bug: please report it)")
}

// newBuilder takes defaulted copies of the input, sorted, and leaves out what
// cannot work before anything is compiled: routes naming missing sources and
// sources whose volume cannot be mounted.
func newBuilder(in Input) *builder {
	router := in.Router.DeepCopy()
	router.Default()

	b := &builder{
		router:   router,
		routes:   make(map[string]*v1alpha1.ContextRoute, len(in.Routes)),
		sources:  make(map[string]*v1alpha1.ContextSource, len(in.Sources)),
		perms:    make([]*v1alpha1.AgentPermission, 0, len(in.Permissions)),
		excluded: make(map[string]Exclusion),
	}
	for i := range in.Routes {
		rt := in.Routes[i].DeepCopy()
		rt.Default()
		b.routes[rt.Name] = rt
	}
	for i := range in.Sources {
		src := in.Sources[i].DeepCopy()
		src.Default()
		b.sources[src.Name] = src
	}
	for i := range in.Permissions {
		p := in.Permissions[i].DeepCopy()
		p.Default()
		b.perms = append(b.perms, p)
	}
	slices.SortFunc(b.perms, func(x, y *v1alpha1.AgentPermission) int { return strings.Compare(x.Name, y.Name) })

	b.excludeMissingSources()
	b.placeDirectories()
	return b
}

// builder holds the objects still in the bundle.
type builder struct {
	router   *v1alpha1.ContextRouter
	routes   map[string]*v1alpha1.ContextRoute
	sources  map[string]*v1alpha1.ContextSource
	perms    []*v1alpha1.AgentPermission
	mounts   map[string]DirectoryMount // by source
	excluded map[string]Exclusion      // by Kind/name
}

func (b *builder) exclude(kind, name, reason string) {
	key := kind + "/" + name
	if _, ok := b.excluded[key]; ok {
		return
	}
	b.excluded[key] = Exclusion{Kind: kind, Name: name, Reason: reason}
	switch kind {
	case v1alpha1.KindContextRoute:
		delete(b.routes, name)
	case v1alpha1.KindContextSource:
		delete(b.sources, name)
		delete(b.mounts, name)
		// A route is only useful with all of its sources.
		for _, rn := range sortedKeys(b.routes) {
			for _, ref := range b.routes[rn].Spec.Sources {
				if ref.Name == name {
					b.exclude(v1alpha1.KindContextRoute, rn, fmt.Sprintf("ContextSource %q is left out: %s", name, reason))
					break
				}
			}
		}
	}
}

// excludeMissingSources leaves out routes that name a source that was not found.
func (b *builder) excludeMissingSources() {
	for _, rn := range sortedKeys(b.routes) {
		var missing []string
		for _, ref := range b.routes[rn].Spec.Sources {
			if b.sources[ref.Name] == nil {
				missing = append(missing, fmt.Sprintf("%q", ref.Name))
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			b.exclude(v1alpha1.KindContextRoute, rn, "ContextSource "+missing[0]+" not found")
		default:
			b.exclude(v1alpha1.KindContextRoute, rn, "ContextSources "+strings.Join(missing, ", ")+" not found")
		}
	}
}

// placeDirectories decides where each volume-backed Directory source is
// mounted, and leaves out sources whose mount cannot work.
func (b *builder) placeDirectories() {
	b.mounts = make(map[string]DirectoryMount)
	byPath := make(map[string]DirectoryMount)
	for _, name := range sortedKeys(b.sources) {
		d := b.sources[name].Spec.Directory
		if d == nil || d.Volume == nil {
			continue
		}
		m := DirectoryMount{Source: name, MountPath: MountPath(name, d.Path)}
		switch v := d.Volume; {
		case v.ConfigMap != nil && v.PersistentVolumeClaim == nil:
			m.ConfigMap = v.ConfigMap.Name
		case v.PersistentVolumeClaim != nil && v.ConfigMap == nil:
			m.ClaimName = v.PersistentVolumeClaim.ClaimName
		default:
			b.exclude(v1alpha1.KindContextSource, name, "spec.directory.volume: exactly one of configMap and persistentVolumeClaim must be set")
			continue
		}
		if msg := reservedPath(m.MountPath); msg != "" {
			b.exclude(v1alpha1.KindContextSource, name, fmt.Sprintf("spec.directory.path: %q %s", m.MountPath, msg))
			continue
		}
		if other, ok := byPath[m.MountPath]; ok && (other.ConfigMap != m.ConfigMap || other.ClaimName != m.ClaimName) {
			b.exclude(v1alpha1.KindContextSource, name, fmt.Sprintf(
				"spec.directory.path: ContextSource %q mounts another volume at %q", other.Source, m.MountPath))
			continue
		}
		byPath[m.MountPath] = m
		b.mounts[name] = m
	}
}

// MountPath is where a router pod mounts a Directory source's volume:
// spec.directory.path when absolute, else sources.DirectoryMountRoot/<source>.
// A relative path only has a meaning next to manifest files, which a cluster
// does not have.
func MountPath(source, dirPath string) string {
	if path.IsAbs(dirPath) {
		return path.Clean(dirPath)
	}
	return path.Join(sources.DirectoryMountRoot, source)
}

// reservedDirs are folders of the router pod that a source volume must not
// hide or sit inside.
var reservedDirs = []string{MountDir, SecretsDir, CacheDir, TmpDir}

// systemDirs would break the container if a volume hid them.
var systemDirs = []string{"/bin", "/dev", "/etc", "/lib", "/proc", "/sbin", "/sys", "/usr"}

func reservedPath(p string) string {
	within := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	for _, dir := range reservedDirs {
		if within(p, dir) || within(dir, p) {
			return "collides with " + dir + ", which the router pod uses"
		}
	}
	for _, dir := range systemDirs {
		if p == dir || (dir != "/etc" && within(p, dir)) {
			return "would hide the system folder " + dir
		}
	}
	if p == "/" {
		return "would hide the root filesystem"
	}
	return ""
}

// leaveOut excludes the routes and sources with problems; problems of the
// router or a permission are returned as *InvalidError.
func (b *builder) leaveOut(problems []Problem) error {
	var fatal []Problem
	progress := false
	for _, p := range problems {
		switch p.Kind {
		case v1alpha1.KindContextRoute:
			if b.routes[p.Name] != nil {
				b.exclude(p.Kind, p.Name, problemReason(p))
				progress = true
			}
		case v1alpha1.KindContextSource:
			if b.sources[p.Name] != nil {
				b.exclude(p.Kind, p.Name, problemReason(p))
				progress = true
			}
		default:
			fatal = append(fatal, p)
		}
	}
	if len(fatal) > 0 || !progress {
		if len(fatal) == 0 {
			fatal = problems
		}
		return &InvalidError{Problems: fatal}
	}
	return nil
}

func problemReason(p Problem) string {
	if p.Field != "" {
		return p.Field + ": " + p.Message
	}
	return p.Message
}

// included returns the sources that the remaining routes reference, sorted.
func (b *builder) included() []string {
	used := make(map[string]bool)
	for _, rt := range b.routes {
		for _, ref := range rt.Spec.Sources {
			used[ref.Name] = true
		}
	}
	var names []string
	for name := range used {
		if b.sources[name] != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// objects are the bundle's objects exactly as a router pod decodes them:
// defaulted, the router without spec.deployment, Directory paths pointing at
// their mounts; routes, sources and permissions sorted by name.
type objects struct {
	router      v1alpha1.ContextRouter
	routes      []v1alpha1.ContextRoute
	sources     []v1alpha1.ContextSource
	permissions []v1alpha1.AgentPermission
}

func (b *builder) objects() *objects {
	o := &objects{router: v1alpha1.ContextRouter{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextRouter},
		ObjectMeta: bundleMeta(b.router.Name, b.router.Namespace),
		Spec:       *b.router.Spec.DeepCopy(),
	}}
	// How the router runs is the Deployment's business: scaling or a new
	// image must not change the bundle and roll the pods a second time.
	o.router.Spec.Deployment = v1alpha1.DeploymentSpec{}
	o.router.Default()
	for _, name := range sortedKeys(b.routes) {
		rt := b.routes[name]
		o.routes = append(o.routes, v1alpha1.ContextRoute{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextRoute},
			ObjectMeta: bundleMeta(rt.Name, rt.Namespace), Spec: *rt.Spec.DeepCopy(),
		})
	}
	for _, name := range b.included() {
		src := b.sources[name]
		spec := src.Spec.DeepCopy()
		if m, ok := b.mounts[name]; ok {
			// The path the pod reads: where the volume is mounted.
			spec.Directory.Path = m.MountPath
		}
		o.sources = append(o.sources, v1alpha1.ContextSource{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextSource},
			ObjectMeta: bundleMeta(src.Name, src.Namespace), Spec: *spec,
		})
	}
	for _, p := range b.perms {
		o.permissions = append(o.permissions, v1alpha1.AgentPermission{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindAgentPermission},
			ObjectMeta: bundleMeta(p.Name, p.Namespace), Spec: *p.Spec.DeepCopy(),
		})
	}
	return o
}

// bundleMeta is all the metadata a bundle keeps: no labels, annotations,
// UIDs or managed fields, which would change the hash without changing
// what the router does.
func bundleMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

// document is how an object is written to the bundle: no status, no
// metadata but the name and namespace.
type document struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       any      `json:"spec"`
}

type metadata struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// encode renders the objects: kinds in kindOrder, names sorted.
func (o *objects) encode() ([]byte, error) {
	var buf bytes.Buffer
	add := func(kind string, meta metav1.ObjectMeta, spec any) error {
		y, err := yaml.Marshal(document{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: kind,
			Metadata: metadata{Name: meta.Name, Namespace: meta.Namespace}, Spec: spec,
		})
		if err != nil {
			return fmt.Errorf("bundle: encoding %s/%s: %w", kind, meta.Name, err)
		}
		if buf.Len() > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(y)
		return nil
	}
	routerSpec, err := withoutDeployment(&o.router.Spec)
	if err != nil {
		return nil, err
	}
	if err := add(v1alpha1.KindContextRouter, o.router.ObjectMeta, routerSpec); err != nil {
		return nil, err
	}
	for i := range o.routes {
		if err := add(v1alpha1.KindContextRoute, o.routes[i].ObjectMeta, &o.routes[i].Spec); err != nil {
			return nil, err
		}
	}
	for i := range o.sources {
		if err := add(v1alpha1.KindContextSource, o.sources[i].ObjectMeta, &o.sources[i].Spec); err != nil {
			return nil, err
		}
	}
	for i := range o.permissions {
		if err := add(v1alpha1.KindAgentPermission, o.permissions[i].ObjectMeta, &o.permissions[i].Spec); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// withoutDeployment leaves spec.deployment out of the written router: it is
// not routing configuration (and an empty struct would still be encoded).
// The pod's loader defaults it back.
func withoutDeployment(spec *v1alpha1.ContextRouterSpec) (map[string]json.RawMessage, error) {
	j, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("bundle: encoding the router spec: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, fmt.Errorf("bundle: encoding the router spec: %w", err)
	}
	delete(m, "deployment")
	return m, nil
}

// compile checks and compiles the objects the way a router pod does with
// the decoded bundle: manifest's Check and Config, then engine.Compile
// (SkipLoad: the pod reads the sources). Decoding is left out: the objects
// are the typed values the bundle encodes, and the encoding round-trips
// (see the package tests), so decoding would only cost time. Problems come
// back attributed to objects; an error means something else is wrong.
func compile(ctx context.Context, o *objects) ([]Problem, error) {
	set := &manifest.Set{
		Routers:     []v1alpha1.ContextRouter{o.router},
		Routes:      o.routes,
		Sources:     o.sources,
		Permissions: o.permissions,
		Namespace:   o.router.Namespace,
	}
	var problems []manifest.Problem
	for _, p := range set.Check() {
		if !p.Warning {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return fromManifest(problems), nil
	}
	cfg, err := set.Config("")
	if err != nil {
		return nil, fmt.Errorf("bundle: selecting the router: %w", err)
	}
	// In the pod, relative paths resolve against the bundle's folder.
	for _, s := range cfg.Sources {
		cfg.BaseDirs[s.Name] = MountDir
	}
	_, err = engine.Compile(ctx, cfg, engine.Options{SkipLoad: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		return nil, nil
	}
	var ce *engine.CompileError
	if !errors.As(err, &ce) {
		return nil, err
	}
	out := make([]Problem, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = Problem{Kind: p.Kind, Name: p.Name, Field: p.Field, Message: p.Msg}
	}
	return out, nil
}

func fromManifest(ps []manifest.Problem) []Problem {
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{Kind: p.Kind, Name: p.Name, Field: p.Field, Message: p.Message}
	}
	return out
}

func (b *builder) finish(data []byte, took time.Duration) *Bundle {
	sum := sha256.Sum256(data)
	out := &Bundle{
		Namespace:   b.router.Namespace,
		Router:      b.router.Name,
		Data:        data,
		Hash:        "sha256:" + hex.EncodeToString(sum[:]),
		Routes:      sortedKeys(b.routes),
		Sources:     b.included(),
		CompileTime: took,
	}
	for _, p := range b.perms {
		out.Permissions = append(out.Permissions, p.Name)
	}
	srcs := make([]*v1alpha1.ContextSource, len(out.Sources))
	for i, name := range out.Sources {
		srcs[i] = b.sources[name]
		if m, ok := b.mounts[name]; ok {
			out.Directories = append(out.Directories, m)
		}
	}
	out.Secrets = secretNames(b.router, srcs)
	for _, e := range b.excluded {
		out.Excluded = append(out.Excluded, e)
	}
	slices.SortFunc(out.Excluded, func(x, y Exclusion) int {
		if d := kindOrder[x.Kind] - kindOrder[y.Kind]; d != 0 {
			return d
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

// SourceSecrets names the Secrets a source reads: httpAPI header values and
// git credentials.
func SourceSecrets(s *v1alpha1.ContextSource) []string {
	var names []string
	if h := s.Spec.HTTPAPI; h != nil {
		for _, hd := range h.Headers {
			if hd.ValueFrom != nil {
				names = append(names, hd.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	if g := s.Spec.GitRepo; g != nil && g.Auth != nil {
		names = append(names, g.Auth.SecretRef.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
