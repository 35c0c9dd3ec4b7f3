package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/contextrouter/contextrouter/internal/atomicfile"
)

// The operator reads and writes its certificate Secret in its own namespace
// only, and injects the CA into its webhook configurations.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update,namespace=system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;update

// certManagerAnnotation marks Secrets that cert-manager issues; the
// CertManager refuses to overwrite them.
const certManagerAnnotation = "cert-manager.io/certificate-name"

// Retry delays after a failed check: doubling from minRetry, at most maxRetry.
const (
	minRetry = 5 * time.Second
	maxRetry = 5 * time.Minute
)

// CertManager keeps the webhook's serving certificate valid. The Secret is the
// source of truth shared by every replica: whoever finds it missing or due for
// rotation writes a new one (optimistic concurrency settles races), and every
// replica copies it to its own CertDir, where the webhook server's certificate
// watcher reloads it, and injects the CA into the webhook configurations.
//
// It runs on every replica (no leader election): each serves webhooks.
type CertManager struct {
	writer client.Client
	reader client.Reader
	opts   Options
	params issueParams
	now    func() time.Time
	log    logr.Logger

	mu       sync.Mutex
	lastData map[string][]byte
}

var _ manager.LeaderElectionRunnable = (*CertManager)(nil)

// NewCertManager returns a CertManager that writes with c and reads with r.
// r should be uncached (manager.GetAPIReader()): the Secret lives in the
// operator's namespace, which a namespace-scoped cache may not watch.
func NewCertManager(c client.Client, r client.Reader, opts Options) (*CertManager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.CertDir == "" {
		return nil, errors.New("webhook: CertDir is required to manage certificates")
	}
	return &CertManager{
		writer: c,
		reader: r,
		opts:   opts,
		params: issueParams{
			caCommonName: opts.ServiceName + "-ca",
			dnsNames:     opts.DNSNames(),
			caValidity:   opts.CAValidity,
			certValidity: opts.CertValidity,
		},
		now: time.Now,
		log: logf.Log.WithName("webhook-certs").WithValues("secret", opts.Namespace+"/"+opts.SecretName),
	}, nil
}

// NeedLeaderElection is false: every replica needs the certificate on its own disk.
func (m *CertManager) NeedLeaderElection() bool { return false }

// Prepare makes sure the serving certificate is on disk, retrying transient
// API errors until ctx ends. Call it before the manager starts: the webhook
// server refuses to start without a certificate. It also tries to inject the
// CA, but a webhook configuration that is missing does not fail it (Start
// keeps trying).
func (m *CertManager) Prepare(ctx context.Context) error {
	delay := time.Second
	for {
		data, err := m.syncSecret(ctx)
		if err == nil {
			if injectErr := m.injectCABundle(ctx, data[KeyCACert]); injectErr != nil {
				m.log.Error(injectErr, "injecting the CA bundle; will retry once running")
			}
			err = m.writeFiles(data)
		}
		if err == nil {
			return nil
		}
		if permanent(err) {
			return err
		}
		m.log.Error(err, "preparing the webhook certificate; retrying", "in", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("preparing the webhook certificate: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// Start checks at once, then at every CheckInterval or when a certificate
// reaches its rotation time, whichever comes first; failures are retried
// sooner. It returns when ctx ends.
func (m *CertManager) Start(ctx context.Context) error {
	retryDelay := minRetry
	for {
		wait := m.opts.CheckInterval
		if err := m.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.log.Error(err, "webhook certificate check failed", "retryIn", retryDelay)
			wait = min(wait, retryDelay)
			retryDelay = min(2*retryDelay, maxRetry)
		} else {
			retryDelay = minRetry
			if due := m.dueIn(); due < wait {
				wait = due
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// dueIn is the time until the current certificates reach their rotation time
// (plus a second, so the check finds them due), at least minRetry.
func (m *CertManager) dueIn() time.Duration {
	m.mu.Lock()
	data := m.lastData
	m.mu.Unlock()
	next := nextCheck(data)
	if next.IsZero() {
		return minRetry
	}
	return max(next.Sub(m.now())+time.Second, minRetry)
}

// Ensure runs one check: the Secret holds a valid CA and serving certificate
// (issued or rotated if needed), CertDir holds the serving certificate, and
// every named webhook configuration trusts the CA.
func (m *CertManager) Ensure(ctx context.Context) error {
	data, err := m.syncSecret(ctx)
	if err != nil {
		return err
	}
	// The API server must trust a new CA before this replica serves a
	// certificate it signed; a failed injection still lets the files be
	// written, since the bundle keeps trusting the CA the old ones came from.
	injectErr := m.injectCABundle(ctx, data[KeyCACert])
	return errors.Join(injectErr, m.writeFiles(data))
}

// syncSecret returns the Secret's data after issuing or rotating what the
// plan requires. Conflicts mean another replica wrote first: read again and
// re-plan, which then usually finds nothing to do.
func (m *CertManager) syncSecret(ctx context.Context) (map[string][]byte, error) {
	key := types.NamespacedName{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			return nil, fmt.Errorf("secret %s: gave up after %d conflicting writes", key, attempt)
		}
		now := m.now()
		var secret corev1.Secret
		err := m.reader.Get(ctx, key, &secret)
		switch {
		case apierrors.IsNotFound(err):
			data, err := issue(nil, rotation{CA: true, Serving: true}, m.params, now)
			if err != nil {
				return nil, err
			}
			secret = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: secretLabels()},
				Type:       corev1.SecretTypeTLS,
				Data:       data,
			}
			err = m.writer.Create(ctx, &secret)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating secret %s: %w", key, err)
			}
			m.log.Info("created the webhook certificate", "dnsNames", m.params.dnsNames)
			return m.remember(data), nil
		case err != nil:
			return nil, fmt.Errorf("reading secret %s: %w", key, err)
		}

		if name := secret.Annotations[certManagerAnnotation]; name != "" {
			return nil, permanentError{fmt.Errorf("secret %s is issued by cert-manager (Certificate %q): disable self-managed certificates or use another secret name", key, name)}
		}
		plan := planRotation(secret.Data, m.params.dnsNames, now)
		if !plan.needed() {
			return m.remember(secret.Data), nil
		}
		data, err := issue(secret.Data, plan, m.params, now)
		if err != nil {
			return nil, err
		}
		secret.Data = data
		if err := m.writer.Update(ctx, &secret); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			return nil, fmt.Errorf("updating secret %s: %w", key, err)
		}
		m.log.Info("rotated the webhook certificate", "reason", plan.Reason, "newCA", plan.CA)
		return m.remember(data), nil
	}
}

func (m *CertManager) remember(data map[string][]byte) map[string][]byte {
	m.mu.Lock()
	m.lastData = data
	m.mu.Unlock()
	return data
}

func secretLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "contextrouter",
		"app.kubernetes.io/component":  "webhook",
		"app.kubernetes.io/managed-by": "contextrouter-operator",
	}
}

