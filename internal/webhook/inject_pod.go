package webhook

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/bundle"
)

// How a pod asks for the sidecar, and what the injector leaves on it.
const (
	// LabelInject opts a pod in with "true" (or out with "false"), and a
	// namespace in with "enabled": then its pods need only AnnotationRouter.
	LabelInject = "contextrouter.dev/inject"
	// InjectPodValue and InjectNamespaceValue are the opt-in values of LabelInject.
	InjectPodValue       = "true"
	InjectNamespaceValue = "enabled"
	// AnnotationRouter names the ContextRouter, in the pod's namespace, whose
	// bundle the sidecar serves.
	AnnotationRouter = "contextrouter.dev/router"
	// AnnotationAgent is the agent the sidecar serves (it pins the identity);
	// the default is the pod's ServiceAccount name.
	AnnotationAgent = "contextrouter.dev/agent"
	// AnnotationPort is the loopback port of the sidecar (DefaultSidecarPort).
	AnnotationPort = "contextrouter.dev/port"
	// AnnotationStatus is StatusInjected on a pod that got the sidecar; the
	// injector leaves such pods alone.
	AnnotationStatus = "contextrouter.dev/status"
	StatusInjected   = "injected"

	// SidecarName is the name of the injected container.
	SidecarName = "contextrouter"
	// EnvURL is set on the app containers: the sidecar's base URL.
	EnvURL = "CONTEXTROUTER_URL"
	// DefaultSidecarPort is where the sidecar listens on 127.0.0.1.
	DefaultSidecarPort = 8787

	// sidecarVolumePrefix keeps the sidecar's volumes apart from the app's.
	sidecarVolumePrefix = "contextrouter-"
	// imageBinary is the contextrouter binary in the image (the
	// Dockerfile's ENTRYPOINT); exec probes name it.
	imageBinary = "/contextrouter"
)

// sidecarResources are deliberately small: a sidecar serves one pod's agent.
// Memory is limited so a runaway index cannot starve the app; CPU is not, so
// that compiling a snapshot is not throttled.
func sidecarResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("50m"),
			corev1.ResourceMemory: resource.MustParse("64Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("256Mi"),
		},
	}
}

// Sidecar is the router container the injector adds to a pod.
type Sidecar struct {
	// Image runs `contextrouter serve`.
	Image string
	// Agent is pinned with --agent.
	Agent string
	// Port is the loopback port the sidecar listens on.
	Port int32
	// ConfigMap holds the bundle.
	ConfigMap string
	// Bundle says what else to mount (Secrets, Directory volumes); nil
	// mounts only the bundle and the writable folders.
	Bundle *bundle.Bundle
}

// Listen is the sidecar's --listen address: loopback only, because it serves
// as Agent without asking the caller who it is.
func (s Sidecar) Listen() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s.Port)))
}

// URL is the value of EnvURL.
func (s Sidecar) URL() string { return "http://" + s.Listen() }

// Container returns the sidecar and its volumes, named with the sidecar's
// prefix. It is a native sidecar (an init container with restartPolicy
// Always, Kubernetes >= 1.29): it starts before the app containers, which
// the kubelet starts only once its startup probe passes (the snapshot is
// built), and it runs for the pod's lifetime.
func (s Sidecar) Container() (corev1.Container, []corev1.Volume) {
	b := s.Bundle
	if b == nil {
		b = &bundle.Bundle{}
	}
	vols, mounts := b.Volumes(s.ConfigMap)
	for i := range vols {
		vols[i].Name = sidecarVolumeName(vols[i].Name)
	}
	for i := range mounts {
		mounts[i].Name = sidecarVolumeName(mounts[i].Name)
	}

	// The kubelet's HTTP probes connect to the pod IP, where the sidecar does
	// not listen; the probes run the binary against loopback instead.
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: []string{imageBinary, "probe", s.URL() + path},
			}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	// The pod's security context belongs to the app and may run as root or
	// allow anything; the sidecar sets its own.
	sc := bundle.ContainerSecurityContext()
	sc.RunAsUser = ptr.To[int64](bundle.RunAsUser)
	sc.RunAsGroup = ptr.To[int64](bundle.RunAsUser)
	sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}

	return corev1.Container{
		Name:          SidecarName,
		Image:         s.Image,
		Args:          append(bundle.ServeArgs(), "--agent", s.Agent, "--listen", s.Listen()),
		Env:           bundle.ContainerEnv(),
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		// Up to 5 minutes for the first snapshot (git clones included),
		// checked every second so the app starts as soon as it is ready.
		StartupProbe:             probe("/readyz", 1, 300),
		ReadinessProbe:           probe("/readyz", 10, 3),
		LivenessProbe:            probe("/healthz", 10, 3),
		Resources:                sidecarResources(),
		VolumeMounts:             mounts,
		SecurityContext:          sc,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}, vols
}

