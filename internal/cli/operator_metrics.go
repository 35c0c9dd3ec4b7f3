package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsAuthTTL is how long a scrape decision is remembered: a scraper
// every 15 s costs two API requests a minute, and a revoked permission takes
// effect within a minute.
const (
	metricsAuthTTL        = time.Minute
	metricsAuthMaxEntries = 1024
)

// metricsAuthFilter is a metricsserver.FilterProvider: a request must carry
// a bearer token that TokenReview accepts and whose user SubjectAccessReview
// allows the request's verb on its path (a nonResourceURL, like
// `kubectl get --raw /metrics`). It is what kube-rbac-proxy did, in process.
func metricsAuthFilter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	a := &metricsAuth{
		tokens:    cs.AuthenticationV1().TokenReviews(),
		access:    cs.AuthorizationV1().SubjectAccessReviews(),
		decisions: make(map[[sha256.Size]byte]metricsDecision),
		now:       time.Now,
	}
	return a.filter, nil
}

type metricsAuth struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu        sync.Mutex
	decisions map[[sha256.Size]byte]metricsDecision
}

type metricsDecision struct {
	status  int // http.StatusOK, StatusUnauthorized or StatusForbidden
	expires time.Time
}

func (a *metricsAuth) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		status, err := a.decide(r.Context(), strings.TrimSpace(token), strings.ToLower(r.Method), r.URL.Path)
		if err != nil {
			log.Error(err, "metrics authorization failed", "path", r.URL.Path)
			http.Error(w, "authorization failed", http.StatusInternalServerError)
			return
		}
		switch status {
		case http.StatusOK:
			next.ServeHTTP(w, r)
		case http.StatusUnauthorized:
			http.Error(w, "Unauthorized", status)
		default:
			http.Error(w, "Forbidden", status)
		}
	}), nil
}

// decide authenticates the token and authorizes verb on path, remembering
// the answer for metricsAuthTTL (keyed by a hash, so tokens are not kept).
func (a *metricsAuth) decide(ctx context.Context, token, verb, path string) (int, error) {
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	d, ok := a.decisions[key]
	a.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.status, nil
	}

	status, err := a.review(ctx, token, verb, path)
	if err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.decisions) >= metricsAuthMaxEntries {
		for k, v := range a.decisions {
			if !now.Before(v.expires) {
				delete(a.decisions, k)
			}
		}
		if len(a.decisions) >= metricsAuthMaxEntries {
			clear(a.decisions)
		}
	}
	a.decisions[key] = metricsDecision{status: status, expires: now.Add(metricsAuthTTL)}
	return status, nil
}

func (a *metricsAuth) review(ctx context.Context, token, verb, path string) (int, error) {
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, nil
	}
	u := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return 0, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}
