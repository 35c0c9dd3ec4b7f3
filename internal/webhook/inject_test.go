package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

const testImage = "example.com/contextrouter:v1"

// testBundle is a router's bundle with every kind of mount: a Directory
// source on a ConfigMap, one on a claim, an HTTP source reading a Secret.
func testBundle(t *testing.T, ns string) *bundle.Bundle {
	t.Helper()
	m := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	b, err := bundle.Build(context.Background(), bundle.Input{
		Router: &v1alpha1.ContextRouter{ObjectMeta: m("acme"), Spec: v1alpha1.ContextRouterSpec{DefaultAccess: v1alpha1.AccessAllow}},
		Routes: []v1alpha1.ContextRoute{{ObjectMeta: m("all"), Spec: v1alpha1.ContextRouteSpec{
			Sources: []v1alpha1.LocalObjectReference{{Name: "docs"}, {Name: "kb"}, {Name: "wiki"}},
		}}},
		Sources: []v1alpha1.ContextSource{
			{ObjectMeta: m("docs"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{
				Volume: &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "docs-files"}}}}},
			{ObjectMeta: m("wiki"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory, Directory: &v1alpha1.DirectorySource{
				Path: "/srv/wiki", Volume: &v1alpha1.DirectoryVolume{PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimReference{ClaimName: "wiki-pvc"}}}}},
			{ObjectMeta: m("kb"), Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
				URL: "https://kb.example.com/?q={{query}}", TextField: "text",
				Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{
					SecretKeyRef: v1alpha1.SecretKeySelector{Name: "kb-token", Key: "token"}}}}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func execProbe(url string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/contextrouter", "probe", url}}},
		PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures,
	}
}

// wantSidecar is the sidecar of testBundle, written out in full.
func wantSidecar(agent string, port int) (corev1.Container, []corev1.Volume) {
	listen := "127.0.0.1:" + strconv.Itoa(port)
	c := corev1.Container{
		Name:  "contextrouter",
		Image: testImage,
		Args: []string{"serve", "-f", "/etc/contextrouter/bundle", "--secrets-dir", "/etc/contextrouter/secrets",
			"--cache-dir", "/var/cache/contextrouter", "--expand-env=false", "--agent", agent, "--listen", listen},
		Env: []corev1.EnvVar{{Name: "CONTEXTROUTER_CONTAINER_MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}},
		RestartPolicy:  ptr.To(corev1.ContainerRestartPolicyAlways),
		StartupProbe:   execProbe("http://"+listen+"/readyz", 1, 300),
		ReadinessProbe: execProbe("http://"+listen+"/readyz", 10, 3),
		LivenessProbe:  execProbe("http://"+listen+"/healthz", 10, 3),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "contextrouter-bundle", MountPath: "/etc/contextrouter/bundle", ReadOnly: true},
			{Name: "contextrouter-cache", MountPath: "/var/cache/contextrouter"},
			{Name: "contextrouter-tmp", MountPath: "/tmp"},
			{Name: "contextrouter-secret-kb-token", MountPath: "/etc/contextrouter/secrets/kb-token", ReadOnly: true},
			{Name: "contextrouter-source-docs", MountPath: "/var/run/contextrouter/sources/docs", ReadOnly: true},
			{Name: "contextrouter-source-wiki", MountPath: "/srv/wiki", ReadOnly: true},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](65532),
			RunAsGroup:               ptr.To[int64](65532),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	vols := []corev1.Volume{
		{Name: "contextrouter-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "acme-bundle"},
			Items:                []corev1.KeyToPath{{Key: "bundle.yaml", Path: "bundle.yaml"}},
		}}},
		{Name: "contextrouter-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "contextrouter-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "contextrouter-secret-kb-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "kb-token", Optional: ptr.To(true)}}},
		{Name: "contextrouter-source-docs", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "docs-files"}, Optional: ptr.To(true)}}},
		{Name: "contextrouter-source-wiki", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: "wiki-pvc", ReadOnly: true}}},
	}
	return c, vols
}

func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s:\ngot  %s\nwant %s", what, g, w)
	}
}