// sidecarVolumeName prefixes a volume name of bundle.Volumes; VolumeName
// keeps the result a unique DNS label.
func sidecarVolumeName(name string) string { return bundle.VolumeName(sidecarVolumePrefix, name) }

// patchOp is one JSON patch operation. The injector only adds, at paths it
// computed from the pod as sent, so fields this build does not know survive
// (a patch from re-encoding the typed pod would drop them).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// podPatch mutates a typed pod and records the same change as JSON patch
// operations against the pod as sent.
type podPatch struct {
	pod *corev1.Pod
	ops []patchOp
}

func (p *podPatch) add(path string, v any) {
	p.ops = append(p.ops, patchOp{Op: "add", Path: path, Value: v})
}

// prependInitContainer puts c before every other init container, so that
// those can use the router too.
func (p *podPatch) prependInitContainer(c corev1.Container) {
	if len(p.pod.Spec.InitContainers) == 0 {
		p.add("/spec/initContainers", []corev1.Container{c})
	} else {
		p.add("/spec/initContainers/0", c)
	}
	p.pod.Spec.InitContainers = append([]corev1.Container{c}, p.pod.Spec.InitContainers...)
}

func (p *podPatch) addVolumes(vols []corev1.Volume) {
	if len(p.pod.Spec.Volumes) == 0 {
		p.add("/spec/volumes", vols)
	} else {
		for _, v := range vols {
			p.add("/spec/volumes/-", v)
		}
	}
	p.pod.Spec.Volumes = append(p.pod.Spec.Volumes, vols...)
}

// setURL adds EnvURL to every app container that does not define it (an
// explicit value wins). It reports whether anything changed.
func (p *podPatch) setURL(url string) bool {
	changed := false
	for i := range p.pod.Spec.Containers {
		c := &p.pod.Spec.Containers[i]
		if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvURL }) {
			continue
		}
		env := corev1.EnvVar{Name: EnvURL, Value: url}
		if len(c.Env) == 0 {
			p.add(fmt.Sprintf("/spec/containers/%d/env", i), []corev1.EnvVar{env})
		} else {
			p.add(fmt.Sprintf("/spec/containers/%d/env/-", i), env)
		}
		c.Env = append(c.Env, env)
		changed = true
	}
	return changed
}

func (p *podPatch) setAnnotation(key, value string) {
	if p.pod.Annotations == nil {
		p.add("/metadata/annotations", map[string]string{key: value})
		p.pod.Annotations = map[string]string{}
	} else {
		p.add("/metadata/annotations/"+jsonPointerEscape(key), value)
	}
	p.pod.Annotations[key] = value
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// injected reports whether pod already has the sidecar (or says so), and
// the URL its sidecar serves when it can tell.
func injected(pod *corev1.Pod) (done bool, url string) {
	for _, c := range pod.Spec.InitContainers {
		if c.Name != SidecarName {
			continue
		}
		if i := slices.Index(c.Args, "--listen"); i >= 0 && i+1 < len(c.Args) {
			url = "http://" + c.Args[i+1]
		}
		return true, url
	}
	return pod.Annotations[AnnotationStatus] == StatusInjected, ""
}

// conflicts says why s cannot join pod, or "" if it can. The pod is the
// user's: the injector never renames or overrides what it holds.
func (s Sidecar) conflicts(pod *corev1.Pod, vols []corev1.Volume) string {
	if pod.Spec.HostNetwork {
		return "spec.hostNetwork is true: the sidecar's 127.0.0.1 would be the node's, shared with every host-network pod"
	}
	all := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	for _, c := range pod.Spec.EphemeralContainers {
		all = append(all, corev1.Container{Name: c.Name})
	}
	for _, c := range all {
		if c.Name == SidecarName {
			return fmt.Sprintf("the pod already has a container named %q", SidecarName)
		}
		for _, p := range c.Ports {
			if p.ContainerPort == s.Port && p.Protocol != corev1.ProtocolUDP && p.Protocol != corev1.ProtocolSCTP {
				return fmt.Sprintf("container %q uses port %d; set the annotation %s to another port", c.Name, s.Port, AnnotationPort)
			}
		}
	}
	for _, v := range vols {
		if slices.ContainsFunc(pod.Spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == v.Name }) {
			return fmt.Sprintf("the pod already has a volume named %q", v.Name)
		}
	}
	return ""
}

// inject adds the sidecar, its volumes, EnvURL and the status annotation to
// pod, returning the JSON patch of the change, or why it cannot (and then
// leaves pod unchanged).
func (s Sidecar) inject(pod *corev1.Pod) ([]patchOp, string) {
	c, vols := s.Container()
	if why := s.conflicts(pod, vols); why != "" {
		return nil, why
	}
	p := &podPatch{pod: pod}
	p.prependInitContainer(c)
	p.addVolumes(vols)
	p.setURL(s.URL())
	p.setAnnotation(AnnotationStatus, StatusInjected)
	return p.ops, ""
}
