// Package redisstore keeps sessions in a Redis or Valkey server, so that the
// replicas of a router Deployment share them (docs/api.md §11.8).
//
// A session is five keys under the store's prefix P:
//
//	P s:ID:meta      hash  owner (agent), ver (a random token per write), fseq
//	P s:ID:items     list  items (encodeItem), in order
//	P s:ID:facts     hash  key → "ORDINAL VALUE" (ordinal keeps the fact order)
//	P s:ID:episodes  list  episodes as JSON
//	P s:ID:arts      hash  artifact ref → position of its tool_result in items
//
// and P a:AGENT:sessions (a sorted set: session id by last use, in ms)
// lists an agent's live sessions for Artifact, which looks in the
// maxArtifactScan most recently used. Every script refreshes the idle TTL of
// all of a session's keys together, so they expire together; a write also
// drops the agent's sessions idle past the TTL from the sorted set. Keys are built by the scripts from the prefix,
// so the store needs one server (or a primary), not a cluster.
//
// Load is one round trip (a script). Append is two: a Load, then a script
// that writes only if the session is still the version it read (else the
// append is merged again, a bounded number of times), so a write is all or
// nothing and two replicas appending at once lose nothing.
package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/session"
)

// Options configure a Store.
type Options struct {
	// Address is host:port.
	Address  string
	Password string
	DB       int
	// KeyPrefix starts every key, so several routers can share a server.
	KeyPrefix string
	// TLS connects with TLS, verifying the server's certificate for the
	// address's host.
	TLS bool
	// RootCAs verify the server's certificate (nil: the system's).
	RootCAs *x509.CertPool
	// TTL is the idle time after which a session expires (> 0).
	TTL time.Duration
	// Timeout bounds dialing, and each read and write on a connection
	// (0: DefaultTimeout).
	Timeout time.Duration
	// Logger receives the warning that the server's eviction policy could
	// not be checked (nil: slog.Default()).
	Logger *slog.Logger
}

const (
	// DefaultTimeout of dialing and of each read and write.
	DefaultTimeout = 2 * time.Second
	// MaxTimeout bounds Options.Timeout.
	MaxTimeout = 30 * time.Second
	// maxAttempts bounds the merges of one Append that lose a race with
	// another writer of the same session.
	maxAttempts = 16
	// pushBatch bounds the arguments of one RPUSH or HSET in a script
	// (Lua's unpack has a stack limit).
	pushBatch = 512
	// MaxArtifactScan bounds the sessions an artifact look-up reads: the
	// agent's most recently used ones. A script blocks the server while it
	// runs, so its work must not grow with what one agent can create.
	MaxArtifactScan = 1000
)

// Store is a session.Store on Redis.
type Store struct {
	c      *redis.Client
	prefix string
	ttlMS  string
	log    *slog.Logger
	// unchecked warns once that the server's policy could not be read.
	unchecked sync.Once
}

var _ session.Store = (*Store)(nil)

// New returns a store; it does not connect until the first call, so a
// server that is down makes calls fail with session.ErrUnavailable, not the
// router's start.
func New(o Options) (*Store, error) {
	host, _, err := net.SplitHostPort(o.Address)
	if err != nil || host == "" {
		return nil, fmt.Errorf("redis address %q: want host:port", o.Address)
	}
	if o.TTL <= 0 {
		return nil, fmt.Errorf("redis store: the TTL must be greater than 0")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	o.Timeout = min(o.Timeout, MaxTimeout)
	ro := &redis.Options{
		Addr:     o.Address,
		Password: o.Password,
		DB:       o.DB,
		// RESP2 and no CLIENT SETINFO: a connection costs one AUTH at most.
		Protocol:              2,
		DisableIdentity:       true,
		DialTimeout:           o.Timeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		PoolTimeout:           o.Timeout,
		ContextTimeoutEnabled: true,
		// A write script whose reply was lost may have run: a retry would
		// meet its own write and report the items as already stored. The
		// caller retries instead. Dead pooled connections are dropped
		// before use, so a restarted server costs no failed call.
		MaxRetries: -1,
		// A server that is down fails a call after two dials, not five.
		DialerRetries: 1,
	}
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	if o.TLS {
		ro.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs}
	}
	s := &Store{prefix: o.KeyPrefix, ttlMS: strconv.FormatInt(o.TTL.Milliseconds(), 10), log: cmp.Or(o.Logger, slog.Default())}
	ro.OnConnect = s.checkPolicy
	s.c = redis.NewClient(ro)
	return s, nil
}

