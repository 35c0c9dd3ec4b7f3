package v1alpha1

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSessionsValidate(t *testing.T) {
	router := func() *ContextRouter {
		r := &ContextRouter{ObjectMeta: meta("acme"), Spec: ContextRouterSpec{
			Sessions: SessionsSpec{Store: SessionStoreRedis, Redis: &RedisSpec{Address: "redis.cache.svc:6379",
				PasswordSecretRef: &SecretKeySelector{Name: "redis", Key: "password"}}},
			Phases: &PhasesSpec{Route: &PhaseSpec{Budget: ptr[int32](1500), KindPriorities: map[string]KindPriority{"user_turn": "0.9", "episode": "1"},
				MaxBudget: ptr[int32](3000), Kinds: []PhaseKind{"user_turn", "fact"}, MaxItemsPerKind: map[string]KindLimit{"fact": 3, "user_turn": 0}},
				Answer: &PhaseSpec{MaxBudget: ptr[int32](6000)}},
		}}
		r.Spec.Sessions.Firewall.Keep = []FirewallKeepRule{{Tools: []string{"payments.*", "refund_lookup"}, Paths: []string{".status", `.["a.b"][0]`, "."}}}
		r.Default()
		return r
	}
	keep := func(r *ContextRouter) *FirewallKeepRule { return &r.Spec.Sessions.Firewall.Keep[0] }
	runValidation(t, router, (*ContextRouter).Validate, []validCase[ContextRouter]{
		{"store enum", func(r *ContextRouter) { r.Spec.Sessions.Store = "redis" }, "spec.sessions.store", `did you mean "Redis"?`},
		{"redis required", func(r *ContextRouter) { r.Spec.Sessions.Redis = nil }, "spec.sessions.redis", "required when store is Redis"},
		{"ttl too short", func(r *ContextRouter) { r.Spec.Sessions.TTL = dur(59 * time.Second) }, "spec.sessions.ttl", "between 1m and 720h"},
		{"ttl too long", func(r *ContextRouter) { r.Spec.Sessions.TTL = dur(721 * time.Hour) }, "spec.sessions.ttl", "between 1m and 720h"},
		{"maxSessions bound", func(r *ContextRouter) { r.Spec.Sessions.MaxSessions = 1_000_001 }, "spec.sessions.maxSessions", "between 1 and 1000000"},
		{"maxBytes positive", func(r *ContextRouter) { r.Spec.Sessions.MaxBytes = qty("0") }, "spec.sessions.maxBytes", "greater than 0"},
		{"firewall bound", func(r *ContextRouter) { r.Spec.Sessions.Firewall.MaxChars = 99 }, "spec.sessions.firewall.maxChars", "between 100 and 262144"},
		{"keep rules bound", func(r *ContextRouter) {
			r.Spec.Sessions.Firewall.Keep = make([]FirewallKeepRule, 17)
			for i := range r.Spec.Sessions.Firewall.Keep {
				r.Spec.Sessions.Firewall.Keep[i] = FirewallKeepRule{Tools: []string{"*"}, Paths: []string{".a"}}
			}
		}, "spec.sessions.firewall.keep", "must have at most 16 items"},
		{"keep without tools", func(r *ContextRouter) { keep(r).Tools = nil }, "spec.sessions.firewall.keep[0].tools", "at least one glob"},
		{"keep tools bound", func(r *ContextRouter) { keep(r).Tools = slices.Repeat([]string{"t"}, 33) }, "spec.sessions.firewall.keep[0].tools", "must have at most 32 items"},
		{"keep bad glob", func(r *ContextRouter) { keep(r).Tools[1] = "pay[" }, "spec.sessions.firewall.keep[0].tools[1]", "not a glob of path.Match"},
		{"keep long tool", func(r *ContextRouter) { keep(r).Tools[0] = strings.Repeat("t", 257) }, "spec.sessions.firewall.keep[0].tools[0]", "1 to 256 bytes"},
		{"keep without paths", func(r *ContextRouter) { keep(r).Paths = nil }, "spec.sessions.firewall.keep[0].paths", "at least one JSON path"},
		{"keep paths bound", func(r *ContextRouter) { keep(r).Paths = slices.Repeat([]string{".a"}, 33) }, "spec.sessions.firewall.keep[0].paths", "must have at most 32 items"},
		{"keep bad path", func(r *ContextRouter) { keep(r).Paths[1] = "status" }, "spec.sessions.firewall.keep[0].paths[1]", `path "status": unexpected 's' at byte 0`},
		{"keep empty path", func(r *ContextRouter) { keep(r).Paths[0] = "" }, "spec.sessions.firewall.keep[0].paths[0]", `"." is the whole document`},
		{"keep long path", func(r *ContextRouter) { keep(r).Paths[0] = strings.Repeat(".a", 513) }, "spec.sessions.firewall.keep[0].paths[0]", "path is 1026 bytes; it is limited to 1024 bytes"},
		{"address without port", func(r *ContextRouter) { r.Spec.Sessions.Redis.Address = "redis.cache.svc" }, "spec.sessions.redis.address", "must be host:port"},
		{"address as a URL", func(r *ContextRouter) { r.Spec.Sessions.Redis.Address = "redis://default:hunter2-secret@redis:6379" },
			"spec.sessions.redis.address", "must be host:port"},
		{"password key", func(r *ContextRouter) { r.Spec.Sessions.Redis.PasswordSecretRef.Key = "" }, "spec.sessions.redis.passwordSecretRef.key", "Required value"},
		{"db bound", func(r *ContextRouter) { r.Spec.Sessions.Redis.DB = 1024 }, "spec.sessions.redis.db", "between 0 and 1023"},
		{"keyPrefix bound", func(r *ContextRouter) { r.Spec.Sessions.Redis.KeyPrefix = strings.Repeat("p", 257) }, "spec.sessions.redis.keyPrefix", "more than 256 bytes"},
		{"budget bound", func(r *ContextRouter) { r.Spec.Phases.Route.Budget = ptr[int32](1_000_001) }, "spec.phases.route.budget", "between 1 and 1000000"},
		{"unknown kind", func(r *ContextRouter) { r.Spec.Phases.Route.KindPriorities["thought"] = "0.5" }, "spec.phases.route.kindPriorities[thought]", `"episode"`},
		{"priority range", func(r *ContextRouter) { r.Spec.Phases.Route.KindPriorities["episode"] = "1.5" }, "spec.phases.route.kindPriorities[episode]", "from 0 to 1"},
		{"maxBudget below the budget", func(r *ContextRouter) { r.Spec.Phases.Route.MaxBudget = ptr[int32](1499) }, "spec.phases.route.maxBudget", "at least the phase's budget, 1500"},
		{"maxBudget below the default budget", func(r *ContextRouter) { r.Spec.Phases.Answer.MaxBudget = ptr[int32](5999) }, "spec.phases.answer.maxBudget", "at least the phase's budget, 6000"},
		{"maxBudget bound", func(r *ContextRouter) { r.Spec.Phases.Route.MaxBudget = ptr[int32](1_000_001) }, "spec.phases.route.maxBudget", "between 1 and 1000000"},
		{"handoff budget", func(r *ContextRouter) { r.Spec.Phases.Handoff = &PhaseSpec{Budget: ptr[int32](0)} }, "spec.phases.handoff.budget", "between 1 and 1000000"},
		{"handoff maxBudget below its default", func(r *ContextRouter) { r.Spec.Phases.Handoff = &PhaseSpec{MaxBudget: ptr[int32](3999)} }, "spec.phases.handoff.maxBudget", "at least the phase's budget, 4000"},
		{"unknown phase kind", func(r *ContextRouter) { r.Spec.Phases.Route.Kinds[1] = "thought" }, "spec.phases.route.kinds[1]", `Unsupported value: "thought"`},
		{"repeated phase kind", func(r *ContextRouter) { r.Spec.Phases.Route.Kinds[1] = "user_turn" }, "spec.phases.route.kinds[1]", "Duplicate value"},
		{"empty kinds", func(r *ContextRouter) { r.Spec.Phases.Route.Kinds = []PhaseKind{} }, "spec.phases.route.kinds", "at least one kind"},
		{"unknown limited kind", func(r *ContextRouter) { r.Spec.Phases.Route.MaxItemsPerKind["chunk"] = 1 }, "spec.phases.route.maxItemsPerKind[chunk]", `Unsupported value: "chunk"`},
		{"negative kind limit", func(r *ContextRouter) { r.Spec.Phases.Route.MaxItemsPerKind["fact"] = -1 }, "spec.phases.route.maxItemsPerKind[fact]", "at least 0"},
		{"dedupThreshold 0", func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "0" }, "spec.sessions.dedupThreshold", "greater than 0 and at most 1"},
		{"dedupThreshold 0.0", func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "0.00" }, "spec.sessions.dedupThreshold", "greater than 0 and at most 1"},
		{"dedupThreshold above 1", func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "1.01" }, "spec.sessions.dedupThreshold", "greater than 0 and at most 1"},
		{"dedupThreshold not a number", func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "high" }, "spec.sessions.dedupThreshold", "greater than 0 and at most 1"},
	})
	// A password written into the address is not repeated.
	r := router()
	r.Spec.Sessions.Redis.Address = "redis://default:hunter2-secret@redis:6379"
	if errs := r.Validate(); len(errs) == 0 || strings.Contains(errs.ToAggregate().Error(), "hunter2") {
		t.Errorf("errors = %v, want the address refused without its password", errs.ToAggregate())
	}
	// The boundaries are accepted: a ceiling equal to the budget, a limit of
	// 0, the smallest and the largest threshold.
	for name, edit := range map[string]func(r *ContextRouter){
		"maxBudget at the budget":    func(r *ContextRouter) { r.Spec.Phases.Route.MaxBudget = ptr[int32](1500) },
		"maxBudget at 1000000":       func(r *ContextRouter) { r.Spec.Phases.Route.MaxBudget = ptr[int32](1_000_000) },
		"every kind":                 func(r *ContextRouter) { r.Spec.Phases.Route.Kinds = phaseKinds(PhaseEntryKinds) },
		"dedupThreshold 0.01":        func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "0.01" },
		"dedupThreshold 1.0":         func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "1.0" },
		"dedupThreshold unset":       func(r *ContextRouter) { r.Spec.Sessions.DedupThreshold = "" },
		"handoff with all its knobs": func(r *ContextRouter) { r.Spec.Phases.Handoff = r.Spec.Phases.Route },
	} {
		r := router()
		edit(r)
		if errs := r.Validate(); len(errs) > 0 {
			t.Errorf("%s: %v", name, errs.ToAggregate())
		}
	}
	// A Memory store ignores redis; none is needed.
	r = router()
	r.Spec.Sessions.Store, r.Spec.Sessions.Redis = SessionStoreMemory, nil
	if errs := r.Validate(); len(errs) > 0 {
		t.Errorf("Memory without redis: %v", errs.ToAggregate())
	}
}

