// Package memstore is the embedded session store (session.Store): the
// sessions of one process in its memory, within a bound of their heap
// (footprint.go) and an idle TTL, optionally kept in one append-only file per
// session (Config.Dir, serve --session-dir). It is the default store and the
// sidecar's (docs/api.md §11.8).
package memstore

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/session"
)

// Defaults of Config (api.md §11.9): spec.sessions's defaults.
var (
	DefaultTTL         = v1alpha1.DefaultSessionTTL
	DefaultMaxSessions = int(v1alpha1.DefaultMaxSessions)
	DefaultMaxBytes    = func() int64 { q := resource.MustParse(v1alpha1.DefaultSessionBytes); return q.Value() }()
)

// Config bounds a session store.
type Config struct {
	// TTL is how long a session may stay idle (no write, no pack) before it
	// is removed (0: DefaultTTL).
	TTL time.Duration
	// MaxSessions bounds the live sessions (0: DefaultMaxSessions).
	MaxSessions int
	// MaxBytes bounds the heap all sessions take together, as the store
	// estimates it (footprint.go; 0: DefaultMaxBytes).
	MaxBytes int64
	// Dir, when set, keeps every session in a file there (embedded store):
	// a store opened on the same directory has them back.
	Dir string
	// Now is the clock (nil: time.Now); tests move it instead of sleeping.
	Now func() time.Time
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Store is the embedded store: sessions in the process's memory,
// optionally kept in files (Config.Dir).
//
// Locks: mu guards the session map, the idle list, the by-agent index and
// the accounting of sessions and bytes; it is held for those alone, never
// across a merge, a validation or disk I/O. Each session has a mutex of its
// own, held by a write across its merge (which checks only what the write
// adds), its file write and its commit, and by the removal of its file: writes
// to different sessions run in parallel, writes to one session in order. A
// write reserves the bytes it adds under mu before its file write and gives
// them back if that fails, so the count stays exact. Lock order: a
// session's mutex, then mu.
//
// Bounds: a write that would pass MaxSessions (a new session) or MaxBytes
// is refused with a *LimitError (507): live sessions are never evicted to
// make room, only sessions idle for TTL are removed. Expired sessions are
// swept by every call, oldest first from a list kept in order of use, so no
// timer or goroutine runs per session; their files are removed after mu is
// released.
type Store struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*memSession
	// idle orders the live sessions by last use, least recent first.
	idle *list.List
	// byAgent indexes live sessions by owner, for Artifact.
	byAgent map[string]map[string]*memSession
	// live counts the sessions against MaxSessions: those stored and those
	// whose first write is under way.
	live int
	// bytes is what the stored sessions take of MaxBytes, and what writes
	// under way reserved.
	bytes  int64
	closed bool
	// doomed are sessions removed while mu was held whose files unlock
	// removes once it is released.
	doomed  []*memSession
	skipped []error

	// The learned tool outcomes of the router (docs/api.md §10.10) live
	// with its sessions, in the same directory.
	*learning.Memory
}

// memSession is one session. Its content (s, use, refs, elem) is changed
// by a write holding mu and the session's own mutex, and read under either;
// a write replaces s's slices, never what they hold, so a reader may copy
// them after releasing mu.
type memSession struct {
	id, owner string
	// mu orders the writes of the session and the removal of its file.
	mu sync.Mutex
	s  session.Session
	// use is what the session takes of MaxBytes (footprint.go).
	use heapUse
	// refs maps the SHA-256 of each tool result to its item, computed when
	// it is written so that Artifact neither hashes nor copies; the digest
	// is the key, not the 71-byte ref, to keep idle sessions small.
	refs map[[sha256.Size]byte]int32
	used time.Time
	// elem is the session's place in idle; nil until its first write is
	// stored.
	elem *list.Element
	// gone is set (under Store.mu) when the session leaves the store, and
	// closed once its id is free again: its file removed, the map entry gone.
	gone chan struct{}
}

var _ session.Store = (*Store)(nil)

// PrepareDir makes the embedded store's directory, or says why it cannot:
// serve checks --session-dir with it at start, before any configuration
// names the store.
func PrepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session directory: %w", err)
	}
	return nil
}

