package controller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/sources"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// The functions in this file compute conditions from facts the reconcilers
// gather — above all the bundle's verdict on each object; they make no API
// calls, so each is covered by table tests. Computed conditions carry no
// LastTransitionTime: mergeConditions adds it, keeping the stored one while a
// condition's status does not change, so a reconcile that finds nothing new
// produces an identical status and no write.
//
// Who writes what:
//   - a ContextRouter's reconciler writes, on every route attached to it, its
//     own status.parents entry (Accepted, ResolvedRefs from the bundle's
//     verdict), and on every source it leaves out, its own status.excludedBy
//     entry; it leaves the other routers' entries alone;
//   - the ContextRoute reconciler writes the entries of routers named in
//     parentRefs that do not exist (NoMatchingParent) and drops the entries
//     of routers the route no longer attaches to;
//   - whoever writes a route's status recomputes its Ready from the entries
//     (routeReady); the ContextSource reconciler writes a source's Ready from
//     its own checks and status.excludedBy.

// routeEntry is the status.parents entry of router for a route, from the
// bundle's verdict on it. Problems with the route's references (a source
// missing or left out, an alternate route missing) make ResolvedRefs False;
// any other problem makes Accepted False.
func routeEntry(route *v1alpha1.ContextRoute, router string, v bundle.Verdict) v1alpha1.RouteParentStatus {
	gen := route.Generation
	var own, refs problem.List
	for _, p := range v.Problems {
		if p.Reason == v1alpha1.ReasonSourceNotFound || p.Reason == v1alpha1.ReasonInvalidSource || p.Reason == v1alpha1.ReasonAlternateNotFound {
			refs = append(refs, p)
		} else {
			own = append(own, p)
		}
	}
	accepted := newCondition(v1alpha1.ConditionAccepted, true, v1alpha1.ReasonAccepted, gen,
		fmt.Sprintf("Accepted by ContextRouter %q", router))
	if len(own) > 0 {
		accepted = newCondition(v1alpha1.ConditionAccepted, false, reasonOf(own), gen, own.Details())
	}
	resolved := newCondition(v1alpha1.ConditionResolvedRefs, true, v1alpha1.ReasonResolvedRefs, gen,
		"Every referenced ContextSource exists and is usable")
	if len(refs) > 0 {
		resolved = newCondition(v1alpha1.ConditionResolvedRefs, false, reasonOf(refs), gen, refs.Details())
	}
	return v1alpha1.RouteParentStatus{
		ParentRef:  v1alpha1.ParentReference{Name: router},
		Conditions: []metav1.Condition{accepted, resolved},
	}
}

// missingParentEntry is the status.parents entry of a router named in
// parentRefs that does not exist.
func missingParentEntry(route *v1alpha1.ContextRoute, router string) v1alpha1.RouteParentStatus {
	return v1alpha1.RouteParentStatus{
		ParentRef: v1alpha1.ParentReference{Name: router},
		Conditions: []metav1.Condition{newCondition(v1alpha1.ConditionAccepted, false, v1alpha1.ReasonNoMatchingParent,
			route.Generation, fmt.Sprintf("ContextRouter %q not found in namespace %q", router, route.Namespace))},
	}
}

// reasonOf is the reason of the first problem, InvalidSpec if it has none.
func reasonOf(ps problem.List) v1alpha1.ConditionReason {
	if len(ps) > 0 && ps[0].Reason != "" {
		return ps[0].Reason
	}
	return v1alpha1.ReasonInvalidSpec
}

