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
// the bundle. Its verdict on every object is the one the operator writes
// into their status: what a router serves and what its objects report
// cannot disagree.
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
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/problem"
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

// Input is what the operator found for one router, in any order.
type Input struct {
	Router *v1alpha1.ContextRouter
	// Routes attached to the router.
	Routes []v1alpha1.ContextRoute
	// Sources that exist among those the routes name (others count as missing).
	Sources []v1alpha1.ContextSource
	// Permissions that apply to the router.
	Permissions []v1alpha1.AgentPermission
	// Classifiers attached to the router.
	Classifiers []v1alpha1.ContextClassifier
}

// Verdict is the bundle's judgement of one object under the router.
type Verdict struct {
	Kind, Name string
	// Included reports whether the bundle holds the object.
	Included bool
	// Problems say why the object is left out, or, for the router and its
	// permissions, why no bundle is built (errors only). A source with no
	// problems that is not included is used by no included route; an object
	// with no problems is not included either when the build is refused.
	Problems problem.List
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
	// Classifiers names the classifiers the bundle holds, sorted; Trained
	// describes them as the compile trained them (inline examples only: an
	// examplesFrom file is read by the pod, and such a classifier is not trained here).
	Classifiers []string
	Trained     []engine.ClassifierStatus
	// Verdicts judge the router and every route, source and permission it
	// was given: sorted by kind (router, routes, sources, permissions), then name.
	Verdicts []Verdict
	// Refused holds the problems of the router or of permissions that stop
	// the bundle from being built: Data, Hash and the lists of what the
	// bundle holds are empty then, and the last good bundle keeps serving.
	// Permissions are never left out, because dropping a deny rule would
	// widen access.
	Refused problem.List
	// Secrets names every Secret the router reads, sorted; they are mounted
	// at SecretsDir/<name> and never copied into the bundle.
	Secrets []string
	// Directories are the volumes of Directory sources, sorted by source.
	Directories []DirectoryMount
	// ToolSources: the bundle holds a Tools or MCP source, whose status
	// the router pods report (api.md §10.9).
	ToolSources bool
	// CompileTime is how long checking and compiling took (all passes).
	CompileTime time.Duration
}

// Excluded returns the verdicts of the objects left out for a problem of
// their own, in Verdicts order.
func (b *Bundle) Excluded() []Verdict {
	var out []Verdict
	for _, v := range b.Verdicts {
		if !v.Included && len(v.Problems) > 0 && (v.Kind == v1alpha1.KindContextRoute || v.Kind == v1alpha1.KindContextSource || v.Kind == v1alpha1.KindContextClassifier) {
			out = append(out, v)
		}
	}
	return out
}

// Verdict returns the verdict on kind/name, if the router was given it.
func (b *Bundle) Verdict(kind, name string) (Verdict, bool) {
	i, ok := slices.BinarySearchFunc(b.Verdicts, Verdict{Kind: kind, Name: name}, compareVerdicts)
	if !ok {
		return Verdict{}, false
	}
	return b.Verdicts[i], true
}

// compareVerdicts orders verdicts by kind (kindOrder), then name.
func compareVerdicts(x, y Verdict) int {
	if d := kindOrder[x.Kind] - kindOrder[y.Kind]; d != 0 {
		return d
	}
	return strings.Compare(x.Name, y.Name)
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
	// After the rest, so that bundles without classifiers keep their hash.
	v1alpha1.KindContextClassifier: 4,
}

