package session

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/index"
	"github.com/contextrouter/contextrouter/internal/secrets"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Phase is the kind of LLM call a pack is built for.
type Phase string

const (
	PhaseRoute     Phase = "route"
	PhaseCall      Phase = "call"
	PhaseInterpret Phase = "interpret"
	PhaseAnswer    Phase = "answer"
	// PhaseHandoff is the pack another agent or a person takes the task
	// over with (api.md §11.2).
	PhaseHandoff Phase = "handoff"
)

// Phases lists the phases in pipeline order: v1alpha1.PhaseNames, whose
// default budgets are v1alpha1.DefaultPhaseBudgets (TestPhases).
var Phases = []Phase{PhaseRoute, PhaseCall, PhaseInterpret, PhaseAnswer, PhaseHandoff}

// numPhases is len(Phases), for the arrays indexed by phase.
const numPhases = 5

// DefaultBudget is the default token budget of a phase (0 for an unknown
// phase); a router's spec.phases may change it (Policy).
func DefaultBudget(p Phase) int { return defaultPolicy.Budget(p) }

// ParsePhase checks a phase name.
func ParsePhase(s string) (Phase, error) {
	if slices.Contains(Phases, Phase(s)) {
		return Phase(s), nil
	}
	return "", fmt.Errorf("unknown phase %q: want route, call, interpret, answer or handoff", s)
}

// Defaults of Options. DefaultDedupThreshold is
// v1alpha1.DefaultSessionDedupThreshold's value (TestPolicy).
const (
	DefaultMemoryShare    = 0.25
	DefaultDedupThreshold = 0.9
	// MaxBudget bounds max_tokens and every phase budget.
	MaxBudget = int(v1alpha1.MaxPhaseBudget)
)

// Sections, in render order.
const (
	SectionFacts       = "facts"
	SectionEpisodes    = "episodes"
	SectionHistory     = "history"
	SectionToolResults = "tool_results"
	SectionKnowledge   = "knowledge"
)

// section indexes the sections, in render order.
type section uint8

const (
	secFacts section = iota // facts, memory_fact, policy and plan_state items
	secEpisodes
	secHistory     // user turns and agent messages
	secToolResults // tool calls and results
	secKnowledge   // doc snippets and the query's chunks
	numSections
)

var sectionNames = [numSections]string{SectionFacts, SectionEpisodes, SectionHistory, SectionToolResults, SectionKnowledge}
var sectionHeadings = [numSections]string{"## Facts\n", "## Episodes\n", "## History\n", "## Tool results\n", "## Knowledge\n"}

// The columns of a kind priority row: the kinds in the order of Kinds
// (TestSessionEntryKinds holds them to it), then episodes.
const (
	weightUserTurn = iota
	weightAgentMessage
	weightToolCall
	weightToolResult
	weightDocSnippet
	weightMemoryFact
	weightPlanState
	weightPolicy
	weightEpisode
	numWeights
)

// priorityRow is a kind priority row.
type priorityRow = [numWeights]float64

// Kind priorities per phase (api.md §11.2), in the order of Phases: what a
// call of that phase needs most weighs most.
var kindWeights = [numPhases]priorityRow{
	//  user  agent  call  result  doc  fact  plan  policy  episode
	{1.0, 0.4, 0.3, 0.2, 0.2, 0.6, 0.9, 1.0, 0.5}, // route
	{0.9, 0.5, 0.8, 0.7, 0.6, 0.6, 1.0, 1.0, 0.3}, // call
	{0.8, 0.6, 0.9, 1.0, 0.7, 0.6, 0.8, 1.0, 0.3}, // interpret
	{1.0, 0.8, 0.5, 0.7, 0.9, 0.7, 0.6, 1.0, 0.5}, // answer
	{1.0, 0.7, 0.4, 0.6, 0.3, 0.9, 1.0, 1.0, 0.6}, // handoff
}

