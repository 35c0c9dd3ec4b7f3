package session

import (
	"fmt"
	"path"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/jsonpath"
	"github.com/contextrouter/contextrouter/internal/secrets"
)

// Policy is what a router's spec sets for every pack: the budget, ceiling,
// kinds, per-kind limits and kind priorities of each phase (spec.phases),
// the near-duplicate threshold (spec.sessions.dedupThreshold) and the
// firewall's bound and keep-list (spec.sessions.firewall). Make it once per
// compiled configuration.
type Policy struct {
	budgets [numPhases]int
	// maxBudgets are the ceilings of max_tokens; 0 is the budget.
	maxBudgets       [numPhases]int
	weights          [numPhases]priorityRow
	kinds            [numPhases]kindSet
	limits           [numPhases]kindLimits
	firewallMaxChars int
	dedupThreshold   float64
	keep             []keepRule
	// secrets scans session text when it is written; nil under
	// spec.sessions.secrets: Off.
	secrets *secrets.Scanner
}

// keepRule is a rule of spec.sessions.firewall.keep, its paths parsed.
type keepRule struct {
	tools []string
	paths []keepPath
}

// kindLimits are a phase's maxItemsPerKind, by entry kind; noLimit where
// none is set.
type kindLimits [numEntryKinds]int32

const noLimit = -1

var unlimited = func() (l kindLimits) {
	for i := range l {
		l[i] = noLimit
	}
	return l
}()

// defaultPolicy holds the defaults of api.md §11.2 and §11.4.
var defaultPolicy = func() Policy {
	p := Policy{weights: kindWeights, kinds: defaultKinds, firewallMaxChars: DefaultFirewallMaxChars, dedupThreshold: DefaultDedupThreshold,
		secrets: secrets.Default()}
	for i := range p.budgets {
		p.budgets[i] = int(v1alpha1.DefaultPhaseBudgets[i])
		p.limits[i] = unlimited
	}
	return p
}()

// NewPolicy reads a router's spec (nil: the defaults). Values Validate
// refuses are errors here too, naming the field: the rules are
// v1alpha1's, so a spec that did not pass Validate is held to them.
func NewPolicy(spec *v1alpha1.ContextRouterSpec) (*Policy, error) {
	p := defaultPolicy
	if spec == nil {
		return &p, nil
	}
	if n := spec.Sessions.Firewall.MaxChars; n > 0 {
		p.firewallMaxChars = int(n)
	}
	if spec.Sessions.Secrets == v1alpha1.SessionSecretsOff {
		p.secrets = nil
	}
	if err := p.readKeep(spec.Sessions.Firewall.Keep); err != nil {
		return nil, err
	}
	t, ok := v1alpha1.ParseSessionDedupThreshold(spec.Sessions.DedupThreshold)
	if !ok {
		return nil, fmt.Errorf("spec.sessions.dedupThreshold: %q is not a decimal greater than 0 and at most 1", spec.Sessions.DedupThreshold)
	}
	p.dedupThreshold = t
	ps := spec.Phases
	if ps == nil {
		return &p, nil
	}
	if errs := v1alpha1.ValidatePhases(field.NewPath("spec", "phases"), ps); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	for i, ph := range ps.List() {
		if ph != nil {
			p.setPhase(i, ph)
		}
	}
	return &p, nil
}

// setPhase applies the settings of phase i, which ValidatePhases passed.
func (p *Policy) setPhase(i int, ph *v1alpha1.PhaseSpec) {
	if b := ph.Budget; b != nil {
		p.budgets[i] = int(*b)
	}
	if m := ph.MaxBudget; m != nil {
		p.maxBudgets[i] = int(*m)
	}
	if ph.Kinds != nil {
		p.kinds[i] = 0
		for _, k := range ph.Kinds {
			p.kinds[i] |= 1 << slices.Index(v1alpha1.PhaseEntryKinds, string(k))
		}
	}
	for k, n := range ph.MaxItemsPerKind {
		p.limits[i][slices.Index(v1alpha1.PhaseEntryKinds, k)] = int32(n)
	}
	for k, v := range ph.KindPriorities {
		w, _ := strconv.ParseFloat(string(v), 64)
		p.weights[i][slices.Index(v1alpha1.SessionEntryKinds, k)] = w
	}
}

// Budget is the token budget of a phase (0 for an unknown phase).
func (p *Policy) Budget(ph Phase) int {
	if i := slices.Index(Phases, ph); i >= 0 {
		return p.budgets[i]
	}
	return 0
}

// Limit is the budget of a pack of phase ph whose request asks for
// maxTokens: the phase's budget for 0; maxTokens up to the phase's ceiling
// (maxBudget, by default the budget); above it an error naming the
// ceiling. This is the one place a request's max_tokens becomes a budget:
// packs, their queries, the HTTP API (400) and the CLI (a flag error) ask
// here.
func (p *Policy) Limit(ph Phase, maxTokens int) (int, error) {
	i := slices.Index(Phases, ph)
	if i < 0 {
		_, err := ParsePhase(string(ph))
		return 0, err
	}
	if maxTokens < 0 || maxTokens > MaxBudget {
		return 0, fmt.Errorf("max_tokens is %d; it must be between 0 and %d", maxTokens, MaxBudget)
	}
	budget := p.budgets[i]
	if maxTokens == 0 {
		return budget, nil
	}
	if ceiling := max(p.maxBudgets[i], budget); maxTokens > ceiling {
		return 0, fmt.Errorf("max_tokens %d is above the %s phase's ceiling %d (spec.phases.%s.maxBudget)", maxTokens, ph, ceiling, ph)
	}
	return maxTokens, nil
}

// Secrets is the scanner that masks session text when it is written
// (MaskSecrets); nil under spec.sessions.secrets: Off.
func (p *Policy) Secrets() *secrets.Scanner { return p.secrets }

// FirewallMaxChars is the size above which a tool result is firewalled.
func (p *Policy) FirewallMaxChars() int { return p.firewallMaxChars }

// readKeep reads spec.sessions.firewall.keep, checked as Validate checks it.
func (p *Policy) readKeep(rules []v1alpha1.FirewallKeepRule) error {
	if errs := v1alpha1.ValidateFirewallKeep(field.NewPath("spec", "sessions", "firewall", "keep"), rules); len(errs) > 0 {
		return errs.ToAggregate()
	}
	for _, r := range rules {
		kr := keepRule{tools: r.Tools}
		for _, jp := range r.Paths {
			steps, _ := jsonpath.Parse(jp)
			kr.paths = append(kr.paths, keepPath{path: jsonpath.Format(steps), steps: steps})
		}
		p.keep = append(p.keep, kr)
	}
	return nil
}

// keepFor is the paths kept for a result of tool: those of every rule
// whose globs match it, in order, each once.
func (p *Policy) keepFor(tool string) []keepPath {
	var out []keepPath
	for _, r := range p.keep {
		if !slices.ContainsFunc(r.tools, func(g string) bool { ok, _ := path.Match(g, tool); return ok }) {
			continue
		}
		for _, k := range r.paths {
			if !slices.ContainsFunc(out, func(o keepPath) bool { return o.path == k.path }) {
				out = append(out, k)
			}
		}
	}
	return out
}

// DedupThreshold is the Jaccard similarity at which a pack drops a
// near-duplicate.
func (p *Policy) DedupThreshold() float64 { return p.dedupThreshold }
