package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

func init() { Register(v1alpha1.SourceMCP, newMCP) }

const (
	mcpFieldPrefix = "spec.mcp"
	// MaxMCPResponseBytes bounds one answer of an MCP server (a page of
	// tools/list, one server-sent event); a larger one fails the listing.
	MaxMCPResponseBytes  = 4 << 20
	mcpResponseLimitText = "4Mi"
	// maxToolDescription is api.md §10.1's limit, to which a longer MCP
	// description is cut (the rest of the rules: v1alpha1.ValidateTool).
	maxToolDescription = 4096
	// MCPListingDeadline bounds a whole listing, initialize and every page:
	// spec.mcp.timeout bounds each request, and without one deadline a
	// server paging slowly could hold a sync for maxTools × timeout. A
	// listing gets at least twice the timeout (initialize and one page).
	MCPListingDeadline = time.Minute
	// A notifications/tools/list_changed lists after MCPNotifyQuiet (the
	// notifications of one change arrive together), and such listings are
	// at least MCPMinRelist apart: a server that keeps notifying costs one
	// listing per MCPMinRelist, not one per notification.
	MCPNotifyQuiet = time.Second
	MCPMinRelist   = 10 * time.Second
)

// MCP is a ToolSource that imports the tools of an MCP server (streamable
// HTTP). Sync lists them; LoadTools returns the last listing without I/O
// (the first call lists once). While something listens on Changed (serve's
// sync loop), the session stays open so that the server's
// notifications/tools/list_changed arrive; otherwise each sync opens and
// closes one. It is safe for concurrent use.
type MCP struct {
	name      string
	url       string // as written: net/http sends its user part as Basic auth
	target    string // scheme://host/path for errors: no user part, no query string
	origin    string // host:port of url: the only host the spec headers go to
	namespace string
	interval  time.Duration
	timeout   time.Duration
	maxTools  int
	headers   []httpHeader
	getenv    func(string) string
	secrets   SecretResolver
	log       *slog.Logger
	client    *http.Client

	// deadline bounds a whole listing (MCPListingDeadline).
	deadline time.Duration
	// background: listings are the sync loop's only (Env.ListInBackground).
	background bool

	changed   chan struct{}
	listening atomic.Bool
	// The debounce of list_changed: quiet and minRelist (MCPNotifyQuiet,
	// MCPMinRelist), whether a signal is scheduled, and when the last went.
	quiet, minRelist time.Duration
	notifyMu         sync.Mutex
	notifyPending    bool
	lastSignal       time.Time

	// syncMu serialises syncs and guards session and the per-sync state below.
	syncMu  sync.Mutex
	session *mcp.ClientSession
	// Set by the transport during a sync, read when it fails: the last
	// answer's HTTP status (0 after a 2xx), and whether an answer was cut
	// at MaxMCPResponseBytes.
	lastStatus atomic.Value // string
	oversize   atomic.Bool
	// listed is the last small message of the answer to the last
	// tools/list request (listAnswer).
	listed atomic.Pointer[keptAnswer]
	// sent are the credentials of the last request to the URL's host: its
	// user part and the spec headers as sent, for scrubbing server texts
	// that echo them. Each request replaces it whole; it is never appended to.
	sentMu sync.Mutex
	sent   redact.Credentials

	mu        sync.RWMutex
	tools     []v1alpha1.Tool
	loaded    bool  // tools is a good listing
	lastErr   error // of the last sync; nil after a success
	attempted bool  // a sync finished other than by its caller's context ending
}

var (
	_ ToolSource = (*MCP)(nil)
	_ Syncer     = (*MCP)(nil)
	_ Notifier   = (*MCP)(nil)
)

