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
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// Phase is the kind of LLM call a pack is built for.
type Phase string

const (
	PhaseRoute     Phase = "route"
	PhaseCall      Phase = "call"
	PhaseInterpret Phase = "interpret"
	PhaseAnswer    Phase = "answer"
)

// Phases lists the phases in pipeline order.
var Phases = []Phase{PhaseRoute, PhaseCall, PhaseInterpret, PhaseAnswer}

// defaultBudgets are the phase budgets in tokens, in the order of Phases.
var defaultBudgets = [...]int{2000, 3000, 4000, 6000}

// DefaultBudget is the default token budget of a phase (0 for an unknown
// phase); a router's spec.phases may change it (Policy).
func DefaultBudget(p Phase) int { return defaultPolicy.Budget(p) }

// ParsePhase checks a phase name.
func ParsePhase(s string) (Phase, error) {
	if slices.Contains(Phases, Phase(s)) {
		return Phase(s), nil
	}
	return "", fmt.Errorf("unknown phase %q: want route, call, interpret or answer", s)
}

// Defaults of Options.
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
var kindWeights = [...]priorityRow{
	//  user  agent  call  result  doc  fact  plan  policy  episode
	{1.0, 0.4, 0.3, 0.2, 0.2, 0.6, 0.9, 1.0, 0.5}, // route
	{0.9, 0.5, 0.8, 0.7, 0.6, 0.6, 1.0, 1.0, 0.3}, // call
	{0.8, 0.6, 0.9, 1.0, 0.7, 0.6, 0.8, 1.0, 0.3}, // interpret
	{1.0, 0.8, 0.5, 0.7, 0.9, 0.7, 0.6, 1.0, 0.5}, // answer
}

// Options of one pack.
type Options struct {
	Phase Phase
	// Query is what the call is about; items sharing its terms rank higher.
	Query string
	// Tags of the request; items carrying them rank higher.
	Tags []string
	// MaxTokens, when > 0, lowers the phase budget.
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
}

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
	Closure  bool   `json:"closure,omitempty"`
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

// Dropped counts candidates left out, by reason.
type Dropped struct {
	Budget      int `json:"budget"`
	MemoryCap   int `json:"memory_cap"`
	Sensitivity int `json:"sensitivity"`
	Duplicate   int `json:"duplicate"`
}

// Total is the sum of the reasons.
func (d Dropped) Total() int { return d.Budget + d.MemoryCap + d.Sensitivity + d.Duplicate }

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
)

// node is one candidate: an item, a fact, an episode or a knowledge chunk.
type node struct {
	id       string
	kind     string
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
}

// Build makes the pack of a session for one phase. It validates the session
// first; an invalid session is an *Error. Same input, same pack, byte for
// byte: ties are broken by id.
//
// The steps: settle the options (init); make the candidates, each
// under the agent's sensitivity floor, oversized tool results firewalled,
// rendered and scored (addFacts, addEpisodes, addItems, then
// dropLostChains for items whose parent chain lost an item to the floor,
// then addKnowledge); fill the budget by score (fill: near-duplicates,
// closures, the memory cap); count the outcomes and render (finish).
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
	b.fill()
	return b.finish(), nil
}

// packBuild is the scope of one Build.
type packBuild struct {
	s     *Session
	opts  Options
	phase Phase
	// limit is the token budget: the phase's, lowered by MaxTokens.
	limit    int
	est      budget.Estimator
	access   engine.Access
	maxChars int // the firewall bound
	pol      *Policy
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
}

// init checks the options and settles their defaults: the phase's budget
// under MaxTokens, the estimator, the access of an agent no permission
// names, the firewall bound, the phase's kind priorities.
func (b *packBuild) init(s *Session, opts Options) error {
	pi := slices.Index(Phases, opts.Phase)
	if pi < 0 {
		_, err := ParsePhase(string(opts.Phase))
		return err
	}
	if opts.MaxTokens < 0 || opts.MaxTokens > MaxBudget {
		return fmt.Errorf("max_tokens is %d; it must be between 0 and %d", opts.MaxTokens, MaxBudget)
	}
	pol := opts.Policy
	if pol == nil {
		pol = &defaultPolicy
	}
	*b = packBuild{s: s, opts: opts, phase: opts.Phase, limit: pol.budgets[pi], est: opts.Estimator,
		maxChars: opts.FirewallMaxChars, pol: pol, weights: &pol.weights[pi], dict: map[string]uint32{}, words: map[string]int32{}}
	if opts.MaxTokens > 0 {
		b.limit = min(b.limit, opts.MaxTokens)
	}
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
		n := node{id: "fact:" + f.Key, kind: "fact", section: secFacts, memory: true, parent: -1, artifact: -1}
		v := b.floor(&n, "", f.Value)
		n.line = "- " + f.Key + ": " + v + "\n"
		b.score(&n, f.Key+" "+v, 1, b.weights[weightMemoryFact], 0, nil, 0)
		b.nodes = append(b.nodes, n)
	}
}

