package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/learning/learningtest"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/redisstore/redistest"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
	"github.com/contextrouter/contextrouter/internal/session/storetest"
)

var ctx = context.Background()

func newStore(t testing.TB, srv *redistest.Server, prefix string, ttl time.Duration) *Store {
	t.Helper()
	s, err := New(Options{Address: srv.Addr, Password: srv.Password, KeyPrefix: prefix, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the table every store passes.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: "s3cret-pass"})
	n := 0
	storetest.Run(t, func(t *testing.T) session.Store {
		n++
		return newStore(t, srv, fmt.Sprintf("conf%d:", n), time.Hour)
	})
}

func items(prefix string, n int) []session.Item {
	out := make([]session.Item, n)
	for i := range out {
		out[i] = session.Item{ID: fmt.Sprintf("%s%d", prefix, i), Kind: session.KindUserTurn, Text: fmt.Sprintf("turn %d of %s", i, prefix)}
	}
	return out
}

func mustAppend(t testing.TB, s session.Store, id, agent string, d session.Delta) {
	t.Helper()
	if _, err := s.Append(ctx, id, agent, d); err != nil {
		t.Fatalf("Append(%s): %v", id, err)
	}
}

func mustLoad(t testing.TB, s session.Store, id, agent string) *session.Session {
	t.Helper()
	got, err := s.Load(ctx, id, agent)
	if err != nil {
		t.Fatalf("Load(%s): %v", id, err)
	}
	return got
}

func TestPassword(t *testing.T) {
	const pass = "correct-horse-battery"
	srv := redistest.Start(t, redistest.Config{Password: pass})
	for _, c := range []struct{ name, password string }{{"none", ""}, {"wrong", "wrong-password-xyz"}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Options{Address: srv.Addr, Password: c.password, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Append(ctx, "s1", "alice", session.Delta{Items: items("u", 1)})
			if !errors.Is(err, session.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if c.password != "" && strings.Contains(err.Error(), c.password) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	s := newStore(t, srv, "", time.Hour)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: items("u", 1)})
	if got := mustLoad(t, s, "s1", "alice"); len(got.Items) != 1 {
		t.Errorf("items = %d, want 1", len(got.Items))
	}
}

// TestTTL: every key of a session gets the idle TTL on a write, a read
// refreshes all of them, and Redis's own expiry removes the session.
func TestTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	s := newStore(t, srv, "ttl:", 2*time.Second)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: []session.Item{
		{ID: "c", Kind: session.KindToolCall, Text: "x"}, {ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: "y"}},
		Facts: []session.Fact{{Key: "k", Value: "v"}}, Episodes: []session.Episode{{ID: "e", Text: "t"}}})
	keys := s.keys("s1", "alice")
	for _, k := range keys {
		if ms := s.c.PTTL(ctx, k).Val(); ms <= 0 || ms > 2*time.Second {
			t.Errorf("PTTL %s = %v after a write, want (0, 2s]", k, ms)
		}
		// Almost expired…
		s.c.PExpire(ctx, k, 300*time.Millisecond)
	}
	mustLoad(t, s, "s1", "alice")
	for _, k := range keys {
		// …and a read gives every key the full TTL again.
		if ms := s.c.PTTL(ctx, k).Val(); ms <= 300*time.Millisecond {
			t.Errorf("PTTL %s = %v after a read, want the TTL refreshed", k, ms)
		}
	}
	// Redis expires the session (poll, bounded: 10 s).
	for _, k := range keys {
		s.c.PExpire(ctx, k, 50*time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.c.Exists(ctx, keys...).Val() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Load(ctx, "s1", "alice"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Load after expiry: %v, want ErrNotFound", err)
	}
	if _, err := s.Artifact(ctx, "alice", session.ArtifactRef("y")); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Artifact after expiry: %v, want ErrNotFound", err)
	}
}

