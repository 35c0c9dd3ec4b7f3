package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the audit writer (api.md §6.5).
const (
	// DefaultAuditQueueBytes bounds the audit lines waiting for the sink,
	// the batch being written included: a few thousand records.
	DefaultAuditQueueBytes = 4 << 20
	// DefaultAuditStallAfter: a write to the sink that has not returned for
	// this long means the sink is stalled (status and metrics say so).
	DefaultAuditStallAfter = 5 * time.Second
	// AuditFlushTimeout bounds how long shutdown waits for queued lines.
	AuditFlushTimeout = 5 * time.Second
	// auditKeepBuffer: a batch buffer larger than this is let go after its
	// write, so that one burst does not pin its memory.
	auditKeepBuffer = 1 << 20
)

// auditLog is where audit lines go: a file reopened on request (SIGHUP,
// for log rotation) or the standard output. Lines are queued by deliver and
// written by one goroutine, so that an answer never waits for the sink: a
// pipe nobody reads or a hung disk fills the queue, after which lines are
// dropped and counted. The writer takes every queued line at once and
// writes them with one call, so a busy server makes fewer writes.
type auditLog struct {
	path string // "" = out
	out  io.Writer
	// limit bounds pending; stallAfter is when a write in progress counts as stalled.
	limit      int
	stallAfter time.Duration
	log        *slog.Logger

	// mu guards the sink. The writer holds it only to read w, never while
	// writing, so a reopen does not wait for a stalled write.
	mu sync.Mutex
	w  io.Writer
	f  *os.File

	qmu sync.Mutex
	// more wakes the writer; idle wakes flush when pending reaches 0.
	more, idle sync.Cond
	start      sync.Once
	buf        []byte    // lines waiting
	lines      int       // lines in buf
	spare      []byte    // the last batch's buffer, for reuse
	pending    int       // bytes in buf and in the batch being written
	writing    time.Time // when the write in progress began (zero: none)
	inflight   int       // lines in the batch being written
	closed     bool
	// abandoned: shutdown gave up on the batch being written and counted it
	// as dropped; the writer must not count it again if the write returns.
	abandoned bool
	// dropping and stallLogged are set from the first drop or stall until
	// the queue is empty again, so that an episode is logged once.
	dropping, stallLogged bool

	// failing is the writer's own: the last write failed (logged once).
	failing bool

	written, writeErrors, dropped atomic.Uint64
}

// openAuditLog opens path ("-" = out) for appending; limit (bytes) and
// stallAfter are the writer's bounds (0 = the defaults).
func openAuditLog(path string, out io.Writer, limit int, stallAfter time.Duration, log *slog.Logger) (*auditLog, error) {
	if limit <= 0 {
		limit = DefaultAuditQueueBytes
	}
	if stallAfter <= 0 {
		stallAfter = DefaultAuditStallAfter
	}
	l := &auditLog{out: out, limit: limit, stallAfter: stallAfter, log: log}
	l.more.L, l.idle.L = &l.qmu, &l.qmu
	if path != "-" {
		l.path = path
	}
	if err := l.Reopen(); err != nil {
		return nil, err
	}
	return l, nil
}

// Reopen opens the file again (after a rotation moved it); the standard
// output is left as is. On failure the old file stays in use. A line being
// written goes to the old file: it was taken before the reopen.
func (l *auditLog) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		l.w = l.out
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit log (--audit-log): %w", err)
	}
	old := l.f
	l.f, l.w = f, f
	if old != nil {
		// A write in progress keeps the descriptor open until it returns.
		_ = old.Close()
	}
	return nil
}

// enqueue queues one line (copied) for the writer and never blocks on the
// sink. A line that does not fit under the limit is dropped and counted.
func (l *auditLog) enqueue(line []byte) {
	l.start.Do(func() { go l.run() })
	l.qmu.Lock()
	if l.closed {
		// Shutdown is over; close counted what it left.
		l.qmu.Unlock()
		l.dropped.Add(1)
		return
	}
	full := l.pending+len(line) > l.limit
	firstDrop := full && !l.dropping
	if full {
		l.dropping = true
	} else {
		l.buf = append(l.buf, line...)
		l.lines++
		l.pending += len(line)
	}
	// A stall is noticed here, where lines keep coming: the writer is stuck.
	stall := !l.stallLogged && l.stalledLocked(time.Now())
	if stall {
		l.stallLogged = true
	}
	pending := l.pending
	l.qmu.Unlock()
	if full {
		l.dropped.Add(1)
	} else {
		l.more.Signal()
	}
	if stall {
		l.log.Error("audit log sink stalled: a write has not returned; answers go on, audit lines queue and are dropped when the queue is full",
			"after", l.stallAfter, "queued_bytes", pending, "limit_bytes", l.limit)
	}
	if firstDrop {
		l.log.Error("audit log queue full: dropping audit lines until the sink takes the queued ones (contextrouter_audit_dropped_total counts them)",
			"queued_bytes", pending, "limit_bytes", l.limit)
	}
}

