// Package learning turns the outcomes agents report for shortlisted tools
// into learned examples (docs/api.md §10.10): a success is an example of its
// tool, a failure an anti-example. The records live in the router's
// session store (memstore, redisstore), behind Store; this package holds
// the rules every store and caller share: the record, its id, the bounds
// and the overlay a query ranks with.
package learning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextrouter/contextrouter/internal/tools"
)

// Outcomes an agent reports.
const (
	Success = "success"
	Failure = "failure"
)

// Shared is the owner of records every agent learns from (scope Shared).
const Shared = "*"

// Record is one learned outcome.
type Record struct {
	// ID is the record's id: Key of its owner, source, tool and text, so
	// the same question reported again for the same tool replaces the
	// earlier outcome instead of counting twice.
	ID string `json:"id"`
	// Owner is the agent whose shortlists it ranks, or Shared.
	Owner string `json:"owner"`
	// Agent reported it.
	Agent   string    `json:"agent"`
	Source  string    `json:"source"`
	Tool    string    `json:"tool"`
	Text    string    `json:"text"`
	Outcome string    `json:"outcome"`
	Time    time.Time `json:"time"`
}

// Key is the id of the record of owner's outcome for a tool and a question.
func Key(owner, source, tool, text string) string {
	h := sha256.New()
	for _, s := range []string{owner, source, tool, text} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Bounds of the learned records of one router (docs/api.md §9). Input
// past them is refused where it enters: the text by the caller (Check),
// the counts by the store when it adds (Admit), the rate by the server.
type Bounds struct {
	// PerTool is the records of one tool in one owner's set.
	PerTool int
	// PerAgent is the records one agent reported, in every scope.
	PerAgent int
	// Total is the records of the router's store.
	Total int
}

// DefaultBounds are the router's: at most 20,000 records of at most
// MaxText bytes of text, some 30 MiB in the worst case (docs/api.md §9).
var DefaultBounds = Bounds{PerTool: 64, PerAgent: 2000, Total: 20000}

// MaxText bounds an outcome's question, as a catalog example's (§10.1).
const MaxText = 1024

// PerMinute is the outcomes one agent may report per minute (a replica
// counts its own).
const PerMinute = 60

// Counts are what a store holds when a record is added: the records of the
// record's tool in its owner's set, of its agent, of the store, and whether
// it replaces a record of the same id (which adds nothing).
type Counts struct {
	Tool, Agent, Total int
	Replaces           bool
}

// LimitError is an outcome refused by a bound; Reason is the metric's.
type LimitError struct {
	Reason string // "tool_limit", "agent_limit", "store_full"
	Msg    string
}

func (e *LimitError) Error() string { return e.Msg }

// ErrUnavailable wraps a store that cannot answer (Redis down).
var ErrUnavailable = errors.New("learning store unavailable")

// Admit is the rule every store applies, under its lock or transaction,
// before it adds r: a record that replaces one of the same id always
// fits; any other must keep each count within its bound.
func Admit(r *Record, c Counts, b Bounds) error {
	switch {
	case c.Replaces:
		return nil
	case c.Tool >= b.PerTool:
		return &LimitError{"tool_limit", fmt.Sprintf("tool %q of source %q has %d learned outcomes for %s, the limit; delete some (DELETE /v1/tools/outcomes)", r.Tool, r.Source, c.Tool, ownerName(r.Owner))}
	case c.Agent >= b.PerAgent:
		return &LimitError{"agent_limit", fmt.Sprintf("agent %q has reported %d learned outcomes, the limit; delete some (DELETE /v1/tools/outcomes)", r.Agent, c.Agent)}
	case c.Total >= b.Total:
		return &LimitError{"store_full", fmt.Sprintf("the router holds %d learned outcomes, the limit", c.Total)}
	}
	return nil
}

func ownerName(owner string) string {
	if owner == Shared {
		return "every agent"
	}
	return fmt.Sprintf("agent %q", owner)
}

// Check validates an outcome before it reaches a store: the outcome word
// and the text's size. Messages name the field.
func Check(text, outcome string) error {
	switch {
	case outcome != Success && outcome != Failure:
		return fmt.Errorf("outcome: %q must be success or failure", outcome)
	case strings.TrimSpace(text) == "":
		return errors.New("text: the question is empty")
	case len(text) > MaxText:
		return fmt.Errorf("text is %d bytes; learned questions are limited to %d bytes", len(text), MaxText)
	}
	return nil
}

// Filter selects records to list or delete: those agent reported, of
// source and tool when set, the record id when set.
type Filter struct {
	Agent, Source, Tool, ID string
}

// Match reports whether r is selected.
func (f *Filter) Match(r *Record) bool {
	return r.Agent == f.Agent && (f.Source == "" || r.Source == f.Source) &&
		(f.Tool == "" || r.Tool == f.Tool) && (f.ID == "" || r.ID == f.ID)
}

// Store keeps learned records. The session stores implement it, so
// learned examples live where the router's sessions do.
type Store interface {
	// AddOutcome stores r (its ID set by the caller, Key), replacing the
	// record of the same id; a record past a bound is refused with a
	// *LimitError (Admit) and nothing changes.
	AddOutcome(ctx context.Context, r Record, b Bounds) error
	// Outcomes returns the records of the owners, by id.
	Outcomes(ctx context.Context, owners ...string) ([]Record, error)
	// ListOutcomes returns the records f selects, by id.
	ListOutcomes(ctx context.Context, f Filter) ([]Record, error)
	// DeleteOutcomes removes the records f selects and says how many.
	DeleteOutcomes(ctx context.Context, f Filter) (int, error)
	// OutcomesVersion changes whenever a record is added or removed, so a
	// cached overlay knows when to be built again.
	OutcomesVersion(ctx context.Context) (uint64, error)
}

// SortByID orders records as stores return them.
func SortByID(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
}

// Overlay builds the ranking overlay of records over ix: entry finds a
// record's tool in the index (false: not there any more, skipped). The
// one place a record becomes a learned example or anti-example.
func Overlay(ix *tools.Index, records []Record, entry func(source, tool string) (int, bool)) *tools.Learned {
	ex := make([]tools.LearnedExample, 0, len(records))
	for i := range records {
		r := &records[i]
		if e, ok := entry(r.Source, r.Tool); ok {
			ex = append(ex, tools.LearnedExample{Entry: e, Text: r.Text, Success: r.Outcome == Success})
		}
	}
	return ix.Learn(ex)
}

// Learn is the one path from an outcome to a stored record, for the
// server, the MCP tool and eval tools alike: the outcome checked (Check),
// its id set (Key), its time set when zero, and the record added within
// the bounds. owner is the agent it helps or Shared; the caller has
// checked that the agent may use the tool and may teach when owner is
// Shared.
func Learn(ctx context.Context, s Store, r Record, b Bounds) (Record, error) {
	if err := Check(r.Text, r.Outcome); err != nil {
		return r, err
	}
	r.ID = Key(r.Owner, r.Source, r.Tool, r.Text)
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	return r, s.AddOutcome(ctx, r, b)
}
