package packaging_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The operator's settings are those of config/manager (the kustomize
// install): the same arguments, probes, ports, security and resources.
func TestChartOperatorMatchesConfigManager(t *testing.T) {
	objs := mustRender(t, testNS)
	d, c := operator(t, objs)

	var want appsv1.Deployment
	typed(t, readObjects(t, "config/manager/manager.yaml"), "Deployment", "controller-manager", &want)
	wc := want.Spec.Template.Spec.Containers[0]
	wantPod := want.Spec.Template.Spec

	for _, arg := range wc.Args {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack config/manager's %q", c.Args, arg)
		}
	}
	if c.Args[0] != "operator" {
		t.Errorf("first argument %q, want the operator subcommand", c.Args[0])
	}
	same := []struct {
		what      string
		got, want any
	}{
		{"selector", d.Spec.Selector, want.Spec.Selector},
		{"pod securityContext", d.Spec.Template.Spec.SecurityContext, wantPod.SecurityContext},
		{"container securityContext", c.SecurityContext, wc.SecurityContext},
		{"livenessProbe", c.LivenessProbe, wc.LivenessProbe},
		{"readinessProbe", c.ReadinessProbe, wc.ReadinessProbe},
		{"ports", c.Ports, wc.Ports},
		{"resources", c.Resources, wc.Resources},
		{"volumeMounts", c.VolumeMounts, wc.VolumeMounts},
		{"volumes", d.Spec.Template.Spec.Volumes, wantPod.Volumes},
		{"POD_NAMESPACE", env(c, "POD_NAMESPACE"), env(&wc, "POD_NAMESPACE")},
		{"terminationGracePeriodSeconds", d.Spec.Template.Spec.TerminationGracePeriodSeconds, wantPod.TerminationGracePeriodSeconds},
		{"default-container annotation", d.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"], "manager"},
	}
	for _, s := range same {
		if !reflect.DeepEqual(s.got, s.want) {
			t.Errorf("%s:\n chart  %+v\n config %+v", s.what, s.got, s.want)
		}
	}
	if d.Spec.Template.Spec.ServiceAccountName != "contextrouter-controller-manager" ||
		find(objs, "ServiceAccount", "contextrouter-controller-manager") == nil {
		t.Errorf("the pod runs as %q; the chart must create contextrouter-controller-manager", d.Spec.Template.Spec.ServiceAccountName)
	}
}