// TestRestart: a server with an append-only file restarts mid-session and
// loses no item; the store reconnects by itself.
func TestRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{AppendOnly: true, Password: "pw-restart"})
	s := newStore(t, srv, "rs:", time.Hour)
	first := items("a", 30)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: first, Facts: []session.Fact{{Key: "k", Value: "v"}}})
	srv.Restart()
	got := mustLoad(t, s, "s1", "alice")
	if !storetest.Equal(got, &session.Session{Items: first, Facts: []session.Fact{{Key: "k", Value: "v"}}}) {
		t.Fatalf("after a restart: %d items, %v facts; want 30 and k", len(got.Items), got.Facts)
	}
	second := items("b", 5)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: second})
	if got := mustLoad(t, s, "s1", "alice"); !storetest.Equal(got, &session.Session{Items: append(first, second...), Facts: []session.Fact{{Key: "k", Value: "v"}}}) {
		t.Errorf("after a restart and a write: %d items, want 35", len(got.Items))
	}
}

// TestReplicas: two stores on one server (two router replicas) see the same
// sessions; another prefix (another router) does not.
func TestReplicas(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	a, b := newStore(t, srv, "router-a:", time.Hour), newStore(t, srv, "router-a:", time.Hour)
	other := newStore(t, srv, "router-b:", time.Hour)
	mustAppend(t, a, "s1", "alice", session.Delta{Items: items("a", 2)})
	mustAppend(t, b, "s1", "alice", session.Delta{Items: items("b", 2)})
	want := &session.Session{Items: append(items("a", 2), items("b", 2)...)}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		if got := mustLoad(t, s, "s1", "alice"); !storetest.Equal(got, want) {
			t.Errorf("replica %s: %+v, want %+v", name, got.Items, want.Items)
		}
	}
	if _, err := other.Load(ctx, "s1", "alice"); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("another prefix: %v, want ErrNotFound", err)
	}
	// The same id under another prefix belongs to whoever creates it there.
	mustAppend(t, other, "s1", "bob", session.Delta{Items: items("c", 1)})
}

// TestConcurrentAppends: two replicas append to one session at once; no
// item is lost and each writer's items keep their order.
func TestConcurrentAppends(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	stores := []*Store{newStore(t, srv, "cc:", time.Hour), newStore(t, srv, "cc:", time.Hour)}
	const per = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*per)
	for w, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				it := session.Item{ID: fmt.Sprintf("w%d-%02d", w, i), Kind: session.KindAgentMessage, Text: "x"}
				if _, err := s.Append(ctx, "s1", "alice", session.Delta{Items: []session.Item{it}, Facts: []session.Fact{{Key: fmt.Sprintf("w%d", w), Value: it.ID}}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustLoad(t, stores[0], "s1", "alice")
	if len(got.Items) != 2*per {
		t.Fatalf("%d items, want %d", len(got.Items), 2*per)
	}
	next := [2]int{}
	for _, it := range got.Items {
		var w, i int
		fmt.Sscanf(it.ID, "w%d-%d", &w, &i)
		if i != next[w] {
			t.Fatalf("writer %d: item %d came before %d", w, i, next[w])
		}
		next[w]++
	}
	if len(got.Facts) != 2 || got.Facts[0].Value != fmt.Sprintf("w%d-%02d", keyIndex(got.Facts[0].Key), per-1) {
		t.Errorf("facts = %v, want each writer's last", got.Facts)
	}
}

func keyIndex(k string) int {
	var w int
	fmt.Sscanf(k, "w%d", &w)
	return w
}

// TestDown: a server that is down gives ErrUnavailable at once, for every
// call, and a write that failed wrote nothing.
func TestDown(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	s := newStore(t, srv, "down:", time.Hour)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: items("a", 1)})
	srv.Stop()
	calls := map[string]func() error{
		"Append":   func() error { _, err := s.Append(ctx, "s2", "alice", session.Delta{Items: items("b", 1)}); return err },
		"Load":     func() error { _, err := s.Load(ctx, "s1", "alice"); return err },
		"Delete":   func() error { return s.Delete(ctx, "s1", "alice") },
		"Artifact": func() error { _, err := s.Artifact(ctx, "alice", session.ArtifactRef("x")); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, session.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, err)
		}
	}
	// An address nothing listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	dead, err := New(Options{Address: addr, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	if _, err := dead.Load(ctx, "s1", "alice"); !errors.Is(err, session.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Load: %v, want ErrUnavailable naming %s", err, addr)
	}
}