// checkPolicy runs on every new connection, before its first command. A
// server whose maxmemory-policy is not noeviction evicts keys when memory
// runs short, session keys included (each has a TTL, so the volatile-*
// policies take them too): sessions it acknowledged would silently lose
// items (a probe lost 79 of 120, issue 22). Such a connection is refused
// with what to set, so every call fails as with a server that is down
// (ErrUnavailable, 503) until the policy is noeviction; the next call
// connects again. A server that does not answer CONFIG GET (the command
// renamed or disabled, as managed services do, or an ACL without it) cannot
// be checked: the store works, and warns once.
func (s *Store) checkPolicy(ctx context.Context, cn *redis.Conn) error {
	res, err := cn.ConfigGet(ctx, "maxmemory-policy").Result()
	var refused redis.Error
	switch {
	case errors.As(err, &refused):
	case err != nil:
		return err
	case res["maxmemory-policy"] == "noeviction":
		return nil
	case res["maxmemory-policy"] != "":
		return fmt.Errorf("maxmemory-policy is %q, which evicts keys when memory runs short and would lose sessions the store acknowledged: "+
			"set it to noeviction (CONFIG SET maxmemory-policy noeviction, and in the server's configuration); until then the session store refuses the server", res["maxmemory-policy"])
	default:
		err = errors.New("no maxmemory-policy in the answer")
	}
	s.unchecked.Do(func() {
		s.log.Warn("Redis session store: the server's maxmemory-policy cannot be read, so the store cannot check that it never evicts session keys; "+
			"make sure it is noeviction, or sessions may silently lose acknowledged writes when the server runs short of memory", "error", err.Error())
	})
	return nil
}

// quiet drops the client library's own log lines (failed dials): every
// failure reaches the caller as an error, which the server logs and counts.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// Close closes the connections.
func (s *Store) Close() error { return s.c.Close() }

// keys are a session's keys, in the order the scripts take them.
func (s *Store) keys(id, agent string) []string {
	p := s.prefix + "s:" + id + ":"
	return []string{p + "meta", p + "items", p + "facts", p + "episodes", p + "arts", s.agentKey(agent)}
}

func (s *Store) agentKey(agent string) string { return s.prefix + "a:" + agent + ":sessions" }

// Script results.
const (
	resNotFound  = 0
	resForbidden = -1
	resConflict  = -2
)

// loadScript checks the owner, refreshes the TTL of every key, marks the
// session used in the agent's sorted set and returns
// {1, ver, fseq, items, facts (flat), episodes}, or {0} / {-1}.
var loadScript = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return {0} end
if owner ~= ARGV[1] then return {-1} end
local t = redis.call('TIME')
-- Best effort: a server past its maxmemory refuses ZADD, and a read must go on.
redis.pcall('ZADD', KEYS[6], t[1] * 1000 + math.floor(t[2] / 1000), ARGV[3])
for i = 1, 6 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
local m = redis.call('HMGET', KEYS[1], 'ver', 'fseq')
return {1, m[1], m[2] or '0', redis.call('LRANGE', KEYS[2], 0, -1), redis.call('HGETALL', KEYS[3]), redis.call('LRANGE', KEYS[4], 0, -1)}
`)

// appendScript writes a merged delta if the session is still at the version
// the caller read (ARGV[3], "" for none). ARGV: agent, ttl, expected ver,
// new ver, fseq, session id, then counted groups: items, fact pairs,
// episodes, artifact pairs. Returns 1, or -1 (another owner), -2 (conflict).
var appendScript = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then return -1 end
local ver = redis.call('HGET', KEYS[1], 'ver') or ''
if ver ~= ARGV[3] then return -2 end
if not owner then redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5]) end
local batch = ` + strconv.Itoa(pushBatch) + `
local i = 7
local function group(cmd, key, width)
  local n = tonumber(ARGV[i]) * width
  i = i + 1
  local j = i
  while j < i + n do
    local last = math.min(j + batch - 1, i + n - 1)
    redis.call(cmd, key, unpack(ARGV, j, last))
    j = last + 1
  end
  i = i + n
end
group('RPUSH', KEYS[2], 1)
group('HSET', KEYS[3], 2)
group('RPUSH', KEYS[4], 1)
local n = tonumber(ARGV[i])
for k = 1, n do redis.call('HSETNX', KEYS[5], ARGV[i + 2*k - 1], ARGV[i + 2*k]) end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'ver', ARGV[4], 'fseq', ARGV[5])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[6], now, ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', '(' .. (now - tonumber(ARGV[2])))
for k = 1, 6 do redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
return 1
`)

