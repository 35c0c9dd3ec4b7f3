package bundle

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
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
