package storeselect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/redisstore"
	"github.com/contextrouter/contextrouter/internal/session/redisstore/redistest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

var ctx = context.Background()

// secretsDir holds the Secret "cache" with the key "password", as a
// mounted Secret volume.
func secretsDir(t *testing.T, password string) sources.EnvFileSecrets {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cache", "password"), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return sources.EnvFileSecrets{Dir: dir, Getenv: func(string) string { return "" }}
}

func redisRouter(addr string, edit func(*v1alpha1.RedisSpec)) *v1alpha1.ContextRouter {
	r := &v1alpha1.ContextRouter{}
	r.Name, r.Namespace = "acme", "team-a"
	r.Spec.Sessions = v1alpha1.SessionsSpec{Store: v1alpha1.SessionStoreRedis, Redis: &v1alpha1.RedisSpec{Address: addr,
		PasswordSecretRef: &v1alpha1.SecretKeySelector{Name: "cache", Key: "password"}}}
	if edit != nil {
		edit(r.Spec.Sessions.Redis)
	}
	r.Default()
	return r
}

func TestRedisOptions(t *testing.T) {
	secrets := secretsDir(t, "pw-1")
	o, err := RedisOptions(redisRouter("redis:6379", nil), secrets)
	if err != nil {
		t.Fatal(err)
	}
	if o.KeyPrefix != "contextrouter:team-a/acme:" || o.Password != "pw-1" || o.TTL.Hours() != 24 || o.Address != "redis:6379" {
		t.Errorf("options %+v", o)
	}
	r := redisRouter("redis:6379", func(r *v1alpha1.RedisSpec) { r.KeyPrefix = "shared:"; r.DB = 3; r.PasswordSecretRef.Name = "gone" })
	_, err = RedisOptions(r, secrets)
	if !errors.Is(err, sources.ErrSecretNotFound) || !strings.Contains(err.Error(), "spec.sessions.redis.passwordSecretRef") {
		t.Errorf("missing Secret: %v", err)
	}
}