// Options of one pack.
type Options struct {
	Phase Phase
	// Query is what the call is about; items sharing its terms rank higher.
	Query string
	// Tags of the request; items carrying them rank higher.
	Tags []string
	// MaxTokens, when > 0, is the budget: below the phase's, or above it
	// up to the phase's ceiling (Policy.Limit).
	MaxTokens int
	// Access is the agent's merged permissions; its sensitivity floor
	// applies to items. Nil is an agent no permission names under
	// defaultAccess: Allow (up to Internal, Drop).
	Access *engine.Access
	// Estimator counts tokens (nil: CharsDiv4).
	Estimator budget.Estimator
	// Policy is the router's phase budgets, kind priorities and firewall
	// bound (nil: the defaults).
	Policy *Policy
	// FirewallMaxChars, when > 0, replaces the policy's firewall bound.
	FirewallMaxChars int
	// Knowledge are chunks of the query pipeline for Query, in its order.
	Knowledge []engine.Chunk
	// Explain lists the entries left out and why (Pack.DroppedItems).
	Explain bool
}

// Pack is the context for one call.
type Pack struct {
	Phase       Phase             `json:"phase"`
	Budget      int               `json:"budget"`
	TotalTokens int               `json:"total_tokens"`
	Text        string            `json:"text"`
	Sections    []Section         `json:"sections"`
	Items       []PackItem        `json:"items"`
	Chunks      []engine.Chunk    `json:"chunks"`
	Tools       []engine.ToolCard `json:"tools"`
	Artifacts   []Artifact        `json:"artifacts"`
	Stats       Stats             `json:"stats"`
	// DroppedItems, with Options.Explain, are the candidates left out, in
	// candidate order, at most MaxDroppedItems (then
	// DroppedItemsTruncated); nil (absent from the JSON) without it.
	DroppedItems          []DroppedItem `json:"dropped_items,omitzero"`
	DroppedItemsTruncated bool          `json:"dropped_items_truncated,omitempty"`
}

// DroppedItem is a candidate left out of a pack, and why: Reason is one of
// the reasons of Dropped (budget, policy, sensitivity, duplicate,
// memory_cap, closure); Tokens what it takes in the pack.
type DroppedItem struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	Tokens int    `json:"tokens"`
}

// MaxDroppedItems bounds Pack.DroppedItems.
const MaxDroppedItems = 1000

// Section is one rendered section of a pack; all five are always listed.
type Section struct {
	Name   string `json:"name"`
	Tokens int    `json:"tokens"`
	Items  int    `json:"items"`
	Text   string `json:"text"`
}

// PackItem is one included entry.
type PackItem struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Section string `json:"section"`
	Tokens  int    `json:"tokens"`
	// Score is the rank score (4 decimals); closure items keep their own.
	Score float64 `json:"score"`
	// Closure is set when a dependent item brought this one in.
	Closure bool `json:"closure,omitempty"`
	// Pinned: the task, an item written pinned or a handoff pin.
	Pinned   bool   `json:"pinned,omitempty"`
	Redacted bool   `json:"redacted,omitempty"`
	Artifact string `json:"artifact,omitempty"`
}

// Stats account for every candidate: Included + Dropped.Total() == Candidates.
type Stats struct {
	Candidates int     `json:"candidates"`
	Included   int     `json:"included"`
	Dropped    Dropped `json:"dropped"`
	Dedup      Dedup   `json:"dedup"`
	// Closures counts included entries a dependent brought in.
	Closures   int `json:"closures"`
	Redacted   int `json:"redacted"`
	Firewalled int `json:"firewalled"`
	// Firewall accounts for the included results the firewall summarised.
	Firewall FirewallStats `json:"firewall"`
	// PinnedDropped counts pinned entries that did not fit the budget
	// (counted in Dropped.Budget too).
	PinnedDropped int `json:"pinned_dropped"`
	// SecretsMasked counts the masks ([secret:RULE]) in the pack's text:
	// secrets masked when their entries were written (api.md §11.10).
	SecretsMasked int `json:"secrets_masked"`
	// MemoryCap is the token cap of facts, memory_fact items and episodes.
	MemoryCap     int            `json:"memory_cap"`
	SectionTokens map[string]int `json:"section_tokens"`
}

