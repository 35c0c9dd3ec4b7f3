package controller

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// Condition reasons of the ContextRoute, ContextSource and AgentPermission
// status. Route reasons follow Gateway API route status.
const (
	// ReasonAccepted: the route's condition compiles and a router it names exists.
	ReasonAccepted = "Accepted"
	// ReasonInvalidCondition: spec.when does not compile; the message is the CEL error.
	ReasonInvalidCondition = "InvalidCondition"
	// ReasonNoMatchingParent: a parentRef names no ContextRouter, or the
	// namespace has no router for the route to attach to.
	ReasonNoMatchingParent = "NoMatchingParent"
	// ReasonResolvedRefs: every referenced ContextSource exists.
	ReasonResolvedRefs = "ResolvedRefs"
	// ReasonSourceNotFound: a referenced ContextSource does not exist.
	ReasonSourceNotFound = "SourceNotFound"
	// ReasonValid: the spec is valid and everything it needs exists.
	ReasonValid = "Valid"
	// ReasonInvalidSpec: the spec fails validation or the source factory refuses it.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound: a Secret, or a key of it, that the source reads does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonConfigMapNotFound: the ConfigMap of spec.directory.volume does not exist.
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	// ReasonPersistentVolumeClaimNotFound: the claim of spec.directory.volume does not exist.
	ReasonPersistentVolumeClaimNotFound = "PersistentVolumeClaimNotFound"
)

// The functions in this file compute conditions from facts the reconcilers
// gather; they make no API calls, so each is covered by table tests. Computed
// conditions carry no LastTransitionTime: mergeConditions adds it, keeping the
// stored one while a condition's status does not change, so a reconcile that
// finds nothing new produces an identical status and no write.

// routeFacts is what a route's status depends on besides its spec.
type routeFacts struct {
	// routers are the ContextRouters in the route's namespace, in any order.
	routers []string
	// conditionErr is engine.CompileCondition's error for spec.when.
	conditionErr error
	// missingSources are spec.sources names with no ContextSource.
	missingSources []string
}