// The key content a reviewer would check first, with default values.
func TestChartDefaults(t *testing.T) {
	objs := mustRender(t, testNS)
	d, c := operator(t, objs)
	image := "ghcr.io/contextrouter/contextrouter:" + appVersion(t)

	if c.Image != image || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %q (%s), want %q (IfNotPresent)", c.Image, c.ImagePullPolicy, image)
	}
	if e := env(c, "ROUTER_IMAGE"); e == nil || e.Value != image {
		t.Errorf("ROUTER_IMAGE %+v, want the operator image %q", e, image)
	}
	for _, arg := range []string{"--leader-elect", "--router-image=$(ROUTER_IMAGE)", "--metrics-secure=true", "--webhook-port=9443"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %q", c.Args, arg)
		}
	}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--manage-webhook-certs") || strings.HasPrefix(arg, "--namespace") {
			t.Errorf("default args carry %q: certificates are self-managed and every namespace is watched by default", arg)
		}
	}
	if *d.Spec.Replicas != 1 {
		t.Errorf("replicas %d, want 1", *d.Spec.Replicas)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v is not restricted", sc)
	}
	psc := d.Spec.Template.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil ||
		psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v is not restricted", psc)
	}

	// Self-managed certificates: no cert-manager objects, no injection
	// annotations, no caBundle (the operator writes it).
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("default values render cert-manager's %s %s", o.GetKind(), o.GetName())
		}
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	typed(t, objs, "ValidatingWebhookConfiguration", "contextrouter-validating-webhook-configuration", &vwc)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	typed(t, objs, "MutatingWebhookConfiguration", "contextrouter-mutating-webhook-configuration", &mwc)
	for _, ann := range []map[string]string{vwc.Annotations, mwc.Annotations} {
		if len(ann) > 0 {
			t.Errorf("webhook configuration annotations %v, want none", ann)
		}
	}
	for _, w := range vwc.Webhooks {
		if *w.FailurePolicy != admissionregistrationv1.Fail || len(w.ClientConfig.CABundle) > 0 ||
			w.ClientConfig.Service.Name != "contextrouter-webhook-service" || w.ClientConfig.Service.Namespace != testNS {
			t.Errorf("validating webhook %s: failurePolicy %s, caBundle %d bytes, service %+v", w.Name, *w.FailurePolicy, len(w.ClientConfig.CABundle), w.ClientConfig.Service)
		}
	}
	// Pods opt in with a label, or their namespace does; never kube-system
	// or the operator's namespace.
	excluded := metav1.LabelSelectorRequirement{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", testNS},
	}
	wantHooks := []struct {
		name, path string
		object     *metav1.LabelSelector
		namespace  *metav1.LabelSelector
	}{{
		"inject.contextrouter.dev", "/mutate--v1-pod",
		&metav1.LabelSelector{MatchLabels: map[string]string{"contextrouter.dev/inject": "true"}},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{excluded}},
	}, {
		"inject-namespace.contextrouter.dev", "/mutate--v1-pod-namespace",
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "contextrouter.dev/inject", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		&metav1.LabelSelector{
			MatchLabels:      map[string]string{"contextrouter.dev/inject": "enabled"},
			MatchExpressions: []metav1.LabelSelectorRequirement{excluded},
		},
	}}
	if len(mwc.Webhooks) != len(wantHooks) {
		t.Fatalf("mutating webhooks %d, want %d", len(mwc.Webhooks), len(wantHooks))
	}
	for i, want := range wantHooks {
		mw := mwc.Webhooks[i]
		if mw.Name != want.name || *mw.ClientConfig.Service.Path != want.path {
			t.Errorf("mutating webhook %d is %s at %s, want %s at %s", i, mw.Name, *mw.ClientConfig.Service.Path, want.name, want.path)
		}
		if *mw.FailurePolicy != admissionregistrationv1.Ignore || *mw.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy ||
			*mw.TimeoutSeconds > 10 || *mw.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			t.Errorf("%s: failurePolicy %s, reinvocation %s, timeout %d, sideEffects %s",
				mw.Name, *mw.FailurePolicy, *mw.ReinvocationPolicy, *mw.TimeoutSeconds, *mw.SideEffects)
		}
		if !reflect.DeepEqual(mw.ObjectSelector, want.object) {
			t.Errorf("%s: objectSelector %+v, want %+v", mw.Name, mw.ObjectSelector, want.object)
		}
		if !reflect.DeepEqual(mw.NamespaceSelector, want.namespace) {
			t.Errorf("%s: namespaceSelector %+v, want %+v", mw.Name, mw.NamespaceSelector, want.namespace)
		}
	}

	var svc corev1.Service
	typed(t, objs, "Service", "contextrouter-webhook-service", &svc)
	if svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "webhook-server" ||
		!reflect.DeepEqual(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("webhook Service %+v does not reach the operator's webhook-server port", svc.Spec)
	}
	for _, o := range objs {
		if o.GetNamespace() != "" && o.GetNamespace() != testNS {
			t.Errorf("%s %s is in namespace %s, not the release's", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || o.GetLabels()["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("%s %s labels %v lack the Helm release labels", o.GetKind(), o.GetName(), o.GetLabels())
		}
	}
}

func TestChartValues(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{{
		name: "cert-manager",
		args: []string{"--set", "certManager.enabled=true,injection.enabled=false"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d, c := operator(t, objs)
			for _, arg := range []string{"--manage-webhook-certs=false", "--cert-dir=/etc/contextrouter/webhook-certs"} {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args %q lack %q", c.Args, arg)
				}
			}
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == "webhook-certs" && m.MountPath == "/etc/contextrouter/webhook-certs" && m.ReadOnly
			}) {
				t.Errorf("volumeMounts %+v lack the certificate Secret", c.VolumeMounts)
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Secret != nil && v.Secret.SecretName == "contextrouter-webhook-cert"
			}) {
				t.Errorf("volumes %+v lack the Secret contextrouter-webhook-cert", d.Spec.Template.Spec.Volumes)
			}
			if find(objs, "MutatingWebhookConfiguration", "contextrouter-mutating-webhook-configuration") != nil {
				t.Error("injection.enabled=false still renders the MutatingWebhookConfiguration")
			}
			vwc := find(objs, "ValidatingWebhookConfiguration", "contextrouter-validating-webhook-configuration")
			if got := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != testNS+"/contextrouter-serving-cert" {
				t.Errorf("inject-ca-from %q", got)
			}
			cert := find(objs, "Certificate", "contextrouter-serving-cert")
			if cert == nil || find(objs, "Issuer", "contextrouter-selfsigned") == nil {
				t.Fatalf("want a Certificate and a self-signed Issuer among %s", names(objs))
			}
			dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			svc := "contextrouter-webhook-service." + testNS + ".svc"
			if !slices.Equal(dns, []string{svc, svc + ".cluster.local"}) || secret != "contextrouter-webhook-cert" {
				t.Errorf("Certificate dnsNames %q secretName %q", dns, secret)
			}
		},
	}, {
		name: "cert-manager with a cluster issuer",
		args: []string{"--set", "certManager.enabled=true,certManager.issuerRef.kind=ClusterIssuer,certManager.issuerRef.name=corp-ca"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			if find(objs, "Issuer", "contextrouter-selfsigned") != nil {
				t.Error("an issuerRef still renders the self-signed Issuer")
			}
			ref, _, _ := unstructured.NestedStringMap(find(objs, "Certificate", "contextrouter-serving-cert").Object, "spec", "issuerRef")
			if !reflect.DeepEqual(ref, map[string]string{"kind": "ClusterIssuer", "name": "corp-ca"}) {
				t.Errorf("issuerRef %v", ref)
			}
			mwc := find(objs, "MutatingWebhookConfiguration", "contextrouter-mutating-webhook-configuration")
			if mwc.GetAnnotations()["cert-manager.io/inject-ca-from"] != testNS+"/contextrouter-serving-cert" {
				t.Errorf("the mutating webhook lacks the CA injection annotation: %v", mwc.GetAnnotations())
			}
		},
	}, {
		name: "image, router image, namespaces, replicas",
		args: []string{"--set", "image.repository=localhost/contextrouter,image.tag=dev,image.pullPolicy=Never,replicas=2",
			"--set", "routerImage=registry.example.com/router:v9,logFormat=text,logLevel=debug",
			"--set-json", `watchNamespaces=["team-a","team-b"]`},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d, c := operator(t, objs)
			if c.Image != "localhost/contextrouter:dev" || c.ImagePullPolicy != corev1.PullNever || *d.Spec.Replicas != 2 {
				t.Errorf("image %q %s replicas %d", c.Image, c.ImagePullPolicy, *d.Spec.Replicas)
			}
			if e := env(c, "ROUTER_IMAGE"); e.Value != "registry.example.com/router:v9" {
				t.Errorf("ROUTER_IMAGE %q", e.Value)
			}
			for _, arg := range []string{"--namespace=team-a", "--namespace=team-b", "--log-format=text", "--log-level=debug"} {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args %q lack %q", c.Args, arg)
				}
			}
		},
	}, {
		name: "digest",
		args: []string{"--set", "image.digest=sha256:" + strings.Repeat("ab", 32)},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			_, c := operator(t, objs)
			want := "ghcr.io/contextrouter/contextrouter@sha256:" + strings.Repeat("ab", 32)
			if c.Image != want || env(c, "ROUTER_IMAGE").Value != want {
				t.Errorf("image %q, ROUTER_IMAGE %q, want %q", c.Image, env(c, "ROUTER_IMAGE").Value, want)
			}
		},
	}, {
		name: "no leader election, no metrics, no aggregated roles",
		args: []string{"--set", "leaderElection.enabled=false,metrics.enabled=false,rbac.aggregateToDefaultRoles=false"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			_, c := operator(t, objs)
			if slices.Contains(c.Args, "--leader-elect") || !slices.Contains(c.Args, "--metrics-bind-address=0") {
				t.Errorf("args %q", c.Args)
			}
			if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
				t.Errorf("ports %+v still expose metrics", c.Ports)
			}
			for _, gone := range [][2]string{
				{"Role", "contextrouter-leader-election-role"},
				{"Service", "contextrouter-controller-manager-metrics-service"},
				{"ClusterRole", "contextrouter-metrics-auth-role"},
				{"ClusterRole", "contextrouter-editor-role"},
				{"ClusterRole", "contextrouter-viewer-role"},
			} {
				if find(objs, gone[0], gone[1]) != nil {
					t.Errorf("%s %s is still rendered", gone[0], gone[1])
				}
			}
			// Routers in token mode still serve /metrics to metrics readers.
			if find(objs, "ClusterRole", "contextrouter-metrics-reader") == nil {
				t.Error("ClusterRole contextrouter-metrics-reader is not rendered without operator metrics")
			}
		},
	}, {
		name: "failure policies and the injection namespace selector",
		args: []string{"--set", "webhook.failurePolicy=Ignore,injection.failurePolicy=Fail,injection.timeoutSeconds=5",
			"--set-json", `injection.namespaceSelector={"matchLabels":{"contextrouter.dev/injection":"enabled"},"matchExpressions":[{"key":"tier","operator":"NotIn","values":["prod"]}]}`},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			typed(t, objs, "ValidatingWebhookConfiguration", "contextrouter-validating-webhook-configuration", &vwc)
			for _, w := range vwc.Webhooks {
				if *w.FailurePolicy != admissionregistrationv1.Ignore {
					t.Errorf("%s: failurePolicy %s", w.Name, *w.FailurePolicy)
				}
			}
			var mwc admissionregistrationv1.MutatingWebhookConfiguration
			typed(t, objs, "MutatingWebhookConfiguration", "contextrouter-mutating-webhook-configuration", &mwc)
			exprs := []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", testNS}},
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}},
			}
			// The values' selector narrows both ways in; the namespace
			// opt-in label stays.
			wantLabels := []map[string]string{
				{"contextrouter.dev/injection": "enabled"},
				{"contextrouter.dev/injection": "enabled", "contextrouter.dev/inject": "enabled"},
			}
			for i, mw := range mwc.Webhooks {
				if *mw.FailurePolicy != admissionregistrationv1.Fail || *mw.TimeoutSeconds != 5 {
					t.Errorf("%s: failurePolicy %s timeout %d", mw.Name, *mw.FailurePolicy, *mw.TimeoutSeconds)
				}
				want := &metav1.LabelSelector{MatchLabels: wantLabels[i], MatchExpressions: exprs}
				if !reflect.DeepEqual(mw.NamespaceSelector, want) {
					t.Errorf("%s: namespaceSelector %+v\nwant %+v", mw.Name, mw.NamespaceSelector, want)
				}
			}
		},
	}, {
		name: "scheduling",
		args: []string{"--set-json", `nodeSelector={"kubernetes.io/os":"linux"}`,
			"--set-json", `tolerations=[{"key":"infra","operator":"Exists","effect":"NoSchedule"}]`,
			"--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}]}}}`,
			"--set", "priorityClassName=system-cluster-critical,podAnnotations.team=platform"},
		check: func(t *testing.T, objs []*unstructured.Unstructured) {
			d, _ := operator(t, objs)
			s := d.Spec.Template.Spec
			if s.NodeSelector["kubernetes.io/os"] != "linux" || len(s.Tolerations) != 1 || s.Tolerations[0].Key != "infra" ||
				s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.PriorityClassName != "system-cluster-critical" ||
				d.Spec.Template.Annotations["team"] != "platform" {
				t.Errorf("pod spec %+v annotations %v", s, d.Spec.Template.Annotations)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustRender(t, testNS, tt.args...))
		})
	}
}

