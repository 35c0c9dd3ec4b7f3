package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Audience is the audience a caller's ServiceAccount token must be issued
// for (a projected token with `audience: contextrouter.dev`).
const Audience = "contextrouter.dev"

// TokenReviewer verifies a bearer token with the Kubernetes TokenReview API;
// client-go's AuthenticationV1().TokenReviews() is one.
type TokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// Token answers are remembered briefly, keyed by a hash of the token (tokens
// are not kept): a busy agent costs one review a minute, and a rejected token
// cannot make every request call the API server.
const (
	tokenTTL         = time.Minute
	tokenRejectedTTL = 10 * time.Second
	tokenMaxEntries  = 4096
	reviewTimeout    = 5 * time.Second
)

// httpError is an error with the status code it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *httpError {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// tokenAuth turns bearer tokens into agent names.
type tokenAuth struct {
	m   *metrics
	now func() time.Time

	mu       sync.Mutex
	reviewer TokenReviewer
	answers  map[[sha256.Size]byte]tokenAnswer
}

type tokenAnswer struct {
	agent string
	// namespace of the token's ServiceAccount.
	namespace string
	err       *httpError
	expires   time.Time
}

func newTokenAuth(m *metrics) *tokenAuth {
	return &tokenAuth{m: m, now: time.Now, answers: map[[sha256.Size]byte]tokenAnswer{}}
}

// ensure creates the reviewer on first need.
func (a *tokenAuth) ensure(factory func() (TokenReviewer, error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reviewer != nil {
		return nil
	}
	if factory == nil {
		return errors.New("verifying ServiceAccount tokens needs the Kubernetes API, and none is configured")
	}
	r, err := factory()
	if err != nil {
		return fmt.Errorf("connecting to the Kubernetes API for TokenReview: %w", err)
	}
	a.reviewer = r
	return nil
}

// bearerToken returns the token of an `Authorization: Bearer` header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// agent authenticates a request's bearer token and returns the agent: the
// name of the ServiceAccount the token belongs to.
func (a *tokenAuth) agent(ctx context.Context, r *http.Request) (tokenAnswer, *httpError) {
	token, ok := bearerToken(r)
	if !ok {
		return tokenAnswer{}, errorf(http.StatusUnauthorized, "this router requires an `Authorization: Bearer <token>` header with a ServiceAccount token for audience %s", Audience)
	}
	key := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	ans, hit := a.answers[key]
	reviewer := a.reviewer
	a.mu.Unlock()
	if hit && now.Before(ans.expires) {
		return ans, ans.err
	}
	if reviewer == nil {
		return tokenAnswer{}, errorf(http.StatusServiceUnavailable, "token verification is not available")
	}

	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := reviewer.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		a.m.tokenReviews.WithLabelValues("error").Inc()
		return tokenAnswer{}, errorf(http.StatusServiceUnavailable, "token verification failed: TokenReview: %v", err)
	}
	ans = reviewAnswer(tr)
	if ans.err != nil {
		a.m.tokenReviews.WithLabelValues("rejected").Inc()
		ans.expires = now.Add(tokenRejectedTTL)
	} else {
		a.m.tokenReviews.WithLabelValues("authenticated").Inc()
		ans.expires = now.Add(tokenTTL)
	}
	a.mu.Lock()
	if len(a.answers) >= tokenMaxEntries {
		for k, v := range a.answers {
			if !now.Before(v.expires) {
				delete(a.answers, k)
			}
		}
		if len(a.answers) >= tokenMaxEntries {
			clear(a.answers)
		}
	}
	a.answers[key] = ans
	a.mu.Unlock()
	return ans, ans.err
}

// reviewAnswer reads a TokenReview's status: the token must be
// authenticated for our audience and belong to a ServiceAccount.
func reviewAnswer(tr *authenticationv1.TokenReview) tokenAnswer {
	st := tr.Status
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

// serviceAccountName returns <name> of "system:serviceaccount:<namespace>:<name>".
func serviceAccountName(username string) (string, bool) {
	_, name, ok := serviceAccountRef(username)
	return name, ok
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
		ans, herr := s.auth.agent(ctx, r)
		if herr != nil {
			return "", herr
		}
		// Agents are the ServiceAccounts of the router's namespace: a
		// ServiceAccount of the same name elsewhere is somebody else.
		if rns := st.cfg.Router.Namespace; rns != "" && ans.namespace != rns {
			return "", errorf(http.StatusForbidden, "ServiceAccount %s/%s is not in the router's namespace %q: agents are the ServiceAccounts of the router's namespace", ans.namespace, ans.agent, rns)
		}
		return ans.agent, nil
	}
	return "", nil
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
