package v1alpha1

import (
	"fmt"
	"maps"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/internal/jsonpath"
	"github.com/contextrouter/contextrouter/internal/redact"
)

var sessionStores = []SessionStoreType{SessionStoreMemory, SessionStoreRedis}

func validateSessions(p *field.Path, s *SessionsSpec) field.ErrorList {
	allErrs := validateEnum(p.Child("store"), s.Store, sessionStores)
	if errs := validatePositiveDuration(p.Child("ttl"), s.TTL); len(errs) > 0 {
		allErrs = append(allErrs, errs...)
	} else if s.TTL.Duration < MinSessionTTL || s.TTL.Duration > MaxSessionTTL {
		allErrs = append(allErrs, field.Invalid(p.Child("ttl"), s.TTL.Duration.String(), "ttl must be between 1m and 720h"))
	}
	if s.MaxSessions < 1 || s.MaxSessions > MaxSessionsLimit {
		allErrs = append(allErrs, field.Invalid(p.Child("maxSessions"), s.MaxSessions, fmt.Sprintf("must be between 1 and %d", MaxSessionsLimit)))
	}
	allErrs = append(allErrs, validatePositiveQuantity(p.Child("maxBytes"), s.MaxBytes)...)
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

func validatePhases(p *field.Path, ps *PhasesSpec) field.ErrorList {
	var allErrs field.ErrorList
	for _, ph := range []struct {
		name string
		spec *PhaseSpec
	}{{"route", ps.Route}, {"call", ps.Call}, {"interpret", ps.Interpret}, {"answer", ps.Answer}} {
		if ph.spec == nil {
			continue
		}
		pp := p.Child(ph.name)
		if b := ph.spec.Budget; b != nil && (*b < 1 || *b > MaxPhaseBudget) {
			allErrs = append(allErrs, field.Invalid(pp.Child("budget"), *b, fmt.Sprintf("must be between 1 and %d", MaxPhaseBudget)))
		}
		kp := pp.Child("kindPriorities")
		for _, k := range slices.Sorted(maps.Keys(ph.spec.KindPriorities)) {
			v := ph.spec.KindPriorities[k]
			if !slices.Contains(SessionEntryKinds, k) {
				allErrs = append(allErrs, field.NotSupported(kp.Key(k), k, SessionEntryKinds))
			}
			if !validDedupThreshold(string(v)) {
				allErrs = append(allErrs, field.Invalid(kp.Key(k), string(v), `must be a decimal number from 0 to 1, such as "0.8"`))
			}
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
