package session

import (
	"slices"
	"strings"
)

// The phase policy of a pack (api.md §11.2, §11.3): the entry kinds a phase
// takes and its per-kind limits, what a chain left out by policy cannot
// show, the pins that are taken first, the evidence rule of interpret and
// answer, and the list of entries left out when a request asks to explain.

// entryKind indexes the entry kinds of spec.phases.*.kinds, in the order of
// v1alpha1.PhaseEntryKinds: the columns of a kind priority row (item kinds,
// episode), then fact. Knowledge chunks are doc_snippet.
type entryKind uint8

const (
	kindFact      entryKind = numWeights
	numEntryKinds           = numWeights + 1
)

// kindSet is a set of entry kinds, bit k for entryKind k.
type kindSet uint16

func kinds(ks ...entryKind) kindSet {
	var s kindSet
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// defaultKinds are the kinds each phase takes, in the order of Phases: the
// context engine's phase policy (route picks a tool; it does not read tool
// output). answer and handoff take everything.
var defaultKinds = func() [numPhases]kindSet {
	route := kinds(weightUserTurn, weightAgentMessage, weightPlanState, weightPolicy, weightMemoryFact, kindFact, weightEpisode)
	work := kinds(weightUserTurn, weightAgentMessage, weightToolCall, weightToolResult, weightDocSnippet, weightPlanState, weightPolicy, weightMemoryFact, kindFact)
	all := kindSet(1<<numEntryKinds - 1)
	return [numPhases]kindSet{route, work, work, all, all}
}()

// admit leaves out a candidate of a kind the phase does not take (policy);
// false when it did.
func (b *packBuild) admit(n *node) bool {
	if b.pol.kinds[b.pi]&(1<<n.ekind) != 0 {
		return true
	}
	n.outcome = dropPolicy
	return false
}

// leftOut adds a candidate admit refused. It is neither floored, firewalled
// nor scored; only an explained pack counts its tokens, on the line of its
// text as written (line renders it then).
func (b *packBuild) leftOut(n *node, line func() string, tokenEstimate int) {
	if b.opts.Explain {
		n.line = line()
		b.count(n, tokenEstimate)
	}
	n.line = ""
	b.nodes = append(b.nodes, *n)
}

// capKinds keeps, of each kind the phase limits (maxItemsPerKind), the
// pending candidates fill would take first (pinned, then by score) up to
// the limit; the rest are left out by policy.
func (b *packBuild) capKinds() {
	lim := &b.pol.limits[b.pi]
	if *lim == unlimited {
		return
	}
	var byKind [numEntryKinds][]int32
	for i := range b.nodes {
		if n := &b.nodes[i]; n.outcome == pending && lim[n.ekind] != noLimit {
			byKind[n.ekind] = append(byKind[n.ekind], int32(i))
		}
	}
	for k, list := range byKind {
		if lim[k] == noLimit || len(list) <= int(lim[k]) {
			continue
		}
		slices.SortFunc(list, b.rank)
		for _, i := range list[lim[k]:] {
			b.nodes[i].outcome = dropPolicy
		}
	}
}

// dropLostChains drops an item whose parent chain lost an item to the
// floor: it cannot be shown without it.
func (b *packBuild) dropLostChains() { b.dropChains(dropSensitivity, dropSensitivity) }

// dropClosures leaves out an item whose parent chain holds one left out by
// policy (closure).
func (b *packBuild) dropClosures() { b.dropChains(dropPolicy, dropClosure) }

// dropChains gives the outcome as to each pending item whose parent chain
// reaches an item whose outcome is cause (or as). Parents may come after
// children, so each chain is followed once: a settled item's verdict holds
// for every child that reaches it.
func (b *packBuild) dropChains(cause, as outcome) {
	nodes := b.nodes
	settled := make([]bool, len(nodes))
	var chain []int32
	for i := b.firstItem; i < b.firstItem+len(b.s.Items); i++ {
		chain = chain[:0]
		p := int32(i)
		for p >= 0 && !settled[p] && nodes[p].outcome == pending {
			chain = append(chain, p)
			p = nodes[p].parent
		}
		lost := p >= 0 && (nodes[p].outcome == cause || nodes[p].outcome == as)
		for _, j := range chain {
			settled[j] = true
			if lost {
				nodes[j].outcome = as
			}
		}
	}
}

// handoffLastTurns is how many of the last user and agent turns a handoff
// pins.
const handoffLastTurns = 6

// pinRule says which items are pinned (api.md §11.3 step 9): the task
// (the first user_turn), items written pinned, and in the handoff phase
// the open plan items, the decisions, the firewalled results and the last
// turns.
type pinRule struct {
	task    int // index of the task; -1 without one
	handoff bool
	// lastTurns is the index of the first of the last handoffLastTurns
	// turns.
	lastTurns int
}

func newPinRule(items []Item, handoff bool) pinRule {
	r := pinRule{task: -1, handoff: handoff, lastTurns: len(items)}
	for i := range items {
		if items[i].Kind == KindUserTurn {
			r.task = i
			break
		}
	}
	for i, n := len(items)-1, 0; i >= 0 && n < handoffLastTurns; i-- {
		if isTurn(items[i].Kind) {
			r.lastTurns, n = i, n+1
		}
	}
	return r
}

// pinned says whether item i is pinned; firewalled, whether the pack
// shows it as an artifact.
func (r pinRule) pinned(i int, it *Item, firewalled bool) bool {
	switch {
	case it.Pinned || i == r.task:
		return true
	case !r.handoff:
		return false
	}
	return firewalled || handoffPin(it) || i >= r.lastTurns && isTurn(it.Kind)
}

func isTurn(k Kind) bool { return k == KindUserTurn || k == KindAgentMessage }

// closedStatuses are the metadata.status values of a plan item that is no
// longer open, compared without case or surrounding spaces.
var closedStatuses = []string{"done", "closed", "completed", "cancelled"}

// handoffPin says whether a handoff pins an item for what it is: an open
// plan item (its metadata.status not closed), or a decision (tagged
// "decision", or with metadata.decision set).
func handoffPin(it *Item) bool {
	if it.Kind == KindPlanState && !slices.Contains(closedStatuses, strings.ToLower(strings.TrimSpace(it.Metadata["status"]))) {
		return true
	}
	return slices.Contains(it.Tags, "decision") || it.Metadata["decision"] != ""
}

// evidenceRule is how interpret and answer rank tool results (api.md
// §11.3 step 6): a result's recency is its position among the session's
// tool results, and a firewalled result's relevance is that of its whole
// text. Other phases rank by position among all items, on what the pack
// shows.
type evidenceRule struct {
	on      bool
	items   int
	results int // tool results of the session
	seen    int // tool results passed so far
}

func newEvidenceRule(items []Item, ph Phase) evidenceRule {
	r := evidenceRule{on: ph == PhaseInterpret || ph == PhaseAnswer, items: len(items)}
	if r.on {
		for i := range items {
			if items[i].Kind == KindToolResult {
				r.results++
			}
		}
	}
	return r
}

// recency of item i, of kind k; items are passed in order.
func (r *evidenceRule) recency(i int, k Kind) float64 {
	if r.on && k == KindToolResult {
		r.seen++
		return float64(r.seen) / float64(r.results)
	}
	return float64(i+1) / float64(r.items)
}

// droppedItems lists the candidates left out, in candidate order, at most
// MaxDroppedItems (then true).
func (b *packBuild) droppedItems() ([]DroppedItem, bool) {
	out := []DroppedItem{}
	for i := range b.nodes {
		n := &b.nodes[i]
		if n.outcome == included {
			continue
		}
		if len(out) == MaxDroppedItems {
			return out, true
		}
		out = append(out, DroppedItem{ID: n.id, Kind: n.kind, Reason: reasons[n.outcome], Tokens: n.tokens})
	}
	return out, false
}
