package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

func init() { Register(v1alpha1.SourceHTTPAPI, newHTTPAPI) }

const (
	// queryPlaceholder is replaced by the query text in the URL and the body.
	queryPlaceholder = "{{query}}"

	errorExcerptBytes   = 200
	invalidJSONExcerpt  = 100
	httpAPIUserAgent    = "contextrouter"
	maxRedirects        = 10
	httpAPIFieldPrefix  = "spec.httpAPI"
	parentDeadlineSlack = 10 * time.Millisecond
	contentTypeJSON     = "application/json"
	maxIdleConnsPerHost = 16
)

// nearPlaceholder finds spellings of the placeholder that are not replaced,
// such as "{{ query }}" or "{{Query}}", so a typo fails validation instead of
// sending the literal text to the API.
var nearPlaceholder = regexp.MustCompile(`\{\{\s*(?i:query)\s*\}\}`)

// HTTPAPI is a QuerySource that asks a search API per query. It is immutable
// after construction and safe for concurrent use.
type HTTPAPI struct {
	name        string
	method      string
	url         queryTemplate // rendered then parsed per request
	target      string        // scheme://host/path of the URL, for error messages
	body        *queryTemplate
	headers     []httpHeader
	setsCT      bool // a spec header sets Content-Type
	respPath    fieldPath
	textPath    fieldPath
	titlePath   fieldPath
	pathPath    fieldPath
	timePath    fieldPath
	timeout     time.Duration
	maxResults  int
	maxSize     int64
	maxSizeText string // as written, e.g. "1Mi"
	client      *http.Client
	getenv      func(string) string
	secrets     SecretResolver
	logger      *slog.Logger
	// credURL is the URL as sent, for the credentials of its user part
	// (scrubbed from body excerpts).
	credURL string
}

// queryTemplate is literal text with the query inserted between the pieces.
type queryTemplate struct {
	lits []string                    // len(escs)+1 pieces
	escs []func(query string) string // how the query is written at each gap
}

func (t *queryTemplate) render(query string) string {
	if len(t.escs) == 0 {
		return t.lits[0]
	}
	var b strings.Builder
	b.WriteString(t.lits[0])
	for i, esc := range t.escs {
		b.WriteString(esc(query))
		b.WriteString(t.lits[i+1])
	}
	return b.String()
}

// httpHeader is a spec header prepared for per-request resolution.
type httpHeader struct {
	field string // "spec.httpAPI.headers[1]", for errors
	name  string // canonical form
	// value: lits[0] vars[0] lits[1] ... ; ${VAR} references resolved per request.
	lits   []string
	vars   []string
	secret *v1alpha1.SecretKeySelector
}

var _ QuerySource = (*HTTPAPI)(nil)

// Name implements Source.
func (h *HTTPAPI) Name() string { return h.name }

// Timeout is the deadline of one Fetch; the engine uses it for the per-source
// deadline and Fetch enforces it as well.
func (h *HTTPAPI) Timeout() time.Duration { return h.timeout }

func newHTTPAPI(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	s := spec.Spec.HTTPAPI
	if s == nil {
		return nil, fmt.Errorf("%s: required when type is %s", httpAPIFieldPrefix, v1alpha1.SourceHTTPAPI)
	}
	if s.MaxResults < 1 {
		// Validate refuses it; a hand-built spec must not make Fetch panic.
		return nil, fmt.Errorf("%s.maxResults: %d is not positive", httpAPIFieldPrefix, s.MaxResults)
	}
	h := &HTTPAPI{
		name:        spec.Name,
		method:      string(s.Method),
		timeout:     s.Timeout.Duration,
		maxResults:  int(s.MaxResults),
		maxSize:     s.MaxResponseSize.Value(),
		maxSizeText: s.MaxResponseSize.String(),
		getenv:      env.Getenv,
		secrets:     env.Secrets,
		logger:      env.Logger,
	}
	if h.getenv == nil {
		h.getenv = os.Getenv
	}
	if h.secrets == nil {
		h.secrets = EnvFileSecrets{Getenv: h.getenv}
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}

	var err error
	if h.url, h.target, err = compileURL(s.URL); err != nil {
		return nil, fmt.Errorf("%s.url: %w", httpAPIFieldPrefix, err)
	}

	contentType := ""
	if h.headers, contentType, err = compileHeaders(httpAPIFieldPrefix, s.Headers); err != nil {
		return nil, err
	}
	for _, hd := range h.headers {
		if hd.name == "Content-Type" {
			h.setsCT = true
		}
	}

	if s.Body != "" {
		// Only a JSON body can be checked; a header may declare another type.
		checkJSON := !h.setsCT || strings.Contains(strings.ToLower(contentType), "json")
		if h.body, err = compileBody(s.Body, checkJSON); err != nil {
			return nil, fmt.Errorf("%s.body: %w", httpAPIFieldPrefix, err)
		}
	}

	for _, f := range []struct {
		name string
		raw  string
		dst  *fieldPath
	}{
		{"responsePath", s.ResponsePath, &h.respPath},
		{"textField", s.TextField, &h.textPath},
		{"titleField", s.TitleField, &h.titlePath},
		{"pathField", s.PathField, &h.pathPath},
		{"timeField", s.TimeField, &h.timePath},
	} {
		if *f.dst, err = parseFieldPath(f.raw); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", httpAPIFieldPrefix, f.name, err)
		}
	}

	redirects := compileRedirects(httpAPIFieldPrefix, s.FollowRedirects, h.headers)
	h.client = redirects.client(env.httpClient())
	h.credURL = h.url.render("q")
	return h, nil
}