// New opens an embedded store. With cfg.Dir it reads the sessions
// kept there (their idle time starts anew), most recently written first,
// within MaxSessions and MaxBytes: a directory written under larger bounds
// must not load past them. A session that would pass a bound is set aside
// as <id>.jsonl.over, a file it cannot read as <id>.jsonl.bad; both are
// listed by Skipped. A directory it cannot use is an error.
func New(cfg Config) (*Store, error) {
	m := &Store{cfg: cfg.WithDefaults(), sessions: map[string]*memSession{}, idle: list.New(),
		byAgent: map[string]map[string]*memSession{}}
	if m.cfg.Dir == "" {
		m.Memory, _ = learning.NewMemory("")
		return m, nil
	}
	if err := PrepareDir(m.cfg.Dir); err != nil {
		return nil, err
	}
	var err error
	if m.Memory, err = learning.NewMemory(m.cfg.Dir); err != nil {
		return nil, err
	}
	names, err := filepath.Glob(filepath.Join(m.cfg.Dir, "*"+logSuffix))
	if err != nil {
		return nil, err
	}
	type logFile struct {
		name string
		mod  time.Time
	}
	files := make([]logFile, 0, len(names))
	for _, name := range names {
		if session.ValidateSessionID(strings.TrimSuffix(filepath.Base(name), logSuffix)) != nil {
			continue // not a session file of ours
		}
		fi, err := os.Stat(name)
		if err != nil {
			m.skipped = append(m.skipped, fmt.Errorf("session file: %w", err))
			continue
		}
		files = append(files, logFile{name, fi.ModTime()})
	}
	// Newest first; the name breaks ties so the same directory loads the same way.
	slices.SortFunc(files, func(a, b logFile) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	var kept []*memSession
	var held int64
	for _, f := range files {
		if len(kept) >= m.cfg.MaxSessions {
			m.skipped = append(m.skipped, setAside(f.name, fmt.Sprintf(
				"the store's maxSessions %d is held by more recently written sessions", m.cfg.MaxSessions)))
			continue
		}
		ms, err := m.replay(f.name)
		switch {
		case err != nil:
			m.skipped = append(m.skipped, err)
		case ms == nil: // an empty file: no session
		case held+ms.use.total > m.cfg.MaxBytes:
			m.skipped = append(m.skipped, setAside(f.name, fmt.Sprintf(
				"its %d bytes would pass the store's maxBytes %d (%d held by more recently written sessions)", ms.use.total, m.cfg.MaxBytes, held)))
		default:
			kept = append(kept, ms)
			held += ms.use.total
		}
	}
	// Least recent first, so the idle list keeps the files' order of use.
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ms := range slices.Backward(kept) {
		s, use := ms.s, ms.use
		ms.s, ms.use = session.Session{}, heapUse{}
		m.sessions[ms.id] = ms
		m.live++
		m.bytes += use.total
		m.commit(ms, s, use, prepare(s.Items))
	}
	return m, nil
}

// overSuffix marks a session file set aside at start because loading it
// would pass the store's bounds; it is kept for the operator, not read.
const overSuffix = ".over"

// setAside renames a session file past the store's bounds to
// <name>.over and says so.
func setAside(name, why string) error {
	err := fmt.Errorf("session file %s left out: %s; set aside as %s%s", filepath.Base(name), why, filepath.Base(name), overSuffix)
	if rerr := os.Rename(name, name+overSuffix); rerr != nil {
		return fmt.Errorf("%w (renaming failed: %v)", err, rerr)
	}
	return err
}

// SetBounds applies new TTL, MaxSessions and MaxBytes (zero fields take
// the defaults) to a live store, as a reload does: sessions already held
// stay; past a lowered bound, new writes get 507 until enough expire.
func (m *Store) SetBounds(c Config) {
	c = c.WithDefaults()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg.TTL, m.cfg.MaxSessions, m.cfg.MaxBytes = c.TTL, c.MaxSessions, c.MaxBytes
}

// Skipped are the session files New left out: set aside as .bad
// (unreadable) or .over (past the store's bounds); the caller logs them.
func (m *Store) Skipped() []error { return m.skipped }

// Len is the number of live sessions (expired ones are swept first).
func (m *Store) Len() int {
	m.mu.Lock()
	defer m.unlock()
	m.sweep()
	return m.idle.Len()
}

// unlock releases mu, then removes the files of the sessions removed while
// it was held.
func (m *Store) unlock() {
	doomed := m.doomed
	m.doomed = nil
	m.mu.Unlock()
	for _, ms := range doomed {
		m.dispose(ms)
	}
}

// sweep removes the sessions idle for longer than the TTL. The caller holds mu.
func (m *Store) sweep() {
	deadline := m.cfg.Now().Add(-m.cfg.TTL)
	for e := m.idle.Front(); e != nil; e = m.idle.Front() {
		ms := e.Value.(*memSession)
		if ms.used.After(deadline) {
			return
		}
		m.remove(ms)
	}
}

// remove takes a stored session out of the store: its bytes and its place
// in MaxSessions are free at once; its file, if any, goes at unlock. The
// caller holds mu.
func (m *Store) remove(ms *memSession) {
	m.idle.Remove(ms.elem)
	if a := m.byAgent[ms.owner]; a != nil {
		delete(a, ms.id)
		if len(a) == 0 {
			delete(m.byAgent, ms.owner)
		}
	}
	m.bytes -= ms.use.total
	m.live--
	m.retire(ms)
}

// retire marks ms gone. Without a file its id is free at once; with one, it
// stays in the map (so no new session of the id writes the file) until
// dispose has removed the file. The caller holds mu.
func (m *Store) retire(ms *memSession) {
	ms.gone = make(chan struct{})
	if m.cfg.Dir == "" {
		delete(m.sessions, ms.id)
		close(ms.gone)
		return
	}
	m.doomed = append(m.doomed, ms)
}

// dispose removes a retired session's file, under the session's mutex so
// that no write of it is under way, then frees its id.
func (m *Store) dispose(ms *memSession) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	_ = os.Remove(m.logPath(ms.id))
	m.mu.Lock()
	if m.sessions[ms.id] == ms {
		delete(m.sessions, ms.id)
	}
	m.mu.Unlock()
	close(ms.gone)
}