// addEpisodes makes the episodes candidates: memory, the later the more recent.
func (b *packBuild) addEpisodes() {
	for i, e := range b.s.Episodes {
		n := node{id: "episode:" + e.ID, kind: "episode", section: secEpisodes, memory: true, parent: -1, artifact: -1}
		text := b.floor(&n, "", e.Text)
		n.line = "- " + text + "\n"
		b.score(&n, text, float64(i+1)/float64(len(b.s.Episodes)), b.weights[weightEpisode], 0, nil, 0)
		b.nodes = append(b.nodes, n)
	}
}

// addItems makes the items candidates, in order, linked to their parents;
// a tool result over the firewall bound (and shown) becomes its summary
// and an artifact.
func (b *packBuild) addItems() {
	items := b.s.Items
	b.firstItem = len(b.nodes)
	pos := make(map[string]int32, len(items))
	for i := range items {
		pos[items[i].ID] = int32(b.firstItem + i)
	}
	for i := range items {
		it := &items[i]
		n := node{id: it.ID, kind: string(it.Kind), parent: -1, artifact: -1}
		if it.ParentID != "" {
			n.parent = pos[it.ParentID]
		}
		text := b.floor(&n, it.Sensitivity, it.Text)
		if !n.redacted && n.outcome == pending && it.Kind == KindToolResult && longerThan(text, b.maxChars) {
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
		}
		n.section, n.line, n.memory = render(it.Kind, it.ID, text)
		b.score(&n, text, float64(i+1)/float64(len(items)), b.weights[slices.Index(Kinds, it.Kind)], it.TokenEstimate, it.Tags, 0)
		b.nodes = append(b.nodes, n)
	}
}

// dropLostChains drops an item whose parent chain lost an item to the
// floor: it cannot be shown without it. Parents may come after children,
// so each chain is followed once: a settled item's verdict holds for every
// child that reaches it.
func (b *packBuild) dropLostChains() {
	nodes := b.nodes
	settled := make([]bool, len(nodes))
	var chain []int32
	for i := b.firstItem; i < len(nodes); i++ {
		chain = chain[:0]
		p := int32(i)
		for p >= 0 && !settled[p] && nodes[p].outcome == pending {
			chain = append(chain, p)
			p = nodes[p].parent
		}
		lost := p >= 0 && nodes[p].outcome == dropSensitivity
		for _, j := range chain {
			settled[j] = true
			if lost {
				nodes[j].outcome = dropSensitivity
			}
		}
	}
}

// addKnowledge makes the query's chunks candidates, under the doc_snippet
// priority and their own relevance.
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
		n := node{id: id, kind: "chunk", section: secKnowledge, parent: -1, artifact: -1, line: "[" + head + "]\n" + c.Content + "\n"}
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
	return pack
}

// tally fills the stats from the outcomes, and counts the included
// entries of each section and the bytes of their lines.
func (b *packBuild) tally(st *Stats) (counts, size [numSections]int) {
	st.Candidates = len(b.nodes)
	st.Dedup.Threshold = DefaultDedupThreshold
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
		case dropMemory:
			st.Dropped.MemoryCap++
		case dropSensitivity:
			st.Dropped.Sensitivity++
		case dropDuplicate:
			st.Dropped.Duplicate++
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
		pi := PackItem{ID: n.id, Kind: n.kind, Section: sectionNames[sec], Tokens: n.tokens, Score: math.Round(n.score*1e4) / 1e4, Closure: n.closure, Redacted: n.redacted}
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

// score counts a node's tokens and scores it: the kind's weight for the
// phase times a mix of recency, relevance to the query (the share of query
// terms it holds; given for chunks), tag match and a constant, discounted by
// its share of the budget so one huge entry does not beat several useful ones.
func (b *packBuild) score(n *node, text string, recency, weight float64, tokenEstimate int, tags []string, relevance float64) {
	n.tokens = max(b.est.Count(n.line), tokenEstimate)
	if !n.redacted && n.outcome == pending {
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

// fill takes candidates by score (ties by id) into the budget. A candidate
// comes with its parent chain (the closure): all of it fits, or none. A
// near-duplicate of an included entry is dropped; memory entries share a
// cap. Section headings are paid for when a section opens.
func (b *packBuild) fill() {
	nodes := b.nodes
	b.memCap = int(float64(b.limit) * DefaultMemoryShare)
	var headings [numSections]int
	for i, h := range sectionHeadings {
		headings[i] = b.est.Count(h + "\n")
	}
	var open [numSections]bool
	remaining, memUsed := b.limit, 0
	dedup := index.NewNearDuplicates(DefaultDedupThreshold)
	var group []int32
	for _, i := range b.byScore() {
		n := &nodes[i]
		if n.outcome == included {
			continue // a dependent brought it in already
		}
		if !n.redacted && dedup.Duplicate(n.terms) {
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
		if mem > 0 && memUsed+mem > b.memCap {
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

// byScore is the pending candidates, best first; equal scores by id, then
// by position.
func (b *packBuild) byScore() []int32 {
	nodes := b.nodes
	order := make([]int32, 0, len(nodes))
	for i := range nodes {
		if nodes[i].outcome == pending {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, c := &nodes[x], &nodes[y]
		if a.score != c.score {
			if a.score > c.score {
				return -1
			}
			return 1
		}
		if d := strings.Compare(a.id, c.id); d != 0 {
			return d
		}
		return int(x - y)
	})
	return order
}