// httpClient is Env.HTTPClient, else the shared default client.
func (e Env) httpClient() *http.Client {
	if e.HTTPClient != nil {
		return e.HTTPClient
	}
	return defaultHTTPClient()
}

// compileURL splits the URL at each {{query}}, choosing the escaping by where
// the placeholder sits, and checks that the URL parses once substituted. It
// also returns scheme://host/path for error messages: no query string (it
// holds the query text) and no userinfo (it may hold a password).
func compileURL(raw string) (queryTemplate, string, error) {
	if err := checkNearPlaceholders(raw); err != nil {
		return queryTemplate{}, "", err
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return queryTemplate{}, "", errors.New("contains white space; write a space as %20")
	}

	fragment := strings.IndexByte(raw, '#')
	if fragment < 0 {
		fragment = len(raw)
	}
	queryStart := strings.IndexByte(raw[:fragment], '?')
	if queryStart < 0 {
		queryStart = fragment
	}
	authorityEnd := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		authorityEnd = i + 3
		if j := strings.IndexAny(raw[authorityEnd:], "/?#"); j >= 0 {
			authorityEnd += j
		} else {
			authorityEnd = len(raw)
		}
	}

	t := queryTemplate{}
	rest, offset := raw, 0
	for {
		i := strings.Index(rest, queryPlaceholder)
		if i < 0 {
			t.lits = append(t.lits, rest)
			break
		}
		pos := offset + i
		switch {
		case pos < authorityEnd:
			return queryTemplate{}, "", errors.New("{{query}} may appear only in the path or the query string")
		case pos > fragment:
			return queryTemplate{}, "", errors.New("{{query}} in the fragment (after #) is never sent to the server")
		case pos > queryStart:
			t.escs = append(t.escs, url.QueryEscape)
		default:
			t.escs = append(t.escs, pathSegmentEscape)
		}
		t.lits = append(t.lits, rest[:i])
		rest = rest[i+len(queryPlaceholder):]
		offset = pos + len(queryPlaceholder)
	}

	u, err := url.Parse(t.render("q"))
	if err != nil {
		return queryTemplate{}, "", errors.New("invalid URL: " + redact.ParseError(err))
	}
	target := u.Scheme + "://" + u.Host + raw[authorityEnd:queryStart]
	return t, target, nil
}