// routeParents returns one entry per router the route attaches to: every
// router named in parentRefs (an entry with Accepted=False NoMatchingParent
// when it does not exist), or every router in the namespace when parentRefs is
// empty; sorted by router name.
func routeParents(route *v1alpha1.ContextRoute, f routeFacts) []v1alpha1.RouteParentStatus {
	existing := make(map[string]bool, len(f.routers))
	for _, r := range f.routers {
		existing[r] = true
	}
	var names []string
	if len(route.Spec.ParentRefs) == 0 {
		names = slices.Clone(f.routers)
	} else {
		for _, ref := range route.Spec.ParentRefs {
			names = append(names, ref.Name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)

	gen := route.Generation
	resolved := resolvedRefsCondition(gen, f.missingSources)
	parents := make([]v1alpha1.RouteParentStatus, 0, len(names))
	for _, name := range names {
		var accepted metav1.Condition
		switch {
		case !existing[name]:
			accepted = newCondition(v1alpha1.ConditionAccepted, false, ReasonNoMatchingParent, gen,
				fmt.Sprintf("ContextRouter %q not found in namespace %q", name, route.Namespace))
		case f.conditionErr != nil:
			accepted = newCondition(v1alpha1.ConditionAccepted, false, ReasonInvalidCondition, gen,
				"spec.when: "+f.conditionErr.Error())
		default:
			accepted = newCondition(v1alpha1.ConditionAccepted, true, ReasonAccepted, gen,
				fmt.Sprintf("Attached to ContextRouter %q", name))
		}
		parents = append(parents, v1alpha1.RouteParentStatus{
			ParentRef:  v1alpha1.ParentReference{Name: name},
			Conditions: []metav1.Condition{accepted, resolved},
		})
	}
	return parents
}

// resolvedRefsCondition is ResolvedRefs for a list of missing ContextSources.
func resolvedRefsCondition(gen int64, missing []string) metav1.Condition {
	missing = slices.Compact(slices.Sorted(slices.Values(missing)))
	switch len(missing) {
	case 0:
		return newCondition(v1alpha1.ConditionResolvedRefs, true, ReasonResolvedRefs, gen, "All referenced ContextSources exist")
	case 1:
		return newCondition(v1alpha1.ConditionResolvedRefs, false, ReasonSourceNotFound, gen,
			fmt.Sprintf("ContextSource %q not found", missing[0]))
	default:
		return newCondition(v1alpha1.ConditionResolvedRefs, false, ReasonSourceNotFound, gen,
			"ContextSources "+quoteList(missing, "and")+" not found")
	}
}

// routeReady summarises the parents: True when every parent has Accepted and
// ResolvedRefs True. Otherwise the reason is that of the first failing
// condition (parents in order, Accepted before ResolvedRefs) and the message
// joins the distinct messages of all failing conditions.
func routeReady(route *v1alpha1.ContextRoute, parents []v1alpha1.RouteParentStatus) metav1.Condition {
	gen := route.Generation
	if len(parents) == 0 {
		return newCondition(v1alpha1.ConditionReady, false, ReasonNoMatchingParent, gen,
			fmt.Sprintf("No ContextRouter in namespace %q to attach to", route.Namespace))
	}
	var reason string
	var msgs []string
	for _, p := range parents {
		for _, typ := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionResolvedRefs} {
			c := findCondition(p.Conditions, typ)
			if c == nil || c.Status == metav1.ConditionTrue {
				continue
			}
			if reason == "" {
				reason = c.Reason
			}
			if !slices.Contains(msgs, c.Message) {
				msgs = append(msgs, c.Message)
			}
		}
	}
	if reason == "" {
		return newCondition(v1alpha1.ConditionReady, true, ReasonAccepted, gen,
			fmt.Sprintf("Accepted by %d ContextRouter(s) with all references resolved", len(parents)))
	}
	return newCondition(v1alpha1.ConditionReady, false, reason, gen, strings.Join(msgs, "; "))
}

// routeStatus is the complete new status of a route, keeping the transition
// times of conditions whose status did not change since old.
func routeStatus(route *v1alpha1.ContextRoute, f routeFacts, now metav1.Time) v1alpha1.ContextRouteStatus {
	old := &route.Status
	parents := routeParents(route, f)
	out := v1alpha1.ContextRouteStatus{ObservedGeneration: route.Generation}
	for _, p := range parents {
		var prev []metav1.Condition
		for _, op := range old.Parents {
			if op.ParentRef.Name == p.ParentRef.Name {
				prev = op.Conditions
				break
			}
		}
		p.Conditions = mergeConditions(prev, p.Conditions, now)
		out.Parents = append(out.Parents, p)
	}
	out.Conditions = mergeConditions(old.Conditions, []metav1.Condition{routeReady(route, parents)}, now)
	return out
}

// sourceLookup holds the objects a source may reference, as found in its
// namespace. A name that is absent from a map does not exist.
type sourceLookup struct {
	// secrets maps a Secret name to its data keys.
	secrets map[string][]string
	// configMaps holds the ConfigMaps that exist.
	configMaps map[string]bool
	// pvcs holds the PersistentVolumeClaims that exist.
	pvcs map[string]bool
}

// gitAuthKeys are the keys sources.GitRepo reads from spec.gitRepo.auth.secretRef.
// Which of them a repository needs depends on its transport (ssh-privatekey
// for ssh; token, or username and password, for http); a Secret with none of
// them cannot authenticate anything.
var gitAuthKeys = []string{sources.GitSecretToken, sources.GitSecretUsername, sources.GitSecretPassword, sources.GitSecretSSHKey}

// sourceRefProblem is one missing object or key.
type sourceRefProblem struct {
	reason  string
	message string
}

// sourceRefProblems lists, in spec order, the Secrets, Secret keys,
// ConfigMaps and PersistentVolumeClaims the source references that lookup
// does not hold.
func sourceRefProblems(src *v1alpha1.ContextSource, lookup sourceLookup) []sourceRefProblem {
	var out []sourceRefProblem
	add := func(reason, format string, args ...any) {
		p := sourceRefProblem{reason: reason, message: fmt.Sprintf(format, args...)}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	secret := func(field, name string, keys []string, anyOf bool) {
		have, ok := lookup.secrets[name]
		switch {
		case !ok:
			add(ReasonSecretNotFound, "%s: Secret %q not found", field, name)
		case anyOf && !slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(have, k) }):
			add(ReasonSecretNotFound, "%s: Secret %q has none of the keys %s", field, name, quoteList(keys, "or"))
		case !anyOf:
			for _, k := range keys {
				if !slices.Contains(have, k) {
					add(ReasonSecretNotFound, "%s: Secret %q has no key %q", field, name, k)
				}
			}
		}
	}
	s := &src.Spec
	if h := s.HTTPAPI; h != nil {
		for i, hd := range h.Headers {
			if hd.ValueFrom == nil {
				continue
			}
			ref := hd.ValueFrom.SecretKeyRef
			secret(fmt.Sprintf("spec.httpAPI.headers[%d].valueFrom.secretKeyRef", i), ref.Name, []string{ref.Key}, false)
		}
	}
	if g := s.GitRepo; g != nil && g.Auth != nil {
		secret("spec.gitRepo.auth.secretRef", g.Auth.SecretRef.Name, gitAuthKeys, true)
	}
	if d := s.Directory; d != nil && d.Volume != nil {
		if cm := d.Volume.ConfigMap; cm != nil && !lookup.configMaps[cm.Name] {
			add(ReasonConfigMapNotFound, "spec.directory.volume.configMap: ConfigMap %q not found", cm.Name)
		}
		if pvc := d.Volume.PersistentVolumeClaim; pvc != nil && !lookup.pvcs[pvc.ClaimName] {
			add(ReasonPersistentVolumeClaimNotFound, "spec.directory.volume.persistentVolumeClaim: PersistentVolumeClaim %q not found", pvc.ClaimName)
		}
	}
	return out
}