func (m *Store) touch(ms *memSession) {
	ms.used = m.cfg.Now()
	m.idle.MoveToBack(ms.elem)
}

var errClosed = fmt.Errorf("%w: the store is closed", session.ErrUnavailable)

// get finds a stored session of agent; the caller holds mu.
func (m *Store) get(id, agent string) (*memSession, error) {
	if m.closed {
		return nil, errClosed
	}
	m.sweep()
	ms := m.sessions[id]
	switch {
	case ms == nil || ms.elem == nil || ms.gone != nil:
		return nil, session.ErrNotFound
	case ms.owner != agent:
		return nil, session.ErrForbidden
	}
	return ms, nil
}

// Append implements Store.
func (m *Store) Append(_ context.Context, id, agent string, d session.Delta) ([]string, error) {
	if err := session.ValidateSessionID(id); err != nil {
		return nil, err
	}
	for {
		ms, err := m.writer(id, agent)
		if err != nil {
			return nil, err
		}
		if ids, again, err := m.write(ms, d); !again {
			return ids, err
		}
	}
}

// writer returns the session a write of agent to id goes to, its mutex
// held: the stored one, or a new one that takes a place in MaxSessions
// until its first write is stored or fails.
func (m *Store) writer(id, agent string) (*memSession, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.unlock()
			return nil, errClosed
		}
		m.sweep()
		ms := m.sessions[id]
		switch {
		case ms == nil:
			if m.live >= m.cfg.MaxSessions {
				err := &session.LimitError{Limit: "maxSessions", Max: int64(m.cfg.MaxSessions), Kind: session.ErrStoreFull,
					Msg: fmt.Sprintf("the session store is full: it holds %d sessions, its maxSessions; sessions idle for %s are removed", m.live, m.cfg.TTL)}
				m.unlock()
				return nil, err
			}
			ms = &memSession{id: id, owner: agent}
			ms.mu.Lock() // new: nobody else holds it
			m.sessions[id] = ms
			m.live++
			m.unlock()
			return ms, nil
		case ms.gone != nil:
			// Removed, its file not yet: the id is free once it is.
			gone := ms.gone
			m.unlock()
			<-gone
		case ms.owner != agent && ms.elem == nil:
			// Another agent's first write is under way: wait for it to
			// be stored (forbidden) or to fail (the id is free).
			m.unlock()
			ms.mu.Lock()
			ms.mu.Unlock() // the first write is done: look again
		case ms.owner != agent:
			m.unlock()
			return nil, session.ErrForbidden
		default:
			m.unlock()
			ms.mu.Lock()
			return ms, nil
		}
	}
}