func TestSidecarContainer(t *testing.T) {
	s := Sidecar{Image: testImage, Agent: "hr-assistant", Port: 8787, ConfigMap: "acme-bundle", Bundle: testBundle(t, "team-a")}
	c, vols := s.Container()
	wantC, wantVols := wantSidecar("hr-assistant", 8787)
	mustEqual(t, "container", c, wantC)
	mustEqual(t, "volumes", vols, wantVols)
	if s.URL() != "http://127.0.0.1:8787" {
		t.Errorf("URL %q", s.URL())
	}

	// Without a bundle: the bundle volume (the kubelet waits for it) and the
	// writable folders only.
	s.Bundle = nil
	c, vols = s.Container()
	mustEqual(t, "mounts without a bundle", c.VolumeMounts, wantC.VolumeMounts[:3])
	mustEqual(t, "volumes without a bundle", vols, wantVols[:3])

	// Decoding the bundle, as the injector does, mounts what Build says.
	b, err := bundle.Decode(testBundle(t, "team-a").Data)
	if err != nil {
		t.Fatal(err)
	}
	s.Bundle = b
	c, vols = s.Container()
	mustEqual(t, "container from the decoded bundle", c, wantC)
	mustEqual(t, "volumes from the decoded bundle", vols, wantVols)
}

// applyPatch applies JSON patch add operations to doc, the way the API
// server does: an index inserts before the element, "-" appends, a member
// is set.
func applyPatch(t *testing.T, doc []byte, ops []patchOp) []byte {
	t.Helper()
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Op != "add" {
			t.Fatalf("op %q: the injector only adds", op.Op)
		}
		raw, err := json.Marshal(op.Value)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		var toks []string
		for _, tok := range strings.Split(strings.TrimPrefix(op.Path, "/"), "/") {
			toks = append(toks, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
		}
		if root, err = addAt(root, toks, v); err != nil {
			t.Fatalf("%s: %v", op.Path, err)
		}
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func addAt(node any, toks []string, v any) (any, error) {
	last := len(toks) == 1
	switch n := node.(type) {
	case map[string]any:
		if last {
			n[toks[0]] = v
			return n, nil
		}
		child, ok := n[toks[0]]
		if !ok {
			return nil, fmt.Errorf("no member %q", toks[0])
		}
		c, err := addAt(child, toks[1:], v)
		n[toks[0]] = c
		return n, err
	case []any:
		if last && toks[0] == "-" {
			return append(n, v), nil
		}
		i, err := strconv.Atoi(toks[0])
		if err != nil || i < 0 || i > len(n) || (!last && i == len(n)) {
			return nil, fmt.Errorf("bad index %q for %d elements", toks[0], len(n))
		}
		if last {
			return append(n[:i], append([]any{v}, n[i:]...)...), nil
		}
		c, err := addAt(n[i], toks[1:], v)
		n[i] = c
		return n, err
	default:
		return nil, fmt.Errorf("cannot descend into %T", node)
	}
}

func TestInjectPod(t *testing.T) {
	s := Sidecar{Image: testImage, Agent: "hr-assistant", Port: 8787, ConfigMap: "acme-bundle", Bundle: testBundle(t, "team-a")}
	sidecar, sidecarVols := wantSidecar("hr-assistant", 8787)
	url := corev1.EnvVar{Name: "CONTEXTROUTER_URL", Value: "http://127.0.0.1:8787"}

	// A pod with something everywhere the injector adds, and a field this
	// build does not know, which the patch must keep.
	full := `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"agent-","annotations":{"contextrouter.dev/router":"acme"}},
	  "spec":{"initContainers":[{"name":"migrate","image":"busybox"}],
	    "containers":[{"name":"agent","image":"agent:1","env":[{"name":"MODE","value":"prod"}],"futureField":"kept"},
	                  {"name":"tools","image":"tools:1","env":[{"name":"CONTEXTROUTER_URL","value":"http://mine:1"}]},
	                  {"name":"plain","image":"plain:1"}],
	    "volumes":[{"name":"data","emptyDir":{}}]}}`
	// A pod with nothing there: the patch creates the lists and the map.
	bare := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bare"},"spec":{"containers":[{"name":"agent","image":"agent:1"}]}}`

	t.Run("full pod", func(t *testing.T) {
		pod := decodePod(t, full)
		ops, why := s.inject(pod)
		if why != "" {
			t.Fatalf("not injected: %s", why)
		}
		mustEqual(t, "init containers", pod.Spec.InitContainers, []corev1.Container{sidecar, {Name: "migrate", Image: "busybox"}})
		mustEqual(t, "volumes", pod.Spec.Volumes, append([]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, sidecarVols...))
		mustEqual(t, "agent env", pod.Spec.Containers[0].Env, []corev1.EnvVar{{Name: "MODE", Value: "prod"}, url})
		mustEqual(t, "tools env (its own value wins)", pod.Spec.Containers[1].Env, []corev1.EnvVar{{Name: "CONTEXTROUTER_URL", Value: "http://mine:1"}})
		mustEqual(t, "plain env", pod.Spec.Containers[2].Env, []corev1.EnvVar{url})
		mustEqual(t, "annotations", pod.Annotations, map[string]string{"contextrouter.dev/router": "acme", "contextrouter.dev/status": "injected"})

		patched := applyPatch(t, []byte(full), ops)
		mustEqual(t, "the patch applied to the request", decodePod(t, string(patched)), pod)
		if !strings.Contains(string(patched), `"futureField":"kept"`) {
			t.Errorf("the patch lost a field unknown to this build:\n%s", patched)
		}
	})

	t.Run("bare pod", func(t *testing.T) {
		pod := decodePod(t, bare)
		ops, why := s.inject(pod)
		if why != "" {
			t.Fatalf("not injected: %s", why)
		}
		mustEqual(t, "init containers", pod.Spec.InitContainers, []corev1.Container{sidecar})
		mustEqual(t, "volumes", pod.Spec.Volumes, sidecarVols)
		mustEqual(t, "env", pod.Spec.Containers[0].Env, []corev1.EnvVar{url})
		mustEqual(t, "annotations", pod.Annotations, map[string]string{"contextrouter.dev/status": "injected"})
		// Whole lists and the map are added, not elements of missing ones.
		for _, op := range ops {
			if strings.HasSuffix(op.Path, "/-") || strings.HasSuffix(op.Path, "/0") || strings.Count(op.Path, "/") > 4 {
				t.Errorf("op %s %s on a pod without that list", op.Op, op.Path)
			}
		}
		mustEqual(t, "the patch applied to the request", decodePod(t, string(applyPatch(t, []byte(bare), ops))), pod)
	})

	conflicts := []struct {
		name string
		mut  func(*corev1.Pod)
		want string
	}{
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			"spec.hostNetwork is true: the sidecar's 127.0.0.1 would be the node's, shared with every host-network pod"},
		{"container named contextrouter", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "contextrouter" },
			`the pod already has a container named "contextrouter"`},
		{"port taken", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8787}}
		}, `container "agent" uses port 8787; set the annotation contextrouter.dev/port to another port`},
		{"volume name taken", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "contextrouter-tmp"})
		}, `the pod already has a volume named "contextrouter-tmp"`},
	}
	for _, tt := range conflicts {
		t.Run(tt.name, func(t *testing.T) {
			pod := decodePod(t, bare)
			tt.mut(pod)
			before := pod.DeepCopy()
			ops, why := s.inject(pod)
			if why != tt.want || ops != nil {
				t.Errorf("inject = %v, %q; want no ops and %q", ops, why, tt.want)
			}
			mustEqual(t, "pod", pod, before)
		})
	}

	t.Run("UDP on the port is no conflict", func(t *testing.T) {
		pod := decodePod(t, bare)
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8787, Protocol: corev1.ProtocolUDP}}
		if _, why := s.inject(pod); why != "" {
			t.Errorf("not injected: %s", why)
		}
	})
}

