package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/contextrouter/contextrouter/internal/kubeauth"
)

// Audience is the audience a caller's ServiceAccount token must be issued
// for (a projected token with `audience: contextrouter.dev`).
const Audience = "contextrouter.dev"

// httpError is a refusal: the status code and message it is answered with.
type httpError struct {
	code int
	msg  string
}

func errorf(code int, format string, args ...any) *httpError {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// tokenAuth turns bearer tokens into agent names, and guards /metrics.
type tokenAuth struct {
	m *metrics

	mu       sync.Mutex
	reviewer *kubeauth.Reviewer
	// scrape serves /metrics to callers whose token's user may get the
	// nonResourceURL /metrics (TokenReview and SubjectAccessReview).
	scrape http.Handler
}

// tokenAnswer is who a token identifies, or why it does not.
type tokenAnswer struct {
	agent string
	// namespace of the token's ServiceAccount.
	namespace string
	err       *httpError
}

func newTokenAuth(m *metrics) *tokenAuth { return &tokenAuth{m: m} }

// ensure connects to the Kubernetes API on first need: TokenReview for
// agents' tokens, and /metrics behind TokenReview and SubjectAccessReview
// (the metrics-reader convention).
func (a *tokenAuth) ensure(kube func() (*rest.Config, error), log *slog.Logger, metricsHandler http.Handler) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reviewer != nil {
		return nil
	}
	if kube == nil {
		return errors.New("verifying ServiceAccount tokens needs the Kubernetes API, and none is configured")
	}
	cfg, err := kube()
	if err == nil {
		var hc *http.Client
		if hc, err = rest.HTTPClientFor(cfg); err == nil {
			a.reviewer, err = kubeauth.NewReviewer(cfg, hc)
		}
	}
	if err != nil {
		return fmt.Errorf("connecting to the Kubernetes API for TokenReview: %w", err)
	}
	a.reviewer.Observe = func(result string) { a.m.tokenReviews.WithLabelValues(result).Inc() }
	a.scrape = a.reviewer.Filter(metricsHandler, writeError, func(err error) {
		log.Error("metrics authorization failed", "error", err.Error())
	})
	return nil
}

// scrapeHandler is /metrics for token mode; nil until ensure succeeded.
func (a *tokenAuth) scrapeHandler() http.Handler {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.scrape
}

// agent authenticates a request's bearer token and returns the agent: the
// name of the ServiceAccount the token belongs to.
func (a *tokenAuth) agent(ctx context.Context, r *http.Request) (tokenAnswer, *httpError) {
	token, ok := kubeauth.BearerToken(r)
	if !ok {
		return tokenAnswer{}, errorf(http.StatusUnauthorized, "this router requires an `Authorization: Bearer <token>` header with a ServiceAccount token for audience %s", Audience)
	}
	a.mu.Lock()
	reviewer := a.reviewer
	a.mu.Unlock()
	if reviewer == nil {
		return tokenAnswer{}, errorf(http.StatusServiceUnavailable, "token verification is not available")
	}
	st, err := reviewer.Authenticate(ctx, token, []string{Audience})
	if err != nil {
		return tokenAnswer{}, errorf(http.StatusServiceUnavailable, "token verification failed: %v", err)
	}
	ans := reviewAnswer(st)
	return ans, ans.err
}

// reviewAnswer reads a TokenReview's status: the token must be
// authenticated for our audience and belong to a ServiceAccount.
func reviewAnswer(st authenticationv1.TokenReviewStatus) tokenAnswer {
	if !st.Authenticated {
		msg := "token rejected"
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return tokenAnswer{err: errorf(http.StatusUnauthorized, "%s", msg)}
	}
	// An authenticator that ignores audiences returns none; such a token may
	// have been issued for another service.
	if !slices.Contains(st.Audiences, Audience) {
		return tokenAnswer{err: errorf(http.StatusUnauthorized, "token rejected: it is not issued for audience %s", Audience)}
	}
	ns, name, ok := serviceAccountRef(st.User.Username)
	if !ok {
		return tokenAnswer{err: errorf(http.StatusForbidden, "user %q is not a ServiceAccount: only ServiceAccount tokens identify agents", st.User.Username)}
	}
	return tokenAnswer{agent: name, namespace: ns}
}

// serviceAccountRef splits "system:serviceaccount:<namespace>:<name>".
func serviceAccountRef(username string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}

// identify settles the agent of a request. A pinned agent (sidecar) wins;
// with token auth the agent is the token's ServiceAccount; otherwise the
// request's own agent field is trusted. A request naming an agent other than
// the established one is refused.
func (s *Server) identify(ctx context.Context, r *http.Request, st *state) (string, *httpError) {
	switch {
	case s.opts.Agent != "":
		return s.opts.Agent, nil
	case st.tokens:
		return s.tokenAgent(ctx, r, st.cfg.Router.Namespace)
	}
	return "", nil
}

// tokenAgent authenticates a request's ServiceAccount token and returns the
// agent. Agents are the ServiceAccounts of the router's namespace (when it
// has one): a ServiceAccount of the same name elsewhere is somebody else.
func (s *Server) tokenAgent(ctx context.Context, r *http.Request, namespace string) (string, *httpError) {
	ans, herr := s.auth.agent(ctx, r)
	if herr != nil {
		return "", herr
	}
	if namespace != "" && ans.namespace != namespace {
		return "", errorf(http.StatusForbidden, "ServiceAccount %s/%s is not in the router's namespace %q: agents are the ServiceAccounts of the router's namespace", ans.namespace, ans.agent, namespace)
	}
	return ans.agent, nil
}

// writeAuthError answers a refused request with its challenge.
func writeAuthError(w http.ResponseWriter, herr *httpError) {
	kubeauth.Challenge(w.Header(), herr.code)
	writeError(w, herr.code, herr.msg)
}

// reconcileAgent combines the established agent with the one a request names.
func reconcileAgent(established, requested string) (string, *httpError) {
	switch {
	case established == "":
		return requested, nil
	case requested == "" || requested == established:
		return established, nil
	}
	return "", errorf(http.StatusForbidden, "agent %q is not allowed: this router identifies the caller as agent %q", requested, established)
}