// deleteScript removes a session of its owner: 1, 0 or -1.
var deleteScript = redis.NewScript(`
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if owner ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[6], ARGV[2])
return 1
`)

// artifactScript looks a ref up in the agent's MaxArtifactScan most
// recently used sessions (most recent first) and returns the record of its
// item, or false. Sessions that expired or changed hands leave the set.
var artifactScript = redis.NewScript(`
local ids = redis.call('ZREVRANGE', KEYS[1], 0, ` + strconv.Itoa(MaxArtifactScan-1) + `)
for _, id in ipairs(ids) do
  local p = ARGV[1] .. 's:' .. id .. ':'
  if redis.call('HGET', p .. 'meta', 'owner') ~= ARGV[2] then
    redis.call('ZREM', KEYS[1], id)
  else
    local at = redis.call('HGET', p .. 'arts', ARGV[3])
    if at then return redis.call('LINDEX', p .. 'items', at) end
  end
end
return false
`)

// stored is a session as read, with what a write needs to follow it.
type stored struct {
	session.Session
	ver  string
	fseq int64
	// ord are the facts' ordinals, in the order of Facts.
	ord []int64
}

// Load returns the session, refreshing its idle TTL: one round trip.
func (s *Store) Load(ctx context.Context, id, agent string) (*session.Session, error) {
	st, err := s.load(ctx, id, agent)
	if err != nil {
		return nil, err
	}
	return &st.Session, nil
}

func (s *Store) load(ctx context.Context, id, agent string) (*stored, error) {
	res, err := loadScript.Run(ctx, s.c, s.keys(id, agent), agent, s.ttlMS, id).Slice()
	if err != nil {
		return nil, unavailable(err)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("redis session %q: empty reply", id)
	}
	switch code, _ := res[0].(int64); code {
	case resNotFound:
		return nil, session.ErrNotFound
	case resForbidden:
		return nil, session.ErrForbidden
	}
	if len(res) != 6 {
		return nil, fmt.Errorf("redis session %q: unexpected reply of %d values", id, len(res))
	}
	st := &stored{}
	st.ver, _ = res[1].(string)
	fseq, _ := res[2].(string)
	if st.fseq, err = strconv.ParseInt(fseq, 10, 64); err != nil {
		return nil, corrupt(id, "meta.fseq", err)
	}
	items, _ := res[3].([]any)
	st.Items = make([]session.Item, len(items))
	for i, v := range items {
		raw, _ := v.(string)
		if err := decodeItem(raw, &st.Items[i]); err != nil {
			return nil, corrupt(id, fmt.Sprintf("items[%d]", i), err)
		}
	}
	facts, _ := res[4].([]any)
	type ordFact struct {
		ord int64
		f   session.Fact
	}
	fs := make([]ordFact, 0, len(facts)/2)
	for i := 0; i+1 < len(facts); i += 2 {
		k, _ := facts[i].(string)
		v, _ := facts[i+1].(string)
		n, val, ok := strings.Cut(v, " ")
		ord, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			return nil, corrupt(id, "facts["+strconv.Quote(k)+"]", errors.New("no ordinal"))
		}
		fs = append(fs, ordFact{ord, session.Fact{Key: k, Value: val}})
	}
	slices.SortFunc(fs, func(a, b ordFact) int { return cmp.Compare(a.ord, b.ord) })
	st.Facts = make([]session.Fact, len(fs))
	st.ord = make([]int64, len(fs))
	for i, f := range fs {
		st.Facts[i], st.ord[i] = f.f, f.ord
	}
	eps, _ := res[5].([]any)
	st.Episodes = make([]session.Episode, len(eps))
	for i, v := range eps {
		raw, _ := v.(string)
		if err := json.Unmarshal([]byte(raw), &st.Episodes[i]); err != nil {
			return nil, corrupt(id, fmt.Sprintf("episodes[%d]", i), err)
		}
	}
	return st, nil
}

