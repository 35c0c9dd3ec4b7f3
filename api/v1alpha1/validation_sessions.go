package v1alpha1

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/internal/jsonpath"
	"github.com/contextrouter/contextrouter/internal/redact"
)

var (
	sessionStores      = []SessionStoreType{SessionStoreMemory, SessionStoreRedis}
	sessionSecretModes = []SessionSecretsMode{SessionSecretsMask, SessionSecretsOff}
)

func validateSessions(p *field.Path, s *SessionsSpec) field.ErrorList {
	allErrs := validateEnum(p.Child("store"), s.Store, sessionStores)
	allErrs = append(allErrs, validateEnum(p.Child("secrets"), s.Secrets, sessionSecretModes)...)
	if errs := validatePositiveDuration(p.Child("ttl"), s.TTL); len(errs) > 0 {
		allErrs = append(allErrs, errs...)
	} else if s.TTL.Duration < MinSessionTTL || s.TTL.Duration > MaxSessionTTL {
		allErrs = append(allErrs, field.Invalid(p.Child("ttl"), s.TTL.Duration.String(), "ttl must be between 1m and 720h"))
	}
	if s.MaxSessions < 1 || s.MaxSessions > MaxSessionsLimit {
		allErrs = append(allErrs, field.Invalid(p.Child("maxSessions"), s.MaxSessions, fmt.Sprintf("must be between 1 and %d", MaxSessionsLimit)))
	}
	allErrs = append(allErrs, validatePositiveQuantity(p.Child("maxBytes"), s.MaxBytes)...)
	if _, ok := ParseSessionDedupThreshold(s.DedupThreshold); !ok {
		allErrs = append(allErrs, field.Invalid(p.Child("dedupThreshold"), s.DedupThreshold, `must be a decimal number greater than 0 and at most 1, such as "0.9"`))
	}
	if n := s.Firewall.MaxChars; n < MinFirewallMaxChars || n > MaxFirewallMaxChars {
		allErrs = append(allErrs, field.Invalid(p.Child("firewall", "maxChars"), n,
			fmt.Sprintf("must be between %d and %d", MinFirewallMaxChars, MaxFirewallMaxChars)))
	}
	allErrs = append(allErrs, ValidateFirewallKeep(p.Child("firewall", "keep"), s.Firewall.Keep)...)
	rp := p.Child("redis")
	if r := s.Redis; r != nil {
		allErrs = append(allErrs, validateRedis(rp, r)...)
	} else if s.Store == SessionStoreRedis {
		allErrs = append(allErrs, field.Required(rp, "redis is required when store is Redis"))
	}
	return allErrs
}

func validateRedis(p *field.Path, r *RedisSpec) field.ErrorList {
	var allErrs field.ErrorList
	ap := p.Child("address")
	// An address written as a URL may carry a password in its user part.
	if r.Address == "" {
		allErrs = append(allErrs, field.Required(ap, "host:port of the server"))
	} else if _, port, err := ParseAllowedHost(r.Address); err != nil || port == "" {
		msg := "must be host:port, such as redis.cache.svc:6379"
		if err != nil {
			msg += ": " + err.Error()
		}
		allErrs = append(allErrs, field.Invalid(ap, redact.URL(r.Address), msg))
	}
	if r.PasswordSecretRef != nil {
		allErrs = append(allErrs, validateSecretKeySelector(p.Child("passwordSecretRef"), r.PasswordSecretRef)...)
	}
	if r.DB < 0 || r.DB > maxRedisDB {
		allErrs = append(allErrs, field.Invalid(p.Child("db"), r.DB, fmt.Sprintf("must be between 0 and %d", maxRedisDB)))
	}
	if len(r.KeyPrefix) > maxKeyPrefix {
		allErrs = append(allErrs, field.TooLong(p.Child("keyPrefix"), "", maxKeyPrefix))
	}
	return allErrs
}

// sessionDedupPattern is the marker's pattern of
// spec.sessions.dedupThreshold: a decimal greater than 0 and at most 1.
var sessionDedupPattern = regexp.MustCompile(`^(0\.[0-9]*[1-9][0-9]*|1(\.0+)?)$`)

// ParseSessionDedupThreshold reads spec.sessions.dedupThreshold ("" is the
// default); false when it is not a decimal greater than 0 and at most 1.
func ParseSessionDedupThreshold(s string) (float64, bool) {
	if s == "" {
		s = DefaultSessionDedupThreshold
	}
	if !sessionDedupPattern.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && f > 0 && f <= 1
}

// ValidatePhases checks spec.phases (p) whole: each phase's budget and
// ceiling, kinds, per-kind limits and kind priorities. internal/session's
// NewPolicy applies the same rules to a spec that did not pass Validate.
func ValidatePhases(p *field.Path, ps *PhasesSpec) field.ErrorList {
	var allErrs field.ErrorList
	for i, ph := range ps.List() {
		if ph != nil {
			allErrs = append(allErrs, validatePhase(p.Child(PhaseNames[i]), ph, DefaultPhaseBudgets[i])...)
		}
	}
	return allErrs
}