// FirewallStats: firewalled results included, the bytes of their texts and
// the tokens their summaries saved (api.md §11.5).
type FirewallStats struct {
	Artifacts   int `json:"artifacts"`
	Bytes       int `json:"bytes"`
	TokensSaved int `json:"tokens_saved"`
}

// Dropped counts candidates left out, by reason (api.md §11.3): Policy,
// of a kind the phase does not take or past its maxItemsPerKind; Closure,
// a parent chain that holds an entry left out by policy.
type Dropped struct {
	Budget      int `json:"budget"`
	MemoryCap   int `json:"memory_cap"`
	Sensitivity int `json:"sensitivity"`
	Duplicate   int `json:"duplicate"`
	Policy      int `json:"policy"`
	Closure     int `json:"closure"`
}

// Total is the sum of the reasons.
func (d Dropped) Total() int {
	return d.Budget + d.MemoryCap + d.Sensitivity + d.Duplicate + d.Policy + d.Closure
}

// Dedup reports near-duplicate removal.
type Dedup struct {
	Threshold float64 `json:"threshold"`
	Removed   int     `json:"removed"`
}

// outcome is what became of a candidate.
type outcome uint8

const (
	pending outcome = iota
	included
	dropBudget
	dropMemory
	dropSensitivity
	dropDuplicate
	dropPolicy
	dropClosure
)

// reasons name the outcomes of candidates left out, as Dropped's fields
// and DroppedItem.Reason say them.
var reasons = [...]string{dropBudget: "budget", dropMemory: "memory_cap", dropSensitivity: "sensitivity",
	dropDuplicate: "duplicate", dropPolicy: "policy", dropClosure: "closure"}

// node is one candidate: an item, a fact, an episode or a knowledge chunk.
type node struct {
	id   string
	kind string
	// ekind indexes the entry kinds of spec.phases.*.kinds (entryKind).
	ekind    entryKind
	section  section
	memory   bool // counts against the memory cap
	parent   int32
	line     string // rendered, ending in "\n"
	tokens   int
	score    float64
	terms    []uint32
	redacted bool
	artifact int32 // index into artifacts, or -1
	outcome  outcome
	closure  bool
	pinned   bool
}

// Build makes the pack of a session for one phase. It validates the session
// first; an invalid session is an *Error. Same input, same pack, byte for
// byte: ties are broken by id.
//
// The steps: settle the options (init); make the candidates, each left out
// when the phase does not take its kind, under the agent's sensitivity
// floor, oversized tool results firewalled, rendered and scored (addFacts,
// addEpisodes, addItems, then dropLostChains for items whose parent chain
// lost an item to the floor, then addKnowledge); apply the phase's
// per-kind limits (capKinds) and leave out what a chain left out by policy
// cannot show (dropClosures); fill the budget, pins first, then by score
// (fill: near-duplicates, closures, the memory cap); count the outcomes and
// render (finish), listing what was left out when asked to explain.
func Build(s *Session, opts Options) (*Pack, error) {
	if err := Validate(s); err != nil {
		return nil, err
	}
	var b packBuild
	if err := b.init(s, opts); err != nil {
		return nil, err
	}
	b.addFacts()
	b.addEpisodes()
	b.addItems()
	b.dropLostChains()
	b.addKnowledge()
	b.capKinds()
	b.dropClosures()
	b.fill()
	return b.finish(), nil
}

