package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/memstore"
	"github.com/contextrouter/contextrouter/internal/session/redisstore/redistest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// redisQuickstart copies the quickstart into a folder whose router keeps
// sessions in the Redis at addr, the password read from secrets dir.
func redisQuickstart(t *testing.T, addr string) (manifests, secrets string) {
	t.Helper()
	manifests = filepath.Join(t.TempDir(), "quickstart")
	if err := os.CopyFS(manifests, os.DirFS("../../examples/quickstart")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(manifests, "router.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spec := "spec:\n  sessions:\n    store: Redis\n    redis:\n      address: " + addr +
		"\n      passwordSecretRef: {name: sessions-redis, key: password}\n"
	out := strings.Replace(string(data), "spec:\n", spec, 1)
	if out == string(data) {
		t.Fatal("router.yaml has no spec")
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	secrets = t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "sessions-redis"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "sessions-redis", "password"), []byte("replica-pw-42"), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifests, secrets
}

// Two replicas of a router whose spec.sessions names Redis serve one
// session: a write on either is read on the other, a replica restarted
// mid-session loses nothing, and so does a restart of Redis itself (with
// its append-only file). The sidecar (a pinned agent) keeps its sessions in
// its own process even so.
func TestSessionsRedisReplicas(t *testing.T) {
	rs := redistest.Start(t, redistest.Config{Password: "replica-pw-42", AppendOnly: true})
	manifests, secrets := redisQuickstart(t, rs.Addr)
	opts := Options{Paths: []string{manifests}}
	opts.Engine.Secrets = sources.EnvFileSecrets{Dir: secrets}
	a, b := startServer(t, opts), startServer(t, opts)
	a.waitReady()
	b.waitReady()

	items := func(ts *testServer, it ...session.Item) {
		t.Helper()
		ts.mustCall(200, "POST", "/v1/sessions/s1/items", sessionItems{Agent: "hr-assistant", Items: it}, nil)
	}
	pack := func(ts *testServer) session.Pack {
		t.Helper()
		return decodePack(t, ts.mustCall(200, "POST", "/v1/sessions/s1/context", `{"agent": "hr-assistant", "phase": "interpret"}`, nil))
	}
	ids := func(p session.Pack) string {
		var s []string
		for _, it := range p.Items {
			s = append(s, it.ID)
		}
		return strings.Join(s, ",")
	}
	items(a, session.Item{ID: "u1", Kind: session.KindUserTurn, Text: "How many vacation days are left?"},
		session.Item{ID: "c1", Kind: session.KindToolCall, Text: "balance(employee=42)"})
	// The result arrives at the other replica; its parent is found there.
	items(b, session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: bigBalance})
	if got := ids(pack(a)); got != "u1,c1,r1" {
		t.Fatalf("replica a packs %q, want u1,c1,r1", got)
	}
	a.mustCall(200, "GET", "/v1/artifacts/"+session.ArtifactRef(bigBalance)+"?agent=hr-assistant", nil, nil)
	b.mustCall(403, "POST", "/v1/sessions/s1/context", `{"agent": "eng-assistant", "phase": "answer"}`, nil)

	// Replica a restarts mid-session; b writes meanwhile.
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	items(b, session.Item{ID: "a1", Kind: session.KindAgentMessage, ParentID: "r1", Text: "You have 11 days left."})
	a2 := startServer(t, opts)
	a2.waitReady()
	want := pack(b)
	if got := pack(a2); ids(got) != "u1,a1,c1,r1" || got.Text != want.Text {
		t.Fatalf("restarted replica packs %q (%d bytes), want u1,a1,c1,r1 (render order) as the other replica (%d bytes)", ids(got), len(got.Text), len(want.Text))
	}

	// Redis restarts: nothing lost, and the replicas reconnect by themselves.
	rs.Restart()
	if got := pack(a2); got.Text != want.Text {
		t.Fatalf("after a Redis restart the pack changed:\n%s\nwant:\n%s", got.Text, want.Text)
	}
	for _, ts := range []*testServer{a2, b} {
		if strings.Contains(ts.logs.String(), "replica-pw-42") {
			t.Error("the Redis password is in a replica's log")
		}
	}

	// Redis down: sessions 503 with nothing written, queries still answer.
	rs.Stop()
	code, out := b.sessionCall("POST", "/v1/sessions/s1/items", sessionItems{Agent: "hr-assistant", Items: []session.Item{{ID: "u2", Kind: session.KindUserTurn}}}, nil)
	if code != 503 || !strings.Contains(out, "nothing was written") || strings.Contains(out, "replica-pw-42") {
		t.Fatalf("Redis down: %d %s, want 503", code, out)
	}
	if resp := b.query(engine.Request{Agent: "hr-assistant", Text: "How many vacation days do I get?"}); len(resp.Chunks) == 0 {
		t.Error("a query failed while only the session store was down")
	}

	// The sidecar keeps its agent's sessions in its own process.
	sopts := opts
	sopts.Agent = "hr-assistant"
	side := startServer(t, sopts)
	side.waitReady()
	side.mustCall(200, "POST", "/v1/sessions/local/items", sessionItems{Items: []session.Item{{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}}}, nil)
	if _, ok := side.srv.sessionStore().(*memstore.Store); !ok {
		t.Errorf("sidecar store is %T, want the embedded store", side.srv.sessionStore())
	}
}

// A Redis password that appears in the Secret after the router started is
// picked up by the periodic check, without a change to the manifests.
func TestSessionsRedisPasswordArrives(t *testing.T) {
	rs := redistest.Start(t, redistest.Config{Password: "replica-pw-42"})
	manifests, secrets := redisQuickstart(t, rs.Addr)
	pwFile := filepath.Join(secrets, "sessions-redis", "password")
	if err := os.Remove(pwFile); err != nil {
		t.Fatal(err)
	}
	opts := Options{Paths: []string{manifests}, PollInterval: 20 * time.Millisecond}
	opts.Engine.Secrets = sources.EnvFileSecrets{Dir: secrets, Getenv: func(string) string { return "" }}
	ts := startServer(t, opts)
	ts.waitReady()
	write := sessionItems{Agent: "hr-assistant", Items: []session.Item{{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}}}
	if code, out := ts.sessionCall("POST", "/v1/sessions/s1/items", write, nil); code != 503 || !strings.Contains(out, "passwordSecretRef") {
		t.Fatalf("without the password: %d %s, want 503 naming passwordSecretRef", code, out)
	}
	if err := os.WriteFile(pwFile, []byte("replica-pw-42"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the password is picked up", func() bool {
		code, _ := ts.sessionCall("POST", "/v1/sessions/s1/items", write, nil)
		return code == 200
	})
	if n := strings.Count(ts.logs.String(), "session store not available"); n != 1 {
		t.Errorf("the missing password was logged %d times, want once", n)
	}
}

// A Redis whose maxmemory-policy evicts keys is refused (issue 22): session
// calls answer 503 saying what to set, the log says it, queries go on.
func TestSessionsRedisEvictionPolicy(t *testing.T) {
	rs := redistest.Start(t, redistest.Config{Password: "replica-pw-42", MaxMemory: "64mb", MaxMemoryPolicy: "allkeys-lru"})
	manifests, secrets := redisQuickstart(t, rs.Addr)
	opts := Options{Paths: []string{manifests}}
	opts.Engine.Secrets = sources.EnvFileSecrets{Dir: secrets}
	ts := startServer(t, opts)
	ts.waitReady()
	write := sessionItems{Agent: "hr-assistant", Items: []session.Item{{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}}}
	code, out := ts.sessionCall("POST", "/v1/sessions/s1/items", write, nil)
	const want = `session store unavailable: redis: maxmemory-policy is \"allkeys-lru\", which evicts keys when memory runs short and would lose sessions the store acknowledged: set it to noeviction`
	if code != 503 || !strings.Contains(out, want) || !strings.Contains(out, "nothing was written") {
		t.Fatalf("%d %s\nwant 503 with %s", code, out, want)
	}
	if !strings.Contains(ts.logs.String(), `maxmemory-policy is \"allkeys-lru\"`) {
		t.Errorf("the refusal is not logged:\n%s", ts.logs.String())
	}
	if resp := ts.query(engine.Request{Agent: "hr-assistant", Text: "How many vacation days do I get?"}); len(resp.Chunks) == 0 {
		t.Error("a query failed while only the session store was refused")
	}
}
