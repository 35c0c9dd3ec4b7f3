// Package router embeds contextrouter in a Go program. It reads the same
// manifests as the CLI and the operator (ContextRouter, ContextSource,
// ContextRoute, AgentPermission, ContextClassifier; docs/api.md) and answers
// the questions `contextrouter serve` answers over HTTP, in process:
//
//   - Query: what goes into an agent's context window for a question;
//   - FindTools: which tools of the catalogs fit it;
//   - BuildPack: the context pack of an agent's session for one LLM call.
//
// Requests and responses are the types of the HTTP API (their JSON is the
// wire format of docs/api.md §6, §10 and §11). A Router is safe for
// concurrent use; Reload swaps the configuration atomically and keeps the
// old one serving when the new one is invalid.
package router

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// Request is a question for the router (docs/api.md §6.1).
type Request = engine.Request

// Response is the assembled context (docs/api.md §6.2).
type Response = engine.Response

// Chunk is one piece of context of a Response.
type Chunk = engine.Chunk

// ToolsResponse is the shortlist of tools for a Request (docs/api.md §10).
type ToolsResponse = engine.ToolsResponse

// SourceStatus describes one source of the loaded configuration.
type SourceStatus = engine.SourceStatus

// Session is what a context pack is built from: items, facts and episodes
// (docs/api.md §11.1).
type Session = session.Session

// Item, Fact and Episode are the entries of a Session.
type (
	Item    = session.Item
	Fact    = session.Fact
	Episode = session.Episode
)

// PackRequest asks for the pack of a session for one phase of an agent's
// loop: route, call, interpret, answer or handoff (docs/api.md §11.2).
// MaxTokens sets the pack's budget (up to the phase's maxBudget); Explain
// lists the entries left out and why (Pack.DroppedItems).
type PackRequest = session.Request

// Pack is the context of one LLM call of a session (docs/api.md §11.5).
type Pack = session.Pack

// DroppedItem is an entry a pack left out, and why (Pack.DroppedItems,
// with PackRequest.Explain).
type DroppedItem = session.DroppedItem

// Phase is the kind of LLM call a pack is for.
type Phase = session.Phase

// The phases of a pack.
const (
	PhaseRoute     = session.PhaseRoute
	PhaseCall      = session.PhaseCall
	PhaseInterpret = session.PhaseInterpret
	PhaseAnswer    = session.PhaseAnswer
	PhaseHandoff   = session.PhaseHandoff
)

// Options configure Load. The zero value works.
type Options struct {
	// Router names the ContextRouter to serve when the manifests define
	// several; "" is the only one (or the implied one when there is none).
	Router string
	// CacheDir holds git clones and the chunk vector cache ("" = the user
	// cache directory).
	CacheDir string
	// SecretsDir holds secret values as files named NAME/KEY, as the
	// operator mounts them; "" resolves secret references from environment
	// variables only (docs/api.md §4.5).
	SecretsDir string
	// HTTPClient fetches HTTPAPI sources (nil = a default client).
	HTTPClient *http.Client
	// Logger gets warnings about the configuration and sources (nil = a
	// logger that discards them).
	Logger *slog.Logger
}

// Router answers questions from a loaded configuration.
type Router struct {
	paths []string
	opts  Options
	snap  atomic.Pointer[engine.Snapshot]
}

// Load reads the manifests under paths (files or directories, as `-f`),
// checks them as `contextrouter validate` does, loads their sources and
// returns a Router. An invalid configuration is an error naming the file,
// object and field of every problem; a source that fails to load is not: it
// is reported by Sources and the rest of the router answers.
func Load(ctx context.Context, paths []string, opts Options) (*Router, error) {
	if len(paths) == 0 {
		return nil, errors.New("router.Load: no manifest paths")
	}
	r := &Router{paths: append([]string(nil), paths...), opts: opts}
	if err := r.Reload(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the manifests again and swaps the configuration in. When
// they are invalid it returns the error and the router keeps answering from
// the configuration it had.
func (r *Router) Reload(ctx context.Context) error {
	log := r.opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	snap, err := manifest.Compile(ctx, r.paths, r.opts.Router, engine.Options{
		CacheDir:   r.opts.CacheDir,
		Secrets:    sources.EnvFileSecrets{Dir: r.opts.SecretsDir},
		HTTPClient: r.opts.HTTPClient,
		Logger:     log,
	})
	if err != nil {
		return err
	}
	r.snap.Store(snap)
	return nil
}

// Query assembles the context for a question. Its deadline bounds the
// HTTPAPI sources it asks; a source that fails is listed in the response's
// FailedSources and the rest still answers.
func (r *Router) Query(ctx context.Context, req Request) (*Response, error) {
	return r.snap.Load().Query(ctx, req)
}

// FindTools shortlists the tools of the matched routes for a question.
func (r *Router) FindTools(ctx context.Context, req Request) (*ToolsResponse, error) {
	return r.snap.Load().FindTools(ctx, req)
}

// BuildPack builds the context pack of a session: the agent's permissions
// set the sensitivity floor, and with a query the router's query pipeline
// adds knowledge chunks (and tool cards in the route phase). An invalid
// session is an error naming the entry and field.
func (r *Router) BuildPack(ctx context.Context, s *Session, req PackRequest) (*Pack, error) {
	snap := r.snap.Load()
	if req.Policy == nil {
		pol, err := session.NewPolicy(snap.RouterSpec())
		if err != nil {
			return nil, err
		}
		req.Policy = pol
	}
	// The session enters whole: its secrets are masked as serve masks a
	// write (spec.sessions.secrets), on a copy; s is not changed.
	s, _ = session.MaskSessionSecrets(req.Policy.Secrets(), s)
	pack, _, err := session.BuildFor(ctx, snap, s, req)
	return pack, err
}

// ReadSession reads a session file: JSON Lines of items, facts and episodes
// (docs/api.md §11.6); name is used in errors.
func ReadSession(name string, rd io.Reader) (*Session, error) { return session.ReadJSONL(name, rd) }

// Sources reports the sources of the current configuration: chunks, tools,
// commit, skipped files, and the error of any that failed to load.
func (r *Router) Sources() []SourceStatus { return r.snap.Load().Sources() }

// Name is the name of the ContextRouter being served.
func (r *Router) Name() string { return r.snap.Load().Router() }
