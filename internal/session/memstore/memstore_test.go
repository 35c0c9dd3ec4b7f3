package memstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/session"
)

// clock is a settable time for TTL tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func openStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func delta(its ...session.Item) session.Delta { return session.Delta{Items: its} }

var bigResult = `{"rows": [` + strings.Repeat(`{"a": 1, "b": "xyz"}, `, 200) + `{"a": 2}]}`

func TestMemStoreWrites(t *testing.T) {
	ctx := context.Background()
	m := openStore(t, Config{})
	ids, err := m.Append(ctx, "s1", "hr", delta(session.Item{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}, session.Item{ID: "c1", Kind: session.KindToolCall, Text: "f()"}))
	if err != nil || strings.Join(ids, ",") != "u1,c1" {
		t.Fatalf("append: %v %v", ids, err)
	}
	// The result names the call of the earlier write.
	if _, err := m.Append(ctx, "s1", "hr", delta(session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: bigResult})); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Load(ctx, "s1", "hr")
	if _, err := m.Append(ctx, "s1", "hr", session.Delta{Facts: []session.Fact{{Key: "k", Value: "v1"}}, Episodes: []session.Episode{{ID: "e1", Text: "t"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Append(ctx, "s1", "hr", session.Delta{Facts: []session.Fact{{Key: "k", Value: "v2"}, {Key: "j", Value: "w"}}}); err != nil {
		t.Fatal(err)
	}
	s, err := m.Load(ctx, "s1", "hr")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Items) != 3 || s.Items[2].ParentID != "c1" || fmt.Sprint(s.Facts) != "[{k v2} {j w}]" || len(s.Episodes) != 1 {
		t.Fatalf("session: %+v", s)
	}
	// A session loaded earlier does not see later writes.
	if len(before.Items) != 3 || len(before.Facts) != 0 || len(before.Episodes) != 0 {
		t.Fatalf("an earlier Load changed: %+v", before)
	}
	// The oversized result is an artifact of the agent, and only of it.
	ref := session.ArtifactRef(bigResult)
	if got, err := m.Artifact(ctx, "hr", ref); err != nil || got != bigResult {
		t.Fatalf("artifact: %v", err)
	}
	if _, err := m.Artifact(ctx, "intruder", ref); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("another agent's artifact: %v, want ErrNotFound", err)
	}
	// The pack names the same ref the store finds.
	p, err := session.Build(s, session.Options{Phase: session.PhaseInterpret})
	if err != nil || len(p.Artifacts) != 1 || p.Artifacts[0].Ref != ref {
		t.Fatalf("pack artifacts: %+v %v", p.Artifacts, err)
	}
	for name, call := range map[string]func() error{
		"append": func() error {
			_, err := m.Append(ctx, "s1", "intruder", delta(session.Item{ID: "x", Kind: session.KindUserTurn}))
			return err
		},
		"load":   func() error { _, err := m.Load(ctx, "s1", "intruder"); return err },
		"delete": func() error { return m.Delete(ctx, "s1", "intruder") },
	} {
		t.Run("another agent "+name, func(t *testing.T) {
			if err := call(); !errors.Is(err, session.ErrForbidden) {
				t.Fatalf("%v, want ErrForbidden", err)
			}
		})
	}
	if err := m.Delete(ctx, "s1", "hr"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Load(ctx, "s1", "hr"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := m.Artifact(ctx, "hr", ref); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("artifact after delete: %v", err)
	}
	if m.Len() != 0 || m.bytes != 0 {
		t.Fatalf("len %d, bytes %d after delete", m.Len(), m.bytes)
	}
}

func TestMemStoreBadWrites(t *testing.T) {
	ctx := context.Background()
	m := openStore(t, Config{})
	if _, err := m.Append(ctx, "s", "a", delta(session.Item{ID: "u1", Kind: session.KindUserTurn, Text: "hi"}, session.Item{ID: "c1", Kind: session.KindToolCall})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		id       string
		d        session.Delta
		want     string
		tooLarge bool
	}{
		{"unknown kind", "s", delta(session.Item{ID: "x", Kind: "thought"}), `items[0].kind: unknown kind "thought"`, false},
		{"missing parent", "s", delta(session.Item{ID: "ok", Kind: session.KindUserTurn}, session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "nope"}), `items[1].parent_id: no item has id "nope"`, false},
		{"cycle", "s", delta(session.Item{ID: "a", Kind: session.KindUserTurn, ParentID: "b"}, session.Item{ID: "b", Kind: session.KindUserTurn, ParentID: "a"}), "parent chain loops: a → b → a", false},
		{"id of an earlier write", "s", delta(session.Item{ID: "u1", Kind: session.KindUserTurn}), `items[0].id: "u1" is already in the session`, false},
		{"oversized text", "s", delta(session.Item{ID: "big", Kind: session.KindToolResult, Text: strings.Repeat("x", session.MaxItemBytes+1)}), "items[0].text: 262145 bytes; an item's text is limited to 262144 bytes", true},
		{"oversized fact", "s", session.Delta{Facts: []session.Fact{{Key: "k", Value: strings.Repeat("x", session.MaxFactBytes+1)}}}, "facts[0].value: 4097 bytes", true},
		{"duplicate episode in one write", "s", session.Delta{Episodes: []session.Episode{{ID: "e", Text: "1"}, {ID: "e", Text: "2"}}}, `episodes[1].id: "e" is also the id of episodes[0]`, false},
		{"bad session id", "../etc", delta(session.Item{ID: "x", Kind: session.KindUserTurn}), "must not start with '.'", false},
		{"session id charset", "a/b", delta(session.Item{ID: "x", Kind: session.KindUserTurn}), "only ASCII letters", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Append(ctx, tc.id, "a", tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			var e *session.Error
			if errors.As(err, &e) && e.TooLarge != tc.tooLarge {
				t.Errorf("TooLarge = %v", e.TooLarge)
			}
			// Nothing was written.
			s, _ := m.Load(ctx, "s", "a")
			if len(s.Items) != 2 || len(s.Facts) != 0 || len(s.Episodes) != 0 {
				t.Fatalf("a refused write changed the session: %+v", s)
			}
		})
	}
	// The session keeps taking good writes.
	if _, err := m.Append(ctx, "s", "a", delta(session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1"})); err != nil {
		t.Fatal(err)
	}
}

func TestMemStoreTTL(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	m := openStore(t, Config{TTL: time.Minute, Now: c.Now})
	for _, id := range []string{"old", "used"} {
		if _, err := m.Append(ctx, id, "a", delta(session.Item{ID: "u", Kind: session.KindUserTurn, Text: "x"})); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(50 * time.Second)
	// A pack refreshes the idle time.
	if _, err := m.Load(ctx, "used", "a"); err != nil {
		t.Fatal(err)
	}
	c.Add(20 * time.Second)
	if _, err := m.Load(ctx, "old", "a"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a session idle past the TTL: %v, want ErrNotFound", err)
	}
	if _, err := m.Load(ctx, "used", "a"); err != nil {
		t.Fatalf("a session used within the TTL: %v", err)
	}
	if m.Len() != 1 {
		t.Fatalf("%d live sessions, want 1", m.Len())
	}
	c.Add(61 * time.Second)
	if m.Len() != 0 || m.bytes != 0 {
		t.Fatalf("%d sessions, %d bytes after every TTL passed", m.Len(), m.bytes)
	}
}

func TestMemStoreFull(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	m := openStore(t, Config{TTL: time.Minute, MaxSessions: 2, MaxBytes: 2000, Now: c.Now})
	for _, id := range []string{"a", "b"} {
		if _, err := m.Append(ctx, id, "x", delta(session.Item{ID: "u", Kind: session.KindUserTurn, Text: "0123456789"})); err != nil {
			t.Fatal(err)
		}
	}
	var le *session.LimitError
	_, err := m.Append(ctx, "c", "x", delta(session.Item{ID: "u", Kind: session.KindUserTurn}))
	if !errors.As(err, &le) || le.Limit != "maxSessions" || le.Max != 2 || !errors.Is(err, session.ErrStoreFull) || !strings.Contains(err.Error(), "the session store is full") {
		t.Fatalf("a third session: %v", err)
	}
	// Live sessions keep working, within maxBytes.
	if _, err := m.Append(ctx, "a", "x", delta(session.Item{ID: "u2", Kind: session.KindUserTurn, Text: "more"})); err != nil {
		t.Fatal(err)
	}
	_, err = m.Append(ctx, "a", "x", delta(session.Item{ID: "u3", Kind: session.KindUserTurn, Text: strings.Repeat("y", 500)}))
	if !errors.As(err, &le) || le.Limit != "maxBytes" || le.Max != 2000 {
		t.Fatalf("past maxBytes: %v", err)
	}
	// Once the others expire there is room again.
	c.Add(2 * time.Minute)
	if _, err := m.Append(ctx, "c", "x", delta(session.Item{ID: "u", Kind: session.KindUserTurn, Text: strings.Repeat("y", 500)})); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestMemStorePersistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	must := func(_ []string, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.Append(ctx, "s1", "hr", delta(session.Item{ID: "c1", Kind: session.KindToolCall, Text: "f()"})))
	must(m.Append(ctx, "s1", "hr", delta(session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: bigResult, Tags: []string{"t"}, Metadata: map[string]string{"k": "v"}, Pinned: true})))
	must(m.Append(ctx, "s1", "hr", session.Delta{Facts: []session.Fact{{Key: "k", Value: "1"}}}))
	must(m.Append(ctx, "s1", "hr", session.Delta{Facts: []session.Fact{{Key: "k", Value: "2"}}, Episodes: []session.Episode{{ID: "e", Text: "t"}}}))
	must(m.Append(ctx, "gone", "hr", delta(session.Item{ID: "u", Kind: session.KindUserTurn})))
	// A refused write leaves no trace in the file either.
	if _, err := m.Append(ctx, "s1", "hr", delta(session.Item{ID: "bad", Kind: "thought"})); err == nil {
		t.Fatal("bad write accepted")
	}
	if err := m.Delete(ctx, "gone", "hr"); err != nil {
		t.Fatal(err)
	}
	want, _ := m.Load(ctx, "s1", "hr")
	wantBytes := m.bytes
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Load(ctx, "s1", "hr"); !errors.Is(err, session.ErrUnavailable) {
		t.Fatalf("load after close: %v", err)
	}
	// A write the process did not finish: the last line is cut short.
	f, err := os.OpenFile(filepath.Join(dir, "s1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"items":[{"id":"half`)
	f.Close()

	m2 := openStore(t, Config{Dir: dir})
	got, err := m2.Load(ctx, "s1", "hr")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("reopened:\n%+v\nwant\n%+v", got, want)
	}
	if !got.Items[1].Pinned {
		t.Fatal("the item written pinned lost its pin in the file")
	}
	if _, err := m2.Load(ctx, "gone", "hr"); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a deleted session came back: %v", err)
	}
	if _, err := m2.Load(ctx, "s1", "other"); !errors.Is(err, session.ErrForbidden) {
		t.Fatalf("owner lost: %v", err)
	}
	if a, err := m2.Artifact(ctx, "hr", session.ArtifactRef(bigResult)); err != nil || a != bigResult {
		t.Fatalf("artifact after reopen: %v", err)
	}
	if m2.bytes != wantBytes {
		t.Fatalf("bytes %d after reopen, want %d", m2.bytes, wantBytes)
	}
	if len(m2.Skipped()) != 0 {
		t.Fatalf("skipped: %v", m2.Skipped())
	}
	// The next write goes after the cut line, which a third open still skips.
	must(m2.Append(ctx, "s1", "hr", delta(session.Item{ID: "u9", Kind: session.KindUserTurn})))
	wantBytes = m2.bytes
	// A file broken in its middle (or naming a parent it lacks) is set
	// aside whole; the other sessions load.
	for name, content := range map[string]string{
		"bad.jsonl":    `{"owner":"hr"}` + "\n" + `{"items":[{"id":"a","kind":"user_turn"}]}` + "\n" + `{"items":[{"id":` + "\n" + `{"items":[{"id":"b","kind":"user_turn"}]}` + "\n",
		"orphan.jsonl": `{"owner":"hr"}` + "\n" + `{"items":[{"id":"r","kind":"tool_result","parent_id":"gone"}]}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m3 := openStore(t, Config{Dir: dir})
	if s, err := m3.Load(ctx, "s1", "hr"); err != nil || len(s.Items) != 3 {
		t.Fatalf("third open: %v %+v", err, s)
	}
	skipped := fmt.Sprint(m3.Skipped())
	for _, want := range []string{"bad.jsonl:3: unexpected end of JSON input; set aside as bad.jsonl.bad", `orphan.jsonl:2: items[0].parent_id: no item has id "gone"; set aside as orphan.jsonl.bad`} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped %s\nwant %s", skipped, want)
		}
	}
	for _, id := range []string{"bad", "orphan"} {
		if _, err := m3.Load(ctx, id, "hr"); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", id, err)
		}
		if _, err := os.Stat(filepath.Join(dir, id+".jsonl.bad")); err != nil {
			t.Errorf("%s not set aside: %v", id, err)
		}
	}
	if m3.Len() != 1 || m3.bytes != wantBytes {
		t.Errorf("%d sessions, %d bytes", m3.Len(), m3.bytes)
	}
	// The id of a set-aside session can start anew.
	must(m3.Append(ctx, "bad", "hr", delta(session.Item{ID: "x", Kind: session.KindUserTurn})))
}

func TestMemStoreConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	m := openStore(t, Config{Dir: t.TempDir()})
	const writers, each = 8, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := m.Append(ctx, "s", "a", delta(session.Item{ID: id, Kind: session.KindUserTurn, Text: id})); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Load(ctx, "s", "a"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s, err := m.Load(ctx, "s", "a")
	if err != nil || len(s.Items) != writers*each {
		t.Fatalf("%d items, want %d (%v)", len(s.Items), writers*each, err)
	}
	if err := session.Validate(s); err != nil {
		t.Fatal(err)
	}
	m2 := openStore(t, Config{Dir: m.cfg.Dir})
	if s2, err := m2.Load(ctx, "s", "a"); err != nil || len(s2.Items) != writers*each {
		t.Fatalf("reopened: %v", err)
	}
}

// TestMemStoreConcurrentSessions: writers to different sessions, with
// refused writes (a missing parent, a full store), deletes, loads and
// expiry running at once (issue 23: a lock per session, the store's lock
// for the map and the accounting), under -race in `make test`. After them
// the byte count is exactly what the stored sessions take, and a store
// reopened on the directory holds the same sessions and bytes.
func TestMemStoreConcurrentSessions(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	dir := t.TempDir()
	m := openStore(t, Config{Dir: dir, Now: clk.Now, TTL: time.Hour, MaxBytes: 10_000})
	const writers, each = 6, 40
	var wg sync.WaitGroup
	var full atomic.Int64
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("s%d-%d", w, i%4)
				it := session.Item{ID: fmt.Sprintf("i%d", i), Kind: session.KindToolResult, Text: strings.Repeat("x", 100*(w+1))}
				_, err := m.Append(ctx, id, "a", delta(it))
				var lim *session.LimitError
				switch {
				case errors.As(err, &lim):
					full.Add(1)
				case err != nil && !errors.Is(err, session.ErrNotFound):
					t.Errorf("%s: %v", id, err)
					return
				}
				// Refused whole: a parent no item has.
				if _, err := m.Append(ctx, id, "a", delta(session.Item{ID: "orphan", Kind: session.KindToolResult, ParentID: "nope"})); err == nil {
					t.Errorf("%s: a write naming a missing parent was stored", id)
				}
				switch i % 10 {
				case 3:
					if err := m.Delete(ctx, id, "a"); err != nil && !errors.Is(err, session.ErrNotFound) {
						t.Error(err)
					}
				case 7:
					clk.Add(20 * time.Minute) // some sessions expire
				default:
					if _, err := m.Load(ctx, id, "a"); err != nil && !errors.Is(err, session.ErrNotFound) {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if full.Load() == 0 {
		t.Error("no write found the store full; raise the writes or lower maxBytes")
	}
	m.mu.Lock()
	var sum int64
	for _, ms := range m.sessions {
		sum += ms.use.total
		if want := (heapUse{}).grown(ms.id, ms.owner, &session.Session{}, &ms.s).total; ms.use.total != want {
			t.Errorf("%s counts %d bytes; its content takes %d", ms.id, ms.use.total, want)
		}
	}
	n, bytes, live := len(m.sessions), m.bytes, m.live
	m.mu.Unlock()
	if bytes != sum || live != n || m.Len() != n {
		t.Fatalf("the store counts %d bytes and %d sessions (%d listed); its sessions take %d bytes in %d", bytes, live, m.Len(), sum, n)
	}
	m2 := openStore(t, Config{Dir: dir, MaxBytes: 10_000})
	if m2.Len() != n || m2.bytes != bytes {
		t.Fatalf("reopened: %d sessions, %d bytes; want %d, %d (skipped %v)", m2.Len(), m2.bytes, n, bytes, m2.Skipped())
	}
}

// idleSession is a session of 50 items as an agent leaves it: turns,
// tool calls and results (two of them over the firewall threshold).
func idleSession(n int) session.Delta {
	var d session.Delta
	for i := range 50 {
		it := session.Item{ID: fmt.Sprintf("i%02d", i), Kind: session.KindUserTurn, Text: fmt.Sprintf("turn %d of session %d: what is the status of ticket %d?", i, n, i*7)}
		switch i % 5 {
		case 1:
			it.Kind, it.Text = session.KindToolCall, fmt.Sprintf(`tickets.get(id=%d)`, i*7)
		case 2:
			it.Kind, it.ParentID, it.Text = session.KindToolResult, fmt.Sprintf("i%02d", i-1), fmt.Sprintf(`{"id": %d, "status": "open", "owner": "team-%d", "updated": "2026-01-%02d"}`, i*7, n%10, i%28+1)
		case 3:
			it.Kind, it.Text = session.KindAgentMessage, "The ticket is open; the owning team has been notified and will answer today."
		}
		d.Items = append(d.Items, it)
	}
	for _, i := range []int{12, 37} {
		d.Items[i].Text = fmt.Sprintf(`{"rows": [%s{"n": %d}]}`, strings.Repeat(`{"a": 1, "b": "xyz"}, `, 120), n)
	}
	return d
}

// BenchmarkIdleSessions measures the heap of 10,000 idle sessions of 50
// items (api.md §11.8 target: < 500 MiB): heap-MiB after a GC, bytes the
// store counts, and the time to write them.
func BenchmarkIdleSessions(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m, _ := New(Config{MaxBytes: 1 << 30})
		for n := range 10_000 {
			// Written as an agent writes: 10 writes of 5 items.
			d := idleSession(n)
			for w := 0; w < len(d.Items); w += 5 {
				if _, err := m.Append(ctx, fmt.Sprintf("s%05d", n), "agent", session.Delta{Items: d.Items[w : w+5]}); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(m.bytes)/(1<<20), "counted-MiB")
		runtime.KeepAlive(m)
	}
}

// benchWrite is the k-th write of 5 items to a session of the benchmarks:
// items of d under ids of their own, without parents.
func benchWrite(d session.Delta, k int) session.Delta {
	w := session.Delta{Items: make([]session.Item, 5)}
	for j := range 5 {
		w.Items[j] = d.Items[(k*5+j)%50]
		w.Items[j].ID = fmt.Sprintf("%d-%d", k, j)
		w.Items[j].ParentID = ""
	}
	return w
}

// BenchmarkAppend is one write of 5 items to a session that grows to 200.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	m, _ := New(Config{})
	d := idleSession(0)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("s%d", i/40)
		if _, err := m.Append(ctx, id, "a", benchWrite(d, i%40)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMemStoreReopenBounds: a directory written under larger bounds is read
// back within the new store's maxSessions and maxBytes, most recently written
// first; the sessions past a bound are set aside as <id>.jsonl.over and
// listed by Skipped, never loaded.
func TestMemStoreReopenBounds(t *testing.T) {
	ctx := context.Background()
	text := strings.Repeat("x", 99)
	// per is what a session of one item "u" of 99 bytes counts.
	one := openStore(t, Config{})
	if _, err := one.Append(ctx, "s0", "hr", delta(session.Item{ID: "u", Kind: session.KindUserTurn, Text: text})); err != nil {
		t.Fatal(err)
	}
	per := one.bytes
	for _, tc := range []struct {
		name       string
		cfg        Config
		keep, over []string
		reason     string
		bytes      int64
	}{
		{"maxSessions", Config{MaxSessions: 3}, []string{"s0", "s1", "s3"}, []string{"s2", "s4"},
			"the store's maxSessions 3 is held by more recently written sessions", 3 * per},
		{"maxBytes", Config{MaxBytes: 2*per + per/2}, []string{"s1", "s3"}, []string{"s0", "s2", "s4"},
			fmt.Sprintf("its %d bytes would pass the store's maxBytes %d (%d held by more recently written sessions)", per, 2*per+per/2, 2*per), 2 * per},
		{"within", Config{MaxSessions: 5, MaxBytes: 5 * per}, []string{"s0", "s1", "s2", "s3", "s4"}, nil, "", 5 * per},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := openStore(t, Config{Dir: dir})
			base := time.Now().Add(-time.Hour)
			for i := range 5 {
				id := fmt.Sprintf("s%d", i)
				if _, err := m.Append(ctx, id, "hr", delta(session.Item{ID: "u", Kind: session.KindUserTurn, Text: text})); err != nil {
					t.Fatal(err)
				}
				// Newest first: s1, s3, s0, s4, s2 (neither order of the names).
				at := base.Add(time.Duration([]int{2, 4, 0, 3, 1}[i]) * time.Minute)
				if err := os.Chtimes(filepath.Join(dir, id+".jsonl"), at, at); err != nil {
					t.Fatal(err)
				}
			}
			cfg := tc.cfg
			cfg.Dir = dir
			m2 := openStore(t, cfg)
			if m2.Len() != len(tc.keep) || m2.bytes != tc.bytes {
				t.Errorf("reopened with %d sessions, %d bytes; want %d, %d", m2.Len(), m2.bytes, len(tc.keep), tc.bytes)
			}
			for _, id := range tc.keep {
				if s, err := m2.Load(ctx, id, "hr"); err != nil || len(s.Items) != 1 || s.Items[0].Text != text {
					t.Errorf("%s: %v %+v, want it loaded", id, err, s)
				}
			}
			skipped := fmt.Sprint(m2.Skipped())
			if len(m2.Skipped()) != len(tc.over) {
				t.Errorf("skipped %s; want %v", skipped, tc.over)
			}
			for _, id := range tc.over {
				if _, err := m2.Load(ctx, id, "hr"); !errors.Is(err, session.ErrNotFound) {
					t.Errorf("%s: %v, want ErrNotFound (set aside)", id, err)
				}
				if _, err := os.Stat(filepath.Join(dir, id+".jsonl.over")); err != nil {
					t.Errorf("%s not set aside: %v", id, err)
				}
				if _, err := os.Stat(filepath.Join(dir, id+".jsonl")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s.jsonl still there: %v", id, err)
				}
				want := "session file " + id + ".jsonl left out: " + tc.reason + "; set aside as " + id + ".jsonl.over"
				if !strings.Contains(skipped, want) {
					t.Errorf("skipped %s\nwant %s", skipped, want)
				}
			}
			// A third open reads only what was kept.
			m3 := openStore(t, Config{Dir: dir})
			if m3.Len() != len(tc.keep) || len(m3.Skipped()) != 0 {
				t.Errorf("third open: %d sessions, skipped %v; want %d, none", m3.Len(), m3.Skipped(), len(tc.keep))
			}
		})
	}
}

// BenchmarkMemStoreAppendParallel is the store under concurrent writers to
// different sessions (issue 23): 8 goroutines on GOMAXPROCS, each writing
// 5 items at a time to its own sessions, which grow to size items before the
// next begins; in memory and with a directory (every write reaches its file).
func BenchmarkMemStoreAppendParallel(b *testing.B) {
	ctx := context.Background()
	d := idleSession(0)
	for _, dir := range []bool{false, true} {
		for _, size := range []int{200, 2000} {
			name := fmt.Sprintf("memory/items=%d", size)
			if dir {
				name = fmt.Sprintf("dir/items=%d", size)
			}
			b.Run(name, func(b *testing.B) {
				cfg := Config{MaxSessions: 1 << 20, MaxBytes: 1 << 40}
				if dir {
					cfg.Dir = b.TempDir()
				}
				m, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				var writers atomic.Int64
				b.SetParallelism(4)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					w := writers.Add(1)
					for i := 0; pb.Next(); i++ {
						id := fmt.Sprintf("w%d-s%d", w, i/(size/5))
						if _, err := m.Append(ctx, id, "a", benchWrite(d, i%(size/5))); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkReopen reads back a directory holding one session written as n
// writes of one item (issue 23: each write was merged and the whole
// session validated again, quadratic in the writes).
func BenchmarkReopen(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("writes=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			m, err := New(Config{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				it := session.Item{ID: fmt.Sprint("i", i), Kind: session.KindUserTurn, Text: "a turn of the conversation"}
				if _, err := m.Append(ctx, "s", "a", delta(it)); err != nil {
					b.Fatal(err)
				}
			}
			_ = m.Close()
			b.ReportAllocs()
			for b.Loop() {
				m2, err := New(Config{Dir: dir})
				if err != nil || m2.Len() != 1 {
					b.Fatalf("reopened: %v, %d sessions", err, m2.Len())
				}
			}
		})
	}
}