// Values the chart refuses, with a message that says why.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"two unelected operators", []string{"--set", "replicas=2,leaderElection.enabled=false"}, "replicas > 1 needs leaderElection.enabled"},
		{"an unknown failure policy", []string{"--set", "webhook.failurePolicy=Maybe"}, "/webhook/failurePolicy"},
		{"a webhook timeout over 10s", []string{"--set", "injection.timeoutSeconds=30"}, "/injection/timeoutSeconds"},
		{"a misspelt value", []string{"--set", "certmanager.enabled=true"}, "'certmanager' not allowed"},
		{"a malformed digest", []string{"--set", "image.digest=latest"}, "/image/digest"},
		{"a bad namespace", []string{"--set-json", `watchNamespaces=["Team_A"]`}, "/watchNamespaces/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, testNS, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// ruleSet flattens RBAC rules into "group resource name verb" and "url verb"
// lines, so that rules written differently but granting the same compare
// equal.
func ruleSet(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out = append(out, "url "+u+" "+v)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					ns := r.ResourceNames
					if len(ns) == 0 {
						ns = []string{"*"}
					}
					for _, n := range ns {
						out = append(out, strings.Join([]string{g, res, n, v}, " "))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The operator's roles are what `make manifests` generates from the
// +kubebuilder:rbac markers (config/rbac/role.yaml).
func TestChartRBACMatchesTheMarkers(t *testing.T) {
	objs := mustRender(t, testNS)
	generated := readObjects(t, "config/rbac/role.yaml")
	for _, kind := range []string{"ClusterRole", "Role"} {
		t.Run(kind, func(t *testing.T) {
			var want, got rbacv1.ClusterRole // a Role's rules decode the same way
			typed(t, generated, kind, "operator", &want)
			typed(t, objs, kind, "contextrouter-operator", &got)
			w, g := ruleSet(want.Rules), ruleSet(got.Rules)
			for _, r := range w {
				if !slices.Contains(g, r) {
					t.Errorf("the chart's %s lacks %q (config/rbac/role.yaml has it)", kind, r)
				}
			}
			for _, r := range g {
				if !slices.Contains(w, r) {
					t.Errorf("the chart's %s grants %q, which config/rbac/role.yaml does not", kind, r)
				}
			}
		})
	}
}

// The webhooks are those `make manifests` generates from the
// +kubebuilder:webhook markers (config/webhook/manifests.yaml), pointed at
// the release's Service.
func TestChartWebhooksMatchTheMarkers(t *testing.T) {
	objs := mustRender(t, testNS)
	generated := readObjects(t, "config/webhook/manifests.yaml")

	type hook struct {
		Path                    string
		Rules                   []admissionregistrationv1.RuleWithOperations
		FailurePolicy           *admissionregistrationv1.FailurePolicyType
		MatchPolicy             *admissionregistrationv1.MatchPolicyType
		SideEffects             *admissionregistrationv1.SideEffectClass
		TimeoutSeconds          *int32
		AdmissionReviewVersions []string
		MatchConditions         []admissionregistrationv1.MatchCondition
		ReinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType
		// The generated selectors name the namespace contextrouter-system,
		// which the chart renders here as the release namespace.
		ObjectSelector, NamespaceSelector *metav1.LabelSelector
	}
	validating := func(objs []*unstructured.Unstructured, name string) map[string]hook {
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		typed(t, objs, "ValidatingWebhookConfiguration", name, &c)
		out := map[string]hook{}
		for _, w := range c.Webhooks {
			out[w.Name] = hook{*w.ClientConfig.Service.Path, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects,
				w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, nil, w.ObjectSelector, w.NamespaceSelector}
		}
		return out
	}
	mutating := func(objs []*unstructured.Unstructured, name string) map[string]hook {
		var c admissionregistrationv1.MutatingWebhookConfiguration
		typed(t, objs, "MutatingWebhookConfiguration", name, &c)
		out := map[string]hook{}
		for _, w := range c.Webhooks {
			out[w.Name] = hook{*w.ClientConfig.Service.Path, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects,
				w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, w.ReinvocationPolicy, w.ObjectSelector, w.NamespaceSelector}
		}
		return out
	}
	compare := func(t *testing.T, got, want map[string]hook) {
		for name, w := range want {
			g, ok := got[name]
			if !ok {
				t.Errorf("the chart lacks webhook %s", name)
				continue
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("webhook %s:\n chart  %+v\n config %+v", name, g, w)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("the chart has webhook %s, which config/webhook/manifests.yaml does not", name)
			}
		}
	}

	t.Run("validating", func(t *testing.T) {
		compare(t, validating(objs, "contextrouter-validating-webhook-configuration"), validating(generated, "validating-webhook-configuration"))
	})
	t.Run("mutating", func(t *testing.T) {
		compare(t, mutating(objs, "contextrouter-mutating-webhook-configuration"), mutating(generated, "mutating-webhook-configuration"))
	})
}
