package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/digest"
)

// The functions in this file compute the objects a ContextRouter owns. They
// make no API calls; the reconciler applies their result with server-side
// apply, so a field left out here is removed from the cluster object too.

const (
	// FieldOwner is the server-side apply field manager of the operator.
	FieldOwner = "contextrouter-operator"

	// Labels of every object the operator creates for a router.
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the LabelManagedBy value; the operator's cache only
	// holds Deployments, Services and ServiceAccounts that carry it.
	ManagedByValue = "contextrouter-operator"

	// AnnotationBundleHash on the Deployment names the bundle it serves. It is
	// deliberately not on the pod template: a new bundle reaches running pods
	// through the ConfigMap volume and `serve` reloads it in place, without
	// restarts or failed requests; rolling the pods would drop connections.
	AnnotationBundleHash = "contextrouter.dev/bundle-hash"
	// AnnotationInputsHash on the pod template rolls the pods when a mounted
	// input changes in a way the pods would not see on their own: a Directory
	// source's ConfigMap content, or a Secret appearing, disappearing or being
	// recreated. (A Secret's content is read from the mounted files per
	// request, so rotating it needs no restart.)
	AnnotationInputsHash = "contextrouter.dev/inputs-hash"
	// AnnotationRouter on cluster-scoped objects names the router (namespace/name)
	// they were made for, since they cannot carry an owner reference to it.
	AnnotationRouter = "contextrouter.dev/router"

	// RouterFinalizer guards the cluster-scoped objects of a router
	// (the TokenReview ClusterRoleBinding), which garbage collection cannot remove.
	RouterFinalizer = "contextrouter.dev/cluster-resources"

	// HTTPPort is the router container's port; the Service exposes it on port 80.
	HTTPPort = 8080
	// RouterUID is the non-root user the router runs as (distroless "nonroot").
	RouterUID = bundle.RunAsUser

	authDelegatorRole = "system:auth-delegator"
)

// selectorLabels select a router's pods; they never change for a router,
// since a Deployment's selector is immutable.
func selectorLabels(router *v1alpha1.ContextRouter) map[string]string {
	return map[string]string{LabelName: "contextrouter", LabelInstance: router.Name}
}

func routerLabels(router *v1alpha1.ContextRouter, component string) map[string]string {
	l := selectorLabels(router)
	l[LabelComponent] = component
	l[LabelManagedBy] = ManagedByValue
	return l
}

// ownerRef makes the router the controller of an object in its namespace, so
// that deleting the router deletes the object.
func ownerRef(router *v1alpha1.ContextRouter) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               v1alpha1.KindContextRouter,
		Name:               router.Name,
		UID:                router.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

func childMeta(router *v1alpha1.ContextRouter, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       router.Namespace,
		Labels:          routerLabels(router, component),
		OwnerReferences: []metav1.OwnerReference{ownerRef(router)},
	}
}

// serviceAccountName is the account the router pods run as.
func serviceAccountName(router *v1alpha1.ContextRouter) string {
	if n := router.Spec.Deployment.ServiceAccountName; n != "" {
		return n
	}
	return router.Name
}

// managesServiceAccount reports whether the operator creates the router's account.
func managesServiceAccount(router *v1alpha1.ContextRouter) bool {
	return router.Spec.Deployment.ServiceAccountName == ""
}

func replicas(router *v1alpha1.ContextRouter) int32 {
	if r := router.Spec.Deployment.Replicas; r != nil {
		return *r
	}
	return 2
}

func usesTokenReview(router *v1alpha1.ContextRouter) bool {
	return router.Spec.Auth.Mode == v1alpha1.AuthServiceAccountToken
}

// desiredBundleConfigMap holds the bundle and its hash.
func desiredBundleConfigMap(router *v1alpha1.ContextRouter, b *bundle.Bundle) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: childMeta(router, bundle.ConfigMapName(router.Name), "bundle"),
		Data:       map[string]string{bundle.DataKey: string(b.Data), bundle.HashKey: b.Hash},
	}
}

func desiredServiceAccount(router *v1alpha1.ContextRouter) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: childMeta(router, router.Name, "router"),
	}
}

func desiredService(router *v1alpha1.ContextRouter) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(router, router.Name, "router"),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(router),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"),
			}},
		},
	}
}

// tokenReviewBindingName names the ClusterRoleBinding that lets a router's
// account call TokenReview. RBAC names may hold ":"; namespace and name keep
// it unique across the cluster.
func tokenReviewBindingName(router *v1alpha1.ContextRouter) string {
	name := "contextrouter:" + router.Namespace + ":" + router.Name
	if len(name) > 253 {
		sum := digest.SHA256(router.Namespace + "/" + router.Name)
		name = "contextrouter:" + hex.EncodeToString(sum[:16])
	}
	return name
}

// desiredTokenReviewBinding binds the router's account to
// system:auth-delegator (TokenReview and SubjectAccessReview), which
// auth.mode ServiceAccountToken needs.
func desiredTokenReviewBinding(router *v1alpha1.ContextRouter) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        tokenReviewBindingName(router),
			Labels:      routerLabels(router, "auth"),
			Annotations: map[string]string{AnnotationRouter: router.Namespace + "/" + router.Name},
		},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: authDelegatorRole},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: serviceAccountName(router), Namespace: router.Namespace,
		}},
	}
}