// TestHolder: a reload with the same settings keeps the store; changed
// settings or a new password open another; a missing Secret leaves a store
// that answers ErrUnavailable with the reason.
func TestHolder(t *testing.T) {
	const pw = "holder-secret-pw"
	srv := redistest.Start(t, redistest.Config{Password: pw})
	secrets := secretsDir(t, pw)
	h := NewHolder(Where{})
	h.grace = 0
	t.Cleanup(func() { h.Close() })

	if err := h.Update(redisRouter(srv.Addr, nil), secrets); err != nil {
		t.Fatal(err)
	}
	first := h.Store()
	if _, ok := first.(*redisstore.Store); !ok {
		t.Fatalf("store is %T, want the Redis store", first)
	}
	if _, err := first.Append(ctx, "s1", "alice", session.Delta{Items: []session.Item{{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	// Same settings (a reload that changed routes, say): same store.
	if err := h.Update(redisRouter(srv.Addr, nil), secrets); err != nil || h.Store() != first {
		t.Fatalf("unchanged settings: %v, store replaced: %t", err, h.Store() != first)
	}
	// Another prefix: a new store, which does not see the old prefix's sessions.
	if err := h.Update(redisRouter(srv.Addr, func(r *v1alpha1.RedisSpec) { r.KeyPrefix = "other:" }), secrets); err != nil {
		t.Fatal(err)
	}
	second := h.Store()
	if second == first {
		t.Fatal("a changed keyPrefix kept the store")
	}
	if _, err := second.Load(ctx, "s1", "alice"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Load under the new prefix: %v, want ErrNotFound", err)
	}
	// A missing Secret: Update says why; the store answers ErrUnavailable.
	err := h.Update(redisRouter(srv.Addr, func(r *v1alpha1.RedisSpec) { r.PasswordSecretRef.Name = "gone" }), secrets)
	if !errors.Is(err, sources.ErrSecretNotFound) {
		t.Fatalf("Update: %v, want ErrSecretNotFound", err)
	}
	_, err = h.Store().Load(ctx, "s1", "alice")
	if !errors.Is(err, session.ErrUnavailable) || !strings.Contains(err.Error(), "passwordSecretRef") {
		t.Errorf("Load: %v, want ErrUnavailable naming passwordSecretRef", err)
	}
	// The Secret is back: the store works again.
	if err := h.Update(redisRouter(srv.Addr, nil), secrets); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Store().Load(ctx, "s1", "alice"); err != nil || len(got.Items) != 1 {
		t.Errorf("Load after the fix: %v", err)
	}
}

// TestLocalIsMemory: the sidecar keeps its agent's sessions in the process
// even when the router keeps them in Redis; the key never holds the password.
func TestLocalIsMemory(t *testing.T) {
	secrets := secretsDir(t, "local-pw-xyz")
	r := redisRouter("127.0.0.1:1", nil)
	st, key, _ := Open(r, secrets, Where{Local: true})
	if _, isRedis := st.(*redisstore.Store); isRedis || !strings.HasPrefix(key, "memory ") {
		t.Errorf("local store %T (key %q), want the embedded store", st, key)
	}
	st, key, err := Open(r, secrets, Where{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.HasPrefix(key, "redis 127.0.0.1:1 ") || strings.Contains(key, "local-pw-xyz") {
		t.Errorf("key %q", key)
	}
}

// TestRedisKeyPassword: the password enters a store key as an HMAC under
// the process's key, never as its plain SHA-256 (which any log reader could
// match against guessed passwords, and which was the same in every
// process): two processes' keys differ, one process's agree, and a new
// password changes the key.
func TestRedisKeyPassword(t *testing.T) {
	o := redisstore.Options{Address: "redis:6379", KeyPrefix: "p:", TTL: time.Hour, Password: "s3cret-pw"}
	plain := sha256.Sum256([]byte(o.Password))
	macA, macB := digest.NewMAC(digest.NewKey()), digest.NewMAC(digest.NewKey())
	a, b := redisKey(o, macA), redisKey(o, macB)
	for _, key := range []string{a, b} {
		if strings.Contains(key, o.Password) || strings.Contains(key, hex.EncodeToString(plain[:8])) || strings.Contains(key, hex.EncodeToString(plain[:4])) {
			t.Errorf("key %q holds the password or its plain SHA-256", key)
		}
		if !strings.HasPrefix(key, `redis redis:6379 db=0 prefix="p:" tls=false ttl=1h0m0s password=`) {
			t.Errorf("key %q does not name the settings", key)
		}
	}
	if a == b {
		t.Errorf("two processes' keys agree: %q", a)
	}
	if again := redisKey(o, macA); again != a {
		t.Errorf("one process's keys differ: %q and %q", a, again)
	}
	o.Password = "rotated"
	if rotated := redisKey(o, macA); rotated == a {
		t.Errorf("a new password keeps the key %q", a)
	}
	// Open uses the process's MAC.
	r := redisRouter("127.0.0.1:1", nil)
	st, key, err := Open(r, secretsDir(t, "pw-1"), Where{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ro, _ := RedisOptions(r, secretsDir(t, "pw-1"))
	if want := redisKey(ro, passwordMAC); key != want {
		t.Errorf("Open's key %q, want %q", key, want)
	}
}

// TestHolderMemory: the embedded store takes each configuration's bounds
// without losing its sessions, survives a switch to Redis and back (the same
// store, never a second one on its directory), and a broken Redis setting is
// reported once, not at every poll.
func TestHolderMemory(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: "pw"})
	secrets := secretsDir(t, "pw")
	h := NewHolder(Where{Memory: memstore.Config{Dir: t.TempDir()}})
	h.grace = 0
	t.Cleanup(func() { h.Close() })
	memRouter := func(maxSessions int32) *v1alpha1.ContextRouter {
		r := &v1alpha1.ContextRouter{}
		r.Name = "acme"
		r.Spec.Sessions.MaxSessions = maxSessions
		r.Default()
		return r
	}
	write := func(id string) error {
		_, err := h.Store().Append(ctx, id, "alice", session.Delta{Items: []session.Item{{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}}})
		return err
	}
	if err := h.Update(memRouter(10), secrets); err != nil {
		t.Fatal(err)
	}
	first := h.Store()
	for _, id := range []string{"s1", "s2"} {
		if err := write(id); err != nil {
			t.Fatal(err)
		}
	}
	// A reload lowering maxSessions: the same store, the new bound.
	if err := h.Update(memRouter(2), secrets); err != nil || h.Store() != first {
		t.Fatalf("lowered bound: %v, store replaced: %t", err, h.Store() != first)
	}
	var lim *session.LimitError
	if err := write("s3"); !errors.As(err, &lim) || lim.Limit != "maxSessions" {
		t.Fatalf("a third session under maxSessions 2: %v, want a maxSessions LimitError", err)
	}
	// To Redis and back: the embedded store and its sessions are the same.
	if err := h.Update(redisRouter(srv.Addr, nil), secrets); err != nil {
		t.Fatal(err)
	}
	if _, isRedis := h.Store().(*redisstore.Store); !isRedis {
		t.Fatalf("store %T, want Redis", h.Store())
	}
	if err := h.Update(memRouter(10), secrets); err != nil || h.Store() != first {
		t.Fatalf("back to Memory: %v, same store: %t", err, h.Store() == first)
	}
	if _, err := h.Store().Load(ctx, "s1", "alice"); err != nil {
		t.Fatalf("a session of the embedded store after the switch: %v", err)
	}
	// A missing Secret: said by the first Update, not again by the next.
	gone := redisRouter(srv.Addr, func(r *v1alpha1.RedisSpec) { r.PasswordSecretRef.Name = "gone" })
	if err := h.Update(gone, secrets); !errors.Is(err, sources.ErrSecretNotFound) {
		t.Fatalf("first Update: %v, want ErrSecretNotFound", err)
	}
	if err := h.Update(gone, secrets); err != nil {
		t.Errorf("second Update with the same problem: %v, want nil (reported once)", err)
	}
	if _, err := h.Store().Load(ctx, "s1", "alice"); !errors.Is(err, session.ErrUnavailable) {
		t.Errorf("Load: %v, want ErrUnavailable", err)
	}
}
