package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

// These tests create pods through the real API server, which calls the
// injection webhooks installed from config/webhook.

func agentPod(name string, labels, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "agent", Image: "example.com/agent:1", Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}},
			{Name: "tools", Image: "example.com/tools:1"},
		}},
	}
}

// routerWithBundle creates a router and, as the operator would, its bundle
// ConfigMap (testBundle's content) named cmName; "" creates no ConfigMap.
func routerWithBundle(t *testing.T, c client.Client, ns, name, cmName string, mut ...func(*v1alpha1.ContextRouter)) {
	t.Helper()
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	for _, m := range mut {
		m(r)
	}
	if err := c.Create(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if cmName == "" {
		return
	}
	b := testBundle(t, ns)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns},
		Data:       map[string]string{bundle.DataKey: string(b.Data), bundle.HashKey: b.Hash},
	}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// createPod creates pod in ns and returns it as stored.
func createPod(t *testing.T, c client.Client, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod.Namespace = ns
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	stored := &corev1.Pod{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), stored); err != nil {
		t.Fatal(err)
	}
	return stored
}

// eventually dry-runs the creation of pod until check accepts what the API
// server would store: the webhooks see namespace labels and the injector's
// cache sees objects a moment after they change.
func eventually(t *testing.T, c client.Client, ns string, pod *corev1.Pod, check func(*corev1.Pod) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		p := pod.DeepCopy()
		p.Namespace = ns
		if err := c.Create(t.Context(), p, client.DryRunAll); err != nil {
			t.Fatalf("dry run: %v", err)
		}
		if check(p) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dry-run pod never as expected: init containers %v, volumes %v", containerNames(p.Spec.InitContainers), p.Spec.Volumes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

func hasSidecar(p *corev1.Pod) bool {
	return len(p.Spec.InitContainers) > 0 && p.Spec.InitContainers[0].Name == SidecarName
}

// checkSidecar asserts the stored pod carries the sidecar of testBundle
// in ConfigMap cm (with the API server's defaults on top) and the URL on
// every container.
func checkSidecar(t *testing.T, got *corev1.Pod, image, cm, agent string, port int) {
	t.Helper()
	if !hasSidecar(got) {
		t.Fatalf("no sidecar: init containers %v", containerNames(got.Spec.InitContainers))
	}
	want, wantVols := wantSidecar(agent, port)
	want.Image = image
	wantVols[0].ConfigMap.Name = cm
	sc := got.Spec.InitContainers[0]
	mustEqual(t, "image", sc.Image, want.Image)
	mustEqual(t, "args", sc.Args, want.Args)
	mustEqual(t, "restartPolicy", sc.RestartPolicy, want.RestartPolicy)
	mustEqual(t, "mounts", sc.VolumeMounts, want.VolumeMounts)
	mustEqual(t, "securityContext", sc.SecurityContext, want.SecurityContext)
	mustEqual(t, "resources", sc.Resources, want.Resources)
	// The memory limit reaches serve through the Downward API (the API
	// server defaults the divisor).
	if len(sc.Env) != 1 || sc.Env[0].Name != want.Env[0].Name || sc.Env[0].ValueFrom == nil ||
		sc.Env[0].ValueFrom.ResourceFieldRef == nil || sc.Env[0].ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("env %+v, want %s from limits.memory", sc.Env, want.Env[0].Name)
	}
	for _, p := range []struct {
		name      string
		got, want *corev1.Probe
	}{{"startup", sc.StartupProbe, want.StartupProbe}, {"readiness", sc.ReadinessProbe, want.ReadinessProbe}, {"liveness", sc.LivenessProbe, want.LivenessProbe}} {
		if p.got == nil || p.got.Exec == nil || !slices.Equal(p.got.Exec.Command, p.want.Exec.Command) ||
			p.got.PeriodSeconds != p.want.PeriodSeconds || p.got.FailureThreshold != p.want.FailureThreshold {
			t.Errorf("%s probe %+v, want %+v", p.name, p.got, p.want)
		}
	}
	for _, wv := range wantVols {
		i := slices.IndexFunc(got.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == wv.Name })
		if i < 0 {
			t.Errorf("volume %s missing", wv.Name)
			continue
		}
		v := got.Spec.Volumes[i]
		switch {
		case wv.ConfigMap != nil:
			if v.ConfigMap == nil || v.ConfigMap.Name != wv.ConfigMap.Name {
				t.Errorf("volume %s = %+v, want ConfigMap %s", wv.Name, v.VolumeSource, wv.ConfigMap.Name)
			}
		case wv.Secret != nil:
			if v.Secret == nil || v.Secret.SecretName != wv.Secret.SecretName || !*v.Secret.Optional {
				t.Errorf("volume %s = %+v, want optional Secret %s", wv.Name, v.VolumeSource, wv.Secret.SecretName)
			}
		case wv.PersistentVolumeClaim != nil:
			if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != wv.PersistentVolumeClaim.ClaimName {
				t.Errorf("volume %s = %+v, want claim %s", wv.Name, v.VolumeSource, wv.PersistentVolumeClaim.ClaimName)
			}
		case wv.EmptyDir != nil:
			if v.EmptyDir == nil {
				t.Errorf("volume %s = %+v, want emptyDir", wv.Name, v.VolumeSource)
			}
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	for _, c := range got.Spec.Containers {
		if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvURL }); i < 0 || c.Env[i].Value != url {
			t.Errorf("container %s env %v, want %s=%s", c.Name, c.Env, EnvURL, url)
		}
	}
	if got.Annotations[AnnotationStatus] != StatusInjected {
		t.Errorf("annotations %v lack %s=%s", got.Annotations, AnnotationStatus, StatusInjected)
	}
}

