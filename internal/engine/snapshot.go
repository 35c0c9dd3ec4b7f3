package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/index"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/tools"
)

// Options are the surroundings of a compile.
type Options struct {
	// CacheDir holds git clones ("" = the user cache directory).
	CacheDir string
	// Secrets resolves secret references ("" = environment variables only).
	Secrets sources.SecretResolver
	// Getenv resolves ${VAR} in header values (nil = os.Getenv).
	Getenv func(string) string
	// HTTPClient for HTTPAPI sources.
	HTTPClient *http.Client
	// Logger for notes such as skipped files.
	Logger *slog.Logger
	// Open builds a source; nil = sources.New. The server uses it to keep git
	// clones across reloads.
	Open func(spec *v1alpha1.ContextSource, env sources.Env) (sources.Source, error)
	// IndexParams overrides the BM25 parameters (evaluation and tuning).
	IndexParams *index.Params
	// LoadConcurrency bounds parallel source loads (0 = 4).
	LoadConcurrency int
	// SkipLoad compiles everything (CEL, settings, source specs) but reads no
	// source: the operator and the webhook check configurations this way,
	// without the files and repositories only the router can reach.
	SkipLoad bool
	// Cache answers httpAPI sources before they are fetched (nil = no cache).
	// The server shares one across snapshots; see ResultCache.
	Cache ResultCache
	// Now is the clock chunk ages are measured with (nil = time.Now; api.md §4.7).
	Now func() time.Time
}