// pathSegmentEscape escapes the query as one path segment. url.PathEscape
// already escapes "/"; a query of "." or ".." is escaped too, or it would walk
// the URL's path (GET /docs/../admin).
func pathSegmentEscape(q string) string {
	e := url.PathEscape(q)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// compileBody splits the body at each {{query}}, where the query is written as
// a JSON string literal.
func compileBody(raw string, checkJSON bool) (*queryTemplate, error) {
	if err := checkNearPlaceholders(raw); err != nil {
		return nil, err
	}
	parts := strings.Split(raw, queryPlaceholder)
	t := &queryTemplate{lits: parts}
	for range parts[1:] {
		t.escs = append(t.escs, jsonString)
	}
	if checkJSON && !json.Valid([]byte(t.render("q"))) {
		if strings.Contains(raw, `"`+queryPlaceholder+`"`) {
			return nil, errors.New(`not valid JSON: {{query}} is inserted as a quoted JSON string, so do not put it in quotes`)
		}
		return nil, errors.New("not valid JSON once {{query}} is replaced by a JSON string")
	}
	return t, nil
}

func checkNearPlaceholders(s string) error {
	for _, m := range nearPlaceholder.FindAllString(s, -1) {
		if m != queryPlaceholder {
			return fmt.Errorf("%q is not replaced; write %s", m, queryPlaceholder)
		}
	}
	return nil
}

// jsonString quotes s as a JSON string. HTML escaping is off so that & < >
// reach the API as written (they need no escaping in JSON).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // encoding a string cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// compileHeaders prepares the header values (their ${VAR} references) of
// the spec block at prefix ("spec.httpAPI", "spec.mcp"). It returns the
// literal Content-Type value, if one is set, so the body check knows whether
// the body should be JSON.
func compileHeaders(prefix string, specs []v1alpha1.HTTPHeader) ([]httpHeader, string, error) {
	out := make([]httpHeader, 0, len(specs))
	contentType := ""
	for i, s := range specs {
		field := fmt.Sprintf("%s.headers[%d]", prefix, i)
		name := http.CanonicalHeaderKey(s.Name)
		h := httpHeader{field: field, name: name}
		switch {
		case s.ValueFrom != nil:
			ref := s.ValueFrom.SecretKeyRef
			h.secret = &ref
		case s.Value != nil:
			var err error
			if h.lits, h.vars, err = parseInterpolation(*s.Value); err != nil {
				return nil, "", fmt.Errorf("%s.value: %w", field, err)
			}
			if name == "Content-Type" && len(h.vars) == 0 {
				contentType = *s.Value
			}
		default:
			// Validate refuses it; without a value the header has nothing to send.
			return nil, "", fmt.Errorf("%s: set one of value and valueFrom", field)
		}
		out = append(out, h)
	}
	return out, contentType, nil
}

// parseInterpolation splits a header value at ${VAR} references. A "$" that
// does not start "${" is literal; a "${" must be a complete reference.
func parseInterpolation(v string) (lits, vars []string, err error) {
	var lit strings.Builder
	for i := 0; i < len(v); {
		if v[i] != '$' || i+1 >= len(v) || v[i+1] != '{' {
			lit.WriteByte(v[i])
			i++
			continue
		}
		end := strings.IndexByte(v[i+2:], '}')
		if end < 0 {
			return nil, nil, fmt.Errorf("unclosed ${ at byte %d", i)
		}
		name := v[i+2 : i+2+end]
		if !ValidEnvName(name) {
			return nil, nil, fmt.Errorf("${%s} is not a valid variable reference (letters, digits and _; not starting with a digit)", name)
		}
		lits = append(lits, lit.String())
		lit.Reset()
		vars = append(vars, name)
		i += 2 + end + 1
	}
	lits = append(lits, lit.String())
	return lits, vars, nil
}

// ValidEnvName says whether s may be NAME in a ${NAME} reference: letters,
// digits and _, not starting with a digit.
func ValidEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// value resolves the header for one request. Errors name the field and the
// variable or secret but never include a value.
func (hd *httpHeader) value(getenv func(string) string, secrets SecretResolver) (string, error) {
	if hd.secret != nil {
		v, err := secrets.SecretValue(hd.secret.Name, hd.secret.Key)
		if err != nil {
			return "", fmt.Errorf("%s.valueFrom.secretKeyRef: %w", hd.field, err)
		}
		if !v1alpha1.ValidHeaderValue(v) {
			return "", fmt.Errorf("%s.valueFrom.secretKeyRef: secret %s key %s contains a line break or control character", hd.field, hd.secret.Name, hd.secret.Key)
		}
		return v, nil
	}
	if len(hd.vars) == 0 {
		return hd.lits[0], nil
	}
	var b strings.Builder
	b.WriteString(hd.lits[0])
	for i, name := range hd.vars {
		v := getenv(name)
		if v == "" {
			return "", fmt.Errorf("%s.value: environment variable %s is not set", hd.field, name)
		}
		if !v1alpha1.ValidHeaderValue(v) {
			return "", fmt.Errorf("%s.value: environment variable %s contains a line break or control character", hd.field, name)
		}
		b.WriteString(v)
		b.WriteString(hd.lits[i+1])
	}
	return b.String(), nil
}

// defaultHTTPClient's transport is shared by every HTTPAPI source built
// without Env.HTTPClient so that connections are pooled across sources and
// snapshots; each source copies the client to set its redirect rule. It has
// no overall timeout: each request carries its source's deadline.
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Queries fan out to the same few APIs concurrently; the default of 2 idle
	// connections per host would make most requests dial anew.
	tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return &http.Client{Transport: tr}
})