// packBuild is the scope of one Build.
type packBuild struct {
	s     *Session
	opts  Options
	phase Phase
	pol   *Policy
	pi    int // the phase's index in Phases
	// limit is the token budget: the phase's, or MaxTokens (Policy.Limit).
	limit    int
	est      budget.Estimator
	access   engine.Access
	maxChars int // the firewall bound
	weights  *priorityRow
	memCap   int

	nodes []node
	// firstItem is the node of the session's first item; the items follow
	// in order.
	firstItem int
	artifacts []Artifact

	dict map[string]uint32
	// words caches word → term id (-1: not a term), so a word repeated
	// across items is stemmed once per pack.
	words map[string]int32
	query []uint32 // sorted term ids of the query
	seen  []uint32 // per term id: the stamp of the last text that had it
	stamp uint32
	// relevanceByRef memoizes wholeRelevance by artifact ref.
	relevanceByRef map[string]float64
	// queryTerms are the query's terms by id (its ids are 0 to
	// len(query)-1).
	queryTerms []string
}

// init checks the options and settles their defaults: the budget
// (Policy.Limit), the estimator, the access of an agent no permission
// names, the firewall bound, the phase's kind priorities.
func (b *packBuild) init(s *Session, opts Options) error {
	pol := opts.Policy
	if pol == nil {
		pol = &defaultPolicy
	}
	limit, err := pol.Limit(opts.Phase, opts.MaxTokens)
	if err != nil {
		return err
	}
	pi := slices.Index(Phases, opts.Phase)
	*b = packBuild{s: s, opts: opts, phase: opts.Phase, pol: pol, pi: pi, limit: limit, est: opts.Estimator,
		maxChars: opts.FirewallMaxChars, weights: &pol.weights[pi], dict: map[string]uint32{}, words: map[string]int32{}}
	if b.est == nil {
		b.est, _ = budget.New("")
	}
	if opts.Access != nil {
		b.access = *opts.Access
	} else {
		b.access = engine.ResolveAccess(nil, "", v1alpha1.AccessAllow)
	}
	if b.maxChars <= 0 {
		b.maxChars = pol.firewallMaxChars
	}
	b.query = b.termIDs(opts.Query)
	b.queryTerms = make([]string, len(b.query))
	for t, id := range b.dict { // the query's terms only, so far
		b.queryTerms[id] = t
	}
	b.nodes = make([]node, 0, len(s.Facts)+len(s.Episodes)+len(s.Items)+len(opts.Knowledge))
	return nil
}

// floor applies the agent's clearance to an entry of sensitivity sens
// (facts and episodes are Internal): it drops the entry, or returns the
// placeholder for its text.
func (b *packBuild) floor(n *node, sens v1alpha1.Sensitivity, text string) string {
	if sens == "" {
		sens = v1alpha1.SensitivityInternal
	}
	switch b.access.Floor(sens) {
	case engine.FloorClear:
		return text
	case engine.FloorRedact:
		n.redacted = true
		return engine.RedactedContent("session", sens)
	}
	n.outcome = dropSensitivity
	return text
}

// addFacts makes the facts candidates: memory, under the memory_fact priority.
func (b *packBuild) addFacts() {
	for _, f := range b.s.Facts {
		n := node{id: "fact:" + f.Key, kind: "fact", ekind: kindFact, section: secFacts, memory: true, parent: -1, artifact: -1}
		if !b.admit(&n) {
			b.leftOut(&n, func() string { return "- " + f.Key + ": " + f.Value + "\n" }, 0)
			continue
		}
		v := b.floor(&n, "", f.Value)
		n.line = "- " + f.Key + ": " + v + "\n"
		b.score(&n, f.Key+" "+v, 1, b.weights[weightMemoryFact], 0, nil, 0)
		b.nodes = append(b.nodes, n)
	}
}

// addEpisodes makes the episodes candidates: memory, the later the more recent.
func (b *packBuild) addEpisodes() {
	for i, e := range b.s.Episodes {
		n := node{id: "episode:" + e.ID, kind: "episode", ekind: weightEpisode, section: secEpisodes, memory: true, parent: -1, artifact: -1}
		if !b.admit(&n) {
			b.leftOut(&n, func() string { return "- " + e.Text + "\n" }, 0)
			continue
		}
		text := b.floor(&n, "", e.Text)
		n.line = "- " + text + "\n"
		b.score(&n, text, float64(i+1)/float64(len(b.s.Episodes)), b.weights[weightEpisode], 0, nil, 0)
		b.nodes = append(b.nodes, n)
	}
}

