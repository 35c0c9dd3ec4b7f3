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

var sectionNames = [...]string{SectionFacts, SectionEpisodes, SectionHistory, SectionToolResults, SectionKnowledge}
var sectionHeadings = [...]string{"## Facts\n", "## Episodes\n", "## History\n", "## Tool results\n", "## Knowledge\n"}

// Kind priorities per phase (api.md §11.2), in the order of Kinds, then
// episodes: what a call of that phase needs most weighs most.
var kindWeights = [...][9]float64{
	//  user  agent  call  result  doc  fact  plan  policy  episode
	{1.0, 0.4, 0.3, 0.2, 0.2, 0.6, 0.9, 1.0, 0.5}, // route
	{0.9, 0.5, 0.8, 0.7, 0.6, 0.6, 1.0, 1.0, 0.3}, // call
	{0.8, 0.6, 0.9, 1.0, 0.7, 0.6, 0.8, 1.0, 0.3}, // interpret
	{1.0, 0.8, 0.5, 0.7, 0.9, 0.7, 0.6, 1.0, 0.5}, // answer
}

const episodeWeight = 8 // index of episodes in a kindWeights row

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
	// MemoryCap is the token cap of facts, memory_fact items and episodes.
	MemoryCap     int            `json:"memory_cap"`
	SectionTokens map[string]int `json:"section_tokens"`
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

const (
	pending uint8 = iota
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
	section  uint8
	memory   bool // counts against the memory cap
	parent   int32
	line     string // rendered, ending in "\n"
	tokens   int
	score    float64
	terms    []uint32
	redacted bool
	artifact int32 // index into artifacts, or -1
	outcome  uint8
	closure  bool
}