// write applies d to ms, whose mutex the caller holds and write releases:
// merge and check (no store lock), reserve the bytes, write the file (no
// store lock), store. again: ms left the store meanwhile (deleted,
// expired, or a first write that failed); the write starts over.
func (m *Store) write(ms *memSession, d session.Delta) (ids []string, again bool, err error) {
	defer ms.mu.Unlock()
	next, err := session.Merge(&ms.s, d)
	if err != nil {
		m.mu.Lock()
		again = ms.gone != nil
		m.abandon(ms)
		m.unlock()
		return nil, again, err
	}
	use := ms.use.grown(ms.id, ms.owner, &ms.s, next)
	grow := use.total - ms.use.total
	m.mu.Lock()
	switch {
	case ms.gone != nil:
		m.unlock()
		return nil, true, nil
	case m.bytes+grow > m.cfg.MaxBytes:
		err := &session.LimitError{Limit: "maxBytes", Max: m.cfg.MaxBytes, Kind: session.ErrStoreFull,
			Msg: fmt.Sprintf("the session store is full: this write needs %d bytes and %d of its maxBytes %d are in use", grow, m.bytes, m.cfg.MaxBytes)}
		m.abandon(ms)
		m.unlock()
		return nil, false, err
	}
	// A write that shrinks the session (a shorter fact) frees its bytes
	// when it is stored, not before.
	reserved := max(grow, 0)
	m.bytes += reserved
	m.mu.Unlock()
	digests := prepare(next.Items[len(ms.s.Items):])
	if m.cfg.Dir != "" {
		if err := m.writeLog(ms, d); err != nil {
			m.mu.Lock()
			m.bytes -= reserved
			m.abandon(ms)
			m.unlock()
			// The answer names the cause, not the server's paths.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, false, fmt.Errorf("%w: writing the session's file: %v", session.ErrUnavailable, err)
		}
	}
	m.mu.Lock()
	if ms.gone != nil {
		// Removed while its file was written: that file goes with it.
		m.bytes -= reserved
		m.unlock()
		return nil, true, nil
	}
	m.bytes += grow - reserved
	for i := range digests {
		digests[i].at += int32(len(ms.s.Items))
	}
	m.commit(ms, *next, use, digests)
	m.mu.Unlock()
	ids = make([]string, len(d.Items))
	for i := range d.Items {
		ids[i] = d.Items[i].ID
	}
	return ids, false, nil
}

// abandon frees the place of a session whose first write failed; the
// caller holds mu and the session's mutex.
func (m *Store) abandon(ms *memSession) {
	if ms.elem == nil && ms.gone == nil {
		m.live--
		delete(m.sessions, ms.id)
		ms.gone = make(chan struct{})
		close(ms.gone)
	}
}

// digest is the SHA-256 of a tool result and its position among the items.
type digest struct {
	sum [sha256.Size]byte
	at  int32
}

// prepare readies items a write adds to be stored, before any lock is
// taken: their tags' arrays clipped, as the heap estimate counts them, and
// the digests of the tool results among them (positions in items).
func prepare(items []session.Item) []digest {
	var out []digest
	for i := range items {
		it := &items[i]
		if cap(it.Tags) > len(it.Tags) {
			it.Tags = slices.Clone(it.Tags)
		}
		if it.Kind == session.KindToolResult {
			out = append(out, digest{session.ArtifactDigest(it.Text), int32(i)})
		}
	}
	return out
}

// commit makes next the content of ms (new or not) with its heap use, whose
// bytes the caller counted, and indexes the digests of its new tool
// results; the caller holds mu (and, for a store in use, ms.mu).
func (m *Store) commit(ms *memSession, next session.Session, use heapUse, digests []digest) {
	for _, d := range digests {
		if ms.refs == nil {
			ms.refs = map[[sha256.Size]byte]int32{}
		}
		if _, dup := ms.refs[d.sum]; !dup {
			ms.refs[d.sum] = d.at
		}
	}
	ms.s, ms.use = next, use
	if ms.elem == nil {
		ms.elem = m.idle.PushBack(ms)
		a := m.byAgent[ms.owner]
		if a == nil {
			a = map[string]*memSession{}
			m.byAgent[ms.owner] = a
		}
		a[ms.id] = ms
	}
	m.touch(ms)
}

// Load implements Store. The session returned is the caller's: its
// slices and maps are copies (texts, immutable, are shared), made after the
// store's lock is released.
func (m *Store) Load(_ context.Context, id, agent string) (*session.Session, error) {
	m.mu.Lock()
	ms, err := m.get(id, agent)
	if err != nil {
		m.unlock()
		return nil, err
	}
	m.touch(ms)
	held := ms.s
	m.unlock()
	s := &session.Session{Items: slices.Clone(held.Items), Facts: slices.Clone(held.Facts), Episodes: slices.Clone(held.Episodes)}
	for i := range s.Items {
		it := &s.Items[i]
		it.Tags = slices.Clone(it.Tags)
		it.Metadata = maps.Clone(it.Metadata)
	}
	return s, nil
}

// Delete implements Store; the session's file is removed when it returns.
func (m *Store) Delete(_ context.Context, id, agent string) error {
	m.mu.Lock()
	defer m.unlock()
	ms, err := m.get(id, agent)
	if err != nil {
		return err
	}
	m.remove(ms)
	return nil
}

