package session

import (
	"context"
	"errors"
)

// Store keeps sessions between requests (docs/api.md §11.8). Two
// implementations share this contract: the embedded store of the process
// (the default, and the sidecar's) and a Redis/Valkey store for router
// Deployments with more than one replica.
//
// Every method names the session by its id and the agent that calls: the
// first write records that agent as the session's owner, and any later call
// by another agent fails with ErrForbidden, so one agent never reads or
// changes another's session. Writes are all or nothing: the session after
// the write must pass Validate (and the store's own bounds), otherwise
// nothing is written and the error says why.
type Store interface {
	// Append adds to a session, creating it on first write. Items are
	// appended in order (an id already in the session is an error); facts
	// replace facts of the same key; episodes are appended (an id already in
	// the session is an error). It returns the ids of the stored items, in
	// order.
	Append(ctx context.Context, id, agent string, d Delta) ([]string, error)
	// Load returns the whole session for a pack; it refreshes the session's
	// idle time. ErrNotFound when there is none.
	Load(ctx context.Context, id, agent string) (*Session, error)
	// Delete removes a session and its artifacts. ErrNotFound when there is none.
	Delete(ctx context.Context, id, agent string) error
	// Artifact returns the content of a tool_result of one of the agent's
	// sessions by its ref ("sha256:" and the lower-case hex SHA-256 of the
	// text, as a pack's artifacts name it). A ref not in that form is the
	// error of ParseArtifactRef (ErrBadArtifactRef), before any lookup.
	// ErrNotFound when no live session of the agent holds it: refs of other
	// agents' sessions are not found, not forbidden, so a ref reveals
	// nothing.
	Artifact(ctx context.Context, agent, ref string) (string, error)
	// Close releases the store (an embedded store's files are written as
	// each write happens, not at Close).
	Close() error
}

// Delta is one write to a session.
type Delta struct {
	Items    []Item
	Facts    []Fact
	Episodes []Episode
}

var (
	// ErrNotFound: no such session (or artifact) for this agent.
	ErrNotFound = errors.New("session not found")
	// ErrForbidden: the session belongs to another agent.
	ErrForbidden = errors.New("the session belongs to another agent")
	// ErrUnavailable wraps failures of a remote store (Redis down): the
	// request may be retried, and nothing was written. HTTP 503.
	ErrUnavailable = errors.New("session store unavailable")
	// ErrStoreFull: the store has no room for the write (its maxSessions,
	// its maxBytes, the Redis server's maxmemory), though the write itself
	// is within the session's limits; nothing was written. HTTP 507.
	ErrStoreFull = errors.New("the session store is full")
	// ErrTooLarge: the write passes a limit of one session (§11.7: a text,
	// the entries or bytes of a session); it would never fit. HTTP 413.
	ErrTooLarge = errors.New("the session would pass a limit")
)

// LimitError is a write refused by a bound: Kind says which answer it
// gets, ErrStoreFull or ErrTooLarge (errors.Is sees it), so a new bound
// picks its status where it is defined, not by its name.
type LimitError struct {
	Limit string // the bound, as documented: "maxSessions", "maxBytes", …
	Max   int64
	Msg   string
	Kind  error
}

func (e *LimitError) Error() string { return e.Msg }
func (e *LimitError) Unwrap() error { return e.Kind }