func decodePod(t *testing.T, s string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := json.Unmarshal([]byte(s), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func podRequest(t *testing.T, op admissionv1.Operation, pod *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: op, Namespace: "team-a",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// TestInjectorWithoutLookups covers every decision taken before the
// injector reads the cluster (it has no readers here, so reaching a read
// would panic).
func TestInjectorWithoutLookups(t *testing.T) {
	pod := func(labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-", Labels: labels, Annotations: annotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
		}
	}
	inject := map[string]string{LabelInject: "true"}
	router := map[string]string{AnnotationRouter: "acme"}
	withPort := func(p string) map[string]string {
		return map[string]string{AnnotationRouter: "acme", AnnotationPort: p}
	}

	injectedPod := pod(inject, router)
	s := Sidecar{Image: testImage, Agent: "default", Port: 9000, ConfigMap: "acme-bundle"}
	if _, why := s.inject(injectedPod); why != "" {
		t.Fatal(why)
	}
	// A webhook after this one added a container: a reinvocation gives it the URL.
	withNewContainer := injectedPod.DeepCopy()
	withNewContainer.Spec.Containers = append(withNewContainer.Spec.Containers, corev1.Container{Name: "late", Image: "late:1"})

	tests := []struct {
		name        string
		byNamespace bool
		pod         *corev1.Pod
		wantWarning string
		wantPatch   string
	}{
		{"no label", false, pod(nil, router), "", ""},
		{"label false", false, pod(map[string]string{LabelInject: "false"}, router), "", ""},
		{"label without router", false, pod(inject, nil),
			"contextrouter sidecar not injected: the label contextrouter.dev/inject=true needs the annotation contextrouter.dev/router naming a ContextRouter", ""},
		{"port not a number", false, pod(inject, withPort("http")),
			`contextrouter sidecar not injected: annotation contextrouter.dev/port: "http" is not a port (1-65535)`, ""},
		{"port 0", false, pod(inject, withPort("0")),
			`contextrouter sidecar not injected: annotation contextrouter.dev/port: "0" is not a port (1-65535)`, ""},
		{"port too large", false, pod(inject, withPort("65536")),
			`contextrouter sidecar not injected: annotation contextrouter.dev/port: "65536" is not a port (1-65535)`, ""},
		{"already injected", false, injectedPod, "", ""},
		{"status annotation without a sidecar", false, pod(inject, map[string]string{AnnotationRouter: "acme", AnnotationStatus: "injected"}), "", ""},
		{"reinvoked after a container was added", false, withNewContainer, "",
			`[{"op":"add","path":"/spec/containers/1/env","value":[{"name":"CONTEXTROUTER_URL","value":"http://127.0.0.1:9000"}]}]`},
		{"namespace webhook: labelled pods are the other webhook's", true, pod(inject, router), "", ""},
		{"namespace webhook: label false opts out", true, pod(map[string]string{LabelInject: "false"}, router), "", ""},
		{"namespace webhook: no router is no agent", true, pod(nil, nil), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := &Injector{ByNamespace: tt.byNamespace, RouterImage: testImage}
			resp := i.Handle(t.Context(), podRequest(t, admissionv1.Create, tt.pod))
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			var want []string
			if tt.wantWarning != "" {
				want = []string{tt.wantWarning}
			}
			if !reflect.DeepEqual([]string(resp.Warnings), want) {
				t.Errorf("warnings %q, want %q", resp.Warnings, want)
			}
			if string(resp.Patch) != tt.wantPatch {
				t.Errorf("patch %s, want %s", resp.Patch, tt.wantPatch)
			}
			if (resp.PatchType != nil) != (tt.wantPatch != "") {
				t.Errorf("patchType %v with patch %q", resp.PatchType, resp.Patch)
			}
		})
	}
}

func TestInjectorRequests(t *testing.T) {
	i := &Injector{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelInject: "true"}}}

	// Only creates are injected: an update must not grow a sidecar.
	if resp := i.Handle(t.Context(), podRequest(t, admissionv1.Update, pod)); !resp.Allowed || resp.Patch != nil || len(resp.Warnings) > 0 {
		t.Errorf("update: %+v", resp.AdmissionResponse)
	}
	req := podRequest(t, admissionv1.Create, pod)
	req.Object.Raw = []byte(`{"spec": [`)
	resp := i.Handle(t.Context(), req)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, "decoding the pod") {
		t.Errorf("malformed request: %+v", resp.AdmissionResponse)
	}
}