// Build compiles a router's bundle and judges every object it was given
// (Bundle.Verdicts). Routes whose condition does not compile or whose
// sources are missing or invalid are left out, so one broken route never
// stops the others. An invalid router or permission refuses the build
// (Bundle.Refused); the other objects are still judged. An error means
// something else went wrong (a cancelled context, a bug).
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
	// Every pass either finds nothing, or leaves out or refuses at least one
	// object, or finds only problems of the router; so the loop ends. The
	// bound is a guard against a bug.
	for pass := 0; ; pass++ {
		if pass > len(b.routes)+len(b.sources)+len(b.perms)+len(b.classifiers)+1 {
			return nil, errors.New("bundle: compile did not converge (a bug: please report it)")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		objs := b.objects()
		problems, trained, err := compile(ctx, objs)
		if err != nil {
			return nil, err
		}
		progress, err := b.judge(problems)
		if err != nil {
			return nil, err
		}
		if progress {
			continue
		}
		if len(b.refused) == 0 && problems.HasErrors() {
			return nil, fmt.Errorf("bundle: problems the builder cannot act on (a bug: please report it):\n%s", problems.Errors().Error())
		}
		took := time.Since(start)
		if len(b.refused) > 0 {
			return b.finish(nil, nil, took), nil
		}
		data, err := objs.encode()
		if err != nil {
			return nil, err
		}
		return b.finish(data, trained, took), nil
	}
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
		excluded: make(map[string]problem.List),

		classifiers: make(map[string]*v1alpha1.ContextClassifier, len(in.Classifiers)),
	}
	for i := range in.Classifiers {
		c := in.Classifiers[i].DeepCopy()
		c.Default()
		b.classifiers[c.Name] = c
		b.given = append(b.given, key(v1alpha1.KindContextClassifier, c.Name))
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
	for _, rt := range b.routes {
		b.given = append(b.given, key(v1alpha1.KindContextRoute, rt.Name))
	}
	for _, src := range b.sources {
		b.given = append(b.given, key(v1alpha1.KindContextSource, src.Name))
	}
	for _, p := range b.perms {
		b.given = append(b.given, key(v1alpha1.KindAgentPermission, p.Name))
	}

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
	excluded map[string]problem.List   // by Kind/name: left out, and why
	refused  problem.List              // router and permission problems
	given    []string                  // Kind/name of every route, source and permission given

	classifiers map[string]*v1alpha1.ContextClassifier
}

func key(kind, name string) string { return kind + "/" + name }

// exclude leaves a route or a source out for problems. A route is only
// useful with all of its sources, so leaving out a source leaves out the
// routes that use it.
func (b *builder) exclude(kind, name string, problems problem.List) {
	k := key(kind, name)
	if _, ok := b.excluded[k]; ok {
		return
	}
	b.excluded[k] = problems
	switch kind {
	case v1alpha1.KindContextRoute:
		delete(b.routes, name)
	case v1alpha1.KindContextClassifier:
		delete(b.classifiers, name)
		// A route reading the classifier cannot be compiled without it.
		for _, rn := range sortedKeys(b.routes) {
			if slices.Contains(engine.ConditionClassifiers(b.routes[rn].Spec.When), name) {
				b.exclude(v1alpha1.KindContextRoute, rn, problem.List{problem.Errorf(v1alpha1.ReasonInvalidCondition,
					v1alpha1.KindContextRoute, rn, "spec.when", "ContextClassifier %q is left out: %s", name, problems.Details())})
			}
		}
	case v1alpha1.KindContextSource:
		delete(b.sources, name)
		delete(b.mounts, name)
		for _, cn := range sortedKeys(b.classifiers) {
			for _, f := range b.classifiers[cn].Files() {
				if f.File.Source == name {
					b.exclude(v1alpha1.KindContextClassifier, cn, problem.List{problem.Errorf(v1alpha1.ReasonInvalidSource,
						v1alpha1.KindContextClassifier, cn, f.Field, "ContextSource %q is left out: %s", name, problems.Details())})
					break
				}
			}
		}
		for _, rn := range sortedKeys(b.routes) {
			for i, ref := range b.routes[rn].Spec.Sources {
				if ref.Name == name {
					b.exclude(v1alpha1.KindContextRoute, rn, problem.List{problem.Errorf(v1alpha1.ReasonInvalidSource,
						v1alpha1.KindContextRoute, rn, fmt.Sprintf("spec.sources[%d].name", i),
						"ContextSource %q is left out: %s", name, problems.Details())})
					break
				}
			}
		}
	}
}