// routerArgs are the router container's arguments: serve on the bundle,
// draining for RouterShutdownDelay. (Sidecars serve on 127.0.0.1, behind no
// load balancer, and stop at once.)
func routerArgs(b *bundle.Bundle) []string {
	args := append(bundle.ServeArgs(), "--shutdown-delay", RouterShutdownDelay.String())
	if reportsToolStatus(b) {
		args = append(args, "--report-tools-status")
	}
	return args
}

// reportsToolStatus: the router pods write the status.tools entries and
// Events of the bundle's Tools and MCP sources (api.md §10.9).
func reportsToolStatus(b *bundle.Bundle) bool { return b.ToolSources }

// toolStatusRules are what serve --report-tools-status needs in the
// router's namespace, and no more.
var toolStatusRules = []rbacv1.PolicyRule{
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"contextsources"}, Verbs: []string{"get"}},
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"contextsources/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
}

// desiredToolStatusRole lets the router's account report its tool sources.
func desiredToolStatusRole(router *v1alpha1.ContextRouter) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: childMeta(router, router.Name, "router"),
		Rules:      toolStatusRules,
	}
}

func desiredToolStatusRoleBinding(router *v1alpha1.ContextRouter) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: childMeta(router, router.Name, "router"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: router.Name},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: serviceAccountName(router), Namespace: router.Namespace,
		}},
	}
}

// desiredDeployment runs the router on the bundle. image is the router
// image (spec.deployment.image, else the operator's default); inputsHash
// comes from inputsHash.
func desiredDeployment(router *v1alpha1.ContextRouter, b *bundle.Bundle, image, inputsHash string) *appsv1.Deployment {
	if router.Spec.Deployment.Image != "" {
		image = router.Spec.Deployment.Image
	}
	volumes, mounts := b.Volumes(bundle.ConfigMapName(router.Name))
	httpProbe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	container := corev1.Container{
		Name:  "router",
		Image: image,
		Args:  routerArgs(b),
		Env:   bundle.ContainerEnv(),
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: HTTPPort, Protocol: corev1.ProtocolTCP}},
		// A pod whose snapshot cannot be built never becomes ready, so a
		// rollout with a bad bundle stops before it replaces good pods.
		ReadinessProbe:  httpProbe("/readyz", 5, 3),
		LivenessProbe:   httpProbe("/healthz", 10, 3),
		Resources:       *router.Spec.Deployment.Resources.DeepCopy(),
		VolumeMounts:    mounts,
		SecurityContext: bundle.ContainerSecurityContext(),
	}
	pod := corev1.PodSpec{
		ServiceAccountName: serviceAccountName(router),
		// Only TokenReview and the tool sources' status need the API
		// server; without them the pod holds no token.
		AutomountServiceAccountToken: ptr.To(usesTokenReview(router) || reportsToolStatus(b)),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](RouterUID),
			RunAsGroup:     ptr.To[int64](RouterUID),
			FSGroup:        ptr.To[int64](RouterUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{container},
		Volumes:    volumes,
	}
	podLabels := routerLabels(router, "router")
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: withAnnotation(childMeta(router, router.Name, "router"), AnnotationBundleHash, b.Hash),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas(router)),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(router)},
			// Keep full capacity during a rollout: a new pod must be ready
			// (its snapshot built) before an old one goes.
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: podLabels,
					// Inputs the pods cannot pick up in place (document
					// ConfigMaps of Directory sources, which Secrets exist) roll them.
					Annotations: map[string]string{AnnotationInputsHash: inputsHash},
				},
				Spec: pod,
			},
		},
	}
}

// inputsHash summarizes the mounted inputs that pods do not pick up by
// themselves: the data of the Directory sources' ConfigMaps and the identity
// (UID) of every Secret the bundle reads. A missing object counts as absent,
// so its creation changes the hash.
func inputsHash(b *bundle.Bundle, configMaps map[string]*corev1.ConfigMap, secretUIDs map[string]types.UID) string {
	h := sha256.New()
	var cms []string
	for _, d := range b.Directories {
		if d.ConfigMap != "" {
			cms = append(cms, d.ConfigMap)
		}
	}
	slices.Sort(cms)
	for _, name := range slices.Compact(cms) {
		fmt.Fprintf(h, "configmap\x00%s\x00", name)
		cm := configMaps[name]
		if cm == nil {
			io.WriteString(h, "absent\x00")
			continue
		}
		io.WriteString(h, "data\x00")
		writeSorted(h, cm.Data, func(v string) []byte { return []byte(v) })
		io.WriteString(h, "binaryData\x00")
		writeSorted(h, cm.BinaryData, func(v []byte) []byte { return v })
	}
	for _, name := range b.Secrets {
		fmt.Fprintf(h, "secret\x00%s\x00%s\x00", name, secretUIDs[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func writeSorted[V any](w io.Writer, m map[string]V, raw func(V) []byte) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw(m[k])
		fmt.Fprintf(w, "%s\x00%d\x00", k, len(v))
		w.Write(v)
	}
}

func withAnnotation(m metav1.ObjectMeta, key, value string) metav1.ObjectMeta {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
	return m
}

// RouterShutdownDelay is how long a router pod keeps answering, with
// /readyz failing and every answer closing its connection, after it is told
// to stop: long enough for kube-proxy and load balancers to stop sending it
// new connections, so that a rollout fails no query. It stays well inside
// the pod's default 30 s termination grace period, with the server's
// shutdown timeout.
const RouterShutdownDelay = 5 * time.Second