// addItems makes the items candidates, in order, linked to their parents;
// a tool result over the firewall bound (and shown) becomes its summary
// and an artifact. The task, items written pinned and the handoff's pins
// are pinned (pinRule); in interpret and answer, evidence ranks as
// evidenceRule says.
func (b *packBuild) addItems() {
	items := b.s.Items
	b.firstItem = len(b.nodes)
	pos := make(map[string]int32, len(items))
	for i := range items {
		pos[items[i].ID] = int32(b.firstItem + i)
	}
	pins := newPinRule(items, b.phase == PhaseHandoff)
	ev := newEvidenceRule(items, b.phase)
	for i := range items {
		it := &items[i]
		ki := slices.Index(Kinds, it.Kind)
		n := node{id: it.ID, kind: string(it.Kind), ekind: entryKind(ki), parent: -1, artifact: -1}
		if it.ParentID != "" {
			n.parent = pos[it.ParentID]
		}
		recency := ev.recency(i, it.Kind)
		if !b.admit(&n) {
			b.leftOut(&n, func() string { _, line, _ := render(it.Kind, it.ID, it.Text); return line }, it.TokenEstimate)
			continue
		}
		text := b.floor(&n, it.Sensitivity, it.Text)
		relevance := 0.0
		if !n.redacted && n.outcome == pending && it.Kind == KindToolResult && longerThan(text, b.maxChars) {
			raw := text
			var keep []keepPath
			if len(b.pol.keep) > 0 {
				var parent *Item
				if n.parent >= 0 {
					parent = &items[int(n.parent)-b.firstItem]
				}
				keep = b.pol.keepFor(toolName(it, parent))
			}
			a := firewall(it.ID, text, b.maxChars, keep)
			text = a.Summary
			n.artifact = int32(len(b.artifacts))
			b.artifacts = append(b.artifacts, a)
			if ev.on {
				n.terms = b.termIDs(text)
				relevance = b.wholeRelevance(a.Ref, raw, n.terms)
			}
		}
		n.section, n.line, n.memory = render(it.Kind, it.ID, text)
		n.pinned = pins.pinned(i, it, n.artifact >= 0)
		b.score(&n, text, recency, b.weights[ki], it.TokenEstimate, it.Tags, relevance)
		b.nodes = append(b.nodes, n)
	}
}

// addKnowledge makes the query's chunks candidates, under the doc_snippet
// priority and their own relevance; the phase's kinds take them as
// doc_snippet.
func (b *packBuild) addKnowledge() {
	for _, c := range b.opts.Knowledge {
		id := "chunk:" + c.Source
		if c.Path != "" {
			id += ":" + c.Path
		}
		id += fmt.Sprintf("#%d", c.Metadata.Chunk)
		head := c.Title + " (" + c.Source
		if c.Path != "" {
			head += ":" + c.Path
		}
		head += ")"
		n := node{id: id, kind: "chunk", ekind: weightDocSnippet, section: secKnowledge, parent: -1, artifact: -1, line: "[" + head + "]\n" + c.Content + "\n"}
		if !b.admit(&n) {
			line := n.line
			b.leftOut(&n, func() string { return line }, 0)
			continue
		}
		b.score(&n, c.Title+"\n"+c.Content, 0.5, b.weights[weightDocSnippet], 0, nil, c.RelevanceScore)
		b.nodes = append(b.nodes, n)
	}
}