// TestFull: a server at its maxmemory refuses a write whole (a LimitError,
// 507); what was written before stays, and reads go on.
func TestFull(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{MaxMemory: "3mb"})
	s := newStore(t, srv, "full:", time.Hour)
	var stored []session.Item
	var err error
	for i := range 100 {
		it := session.Item{ID: fmt.Sprint("i", i), Kind: session.KindUserTurn, Text: strings.Repeat("x", 100_000)}
		if _, err = s.Append(ctx, "s1", "alice", session.Delta{Items: []session.Item{it},
			Facts: []session.Fact{{Key: fmt.Sprint("f", i), Value: "v"}}}); err != nil {
			break
		}
		stored = append(stored, it)
	}
	var lim *session.LimitError
	if !errors.As(err, &lim) || lim.Limit != "maxmemory" || !errors.Is(err, session.ErrStoreFull) {
		t.Fatalf("after %d writes: %v, want a maxmemory LimitError, ErrStoreFull", len(stored), err)
	}
	got := mustLoad(t, s, "s1", "alice")
	if len(got.Items) != len(stored) || len(got.Facts) != len(stored) {
		t.Errorf("%d items and %d facts stored, want the %d written whole", len(got.Items), len(got.Facts), len(stored))
	}
	// A server already past its maxmemory (lowered under what it holds):
	// reads go on, and a write is the store-full error, not "unavailable".
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, s, "s1", "alice"); len(got.Items) != len(stored) {
		t.Errorf("past maxmemory: %d items read, want %d", len(got.Items), len(stored))
	}
	_, err = s.Append(ctx, "s1", "alice", session.Delta{Items: items("late", 1)})
	if !errors.As(err, &lim) || lim.Limit != "maxmemory" {
		t.Errorf("a write past maxmemory: %v, want a maxmemory LimitError", err)
	}
}

// TestEvictionPolicy: a server that may evict keys (any maxmemory-policy but
// noeviction; issue 22: allkeys-lru silently lost 79 of 120 acknowledged
// items) is refused at connect: every call fails as with a server that is
// down, saying what to set, and nothing is written. Once the policy is
// noeviction the same store works, without a restart.
func TestEvictionPolicy(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{MaxMemory: "64mb", MaxMemoryPolicy: "allkeys-lru"})
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()
	kept := newStore(t, srv, "evict:", time.Hour)
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
				t.Fatal(err)
			}
			s := newStore(t, srv, "evict:", time.Hour)
			calls := map[string]func() error{
				"Append":   func() error { _, err := s.Append(ctx, "s1", "alice", session.Delta{Items: items("a", 3)}); return err },
				"Load":     func() error { _, err := s.Load(ctx, "s1", "alice"); return err },
				"Delete":   func() error { return s.Delete(ctx, "s1", "alice") },
				"Artifact": func() error { _, err := s.Artifact(ctx, "alice", session.ArtifactRef("x")); return err },
			}
			want := fmt.Sprintf(`session store unavailable: redis: maxmemory-policy is %q, which evicts keys when memory runs short`, policy)
			for name, call := range calls {
				err := call()
				if !errors.Is(err, session.ErrUnavailable) || !strings.HasPrefix(err.Error(), want) ||
					!strings.Contains(err.Error(), "set it to noeviction (CONFIG SET maxmemory-policy noeviction") {
					t.Errorf("%s: %v\nwant ErrUnavailable: %s…", name, err, want)
				}
			}
			if n := admin.DBSize(ctx).Val(); n != 0 {
				t.Errorf("%d keys written to a server that evicts", n)
			}
		})
	}
	// Fixed on the server: a store refused so far connects anew.
	if _, err := kept.Append(ctx, "s1", "alice", session.Delta{Items: items("a", 3)}); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("Append under allkeys-random: %v, want ErrUnavailable", err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, kept, "s1", "alice", session.Delta{Items: items("a", 3)})
	if got := mustLoad(t, kept, "s1", "alice"); len(got.Items) != 3 {
		t.Errorf("%d items after the policy was fixed, want 3", len(got.Items))
	}
}