// Append merges d into the session (creating it) and writes the new entries
// if no other write came in between; otherwise it merges again.
func (s *Store) Append(ctx context.Context, id, agent string, d session.Delta) ([]string, error) {
	for attempt := range maxAttempts {
		if attempt > 0 {
			// Another writer won: step aside a little, more each time, so
			// two replicas do not collide again in lockstep.
			wait := time.Duration(attempt) * time.Duration(1+mrand.IntN(1000)) * time.Microsecond
			select {
			case <-ctx.Done():
				return nil, unavailable(ctx.Err())
			case <-time.After(wait):
			}
		}
		st, err := s.load(ctx, id, agent)
		switch {
		case errors.Is(err, session.ErrNotFound):
			st = &stored{}
		case err != nil:
			return nil, err
		}
		if _, err := session.Merge(&st.Session, d); err != nil {
			return nil, err
		}
		args, err := s.appendArgs(id, agent, st, d)
		if err != nil {
			return nil, err
		}
		code, err := appendScript.Run(ctx, s.c, s.keys(id, agent), args...).Int64()
		if err != nil {
			return nil, writeError(err)
		}
		switch code {
		case resForbidden:
			return nil, session.ErrForbidden
		case resConflict:
			continue
		}
		ids := make([]string, len(d.Items))
		for i, it := range d.Items {
			ids[i] = it.ID
		}
		return ids, nil
	}
	return nil, fmt.Errorf("%w: session %q: %d writes in a row lost a race with other writers", session.ErrUnavailable, id, maxAttempts)
}

// appendArgs encodes the script's arguments for writing d after st.
func (s *Store) appendArgs(id, agent string, st *stored, d session.Delta) ([]any, error) {
	var tok [12]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	args := make([]any, 0, 10+len(d.Items)+2*len(d.Facts)+len(d.Episodes)+2*len(d.Items))
	fseq := st.fseq
	// Facts keep the ordinal of the key they replace.
	ords := make(map[string]int64, len(st.Facts))
	for i, f := range st.Facts {
		ords[f.Key] = st.ord[i]
	}
	facts := make([]any, 0, 2*len(d.Facts))
	for _, f := range d.Facts {
		ord, ok := ords[f.Key]
		if !ok {
			fseq++
			ord = fseq
		}
		facts = append(facts, f.Key, strconv.FormatInt(ord, 10)+" "+f.Value)
	}
	args = append(args, agent, s.ttlMS, st.ver, hex.EncodeToString(tok[:]), strconv.FormatInt(fseq, 10), id)
	args = append(args, len(d.Items))
	var arts []any
	for i := range d.Items {
		it := &d.Items[i]
		args = append(args, encodeItem(it))
		if it.Kind == session.KindToolResult {
			arts = append(arts, session.ArtifactRef(it.Text), len(st.Items)+i)
		}
	}
	args = append(args, len(facts)/2)
	args = append(args, facts...)
	args = append(args, len(d.Episodes))
	for _, e := range d.Episodes {
		raw, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		args = append(args, string(raw))
	}
	args = append(args, len(arts)/2)
	return append(args, arts...), nil
}

// Delete removes the session and its artifacts.
func (s *Store) Delete(ctx context.Context, id, agent string) error {
	code, err := deleteScript.Run(ctx, s.c, s.keys(id, agent), agent, id).Int64()
	switch {
	case err != nil:
		return unavailable(err)
	case code == resNotFound:
		return session.ErrNotFound
	case code == resForbidden:
		return session.ErrForbidden
	}
	return nil
}

// Artifact returns the text of a tool_result of one of the agent's live
// sessions by its ref.
func (s *Store) Artifact(ctx context.Context, agent, ref string) (string, error) {
	if _, err := session.ParseArtifactRef(ref); err != nil {
		return "", err
	}
	raw, err := artifactScript.Run(ctx, s.c, []string{s.agentKey(agent)}, s.prefix, agent, ref).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return "", session.ErrNotFound
	case err != nil:
		return "", unavailable(err)
	}
	var it session.Item
	if err := decodeItem(raw, &it); err != nil || session.ArtifactRef(it.Text) != ref {
		return "", session.ErrNotFound
	}
	return it.Text, nil
}

