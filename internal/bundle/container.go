package bundle

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/memlimit"
)

// RunAsUser is the unprivileged user (and group) of the contextrouter image:
// distroless "nonroot", numeric in the Dockerfile so that runAsNonRoot can
// check it.
const RunAsUser = 65532

// ContainerSecurityContext is the hardened security context of every
// container that serves a bundle (the router Deployment's and the injected
// sidecar): non-root, read-only root filesystem (CacheDir and TmpDir are
// volumes), no privilege escalation, no capabilities. Each call returns a new
// value the caller may extend.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// ContainerEnv is the environment of every container that serves a bundle:
// the container's memory limit, from the Downward API, of which serve makes
// 90 % the Go runtime's soft limit (memlimit.Resolve). A container without
// a memory limit gets the node's allocatable memory there, which bounds it
// just as well.
func ContainerEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{
		Name:      memlimit.ContainerLimitEnv,
		ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}},
	}}
}