// excludeMissingSources leaves out routes that name a source that was not
// found, and classifiers whose examples file is in such a source.
func (b *builder) excludeMissingSources() {
	for _, cn := range sortedKeys(b.classifiers) {
		var missing problem.List
		for _, f := range b.classifiers[cn].Files() {
			if b.sources[f.File.Source] == nil {
				missing = append(missing, problem.Errorf(v1alpha1.ReasonSourceNotFound, v1alpha1.KindContextClassifier, cn,
					f.Field, "ContextSource %q not found", f.File.Source))
			}
		}
		if len(missing) > 0 {
			b.exclude(v1alpha1.KindContextClassifier, cn, missing)
		}
	}
	for _, rn := range sortedKeys(b.routes) {
		var missing problem.List
		for i, ref := range b.routes[rn].Spec.Sources {
			if b.sources[ref.Name] == nil {
				missing = append(missing, problem.Errorf(v1alpha1.ReasonSourceNotFound, v1alpha1.KindContextRoute, rn,
					fmt.Sprintf("spec.sources[%d].name", i), "ContextSource %q not found", ref.Name))
			}
		}
		if len(missing) > 0 {
			b.exclude(v1alpha1.KindContextRoute, rn, missing)
		}
	}
}

// placeDirectories decides where each volume-backed Directory source is
// mounted, and leaves out sources whose mount cannot work: on a folder the
// pod needs (MountProblems), or where another source of the router mounts a
// different volume.
func (b *builder) placeDirectories() {
	b.mounts = make(map[string]DirectoryMount)
	byPath := make(map[string]DirectoryMount)
	for _, name := range sortedKeys(b.sources) {
		src := b.sources[name]
		m, ok := mountOf(src)
		if !ok {
			continue // no volume, or not exactly one: Check reports the latter
		}
		if ps := MountProblems(src); len(ps) > 0 {
			b.exclude(v1alpha1.KindContextSource, name, ps)
			continue
		}
		if other, ok := byPath[m.MountPath]; ok && (other.ConfigMap != m.ConfigMap || other.ClaimName != m.ClaimName) {
			_, at := src.DirectoryBlock()
			b.exclude(v1alpha1.KindContextSource, name, problem.List{problem.Errorf(v1alpha1.ReasonInvalidMount,
				v1alpha1.KindContextSource, name, at+".path",
				"ContextSource %q of the same router mounts another volume at %q", other.Source, m.MountPath)})
			continue
		}
		byPath[m.MountPath] = m
		b.mounts[name] = m
	}
}

// mountOf is where a source's volume goes, if it has exactly one.
func mountOf(src *v1alpha1.ContextSource) (DirectoryMount, bool) {
	d, _ := src.DirectoryBlock()
	if d == nil || d.Volume == nil {
		return DirectoryMount{}, false
	}
	m := DirectoryMount{Source: src.Name, MountPath: sources.MountPath(src.Name, d.Path)}
	switch v := d.Volume; {
	case v.ConfigMap != nil && v.PersistentVolumeClaim == nil:
		m.ConfigMap = v.ConfigMap.Name
	case v.PersistentVolumeClaim != nil && v.ConfigMap == nil:
		m.ClaimName = v.PersistentVolumeClaim.ClaimName
	default:
		return DirectoryMount{}, false
	}
	return m, true
}

