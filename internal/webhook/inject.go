package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

// Paths of the two injection webhooks: the API server calls the first for
// pods labelled contextrouter.dev/inject=true, the second for unlabelled pods
// in namespaces labelled contextrouter.dev/inject=enabled.
const (
	InjectPath          = "/mutate--v1-pod"
	InjectNamespacePath = "/mutate--v1-pod-namespace"
)

// Both webhooks: failurePolicy Ignore, because a pod must never fail to be
// created because the operator is down (it then runs without the sidecar);
// kube-system and the operator's own namespace are never touched, so the
// operator cannot block its own pods. sideEffects NoneOnDryRun: the only side
// effect is an Event, which dry runs skip. IfNeeded reinvocation lets the
// injector give CONTEXTROUTER_URL to containers that later webhooks add.
// The Helm chart templates failurePolicy and both selectors.
//
// +kubebuilder:webhook:path=/mutate--v1-pod,mutating=true,failurePolicy=ignore,matchPolicy=Equivalent,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=inject.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=IfNeeded,patch=`{"objectSelector":{"matchLabels":{"contextrouter.dev/inject":"true"}},"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","contextrouter-system"]}]}}`
// +kubebuilder:webhook:path=/mutate--v1-pod-namespace,mutating=true,failurePolicy=ignore,matchPolicy=Equivalent,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=inject-namespace.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,reinvocationPolicy=IfNeeded,patch=`{"objectSelector":{"matchExpressions":[{"key":"contextrouter.dev/inject","operator":"DoesNotExist"}]},"namespaceSelector":{"matchLabels":{"contextrouter.dev/inject":"enabled"},"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["kube-system","contextrouter-system"]}]}}`

// The injector reads routers and their bundle ConfigMaps and reports pods it
// could not inject as Events.
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reasons of the Events the injector emits.
const (
	ReasonRouterNotFound   = "RouterNotFound"
	ReasonInjectionSkipped = "InjectionSkipped"
	ReasonBundleNotReady   = "BundleNotReady"
)

// Injector is the mutating webhook that adds the router as a native sidecar
// to pods that ask for it. It never refuses a pod: whatever keeps it from
// injecting is returned as an admission warning and reported as an Event,
// and the pod is admitted unchanged. Only a request it cannot decode is an
// error.
//
// Events are in the pod's namespace, regarding the ContextRouter the pod
// names (by name, and UID when it exists: `kubectl describe contextrouter`
// lists them), related to the pod's controller (its ReplicaSet, Job, ...).
// A pod is no Event subject: at admission it has no UID and, when made from
// generateName, no name. Without a router name the Event regards the pod's
// controller, else the pod by name, else nothing is recorded.
type Injector struct {
	// Cached reads ContextRouters and ConfigMaps (the manager's cache).
	Cached client.Reader
	// Live, optional, is asked when Cached misses: a router applied a moment
	// before its pods may not be in the cache yet.
	Live client.Reader
	// Recorder, optional, records Events.
	Recorder events.EventRecorder
	// RouterImage runs the sidecar of routers without spec.deployment.image.
	RouterImage string
	// ByNamespace serves InjectNamespacePath: the pod's namespace opted in,
	// so a pod without the router annotation is skipped silently.
	ByNamespace bool
}

var _ admission.Handler = (*Injector)(nil)

// Handle implements admission.Handler.
func (i *Injector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	out := i.decide(ctx, pod, ns)
	var warnings []string
	if out.problem != "" {
		warnings = append(warnings, out.problem)
		logf.FromContext(ctx).V(1).Info("sidecar injection problem", "pod", podName(pod), "namespace", ns,
			"reason", out.reason, "injected", len(out.ops) > 0, "message", out.problem)
		if !ptr.Deref(req.DryRun, false) {
			i.record(pod, ns, out, corev1.EventTypeWarning)
		}
	}
	if len(out.ops) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	patch, err := json.Marshal(out.ops)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encoding the patch: %w", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp := admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}}
	return resp.WithWarnings(warnings...)
}

// outcome is what the injector decided for one pod: a patch, a problem to
// report, or both (injected, with a caveat).
type outcome struct {
	ops     []patchOp
	problem string // the admission warning and Event note
	reason  string // the Event reason
	router  string // the router the pod names, if any
	// routerRef is the router when it exists (its UID makes the Event show in describe).
	routerRef *v1alpha1.ContextRouter
}

func skip(reason, format string, args ...any) outcome {
	return outcome{reason: reason, problem: "contextrouter sidecar not injected: " + fmt.Sprintf(format, args...)}
}

// decide works out the injection of one pod; it never fails.
func (i *Injector) decide(ctx context.Context, pod *corev1.Pod, ns string) outcome {
	label, labelled := pod.Labels[LabelInject]
	routerName := strings.TrimSpace(pod.Annotations[AnnotationRouter])
	// The webhook configuration selects pods; check again, in case it was
	// changed to select more.
	switch {
	case i.ByNamespace && labelled:
		return outcome{} // the pod's own label decides, through the other webhook
	case !i.ByNamespace && label != InjectPodValue:
		return outcome{}
	}
	if done, url := injected(pod); done {
		// A reinvocation, or a pod copied from an injected one: only give
		// the URL to containers added since.
		if url == "" {
			return outcome{}
		}
		p := &podPatch{pod: pod}
		p.setURL(url)
		return outcome{ops: p.ops}
	}
	if routerName == "" {
		if i.ByNamespace {
			return outcome{} // most pods of an opted-in namespace are no agents
		}
		return skip(ReasonInjectionSkipped, "the label %s=%s needs the annotation %s naming a ContextRouter",
			LabelInject, InjectPodValue, AnnotationRouter)
	}

	out := i.sidecar(ctx, pod, ns, routerName)
	out.router = routerName
	return out
}

