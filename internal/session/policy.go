package session

import (
	"fmt"
	"path"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/jsonpath"
)

// Policy is what a router's spec sets for every pack: the budget and kind
// priorities of each phase (spec.phases) and the firewall's bound and
// keep-list (spec.sessions.firewall). Make it once per compiled configuration.
type Policy struct {
	budgets          [len(defaultBudgets)]int
	weights          [len(kindWeights)]priorityRow
	firewallMaxChars int
	keep             []keepRule
}

// keepRule is a rule of spec.sessions.firewall.keep, its paths parsed.
type keepRule struct {
	tools []string
	paths []keepPath
}

// defaultPolicy holds the defaults of api.md §11.2 and §11.4.
var defaultPolicy = Policy{budgets: defaultBudgets, weights: kindWeights, firewallMaxChars: DefaultFirewallMaxChars}

// NewPolicy reads a router's spec (nil: the defaults). Values Validate
// refuses are errors here too, naming the field.
func NewPolicy(spec *v1alpha1.ContextRouterSpec) (*Policy, error) {
	p := defaultPolicy
	if spec == nil {
		return &p, nil
	}
	if n := spec.Sessions.Firewall.MaxChars; n > 0 {
		p.firewallMaxChars = int(n)
	}
	if err := p.readKeep(spec.Sessions.Firewall.Keep); err != nil {
		return nil, err
	}
	ps := spec.Phases
	if ps == nil {
		return &p, nil
	}
	for i, ph := range [...]*v1alpha1.PhaseSpec{ps.Route, ps.Call, ps.Interpret, ps.Answer} {
		if ph == nil {
			continue
		}
		at := "spec.phases." + string(Phases[i])
		if b := ph.Budget; b != nil {
			if *b < 1 || int(*b) > MaxBudget {
				return nil, fmt.Errorf("%s.budget: %d must be between 1 and %d", at, *b, MaxBudget)
			}
			p.budgets[i] = int(*b)
		}
		for k, v := range ph.KindPriorities {
			ki := slices.Index(v1alpha1.SessionEntryKinds, k)
			w, err := strconv.ParseFloat(string(v), 64)
			switch {
			case ki < 0:
				return nil, fmt.Errorf("%s.kindPriorities: unknown kind %q", at, k)
			case err != nil || w < 0 || w > 1:
				return nil, fmt.Errorf("%s.kindPriorities[%s]: %q is not a decimal from 0 to 1", at, k, v)
			}
			p.weights[i][ki] = w
		}
	}
	return &p, nil
}

// Budget is the token budget of a phase (0 for an unknown phase).
func (p *Policy) Budget(ph Phase) int {
	if i := slices.Index(Phases, ph); i >= 0 {
		return p.budgets[i]
	}
	return 0
}

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