// routeParentNames are the routers a route attaches to: the parentRefs names,
// or every router of the namespace when there are none; sorted.
func routeParentNames(route *v1alpha1.ContextRoute, routers []string) []string {
	names := route.ParentNames()
	if len(names) == 0 {
		names = slices.Clone(routers)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// findParent returns the entry of router, or nil.
func findParent(parents []v1alpha1.RouteParentStatus, router string) *v1alpha1.RouteParentStatus {
	for i := range parents {
		if parents[i].ParentRef.Name == router {
			return &parents[i]
		}
	}
	return nil
}

// failing reports whether an entry has a condition that is not True.
func failing(p v1alpha1.RouteParentStatus) bool {
	return slices.ContainsFunc(p.Conditions, func(c metav1.Condition) bool { return c.Status != metav1.ConditionTrue })
}

// setParent puts entry into parents (sorted by router name), keeping the
// transition times of conditions whose status did not change, and keeping
// the list within v1alpha1.MaxStatusParents: when it is full, an entry that
// reports a problem takes the place of the last entry that reports none,
// since a problem is what a reader must see. It reports whether parents
// changed.
func setParent(parents *[]v1alpha1.RouteParentStatus, entry v1alpha1.RouteParentStatus, now metav1.Time) bool {
	list := *parents
	if old := findParent(list, entry.ParentRef.Name); old != nil {
		entry.Conditions = mergeConditions(old.Conditions, entry.Conditions, now)
		if conditionsEqual(old.Conditions, entry.Conditions) {
			return false
		}
		old.Conditions = entry.Conditions
		return true
	}
	entry.Conditions = mergeConditions(nil, entry.Conditions, now)
	if len(list) >= v1alpha1.MaxStatusParents {
		if !failing(entry) {
			return false
		}
		i := len(list) - 1
		for i >= 0 && failing(list[i]) {
			i--
		}
		if i < 0 {
			return false
		}
		list = slices.Delete(slices.Clone(list), i, i+1)
	}
	i, _ := slices.BinarySearchFunc(list, entry.ParentRef.Name, func(p v1alpha1.RouteParentStatus, name string) int {
		return strings.Compare(p.ParentRef.Name, name)
	})
	*parents = slices.Insert(list, i, entry)
	return true
}

// removeParent drops the entry of router; it reports whether there was one.
func removeParent(parents *[]v1alpha1.RouteParentStatus, router string) bool {
	n := len(*parents)
	*parents = slices.DeleteFunc(*parents, func(p v1alpha1.RouteParentStatus) bool { return p.ParentRef.Name == router })
	return len(*parents) != n
}

// routeReady summarises a route's parents. routers are the ContextRouters of
// the namespace. True when every router the route attaches to exists and
// has an entry for the current generation with every condition True.
// Otherwise the reason is that of the first failing router (by name;
// Accepted before ResolvedRefs) — Pending for a router that has not judged
// this generation — and the message joins the distinct messages.
func routeReady(route *v1alpha1.ContextRoute, routers []string, parents []v1alpha1.RouteParentStatus) metav1.Condition {
	gen := route.Generation
	names := routeParentNames(route, routers)
	if len(names) == 0 {
		return newCondition(v1alpha1.ConditionReady, false, v1alpha1.ReasonNoMatchingParent, gen,
			fmt.Sprintf("No ContextRouter in namespace %q to attach to", route.Namespace))
	}
	var reason v1alpha1.ConditionReason
	var msgs []string
	fail := func(r v1alpha1.ConditionReason, msg string) {
		if reason == "" {
			reason = r
		}
		if !slices.Contains(msgs, msg) {
			msgs = append(msgs, msg)
		}
	}
	listed := 0
	for _, name := range names {
		if !slices.Contains(routers, name) {
			fail(v1alpha1.ReasonNoMatchingParent, fmt.Sprintf("ContextRouter %q not found in namespace %q", name, route.Namespace))
			continue
		}
		p := findParent(parents, name)
		switch {
		case p == nil && len(parents) >= v1alpha1.MaxStatusParents:
			// status.parents is full of other routers' entries; routers
			// with a problem take precedence there, so this one has none.
			continue
		case p == nil || slices.ContainsFunc(p.Conditions, func(c metav1.Condition) bool { return c.ObservedGeneration < gen }):
			fail(v1alpha1.ReasonPending, fmt.Sprintf("ContextRouter %q has not judged generation %d yet", name, gen))
			continue
		}
		listed++
		for _, typ := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionResolvedRefs} {
			if c := findCondition(p.Conditions, typ); c != nil && c.Status != metav1.ConditionTrue {
				fail(v1alpha1.ConditionReason(c.Reason), fmt.Sprintf("ContextRouter %q: %s", name, c.Message))
			}
		}
	}
	if reason == "" {
		return newCondition(v1alpha1.ConditionReady, true, v1alpha1.ReasonAccepted, gen,
			fmt.Sprintf("Accepted by %d ContextRouter(s) with all references resolved", listed))
	}
	return newCondition(v1alpha1.ConditionReady, false, reason, gen, strings.Join(msgs, "; "))
}

// routeStatus is the route reconciler's part of a route's status: entries
// for the routers named in parentRefs that do not exist, no entries for
// routers the route does not attach to (any more), the routers' own entries
// as they are, and Ready. It reports whether anything changed.
func routeStatus(route *v1alpha1.ContextRoute, routers []string, now metav1.Time) bool {
	st := &route.Status
	before := st.DeepCopy()
	names := routeParentNames(route, routers)
	for _, p := range slices.Clone(st.Parents) {
		if !slices.Contains(names, p.ParentRef.Name) {
			removeParent(&st.Parents, p.ParentRef.Name)
		}
	}
	for _, name := range names {
		if !slices.Contains(routers, name) {
			setParent(&st.Parents, missingParentEntry(route, name), now)
		} else if p := findParent(st.Parents, name); p != nil && len(p.Conditions) == 1 &&
			p.Conditions[0].Reason == string(v1alpha1.ReasonNoMatchingParent) {
			// The router exists now; its reconciler writes its own entry.
			removeParent(&st.Parents, name)
		}
	}
	setReady(route, routers, now)
	if statusEqual(before, st) {
		return false
	}
	// Waiting for routers is not worth a write of its own: the routers
	// write Ready with their entries, and until then the status describes
	// an older generation (or there is none), which reads as in progress.
	ready := findCondition(st.Conditions, v1alpha1.ConditionReady)
	return !(ready.Reason == string(v1alpha1.ReasonPending) && parentsEqual(before.Parents, st.Parents))
}

func parentsEqual(a, b []v1alpha1.RouteParentStatus) bool {
	return slices.EqualFunc(a, b, func(x, y v1alpha1.RouteParentStatus) bool {
		return x.ParentRef == y.ParentRef && conditionsEqual(x.Conditions, y.Conditions)
	})
}

// setReady recomputes a route's Ready and observedGeneration.
func setReady(route *v1alpha1.ContextRoute, routers []string, now metav1.Time) {
	st := &route.Status
	st.ObservedGeneration = route.Generation
	st.Conditions = mergeConditions(st.Conditions, []metav1.Condition{routeReady(route, routers, st.Parents)}, now)
}

func statusEqual(a, b *v1alpha1.ContextRouteStatus) bool {
	return a.ObservedGeneration == b.ObservedGeneration && conditionsEqual(a.Conditions, b.Conditions) && parentsEqual(a.Parents, b.Parents)
}

func conditionsEqual(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			x.ObservedGeneration == y.ObservedGeneration && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
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

// secretProblems reports (through add) a Secret that secrets, a Secret
// name → its data keys, does not hold, or that lacks the keys read from it:
// all of them, or with anyOf one of them.
func secretProblems(secrets map[string][]string, path, name string, keys []string, anyOf bool,
	add func(reason v1alpha1.ConditionReason, path, format string, args ...any)) {
	have, ok := secrets[name]
	switch {
	case !ok:
		add(v1alpha1.ReasonSecretNotFound, path, "Secret %q not found", name)
	case anyOf && !slices.ContainsFunc(keys, func(k string) bool { return slices.Contains(have, k) }):
		add(v1alpha1.ReasonSecretNotFound, path, "Secret %q has none of the keys %s", name, quoteList(keys, "or"))
	case !anyOf:
		for _, k := range keys {
			if !slices.Contains(have, k) {
				add(v1alpha1.ReasonSecretNotFound, path, "Secret %q has no key %q", name, k)
			}
		}
	}
}

// routerSecretProblems lists the router's own Secret keys that secrets (a
// Secret name → its data keys) lacks.
func routerSecretProblems(r *v1alpha1.ContextRouter, secrets map[string][]string) problem.List {
	var out problem.List
	add := func(reason v1alpha1.ConditionReason, path, format string, args ...any) {
		out = append(out, problem.Errorf(reason, v1alpha1.KindContextRouter, r.Name, path, format, args...))
	}
	for _, ref := range r.SecretRefs() {
		secretProblems(secrets, ref.Field, ref.Name, []string{ref.Key}, false, add)
	}
	return out
}

// sourceRefProblems lists, in spec order, the Secrets, Secret keys,
// ConfigMaps and PersistentVolumeClaims the source references that lookup
// does not hold.
func sourceRefProblems(src *v1alpha1.ContextSource, lookup sourceLookup) problem.List {
	var out problem.List
	add := func(reason v1alpha1.ConditionReason, path, format string, args ...any) {
		p := problem.Errorf(reason, v1alpha1.KindContextSource, src.Name, path, format, args...)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	secret := func(path, name string, keys []string, anyOf bool) {
		secretProblems(lookup.secrets, path, name, keys, anyOf, add)
	}
	for _, b := range src.HeaderBlocks() {
		for i, hd := range b.Headers {
			if hd.ValueFrom == nil {
				continue
			}
			ref := hd.ValueFrom.SecretKeyRef
			secret(fmt.Sprintf("%s.headers[%d].valueFrom.secretKeyRef", b.Path, i), ref.Name, []string{ref.Key}, false)
		}
	}
	if g, at := src.GitRepoBlock(); g != nil && g.Auth != nil {
		secret(at+".auth.secretRef", g.Auth.SecretRef.Name, gitAuthKeys, true)
	}
	if d, at := src.DirectoryBlock(); d != nil && d.Volume != nil {
		if cm := d.Volume.ConfigMap; cm != nil && !lookup.configMaps[cm.Name] {
			add(v1alpha1.ReasonConfigMapNotFound, at+".volume.configMap", "ConfigMap %q not found", cm.Name)
		}
		if pvc := d.Volume.PersistentVolumeClaim; pvc != nil && !lookup.pvcs[pvc.ClaimName] {
			add(v1alpha1.ReasonPersistentVolumeClaimNotFound, at+".volume.persistentVolumeClaim",
				"PersistentVolumeClaim %q not found", pvc.ClaimName)
		}
	}
	return out
}

// sourceSpecProblems is what is wrong with a source's spec on its own, the
// same check every bundle makes: the engine's per-object check (Validate and
// the source factory, which checks what the schema cannot without reading
// anything), then whether a router pod can mount its volume.
func sourceSpecProblems(src *v1alpha1.ContextSource) problem.List {
	c := src.DeepCopy()
	c.Default()
	if errs := engine.CheckSource(c); len(errs) > 0 {
		return problem.FromFieldErrors(v1alpha1.KindContextSource, c.Name, errs, v1alpha1.ReasonInvalidSpec)
	}
	return bundle.MountProblems(c)
}

// sourceReady is a source's Ready condition. Its own problems come first
// (spec, then references): their reason, every problem in the message. Then
// the routers that leave it out, from status.excludedBy. Else Valid.
func sourceReady(gen int64, own problem.List, excluded []v1alpha1.SourceExclusion) metav1.Condition {
	if len(own) > 0 {
		return newCondition(v1alpha1.ConditionReady, false, reasonOf(own), gen, own.Details())
	}
	if len(excluded) > 0 {
		msgs := make([]string, len(excluded))
		for i, e := range excluded {
			msgs[i] = fmt.Sprintf("left out by ContextRouter %q: %s", e.Router, e.Message)
		}
		return newCondition(v1alpha1.ConditionReady, false, excluded[0].Reason, gen, strings.Join(msgs, "; "))
	}
	return newCondition(v1alpha1.ConditionReady, true, v1alpha1.ReasonValid, gen,
		"Spec is valid, every referenced object exists, and no ContextRouter leaves it out")
}

// sourceStatus sets a source's Ready and observedGeneration, and drops the
// excludedBy entries of routers that do not exist. It reports whether the
// status changed.
func sourceStatus(src *v1alpha1.ContextSource, own problem.List, routers []string, now metav1.Time) bool {
	st := &src.Status
	before := st.DeepCopy()
	st.ExcludedBy = slices.DeleteFunc(st.ExcludedBy, func(e v1alpha1.SourceExclusion) bool { return !slices.Contains(routers, e.Router) })
	if len(st.ExcludedBy) == 0 {
		st.ExcludedBy = nil
	}
	st.ObservedGeneration = src.Generation
	st.Conditions = mergeConditions(st.Conditions, []metav1.Condition{sourceReady(src.Generation, own, st.ExcludedBy)}, now)
	return before.ObservedGeneration != st.ObservedGeneration || !conditionsEqual(before.Conditions, st.Conditions) ||
		!slices.Equal(before.ExcludedBy, st.ExcludedBy)
}

// sourceExclusion is router's excludedBy entry for a source it left out for a
// problem of the source's own (nil when it did not).
func sourceExclusion(src *v1alpha1.ContextSource, router string, v bundle.Verdict) *v1alpha1.SourceExclusion {
	if v.Included || len(v.Problems) == 0 {
		return nil
	}
	return &v1alpha1.SourceExclusion{Router: router, Reason: reasonOf(v.Problems),
		Message: truncateMessage(v.Problems.Details()), ObservedGeneration: src.Generation}
}

// setExclusion puts router's entry (nil: none) into a source's excludedBy,
// sorted by router and within v1alpha1.MaxStatusParents (a full list leaves
// a new entry out: Ready is False already). It reports whether it changed.
func setExclusion(list *[]v1alpha1.SourceExclusion, router string, entry *v1alpha1.SourceExclusion) bool {
	i := slices.IndexFunc(*list, func(e v1alpha1.SourceExclusion) bool { return e.Router == router })
	switch {
	case entry == nil && i < 0:
		return false
	case entry == nil:
		*list = slices.Delete(*list, i, i+1)
		if len(*list) == 0 {
			*list = nil
		}
		return true
	case i >= 0:
		if (*list)[i] == *entry {
			return false
		}
		(*list)[i] = *entry
		return true
	case len(*list) >= v1alpha1.MaxStatusParents:
		return false
	}
	at, _ := slices.BinarySearchFunc(*list, router, func(e v1alpha1.SourceExclusion, r string) int { return strings.Compare(e.Router, r) })
	*list = slices.Insert(*list, at, *entry)
	return true
}

// permissionMissingSources lists the allowSources, denySources and
// sourceDenyPaths names that are not in exists, sorted and without duplicates.
func permissionMissingSources(p *v1alpha1.AgentPermission, exists map[string]bool) []string {
	var missing []string
	for _, n := range p.SourceNames() {
		if !exists[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// resolvedRefsCondition is ResolvedRefs for a list of missing ContextSources.
func resolvedRefsCondition(gen int64, missing []string) metav1.Condition {
	missing = slices.Compact(slices.Sorted(slices.Values(missing)))
	switch len(missing) {
	case 0:
		return newCondition(v1alpha1.ConditionResolvedRefs, true, v1alpha1.ReasonResolvedRefs, gen, "All referenced ContextSources exist")
	case 1:
		return newCondition(v1alpha1.ConditionResolvedRefs, false, v1alpha1.ReasonSourceNotFound, gen,
			fmt.Sprintf("ContextSource %q not found", missing[0]))
	default:
		return newCondition(v1alpha1.ConditionResolvedRefs, false, v1alpha1.ReasonSourceNotFound, gen,
			"ContextSources "+quoteList(missing, "and")+" not found")
	}
}

// permissionConditions are a permission's ResolvedRefs and Ready.
//
// Ready says whether the permission does its job, and a permission naming a
// source that does not exist (yet) still does: the engine applies it to the
// sources that exist, and a deny of a missing source denies nothing that
// could be read. So Ready depends on the spec alone — checked with the same
// per-object check the bundle makes, so a permission that stops its routers'
// bundles is never Ready — and a missing source shows as ResolvedRefs=False
// beside Ready=True; GitOps tools, which watch Ready, do not block on
// objects applied in a different order.
func permissionConditions(p *v1alpha1.AgentPermission, missing []string) []metav1.Condition {
	gen := p.Generation
	c := p.DeepCopy()
	c.Default()
	ready := newCondition(v1alpha1.ConditionReady, true, v1alpha1.ReasonValid, gen, "Spec is valid")
	if errs := engine.CheckPermission(c); len(errs) > 0 {
		ps := problem.FromFieldErrors(v1alpha1.KindAgentPermission, c.Name, errs, v1alpha1.ReasonInvalidSpec)
		ready = newCondition(v1alpha1.ConditionReady, false, v1alpha1.ReasonInvalidSpec, gen, ps.Details())
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

// maxConditionMessage is the schema limit of metav1.Condition.message (and
// of SourceExclusion.message).
const maxConditionMessage = 32768

// truncateMessage cuts msg to maxConditionMessage at a rune boundary and says
// so, rather than have the API server refuse the status.
func truncateMessage(msg string) string {
	if len(msg) <= maxConditionMessage {
		return msg
	}
	const more = " …(truncated)"
	return textutil.CutBytes(msg, maxConditionMessage-len(more), more)
}

func newCondition(typ string, ok bool, reason v1alpha1.ConditionReason, gen int64, msg string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: string(reason), Message: truncateMessage(msg), ObservedGeneration: gen}
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
