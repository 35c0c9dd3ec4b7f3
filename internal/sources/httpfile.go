package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/redact"
)

// MaxFetchedCatalogBytes bounds the answer of spec.tools.http: one catalog
// file or OpenAPI document (api.md §10.1).
const (
	MaxFetchedCatalogBytes = MaxOpenAPIDocumentBytes
	fetchedCatalogLimit    = "10Mi"
	httpToolsField         = "spec.tools.http"
)

// httpFile is a file fetched from a URL (spec.tools.http), again on every
// Sync. Load returns the last good answer without I/O; only the first call
// fetches, and not even that one when fetches are left to the sync loop
// (Env.ListInBackground), as an MCP source's listings are. It is safe for
// concurrent use.
type httpFile struct {
	url      string // as written: net/http sends its user part as Basic auth
	target   string // scheme://host/path for errors and file names: no user part, no query string
	interval time.Duration
	timeout  time.Duration
	headers  []httpHeader
	getenv   func(string) string
	secrets  SecretResolver
	client   *http.Client
	// background: fetches are the sync loop's only.
	background bool

	// syncMu serialises fetches.
	syncMu sync.Mutex

	mu        sync.RWMutex
	file      *Chunk // the last good answer
	lastErr   error  // of the last fetch; nil after a success
	attempted bool   // a fetch finished other than by its caller's context ending
}

var (
	_ StaticSource = (*httpFile)(nil)
	_ Syncer       = (*httpFile)(nil)
)

func newHTTPFile(h *v1alpha1.CatalogHTTPSource, env Env) (*httpFile, error) {
	if h.Interval == nil || h.Timeout == nil {
		// Default sets them and Validate refuses non-positive ones.
		return nil, fmt.Errorf("%s: interval and timeout must be set", httpToolsField)
	}
	f := &httpFile{
		url:        h.URL,
		interval:   h.Interval.Duration,
		timeout:    h.Timeout.Duration,
		getenv:     env.Getenv,
		secrets:    env.Secrets,
		background: env.ListInBackground,
	}
	if f.getenv == nil {
		f.getenv = os.Getenv
	}
	if f.timeout <= 0 || f.interval <= 0 {
		return nil, fmt.Errorf("%s: interval and timeout must be positive", httpToolsField)
	}
	u, err := checkFetchURL(h.URL)
	if err != nil {
		return nil, fmt.Errorf("%s.url: %w", httpToolsField, err)
	}
	f.target = redact.URL(u.Scheme + "://" + u.Host + u.EscapedPath())
	if f.headers, _, err = compileHeaders(httpToolsField, h.Headers); err != nil {
		return nil, err
	}
	f.client = compileRedirects(httpToolsField, h.FollowRedirects, f.headers).client(env.httpClient())
	return f, nil
}

// Name implements Source; the tool source is the named one.
func (f *httpFile) Name() string { return f.target }

// Interval implements Syncer: spec.tools.http.interval.
func (f *httpFile) Interval() time.Duration { return f.interval }

// Fetched reports whether a fetch has ended, well or not.
func (f *httpFile) Fetched() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.attempted
}

// Load implements StaticSource: the last good answer as one file named by
// the URL, with a *StaleError when the last fetch failed; the error alone
// when none succeeded.
func (f *httpFile) Load(ctx context.Context) ([]Chunk, error) {
	if !f.background && !f.Fetched() {
		f.syncMu.Lock()
		if !f.Fetched() {
			_, _ = f.syncLocked(ctx)
		}
		f.syncMu.Unlock()
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	switch {
	case f.file == nil && f.lastErr != nil:
		return nil, f.lastErr
	case f.file == nil:
		return nil, fmt.Errorf("http %s: not fetched yet", f.target)
	case f.lastErr != nil:
		return []Chunk{*f.file}, &StaleError{Err: f.lastErr}
	}
	return []Chunk{*f.file}, nil
}

// Sync implements Syncer: fetch again. changed reports whether Load now
// answers otherwise: another file, or a failure starting, changing or
// ending. A failed fetch keeps the last good answer.
func (f *httpFile) Sync(ctx context.Context) (bool, error) {
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	return f.syncLocked(ctx)
}

func (f *httpFile) syncLocked(ctx context.Context) (bool, error) {
	file, err := f.fetch(ctx)
	if err != nil && ctx.Err() != nil {
		return false, err // the caller gave up; nothing was learnt
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempted = true
	prev := f.lastErr
	if err != nil {
		f.lastErr = err
		return prev == nil || prev.Error() != err.Error(), err
	}
	changed := f.file == nil || prev != nil || f.file.Content != file.Content
	f.file, f.lastErr = file, nil
	return changed, nil
}

// fetch GETs the file within the timeout, the body included.
func (f *httpFile) fetch(ctx context.Context) (*Chunk, error) {
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, f.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s.url: invalid URL", httpToolsField) // checked when built
	}
	req.Header.Set("User-Agent", httpAPIUserAgent)
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	if err := setHeaders(req, f.headers, f.getenv, f.secrets); err != nil {
		return nil, err
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.requestError(ctx, rctx, req, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		sc := requestScrubber(req, f.url, f.headers, f.getenv)
		return nil, fmt.Errorf("http %s: %w", f.target, statusError(resp, ReadExcerpt(resp.Body, errorExcerptBytes, sc)))
	}
	tooLarge := fmt.Errorf("http %s: response larger than %s", f.target, fetchedCatalogLimit)
	if resp.ContentLength > MaxFetchedCatalogBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFetchedCatalogBytes+1))
	if err != nil {
		return nil, f.requestError(ctx, rctx, req, err)
	}
	if len(body) > MaxFetchedCatalogBytes {
		return nil, tooLarge
	}
	return &Chunk{Path: f.target, Content: string(body)}, nil
}

// requestError words a failed request: "timeout after 10s" when the fetch
// ran out of time, else net/http's reason without the URL it repeats (query
// string included), every credential the request carried masked.
func (f *httpFile) requestError(ctx, rctx context.Context, req *http.Request, err error) error {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return fmt.Errorf("http %s: %w", f.target, &timeoutError{after: f.timeout})
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	sc := requestScrubber(req, f.url, f.headers, f.getenv)
	return fmt.Errorf("http %s: %s", f.target, sc.Excerpt(err.Error(), maxUpstreamErrorBytes, false))
}