// redirectRule is a compiled followRedirects (spec.httpAPI, spec.mcp).
type redirectRule struct {
	// field is the spec field, for the hints of errors.
	field  string
	policy v1alpha1.RedirectPolicy
	// allowed holds allowedHosts as host:port, the port empty for "the
	// scheme's default port".
	allowed map[string]bool
	// crossHost are the spec headers a redirect to another host must not
	// carry: all of them but a literal Content-Type, which describes a
	// re-sent body.
	crossHost []string
}

// crossHostNever are headers net/http may copy that never go to another host.
var crossHostNever = []string{"Authorization", "Proxy-Authorization", "Cookie", "Cookie2"}

// compileRedirects compiles the followRedirects of the spec block at prefix.
func compileRedirects(prefix string, spec v1alpha1.FollowRedirects, headers []httpHeader) redirectRule {
	r := redirectRule{field: prefix + ".followRedirects", policy: spec.Policy, allowed: map[string]bool{}, crossHost: slices.Clone(crossHostNever)}
	for _, entry := range spec.AllowedHosts {
		// Validate refuses an entry that does not parse; one in a hand-built
		// spec allows nothing.
		if host, port, err := v1alpha1.ParseAllowedHost(entry); err == nil {
			r.allowed[net.JoinHostPort(host, port)] = true
		}
	}
	for _, hd := range headers {
		if hd.name != "Content-Type" || hd.secret != nil || len(hd.vars) > 0 {
			r.crossHost = append(r.crossHost, hd.name)
		}
	}
	return r
}

// client returns a copy of c (sharing its transport) that applies the rule
// before c's own redirect policy.
func (r redirectRule) client(c *http.Client) *http.Client {
	cp := *c
	next := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := r.check(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &cp
}

// check is an http.Client CheckRedirect: req is the next request, via the
// requests made so far. Only http and https are followed, never from https
// to http (which would expose the request, headers included, in clear
// text), at most maxRedirects times, and to another host than the URL's
// only when the policy allows that host. The Referer net/http adds (the
// previous URL, query string included) is removed, and so are the spec's
// headers on a request to another host.
func (r redirectRule) check(req *http.Request, via []*http.Request) error {
	to := req.URL.Scheme
	switch {
	case to != "http" && to != "https":
		return fmt.Errorf("redirect to a %q URL refused", to)
	case via[len(via)-1].URL.Scheme == "https" && to == "http":
		return errors.New("redirect from https to http refused")
	case len(via) >= maxRedirects:
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	case r.policy == v1alpha1.RedirectNone:
		return fmt.Errorf("redirect to %s refused: %s.policy is None", redirectTarget(req.URL), r.field)
	}
	same := hostPort(via[0].URL) == hostPort(req.URL)
	if !same && !(r.policy == v1alpha1.RedirectAllowedHosts && r.allows(req.URL)) {
		hint := "set " + r.field + " to allow it"
		if r.policy == v1alpha1.RedirectAllowedHosts {
			hint = "not in " + r.field + ".allowedHosts"
		}
		return fmt.Errorf("redirect to another host refused: %s (%s)", redirectTarget(req.URL), hint)
	}
	req.Header.Del("Referer")
	if !same {
		for _, name := range r.crossHost {
			req.Header.Del(name)
		}
	}
	return nil
}

// allows reports whether u's host is in allowedHosts, written with u's port
// or, for the scheme's default port, without one.
func (r redirectRule) allows(u *url.URL) bool {
	if r.allowed[hostPort(u)] {
		return true
	}
	port := u.Port()
	return (port == "" || port == defaultPort(u.Scheme)) && r.allowed[net.JoinHostPort(strings.ToLower(u.Hostname()), "")]
}

// hostPort is u's lower-case host with its port, the scheme's default when
// none is written, so that https://h and https://h:443 are one host.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = defaultPort(u.Scheme)
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// redirectTarget shows a redirect's URL in an error: scheme, host and path,
// without the user part or the query string (which may hold a signature).
func redirectTarget(u *url.URL) string {
	return redact.URL(u.Scheme + "://" + u.Host + u.EscapedPath())
}

// timeoutError is returned when a Fetch runs out of time. Its text is what
// people see in failed_sources; it matches context.DeadlineExceeded.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string { return "timeout after " + e.after.String() }
func (e *timeoutError) Unwrap() error { return context.DeadlineExceeded }
func (e *timeoutError) Timeout() bool { return true }

// Fetch implements QuerySource: one request, one chunk per result.
func (h *HTTPAPI) Fetch(ctx context.Context, query string) ([]Chunk, error) {
	start := time.Now()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()

	req, err := h.newRequest(ctx, query)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.transportError(ctx, parent, start, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp, ReadExcerpt(resp.Body, errorExcerptBytes, h.scrubber(req)))
	}
	if resp.ContentLength > h.maxSize {
		return nil, fmt.Errorf("response larger than %s", h.maxSizeText)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxSize+1))
	if err != nil {
		return nil, h.transportError(ctx, parent, start, err)
	}
	if int64(len(body)) > h.maxSize {
		return nil, fmt.Errorf("response larger than %s", h.maxSizeText)
	}
	chunks, err := h.chunks(body)
	var bad *invalidJSONError
	if errors.As(err, &bad) {
		return nil, errors.New(bad.message(h.scrubber(req)))
	}
	return chunks, err
}