// SourceStatus describes one source of a snapshot.
type SourceStatus struct {
	Name   string              `json:"name"`
	Type   v1alpha1.SourceType `json:"type"`
	Chunks int                 `json:"chunks"`
	// Tools is the number of tools a tool source serves.
	Tools int `json:"tools,omitempty"`
	// ToolsDigest is the digest of a tool source's catalog as read, tools
	// held back included; Approval its spec's approval; Pending the tools it
	// holds back under Manual, by id (api.md §10.9).
	ToolsDigest string                `json:"tools_digest,omitempty"`
	Approval    v1alpha1.ToolApproval `json:"approval,omitempty"`
	Pending     []PendingTool         `json:"pending,omitempty"`
	// Error is why the source could not be loaded; the rest of the router still answers.
	Error  string `json:"error,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Skipped accounts for the files the source left out at load (too large,
	// binary, unreadable, …); nil when it left none out.
	Skipped *sources.Skips `json:"skipped,omitempty"`
	// NewestContent is the content time (ContentTime) of the source's newest
	// chunk, or of its newest fetched answer; zero when unknown.
	NewestContent time.Time `json:"newest_content,omitzero"`
	// MaxAge is spec.freshness.maxAge (0 = not set).
	MaxAge time.Duration `json:"-"`
}

// ContentAge is the age of the source's newest content at now in whole
// seconds, and whether even that is older than spec.freshness.maxAge; ok is
// false when the content time is unknown.
func (ss *SourceStatus) ContentAge(now time.Time) (ageSeconds int64, stale, ok bool) {
	if ss.NewestContent.IsZero() {
		return 0, false, false
	}
	ageSeconds, stale = Staleness(ss.NewestContent, now, ss.MaxAge)
	return ageSeconds, stale && ss.MaxAge > 0, true
}

type route struct {
	name    string
	cond    *condition // nil: the route always applies (pinned context)
	sources []string
	// The gates (api.md §1.2): fallback routes are considered only when no
	// other route matched by its condition (fallbacksServe); timeout caps
	// the route's fetches (0 = none); alternate is the index of the route
	// whose sources answer when all of this one's that can fail failed
	// (routeFailed; -1 = none).
	fallback  bool
	timeout   time.Duration
	alternate int
}

type sourceState struct {
	name        string
	typ         v1alpha1.SourceType
	group       uint16
	priority    int32
	sensitivity v1alpha1.Sensitivity
	src         sources.Source
	query       sources.QuerySource
	tool        sources.ToolSource
	// tools are the index entries of a tool source's catalog; review what
	// its approval made of the catalog.
	tools    toolEntries
	review   toolReview
	timeout  time.Duration
	cacheKey string // SourceFingerprint of a query source ("" = not cached)
	loadErr  error
	// stale: loadErr is a *sources.StaleError and the source serves the chunks it last read.
	stale bool
	// fixed: the source cannot fail for a query (sourceCanFail), so it never keeps an alternate from serving.
	fixed  bool
	always []uint32 // inline chunks: candidates for every query that reaches the source
	first  uint32   // its first doc: a source's docs are contiguous, chunks of them
	chunks int
	commit string
	// skipped: the files the source left out at load; nil if none.
	skipped *sources.Skips
	// fresh is spec.freshness and the newest content time.
	fresh freshness
}

type docInfo struct {
	chunk  sources.Chunk
	tokens int
}

// Snapshot is an immutable compiled router. It is safe for concurrent queries.
type Snapshot struct {
	routerName    string
	routerSpec    *v1alpha1.ContextRouterSpec
	defaultAccess v1alpha1.AccessPolicy
	maxTokens     int
	reserveTokens int
	truncation    v1alpha1.TruncationMode
	strategy      v1alpha1.RankingStrategy
	scorer        v1alpha1.Scorer
	onNoMatch     v1alpha1.NoMatchPolicy
	dedup         float64
	est           budget.Estimator
	vars          ref.Val
	// wordsOnText is set when a condition calls containsAnyWord/containsAllWords.
	wordsOnText bool
	// Whether any route uses a gate: a query pays for a gate only when one is configured.
	hasFallback, hasTimeouts, hasAlternates bool
	// hasFreshness: some source sets spec.freshness, so a query reads the clock.
	hasFreshness bool
	now          func() time.Time

	routes  []route
	perms   []v1alpha1.AgentPermission
	sources map[string]*sourceState
	byGroup []*sourceState
	ix      *index.Index
	docs    []docInfo
	cache   ResultCache
	// dense is the embedding and rerank setup (dense.go); nil without either.
	dense *denseState

	// The tools of every tool source, in source then id order, in one index.
	tools       toolSettings
	toolEntries []tools.Entry
	toolIx      *tools.Index
	toolUsable  sync.Map // agent -> []bool, bounded by nToolUsable
	nToolUsable atomic.Int64
	// learned caches each agent's overlay of learned outcomes with the
	// store version it was built at (learning.go), bounded by nLearned.
	learned  sync.Map
	nLearned atomic.Int64

	// Detection (detect.go): classifiers sorted by name, the extractors of
	// all of them, and what the route conditions read.
	classifiers     []*classifierState
	classifierIndex map[string]int
	extractors      []extractor
	extractorsOf    map[string]int
	detectWant      []bool // classifiers some condition names
	entitiesUsed    bool   // some condition reads entities
	detectUsed      bool   // some condition reads detected or entities
	warnings        problem.List

	hash    string
	built   time.Time
	access  sync.Map // agent -> *Access, bounded by nAccess
	nAccess atomic.Int64
}

// Hash identifies the configuration and the content a snapshot was built from.
func (s *Snapshot) Hash() string { return s.hash }

// Router is the name of the compiled router.
func (s *Snapshot) Router() string { return s.routerName }

// RouterSpec is the router's defaulted spec, for settings other packages
// read (sessions, phases). Callers must not change it.
func (s *Snapshot) RouterSpec() *v1alpha1.ContextRouterSpec { return s.routerSpec }

// Estimator is the router's token estimator (spec.budget).
func (s *Snapshot) Estimator() budget.Estimator { return s.est }

// BuiltAt is when the snapshot was compiled.
func (s *Snapshot) BuiltAt() time.Time { return s.built }

// Chunks is the number of indexed static chunks.
func (s *Snapshot) Chunks() int { return len(s.docs) }

// Routes lists the route names in evaluation order.
func (s *Snapshot) Routes() []string {
	out := make([]string, len(s.routes))
	for i, r := range s.routes {
		out[i] = r.name
	}
	return out
}

// Sources describes every source, sorted by name.
func (s *Snapshot) Sources() []SourceStatus {
	out := make([]SourceStatus, 0, len(s.byGroup))
	for _, st := range s.byGroup {
		ss := SourceStatus{Name: st.name, Type: st.typ, Chunks: st.chunks, Tools: st.tools.hi - st.tools.lo, Commit: st.commit, Skipped: st.skipped,
			NewestContent: st.fresh.newestTime(), MaxAge: st.fresh.maxAge}
		if st.loadErr != nil {
			ss.Error = st.loadErr.Error()
		}
		if st.isToolSource() {
			ss.ToolsDigest, ss.Approval, ss.Pending = st.review.digest, st.review.approval, st.review.pending
		}
		out = append(out, ss)
	}
	return out
}

// Source returns a built source by name (for syncing git sources), or nil.
func (s *Snapshot) Source(name string) sources.Source {
	if st := s.sources[name]; st != nil {
		return st.src
	}
	return nil
}

// Compile builds a snapshot. Configuration problems (CEL, references, what
// this engine cannot serve) fail the compile with a problem.List holding all
// of them; a source that cannot be read (missing folder, unreachable
// repository) does not: it is reported in Sources() and in every response
// that reaches it.
//
// Compile trusts its input to be valid (Validate, which every loader runs):
// it defaults copies of the objects (Default is idempotent, and a hand-built
// Config need not be defaulted) but does not check the API's rules again. A
// value that would make it fail rather than misbehave is still an error.
//
// It is a short driver over its steps, which pass the compile along in a
// compileScope: settings, routes, permissions, sources and classifiers are
// compiled (every problem collected); then the static sources are loaded,
// indexed, embedded, and the tool catalogs indexed, all hashed.
func Compile(ctx context.Context, cfg *Config, opts Options) (*Snapshot, error) {
	c := newCompileScope(cfg, opts)
	c.compileRoutes()
	c.gateWarnings()
	c.compilePermissions()
	c.openSources()
	c.fileHashes = c.s.compileDetection(ctx, cfg, opts, c.known, c.sourceEnv, c.addReason)
	c.checkToolFallbacks()
	if len(c.problems) > 0 {
		return nil, c.problems
	}
	c.load(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.indexChunks()
	c.embedChunks(ctx)
	c.s.indexTools(c.catalogs, c.hash, !c.opts.SkipLoad)
	c.s.hash = "sha256:" + hex.EncodeToString(c.hash.Sum(nil))
	return c.s, nil
}

// compileScope carries one Compile from step to step.
type compileScope struct {
	cfg  *Config
	opts Options
	// r is a defaulted copy of the router; s the snapshot being built.
	r      *v1alpha1.ContextRouter
	s      *Snapshot
	logger *slog.Logger
	// known are the configuration's sources by name.
	known    map[string]*v1alpha1.ContextSource
	problems problem.List
	// fileHashes are the digests of the files the classifiers read.
	fileHashes [][]byte
	// loaded and catalogs are the static sources' chunks and the tool
	// sources' catalogs, by source group.
	loaded   [][]sources.Chunk
	catalogs [][]v1alpha1.Tool
	// hash digests the configuration and the content: the snapshot's Hash.
	hash hash.Hash
}

// maxSources is the most sources a router compiles: source groups are uint16.
const maxSources = 1<<16 - 1

func newCompileScope(cfg *Config, opts Options) *compileScope {
	r := cfg.Router.DeepCopy()
	r.Default()
	c := &compileScope{cfg: cfg, opts: opts, r: r, logger: opts.Logger, known: map[string]*v1alpha1.ContextSource{}}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.s = &Snapshot{
		routerName: r.Name,
		routerSpec: &r.Spec,
		sources:    map[string]*sourceState{},
		built:      time.Now(),
		cache:      opts.Cache,
		now:        opts.Now,
	}
	if c.s.now == nil {
		c.s.now = time.Now
	}
	c.s.setRouter(r, func(field, msg string) { c.add(v1alpha1.KindContextRouter, r.Name, field, msg) })
	for i := range cfg.Sources {
		c.known[cfg.Sources[i].Name] = &cfg.Sources[i]
	}
	return c
}

// addReason records a problem of an object with a condition reason.
func (c *compileScope) addReason(reason v1alpha1.ConditionReason, kind, name, field, msg string) {
	c.problems = append(c.problems, problem.Problem{Location: c.cfg.Origin(kind, name), Kind: kind, Name: name,
		Field: field, Message: problem.OneLine(msg), Reason: reason})
}

// add records an invalid field of an object.
func (c *compileScope) add(kind, name, field, msg string) {
	c.addReason(v1alpha1.ReasonInvalidSpec, kind, name, field, msg)
}

// compileRoutes compiles the route conditions and resolves the routes'
// sources and gates.
func (c *compileScope) compileRoutes() {
	routes, s := c.cfg.Routes, c.s
	conds, errs := compileConditions(routes)
	for i, rt := range routes {
		if errs[i] != nil {
			c.addReason(v1alpha1.ReasonInvalidCondition, v1alpha1.KindContextRoute, rt.Name, "spec.when", errs[i].Error())
		}
		cr := route{name: rt.Name, cond: conds[i], fallback: rt.Spec.Fallback, alternate: -1}
		if rt.Spec.Timeout != nil {
			cr.timeout = rt.Spec.Timeout.Duration
		}
		if conds[i] != nil && conds[i].words {
			s.wordsOnText = true
		}
		for j, ref := range rt.Spec.Sources {
			if c.known[ref.Name] == nil {
				c.addReason(v1alpha1.ReasonSourceNotFound, v1alpha1.KindContextRoute, rt.Name, fmt.Sprintf("spec.sources[%d].name", j), fmt.Sprintf("ContextSource %q not found", ref.Name))
				continue
			}
			cr.sources = append(cr.sources, ref.Name)
		}
		s.routes = append(s.routes, cr)
	}
	s.setGates(routes, c.addReason)
}

// compileConditions compiles the routes' conditions in parallel: with a
// thousand routes, CEL dominates the compile.
func compileConditions(routes []v1alpha1.ContextRoute) ([]*condition, []error) {
	conds := make([]*condition, len(routes))
	errs := make([]error, len(routes))
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(routes)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(routes); i = int(next.Add(1) - 1) {
				conds[i], errs[i] = compileCached(routes[i].Spec.When)
			}
		}()
	}
	wg.Wait()
	return conds, errs
}

// compilePermissions takes defaulted copies of the permissions. Validate
// refuses a glob doublestar cannot parse first; such a glob would deny
// nothing, so a hand-built config fails here rather than open.
func (c *compileScope) compilePermissions() {
	for _, p := range c.cfg.Permissions {
		p := p.DeepCopy()
		p.Default()
		for i, g := range p.Spec.DenyPaths {
			if !doublestar.ValidatePattern(g) {
				c.add(v1alpha1.KindAgentPermission, p.Name, fmt.Sprintf("spec.denyPaths[%d]", i), fmt.Sprintf("invalid glob %q", g))
			}
		}
		for _, l := range []struct {
			field string
			globs []string
		}{{"allow", p.Spec.Tools.Allow}, {"deny", p.Spec.Tools.Deny}} {
			for i, g := range l.globs {
				if !doublestar.ValidatePattern(ToolGlob(g)) {
					c.add(v1alpha1.KindAgentPermission, p.Name, fmt.Sprintf("spec.tools.%s[%d]", l.field, i), fmt.Sprintf("invalid glob %q", g))
				}
			}
		}
		c.s.perms = append(c.s.perms, *p)
	}
}

// sourceEnv is what a source (or a classifier's source) named name is built with.
func (c *compileScope) sourceEnv(name string) sources.Env {
	o := &c.opts
	return sources.Env{BaseDir: c.cfg.BaseDirs[name], CacheDir: o.CacheDir, Secrets: o.Secrets, Getenv: o.Getenv,
		HTTPClient: o.HTTPClient, Logger: c.logger.With("source", name), CountTokens: c.s.est.Count}
}

// openSources builds every source, in name order (a spec error is a
// problem), and records what kind of source each is.
func (c *compileScope) openSources() {
	s := c.s
	names := make([]string, 0, len(c.known))
	for name := range c.known {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > maxSources {
		c.add(v1alpha1.KindContextRouter, c.r.Name, "", fmt.Sprintf("too many sources (%d); the limit is %d", len(names), maxSources))
		names = names[:maxSources]
	}
	open := c.opts.Open
	if open == nil {
		open = sources.New
	}
	for i, name := range names {
		spec := c.known[name]
		st := &sourceState{
			name: name, typ: spec.Spec.Type, group: uint16(i),
			priority: spec.Spec.Priority, sensitivity: spec.Spec.Sensitivity, fixed: !sourceCanFail(&spec.Spec),
		}
		st.fresh.set(spec.Spec.Freshness)
		st.review = toolReview{approval: spec.Spec.ToolApprovalMode(), approved: spec.ApprovedTools()}
		s.hasFreshness = s.hasFreshness || st.fresh.maxAge > 0
		src, err := open(spec, c.sourceEnv(name))
		if err != nil {
			// Source errors reach status, logs and every caller: no URL user part.
			st.loadErr = redact.Error(err)
			path, msg := SplitFieldError(st.loadErr.Error())
			c.add(v1alpha1.KindContextSource, name, path, msg)
		}
		st.src = src
		if t, ok := src.(sources.ToolSource); ok {
			st.tool = t
		}
		if q, ok := src.(sources.QuerySource); ok {
			st.query = q
			st.timeout = 5 * time.Second
			if t, ok := src.(interface{ Timeout() time.Duration }); ok {
				st.timeout = t.Timeout()
			}
			if c.opts.Cache != nil {
				st.cacheKey = SourceFingerprint(spec)
			}
		}
		s.sources[name] = st
		s.byGroup = append(s.byGroup, st)
	}
}

// checkToolFallbacks checks that spec.tools.fallback names tool sources.
func (c *compileScope) checkToolFallbacks() {
	kind, name := v1alpha1.KindContextRouter, c.r.Name
	for i, ref := range c.r.Spec.Tools.Fallback {
		field := fmt.Sprintf("spec.tools.fallback[%d].source", i)
		switch st := c.s.sources[ref.Source]; {
		case st == nil:
			c.addReason(v1alpha1.ReasonSourceNotFound, kind, name, field, fmt.Sprintf("ContextSource %q not found", ref.Source))
		case st.src != nil && !st.isToolSource():
			c.add(kind, name, field, fmt.Sprintf("ContextSource %q is of type %s, not a tool source (Tools or MCP)", ref.Source, st.typ))
		}
	}
}

// load reads the static and tool sources (none under SkipLoad).
func (c *compileScope) load(ctx context.Context) {
	if c.opts.SkipLoad {
		c.loaded = make([][]sources.Chunk, len(c.s.byGroup))
		c.catalogs = make([][]v1alpha1.Tool, len(c.s.byGroup))
		return
	}
	c.loaded, c.catalogs = c.s.loadStatic(ctx, c.opts.LoadConcurrency)
}

// indexChunks indexes the loaded chunks, source by source, and starts the
// hash with the configuration, the classifiers' files and every chunk.
func (c *compileScope) indexChunks() {
	s := c.s
	params := index.DefaultParams
	if c.opts.IndexParams != nil {
		params = *c.opts.IndexParams
	}
	b := index.NewBuilder(params, s.scorer == v1alpha1.ScorerKeyword)
	h := sha256.New()
	cfg := c.cfg
	cfgJSON, _ := json.Marshal(struct {
		Router      v1alpha1.ContextRouterSpec
		Routes      []v1alpha1.ContextRoute
		Sources     []v1alpha1.ContextSource
		Permissions []v1alpha1.AgentPermission
		Classifiers []v1alpha1.ContextClassifier
	}{c.r.Spec, cfg.Routes, cfg.Sources, cfg.Permissions, cfg.Classifiers})
	h.Write(cfgJSON)
	for _, fh := range c.fileHashes {
		h.Write(fh)
	}
	for _, st := range s.byGroup {
		st.first = uint32(len(s.docs))
		for _, ch := range c.loaded[st.group] {
			doc := b.Add(st.group, ch.Title, ch.Content)
			s.docs = append(s.docs, docInfo{chunk: ch, tokens: s.est.Count(ch.Content)})
			if st.typ == v1alpha1.SourceInline {
				st.always = append(st.always, doc)
			}
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%s\x00", ch.Source, ch.Path, ch.Title, ch.Index, ch.Commit)
			h.Write([]byte(ch.Content))
			st.fresh.observe(ch.ModTime)
		}
		if st.loadErr != nil {
			// A source failing, or serving stale content, is a state callers see: a snapshot
			// that differs only there must still replace the serving one.
			fmt.Fprintf(h, "%s\x00error\x00%s\x00", st.name, st.loadErr)
		}
		st.chunks = len(c.loaded[st.group])
		if st.chunks > 0 {
			st.commit = c.loaded[st.group][0].Commit
		}
	}
	s.ix = b.Build()
	c.hash = h
}

// embedChunks computes the chunk vectors (not under SkipLoad) and hashes
// the keys in use and an embedding failure.
func (c *compileScope) embedChunks(ctx context.Context) {
	if c.opts.SkipLoad {
		return
	}
	s := c.s
	s.compileDense(ctx, c.r, c.opts, c.logger, c.cfg.Origin(v1alpha1.KindContextRouter, c.r.Name))
	if d := s.dense; d != nil {
		c.hash.Write(d.keys[:])
		if d.err != nil {
			fmt.Fprintf(c.hash, "embedding\x00error\x00%s\x00", d.err)
		}
	}
}

// setRouter takes the settings of a defaulted router and reports, through
// add, what this engine cannot serve: variables past the bounds the
// condition cost check assumes. The
// rest is Validate's; an estimator or threshold that cannot be used at all
// (only a hand-built router has one) is reported too.
func (s *Snapshot) setRouter(r *v1alpha1.ContextRouter, add func(field, msg string)) {
	rs := &r.Spec
	s.defaultAccess = rs.DefaultAccess
	s.maxTokens = int(rs.Budget.MaxTokens)
	s.reserveTokens = int(rs.Budget.ReserveTokens)
	s.truncation = rs.Budget.Truncation
	s.strategy = rs.Ranking.Strategy
	s.scorer = rs.Ranking.Scorer
	s.onNoMatch = rs.Ranking.OnNoMatch
	est, err := budget.New(rs.Budget.Estimator)
	if err != nil {
		add("spec.budget.estimator", err.Error())
		est, _ = budget.New("")
	}
	s.est = est
	s.setDense(&rs.Ranking, add)
	if s.dedup, err = strconv.ParseFloat(rs.Ranking.DedupThreshold, 64); err != nil {
		add("spec.ranking.dedupThreshold", fmt.Sprintf("%q is not a number", rs.Ranking.DedupThreshold))
	}
	vars := map[string]any{}
	if n := len(rs.Variables); n > MaxVarsSize {
		add("spec.variables", fmt.Sprintf("%d variables; at most %d are allowed (the condition cost check assumes it)", n, MaxVarsSize))
	}
	for _, k := range sortedKeys(rs.Variables) {
		var v any
		if err := json.Unmarshal(rs.Variables[k].Raw, &v); err != nil {
			add("spec.variables."+k, "invalid JSON: "+err.Error())
			continue
		}
		if path, msg := varsTooLarge("spec.variables."+k, v); msg != "" {
			add(path, msg)
			continue
		}
		vars[k] = v
	}
	s.vars = types.DefaultTypeAdapter.NativeToValue(vars)

	ts := &rs.Tools
	s.tools = toolSettings{topK: int(ts.TopK), fallback: ts.Fallback, expansion: ts.Expansion, adaptive: ts.Adaptive.Enabled,
		learning: cmp.Or(ts.Learning.Scope, v1alpha1.ToolLearningAgent)}
	s.tools.cut.Utility = ts.Adaptive.Rule.Utility()
	if s.tools.topK <= 0 {
		add("spec.tools.topK", "must be at least 1")
	}
	if s.tools.minScore, err = strconv.ParseFloat(ts.MinScore, 64); err != nil {
		add("spec.tools.minScore", fmt.Sprintf("%q is not a number", ts.MinScore))
	}
	for _, d := range []struct {
		path, value string
		to          *float64
	}{
		{"spec.tools.minConfidence", ts.MinConfidence, &s.tools.minConfidence},
		{"spec.tools.collapseThreshold", ts.CollapseThreshold, &s.tools.collapse},
		{"spec.tools.adaptive.recallWeight", ts.Adaptive.RecallWeight, &s.tools.cut.RecallWeight},
		{"spec.tools.adaptive.relativeCut", ts.Adaptive.RelativeCut, &s.tools.cut.RelativeCut},
	} {
		if *d.to, err = strconv.ParseFloat(d.value, 64); err != nil {
			add(d.path, fmt.Sprintf("%q is not a number", d.value))
		}
	}
}

// indexTools puts the catalogs of the tool sources into one index, in source
// (name) then id order, and adds them to the snapshot's hash; under approval
// Manual only the approved tools. A source whose tools would take the index
// past tools.MaxTools fails. loaded: the sources were read (not SkipLoad).
func (s *Snapshot) indexTools(catalogs [][]v1alpha1.Tool, h io.Writer, loaded bool) {
	for _, st := range s.byGroup {
		catalog := catalogs[st.group]
		if !st.isToolSource() {
			continue
		}
		if loaded && toolsServing(st) {
			catalog = st.review.review(catalog, h)
		}
		if n := len(s.toolEntries) + len(catalog); n > tools.MaxTools {
			st.loadErr = fmt.Errorf("the tool sources of router %s hold more than %d tools; this source's %d are left out", s.routerName, tools.MaxTools, len(catalog))
			st.stale = false
			fmt.Fprintf(h, "%s\x00error\x00%s\x00", st.name, st.loadErr)
			continue
		}
		st.tools.lo = len(s.toolEntries)
		for _, t := range catalog {
			s.toolEntries = append(s.toolEntries, tools.Entry{Source: st.name, Tool: t})
			b, _ := json.Marshal(&t)
			fmt.Fprintf(h, "%s\x00tool\x00", st.name)
			h.Write(b)
		}
		st.tools.hi = len(s.toolEntries)
	}
	if len(s.toolEntries) > 0 {
		s.toolIx = tools.NewIndex(s.toolEntries, tools.Options{
			NoExpansion: s.tools.expansion == v1alpha1.ToolExpansionNone,
			Collapse:    s.tools.collapse,
		})
	}
}

// loadStatic loads every static and tool source concurrently; failures are
// recorded on the source.
func (s *Snapshot) loadStatic(ctx context.Context, limit int) ([][]sources.Chunk, [][]v1alpha1.Tool) {
	if limit <= 0 {
		limit = 4
	}
	out := make([][]sources.Chunk, len(s.byGroup))
	catalogs := make([][]v1alpha1.Tool, len(s.byGroup))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, st := range s.byGroup {
		static, ok := st.src.(sources.StaticSource)
		if (!ok && st.tool == nil) || st.loadErr != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// failed records err and reports whether the source has nothing to serve.
			failed := func(err error) bool {
				if err == nil {
					return false
				}
				st.loadErr = redact.Error(err)
				var stale *sources.StaleError
				st.stale = errors.As(err, &stale)
				return !st.stale
			}
			if st.tool != nil {
				catalog, err := st.tool.LoadTools(ctx)
				if !failed(err) {
					catalogs[st.group] = catalog
				}
				return
			}
			chunks, err := static.Load(ctx)
			if failed(err) {
				return
			}
			for i := range chunks {
				chunks[i].Source = st.name
			}
			out[st.group] = chunks
			if sr, ok := st.src.(sources.SkipReporter); ok {
				if k := sr.Skipped(); k.Files > 0 {
					st.skipped = &k
				}
			}
		}()
	}
	wg.Wait()
	return out, catalogs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