// MountProblems says why a source's volume cannot be mounted in any router
// pod: its mount path hides or sits inside a folder the pod needs. (Whether
// it collides with another source's volume depends on the router.) The
// operator reports these in the source's own status too.
func MountProblems(src *v1alpha1.ContextSource) problem.List {
	m, ok := mountOf(src)
	if !ok {
		return nil
	}
	if msg := reservedPath(m.MountPath); msg != "" {
		_, at := src.DirectoryBlock()
		return problem.List{problem.Errorf(v1alpha1.ReasonInvalidMount, v1alpha1.KindContextSource, src.Name,
			at+".path", "%q %s", m.MountPath, msg)}
	}
	return nil
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

// judge acts on one pass's problems: routes and sources are left out,
// permissions are refused and taken out of later passes, router problems are
// recorded. It reports whether anything was left out or taken out, which
// calls for another pass.
func (b *builder) judge(problems problem.List) (bool, error) {
	progress := false
	byObject := make(map[string]problem.List)
	var order []string
	for _, p := range problems.Errors() {
		k := key(p.Kind, p.Name)
		if _, ok := byObject[k]; !ok {
			order = append(order, k)
		}
		byObject[k] = append(byObject[k], p)
	}
	for _, k := range order {
		ps := byObject[k]
		kind, name := ps[0].Kind, ps[0].Name
		switch kind {
		case v1alpha1.KindContextRoute:
			if b.routes[name] != nil {
				b.exclude(kind, name, ps)
				progress = true
			}
		case v1alpha1.KindContextSource:
			if b.sources[name] != nil {
				b.exclude(kind, name, ps)
				progress = true
			}
		case v1alpha1.KindContextClassifier:
			if b.classifiers[name] != nil {
				b.exclude(kind, name, ps)
				progress = true
			}
		case v1alpha1.KindAgentPermission:
			if i := slices.IndexFunc(b.perms, func(p *v1alpha1.AgentPermission) bool { return p.Name == name }); i >= 0 {
				b.refused = append(b.refused, ps...)
				b.perms = slices.Delete(b.perms, i, i+1)
				progress = true
			}
		case v1alpha1.KindContextRouter:
			for _, p := range ps {
				if !slices.Contains(b.refused, p) {
					b.refused = append(b.refused, p)
				}
			}
		default:
			return false, fmt.Errorf("bundle: a problem of no object: %s", problem.List(ps).Error())
		}
	}
	return progress, nil
}

// included returns the sources that the remaining routes reference, and
// those holding a remaining classifier's examples file, sorted.
func (b *builder) included() []string {
	used := make(map[string]bool)
	for _, rt := range b.routes {
		for _, ref := range rt.Spec.Sources {
			used[ref.Name] = true
		}
	}
	for _, c := range b.classifiers {
		for _, n := range c.SourceNames() {
			used[n] = true
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
	classifiers []v1alpha1.ContextClassifier
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
			d, _ := (&v1alpha1.ContextSource{Spec: *spec}).DirectoryBlock()
			d.Path = m.MountPath
		}
		meta := bundleMeta(src.Name, src.Namespace)
		// The approvals decide which tools the router serves (api.md §10.9):
		// the one annotation a bundle keeps.
		if v, ok := src.Annotations[v1alpha1.AnnotationApprovedTools]; ok && spec.HoldsTools() {
			meta.Annotations = map[string]string{v1alpha1.AnnotationApprovedTools: v}
		}
		o.sources = append(o.sources, v1alpha1.ContextSource{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextSource},
			ObjectMeta: meta, Spec: *spec,
		})
	}
	for _, p := range b.perms {
		o.permissions = append(o.permissions, v1alpha1.AgentPermission{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindAgentPermission},
			ObjectMeta: bundleMeta(p.Name, p.Namespace), Spec: *p.Spec.DeepCopy(),
		})
	}
	for _, name := range sortedKeys(b.classifiers) {
		c := b.classifiers[name]
		o.classifiers = append(o.classifiers, v1alpha1.ContextClassifier{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextClassifier},
			ObjectMeta: bundleMeta(c.Name, c.Namespace), Spec: *c.Spec.DeepCopy(),
		})
	}
	return o
}

// bundleMeta is all the metadata a bundle keeps: no labels, annotations
// (but a source's tool approvals), UIDs or managed fields, which would
// change the hash without changing what the router does.
func bundleMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

// document is how an object is written to the bundle: no status, no
// metadata but the name, namespace and a source's tool approvals.
type document struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       any      `json:"spec"`
}

type metadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// encode renders the objects: kinds in kindOrder, names sorted.
func (o *objects) encode() ([]byte, error) {
	var buf bytes.Buffer
	add := func(kind string, meta metav1.ObjectMeta, spec any) error {
		y, err := yaml.Marshal(document{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: kind,
			Metadata: metadata{Name: meta.Name, Namespace: meta.Namespace, Annotations: meta.Annotations}, Spec: spec,
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
	for i := range o.classifiers {
		if err := add(v1alpha1.KindContextClassifier, o.classifiers[i].ObjectMeta, &o.classifiers[i].Spec); err != nil {
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
func compile(ctx context.Context, o *objects) (problem.List, []engine.ClassifierStatus, error) {
	set := &manifest.Set{
		Routers:     []v1alpha1.ContextRouter{o.router},
		Routes:      o.routes,
		Sources:     o.sources,
		Permissions: o.permissions,
		Classifiers: o.classifiers,
		Namespace:   o.router.Namespace,
	}
	if problems := set.Check().Errors(); len(problems) > 0 {
		return problems, nil, nil
	}
	cfg, err := set.Config("")
	if err != nil {
		return nil, nil, fmt.Errorf("bundle: selecting the router: %w", err)
	}
	// In the pod, relative paths resolve against the bundle's folder.
	for _, s := range cfg.Sources {
		cfg.BaseDirs[s.Name] = MountDir
	}
	snap, err := engine.Compile(ctx, cfg, engine.Options{SkipLoad: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		return nil, snap.Classifiers(), nil
	}
	var problems problem.List
	if errors.As(err, &problems) {
		return problems, nil, nil
	}
	return nil, nil, err
}

func (b *builder) finish(data []byte, trained []engine.ClassifierStatus, took time.Duration) *Bundle {
	out := &Bundle{
		Namespace:   b.router.Namespace,
		Router:      b.router.Name,
		CompileTime: took,
		Refused:     b.refused,
	}
	if data != nil {
		sum := sha256.Sum256(data)
		out.Data = data
		out.Hash = "sha256:" + hex.EncodeToString(sum[:])
		out.Routes = sortedKeys(b.routes)
		out.Sources = b.included()
		for _, p := range b.perms {
			out.Permissions = append(out.Permissions, p.Name)
		}
		out.Classifiers = sortedKeys(b.classifiers)
		out.Trained = trained
		srcs := make([]*v1alpha1.ContextSource, len(out.Sources))
		for i, name := range out.Sources {
			srcs[i] = b.sources[name]
			out.ToolSources = out.ToolSources || srcs[i].Spec.HoldsTools()
			if m, ok := b.mounts[name]; ok {
				out.Directories = append(out.Directories, m)
			}
		}
		out.Secrets = secretNames(b.router, srcs)
	}
	out.Verdicts = b.verdicts(out)
	return out
}

// verdicts judges the router and every object given, sorted by kind, then name.
func (b *builder) verdicts(out *Bundle) []Verdict {
	held := make(map[string]bool)
	for _, n := range out.Routes {
		held[key(v1alpha1.KindContextRoute, n)] = true
	}
	for _, n := range out.Sources {
		held[key(v1alpha1.KindContextSource, n)] = true
	}
	for _, n := range out.Permissions {
		held[key(v1alpha1.KindAgentPermission, n)] = true
	}
	for _, n := range out.Classifiers {
		held[key(v1alpha1.KindContextClassifier, n)] = true
	}
	vs := []Verdict{{Kind: v1alpha1.KindContextRouter, Name: b.router.Name, Included: out.Data != nil,
		Problems: b.refused.OfKind(v1alpha1.KindContextRouter)}}
	for _, k := range b.given {
		kind, name, _ := strings.Cut(k, "/")
		v := Verdict{Kind: kind, Name: name, Included: held[k], Problems: b.excluded[k]}
		if kind == v1alpha1.KindAgentPermission {
			v.Problems = b.refused.Of(kind, name)
		}
		vs = append(vs, v)
	}
	slices.SortFunc(vs, compareVerdicts)
	return slices.CompactFunc(vs, func(x, y Verdict) bool { return x.Kind == y.Kind && x.Name == y.Name })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