// encodeItem writes an item in a compact binary form: its short fields as
// length-prefixed strings (uvarint lengths), then the text as is. Decoding
// copies a long tool result once instead of scanning and unquoting it, and
// reads no JSON: with JSON, decoding was three quarters of a Load.
func encodeItem(it *session.Item) string {
	n := len(it.ID) + len(it.Kind) + len(it.ParentID) + len(it.Sensitivity) + len(it.Text) + 8*binary.MaxVarintLen64
	for _, t := range it.Tags {
		n += len(t) + binary.MaxVarintLen64
	}
	for k, v := range it.Metadata {
		n += len(k) + len(v) + 2*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	str := func(s string) { b = append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	// An item without flags keeps the first format, which replicas of
	// earlier versions read during a rolling upgrade.
	format := byte(itemFormat)
	if it.Pinned {
		format = itemFormatFlags
	}
	b = append(b, format)
	str(it.ID)
	str(string(it.Kind))
	str(it.ParentID)
	str(string(it.Sensitivity))
	b = binary.AppendUvarint(b, uint64(it.TokenEstimate))
	if format == itemFormatFlags {
		b = binary.AppendUvarint(b, flagPinned)
	}
	b = binary.AppendUvarint(b, uint64(len(it.Tags)))
	for _, t := range it.Tags {
		str(t)
	}
	b = binary.AppendUvarint(b, uint64(len(it.Metadata)))
	for _, k := range slices.Sorted(maps.Keys(it.Metadata)) {
		str(k)
		str(it.Metadata[k])
	}
	return string(append(b, it.Text...))
}

// itemFormat is the first byte of an encoded item: a later format can
// read older items by it.
const itemFormat = 1

// itemFormatFlags is the first format and a uvarint of flags after the
// token estimate (flagPinned).
const (
	itemFormatFlags = 2
	flagPinned      = 1
)

var errShort = errors.New("truncated")

func decodeItem(raw string, it *session.Item) error {
	if raw == "" || raw[0] != itemFormat && raw[0] != itemFormatFlags {
		return errors.New("unknown format")
	}
	p := 1
	num := func() (uint64, error) {
		v, n := uvarint(raw[p:])
		if n <= 0 {
			return 0, errShort
		}
		p += n
		return v, nil
	}
	str := func() (string, error) {
		l, err := num()
		if err != nil || l > uint64(len(raw)-p) {
			return "", errShort
		}
		s := raw[p : p+int(l)]
		p += int(l)
		return s, nil
	}
	var err error
	var kind, sens string
	*it = session.Item{}
	for _, f := range []*string{&it.ID, &kind, &it.ParentID, &sens} {
		if *f, err = str(); err != nil {
			return err
		}
	}
	it.Kind, it.Sensitivity = session.Kind(kind), v1alpha1.Sensitivity(sens)
	est, err := num()
	if err != nil || est > session.MaxTokenEstimate {
		return errShort
	}
	it.TokenEstimate = int(est)
	if raw[0] == itemFormatFlags {
		flags, err := num()
		if err != nil || flags&^flagPinned != 0 {
			return errShort
		}
		it.Pinned = flags&flagPinned != 0
	}
	n, err := num()
	if err != nil || n > session.MaxTags {
		return errShort
	}
	if n > 0 {
		it.Tags = make([]string, n)
		for i := range it.Tags {
			if it.Tags[i], err = str(); err != nil {
				return err
			}
		}
	}
	if n, err = num(); err != nil || n > session.MaxMetadata {
		return errShort
	}
	if n > 0 {
		it.Metadata = make(map[string]string, n)
		for range n {
			k, err := str()
			if err != nil {
				return err
			}
			if it.Metadata[k], err = str(); err != nil {
				return err
			}
		}
	}
	it.Text = raw[p:]
	return nil
}

// uvarint is binary.Uvarint on a string, without copying it.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// writeError is a failed write: a server out of memory (maxmemory with
// noeviction) refuses a script before its first write, so nothing was
// written and the store is full; anything else is unavailable. The client
// types the server's OOM reply (redis.IsOOMError).
func writeError(err error) error {
	if redis.IsOOMError(err) {
		return &session.LimitError{Limit: "maxmemory", Kind: session.ErrStoreFull, Msg: "the Redis server is full (maxmemory): nothing was written"}
	}
	return unavailable(err)
}

// unavailable wraps a failure to talk to the server. A context the caller
// ended stays what it is.
func unavailable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: redis: %v", session.ErrUnavailable, err)
}

func corrupt(id, what string, err error) error {
	return fmt.Errorf("redis session %q: %s is corrupt: %v", id, what, err)
}