// TestEvictionPolicyUnchecked: a server that does not answer CONFIG (renamed
// away, as managed services do) cannot be checked: the store works and
// warns once, whatever the connections it opens.
func TestEvictionPolicyUnchecked(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{NoConfig: true})
	var logged strings.Builder
	var mu sync.Mutex
	s, err := New(Options{Address: srv.Addr, KeyPrefix: "nocfg:", TTL: time.Hour,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustAppend(t, s, fmt.Sprint("s", i), "alice", session.Delta{Items: items("a", 2)})
		}()
	}
	wg.Wait()
	if got := mustLoad(t, s, "s3", "alice"); len(got.Items) != 2 {
		t.Errorf("%d items, want 2", len(got.Items))
	}
	mu.Lock()
	out := logged.String()
	mu.Unlock()
	if n := strings.Count(out, "maxmemory-policy cannot be read"); n != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(strings.ToLower(out), "unknown command 'config'") || !strings.Contains(out, "make sure it is noeviction") {
		t.Errorf("logged %d warnings, want 1 naming the cause and the fix:\n%s", n, out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestArtifactScanBound: a look-up reads the agent's MaxArtifactScan most
// recently used sessions, however many the agent has; using a session
// again brings its artifacts back into reach.
func TestArtifactScanBound(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	s := newStore(t, srv, "scan:", time.Hour)
	call := session.Item{ID: "c", Kind: session.KindToolCall, Text: "x"}
	old := session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: "the oldest result"}
	mustAppend(t, s, "s0000", "alice", session.Delta{Items: []session.Item{call, old}})
	ref := session.ArtifactRef(old.Text)
	if got, err := s.Artifact(ctx, "alice", ref); err != nil || got != old.Text {
		t.Fatalf("Artifact = %q, %v", got, err)
	}
	for i := 1; i <= MaxArtifactScan; i++ {
		// Distinct use times: the set orders by millisecond.
		time.Sleep(time.Millisecond)
		mustAppend(t, s, fmt.Sprintf("s%04d", i), "alice", session.Delta{Items: items("u", 1)})
	}
	if _, err := s.Artifact(ctx, "alice", ref); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("with %d sessions used since: %v, want ErrNotFound (out of the scan)", MaxArtifactScan, err)
	}
	mustLoad(t, s, "s0000", "alice")
	if got, err := s.Artifact(ctx, "alice", ref); err != nil || got != old.Text {
		t.Errorf("after a Load of its session: %q, %v", got, err)
	}
}

// TestTLS: with tls the store verifies the server's certificate; without
// it, or with a CA it does not trust, every call is ErrUnavailable.
func TestTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{TLS: true, Password: "tls-pw"})
	for _, c := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"trusted CA", Options{TLS: true, RootCAs: srv.RootCAs}, true},
		{"plain TCP", Options{}, false},
		{"the system's CAs", Options{TLS: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Address, c.o.Password, c.o.TTL = srv.Addr, srv.Password, time.Hour
			s, err := New(c.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Append(ctx, "s1", "alice", session.Delta{Items: items("u", 1)})
			switch {
			case c.ok && err != nil:
				t.Fatalf("Append: %v", err)
			case !c.ok && !errors.Is(err, session.ErrUnavailable):
				t.Fatalf("Append: %v, want ErrUnavailable", err)
			case c.ok:
				if got := mustLoad(t, s, "s1", "alice"); len(got.Items) != 1 {
					t.Errorf("%d items", len(got.Items))
				}
			}
		})
	}
}