func newMCP(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	s := spec.Spec.MCP
	if s == nil {
		return nil, fmt.Errorf("%s: required when type is %s", mcpFieldPrefix, v1alpha1.SourceMCP)
	}
	if s.Interval == nil || s.Timeout == nil || s.MaxTools < 1 {
		// Default sets them and Validate refuses non-positive ones.
		return nil, fmt.Errorf("%s: interval, timeout and maxTools must be set", mcpFieldPrefix)
	}
	m := &MCP{
		name:       spec.Name,
		url:        s.URL,
		namespace:  s.Namespace,
		interval:   s.Interval.Duration,
		timeout:    s.Timeout.Duration,
		maxTools:   int(s.MaxTools),
		getenv:     env.Getenv,
		secrets:    env.Secrets,
		log:        env.Logger,
		background: env.ListInBackground,
		changed:    make(chan struct{}, 1),
		quiet:      MCPNotifyQuiet,
		minRelist:  MCPMinRelist,
	}
	if m.getenv == nil { // New's defaults set Secrets and Logger
		m.getenv = os.Getenv
	}
	if m.timeout <= 0 {
		return nil, fmt.Errorf("%s.timeout: %s is not positive", mcpFieldPrefix, m.timeout)
	}
	m.deadline = max(MCPListingDeadline, 2*m.timeout)
	u, err := checkFetchURL(s.URL)
	if err != nil {
		return nil, fmt.Errorf("%s.url: %w", mcpFieldPrefix, err)
	}
	m.target = redact.URL(u.Scheme + "://" + u.Host + u.EscapedPath())
	m.origin = hostPort(u)
	m.sent.AddURL(s.URL)
	if m.headers, _, err = compileHeaders(mcpFieldPrefix, s.Headers); err != nil {
		return nil, err
	}
	base := env.httpClient()
	c := compileRedirects(mcpFieldPrefix, s.FollowRedirects, m.headers).client(base)
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &mcpTransport{m: m, next: next}
	m.client = c
	return m, nil
}

// checkFetchURL checks what the schema cannot: the URL parses, is absolute
// http(s) and has no white space. Errors never quote it.
func checkFetchURL(raw string) (*url.URL, error) {
	if strings.ContainsAny(raw, " \t\r\n") {
		return nil, errors.New("contains white space; write a space as %20")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("invalid URL: " + redact.ParseError(err))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("must be an absolute http or https URL")
	}
	return u, nil
}

// Name implements Source.
func (m *MCP) Name() string { return m.name }

// Interval implements Syncer: spec.mcp.interval.
func (m *MCP) Interval() time.Duration { return m.interval }

// Changed implements Notifier. Calling it means someone listens: from the
// next sync on, the session stays open for the server's notifications.
func (m *MCP) Changed() <-chan struct{} {
	m.listening.Store(true)
	return m.changed
}

// Close ends the session, if one is open. The source still works: a later
// sync opens a new one.
func (m *MCP) Close() error {
	m.listening.Store(false)
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.closeSessionLocked()
	return nil
}

// LoadTools implements ToolSource: the last good listing, with a
// *StaleError when the last sync failed; an error alone when no listing
// ever succeeded. Only the first call does I/O (the first sync), and not
// even that one when listings are left to the sync loop.
func (m *MCP) LoadTools(ctx context.Context) ([]v1alpha1.Tool, error) {
	m.mu.RLock()
	tried := m.attempted
	m.mu.RUnlock()
	if !tried && !m.background {
		m.syncMu.Lock()
		m.mu.RLock()
		tried = m.attempted
		m.mu.RUnlock()
		if !tried {
			_, _ = m.syncLocked(ctx)
		}
		m.syncMu.Unlock()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	switch {
	case !m.loaded && m.lastErr != nil:
		return nil, m.lastErr
	case !m.loaded:
		return nil, fmt.Errorf("MCP %s: not listed yet", m.target)
	case m.lastErr != nil:
		return slices.Clone(m.tools), &StaleError{Err: m.lastErr}
	}
	return slices.Clone(m.tools), nil
}

// Sync implements Syncer: list the tools again. changed reports whether
// LoadTools now answers otherwise: other tools, or a failure starting,
// changing or ending (it is reported with the catalog). A failed sync keeps
// the last good catalog.
func (m *MCP) Sync(ctx context.Context) (changed bool, err error) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	return m.syncLocked(ctx)
}

