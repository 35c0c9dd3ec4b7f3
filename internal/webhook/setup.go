// Package webhook holds the operator's admission webhooks and the
// certificates they are served with.
//
// The validating webhook refuses ContextRouters, ContextRoutes,
// ContextSources and AgentPermissions that the engine could not compile, with
// the same checks and messages as `contextrouter validate`; references to
// objects that do not exist yet are only warnings, because GitOps tools apply
// objects in any order.
//
// The mutating webhook (Injector) adds the router as a native sidecar to
// pods that ask for it with a label and an annotation.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Defaults of Options, matching config/default (namePrefix "contextrouter-").
const (
	DefaultServiceName              = "contextrouter-webhook-service"
	DefaultSecretName               = "contextrouter-webhook-cert"
	DefaultValidatingWebhookConfig  = "contextrouter-validating-webhook-configuration"
	DefaultMutatingWebhookConfig    = "contextrouter-mutating-webhook-configuration"
	DefaultClusterDomain            = "cluster.local"
	DefaultCAValidity               = 5 * 365 * 24 * time.Hour
	DefaultCertValidity             = 90 * 24 * time.Hour
	DefaultCheckInterval            = time.Hour
	defaultPrepareTimeout           = time.Minute
	serviceAccountNamespaceFile     = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
	defaultCertName, defaultKeyName = "tls.crt", "tls.key"
)

// Options configure the webhooks and their self-managed certificate. Every
// field has a default; Namespace defaults to $POD_NAMESPACE, else to the
// namespace of the pod's service account.
type Options struct {
	// DisableCertManagement leaves certificates to someone else (cert-manager,
	// see docs/webhook-certificates.md): the webhook server reads whatever is
	// mounted at CertDir and nothing patches caBundle.
	DisableCertManagement bool

	// Namespace of the webhook Service and the certificate Secret.
	Namespace string
	// ServiceName is the webhook Service; the certificate covers its DNS names.
	ServiceName string
	// SecretName holds the CA and the serving certificate.
	SecretName string
	// CertDir is where the webhook server reads tls.crt and tls.key. Empty
	// means the manager's webhook server's own CertDir.
	CertDir string
	// CertName and KeyName are the file names in CertDir (tls.crt, tls.key).
	CertName, KeyName string
	// WebhookConfigNames are the ValidatingWebhookConfigurations whose
	// webhooks get the CA as caBundle (nil: DefaultValidatingWebhookConfig).
	WebhookConfigNames []string
	// MutatingWebhookConfigNames are the MutatingWebhookConfigurations whose
	// webhooks get the CA as caBundle. When both lists are nil it is
	// DefaultMutatingWebhookConfig; a caller naming only validating
	// configurations gets no mutating one.
	MutatingWebhookConfigNames []string
	// RouterImage runs the injected sidecar of routers that set no
	// spec.deployment.image (the operator's --router-image). Without it
	// such routers' pods are admitted without a sidecar, with a warning.
	RouterImage string
	// DisableInjection serves no sidecar injector and leaves mutating
	// configurations alone (installs without injection have none).
	DisableInjection bool
	// ClusterDomain is the cluster's DNS suffix (cluster.local).
	ClusterDomain string
	// CAValidity and CertValidity are the lifetimes of newly issued
	// certificates; each is replaced when less than a third of it remains.
	CAValidity, CertValidity time.Duration
	// CheckInterval is how often the certificates are checked (hourly); a
	// check is also made when one reaches its rotation time.
	CheckInterval time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = os.Getenv("POD_NAMESPACE")
	}
	if o.Namespace == "" {
		b, err := os.ReadFile(serviceAccountNamespaceFile)
		if err != nil {
			return o, fmt.Errorf("webhook: no namespace given, POD_NAMESPACE is unset and the pod's namespace is unknown: %w", err)
		}
		o.Namespace = strings.TrimSpace(string(b))
	}
	setDefault(&o.ServiceName, DefaultServiceName)
	setDefault(&o.SecretName, DefaultSecretName)
	setDefault(&o.CertName, defaultCertName)
	setDefault(&o.KeyName, defaultKeyName)
	setDefault(&o.ClusterDomain, DefaultClusterDomain)
	setDefault(&o.CAValidity, DefaultCAValidity)
	setDefault(&o.CertValidity, DefaultCertValidity)
	setDefault(&o.CheckInterval, DefaultCheckInterval)
	if o.WebhookConfigNames == nil && o.MutatingWebhookConfigNames == nil && !o.DisableInjection {
		o.MutatingWebhookConfigNames = []string{DefaultMutatingWebhookConfig}
	}
	if o.WebhookConfigNames == nil {
		o.WebhookConfigNames = []string{DefaultValidatingWebhookConfig}
	}
	if o.CAValidity < 0 || o.CertValidity < 0 || o.CheckInterval < 0 {
		return o, errors.New("webhook: CAValidity, CertValidity and CheckInterval must be positive")
	}
	return o, nil
}