func (h *HTTPAPI) newRequest(ctx context.Context, query string) (*http.Request, error) {
	var body io.Reader
	if h.body != nil {
		body = strings.NewReader(h.body.render(query))
	}
	req, err := http.NewRequestWithContext(ctx, h.method, h.url.render(query), body)
	if err != nil {
		// The URL parsed at build time and the query is escaped, so
		// this is unexpected; the message must not repeat the query.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%s.url: %w", httpAPIFieldPrefix, err)
	}
	req.Header.Set("Accept", contentTypeJSON)
	req.Header.Set("User-Agent", httpAPIUserAgent)
	if h.body != nil && !h.setsCT {
		req.Header.Set("Content-Type", contentTypeJSON)
	}
	if err := setHeaders(req, h.headers, h.getenv, h.secrets); err != nil {
		return nil, err
	}
	return req, nil
}

// setHeaders resolves the spec headers and sets them on req.
func setHeaders(req *http.Request, headers []httpHeader, getenv func(string) string, secrets SecretResolver) error {
	for i := range headers {
		hd := &headers[i]
		v, err := hd.value(getenv, secrets)
		if err != nil {
			return err
		}
		if hd.name == "Host" {
			req.Host = v // net/http ignores a Host entry in Header
			continue
		}
		req.Header.Set(hd.name, v)
	}
	return nil
}

// transportError turns a failed request or body read into a short message.
// Running out of time reads "timeout after 5s"; other errors name the method
// and target but not the query string, which holds the user's query.
func (h *HTTPAPI) transportError(ctx, parent context.Context, start time.Time, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		after := h.timeout
		// An earlier deadline of the caller's is reported as what it was.
		if dl, ok := parent.Deadline(); ok && dl.Before(start.Add(h.timeout-parentDeadlineSlack)) {
			after = max(dl.Sub(start), 0).Round(time.Millisecond)
		}
		return &timeoutError{after: after}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", h.method, h.target, ctx.Err())
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("%s %s: %w", h.method, h.target, err)
}

// statusError reads "HTTP 503 Service Unavailable: <excerpt>".
func statusError(resp *http.Response, excerpt string) error {
	code := resp.StatusCode
	text := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(code)))
	if text == "" {
		text = http.StatusText(code)
	}
	msg := strings.TrimSpace(fmt.Sprintf("HTTP %d %s", code, text))
	if excerpt != "" {
		msg += ": " + excerpt
	}
	return errors.New(msg)
}

// scrubber masks what req carried in a server's text, since an API may
// echo its request: every spec header's value as sent, each ${VAR} value
// and the URL's credentials (addHeaderCredentials, redact.Credentials).
func (h *HTTPAPI) scrubber(req *http.Request) *redact.Scrubber {
	return requestScrubber(req, h.credURL, h.headers, h.getenv)
}