// Build makes the pack of a session for one phase. It validates the session
// first; an invalid session is an *Error. Same input, same pack, byte for
// byte: ties are broken by id.
func Build(s *Session, opts Options) (*Pack, error) {
	if err := Validate(s); err != nil {
		return nil, err
	}
	pi := slices.Index(Phases, opts.Phase)
	if pi < 0 {
		_, err := ParsePhase(string(opts.Phase))
		return nil, err
	}
	if opts.MaxTokens < 0 || opts.MaxTokens > MaxBudget {
		return nil, fmt.Errorf("max_tokens is %d; it must be between 0 and %d", opts.MaxTokens, MaxBudget)
	}
	pol := opts.Policy
	if pol == nil {
		pol = &defaultPolicy
	}
	limit := pol.budgets[pi]
	if opts.MaxTokens > 0 {
		limit = min(limit, opts.MaxTokens)
	}
	est := opts.Estimator
	if est == nil {
		est, _ = budget.New("")
	}
	access := opts.Access
	if access == nil {
		a := engine.ResolveAccess(nil, "", v1alpha1.AccessAllow)
		access = &a
	}
	maxChars := opts.FirewallMaxChars
	if maxChars <= 0 {
		maxChars = pol.firewallMaxChars
	}
	b := builder{est: est, weights: &pol.weights[pi], limit: limit, dict: map[string]uint32{}, words: map[string]int32{}}
	b.queryTerms(opts.Query)
	b.tags = opts.Tags
	pack := &Pack{Phase: opts.Phase, Budget: limit, Sections: []Section{}, Items: []PackItem{},
		Chunks: []engine.Chunk{}, Tools: []engine.ToolCard{}, Artifacts: []Artifact{}}
	var artifacts []Artifact

	// Candidates, in render order within each section: facts, episodes, items, chunks.
	nodes := make([]node, 0, len(s.Facts)+len(s.Episodes)+len(s.Items)+len(opts.Knowledge))
	// floor applies the agent's clearance to an entry of sensitivity sens
	// (facts and episodes are Internal): it drops the entry, or returns the
	// placeholder for its text.
	floor := func(n *node, sens v1alpha1.Sensitivity, text string) string {
		if sens == "" {
			sens = v1alpha1.SensitivityInternal
		}
		switch {
		case access.Cleared(sens):
			return text
		case access.SensitivityAction == v1alpha1.SensitivityActionRedact:
			n.redacted = true
			return engine.RedactedContent("session", sens)
		}
		n.outcome = dropSensitivity
		return text
	}
	for _, f := range s.Facts {
		n := node{id: "fact:" + f.Key, kind: "fact", section: 0, memory: true, parent: -1, artifact: -1}
		v := floor(&n, "", f.Value)
		n.line = "- " + f.Key + ": " + v + "\n"
		b.finish(&n, f.Key+" "+v, 1, b.weights[5], 0, nil, 0)
		nodes = append(nodes, n)
	}
	for i, e := range s.Episodes {
		n := node{id: "episode:" + e.ID, kind: "episode", section: 1, memory: true, parent: -1, artifact: -1}
		text := floor(&n, "", e.Text)
		n.line = "- " + text + "\n"
		b.finish(&n, text, float64(i+1)/float64(len(s.Episodes)), b.weights[episodeWeight], 0, nil, 0)
		nodes = append(nodes, n)
	}
	first := len(nodes)
	pos := make(map[string]int32, len(s.Items))
	for i := range s.Items {
		pos[s.Items[i].ID] = int32(first + i)
	}
	for i := range s.Items {
		it := &s.Items[i]
		n := node{id: it.ID, kind: string(it.Kind), parent: -1, artifact: -1}
		if it.ParentID != "" {
			n.parent = pos[it.ParentID]
		}
		text := floor(&n, it.Sensitivity, it.Text)
		if !n.redacted && n.outcome == pending && it.Kind == KindToolResult && longerThan(text, maxChars) {
			var a Artifact
			text, a = firewall(it.ID, text, maxChars)
			n.artifact = int32(len(artifacts))
			artifacts = append(artifacts, a)
		}
		ki := slices.Index(Kinds, it.Kind)
		n.section, n.line, n.memory = render(it.Kind, it.ID, text)
		b.finish(&n, text, float64(i+1)/float64(len(s.Items)), b.weights[ki], it.TokenEstimate, it.Tags, 0)
		nodes = append(nodes, n)
	}
	// An item whose parent chain lost an item to the floor cannot be shown
	// without it. Parents may come after children, so follow each chain, once:
	// a settled item's verdict holds for every child that reaches it.
	settled := make([]bool, len(nodes))
	var chain []int32
	for i := first; i < len(nodes); i++ {
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
	for _, c := range opts.Knowledge {
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
		n := node{id: id, kind: "chunk", section: 4, parent: -1, artifact: -1, line: "[" + head + "]\n" + c.Content + "\n"}
		b.finish(&n, c.Title+"\n"+c.Content, 0.5, b.weights[4], 0, nil, c.RelevanceScore)
		nodes = append(nodes, n)
	}

	b.fill(nodes)

	// Stats and render.
	st := &pack.Stats
	st.Candidates = len(nodes)
	st.Dedup.Threshold = DefaultDedupThreshold
	st.MemoryCap = b.memCap
	st.SectionTokens = map[string]int{}
	for _, name := range sectionNames {
		st.SectionTokens[name] = 0
	}
	// Tally every outcome, and size each section.
	var counts, size [len(sectionNames)]int
	for i := range nodes {
		n := &nodes[i]
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
	// Render and list the included entries section by section.
	pack.Items = make([]PackItem, 0, st.Included)
	var sb [len(sectionNames)]strings.Builder
	for sec := range sectionNames {
		if counts[sec] == 0 {
			continue
		}
		sb[sec].Grow(len(sectionHeadings[sec]) + size[sec] + 1)
		sb[sec].WriteString(sectionHeadings[sec])
		for i := range nodes {
			n := &nodes[i]
			if n.outcome != included || int(n.section) != sec {
				continue
			}
			sb[sec].WriteString(n.line)
			pi := PackItem{ID: n.id, Kind: n.kind, Section: sectionNames[sec], Tokens: n.tokens, Score: math.Round(n.score*1e4) / 1e4, Closure: n.closure, Redacted: n.redacted}
			if n.artifact >= 0 {
				a := artifacts[n.artifact]
				pi.Artifact = a.Ref
				pack.Artifacts = append(pack.Artifacts, a)
				st.Firewalled++
			}
			pack.Items = append(pack.Items, pi)
		}
	}
	var text strings.Builder
	for i, name := range sectionNames {
		if counts[i] > 0 {
			sb[i].WriteString("\n")
		}
		t := sb[i].String()
		tok := 0
		if t != "" {
			tok = est.Count(t)
		}
		text.WriteString(t)
		st.SectionTokens[name] = tok
		pack.TotalTokens += tok
		pack.Sections = append(pack.Sections, Section{Name: name, Tokens: tok, Items: counts[i], Text: t})
	}
	pack.Text = text.String()
	return pack, nil
}

// render places an item in its section and writes its line.
func render(k Kind, id, text string) (section uint8, line string, memory bool) {
	switch k {
	case KindMemoryFact:
		return 0, "- " + text + "\n", true
	case KindPolicy:
		return 0, "- policy: " + text + "\n", false
	case KindPlanState:
		return 0, "- plan: " + text + "\n", false
	case KindUserTurn:
		return 2, "user: " + text + "\n", false
	case KindAgentMessage:
		return 2, "assistant: " + text + "\n", false
	case KindToolCall:
		return 3, "tool call " + id + ": " + text + "\n", false
	case KindToolResult:
		return 3, "tool result " + id + ": " + text + "\n", false
	}
	return 4, "[" + id + "]\n" + text + "\n", false
}

type builder struct {
	est     budget.Estimator
	weights *[9]float64
	limit   int
	memCap  int
	dict    map[string]uint32
	// words caches word → term id (-1: not a term), so a word repeated
	// across items is stemmed once per pack.
	words map[string]int32
	query []uint32 // sorted term ids of the query
	tags  []string
	seen  []uint32 // per term id: the stamp of the last text that had it
	stamp uint32
}

func (b *builder) queryTerms(q string) {
	b.query = b.termIDs(q)
}

// termIDs returns the sorted distinct term ids of s (ids in first-seen
// order across the pack: one global order, as NearDuplicates needs).
func (b *builder) termIDs(s string) []uint32 {
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

// finish counts a node's tokens and scores it: the kind's weight for the
// phase times a mix of recency, relevance to the query (the share of query
// terms it holds; given for chunks), tag match and a constant, discounted by
// its share of the budget so one huge entry does not beat several useful ones.
func (b *builder) finish(n *node, text string, recency, weight float64, tokenEstimate int, tags []string, relevance float64) {
	n.tokens = max(b.est.Count(n.line), tokenEstimate)
	if !n.redacted && n.outcome == pending {
		n.terms = b.termIDs(text)
	}
	if len(b.query) > 0 && relevance == 0 {
		relevance = float64(index.Intersection(n.terms, b.query)) / float64(len(b.query))
	}
	tag := 0.0
	if len(b.tags) > 0 {
		hit := 0
		for _, t := range b.tags {
			if slices.Contains(tags, t) {
				hit++
			}
		}
		tag = float64(hit) / float64(len(b.tags))
	}
	cost := 1 - 0.5*min(1, float64(n.tokens)/float64(max(b.limit, 1)))
	n.score = weight * (0.1 + 0.35*recency + 0.4*relevance + 0.15*tag) * cost
}

// fill takes candidates by score (ties by id) into the budget. A candidate
// comes with its parent chain (the closure): all of it fits, or none. A
// near-duplicate of an included entry is dropped; memory entries share a
// cap. Section headings are paid for when a section opens.
func (b *builder) fill(nodes []node) {
	b.memCap = int(float64(b.limit) * DefaultMemoryShare)
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
	var headings [len(sectionNames)]int
	for i, h := range sectionHeadings {
		headings[i] = b.est.Count(h + "\n")
	}
	var open [len(sectionNames)]bool
	remaining, memUsed := b.limit, 0
	dedup := index.NewNearDuplicates(DefaultDedupThreshold)
	var group []int32
	for _, i := range order {
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
		var opens [len(sectionNames)]bool
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
