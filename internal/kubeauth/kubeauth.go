// Package kubeauth checks bearer tokens with the Kubernetes API, for the
// router's callers and for the metrics endpoints of the router and the
// operator: TokenReview says whose a token is, SubjectAccessReview what that
// user may do. Answers are remembered briefly, keyed by a hash of the token,
// so a busy caller costs a review a minute and a rejected token cannot make
// every request call the API server.
//
// controller-runtime's metrics filter (pkg/metrics/filters) does the same
// for the metrics endpoint, but answers an invalid token with 500 and an
// error log line instead of 401, and links k8s.io/apiserver (25 MB more
// binary, 15 MB more resident memory in every router and sidecar).
package kubeauth

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// How long answers are remembered, how many, and how long one review may
// take. A revoked permission or deleted ServiceAccount takes effect within
// AllowedTTL.
const (
	AllowedTTL    = time.Minute
	RefusedTTL    = 10 * time.Second
	maxAnswers    = 4096
	reviewTimeout = 5 * time.Second
)

// Results of a TokenReview, for Reviewer.Observe.
const (
	ResultAuthenticated = "authenticated"
	ResultRejected      = "rejected"
	ResultError         = "error"
)

// BearerToken returns the token of an `Authorization: Bearer <token>`
// header; the scheme is case-insensitive (RFC 7235).
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Challenge adds the WWW-Authenticate header (RFC 6750) to a 401 or 403 of
// an endpoint that takes bearer tokens.
func Challenge(h http.Header, code int) {
	switch code {
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="contextrouter"`)
	case http.StatusForbidden:
		h.Set("WWW-Authenticate", `Bearer realm="contextrouter", error="insufficient_scope"`)
	}
}

// Reviewer asks the API server about tokens and remembers the answers.
type Reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	// Observe, when set, is told the result of every TokenReview that
	// reaches the API server (ResultAuthenticated, ResultRejected, ResultError).
	Observe func(result string)
	now     func() time.Time

	mu      sync.Mutex
	answers map[[sha256.Size]byte]answer
}

type answer struct {
	status  authenticationv1.TokenReviewStatus // TokenReview answers
	allowed bool                               // SubjectAccessReview answers
	expires time.Time
}

// NewReviewer calls the API server of cfg through hc (rest.HTTPClientFor).
// Its account needs create on tokenreviews and subjectaccessreviews, which
// the ClusterRole system:auth-delegator grants.
func NewReviewer(cfg *rest.Config, hc *http.Client) (*Reviewer, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("SubjectAccessReview client: %w", err)
	}
	return &Reviewer{
		tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(),
		now: time.Now, answers: map[[sha256.Size]byte]answer{},
	}, nil
}

// key hashes a question: its kind, the token and the rest, each preceded by
// its length so that no two questions share a preimage. Tokens are not
// kept, only hashes.
func key(kind, token string, rest ...string) [sha256.Size]byte {
	n := len(kind) + len(token) + 2*binary.MaxVarintLen64
	for _, p := range rest {
		n += len(p) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	for _, p := range append([]string{kind, token}, rest...) {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return sha256.Sum256(b)
}

func (rv *Reviewer) lookup(k [sha256.Size]byte) (answer, bool) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	a, ok := rv.answers[k]
	return a, ok && rv.now().Before(a.expires)
}

func (rv *Reviewer) remember(k [sha256.Size]byte, a answer, ok bool) {
	now := rv.now()
	a.expires = now.Add(RefusedTTL)
	if ok {
		a.expires = now.Add(AllowedTTL)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.answers) >= maxAnswers {
		for k, v := range rv.answers {
			if !now.Before(v.expires) {
				delete(rv.answers, k)
			}
		}
		if len(rv.answers) >= maxAnswers {
			clear(rv.answers)
		}
	}
	rv.answers[k] = a
}

// Authenticate returns the TokenReview status of token for audiences (none:
// the API server's own). An error means the API server could not answer.
func (rv *Reviewer) Authenticate(ctx context.Context, token string, audiences []string) (authenticationv1.TokenReviewStatus, error) {
	k := key("authn", token, audiences...)
	if a, ok := rv.lookup(k); ok {
		return a.status, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := rv.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		rv.observe(ResultError)
		return authenticationv1.TokenReviewStatus{}, fmt.Errorf("TokenReview: %w", err)
	}
	if tr.Status.Authenticated {
		rv.observe(ResultAuthenticated)
	} else {
		rv.observe(ResultRejected)
	}
	rv.remember(k, answer{status: tr.Status}, tr.Status.Authenticated)
	return tr.Status, nil
}

func (rv *Reviewer) observe(result string) {
	if rv.Observe != nil {
		rv.Observe(result)
	}
}

// Authorize reports whether the user of token may verb the nonResourceURL
// path (like `kubectl get --raw /metrics`). user is what Authenticate said.
func (rv *Reviewer) Authorize(ctx context.Context, token string, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	k := key("authz", token, verb, path)
	if a, ok := rv.lookup(k); ok {
		return a.allowed, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	sar, err := rv.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	rv.remember(k, answer{allowed: sar.Status.Allowed}, sar.Status.Allowed)
	return sar.Status.Allowed, nil
}

// Refuse writes a refusal; the filter has set the challenge header.
type Refuse func(w http.ResponseWriter, code int, msg string)

// PlainRefuse writes msg as text.
func PlainRefuse(w http.ResponseWriter, code int, msg string) { http.Error(w, msg, code) }

// Filter serves next to callers whose bearer token the API server accepts
// for its own audiences and whose user SubjectAccessReview allows the
// request's verb on its path: the metrics-reader convention of
// kube-rbac-proxy. Others get 401 (no or a rejected token) or 403, with a
// challenge, and 503 when the API server cannot answer (logged with
// logErr).
func (rv *Reviewer) Filter(next http.Handler, refuse Refuse, logErr func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deny := func(code int, msg string) {
			Challenge(w.Header(), code)
			refuse(w, code, msg)
		}
		token, ok := BearerToken(r)
		if !ok {
			deny(http.StatusUnauthorized, "a bearer token is required: one the Kubernetes API server accepts, of a user allowed to get "+r.URL.Path)
			return
		}
		st, err := rv.Authenticate(r.Context(), token, nil)
		if err == nil && !st.Authenticated {
			deny(http.StatusUnauthorized, "the bearer token was rejected by the Kubernetes API server")
			return
		}
		allowed := false
		if err == nil {
			allowed, err = rv.Authorize(r.Context(), token, st.User, strings.ToLower(r.Method), r.URL.Path)
		}
		switch {
		case err != nil:
			logErr(err)
			refuse(w, http.StatusServiceUnavailable, "token verification failed: the Kubernetes API server could not be asked")
		case !allowed:
			deny(http.StatusForbidden, fmt.Sprintf("user %q may not %s %s", st.User.Username, strings.ToLower(r.Method), r.URL.Path))
		default:
			next.ServeHTTP(w, r)
		}
	})
}
