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
	"encoding/hex"
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
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
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
// optionally kept in files (Config.Dir). One mutex guards it; a write
// validates the session it makes, which for the limits of §11.7 takes
// microseconds to about a millisecond.
//
// Bounds: a write that would pass MaxSessions (a new session) or MaxBytes
// is refused with a *LimitError (507): live sessions are never evicted to
// make room, only sessions idle for TTL are removed. Expired sessions are
// swept by every call, oldest first from a list kept in order of use, so no
// timer or goroutine runs per session.
type Store struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*memSession
	// idle orders the sessions by last use, least recent first.
	idle *list.List
	// byAgent indexes sessions by owner, for Artifact.
	byAgent map[string]map[string]*memSession
	bytes   int64
	closed  bool
	skipped []error
}

type memSession struct {
	id, owner string
	s         session.Session
	// use is what the session takes of MaxBytes (footprint.go).
	use heapUse
	// refs maps the SHA-256 of each tool result to its item, computed when
	// it is written so that Artifact neither hashes nor copies; the digest
	// is the key, not the 71-byte ref, to keep idle sessions small.
	refs map[[sha256.Size]byte]int32
	used time.Time
	elem *list.Element
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
		return m, nil
	}
	if err := PrepareDir(m.cfg.Dir); err != nil {
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
	for _, ms := range slices.Backward(kept) {
		s, use := ms.s, ms.use
		ms.s, ms.use = session.Session{}, heapUse{}
		m.commit(ms, s, use)
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
	defer m.mu.Unlock()
	m.sweep()
	return len(m.sessions)
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

func (m *Store) remove(ms *memSession) {
	m.idle.Remove(ms.elem)
	delete(m.sessions, ms.id)
	if a := m.byAgent[ms.owner]; a != nil {
		delete(a, ms.id)
		if len(a) == 0 {
			delete(m.byAgent, ms.owner)
		}
	}
	m.bytes -= ms.use.total
	if m.cfg.Dir != "" {
		_ = os.Remove(m.logPath(ms.id))
	}
}

func (m *Store) touch(ms *memSession) {
	ms.used = m.cfg.Now()
	m.idle.MoveToBack(ms.elem)
}

// get finds a live session of agent; the caller holds mu.
func (m *Store) get(id, agent string) (*memSession, error) {
	if m.closed {
		return nil, fmt.Errorf("%w: the store is closed", session.ErrUnavailable)
	}
	m.sweep()
	ms := m.sessions[id]
	switch {
	case ms == nil:
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
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, err := m.get(id, agent)
	switch {
	case errors.Is(err, session.ErrNotFound):
		if len(m.sessions) >= m.cfg.MaxSessions {
			return nil, &session.LimitError{Limit: "maxSessions", Max: int64(m.cfg.MaxSessions),
				Msg: fmt.Sprintf("the session store is full: it holds %d sessions, its maxSessions; sessions idle for %s are removed", len(m.sessions), m.cfg.TTL)}
		}
		ms = &memSession{id: id, owner: agent}
	case err != nil:
		return nil, err
	}
	next, err := session.Merge(&ms.s, d)
	if err != nil {
		return nil, err
	}
	use := ms.use.grown(id, agent, &ms.s, next)
	grow := use.total - ms.use.total
	if m.bytes+grow > m.cfg.MaxBytes {
		return nil, &session.LimitError{Limit: "maxBytes", Max: m.cfg.MaxBytes,
			Msg: fmt.Sprintf("the session store is full: this write needs %d bytes and %d of its maxBytes %d are in use", grow, m.bytes, m.cfg.MaxBytes)}
	}
	if m.cfg.Dir != "" {
		if err := m.writeLog(ms, d); err != nil {
			// The answer names the cause, not the server's paths.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("%w: writing the session's file: %v", session.ErrUnavailable, err)
		}
	}
	m.commit(ms, *next, use)
	ids := make([]string, len(d.Items))
	for i := range d.Items {
		ids[i] = d.Items[i].ID
	}
	return ids, nil
}

// commit makes next the content of ms (new or not), taking use of the
// heap; the caller holds mu.
func (m *Store) commit(ms *memSession, next session.Session, use heapUse) {
	for i := len(ms.s.Items); i < len(next.Items); i++ {
		it := &next.Items[i]
		// The heap estimate counts a backing array of just the tags: spare
		// room a decoder left is not kept.
		if cap(it.Tags) > len(it.Tags) {
			it.Tags = slices.Clone(it.Tags)
		}
		if it.Kind != session.KindToolResult {
			continue
		}
		if ms.refs == nil {
			ms.refs = map[[sha256.Size]byte]int32{}
		}
		sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(it.Text), len(it.Text)))
		if _, dup := ms.refs[sum]; !dup {
			ms.refs[sum] = int32(i)
		}
	}
	ms.s = next
	m.bytes += use.total - ms.use.total
	ms.use = use
	if ms.elem == nil {
		ms.elem = m.idle.PushBack(ms)
		m.sessions[ms.id] = ms
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
// slices and maps are copies (texts, immutable, are shared).
func (m *Store) Load(_ context.Context, id, agent string) (*session.Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, err := m.get(id, agent)
	if err != nil {
		return nil, err
	}
	m.touch(ms)
	s := &session.Session{Items: slices.Clone(ms.s.Items), Facts: slices.Clone(ms.s.Facts), Episodes: slices.Clone(ms.s.Episodes)}
	for i := range s.Items {
		it := &s.Items[i]
		it.Tags = slices.Clone(it.Tags)
		it.Metadata = maps.Clone(it.Metadata)
	}
	return s, nil
}

// Delete implements Store.
func (m *Store) Delete(_ context.Context, id, agent string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", fmt.Errorf("%w: the store is closed", session.ErrUnavailable)
	}
	m.sweep()
	var sum [sha256.Size]byte
	if h, ok := strings.CutPrefix(ref, "sha256:"); !ok || len(h) != hex.EncodedLen(len(sum)) {
		return "", session.ErrNotFound
	} else if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return "", session.ErrNotFound
	}
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
	return nil
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
// when the file is empty. A file it cannot read whole
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
		next, err := session.Merge(&ms.s, session.Delta(d))
		if err != nil {
			return fail(fmt.Errorf("session file %s:%d: %v", name, n+1, err))
		}
		ms.s = *next
	}
	if ms != nil {
		ms.use = heapUse{}.grown(ms.id, ms.owner, &session.Session{}, &ms.s)
	}
	return ms, nil
}
