package learning

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Memory is the embedded store's learned records: in the process and, with
// a file, appended to it as they change and read back at start, so a
// restarted router keeps what it learned. The session store embeds it.
type Memory struct {
	mu      sync.Mutex
	owners  map[string]map[string]Record // owner -> id -> record
	agents  map[string]int               // records per reporting agent
	tools   map[string]int               // records per owner, source and tool
	total   int
	version atomic.Uint64
	f       *os.File // nil: memory only
}

// FileName is the file of the learned records in a session directory; its
// suffix is not the sessions' (.jsonl), so it is never read as a session.
const FileName = "learned-outcomes.log"

// logLine is one change of the file: a record added, or one removed.
type logLine struct {
	Add *Record `json:"add,omitempty"`
	Del string  `json:"del,omitempty"` // owner, NUL, id
}

// NewMemory returns an empty store, or with dir one that reads
// dir/FileName back (a line that does not parse, as a crash leaves the
// last, is skipped) and appends every change to it.
func NewMemory(dir string) (*Memory, error) {
	m := &Memory{owners: map[string]map[string]Record{}, agents: map[string]int{}, tools: map[string]int{}}
	if dir == "" {
		return m, nil
	}
	path := filepath.Join(dir, FileName)
	if b, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(b)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var l logLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if l.Add != nil {
				m.put(*l.Add)
			} else if owner, id, ok := cut0(l.Del); ok {
				m.remove(owner, id)
			}
		}
		b.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("learned outcomes: %w", err)
	}
	// Written again compact: the live records only.
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("learned outcomes: %w", err)
	}
	w := bufio.NewWriter(f)
	for _, recs := range m.owners {
		for _, r := range recs {
			b, _ := json.Marshal(logLine{Add: &r})
			w.Write(append(b, '\n'))
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("learned outcomes: %w", err)
	}
	f.Close()
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("learned outcomes: %w", err)
	}
	if m.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("learned outcomes: %w", err)
	}
	return m, nil
}

func cut0(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

func toolKey(r *Record) string { return r.Owner + "\x00" + r.Source + "\x00" + r.Tool }

// put stores r, replacing the record of its id.
func (m *Memory) put(r Record) {
	recs := m.owners[r.Owner]
	if recs == nil {
		recs = map[string]Record{}
		m.owners[r.Owner] = recs
	}
	if old, ok := recs[r.ID]; ok {
		m.count(&old, -1)
	}
	recs[r.ID] = r
	m.count(&r, 1)
}

func (m *Memory) remove(owner, id string) {
	if r, ok := m.owners[owner][id]; ok {
		delete(m.owners[owner], id)
		m.count(&r, -1)
		if len(m.owners[owner]) == 0 {
			delete(m.owners, owner)
		}
	}
}

func (m *Memory) count(r *Record, d int) {
	m.total += d
	for _, c := range []struct {
		m map[string]int
		k string
	}{{m.agents, r.Agent}, {m.tools, toolKey(r)}} {
		if c.m[c.k] += d; c.m[c.k] <= 0 {
			delete(c.m, c.k)
		}
	}
}

// write appends a change to the file; a failed write changes nothing.
func (m *Memory) write(l logLine) error {
	if m.f == nil {
		return nil
	}
	b, _ := json.Marshal(l)
	if _, err := m.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// AddOutcome implements Store.
func (m *Memory) AddOutcome(_ context.Context, r Record, b Bounds) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, replaces := m.owners[r.Owner][r.ID]
	c := Counts{Tool: m.tools[toolKey(&r)], Agent: m.agents[r.Agent], Total: m.total, Replaces: replaces}
	if err := Admit(&r, c, b); err != nil {
		return err
	}
	if err := m.write(logLine{Add: &r}); err != nil {
		return err
	}
	m.put(r)
	m.version.Add(1)
	return nil
}

// Outcomes implements Store.
func (m *Memory) Outcomes(_ context.Context, owners ...string) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, o := range owners {
		for _, r := range m.owners[o] {
			out = append(out, r)
		}
	}
	SortByID(out)
	return out, nil
}

// ListOutcomes implements Store.
func (m *Memory) ListOutcomes(_ context.Context, f Filter) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.selected(&f), nil
}

func (m *Memory) selected(f *Filter) []Record {
	out := []Record{}
	for _, recs := range m.owners {
		for _, r := range recs {
			if f.Match(&r) {
				out = append(out, r)
			}
		}
	}
	SortByID(out)
	return out
}

// DeleteOutcomes implements Store.
func (m *Memory) DeleteOutcomes(_ context.Context, f Filter) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sel := m.selected(&f)
	for _, r := range sel {
		if err := m.write(logLine{Del: r.Owner + "\x00" + r.ID}); err != nil {
			return 0, err
		}
		m.remove(r.Owner, r.ID)
	}
	if len(sel) > 0 {
		m.version.Add(1)
	}
	return len(sel), nil
}

// OutcomesVersion implements Store.
func (m *Memory) OutcomesVersion(context.Context) (uint64, error) { return m.version.Load(), nil }

// CloseOutcomes closes the file.
func (m *Memory) CloseOutcomes() error {
	if m.f == nil {
		return nil
	}
	return m.f.Close()
}