// counter counts round trips: a command or a pipeline is one.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// TestRoundTrips: a pack needs one Load, one round trip; an append two.
func TestRoundTrips(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: "pw"})
	s := newStore(t, srv, "rt:", time.Hour)
	sess := sessiontest.Bench()
	mustAppend(t, s, "s1", "alice", session.Delta{Items: sess.Items, Facts: sess.Facts, Episodes: sess.Episodes})
	mustLoad(t, s, "s1", "alice") // the scripts are cached now
	c := &counter{}
	s.c.AddHook(c)
	mustLoad(t, s, "s1", "alice")
	if n := c.n.Load(); n != 1 {
		t.Errorf("Load: %d round trips, want 1", n)
	}
	c.n.Store(0)
	mustAppend(t, s, "s1", "alice", session.Delta{Items: items("more", 3)})
	if n := c.n.Load(); n != 2 {
		t.Errorf("Append: %d round trips, want 2", n)
	}
	// The server agrees: one EVALSHA per Load.
	before := evalsha(t, s)
	mustLoad(t, s, "s1", "alice")
	if d := evalsha(t, s) - before; d != 1 {
		t.Errorf("the server counted %d EVALSHA for a Load, want 1", d)
	}
}

// evalsha reads the server's count of EVALSHA calls.
func evalsha(t *testing.T, s *Store) int {
	info := s.c.Info(ctx, "commandstats").Val()
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") {
			var n int
			fmt.Sscanf(strings.TrimPrefix(line, "cmdstat_evalsha:calls="), "%d", &n)
			return n
		}
	}
	t.Fatalf("no cmdstat_evalsha in %q", info)
	return 0
}

func TestOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Address: "redis", TTL: time.Hour}, "want host:port"},
		{Options{Address: ":6379", TTL: time.Hour}, "want host:port"},
		{Options{Address: "redis:6379"}, "TTL must be greater than 0"},
	} {
		if _, err := New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
}