func phaseKinds(names []string) []PhaseKind {
	out := make([]PhaseKind, len(names))
	for i, n := range names {
		out[i] = PhaseKind(n)
	}
	return out
}

func readRouterCRD(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../config/crd/bases/contextrouter.dev_contextrouters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// The CRD's rules on the keys of kindPriorities and maxItemsPerKind list
// exactly SessionEntryKinds and PhaseEntryKinds, and the enum of kinds
// PhaseEntryKinds (the markers cannot refer to the Go lists, so this holds
// them together).
func TestKindRules(t *testing.T) {
	crd := readRouterCRD(t)
	quoted := func(kinds []string) string {
		var q []string
		for _, k := range kinds {
			q = append(q, "'"+k+"'")
		}
		return strings.Join(q, ",")
	}
	for _, c := range []struct {
		message string
		want    []string
	}{
		{"kindPriorities keys must be item kinds or episode", SessionEntryKinds},
		{`maxItemsPerKind keys must be item kinds, fact or\s+episode`, PhaseEntryKinds},
	} {
		re := regexp.MustCompile(`- message: ` + c.message + `\s+rule: self\.all\(k, k in \[([^\]]*)\]\)`)
		rules := re.FindAllStringSubmatch(crd, -1)
		if len(rules) != len(PhaseNames) {
			t.Fatalf("%d rules %q in the CRD, want one per phase", len(rules), c.message)
		}
		for _, r := range rules {
			if got := strings.Join(strings.Fields(strings.ReplaceAll(r[1], ",", " ")), ","); got != quoted(c.want) {
				t.Errorf("the rule lists %s, want %s", got, quoted(c.want))
			}
		}
	}
	enums := regexp.MustCompile(`enum:\n((?:\s+- \w+\n)+)`).FindAllStringSubmatch(crd, -1)
	n := 0
	for _, e := range enums {
		if strings.Contains(e[1], "- fact\n") {
			n++
			if got := strings.Join(strings.Fields(strings.ReplaceAll(e[1], "- ", "")), ","); got != strings.Join(PhaseEntryKinds, ",") {
				t.Errorf("the kinds enum lists %s, want %v", got, PhaseEntryKinds)
			}
		}
	}
	if n != len(PhaseNames) {
		t.Errorf("%d kinds enums in the CRD, want one per phase", n)
	}
}

// Each phase's maxBudget rule compares with the phase's default budget,
// DefaultPhaseBudgets.
func TestMaxBudgetRules(t *testing.T) {
	crd := strings.Join(strings.Fields(readRouterCRD(t)), " ")
	for i, ph := range PhaseNames {
		want := fmt.Sprintf("self.%[1]s.maxBudget >= (has(self.%[1]s.budget) ? self.%[1]s.budget : %[2]d)", ph, DefaultPhaseBudgets[i])
		msg := fmt.Sprintf("maxBudget of %s must be at least its budget (default %d)", ph, DefaultPhaseBudgets[i])
		if !strings.Contains(crd, want) || !strings.Contains(crd, msg) {
			t.Errorf("no rule %q with the message %q in the CRD", want, msg)
		}
	}
	if len(DefaultPhaseBudgets) != len(PhaseNames) || len((&PhasesSpec{}).List()) != len(PhaseNames) {
		t.Errorf("%d default budgets, %d phase fields for %d phases", len(DefaultPhaseBudgets), len((&PhasesSpec{}).List()), len(PhaseNames))
	}
}