// finish counts every candidate's outcome and renders the included ones,
// section by section.
func (b *packBuild) finish() *Pack {
	pack := &Pack{Phase: b.phase, Budget: b.limit, Sections: []Section{}, Items: []PackItem{},
		Chunks: []engine.Chunk{}, Tools: []engine.ToolCard{}, Artifacts: []Artifact{}}
	counts, size := b.tally(&pack.Stats)
	pack.Items = make([]PackItem, 0, pack.Stats.Included)
	var text strings.Builder
	for sec := range numSections {
		t := b.renderSection(pack, sec, counts[sec], size[sec])
		tok := 0
		if t != "" {
			tok = b.est.Count(t)
		}
		text.WriteString(t)
		pack.Stats.SectionTokens[sectionNames[sec]] = tok
		pack.TotalTokens += tok
		pack.Sections = append(pack.Sections, Section{Name: sectionNames[sec], Tokens: tok, Items: counts[sec], Text: t})
	}
	pack.Text = text.String()
	pack.Stats.SecretsMasked = secrets.CountMasks(pack.Text)
	if b.opts.Explain {
		pack.DroppedItems, pack.DroppedItemsTruncated = b.droppedItems()
	}
	return pack
}

// tally fills the stats from the outcomes, and counts the included
// entries of each section and the bytes of their lines.
func (b *packBuild) tally(st *Stats) (counts, size [numSections]int) {
	st.Candidates = len(b.nodes)
	st.Dedup.Threshold = b.pol.dedupThreshold
	st.MemoryCap = b.memCap
	st.SectionTokens = map[string]int{}
	for _, name := range sectionNames {
		st.SectionTokens[name] = 0
	}
	for i := range b.nodes {
		n := &b.nodes[i]
		switch n.outcome {
		case included:
			st.Included++
			counts[n.section]++
			size[n.section] += len(n.line)
			if n.closure {
				st.Closures++
			}
			if n.redacted {
				st.Redacted++
			}
		case dropBudget:
			st.Dropped.Budget++
			if n.pinned {
				st.PinnedDropped++
			}
		case dropMemory:
			st.Dropped.MemoryCap++
		case dropSensitivity:
			st.Dropped.Sensitivity++
		case dropDuplicate:
			st.Dropped.Duplicate++
		case dropPolicy:
			st.Dropped.Policy++
		case dropClosure:
			st.Dropped.Closure++
		}
	}
	st.Dedup.Removed = st.Dropped.Duplicate
	return counts, size
}

// renderSection renders a section of count entries (size bytes of lines),
// "" when it has none, and lists its entries and their artifacts in pack.
func (b *packBuild) renderSection(pack *Pack, sec section, count, size int) string {
	if count == 0 {
		return ""
	}
	var sb strings.Builder
	sb.Grow(len(sectionHeadings[sec]) + size + 1)
	sb.WriteString(sectionHeadings[sec])
	for i := range b.nodes {
		n := &b.nodes[i]
		if n.outcome != included || n.section != sec {
			continue
		}
		sb.WriteString(n.line)
		pi := PackItem{ID: n.id, Kind: n.kind, Section: sectionNames[sec], Tokens: n.tokens, Score: math.Round(n.score*1e4) / 1e4, Closure: n.closure, Pinned: n.pinned, Redacted: n.redacted}
		if n.artifact >= 0 {
			a := b.artifacts[n.artifact]
			pi.Artifact = a.Ref
			pack.Artifacts = append(pack.Artifacts, a)
			pack.Stats.Firewalled++
			fw := &pack.Stats.Firewall
			fw.Artifacts++
			fw.Bytes += a.Bytes
			// The text and the rest of its line are counted apart: the
			// line would be a copy of the text.
			fw.TokensSaved += b.est.Count(b.s.Items[i-b.firstItem].Text) + b.est.Count("tool result "+n.id+": \n") - b.est.Count(n.line)
		}
		pack.Items = append(pack.Items, pi)
	}
	sb.WriteString("\n")
	return sb.String()
}

