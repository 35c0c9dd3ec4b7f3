package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

// webhookConfig creates a ValidatingWebhookConfiguration with two webhooks
// for a resource nothing creates, so it intercepts no request, and deletes it
// when the test ends.
func webhookConfig(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	hook := func(n string) admissionregistrationv1.ValidatingWebhook {
		path := "/validate-" + n
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    n + ".certs.contextrouter.dev",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &ignore,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "x", Name: "hooks", Path: &path},
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"certs.contextrouter.dev"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
			}},
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("a"), hook("b")},
	}
	if err := env.Client.Create(t.Context(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })
}

func newTestCertManager(t *testing.T, env *testenv.Env, ns string, configs ...string) *CertManager {
	t.Helper()
	m, err := NewCertManager(env.Client, env.Client, Options{
		Namespace: ns, ServiceName: "hooks", SecretName: "hooks-cert",
		CertDir: t.TempDir(), WebhookConfigNames: configs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func getSecret(t *testing.T, env *testenv.Env, ns string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "hooks-cert"}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func getVWC(t *testing.T, env *testenv.Env, name string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// checkInjected asserts that every webhook of the configuration trusts bundle.
func checkInjected(t *testing.T, env *testenv.Env, name string, bundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	v := getVWC(t, env, name)
	for _, w := range v.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, bundle) {
			t.Errorf("webhook %s: caBundle is not the Secret's ca.crt", w.Name)
		}
	}
	return v
}

// checkFiles asserts that CertDir holds the Secret's serving certificate.
func checkFiles(t *testing.T, m *CertManager, s *corev1.Secret) {
	t.Helper()
	for file, key := range map[string]string{"tls.crt": KeyTLSCert, "tls.key": KeyTLSKey} {
		got, err := os.ReadFile(filepath.Join(m.opts.CertDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, s.Data[key]) {
			t.Errorf("%s in CertDir differs from the Secret's %s", file, key)
		}
	}
	if fi, err := os.Stat(filepath.Join(m.opts.CertDir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

// handshake serves CertDir's certificate and connects to it as the API
// server would at the CertManager's time: trusting only the caBundle, asking
// for the Service's name.
func handshake(t *testing.T, m *CertManager, bundle []byte) error {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(m.opts.CertDir, "tls.crt"), filepath.Join(m.opts.CertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("caBundle holds no certificate")
	}
	conn, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "hooks." + m.opts.Namespace + ".svc", Time: m.now})
	if err != nil {
		return err
	}
	return conn.Close()
}

func TestCertManagerIssuesAndInjects(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	vwcName := ns + "-hooks"
	webhookConfig(t, env, vwcName)
	m := newTestCertManager(t, env, ns, vwcName)

	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := getSecret(t, env, ns)
	if s.Type != corev1.SecretTypeTLS || s.Labels["app.kubernetes.io/managed-by"] != "contextrouter-operator" {
		t.Errorf("secret type %s labels %v", s.Type, s.Labels)
	}
	if p := planRotation(s.Data, m.opts.DNSNames(), time.Now()); p.needed() {
		t.Errorf("fresh secret needs rotation: %+v", p)
	}
	leaf := mustParse(t, s.Data[KeyTLSCert], s.Data[KeyTLSKey])
	wantNames := []string{"hooks." + ns + ".svc", "hooks." + ns + ".svc.cluster.local", "hooks." + ns, "hooks"}
	if strings.Join(leaf.cert.DNSNames, ",") != strings.Join(wantNames, ",") {
		t.Errorf("SANs %q, want %q", leaf.cert.DNSNames, wantNames)
	}
	checkFiles(t, m, s)
	v := checkInjected(t, env, vwcName, s.Data[KeyCACert])
	if err := handshake(t, m, v.Webhooks[0].ClientConfig.CABundle); err != nil {
		t.Errorf("TLS handshake with the injected caBundle: %v", err)
	}

	// A second check changes nothing.
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s2 := getSecret(t, env, ns); s2.ResourceVersion != s.ResourceVersion {
		t.Error("an idempotent check rewrote the Secret")
	}
	if v2 := getVWC(t, env, vwcName); v2.ResourceVersion != v.ResourceVersion {
		t.Error("an idempotent check rewrote the webhook configuration")
	}
}

func TestCertManagerRotates(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	vwcName := ns + "-hooks"
	webhookConfig(t, env, vwcName)
	m := newTestCertManager(t, env, ns, vwcName)
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := getSecret(t, env, ns)
	vBefore := getVWC(t, env, vwcName)

	t.Run("serving certificate", func(t *testing.T) {
		later := time.Now().Add(61 * 24 * time.Hour) // past two thirds of 90 days
		m.now = func() time.Time { return later }
		if err := m.Ensure(t.Context()); err != nil {
			t.Fatal(err)
		}
		after := getSecret(t, env, ns)
		if bytes.Equal(after.Data[KeyTLSCert], before.Data[KeyTLSCert]) {
			t.Fatal("the serving certificate was not rotated")
		}
		if !bytes.Equal(after.Data[KeyCACert], before.Data[KeyCACert]) || !bytes.Equal(after.Data[KeyCAKey], before.Data[KeyCAKey]) {
			t.Error("a serving rotation changed the CA")
		}
		checkFiles(t, m, after)
		if v := checkInjected(t, env, vwcName, after.Data[KeyCACert]); v.ResourceVersion != vBefore.ResourceVersion {
			t.Error("a serving rotation rewrote the webhook configuration; the caBundle should not change")
		}
		if err := handshake(t, m, after.Data[KeyCACert]); err != nil {
			t.Errorf("TLS handshake after rotation: %v", err)
		}
		before = after
	})

	t.Run("CA", func(t *testing.T) {
		later := time.Now().Add(4 * 365 * 24 * time.Hour) // past two thirds of 5 years
		m.now = func() time.Time { return later }
		if err := m.Ensure(t.Context()); err != nil {
			t.Fatal(err)
		}
		after := getSecret(t, env, ns)
		bundle, err := parseCertificates(after.Data[KeyCACert])
		if err != nil {
			t.Fatal(err)
		}
		oldCA := mustParse(t, before.Data[KeyCACert], before.Data[KeyCAKey])
		if len(bundle) != 2 || bundle[0].Equal(oldCA.cert) || !bundle[1].Equal(oldCA.cert) {
			t.Fatalf("bundle of %d certificates, want a new CA followed by the old one", len(bundle))
		}
		checkFiles(t, m, after)
		checkInjected(t, env, vwcName, after.Data[KeyCACert])
		if p := planRotation(after.Data, m.opts.DNSNames(), later); p.needed() {
			t.Errorf("after the CA rotation the plan is %+v", p)
		}
	})
}

// Replicas share the Secret: racing to create it or picking up another
// replica's rotation, they end up serving the same certificate.
func TestCertManagerReplicasAgree(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	vwcName := ns + "-hooks"
	webhookConfig(t, env, vwcName)
	replicas := []*CertManager{
		newTestCertManager(t, env, ns, vwcName),
		newTestCertManager(t, env, ns, vwcName),
		newTestCertManager(t, env, ns, vwcName),
	}
	ensureAll := func() {
		var wg sync.WaitGroup
		errs := make([]error, len(replicas))
		for i, m := range replicas {
			wg.Go(func() { errs[i] = m.Ensure(t.Context()) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("replica %d: %v", i, err)
			}
		}
	}

	ensureAll()
	s := getSecret(t, env, ns)
	for _, m := range replicas {
		checkFiles(t, m, s)
	}
	checkInjected(t, env, vwcName, s.Data[KeyCACert])

	// Every replica finds the serving certificate due at the same moment;
	// one rotation wins and the others adopt it.
	later := time.Now().Add(61 * 24 * time.Hour)
	for _, m := range replicas {
		m.now = func() time.Time { return later }
	}
	ensureAll()
	rotated := getSecret(t, env, ns)
	if bytes.Equal(rotated.Data[KeyTLSCert], s.Data[KeyTLSCert]) {
		t.Fatal("no replica rotated")
	}
	for _, m := range replicas {
		checkFiles(t, m, rotated)
	}
}

func TestCertManagerLeavesCertManagerSecretsAlone(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks-cert", Namespace: ns, Annotations: map[string]string{certManagerAnnotation: "serving-cert"}},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{KeyTLSCert: []byte("x"), KeyTLSKey: []byte("y")},
	}
	if err := env.Client.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	m := newTestCertManager(t, env, ns)
	// Prepare gives up at once instead of retrying until its deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := m.Prepare(ctx)
	if err == nil || !strings.Contains(err.Error(), `issued by cert-manager (Certificate "serving-cert")`) || ctx.Err() != nil {
		t.Fatalf("want an immediate cert-manager error, got %v (ctx %v)", err, ctx.Err())
	}
	if s := getSecret(t, env, ns); string(s.Data[KeyTLSCert]) != "x" {
		t.Error("the cert-manager Secret was overwritten")
	}
}

func TestCertManagerWaitsForWebhookConfiguration(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	vwcName := ns + "-later"
	m := newTestCertManager(t, env, ns, vwcName)
	err := m.Ensure(t.Context())
	if err == nil || !strings.Contains(err.Error(), `ValidatingWebhookConfiguration "`+vwcName+`"`) {
		t.Fatalf("want an error naming the missing configuration, got %v", err)
	}
	// The certificate is served regardless.
	checkFiles(t, m, getSecret(t, env, ns))

	webhookConfig(t, env, vwcName)
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, env, vwcName, getSecret(t, env, ns).Data[KeyCACert])
}

func TestCertManagerStartChecksAtOnce(t *testing.T) {
	env := controlPlane(t)
	ns := env.Namespace(t)
	vwcName := ns + "-hooks"
	webhookConfig(t, env, vwcName)
	m := newTestCertManager(t, env, ns, vwcName)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()

	deadline := time.Now().Add(20 * time.Second)
	for len(getVWC(t, env, vwcName).Webhooks[0].ClientConfig.CABundle) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Start did not inject the caBundle")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v on shutdown, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after cancel")
	}
	if m.NeedLeaderElection() {
		t.Error("every replica must run the CertManager")
	}
}

// TestSelfManagedCertificatesEndToEnd runs the operator's setup with its own
// certificates: the API server must trust the injected CA to reach the
// webhook. The Service name "localhost" puts "localhost" among the
// certificate's names, so the API server can call the webhook by URL.
func TestSelfManagedCertificatesEndToEnd(t *testing.T) {
	// The installed configuration validates routes everywhere: its webhook
	// server must run too.
	env := servingWebhooks(t)
	ns := env.Namespace(t)
	port := freePort(t)
	vwcName := ns + "-e2e"

	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	url := "https://localhost:" + strconv.Itoa(port) + "/validate-contextrouter-dev-v1alpha1-contextroute"
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: vwcName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vcontextroute-e2e.contextrouter.dev",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			// Only this test's namespace: other tests never meet this webhook.
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"contextrouter.dev"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"contextroutes"}},
			}},
		}},
	}
	if err := env.Client.Create(t.Context(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vwc) })

	certDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	if err := startManager(ctx, env, crwebhook.Options{Port: port, CertDir: certDir}, Options{
		Namespace: ns, ServiceName: "localhost", WebhookConfigNames: []string{vwcName},
	}, done); err != nil {
		t.Fatal(err)
	}
	// Setup wrote the certificate before the server started.
	s := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: DefaultSecretName}, s); err != nil {
		t.Fatalf("Setup did not create the Secret: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(certDir, "tls.crt")); !bytes.Equal(got, s.Data[KeyTLSCert]) {
		t.Error("the webhook server's CertDir does not hold the Secret's certificate")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !bytes.Equal(getVWC(t, env, vwcName).Webhooks[0].ClientConfig.CABundle, s.Data[KeyCACert]) {
		if time.Now().After(deadline) {
			t.Fatal("the CertManager did not inject the caBundle")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// With failurePolicy Fail, a create succeeds only if the API server
	// reached the webhook over TLS it trusts.
	if err := env.Client.Create(t.Context(), inNS(testRoute("true", "faq"), ns)); err != nil {
		t.Fatalf("valid route refused; did the API server trust the certificate? %v", err)
	}
	bad := inNS(testRoute("nosuch", "faq"), ns)
	bad.SetName("bad")
	err := env.Client.Create(t.Context(), bad)
	if err == nil || !strings.Contains(err.Error(), "undeclared reference to 'nosuch'") {
		t.Errorf("invalid route: want refused with the CEL message, got %v", err)
	}

	// And a client that trusts only the bundle reaches the server by name.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.Data[KeyCACert])
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get("https://localhost:" + strconv.Itoa(port) + "/healthz-does-not-exist")
	if err != nil {
		t.Fatalf("TLS to the webhook server with the bundle: %v", err)
	}
	resp.Body.Close()
}
