// Package embed talks to embeddings and reranking APIs (api.md §5.3): the
// OpenAI-compatible embeddings shape that OpenAI, Ollama, TEI, vLLM and
// LiteLLM serve, and the two common rerank shapes. It batches, retries
// transient failures with exponential backoff, bounds every request and
// response, and keeps the API key out of every error it returns.
package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// Limits of one request (api.md §5.3).
const (
	// MaxInputBytes is the longest text sent: longer ones are cut at a
	// character boundary (servers with shorter limits must truncate too).
	MaxInputBytes = 8192
	// MaxResponseBytes bounds one response body; lower batchSize when a
	// batch's vectors do not fit.
	MaxResponseBytes = 64 << 20
	// MaxQueryResponseBytes bounds a query-time response (one question's
	// vector, at most a few hundred rerank scores): see ForQueries.
	MaxQueryResponseBytes = 4 << 20
	// DefaultAttempts is how often a compile-time request is tried.
	DefaultAttempts = 4
	// firstBackoff doubles after each failed attempt, up to maxBackoff; a
	// Retry-After of the server's is honoured up to maxRetryAfter.
	firstBackoff  = 200 * time.Millisecond
	maxBackoff    = 5 * time.Second
	maxRetryAfter = 10 * time.Second
	// excerptBytes of an error body are kept for the log (Error.Detail).
	excerptBytes = 200
)

// Reasons of an *Error; they label contextrouter_embedding_errors_total.
const (
	ReasonTimeout    = "timeout"
	ReasonStatus     = "status"
	ReasonNetwork    = "network"
	ReasonMalformed  = "malformed"
	ReasonDimensions = "dimensions"
	ReasonTooLarge   = "too_large"
)

// Error is a failed call. Its message names the endpoint with any user part
// masked and never holds the API key.
type Error struct {
	Reason string
	msg    string
	detail string
}

func (e *Error) Error() string { return e.msg }

// Detail is an excerpt of the endpoint's error body (key removed), for the
// log only: the body is the endpoint's text, which callers must not see.
func (e *Error) Detail() string { return e.detail }

// Endpoint is one API: where to POST, with which model and key.
type Endpoint struct {
	// URL is the full URL requests are POSTed to.
	URL   string
	Model string
	// APIKey is sent as "Authorization: Bearer <key>" ("" = none).
	APIKey string
	// Timeout bounds one attempt (0 = none beyond the context's).
	Timeout time.Duration
	// Attempts bounds the tries of one request (0 = 1): 429, 5xx, network
	// errors and timeouts are retried.
	Attempts int
	// HTTPClient sends the requests (nil = a client that follows no redirect).
	HTTPClient *http.Client
	// MaxResponse bounds a response body (0 = MaxResponseBytes).
	MaxResponse int64
}

// ForQueries sets the endpoint up for query-time calls: one attempt (a
// query falls back rather than wait) and responses of at most
// MaxQueryResponseBytes.
func (ep *Endpoint) ForQueries() {
	ep.Attempts, ep.MaxResponse = 1, MaxQueryResponseBytes
}

// noRedirects keeps the key from following a redirect to another host.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (ep *Endpoint) client() *http.Client {
	if ep.HTTPClient != nil {
		return ep.HTTPClient
	}
	return noRedirects
}

// failf makes an *Error that names the endpoint safely and scrubs the key.
func (ep *Endpoint) failf(reason, format string, args ...any) *Error {
	msg := fmt.Sprintf("%s: ", redact.URL(ep.URL)) + fmt.Sprintf(format, args...)
	return &Error{Reason: reason, msg: ep.scrubber().String(msg)}
}

// scrubber masks what a request sends, in every encoding a server may echo
// it in: the URL's credentials and the Authorization header.
func (ep *Endpoint) scrubber() *redact.Scrubber {
	var sent redact.Credentials
	sent.AddURL(ep.URL)
	if ep.APIKey != "" {
		sent.AddHeader("Bearer "+ep.APIKey, true)
	}
	return sent.Scrubber()
}

// post sends body and decodes the answer into out, retrying transient
// failures. what names the call in errors ("embeddings", "rerank").
func (ep *Endpoint) post(ctx context.Context, body []byte, out any) error {
	attempts := max(ep.Attempts, 1)
	backoff := firstBackoff
	var last *attemptError
	for i := 0; i < attempts; i++ {
		if i > 0 {
			wait := backoff
			backoff = min(2*backoff, maxBackoff)
			if last.retryAfter > 0 {
				wait = min(last.retryAfter, maxRetryAfter)
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				// last.err already names the endpoint.
				return &Error{Reason: ReasonTimeout, msg: fmt.Sprintf("%s (%v after %d of %d attempts)", last.err.msg, ctx.Err(), i, attempts), detail: last.err.detail}
			case <-t.C:
			}
		}
		a := ep.attempt(ctx, body, out)
		if a == nil {
			return nil
		}
		if !a.retry || ctx.Err() != nil {
			return a.err
		}
		last = a
	}
	if attempts == 1 {
		return last.err
	}
	return &Error{Reason: last.err.Reason, msg: fmt.Sprintf("%s (after %d attempts)", last.err.msg, attempts), detail: last.err.detail}
}

type attemptError struct {
	err        *Error
	retry      bool
	retryAfter time.Duration
}

func (ep *Endpoint) attempt(ctx context.Context, body []byte, out any) *attemptError {
	if ep.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ep.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return &attemptError{err: ep.failf(ReasonNetwork, "invalid request: %s", unwrapURL(err))}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+ep.APIKey)
	}
	resp, err := ep.client().Do(req)
	if err != nil {
		return ep.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := ep.failf(ReasonStatus, "HTTP %s", resp.Status)
		e.detail = sources.ReadExcerpt(resp.Body, excerptBytes, ep.scrubber())
		transient := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
		return &attemptError{err: e, retry: transient, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	limit := ep.MaxResponse
	if limit <= 0 {
		limit = MaxResponseBytes
	}
	if resp.ContentLength > limit {
		return &attemptError{err: ep.failf(ReasonTooLarge, "response larger than %d MiB", limit>>20)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return ep.transportError(ctx, err)
	}
	if int64(len(b)) > limit {
		return &attemptError{err: ep.failf(ReasonTooLarge, "response larger than %d MiB", limit>>20)}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &attemptError{err: ep.failf(ReasonMalformed, "invalid JSON response: %s", jsonError(err))}
	}
	return nil
}

func (ep *Endpoint) transportError(ctx context.Context, err error) *attemptError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &attemptError{err: ep.failf(ReasonTimeout, "timeout after %s", ep.Timeout), retry: true}
	}
	return &attemptError{err: ep.failf(ReasonNetwork, "%s", unwrapURL(err)), retry: ctx.Err() == nil}
}

// unwrapURL drops the *url.Error wrapper, which repeats the URL unmasked.
func unwrapURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// jsonError is a decoding error without the decoder's excerpt of the body.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s at %q is not a %s", te.Value, te.Field, te.Type)
	}
	return err.Error()
}

// retryAfter reads a Retry-After of seconds or an HTTP date (0 = none).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// Cut shortens text to MaxInputBytes at a character boundary.
func Cut(text string) string { return textutil.CutBytes(text, MaxInputBytes, "") }