// writeFiles puts the serving certificate and key into CertDir when they
// differ from what is there. Each file is replaced atomically (rename), so
// the certificate watcher never reads half a file.
func (m *CertManager) writeFiles(data map[string][]byte) error {
	if len(data[KeyTLSCert]) == 0 || len(data[KeyTLSKey]) == 0 {
		return fmt.Errorf("secret %s/%s has no %s or %s", m.opts.Namespace, m.opts.SecretName, KeyTLSCert, KeyTLSKey)
	}
	if err := os.MkdirAll(m.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("creating the certificate directory: %w", err)
	}
	changed := false
	for _, f := range []struct {
		name string
		data []byte
		perm os.FileMode
	}{
		// The key first: until the certificate follows, the watcher sees a
		// mismatched pair, refuses it and keeps serving the old one.
		{m.opts.KeyName, data[KeyTLSKey], 0o600},
		{m.opts.CertName, data[KeyTLSCert], 0o644},
	} {
		path := filepath.Join(m.opts.CertDir, f.name)
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, f.data) {
			continue
		}
		if err := atomicfile.WriteFile(path, f.data, f.perm); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		m.log.Info("wrote the serving certificate", "dir", m.opts.CertDir)
	}
	return nil
}

// injectCABundle sets caBundle on every webhook of the named configurations.
// A missing configuration is an error (retried soon): GitOps may apply it
// after the operator starts.
func (m *CertManager) injectCABundle(ctx context.Context, bundle []byte) error {
	if len(bundle) == 0 {
		return fmt.Errorf("secret %s/%s has no %s", m.opts.Namespace, m.opts.SecretName, KeyCACert)
	}
	var errs []error
	for _, name := range m.opts.WebhookConfigNames {
		errs = append(errs, m.inject(ctx, "ValidatingWebhookConfiguration", name, bundle,
			func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }))
	}
	for _, name := range m.opts.MutatingWebhookConfigNames {
		errs = append(errs, m.inject(ctx, "MutatingWebhookConfiguration", name, bundle,
			func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }))
	}
	return errors.Join(errs...)
}

func (m *CertManager) inject(ctx context.Context, kind, name string, bundle []byte, newObj func() client.Object) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// A fresh object per attempt: decoding into a used one could keep
		// fields the server no longer has.
		obj := newObj()
		if err := m.reader.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			return fmt.Errorf("reading %s %q: %w", kind, name, err)
		}
		var configs []*admissionregistrationv1.WebhookClientConfig
		switch o := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for i := range o.Webhooks {
				configs = append(configs, &o.Webhooks[i].ClientConfig)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for i := range o.Webhooks {
				configs = append(configs, &o.Webhooks[i].ClientConfig)
			}
		}
		changed := false
		for _, cc := range configs {
			if !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle = bytes.Clone(bundle)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if err := m.writer.Update(ctx, obj); err != nil {
			return fmt.Errorf("updating the caBundle of %s %q: %w", kind, name, err)
		}
		m.log.Info("injected the CA bundle", "kind", kind, "name", name, "webhooks", len(configs))
		return nil
	})
}

// permanentError marks errors that retrying cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