// stalledLocked reports whether a write has been in progress for
// stallAfter; the caller holds qmu.
func (l *auditLog) stalledLocked(now time.Time) bool {
	return !l.writing.IsZero() && now.Sub(l.writing) >= l.stallAfter
}

// run is the writer: it takes every queued line and writes them with one
// call, until the log is closed and the queue empty.
func (l *auditLog) run() {
	for {
		l.qmu.Lock()
		for len(l.buf) == 0 && !l.closed {
			l.more.Wait()
		}
		if len(l.buf) == 0 {
			l.qmu.Unlock()
			return
		}
		batch, lines := l.buf, l.lines
		l.buf, l.lines, l.spare = l.spare[:0], 0, nil
		l.writing, l.inflight = time.Now(), lines
		l.qmu.Unlock()

		l.mu.Lock()
		w := l.w
		l.mu.Unlock()
		n, err := len(batch), error(nil)
		if w == nil {
			n, err = 0, errors.New("audit log is closed")
		} else if n, err = w.Write(batch); err == nil && n < len(batch) {
			err = io.ErrShortWrite
		}
		ok := lines
		if err != nil {
			// Lines written whole before the failure count as written.
			ok = bytes.Count(batch[:n], []byte{'\n'})
		}

		l.qmu.Lock()
		if !l.abandoned {
			l.written.Add(uint64(ok))
			l.writeErrors.Add(uint64(lines - ok))
		}
		l.writing, l.inflight = time.Time{}, 0
		l.pending -= len(batch)
		if cap(batch) <= auditKeepBuffer {
			l.spare = batch[:0]
		}
		caughtUp := false
		if l.pending == 0 {
			caughtUp = l.dropping || l.stallLogged
			l.dropping, l.stallLogged = false, false
			l.idle.Broadcast()
		}
		l.qmu.Unlock()

		if err != nil && !l.failing {
			l.log.Error("cannot write the audit log; answering anyway (contextrouter_audit_write_errors_total counts the lost lines)", "error", err.Error())
		}
		if caughtUp {
			l.log.Info("audit log sink caught up: its queue is empty again", "dropped_total", l.dropped.Load())
		}
		l.failing = err != nil
	}
}

// flush waits until every queued line has been written (or failed to be),
// or ctx ends; it reports whether the queue is empty.
func (l *auditLog) flush(ctx context.Context) bool {
	stop := context.AfterFunc(ctx, func() {
		l.qmu.Lock()
		l.idle.Broadcast()
		l.qmu.Unlock()
	})
	defer stop()
	l.qmu.Lock()
	defer l.qmu.Unlock()
	for l.pending > 0 && ctx.Err() == nil {
		l.idle.Wait()
	}
	return l.pending == 0
}

// close stops taking lines, writes the queued ones until ctx ends, counts
// those still waiting or being written as dropped, and closes the file
// (not the standard output).
func (l *auditLog) close(ctx context.Context) {
	l.qmu.Lock()
	l.closed = true
	l.qmu.Unlock()
	l.more.Broadcast()
	if !l.flush(ctx) {
		l.qmu.Lock()
		lost := l.lines + l.inflight
		l.pending -= len(l.buf)
		l.buf, l.lines, l.abandoned = nil, 0, true
		l.qmu.Unlock()
		l.dropped.Add(uint64(lost))
		l.log.Error("audit log: lines not written at shutdown; the sink did not take them in time (counted in contextrouter_audit_dropped_total)", "lines", lost)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	l.w = nil
	l.path = "" // a late reopen (SIGHUP) must not open the file again
	l.out = nil
}

// AuditStatus is the audit writer in GET /v1/status (api.md §6.5).
type AuditStatus struct {
	// Stalled is set while a write to the sink has not returned for
	// DefaultAuditStallAfter; StalledSince is when that write began.
	Stalled      bool       `json:"stalled"`
	StalledSince *time.Time `json:"stalled_since,omitempty"`
	// QueuedBytes are the lines waiting or being written, at most QueueLimitBytes.
	QueuedBytes     int `json:"queued_bytes"`
	QueueLimitBytes int `json:"queue_limit_bytes"`
	// Written, Dropped and WriteErrors count lines since the start, as the
	// contextrouter_audit_* counters do.
	Written     uint64 `json:"written"`
	Dropped     uint64 `json:"dropped"`
	WriteErrors uint64 `json:"write_errors"`
}

// status reports the writer at now.
func (l *auditLog) status(now time.Time) AuditStatus {
	l.qmu.Lock()
	out := AuditStatus{QueuedBytes: l.pending, QueueLimitBytes: l.limit, Stalled: l.stalledLocked(now)}
	if out.Stalled {
		out.StalledSince = timePtr(l.writing)
	}
	l.qmu.Unlock()
	out.Written, out.Dropped, out.WriteErrors = l.written.Load(), l.dropped.Load(), l.writeErrors.Load()
	return out
}