func checkUntouched(t *testing.T, got *corev1.Pod) {
	t.Helper()
	if len(got.Spec.InitContainers) > 0 || len(got.Spec.Volumes) > 0 || got.Annotations[AnnotationStatus] != "" {
		t.Errorf("pod changed: init containers %v, volumes %v, annotations %v", containerNames(got.Spec.InitContainers), got.Spec.Volumes, got.Annotations)
	}
	for _, c := range got.Spec.Containers {
		if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == EnvURL }) {
			t.Errorf("container %s got %s", c.Name, EnvURL)
		}
	}
}

// findEvent waits for an Event in ns with reason whose regarding object is
// kind/name, and returns it.
func findEvent(t *testing.T, c client.Client, ns, reason, kind, name string) *eventsv1.Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var list eventsv1.EventList
		if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == kind && e.Regarding.Name == name {
				return &list.Items[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Event %s regarding %s %s in %s; have %d events", reason, kind, name, ns, len(list.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestInjection(t *testing.T) {
	env := servingWebhooks(t)
	c, warnings := warningClient(t, env)
	ctx := t.Context()
	ns := env.Namespace(t)
	routerWithBundle(t, c, ns, "acme", "acme-bundle")
	routerWithBundle(t, c, ns, "custom", "custom-bundle", func(r *v1alpha1.ContextRouter) { r.Spec.Deployment.Image = "example.com/custom:2" })
	routerWithBundle(t, c, ns, "fresh", "")
	inject := map[string]string{LabelInject: "true"}
	// The injector's cache may not have seen the routers yet; its live reads
	// cover that, so no waiting is needed here.

	t.Run("labelled pod gets the sidecar", func(t *testing.T) {
		warnings.take()
		pod := agentPod("hr", inject, map[string]string{AnnotationRouter: "acme"})
		pod.Spec.ServiceAccountName = "hr-assistant"
		got := createPod(t, c, ns, pod)
		checkSidecar(t, got, testImage, "acme-bundle", "hr-assistant", DefaultSidecarPort)
		if w := warnings.take(); len(w) != 0 {
			t.Errorf("warnings %q", w)
		}
		// The app's own settings stay.
		if env := got.Spec.Containers[0].Env; env[0] != (corev1.EnvVar{Name: "MODE", Value: "prod"}) {
			t.Errorf("agent env %v", env)
		}
	})

	t.Run("agent, port and image from annotations and the router", func(t *testing.T) {
		pod := agentPod("support", inject, map[string]string{AnnotationRouter: "custom", AnnotationAgent: "support-bot", AnnotationPort: "9000"})
		got := createPod(t, c, ns, pod)
		// The router has no status yet: the ConfigMap is bundle.ConfigMapName's.
		checkSidecar(t, got, "example.com/custom:2", "custom-bundle", "support-bot", 9000)
	})

	t.Run("router status names the bundle ConfigMap", func(t *testing.T) {
		r := &v1alpha1.ContextRouter{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "custom"}, r); err != nil {
			t.Fatal(err)
		}
		r.Status.Bundle = &v1alpha1.BundleStatus{ConfigMapName: "acme-bundle"}
		if err := c.Status().Update(ctx, r); err != nil {
			t.Fatal(err)
		}
		pod := agentPod("by-status", inject, map[string]string{AnnotationRouter: "custom"})
		eventually(t, c, ns, pod, func(p *corev1.Pod) bool {
			return hasSidecar(p) && slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == "contextrouter-bundle" && v.ConfigMap.Name == "acme-bundle"
			})
		})
	})

	t.Run("unlabelled pod is untouched", func(t *testing.T) {
		warnings.take()
		got := createPod(t, c, ns, agentPod("plain", nil, map[string]string{AnnotationRouter: "acme"}))
		checkUntouched(t, got)
		if w := warnings.take(); len(w) != 0 {
			t.Errorf("warnings %q", w)
		}
	})

	t.Run("pod naming a missing router: created unchanged, warning and Event", func(t *testing.T) {
		// A real owner, so the Event can name it as related.
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "lost-rs", Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "lost"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "lost"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "example.com/agent:1"}}},
				},
			},
		}
		if err := c.Create(ctx, rs); err != nil {
			t.Fatal(err)
		}
		warnings.take()
		pod := agentPod("lost", map[string]string{LabelInject: "true", "app": "lost"}, map[string]string{AnnotationRouter: "ghost"})
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
		got := createPod(t, c, ns, pod)
		checkUntouched(t, got)
		want := `contextrouter sidecar not injected: annotation contextrouter.dev/router: ContextRouter "ghost" not found in namespace "` + ns + `"`
		if w := warnings.take(); len(w) != 1 || w[0] != want {
			t.Errorf("warnings %q, want [%q]", w, want)
		}
		e := findEvent(t, c, ns, ReasonRouterNotFound, v1alpha1.KindContextRouter, "ghost")
		if e.Type != corev1.EventTypeWarning || e.Action != "Inject" || e.Note != "Pod lost: "+want ||
			e.Regarding.APIVersion != v1alpha1.GroupVersion.String() || e.Regarding.UID != "" {
			t.Errorf("event %+v", e)
		}
		if e.Related == nil || e.Related.Kind != "ReplicaSet" || e.Related.Name != "lost-rs" || e.Related.UID != rs.UID {
			t.Errorf("event related %+v, want the ReplicaSet", e.Related)
		}
		if e.ReportingController != "contextrouter.dev/injector" {
			t.Errorf("reportingController %q", e.ReportingController)
		}
	})

	t.Run("router without a bundle yet: injected, with a warning", func(t *testing.T) {
		warnings.take()
		got := createPod(t, c, ns, agentPod("early", inject, map[string]string{AnnotationRouter: "fresh"}))
		if !hasSidecar(got) {
			t.Fatalf("no sidecar")
		}
		var vols []string
		for _, v := range got.Spec.Volumes {
			vols = append(vols, v.Name)
		}
		if want := []string{"contextrouter-bundle", "contextrouter-cache", "contextrouter-tmp"}; !slices.Equal(vols, want) {
			t.Errorf("volumes %v, want %v", vols, want)
		}
		want := `contextrouter sidecar injected without the Secrets and Directory volumes of the router's sources (recreate the pod once the router is Ready): the bundle ConfigMap "fresh-bundle" of ContextRouter "fresh" does not exist yet: the pod starts once the operator writes it`
		if w := warnings.take(); len(w) != 1 || w[0] != want {
			t.Errorf("warnings %q, want [%q]", w, want)
		}
		r := &v1alpha1.ContextRouter{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh"}, r); err != nil {
			t.Fatal(err)
		}
		if e := findEvent(t, c, ns, ReasonBundleNotReady, v1alpha1.KindContextRouter, "fresh"); e.Regarding.UID != r.UID {
			t.Errorf("event regarding %+v, want the router's UID %s", e.Regarding, r.UID)
		}
	})
}