func (m *MCP) syncLocked(ctx context.Context) (bool, error) {
	tools, err := m.list(ctx)
	if err != nil && ctx.Err() != nil {
		return false, err // the caller gave up; nothing was learnt
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempted = true
	prev := m.lastErr
	if err != nil {
		m.lastErr = err
		return prev == nil || prev.Error() != err.Error(), err
	}
	changed := !m.loaded || prev != nil || !equalCatalogs(m.tools, tools)
	m.tools, m.loaded, m.lastErr = tools, true, nil
	return changed, nil
}

func equalCatalogs(a, b []v1alpha1.Tool) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// errListingDeadline is the cause of a listing cut at its deadline.
var errListingDeadline = errors.New("MCP listing deadline")

// list lists the tools, on the open session if there is one, within the
// listing's deadline. A session that broke since (the server restarted, the
// stream ended) gets one retry on a new session, unless the failure was
// running out of time.
func (m *MCP) list(ctx context.Context) ([]v1alpha1.Tool, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, m.deadline, errListingDeadline)
	defer cancel()
	reused := m.session != nil
	tools, err := m.listOnce(ctx)
	var te *timeoutError
	if err != nil && reused && ctx.Err() == nil && !errors.As(err, &te) {
		m.log.Debug("MCP session broken; listing on a new one", "error", err.Error())
		tools, err = m.listOnce(ctx)
	}
	return tools, err
}

func (m *MCP) listOnce(ctx context.Context) ([]v1alpha1.Tool, error) {
	m.lastStatus.Store("")
	m.oversize.Store(false)
	if m.session == nil {
		cs, err := m.connect(ctx)
		if err != nil {
			return nil, err
		}
		m.session = cs
	}
	tools, err := m.listTools(ctx, m.session)
	if err != nil || !m.listening.Load() {
		m.closeSessionLocked()
	}
	return tools, err
}

func (m *MCP) closeSessionLocked() {
	if m.session != nil {
		_ = m.session.Close()
		m.session = nil
	}
}

// connect opens a session: initialize (or the newer server/discover) under
// the timeout.
func (m *MCP) connect(ctx context.Context) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "contextrouter", Version: "v1alpha1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: the router only lists tools.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { m.listChanged() },
	})
	tr := &mcp.StreamableClientTransport{Endpoint: m.url, HTTPClient: m.client, MaxEventSize: MaxMCPResponseBytes}
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, m.requestError(ctx, cctx, "initialize", err)
	}
	return cs, nil
}

// listChanged schedules a signal on Changed for a list_changed
// notification: MCPNotifyQuiet after it, and at least MCPMinRelist after
// the previous signal. Notifications until the signal goes join it.
func (m *MCP) listChanged() {
	m.notifyMu.Lock()
	defer m.notifyMu.Unlock()
	if m.notifyPending {
		return
	}
	m.notifyPending = true
	wait := max(m.quiet, time.Until(m.lastSignal.Add(m.minRelist)))
	time.AfterFunc(wait, func() {
		m.notifyMu.Lock()
		m.notifyPending, m.lastSignal = false, time.Now()
		m.notifyMu.Unlock()
		select {
		case m.changed <- struct{}{}:
		default: // one pending signal is enough
		}
	})
}

