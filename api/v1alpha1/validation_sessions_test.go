package v1alpha1

import (
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
			Phases: &PhasesSpec{Route: &PhaseSpec{Budget: ptr[int32](1500), KindPriorities: map[string]KindPriority{"user_turn": "0.9", "episode": "1"}}},
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
	})
	// A password written into the address is not repeated.
	r := router()
	r.Spec.Sessions.Redis.Address = "redis://default:hunter2-secret@redis:6379"
	if errs := r.Validate(); len(errs) == 0 || strings.Contains(errs.ToAggregate().Error(), "hunter2") {
		t.Errorf("errors = %v, want the address refused without its password", errs.ToAggregate())
	}
	// A Memory store ignores redis; none is needed.
	r = router()
	r.Spec.Sessions.Store, r.Spec.Sessions.Redis = SessionStoreMemory, nil
	if errs := r.Validate(); len(errs) > 0 {
		t.Errorf("Memory without redis: %v", errs.ToAggregate())
	}
}

// The CRD's rule on kindPriorities keys lists exactly SessionEntryKinds
// (the marker cannot refer to the Go list, so this holds them together).
func TestKindPrioritiesRuleKinds(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/contextrouter.dev_contextrouters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`self\.all\(k, k in \[([^\]]*)\]\)`)
	rules := re.FindAllStringSubmatch(string(raw), -1)
	if len(rules) != 4 {
		t.Fatalf("%d kindPriorities rules in the CRD, want one per phase", len(rules))
	}
	var want []string
	for _, k := range SessionEntryKinds {
		want = append(want, "'"+k+"'")
	}
	for _, r := range rules {
		if got := strings.Join(strings.Fields(strings.ReplaceAll(r[1], ",", " ")), ","); got != strings.Join(want, ",") {
			t.Errorf("the rule lists %s, want %s", got, strings.Join(want, ","))
		}
	}
}