// Artifact implements Store: the agent's live sessions, in id order so the
// same ref in two sessions resolves the same way each time.
func (m *Store) Artifact(_ context.Context, agent, ref string) (string, error) {
	sum, err := session.ParseArtifactRef(ref)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.unlock()
	if m.closed {
		return "", errClosed
	}
	m.sweep()
	var found *memSession
	for id, ms := range m.byAgent[agent] {
		if _, ok := ms.refs[sum]; ok && (found == nil || id < found.id) {
			found = ms
		}
	}
	if found == nil {
		return "", session.ErrNotFound
	}
	return found.s.Items[found.refs[sum]].Text, nil
}

// Close implements Store. Every write is in its file already, so there is
// nothing to flush.
func (m *Store) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.CloseOutcomes()
}

// Persistence: one append-only file per session, <id>.jsonl. Its first
// line is {"owner": AGENT}; each further line one write (a Delta), as the
// API received it. A write reaches the file before the memory, so a
// refused file write leaves the session as it was. A last line cut short
// (the process died mid-write) is ignored when the file is read back.

const logSuffix = ".jsonl"

type logHeader struct {
	Owner string `json:"owner"`
}

type logDelta struct {
	Items    []session.Item    `json:"items,omitempty"`
	Facts    []session.Fact    `json:"facts,omitempty"`
	Episodes []session.Episode `json:"episodes,omitempty"`
}

func (m *Store) logPath(id string) string { return filepath.Join(m.cfg.Dir, id+logSuffix) }

func (m *Store) writeLog(ms *memSession, d session.Delta) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	flags := os.O_WRONLY | os.O_APPEND
	if ms.elem == nil {
		// A new session: a file left by a session removed while its write
		// failed half-way is replaced.
		flags |= os.O_CREATE | os.O_TRUNC
		_ = enc.Encode(logHeader{Owner: ms.owner})
	}
	if err := enc.Encode(logDelta(d)); err != nil {
		return err
	}
	f, err := os.OpenFile(m.logPath(ms.id), flags, 0o600)
	if err != nil {
		return err
	}
	size, werr := f.Seek(0, io.SeekEnd)
	if werr == nil {
		if _, werr = f.Write(buf.Bytes()); werr != nil {
			// A line cut short would break the lines after it.
			_ = f.Truncate(size)
		}
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// replay reads one session file back, without adding it to the store; nil
// when the file is empty. Each write is checked against the ones before
// it (session.Replay), in time linear in the file. A file it cannot read whole
// is set aside as <name>.bad and its session left out: one bad file must
// not keep the router from starting or cost the other sessions.
func (m *Store) replay(name string) (*memSession, error) {
	id := strings.TrimSuffix(filepath.Base(name), logSuffix)
	fail := func(err error) (*memSession, error) {
		_ = os.Rename(name, name+".bad")
		return nil, fmt.Errorf("%v; set aside as %s.bad", err, filepath.Base(name))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return fail(fmt.Errorf("session file: %w", err))
	}
	lines := bytes.Split(b, []byte("\n"))
	// The last piece follows the last line break: empty, or a write the
	// process did not finish, which goes so the next write starts a line.
	if cut := lines[len(lines)-1]; len(cut) > 0 {
		if err := os.Truncate(name, int64(len(b)-len(cut))); err != nil {
			return fail(fmt.Errorf("session file: %w", err))
		}
	}
	lines = lines[:len(lines)-1]
	var ms *memSession
	var r session.Replay
	for n, line := range lines {
		if ms == nil {
			var h logHeader
			if err := json.Unmarshal(line, &h); err != nil {
				return fail(fmt.Errorf("session file %s:%d: %v", name, n+1, err))
			}
			ms = &memSession{id: id, owner: h.Owner}
			continue
		}
		var d logDelta
		if err := json.Unmarshal(line, &d); err != nil {
			return fail(fmt.Errorf("session file %s:%d: %v", name, n+1, err))
		}
		if err := r.Apply(session.Delta(d)); err != nil {
			return fail(fmt.Errorf("session file %s:%d: %v", name, n+1, err))
		}
	}
	if ms != nil {
		// Arrays of the session's size, as a write makes them: the heap
		// estimate counts their capacity.
		s := r.Session()
		ms.s = session.Session{Items: exact(s.Items), Facts: exact(s.Facts), Episodes: exact(s.Episodes)}
		ms.use = heapUse{}.grown(ms.id, ms.owner, &session.Session{}, &ms.s)
	}
	return ms, nil
}

// exact copies s into an array of its length.
func exact[T any](s []T) []T {
	out := make([]T, len(s))
	copy(out, s)
	return out
}