// listTools follows nextCursor, each page under the timeout and all of them
// under the listing's deadline (ctx), and checks the listing as a whole: at
// most maxTools tools, unique ids.
func (m *MCP) listTools(ctx context.Context, cs *mcp.ClientSession) ([]v1alpha1.Tool, error) {
	var out []v1alpha1.Tool
	cursors := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for {
		pctx, cancel := context.WithTimeout(ctx, m.timeout)
		m.listed.Store(nil)
		res, err := cs.ListTools(pctx, params)
		if err != nil {
			err = m.requestError(ctx, pctx, "tools/list", err)
		}
		cancel()
		if err != nil {
			return nil, err
		}
		if len(res.Tools) == 0 {
			if why := emptyListProblem(m.listed.Load()); why != "" {
				// "tools" is required; the SDK would read no tools.
				return nil, fmt.Errorf("MCP %s: tools/list: invalid answer: no list of tools (%s)", m.target, why)
			}
		}
		if len(out)+len(res.Tools) > m.maxTools {
			return nil, fmt.Errorf("MCP %s: tools/list: more than %d tools (%s.maxTools); the listing is refused", m.target, m.maxTools, mcpFieldPrefix)
		}
		for _, t := range res.Tools {
			tool, err := m.convert(t)
			if err != nil {
				return nil, fmt.Errorf("MCP %s: tools/list: %w", m.target, err)
			}
			out = append(out, tool)
		}
		if context.Cause(ctx) == errListingDeadline {
			// Checking the page's tools took the rest of the time.
			return nil, m.deadlineError("tools/list")
		}
		next := res.NextCursor
		if next == "" {
			break
		}
		// Every good page but the last holds a tool, so a listing of
		// maxTools tools has at most maxTools pages with a cursor.
		if cursors[next] || len(cursors) >= m.maxTools {
			return nil, fmt.Errorf("MCP %s: tools/list: the server's pages do not end (cursor repeated or more than %d pages)", m.target, m.maxTools)
		}
		cursors[next] = true
		params = &mcp.ListToolsParams{Cursor: next}
	}
	slices.SortFunc(out, func(a, b v1alpha1.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	for i := 1; i < len(out); i++ {
		if out[i].ID() == out[i-1].ID() {
			return nil, fmt.Errorf("MCP %s: tools/list: tool %q is listed twice", m.target, out[i].Name)
		}
	}
	return out, nil
}

// convert maps an MCP tool to a catalog entry, defaulted and checked by
// api.md §10.1's rules. A missing description is the tool's title, else its
// name (an MCP server need not describe its tools, and the router's
// operator cannot add descriptions to somebody else's server); a description
// over the limit is cut at it for the same reason. A name or schema that
// breaks the rules fails the listing: the agent could not call such a tool.
func (m *MCP) convert(t *mcp.Tool) (v1alpha1.Tool, error) {
	out := v1alpha1.Tool{Name: t.Name, Namespace: m.namespace}
	out.Description = strings.TrimSpace(t.Description)
	if out.Description == "" {
		out.Description = strings.TrimSpace(t.Title)
	}
	if out.Description == "" && t.Annotations != nil {
		out.Description = strings.TrimSpace(t.Annotations.Title)
	}
	if out.Description == "" {
		out.Description = t.Name
	}
	out.Description = textutil.CutRunes(out.Description, maxToolDescription, "")

	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		schema = []byte(`{"type":"object"}`)
	}
	out.InputSchema = &apiextensionsv1.JSON{Raw: schema}
	out.SideEffects = mcpSideEffects(t.Annotations)
	out.Default()
	// The rules of a catalog entry, as for catalog files: one place.
	if ps := CheckTools([]v1alpha1.Tool{out}, true, func(int) string { return "" }); len(ps) > 0 {
		return out, fmt.Errorf("tool %q: %s: %s", textutil.CutRunes(t.Name, 128, ""), ps[0].Field, ps[0].Message)
	}
	return out, nil
}

// mcpSideEffects reads MCP's hints: readOnlyHint true is Read;
// destructiveHint false (not absent) is Write; else Destructive, which is
// what MCP assumes of a tool without annotations.
func mcpSideEffects(a *mcp.ToolAnnotations) v1alpha1.SideEffects {
	switch {
	case a == nil:
		return v1alpha1.SideEffectsDestructive
	case a.ReadOnlyHint:
		return v1alpha1.SideEffectsRead
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return v1alpha1.SideEffectsWrite
	}
	return v1alpha1.SideEffectsDestructive
}

// requestError turns a failed request into the source's error: it names the
// URL as api.md §4.6 shows it and the step, and says what went wrong in the
// words httpAPI uses (timeout, HTTP status, size), with every credential the
// request carried replaced by ***. ctx is the sync's, rctx the request's.
func (m *MCP) requestError(ctx, rctx context.Context, step string, err error) error {
	var msg string
	switch status, _ := m.lastStatus.Load().(string); {
	case m.oversize.Load():
		msg = "response larger than " + mcpResponseLimitText
	case context.Cause(rctx) == errListingDeadline:
		return m.deadlineError(step)
	case errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("MCP %s: %s: %w", m.target, step, &timeoutError{after: m.timeout})
	case status != "":
		msg = status
	case strings.Contains(err.Error(), "failed to decode"):
		// The SDK quotes the start of the body, cut: a secret the server
		// echoed could be cut short of what scrubbing recognises.
		msg = "invalid answer: not a JSON-RPC message"
	default:
		// net/http's url.Error repeats the URL, query string included.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		msg = err.Error()
	}
	m.sentMu.Lock()
	sent := m.sent
	m.sentMu.Unlock()
	// The SDK's message may carry a server's text of any length (a
	// JSON-RPC error's message).
	return fmt.Errorf("MCP %s: %s: %s", m.target, step, sent.Scrubber().Excerpt(msg, maxUpstreamErrorBytes, false))
}

// deadlineError is the error of a listing cut at its deadline; being a
// timeout, it gets no retry.
func (m *MCP) deadlineError(step string) error {
	return fmt.Errorf("MCP %s: %s: %w for the whole listing (initialize and every page)", m.target, step, &timeoutError{after: m.deadline})
}

// mcpTransport sets the spec headers on requests to the URL's host (a
// redirect to another host, if followRedirects allows one, goes without
// them), records what the sync's error needs, and cuts answers at
// MaxMCPResponseBytes.
type mcpTransport struct {
	m    *MCP
	next http.RoundTripper
}

func (t *mcpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	m := t.m
	req = req.Clone(req.Context())
	req.Header.Del("Referer")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", httpAPIUserAgent)
	}
	if hostPort(req.URL) == m.origin {
		var sent redact.Credentials
		sent.AddURL(m.url)
		for i := range m.headers {
			hd := &m.headers[i]
			v, err := hd.value(m.getenv, m.secrets)
			if err != nil {
				return nil, err
			}
			addHeaderCredentials(&sent, hd, v, m.getenv)
			if hd.name == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(hd.name, v)
		}
		m.sentMu.Lock()
		m.sent = sent
		m.sentMu.Unlock()
	}
	if req.Method == http.MethodDelete {
		// The SDK ends a session with a DELETE it waits 5s for; a server
		// that is slow gets the source's timeout, as every other request.
		ctx, cancel := context.WithTimeout(req.Context(), m.timeout)
		defer cancel()
		resp, err := t.next.RoundTrip(req.WithContext(ctx))
		if err == nil {
			resp.Body.Close() // nobody reads the answer to a DELETE
		}
		return resp, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		// GET is the long-lived notification stream, bounded per event
		// by the SDK's MaxEventSize.
		return resp, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return resp, nil // net/http follows it (or the redirect rule refuses)
	}
	if resp.StatusCode >= 400 {
		m.lastStatus.Store(statusError(resp, "").Error())
	} else {
		m.lastStatus.Store("")
	}
	if resp.ContentLength > MaxMCPResponseBytes {
		resp.Body.Close()
		m.oversize.Store(true)
		return nil, errMCPTooLarge
	}
	resp.Body = &limitedBody{rc: resp.Body, over: &m.oversize}
	if id := listRequestID(req); id != "" && resp.StatusCode < 300 {
		resp.Body = newListAnswer(resp, id, &m.listed)
	}
	return resp, nil
}

// limitedBody fails a read past MaxMCPResponseBytes and records that it did.
type limitedBody struct {
	rc   io.ReadCloser
	n    int64 // bytes read so far
	over *atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	const limit = MaxMCPResponseBytes
	if b.n > limit {
		return 0, errMCPTooLarge
	}
	// One byte past the limit tells a body of exactly the limit from a longer one.
	if room := limit + 1 - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.n > limit {
		b.over.Store(true)
		return n - 1, errMCPTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

var errMCPTooLarge = errors.New("response larger than " + mcpResponseLimitText)