// render places an item in its section and writes its line.
func render(k Kind, id, text string) (sec section, line string, memory bool) {
	switch k {
	case KindMemoryFact:
		return secFacts, "- " + text + "\n", true
	case KindPolicy:
		return secFacts, "- policy: " + text + "\n", false
	case KindPlanState:
		return secFacts, "- plan: " + text + "\n", false
	case KindUserTurn:
		return secHistory, "user: " + text + "\n", false
	case KindAgentMessage:
		return secHistory, "assistant: " + text + "\n", false
	case KindToolCall:
		return secToolResults, "tool call " + id + ": " + text + "\n", false
	case KindToolResult:
		return secToolResults, "tool result " + id + ": " + text + "\n", false
	}
	return secKnowledge, "[" + id + "]\n" + text + "\n", false
}

// termIDs returns the sorted distinct term ids of s (ids in first-seen
// order across the pack: one global order, as NearDuplicates needs).
func (b *packBuild) termIDs(s string) []uint32 {
	b.stamp++
	var ids []uint32
	tokenize.EachWord(s, func(w []byte) {
		wid := b.termID(w)
		if wid < 0 {
			return
		}
		id := uint32(wid)
		if b.seen[id] != b.stamp {
			b.seen[id] = b.stamp
			ids = append(ids, id)
		}
	})
	slices.Sort(ids)
	return ids
}

// termID is the term id of a lower-cased word, -1 when it is not a term
// (cached per pack).
func (b *packBuild) termID(w []byte) int32 {
	wid, cached := b.words[string(w)]
	if !cached {
		wid = -1
		if t, ok := tokenize.Term(string(w)); ok {
			id, known := b.dict[t]
			if !known {
				id = uint32(len(b.dict))
				b.dict[t] = id
				b.seen = append(b.seen, 0)
			}
			wid = int32(id)
		}
		b.words[string(w)] = wid
	}
	return wid
}

// wholeRelevance is relevance of the text of artifact ref shown as the
// summary of term ids shown, computed once per pack for each content (an
// agent that polls a tool gets the same result again).
func (b *packBuild) wholeRelevance(ref, text string, shown []uint32) float64 {
	if r, ok := b.relevanceByRef[ref]; ok {
		return r
	}
	if b.relevanceByRef == nil {
		b.relevanceByRef = map[string]float64{}
	}
	r := b.relevance(text, shown)
	b.relevanceByRef[ref] = r
	return r
}

// relevance is the share of the query's terms that a text the pack does
// not show whole (a firewalled result) holds, in itself or in what the
// pack shows of it (the sorted term ids shown). The text is scanned only
// for the terms shown lacks, and only their words are built (a term starts
// with its word's first byte, TestTermFirstByte); it stops once every
// term is found. The query's terms are the pack's first ids (init).
func (b *packBuild) relevance(s string, shown []uint32) float64 {
	k := len(b.query)
	if k == 0 {
		return 0
	}
	b.stamp++
	found := 0
	for _, id := range shown {
		if int(id) >= k {
			break
		}
		b.seen[id] = b.stamp
		found++
	}
	if found == k {
		return 1
	}
	var first [256]bool
	for id, t := range b.queryTerms {
		if b.seen[id] != b.stamp {
			first[t[0]] = true
		}
	}
	tokenize.EachWordStarting(s, &first, func(w []byte) {
		if found == k {
			return
		}
		id := int32(-1)
		if verbatim(w) {
			// Its own term: looked up, not cached, so the numbers of a
			// long result cost no allocation.
			if v, ok := b.dict[string(w)]; ok {
				id = int32(v)
			}
		} else {
			id = b.termID(w)
		}
		if id >= 0 && int(id) < k && b.seen[id] != b.stamp {
			b.seen[id] = b.stamp
			found++
		}
	})
	return float64(found) / float64(k)
}

// verbatim reports whether a lower-cased word is its own term: it holds a
// byte outside a-z (a number, a mixed token), which tokenize.Term neither
// stems nor drops as a stopword (TestVerbatimTerms).
func verbatim(w []byte) bool {
	for _, c := range w {
		if c < 'a' || c > 'z' {
			return true
		}
	}
	return false
}