// sourceSpecError is the first thing wrong with the spec itself: v1alpha1
// validation of a defaulted copy, then the source factory (sources.New), which
// checks what the schema cannot (URL templates, JSON bodies, field paths). The
// factory gets an environment without secrets, variables or a base folder and
// the source is never loaded, so nothing is read or fetched.
func sourceSpecError(src *v1alpha1.ContextSource) error {
	c := src.DeepCopy()
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return errs.ToAggregate()
	}
	_, err := sources.New(c, sources.Env{
		CacheDir:    os.TempDir(),
		Secrets:     noSecrets{},
		Getenv:      func(string) string { return "" },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		CountTokens: func(s string) int { return (len(s) + 3) / 4 },
	})
	return err
}

// noSecrets resolves no secret; the factories only store the resolver.
type noSecrets struct{}

func (noSecrets) SecretValue(name, key string) (string, error) {
	return "", fmt.Errorf("secret %s key %s: %w", name, key, sources.ErrSecretNotFound)
}

// sourceReady is a source's Ready condition: InvalidSpec for specErr, else
// the reason of the first reference problem with every problem in the
// message, else Valid.
func sourceReady(gen int64, specErr error, problems []sourceRefProblem) metav1.Condition {
	if specErr != nil {
		return newCondition(v1alpha1.ConditionReady, false, ReasonInvalidSpec, gen, specErr.Error())
	}
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.message
		}
		return newCondition(v1alpha1.ConditionReady, false, problems[0].reason, gen, strings.Join(msgs, "; "))
	}
	return newCondition(v1alpha1.ConditionReady, true, ReasonValid, gen, "Spec is valid and every referenced object exists")
}

// sourceStatus is the complete new status of a source.
func sourceStatus(src *v1alpha1.ContextSource, specErr error, problems []sourceRefProblem, now metav1.Time) v1alpha1.ContextSourceStatus {
	return v1alpha1.ContextSourceStatus{
		ObservedGeneration: src.Generation,
		Conditions: mergeConditions(src.Status.Conditions,
			[]metav1.Condition{sourceReady(src.Generation, specErr, problems)}, now),
	}
}

// permissionMissingSources lists the allowSources and denySources names that
// are not in exists, sorted and without duplicates.
func permissionMissingSources(p *v1alpha1.AgentPermission, exists map[string]bool) []string {
	var missing []string
	for _, n := range slices.Concat(p.Spec.AllowSources, p.Spec.DenySources) {
		if !exists[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// permissionConditions are a permission's ResolvedRefs and Ready.
//
// Ready says whether the permission does its job, and a permission naming a
// source that does not exist (yet) still does: the engine applies it to the
// sources that exist, and a deny of a missing source denies nothing that
// could be read. So Ready depends on the spec alone, and a missing source
// shows as ResolvedRefs=False beside Ready=True; GitOps tools, which watch
// Ready, do not block on objects applied in a different order.
func permissionConditions(p *v1alpha1.AgentPermission, missing []string) []metav1.Condition {
	gen := p.Generation
	c := p.DeepCopy()
	c.Default()
	ready := newCondition(v1alpha1.ConditionReady, true, ReasonValid, gen, "Spec is valid")
	if errs := c.Validate(); len(errs) > 0 {
		ready = newCondition(v1alpha1.ConditionReady, false, ReasonInvalidSpec, gen, errs.ToAggregate().Error())
	}
	return []metav1.Condition{resolvedRefsCondition(gen, missing), ready}
}

// permissionStatus is the complete new status of a permission.
func permissionStatus(p *v1alpha1.AgentPermission, missing []string, now metav1.Time) v1alpha1.AgentPermissionStatus {
	return v1alpha1.AgentPermissionStatus{
		ObservedGeneration: p.Generation,
		Conditions:         mergeConditions(p.Status.Conditions, permissionConditions(p, missing), now),
	}
}

// mergeConditions returns desired (in its order, and only its types) with
// LastTransitionTime taken from the same type in old when the status is
// unchanged and set to now otherwise.
func mergeConditions(old, desired []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(desired))
	for _, c := range desired {
		c.LastTransitionTime = now
		if prev := findCondition(old, c.Type); prev != nil && prev.Status == c.Status && !prev.LastTransitionTime.IsZero() {
			c.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, c)
	}
	return out
}

// maxConditionMessage is the schema limit of metav1.Condition.message.
const maxConditionMessage = 32768

func newCondition(typ string, ok bool, reason string, gen int64, msg string) metav1.Condition {
	if len(msg) > maxConditionMessage {
		// Cut at a rune boundary and say so, rather than have the API server refuse the status.
		const more = " …(truncated)"
		cut := maxConditionMessage - len(more)
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + more
	}
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// quoteList renders names as "a", "b" <conj> "c".
func quoteList(names []string, conj string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " " + conj + " " + q[len(q)-1]
}