// requestScrubber masks what req carried: the credentials of rawURL's user
// part and the values of the spec headers as set on req.
func requestScrubber(req *http.Request, rawURL string, headers []httpHeader, getenv func(string) string) *redact.Scrubber {
	var sent redact.Credentials
	sent.AddURL(rawURL)
	for i := range headers {
		hd := &headers[i]
		v := req.Header.Get(hd.name)
		if hd.name == "Host" {
			v = req.Host
		}
		addHeaderCredentials(&sent, hd, v, getenv)
	}
	return sent.Scrubber()
}

// addHeaderCredentials records a spec header's value as sent, and each
// ${VAR} value in it: a secretKeyRef value is a secret (masked at any
// length), the others are masked from redact.MinValueLen bytes on.
func addHeaderCredentials(sent *redact.Credentials, hd *httpHeader, v string, getenv func(string) string) {
	sent.AddHeader(v, hd.secret != nil)
	for _, name := range hd.vars {
		sent.AddValue(getenv(name))
	}
}

// ReadExcerpt reads the start of a server's text (an error body) and makes
// it fit to show every caller: one line (textutil.OneLine), at most n bytes, and
// every credential sc knows replaced by *** in whatever encoding the server
// echoed it. It reads past n, so that an echo starting before n is masked
// whole, not cut into a piece nothing recognises.
func ReadExcerpt(r io.Reader, n int, sc *redact.Scrubber) string {
	// textutil.OneLine may shorten the text (white space runs), hence the margin.
	limit := 4 * (n + sc.Lookahead())
	b, _ := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	more := len(b) > limit
	if more {
		b = b[:limit]
	}
	return sc.Excerpt(textutil.OneLine(string(b)), n, more)
}

// invalidJSONError is a body that does not decode; Fetch makes it a message
// with a scrubbed excerpt (ReadExcerpt).
type invalidJSONError struct {
	err  error
	body []byte
}

// Error masks URL user parts only: Fetch, which knows what the request
// carried, makes the message shown.
func (e *invalidJSONError) Error() string { return e.message(nil) }

func (e *invalidJSONError) message(sc *redact.Scrubber) string {
	return fmt.Sprintf("invalid JSON response: %v: %s", e.err, ReadExcerpt(bytes.NewReader(e.body), invalidJSONExcerpt, sc))
}

// chunks decodes the response and turns each result into a chunk.
func (h *HTTPAPI) chunks(body []byte) ([]Chunk, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	err := dec.Decode(&doc)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, errors.New("invalid JSON response: the body is empty")
		}
		return nil, &invalidJSONError{err: err, body: body}
	}

	v, found := h.respPath.lookup(doc)
	list, isList := v.([]any)
	switch {
	case h.respPath.isEmpty() && !isList:
		return nil, fmt.Errorf("response is %s, not a list; set %s.responsePath to the path of the result list", jsonKind(v), httpAPIFieldPrefix)
	case !found:
		return nil, fmt.Errorf("responsePath %q: not found in the response", h.respPath)
	case !isList:
		return nil, fmt.Errorf("responsePath %q: is %s, not a list", h.respPath, jsonKind(v))
	}

	out := make([]Chunk, 0, min(len(list), h.maxResults))
	for i, item := range list {
		if len(out) == h.maxResults {
			break
		}
		raw, _ := h.textPath.lookup(item)
		text, ok := scalarText(raw)
		if !ok || strings.TrimSpace(text) == "" {
			h.logger.Debug("httpAPI result has no text; skipped", "index", i, "textField", h.textPath.String())
			continue
		}
		c := Chunk{Source: h.name, Index: i, Content: text}
		if !h.titlePath.isEmpty() {
			t, _ := h.titlePath.lookup(item)
			title, _ := scalarText(t)
			c.Title = strings.TrimSpace(title)
		}
		if !h.pathPath.isEmpty() {
			p, _ := h.pathPath.lookup(item)
			s, _ := scalarText(p)
			c.Path = cleanResultPath(s)
		}
		if !h.timePath.isEmpty() {
			v, _ := h.timePath.lookup(item)
			if c.ModTime = resultTime(v); c.ModTime.IsZero() && v != nil {
				h.logger.Debug("httpAPI result has a date that is not RFC 3339 or Unix seconds; left without mtime", "index", i, "timeField", h.timePath.String())
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// cleanResultPath makes an API's path relative and clean, as chunk paths are
// everywhere else, so denyPaths globs match: "/docs/./a.md" is "docs/a.md"
// and ".." cannot climb above the root.
func cleanResultPath(p string) string {
	p = strings.TrimSpace(p)
	if p == "" {
		return ""
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}