// score counts a node's tokens and scores it: the kind's weight for the
// phase times a mix of recency, relevance to the query (the share of query
// terms it holds; given for chunks), tag match and a constant, discounted by
// its share of the budget so one huge entry does not beat several useful ones.
func (b *packBuild) score(n *node, text string, recency, weight float64, tokenEstimate int, tags []string, relevance float64) {
	b.count(n, tokenEstimate)
	if !n.redacted && n.outcome == pending && n.terms == nil {
		n.terms = b.termIDs(text)
	}
	if len(b.query) > 0 && relevance == 0 {
		relevance = float64(index.Intersection(n.terms, b.query)) / float64(len(b.query))
	}
	tag := 0.0
	if want := b.opts.Tags; len(want) > 0 {
		hit := 0
		for _, t := range want {
			if slices.Contains(tags, t) {
				hit++
			}
		}
		tag = float64(hit) / float64(len(want))
	}
	cost := 1 - 0.5*min(1, float64(n.tokens)/float64(max(b.limit, 1)))
	n.score = weight * (0.1 + 0.35*recency + 0.4*relevance + 0.15*tag) * cost
}

// count sets a node's tokens: its rendered line, at least the caller's
// estimate.
func (b *packBuild) count(n *node, tokenEstimate int) {
	n.tokens = max(b.est.Count(n.line), tokenEstimate)
}

// fill takes the pinned candidates, then the others by score (ties by
// id), into the budget. A candidate comes with its parent chain (the
// closure): all of it fits, or none. A near-duplicate of an included entry
// is dropped; memory entries share a cap. Pins are exempt from both (their
// memory counts toward the cap). Section headings are paid for when a
// section opens.
func (b *packBuild) fill() {
	nodes := b.nodes
	b.memCap = int(float64(b.limit) * DefaultMemoryShare)
	var headings [numSections]int
	for i, h := range sectionHeadings {
		headings[i] = b.est.Count(h + "\n")
	}
	var open [numSections]bool
	remaining, memUsed := b.limit, 0
	dedup := index.NewNearDuplicates(b.pol.dedupThreshold)
	var group []int32
	for _, i := range b.byRank() {
		n := &nodes[i]
		if n.outcome == included {
			continue // a dependent brought it in already
		}
		if !n.pinned && !n.redacted && dedup.Duplicate(n.terms) {
			n.outcome = dropDuplicate
			continue
		}
		group = group[:0]
		cost, mem := 0, 0
		var opens [numSections]bool
		for j := i; j >= 0 && nodes[j].outcome != included; j = nodes[j].parent {
			m := &nodes[j]
			group = append(group, j)
			cost += m.tokens
			if m.memory {
				mem += m.tokens
			}
			if !open[m.section] && !opens[m.section] {
				opens[m.section] = true
				cost += headings[m.section]
			}
		}
		if !n.pinned && mem > 0 && memUsed+mem > b.memCap {
			n.outcome = dropMemory
			continue
		}
		if cost > remaining {
			n.outcome = dropBudget
			continue
		}
		remaining -= cost
		memUsed += mem
		for k, j := range group {
			m := &nodes[j]
			m.outcome = included
			m.closure = k > 0
			open[m.section] = true
			if !m.redacted {
				dedup.Add(m.terms)
			}
		}
	}
}

// byRank is the pending candidates in the order fill takes them.
func (b *packBuild) byRank() []int32 {
	order := make([]int32, 0, len(b.nodes))
	for i := range b.nodes {
		if b.nodes[i].outcome == pending {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, b.rank)
	return order
}

// rank orders candidates x and y: pinned ones first, in session order;
// then by score, best first; equal scores by id, then by position.
func (b *packBuild) rank(x, y int32) int {
	a, c := &b.nodes[x], &b.nodes[y]
	switch {
	case a.pinned != c.pinned:
		if a.pinned {
			return -1
		}
		return 1
	case a.pinned:
		return int(x - y)
	case a.score != c.score:
		if a.score > c.score {
			return -1
		}
		return 1
	}
	if d := strings.Compare(a.id, c.id); d != 0 {
		return d
	}
	return int(x - y)
}
