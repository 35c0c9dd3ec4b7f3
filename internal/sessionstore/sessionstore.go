// Package sessionstore picks the session store a router's spec.sessions
// names (docs/api.md §11.8) and keeps it across reloads: serve asks it for
// the store of each configuration it loads.
package sessionstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/redisstore"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// ErrMemoryNotBuilt: the embedded store is not part of this build yet.
// (Replaced by the embedded store's constructor when it is merged.)
var ErrMemoryNotBuilt = errors.New("the embedded session store is not built yet")

// newMemory makes the embedded store for spec.
var newMemory = func(*v1alpha1.SessionsSpec) (session.Store, error) { return nil, ErrMemoryNotBuilt }

// Open returns the store router's spec.sessions names, and a key of its
// settings: two configurations with the same key can share one store. A
// local router (the sidecar serve --agent runs in the agent's pod) keeps
// its agent's sessions in the process whatever the spec says.
func Open(router *v1alpha1.ContextRouter, secrets sources.SecretResolver, local bool) (session.Store, string, error) {
	router = router.DeepCopy()
	router.Default()
	s := &router.Spec.Sessions
	if local || s.Store != v1alpha1.SessionStoreRedis || s.Redis == nil {
		bytes := ""
		if s.MaxBytes != nil {
			bytes = s.MaxBytes.String()
		}
		key := fmt.Sprintf("memory ttl=%v sessions=%d bytes=%s", ttl(s), s.MaxSessions, bytes)
		st, err := newMemory(s)
		return st, key, err
	}
	o, err := RedisOptions(router, secrets)
	if err != nil {
		return nil, "", err
	}
	// The password enters the key as a hash: a new password reconnects, and
	// the key can be logged.
	sum := sha256.Sum256([]byte(o.Password))
	key := fmt.Sprintf("redis %s db=%d prefix=%q tls=%t ttl=%v password=%s",
		o.Address, o.DB, o.KeyPrefix, o.TLS, o.TTL, hex.EncodeToString(sum[:8]))
	st, err := redisstore.New(o)
	return st, key, err
}

// RedisOptions are the Redis store's settings from a defaulted router (with
// spec.sessions.redis set): its
// spec.sessions.redis, the password from its Secret, and the default key
// prefix "contextrouter:NAMESPACE/NAME:" (or "contextrouter:NAME:").
func RedisOptions(router *v1alpha1.ContextRouter, secrets sources.SecretResolver) (redisstore.Options, error) {
	s := &router.Spec.Sessions
	r := s.Redis
	o := redisstore.Options{Address: r.Address, DB: int(r.DB), KeyPrefix: r.KeyPrefix, TLS: r.TLS, TTL: ttl(s)}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "contextrouter:" + router.Name + ":"
		if router.Namespace != "" {
			o.KeyPrefix = "contextrouter:" + router.Namespace + "/" + router.Name + ":"
		}
	}
	if ref := r.PasswordSecretRef; ref != nil {
		pw, err := secrets.SecretValue(ref.Name, ref.Key)
		if err != nil {
			return o, fmt.Errorf("%s %q: spec.sessions.redis.passwordSecretRef: %w", v1alpha1.KindContextRouter, router.Name, err)
		}
		o.Password = pw
	}
	return o, nil
}

// ttl is spec.sessions.ttl (0 when not defaulted: the stores refuse it).
func ttl(s *v1alpha1.SessionsSpec) time.Duration {
	if s.TTL == nil {
		return 0
	}
	return s.TTL.Duration
}

// Holder keeps the current store across reloads.
type Holder struct {
	local bool
	// grace is how long a replaced store stays open for requests that
	// still hold it.
	grace time.Duration

	mu    sync.Mutex
	store session.Store
	key   string
}

// DefaultGrace is how long a replaced store stays open.
const DefaultGrace = 30 * time.Second

// NewHolder returns a holder; local is the sidecar's (serve --agent).
func NewHolder(local bool) *Holder { return &Holder{local: local, grace: DefaultGrace} }

// Update makes the store of a newly loaded configuration current. Settings
// equal to the current store's keep it (its sessions and connections);
// others open a new store and close the old one after the grace period. A
// store that cannot be opened (the password's Secret is missing) becomes a
// store whose every call fails with session.ErrUnavailable and the reason,
// so queries keep working; Update returns that reason for the log.
func (h *Holder) Update(router *v1alpha1.ContextRouter, secrets sources.SecretResolver) error {
	st, key, err := Open(router, secrets, h.local)
	if err != nil {
		st, key = broken{err}, "broken "+err.Error()
	}
	h.mu.Lock()
	old := h.store
	if old != nil && key == h.key {
		h.mu.Unlock()
		if st != nil {
			_ = st.Close()
		}
		return err
	}
	h.store, h.key = st, key
	h.mu.Unlock()
	if old != nil {
		time.AfterFunc(h.grace, func() { _ = old.Close() })
	}
	return err
}

// Store is the current store (nil before the first Update).
func (h *Holder) Store() session.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.store
}

// Close closes the current store.
func (h *Holder) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil {
		return nil
	}
	err := h.store.Close()
	h.store, h.key = nil, ""
	return err
}

// broken is a store that could not be opened.
type broken struct{ err error }

func (b broken) fail() error { return fmt.Errorf("%w: %v", session.ErrUnavailable, b.err) }

func (b broken) Append(context.Context, string, string, session.Delta) ([]string, error) {
	return nil, b.fail()
}
func (b broken) Load(context.Context, string, string) (*session.Session, error) { return nil, b.fail() }
func (b broken) Delete(context.Context, string, string) error                   { return b.fail() }
func (b broken) Artifact(context.Context, string, string) (string, error)       { return "", b.fail() }
func (b broken) Close() error                                                   { return nil }