func TestInjectionByNamespace(t *testing.T) {
	env := servingWebhooks(t)
	c, warnings := warningClient(t, env)
	ns := env.Namespace(t)
	routerWithBundle(t, c, ns, "acme", "acme-bundle")
	nsObj := &corev1.Namespace{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[LabelInject] = InjectNamespaceValue
	if err := c.Update(t.Context(), nsObj); err != nil {
		t.Fatal(err)
	}

	// The API server sees the namespace label a moment later.
	opted := agentPod("opted", nil, map[string]string{AnnotationRouter: "acme"})
	eventually(t, c, ns, opted, hasSidecar)

	warnings.take()
	checkSidecar(t, createPod(t, c, ns, opted), testImage, "acme-bundle", "default", DefaultSidecarPort)
	checkUntouched(t, createPod(t, c, ns, agentPod("opted-out", map[string]string{LabelInject: "false"}, map[string]string{AnnotationRouter: "acme"})))
	// Most pods of an opted-in namespace are no agents: no warning for them.
	checkUntouched(t, createPod(t, c, ns, agentPod("not-an-agent", nil, nil)))
	if w := warnings.take(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	// A pod labelled true is the pod webhook's, and injected once.
	got := createPod(t, c, ns, agentPod("both", map[string]string{LabelInject: "true"}, map[string]string{AnnotationRouter: "acme"}))
	checkSidecar(t, got, testImage, "acme-bundle", "default", DefaultSidecarPort)
	if n := len(got.Spec.InitContainers); n != 1 {
		t.Errorf("%d init containers, want the one sidecar", n)
	}
}

// The webhooks never see kube-system, whatever its pods ask for.
func TestInjectionSkipsKubeSystem(t *testing.T) {
	env := servingWebhooks(t)
	c := env.Client
	const ns = "kube-system"
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	routerWithBundle(t, c, ns, "sys", "sys-bundle")
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "sys", Namespace: ns}})
		_ = c.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sys-bundle", Namespace: ns}})
	})
	pod := agentPod("sys-agent", map[string]string{LabelInject: "true"}, map[string]string{AnnotationRouter: "sys"})
	pod.Namespace = ns
	if err := c.Create(t.Context(), pod, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	checkUntouched(t, pod)
}
