package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/contextrouter/contextrouter/internal/learning"
)

// Learned outcomes (docs/api.md §10.10) live beside the sessions, so every
// replica ranks with the same ones. Keys, after the prefix:
//
//	learn:o:<owner>  hash: record id -> record (JSON); owner an agent or "*"
//	learn:n          hash: counts — "t:<owner>\0<source>\0<tool>", "a:<agent>", "total"
//	learn:v          the version, incremented by every change
//
// A change is a WATCH of the version, the reads and the bound check
// (learning.Admit, the same rule as the embedded store's), then a MULTI
// that applies it and increments the version: two replicas changing at
// once retry, so the counts never pass a bound. Records have no TTL.

var _ learning.Store = (*Store)(nil)

func (s *Store) ownerKey(owner string) string { return s.prefix + "learn:o:" + owner }
func (s *Store) countKey() string             { return s.prefix + "learn:n" }
func (s *Store) versionKey() string           { return s.prefix + "learn:v" }

func toolField(r *learning.Record) string {
	return "t:" + r.Owner + "\x00" + r.Source + "\x00" + r.Tool
}

func learnUnavailable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: redis: %v", learning.ErrUnavailable, err)
}

// watched runs fn in a WATCH of the version, retrying when another writer
// changed it first.
func (s *Store) watched(ctx context.Context, fn func(tx *redis.Tx) error) error {
	for range maxAttempts {
		err := s.c.Watch(ctx, fn, s.versionKey())
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return learnUnavailable(errors.New("too many concurrent changes of learned outcomes"))
}

// recount adds d to the counts of r in pipe.
func (s *Store) recount(pipe redis.Pipeliner, ctx context.Context, r *learning.Record, d int64) {
	pipe.HIncrBy(ctx, s.countKey(), toolField(r), d)
	pipe.HIncrBy(ctx, s.countKey(), "a:"+r.Agent, d)
	pipe.HIncrBy(ctx, s.countKey(), "total", d)
}

// AddOutcome implements learning.Store.
func (s *Store) AddOutcome(ctx context.Context, r learning.Record, b learning.Bounds) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var refused error
	err = s.watched(ctx, func(tx *redis.Tx) error {
		refused = nil
		old, err := tx.HGet(ctx, s.ownerKey(r.Owner), r.ID).Result()
		replaces := err == nil
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		n, err := tx.HMGet(ctx, s.countKey(), toolField(&r), "a:"+r.Agent, "total").Result()
		if err != nil {
			return err
		}
		c := learning.Counts{Tool: atoi(n[0]), Agent: atoi(n[1]), Total: atoi(n[2]), Replaces: replaces}
		if refused = learning.Admit(&r, c, b); refused != nil {
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			if replaces {
				var prev learning.Record
				if json.Unmarshal([]byte(old), &prev) == nil {
					s.recount(pipe, ctx, &prev, -1)
				}
			}
			pipe.HSet(ctx, s.ownerKey(r.Owner), r.ID, raw)
			s.recount(pipe, ctx, &r, 1)
			pipe.Incr(ctx, s.versionKey())
			return nil
		})
		return err
	})
	if err != nil {
		return learnUnavailable(err)
	}
	return refused
}

func atoi(v any) int {
	var n int
	if s, ok := v.(string); ok {
		fmt.Sscan(s, &n)
	}
	return n
}

// Outcomes implements learning.Store.
func (s *Store) Outcomes(ctx context.Context, owners ...string) ([]learning.Record, error) {
	var out []learning.Record
	for _, o := range owners {
		vals, err := s.c.HVals(ctx, s.ownerKey(o)).Result()
		if err != nil {
			return nil, learnUnavailable(err)
		}
		for _, v := range vals {
			var r learning.Record
			if err := json.Unmarshal([]byte(v), &r); err != nil {
				return nil, fmt.Errorf("redis learned outcome of %q is corrupt: %v", o, err)
			}
			out = append(out, r)
		}
	}
	learning.SortByID(out)
	return out, nil
}

// selected are the records f selects: an agent's records are its own or
// shared (learning's owners), so two hashes hold them all.
func (s *Store) selected(ctx context.Context, f *learning.Filter) ([]learning.Record, error) {
	all, err := s.Outcomes(ctx, f.Agent, learning.Shared)
	if err != nil {
		return nil, err
	}
	out := []learning.Record{}
	for _, r := range all {
		if f.Match(&r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// ListOutcomes implements learning.Store.
func (s *Store) ListOutcomes(ctx context.Context, f learning.Filter) ([]learning.Record, error) {
	return s.selected(ctx, &f)
}

// DeleteOutcomes implements learning.Store.
func (s *Store) DeleteOutcomes(ctx context.Context, f learning.Filter) (int, error) {
	n := 0
	err := s.watched(ctx, func(tx *redis.Tx) error {
		sel, err := s.selected(ctx, &f)
		if err != nil || len(sel) == 0 {
			n = 0
			return err
		}
		n = len(sel)
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			for i := range sel {
				pipe.HDel(ctx, s.ownerKey(sel[i].Owner), sel[i].ID)
				s.recount(pipe, ctx, &sel[i], -1)
			}
			pipe.Incr(ctx, s.versionKey())
			return nil
		})
		return err
	})
	if err != nil {
		return 0, learnUnavailable(err)
	}
	return n, nil
}

// OutcomesVersion implements learning.Store.
func (s *Store) OutcomesVersion(ctx context.Context) (uint64, error) {
	v, err := s.c.Get(ctx, s.versionKey()).Uint64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, learnUnavailable(err)
	}
	return v, nil
}