func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// DNSNames are the names the serving certificate covers: the Service's short
// and fully qualified names.
func (o Options) DNSNames() []string {
	svc := o.ServiceName + "." + o.Namespace + ".svc"
	return []string{svc, svc + "." + o.ClusterDomain, o.ServiceName + "." + o.Namespace, o.ServiceName}
}

// Setup registers the validating webhooks of the four kinds and the sidecar
// injector (InjectPath, InjectNamespacePath) on mgr's webhook server and,
// unless DisableCertManagement, a CertManager. The certificate is
// written before Setup returns, because the webhook server does not start
// without one; afterwards the CertManager keeps it fresh.
func Setup(mgr ctrl.Manager, opts Options) error {
	// The controllers already watch routers and sources, so reference checks
	// read the cache and ask the API server only about names it lacks.
	cached, live := mgr.GetClient(), mgr.GetAPIReader()
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ContextRouter{}).WithValidator(NewRouterValidator(cached, live)).Complete(); err != nil {
		return fmt.Errorf("webhook: ContextRouter: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ContextRoute{}).WithValidator(NewRouteValidator(cached, live)).Complete(); err != nil {
		return fmt.Errorf("webhook: ContextRoute: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ContextSource{}).WithValidator(NewSourceValidator()).Complete(); err != nil {
		return fmt.Errorf("webhook: ContextSource: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ContextClassifier{}).WithValidator(NewClassifierValidator(cached, live)).Complete(); err != nil {
		return fmt.Errorf("webhook: ContextClassifier: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.AgentPermission{}).WithValidator(NewPermissionValidator(cached, live)).Complete(); err != nil {
		return fmt.Errorf("webhook: AgentPermission: %w", err)
	}
	if !opts.DisableInjection {
		inject := &Injector{
			Cached: cached, Live: live, RouterImage: opts.RouterImage,
			Recorder: mgr.GetEventRecorder("contextrouter.dev/injector"),
		}
		byNamespace := *inject
		byNamespace.ByNamespace = true
		srv := mgr.GetWebhookServer()
		srv.Register(InjectPath, &admission.Webhook{Handler: inject})
		srv.Register(InjectNamespacePath, &admission.Webhook{Handler: &byNamespace})
	}
	if opts.DisableCertManagement {
		return nil
	}

	// Registering defaulted the server's options, so its CertDir is final.
	if srv, ok := mgr.GetWebhookServer().(*crwebhook.DefaultServer); ok {
		so := srv.Options
		switch {
		case opts.CertDir == "":
			opts.CertDir = so.CertDir
		case opts.CertDir != so.CertDir:
			return fmt.Errorf("webhook: CertDir %q differs from the webhook server's %q", opts.CertDir, so.CertDir)
		}
		setDefault(&opts.CertName, so.CertName)
		setDefault(&opts.KeyName, so.KeyName)
	}
	cm, err := NewCertManager(mgr.GetClient(), mgr.GetAPIReader(), opts)
	if err != nil {
		return err
	}
	cm.log = mgr.GetLogger().WithName("webhook-certs").WithValues("secret", cm.opts.Namespace+"/"+cm.opts.SecretName)
	ctx, cancel := context.WithTimeout(context.Background(), defaultPrepareTimeout)
	defer cancel()
	if err := cm.Prepare(ctx); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return mgr.Add(cm)
}

var _ manager.Runnable = (*CertManager)(nil)