// BenchmarkLoadBuild is one pack from the 200-item benchmark session
// (sessiontest.Bench) in Redis: Load (one round trip on 127.0.0.1), and
// Load then Build, as a context request does.
func BenchmarkLoadBuild(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	s := newStore(b, srv, "bench:", time.Hour)
	sess := sessiontest.Bench()
	mustAppend(b, s, "s1", "alice", session.Delta{Items: sess.Items, Facts: sess.Facts, Episodes: sess.Episodes})
	opts := session.Options{Phase: session.PhaseAnswer, Query: "invoice status", Tags: []string{"billing"}}
	for _, c := range []struct {
		name  string
		build bool
	}{{"Load", false}, {"LoadBuild", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				got := mustLoad(b, s, "s1", "alice")
				if c.build {
					if _, err := session.Build(got, opts); err != nil {
						b.Fatal(err)
					}
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// TestItemEncoding: every field survives, and a truncated or foreign value
// is an error, never a panic or a wrong item.
func TestItemEncoding(t *testing.T) {
	full := session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Sensitivity: "Restricted", Text: "a\nb\x00c é",
		Tags: []string{"x", "y"}, Metadata: map[string]string{"b": "2", "a": "1"}, TokenEstimate: 300, Pinned: true}
	for _, it := range []session.Item{full, {ID: "u", Kind: session.KindUserTurn}, {ID: "p", Kind: session.KindPlanState, Pinned: true}} {
		raw := encodeItem(&it)
		var got session.Item
		if err := decodeItem(raw, &got); err != nil || !storetest.Equal(&session.Session{Items: []session.Item{got}}, &session.Session{Items: []session.Item{it}}) {
			t.Errorf("round trip of %+v: %+v, %v", it, got, err)
		}
	}
	raw := encodeItem(&full)
	// Every cut inside the fields is refused (the text may be cut anywhere).
	head := len(raw) - len(full.Text)
	for n := range head {
		var got session.Item
		if err := decodeItem(raw[:n], &got); err == nil {
			t.Errorf("a value cut at %d bytes decoded: %+v", n, got)
		}
	}
	var got session.Item
	if err := decodeItem(`{"id":"x"}`, &got); err == nil {
		t.Error("JSON decoded as an item")
	}
	// An item without flags keeps the first format (earlier versions read
	// it); a pinned one has the flags, and unknown flags are refused.
	plain := full
	plain.Pinned = false
	if raw := encodeItem(&plain); raw[0] != itemFormat {
		t.Errorf("an unpinned item is encoded in format %d, want %d", raw[0], itemFormat)
	}
	if raw[0] != itemFormatFlags {
		t.Errorf("a pinned item is encoded in format %d, want %d", raw[0], itemFormatFlags)
	}
	flags := strings.Replace(encodeItem(&session.Item{ID: "u", Kind: session.KindUserTurn, Pinned: true}), "\x00\x01", "\x00\x03", 1)
	if err := decodeItem(flags, &got); err == nil {
		t.Errorf("unknown flags decoded: %+v", got)
	}
}

// BenchmarkAppend is one item appended to the 200-item benchmark session
// (it grows by one item per iteration): two round trips, and the whole
// session read back for the merge's checks.
func BenchmarkAppend(b *testing.B) {
	srv := redistest.Start(b, redistest.Config{})
	s := newStore(b, srv, "bench:", time.Hour)
	sess := sessiontest.Bench()
	mustAppend(b, s, "s1", "alice", session.Delta{Items: sess.Items, Facts: sess.Facts, Episodes: sess.Episodes})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		mustAppend(b, s, "s1", "alice", session.Delta{Items: []session.Item{{ID: fmt.Sprint("n", i), Kind: session.KindUserTurn, Text: "one more turn"}}})
	}
}

// TestOutcomesConformance runs the learned outcomes' table every store
// passes (docs/api.md §10.10).
func TestOutcomesConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: "s3cret-pass"})
	n := 0
	learningtest.Run(t, func(t *testing.T) learning.Store {
		n++
		return newStore(t, srv, fmt.Sprintf("learn%d:", n), time.Hour)
	})
}

// Two stores on one server (two replicas) share learned outcomes, and a
// bound holds across them.
func TestOutcomesShared(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	a, b := newStore(t, srv, "rep:", time.Hour), newStore(t, srv, "rep:", time.Hour)
	small := learning.Bounds{PerTool: 1, PerAgent: 10, Total: 10}
	if _, err := learning.Learn(ctx, a, learning.Record{Owner: "alice", Agent: "alice", Source: "s", Tool: "t", Text: "q1", Outcome: learning.Success}, small); err != nil {
		t.Fatal(err)
	}
	got, err := b.Outcomes(ctx, "alice")
	if err != nil || len(got) != 1 || got[0].Text != "q1" {
		t.Fatalf("the other replica reads %+v, %v", got, err)
	}
	va, _ := a.OutcomesVersion(ctx)
	vb, _ := b.OutcomesVersion(ctx)
	if va != vb || va == 0 {
		t.Errorf("versions %d and %d", va, vb)
	}
	var le *learning.LimitError
	if _, err := learning.Learn(ctx, b, learning.Record{Owner: "alice", Agent: "alice", Source: "s", Tool: "t", Text: "q2", Outcome: learning.Success}, small); !errors.As(err, &le) || le.Reason != "tool_limit" {
		t.Errorf("second of the tool on the other replica: %v, want tool_limit", err)
	}
}