func TestAgentOf(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"annotation", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationAgent: " hr-assistant "}},
			Spec: corev1.PodSpec{ServiceAccountName: "sa"}}, "hr-assistant"},
		{"service account", corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "support-bot"}}, "support-bot"},
		{"deprecated service account field", corev1.Pod{Spec: corev1.PodSpec{DeprecatedServiceAccount: "old-bot"}}, "old-bot"},
		{"empty annotation falls back", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationAgent: ""}},
			Spec: corev1.PodSpec{ServiceAccountName: "sa"}}, "sa"},
		{"nothing: the default account", corev1.Pod{}, "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentOf(&tt.pod); got != tt.want {
				t.Errorf("agentOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultWebhookConfigNames(t *testing.T) {
	tests := []struct {
		name                 string
		in                   Options
		validating, mutating []string
	}{
		{"none named: both defaults", Options{}, []string{DefaultValidatingWebhookConfig}, []string{DefaultMutatingWebhookConfig}},
		{"validating named: no mutating", Options{WebhookConfigNames: []string{"v"}}, []string{"v"}, nil},
		{"mutating named: validating default", Options{MutatingWebhookConfigNames: []string{"m"}}, []string{DefaultValidatingWebhookConfig}, []string{"m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Namespace = "ops"
			o, err := tt.in.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.WebhookConfigNames, tt.validating) || !reflect.DeepEqual(o.MutatingWebhookConfigNames, tt.mutating) {
				t.Errorf("validating %q mutating %q, want %q %q", o.WebhookConfigNames, o.MutatingWebhookConfigNames, tt.validating, tt.mutating)
			}
		})
	}
}
