// Package storeselect selects the session store a router's spec.sessions
// names (docs/api.md §11.8): the embedded store (memstore) or a Redis store
// (redisstore), and holds it across reloads (Holder): serve asks it for the
// store of each configuration it loads.
package storeselect

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/redisstore"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// SidecarMaxBytes caps the embedded store of a sidecar: it shares its
// pod's memory with the agent (the injected container's limit is 256Mi),
// and a full store's resident memory is up to about twice its maxBytes.
const SidecarMaxBytes = 64 << 20

// Where says where a serve process keeps sessions apart from the spec.
type Where struct {
	// Local is the sidecar's (serve --agent, in the agent's pod): it keeps
	// its agent's sessions in the process whatever the spec says, in at
	// most SidecarMaxBytes.
	Local bool
	// Memory is the embedded store's own settings: Dir (serve
	// --session-dir) and, for tests and embedders, a clock and bounds that
	// take precedence over spec.sessions when set.
	Memory memstore.Config
}

// memoryConfig is the embedded store's configuration: spec.sessions's
// bounds (defaulted) under the caller's own.
func memoryConfig(s *v1alpha1.SessionsSpec, w Where) memstore.Config {
	c := w.Memory
	if c.TTL <= 0 {
		c.TTL = ttl(s)
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = int(s.MaxSessions)
	}
	if c.MaxBytes <= 0 && s.MaxBytes != nil {
		c.MaxBytes = s.MaxBytes.Value()
	}
	if w.Local && (c.MaxBytes <= 0 || c.MaxBytes > SidecarMaxBytes) {
		c.MaxBytes = SidecarMaxBytes
	}
	return c
}

// newMemory opens the embedded store.
func newMemory(c memstore.Config) (session.Store, error) {
	m, err := memstore.New(c)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Open returns the store router's spec.sessions names, and a key of its
// settings: two configurations with the same key can share one store.
func Open(router *v1alpha1.ContextRouter, secrets sources.SecretResolver, w Where) (session.Store, string, error) {
	p, err := plan(router, secrets, w)
	if err != nil {
		return nil, "", err
	}
	if p.memory != nil {
		st, err := newMemory(*p.memory)
		return st, p.key, err
	}
	st, err := p.open()
	return st, p.key, err
}

// storePlan is the store a configuration names: the embedded store's
// configuration, or the key of a Redis store and how to open it.
type storePlan struct {
	key    string
	memory *memstore.Config
	open   func() (session.Store, error)
}

// plan returns the store router names without opening it, so a holder
// compares settings before opening anything.
func plan(router *v1alpha1.ContextRouter, secrets sources.SecretResolver, w Where) (storePlan, error) {
	router = router.DeepCopy()
	router.Default()
	s := &router.Spec.Sessions
	if w.Local || s.Store != v1alpha1.SessionStoreRedis || s.Redis == nil {
		c := memoryConfig(s, w)
		return storePlan{key: fmt.Sprintf("memory dir=%q", w.Memory.Dir), memory: &c}, nil
	}
	o, err := RedisOptions(router, secrets)
	if err != nil {
		return storePlan{}, err
	}
	return storePlan{key: redisKey(o, passwordMAC), open: func() (session.Store, error) {
		st, err := redisstore.New(o)
		if err != nil {
			return nil, err
		}
		return st, nil
	}}, nil
}

// passwordMAC keys the password's part of a store key, under a key drawn
// for this process.
var passwordMAC = digest.NewMAC(digest.NewKey())

// redisKey is the key of a Redis store's settings. The password enters it
// as its HMAC under mac, the process's own key: a new password reconnects,
// and the key can be logged, since it cannot be matched against hashes of
// guessed passwords (a plain SHA-256 could, and was the same in every
// process).
func redisKey(o redisstore.Options, mac *digest.MAC) string {
	sum := mac.Sum(o.Password)
	return fmt.Sprintf("redis %s db=%d prefix=%q tls=%t ttl=%v password=%s",
		o.Address, o.DB, o.KeyPrefix, o.TLS, o.TTL, hex.EncodeToString(sum[:8]))
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
		if secrets == nil { // as the engine: environment variables only
			secrets = sources.EnvFileSecrets{}
		}
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
	where Where
	// grace is how long a replaced store stays open for requests that
	// still hold it.
	grace time.Duration

	mu    sync.Mutex
	store session.Store
	key   string
	// mem is the embedded store once opened. It lives as long as the
	// holder, whatever later configurations name: replacing it would lose
	// its sessions, and two stores must not share a directory.
	mem *memstore.Store
}

// DefaultGrace is how long a replaced store stays open.
const DefaultGrace = 30 * time.Second

// NewHolder returns a holder for a serve process.
func NewHolder(w Where) *Holder { return &Holder{where: w, grace: DefaultGrace} }

// Update makes the store of a newly loaded configuration current. The
// embedded store is opened once and takes each configuration's bounds; a
// Redis store with the same settings is kept (its connections), otherwise a
// new one opens and the old one closes after the grace period. A store that
// cannot be opened (the password's Secret is missing) becomes a store whose
// every call fails with session.ErrUnavailable and the reason, so queries
// keep working; Update returns that reason for the log, once (serve calls
// Update at every reload and every poll, to pick up a rotated password).
func (h *Holder) Update(router *v1alpha1.ContextRouter, secrets sources.SecretResolver) error {
	p, err := plan(router, secrets, h.where)
	h.mu.Lock()
	defer h.mu.Unlock()
	var st session.Store
	switch {
	case err != nil && h.store != nil && h.key == "broken "+err.Error():
		return nil // already broken for this reason: said once
	case err != nil:
		p.key, st = "broken "+err.Error(), broken{err}
	case p.memory != nil && h.mem != nil:
		h.mem.SetBounds(*p.memory)
		st = h.mem
	case p.memory != nil:
		m, oerr := memstore.New(*p.memory)
		if oerr != nil {
			err = oerr
			p.key, st = "broken "+err.Error(), broken{err}
			break
		}
		h.mem, st = m, m
	case h.store != nil && p.key == h.key:
		return nil
	default:
		if st, err = p.open(); err != nil {
			p.key, st = "broken "+err.Error(), broken{err}
		}
	}
	if old := h.store; old != nil && old != st && old != session.Store(h.mem) {
		time.AfterFunc(h.grace, func() { _ = old.Close() })
	}
	h.store, h.key = st, p.key
	return err
}

// errNotLoaded is the store's answer before the first configuration loads.
var errNotLoaded = errors.New("no configuration is loaded yet")

// Store is the current store; before the first Update, one whose every call
// fails with session.ErrUnavailable.
func (h *Holder) Store() session.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil {
		return broken{errNotLoaded}
	}
	return h.store
}

// Close closes the current store and the embedded one.
func (h *Holder) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if h.store != nil && h.store != session.Store(h.mem) {
		err = h.store.Close()
	}
	if h.mem != nil {
		err = errors.Join(err, h.mem.Close())
	}
	h.store, h.key, h.mem = nil, "", nil
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