// sidecar reads the router and its bundle and injects.
func (i *Injector) sidecar(ctx context.Context, pod *corev1.Pod, ns, routerName string) outcome {
	port := int32(DefaultSidecarPort)
	if v, ok := pod.Annotations[AnnotationPort]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
		if err != nil || n == 0 {
			return skip(ReasonInjectionSkipped, "annotation %s: %q is not a port (1-65535)", AnnotationPort, v)
		}
		port = int32(n)
	}

	ctx, cancel := context.WithTimeout(ctx, refLookupTimeout)
	defer cancel()
	router := &v1alpha1.ContextRouter{}
	if err := i.get(ctx, client.ObjectKey{Namespace: ns, Name: routerName}, router); err != nil {
		if apierrors.IsNotFound(err) {
			return skip(ReasonRouterNotFound, "annotation %s: ContextRouter %q not found in namespace %q",
				AnnotationRouter, routerName, ns)
		}
		return skip(ReasonInjectionSkipped, "reading ContextRouter %s/%s: %v", ns, routerName, err)
	}

	s := Sidecar{Image: router.Spec.Deployment.Image, Agent: agentOf(pod), Port: port, ConfigMap: bundle.ConfigMapName(router.Name)}
	if s.Image == "" {
		s.Image = i.RouterImage
	}
	if s.Image == "" {
		out := skip(ReasonInjectionSkipped, "ContextRouter %q sets no spec.deployment.image and the operator has no default router image", routerName)
		out.routerRef = router
		return out
	}
	if st := router.Status.Bundle; st != nil && st.ConfigMapName != "" {
		s.ConfigMap = st.ConfigMapName
	}

	// The bundle says which Secrets and Directory volumes to mount. Without
	// it the sidecar still gets the bundle volume: the kubelet holds the
	// pod until the operator writes the ConfigMap, and the sidecar then
	// serves; only sources needing a mount fail until the pod is recreated.
	var caveat string
	cm := &corev1.ConfigMap{}
	switch err := i.get(ctx, client.ObjectKey{Namespace: ns, Name: s.ConfigMap}, cm); {
	case apierrors.IsNotFound(err):
		caveat = fmt.Sprintf("the bundle ConfigMap %q of ContextRouter %q does not exist yet: the pod starts once the operator writes it", s.ConfigMap, routerName)
	case err != nil:
		caveat = fmt.Sprintf("reading the bundle ConfigMap %s/%s: %v", ns, s.ConfigMap, err)
	default:
		if b, err := bundle.Decode([]byte(cm.Data[bundle.DataKey])); err != nil {
			caveat = fmt.Sprintf("the bundle ConfigMap %q cannot be read: %v", s.ConfigMap, err)
		} else {
			s.Bundle = b
		}
	}

	ops, why := s.inject(pod)
	if why != "" {
		out := skip(ReasonInjectionSkipped, "%s", why)
		out.routerRef = router
		return out
	}
	out := outcome{ops: ops, routerRef: router}
	if caveat != "" {
		out.reason = ReasonBundleNotReady
		out.problem = "contextrouter sidecar injected without the Secrets and Directory volumes of the router's sources (recreate the pod once the router is Ready): " + caveat
	}
	return out
}

// get reads through the cache, then, on a miss or error, from the API server.
func (i *Injector) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := i.Cached.Get(ctx, key, obj)
	if err == nil || i.Live == nil {
		return err
	}
	return i.Live.Get(ctx, key, obj)
}

// agentOf is the identity the sidecar pins: the agent annotation, else the
// pod's ServiceAccount (the API server's default, "default", when unset; its
// own admission fills it in only after the webhooks).
func agentOf(pod *corev1.Pod) string {
	if a := strings.TrimSpace(pod.Annotations[AnnotationAgent]); a != "" {
		return a
	}
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	if sa := pod.Spec.DeprecatedServiceAccount; sa != "" {
		return sa
	}
	return "default"
}

// record emits the outcome's Event (see Injector).
func (i *Injector) record(pod *corev1.Pod, ns string, out outcome, eventType string) {
	if i.Recorder == nil {
		return
	}
	owner := controllerOf(pod, ns)
	var regarding, related *corev1.ObjectReference
	switch {
	case out.router != "":
		regarding = &corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.KindContextRouter,
			Namespace: ns, Name: out.router,
		}
		if out.routerRef != nil {
			regarding.UID = out.routerRef.UID
		}
		related = owner
	case owner != nil:
		regarding = owner
	case pod.Name != "":
		regarding = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: pod.Name}
	default:
		return
	}
	// A nil *ObjectReference in the interface would not read as "none".
	var rel runtime.Object
	if related != nil {
		rel = related
	}
	i.Recorder.Eventf(regarding, rel, eventType, out.reason, "Inject", "%s: %s", podName(pod), out.problem)
}

// controllerOf references the pod's controlling owner, if any.
func controllerOf(pod *corev1.Pod, ns string) *corev1.ObjectReference {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ns, Name: ref.Name, UID: ref.UID}
}

// podName names a pod in messages; pods made from generateName have no name
// yet at admission.
func podName(pod *corev1.Pod) string {
	switch {
	case pod.Name != "":
		return "Pod " + pod.Name
	case pod.GenerateName != "":
		return "Pod " + pod.GenerateName + "<generated>"
	default:
		return "Pod"
	}
}