// validatePhase checks one phase, whose default budget is def.
func validatePhase(pp *field.Path, ph *PhaseSpec, def int32) field.ErrorList {
	var allErrs field.ErrorList
	// budget is what maxBudget must reach: 0 when the budget is itself
	// refused, so one mistake is one error.
	budget := def
	if b := ph.Budget; b != nil {
		budget = *b
		if *b < 1 || *b > MaxPhaseBudget {
			allErrs = append(allErrs, field.Invalid(pp.Child("budget"), *b, fmt.Sprintf("must be between 1 and %d", MaxPhaseBudget)))
			budget = 0
		}
	}
	if m := ph.MaxBudget; m != nil {
		switch {
		case *m < 1 || *m > MaxPhaseBudget:
			allErrs = append(allErrs, field.Invalid(pp.Child("maxBudget"), *m, fmt.Sprintf("must be between 1 and %d", MaxPhaseBudget)))
		case *m < budget:
			allErrs = append(allErrs, field.Invalid(pp.Child("maxBudget"), *m, fmt.Sprintf("must be at least the phase's budget, %d", budget)))
		}
	}
	if ph.Kinds != nil && len(ph.Kinds) == 0 {
		allErrs = append(allErrs, field.Required(pp.Child("kinds"), "list at least one kind, or leave kinds unset for the phase's default"))
	}
	seen := map[PhaseKind]bool{}
	for i, k := range ph.Kinds {
		kp := pp.Child("kinds").Index(i)
		switch {
		case !slices.Contains(PhaseEntryKinds, string(k)):
			allErrs = append(allErrs, field.NotSupported(kp, k, PhaseEntryKinds))
		case seen[k]:
			allErrs = append(allErrs, field.Duplicate(kp, k))
		}
		seen[k] = true
	}
	lp := pp.Child("maxItemsPerKind")
	for _, k := range slices.Sorted(maps.Keys(ph.MaxItemsPerKind)) {
		if !slices.Contains(PhaseEntryKinds, k) {
			allErrs = append(allErrs, field.NotSupported(lp.Key(k), k, PhaseEntryKinds))
		}
		if n := ph.MaxItemsPerKind[k]; n < 0 {
			allErrs = append(allErrs, field.Invalid(lp.Key(k), n, "must be at least 0"))
		}
	}
	kp := pp.Child("kindPriorities")
	for _, k := range slices.Sorted(maps.Keys(ph.KindPriorities)) {
		if !slices.Contains(SessionEntryKinds, k) {
			allErrs = append(allErrs, field.NotSupported(kp.Key(k), k, SessionEntryKinds))
		}
		if v := ph.KindPriorities[k]; !validDedupThreshold(string(v)) {
			allErrs = append(allErrs, field.Invalid(kp.Key(k), string(v), `must be a decimal number from 0 to 1, such as "0.8"`))
		}
	}
	return allErrs
}

// ValidateFirewallKeep checks the keep-list: bounded rules whose tool globs
// path.Match accepts and whose paths parse (api.md §11.4). The session
// policy reads the list with it too.
func ValidateFirewallKeep(p *field.Path, rules []FirewallKeepRule) field.ErrorList {
	var allErrs field.ErrorList
	if len(rules) > MaxKeepRules {
		allErrs = append(allErrs, field.TooMany(p, len(rules), MaxKeepRules))
	}
	for i, r := range rules {
		rp := p.Index(i)
		tp, pp := rp.Child("tools"), rp.Child("paths")
		switch {
		case len(r.Tools) == 0:
			allErrs = append(allErrs, field.Required(tp, "at least one glob of tool names, such as \"payments.*\" (\"*\" for every tool)"))
		case len(r.Tools) > MaxKeepTools:
			allErrs = append(allErrs, field.TooMany(tp, len(r.Tools), MaxKeepTools))
		}
		for j, g := range r.Tools {
			if g == "" || len(g) > MaxKeepToolBytes {
				allErrs = append(allErrs, field.Invalid(tp.Index(j), g, fmt.Sprintf("must be 1 to %d bytes", MaxKeepToolBytes)))
			} else if _, err := path.Match(g, ""); err != nil {
				allErrs = append(allErrs, field.Invalid(tp.Index(j), g, "not a glob of path.Match (*, ?, [a-z], \\ to escape)"))
			}
		}
		switch {
		case len(r.Paths) == 0:
			allErrs = append(allErrs, field.Required(pp, "at least one JSON path, such as .status"))
		case len(r.Paths) > MaxKeepPaths:
			allErrs = append(allErrs, field.TooMany(pp, len(r.Paths), MaxKeepPaths))
		}
		for j, jp := range r.Paths {
			if jp == "" {
				allErrs = append(allErrs, field.Invalid(pp.Index(j), jp, `must not be empty: "." is the whole document`))
			} else if _, err := jsonpath.Parse(jp); err != nil {
				allErrs = append(allErrs, field.Invalid(pp.Index(j), jp, err.Error()))
			}
		}
	}
	return allErrs
}
