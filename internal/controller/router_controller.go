package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

// RouterReconciler turns a ContextRouter and what is attached to it into a
// running router: it compiles the bundle (ConfigMap <router>-bundle) and owns
// the Deployment, Service and ServiceAccount that serve it, plus the
// ClusterRoleBinding that auth.mode ServiceAccountToken needs.
//
// Reconcile is short: fetch, defer the status patch, run the phases in
// order. Each phase records facts in a routerScope; the deferred patch turns
// them into conditions with the pure functions of conditions_router.go.
//
// The bundle's verdict is also the status of what hangs off the router: the
// reconciler writes the router's entry in status.parents of every attached
// route and in status.excludedBy of every source it leaves out (writeVerdicts).
type RouterReconciler struct {
	Client client.Client
	// RouterImage runs routers whose spec.deployment.image is empty.
	RouterImage string
	// Recorder receives events; SetupWithManager sets the manager's when nil.
	Recorder events.EventRecorder

	// live reads from the API server: a route or source again after a write
	// conflict, and the data of document ConfigMaps, which no cache holds.
	// Set by SetupWithManager (Client when nil).
	live client.Reader
	// namespaces limits the document ConfigMap cache (Options.Namespaces).
	namespaces []string
}

// verdictWriters bounds the concurrent status writes of one reconcile.
const verdictWriters = 8

// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters/finalizers,verbs=update
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextroutes;contextsources;agentpermissions,verbs=get;list;watch
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextroutes/status;contextsources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=system:auth-delegator
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// bundleCompileSeconds observes how long bundle.Build takes (load and compile).
var bundleCompileSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "contextrouter_operator_bundle_compile_seconds",
	Help:    "Time to build and compile one ContextRouter bundle.",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
})

func init() { metrics.Registry.MustRegister(bundleCompileSeconds) }

// routerScope carries one reconcile's facts from phase to phase.
type routerScope struct {
	router *v1alpha1.ContextRouter
	before *v1alpha1.ContextRouter
	in     bundle.Input
	facts  routerFacts
	// concluded is set once the facts describe the current generation; a
	// reconcile cut short by an unexpected error leaves conditions alone.
	concluded bool
	// programmed is set when the bundle and workload were written.
	programmed bool
}

// phase is one step of Reconcile; it returns false to stop.
type phase func(context.Context, *routerScope) (bool, error)

// Reconcile brings one router's bundle and workload up to date.
func (r *RouterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	router := &v1alpha1.ContextRouter{}
	if err := r.Client.Get(ctx, req.NamespacedName, router); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.forget(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	if !router.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, router)
	}
	s := &routerScope{router: router, before: router.DeepCopy()}
	defer func() {
		if err := r.patchStatus(ctx, s); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
		if err := r.writeVerdicts(ctx, s); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	for _, p := range []phase{r.checkName, r.checkSecrets, r.gather, r.build, r.writeBundle, r.writeWorkload} {
		if ok, err := p(ctx, s); err != nil || !ok {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// checkName refuses names that cannot name the router's Service.
func (r *RouterReconciler) checkName(_ context.Context, s *routerScope) (bool, error) {
	s.facts.Replicas = replicas(s.router)
	if p := routerNameProblem(s.router.Name); p != "" {
		s.facts.NameProblem = p
		s.concluded = true
		return false, nil
	}
	return true, nil
}

// checkSecrets looks up the Secrets the router reads for itself (the
// Redis password). They are read from the API server: the cache holds
// Secrets as metadata only, and a missing key matters as much as a missing
// Secret. Values are never kept, only key names.
func (r *RouterReconciler) checkSecrets(ctx context.Context, s *routerScope) (bool, error) {
	have := map[string][]string{}
	for _, ref := range s.router.SecretRefs() {
		if _, done := have[ref.Name]; done {
			continue
		}
		sec := &corev1.Secret{}
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: s.router.Namespace, Name: ref.Name}, sec)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("get Secret %s/%s: %w", s.router.Namespace, ref.Name, err)
		default:
			have[ref.Name] = slices.Sorted(maps.Keys(sec.Data))
		}
	}
	s.facts.SecretProblems = routerSecretProblems(s.router, have)
	return true, nil
}

// gather collects the attached routes, the sources they name and the
// permissions that apply, all from the cache through field indexes.
func (r *RouterReconciler) gather(ctx context.Context, s *routerScope) (bool, error) {
	ns, name := s.router.Namespace, s.router.Name
	s.in.Router = s.router
	for _, key := range []string{name, AllParents} {
		var routes v1alpha1.ContextRouteList
		if err := r.Client.List(ctx, &routes, client.InNamespace(ns), client.MatchingFields{IndexRouteParents: key}); err != nil {
			return false, fmt.Errorf("list ContextRoutes of %s/%s: %w", ns, name, err)
		}
		s.in.Routes = append(s.in.Routes, routes.Items...)
		var perms v1alpha1.AgentPermissionList
		if err := r.Client.List(ctx, &perms, client.InNamespace(ns), client.MatchingFields{IndexPermissionParents: key}); err != nil {
			return false, fmt.Errorf("list AgentPermissions of %s/%s: %w", ns, name, err)
		}
		s.in.Permissions = append(s.in.Permissions, perms.Items...)
	}
	classifiers, err := attachedClassifiers(ctx, r.Client, ns, name)
	if err != nil {
		return false, err
	}
	s.in.Classifiers = classifiers
	wanted := make(map[string]bool)
	for _, rt := range s.in.Routes {
		for _, ref := range rt.Spec.Sources {
			wanted[ref.Name] = true
		}
	}
	for _, c := range s.in.Classifiers {
		for _, n := range c.SourceNames() {
			wanted[n] = true
		}
	}
	names := make([]string, 0, len(wanted))
	for n := range wanted {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		src := &v1alpha1.ContextSource{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, src)
		switch {
		case apierrors.IsNotFound(err):
			// The bundle leaves out the routes that name it.
		case err != nil:
			return false, fmt.Errorf("get ContextSource %s/%s: %w", ns, n, err)
		default:
			s.in.Sources = append(s.in.Sources, *src)
		}
	}
	return true, nil
}

// build compiles the bundle and judges every object.
func (r *RouterReconciler) build(ctx context.Context, s *routerScope) (bool, error) {
	b, err := bundle.Build(ctx, s.in)
	if err != nil {
		return false, fmt.Errorf("build the bundle of %s/%s: %w", s.router.Namespace, s.router.Name, err)
	}
	bundleCompileSeconds.Observe(b.CompileTime.Seconds())
	s.facts.Bundle = b
	s.concluded = true
	// A refused bundle, or one that does not fit (refused here rather than
	// by the API server), is not written: the last good one keeps serving.
	return len(b.Refused) == 0 && !b.TooLarge(), nil
}

// writeBundle applies the bundle ConfigMap.
func (r *RouterReconciler) writeBundle(ctx context.Context, s *routerScope) (bool, error) {
	if err := r.apply(ctx, desiredBundleConfigMap(s.router, s.facts.Bundle)); err != nil {
		s.facts.ApplyErr = err
		return false, err
	}
	return true, nil
}

// writeWorkload applies the ServiceAccount, the TokenReview binding, the
// Deployment and the Service, and removes those the spec no longer wants.
func (r *RouterReconciler) writeWorkload(ctx context.Context, s *routerScope) (bool, error) {
	router := s.router
	fail := func(err error) (bool, error) {
		s.facts.ApplyErr = err
		return false, err
	}
	if managesServiceAccount(router) {
		if err := r.apply(ctx, desiredServiceAccount(router)); err != nil {
			return fail(err)
		}
	} else if err := r.deleteOwnedServiceAccount(ctx, router); err != nil {
		return fail(err)
	}

	if usesTokenReview(router) {
		if err := r.addFinalizer(ctx, s); err != nil {
			return fail(err)
		}
		if err := r.apply(ctx, desiredTokenReviewBinding(router)); err != nil {
			return fail(err)
		}
	} else if err := r.removeClusterResources(ctx, router); err != nil {
		return fail(err)
	}

	if err := r.writeToolStatusRBAC(ctx, router, reportsToolStatus(s.facts.Bundle)); err != nil {
		return fail(err)
	}

	hash, err := r.inputsHash(ctx, router.Namespace, s.facts.Bundle)
	if err != nil {
		return fail(err)
	}
	dep := desiredDeployment(router, s.facts.Bundle, r.RouterImage, hash)
	applied, err := r.applyAndRead(ctx, dep)
	if err != nil {
		return fail(err)
	}
	s.facts.Deployment = &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, s.facts.Deployment); err != nil {
		return fail(fmt.Errorf("read the applied Deployment %s/%s: %w", router.Namespace, router.Name, err))
	}
	if err := r.apply(ctx, desiredService(router)); err != nil {
		return fail(err)
	}
	s.programmed = true
	return true, nil
}

// inputsHash reads the Directory sources' ConfigMaps and the Secrets'
// metadata (the cache never holds Secret or document ConfigMap data) for
// AnnotationInputsHash.
func (r *RouterReconciler) inputsHash(ctx context.Context, ns string, b *bundle.Bundle) (string, error) {
	cms := make(map[string]*corev1.ConfigMap)
	for _, d := range b.Directories {
		if d.ConfigMap == "" || cms[d.ConfigMap] != nil {
			continue
		}
		// Document ConfigMaps are cached as metadata only: read the data here.
		cm := &corev1.ConfigMap{}
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: d.ConfigMap}, cm)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return "", fmt.Errorf("get ConfigMap %s/%s: %w", ns, d.ConfigMap, err)
		default:
			cms[d.ConfigMap] = cm
		}
	}
	uids := make(map[string]types.UID)
	for _, name := range b.Secrets {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, m)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return "", fmt.Errorf("get Secret %s/%s metadata: %w", ns, name, err)
		default:
			uids[name] = m.UID
		}
	}
	return inputsHash(b, cms, uids), nil
}

// deleteOwnedServiceAccount removes the account the operator made once the
// spec names another one.
func (r *RouterReconciler) deleteOwnedServiceAccount(ctx context.Context, router *v1alpha1.ContextRouter) error {
	if router.Spec.Deployment.ServiceAccountName == router.Name {
		return nil
	}
	sa := &corev1.ServiceAccount{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: router.Namespace, Name: router.Name}, sa)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(sa, router)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ServiceAccount %s/%s: %w", router.Namespace, router.Name, err)
	}
	if err := r.Client.Delete(ctx, sa, client.Preconditions{UID: &sa.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete ServiceAccount %s/%s: %w", router.Namespace, router.Name, err)
	}
	return nil
}

// writeToolStatusRBAC applies the Role and RoleBinding that let the router
// pods report their tool sources, or deletes them when the bundle holds
// none.
func (r *RouterReconciler) writeToolStatusRBAC(ctx context.Context, router *v1alpha1.ContextRouter, want bool) error {
	if want {
		if err := r.apply(ctx, desiredToolStatusRole(router)); err != nil {
			return err
		}
		return r.apply(ctx, desiredToolStatusRoleBinding(router))
	}
	for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &rbacv1.Role{}} {
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: router.Namespace, Name: router.Name}, obj)
		if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(obj, router)) {
			continue
		}
		if err == nil {
			err = r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())})
		}
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s/%s: %w", obj, router.Namespace, router.Name, err)
		}
	}
	return nil
}

// addFinalizer makes sure the router outlives its cluster-scoped objects,
// before the first of them is created.
func (r *RouterReconciler) addFinalizer(ctx context.Context, s *routerScope) error {
	if controllerutil.ContainsFinalizer(s.router, RouterFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(s.router.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(s.router, RouterFinalizer)
	if err := r.Client.Patch(ctx, s.router, patch); err != nil {
		return fmt.Errorf("add finalizer to ContextRouter %s/%s: %w", s.router.Namespace, s.router.Name, err)
	}
	// The status patch diffs against the router as it now is; nothing in
	// its status has been changed yet.
	s.before = s.router.DeepCopy()
	return nil
}

// removeClusterResources deletes the TokenReview binding and drops the finalizer.
func (r *RouterReconciler) removeClusterResources(ctx context.Context, router *v1alpha1.ContextRouter) error {
	if !controllerutil.ContainsFinalizer(router, RouterFinalizer) {
		return nil
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tokenReviewBindingName(router)}}
	if err := r.Client.Delete(ctx, crb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete ClusterRoleBinding %s: %w", crb.Name, err)
	}
	patch := client.MergeFromWithOptions(router.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(router, RouterFinalizer)
	if err := r.Client.Patch(ctx, router, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer from ContextRouter %s/%s: %w", router.Namespace, router.Name, err)
	}
	return nil
}

// finalize runs when the router is being deleted. Namespaced children go
// with it through their owner references; only the cluster-scoped binding
// needs removing by hand.
func (r *RouterReconciler) finalize(ctx context.Context, router *v1alpha1.ContextRouter) error {
	return r.removeClusterResources(ctx, router)
}

// forget removes a deleted router's entries from the status of the routes
// and sources it judged. The route reconciler drops a gone router's entry as
// well, but a verdict write of this router still in flight can land after
// that; this reconcile, queued by the deletion, runs after the write. It
// reads the objects from the API server: the cache may not have seen that
// write yet. A deletion is rare enough for two lists.
func (r *RouterReconciler) forget(ctx context.Context, ns, name string) error {
	routers, err := routerNames(ctx, r.Client, ns)
	if err != nil {
		return err
	}
	now := metav1.Now().Rfc3339Copy()
	var writes []func() error
	var routes v1alpha1.ContextRouteList
	if err := r.reader().List(ctx, &routes, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list ContextRoutes in %s: %w", ns, err)
	}
	for i := range routes.Items {
		rt := &routes.Items[i]
		if findParent(rt.Status.Parents, name) == nil || !rt.DeletionTimestamp.IsZero() {
			continue
		}
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), rt, func(cur *v1alpha1.ContextRoute) bool {
				return routeStatus(cur, routers, now)
			})
		})
	}
	var srcs v1alpha1.ContextSourceList
	if err := r.reader().List(ctx, &srcs, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("list ContextSources in %s: %w", ns, err)
	}
	for i := range srcs.Items {
		src := &srcs.Items[i]
		if !slices.ContainsFunc(src.Status.ExcludedBy, func(e v1alpha1.SourceExclusion) bool { return e.Router == name }) {
			continue
		}
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), src, func(cur *v1alpha1.ContextSource) bool {
				return setExclusion(&cur.Status.ExcludedBy, name, nil)
			})
		})
	}
	return runBounded(writes, verdictWriters)
}

// apply server-side applies obj (a typed object with TypeMeta set) as
// FieldOwner, taking over fields another manager changed.
func (r *RouterReconciler) apply(ctx context.Context, obj client.Object) error {
	_, err := r.applyAndRead(ctx, obj)
	return err
}

func (r *RouterReconciler) applyAndRead(ctx context.Context, obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T %s: %w", obj, obj.GetName(), err)
	}
	// Typed structs render empty status and null timestamps; an apply
	// configuration should hold only the fields the operator has an opinion on.
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
	u := &unstructured.Unstructured{Object: m}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if ns := obj.GetNamespace(); ns != "" {
			return nil, fmt.Errorf("apply %s %s/%s: %w", kind, ns, obj.GetName(), err)
		}
		return nil, fmt.Errorf("apply %s %s: %w", kind, obj.GetName(), err)
	}
	return u, nil
}

// patchStatus computes the status from the scope's facts and patches it when
// it changed. Conditions and observedGeneration only move when the facts
// describe the current generation.
func (r *RouterReconciler) patchStatus(ctx context.Context, s *routerScope) error {
	router := s.router
	if !s.concluded {
		return nil
	}
	if s.facts.Deployment == nil {
		// Not written this time (refused or failed bundle): report what runs.
		dep := &appsv1.Deployment{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: router.Namespace, Name: router.Name}, dep)
		if err == nil && metav1.IsControlledBy(dep, router) {
			s.facts.Deployment = dep
		} else if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("get Deployment %s/%s: %w", router.Namespace, router.Name, err)
		}
	}
	st := &router.Status
	st.ObservedGeneration = router.Generation
	for _, c := range routerConditions(router.Generation, s.facts) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if b := s.facts.Bundle; s.programmed && b != nil {
		st.Bundle = &v1alpha1.BundleStatus{ConfigMapName: bundle.ConfigMapName(router.Name), Hash: b.Hash}
		st.AttachedRoutes = int32(len(b.Routes))
		st.Sources = int32(len(b.Sources))
	}
	st.Replicas, st.ReadyReplicas = 0, 0
	if d := s.facts.Deployment; d != nil {
		st.Replicas = s.facts.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
	}
	r.recordTransitions(s.before, router)
	if equality.Semantic.DeepEqual(s.before.Status, router.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, router, client.MergeFrom(s.before)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status of ContextRouter %s/%s: %w", router.Namespace, router.Name, err)
	}
	return nil
}

// maxEventNote bounds the part of a condition's message an event repeats
// (the condition holds it whole).
const maxEventNote = 1000

// recordTransitions emits an event when Programmed or Ready changes status
// or reason, so `kubectl describe` tells the story without an event per reconcile.
func (r *RouterReconciler) recordTransitions(before, after *v1alpha1.ContextRouter) {
	if r.Recorder == nil {
		return
	}
	for _, typ := range []string{v1alpha1.ConditionProgrammed, v1alpha1.ConditionReady} {
		now := meta.FindStatusCondition(after.Status.Conditions, typ)
		prev := meta.FindStatusCondition(before.Status.Conditions, typ)
		if now == nil || (prev != nil && prev.Status == now.Status && prev.Reason == now.Reason &&
			(typ != v1alpha1.ConditionProgrammed || bundleHash(before) == bundleHash(after))) {
			continue
		}
		kind := corev1.EventTypeNormal
		if now.Status != metav1.ConditionTrue {
			kind = corev1.EventTypeWarning
		}
		note := textutil.CutBytes(now.Message, maxEventNote, textutil.Ellipsis)
		r.Recorder.Eventf(after, nil, kind, now.Reason, "Reconcile", "%s", note)
	}
}

func bundleHash(r *v1alpha1.ContextRouter) string {
	if r.Status.Bundle == nil {
		return ""
	}
	return r.Status.Bundle.Hash
}

// SetupWithManager registers the reconciler, its field indexes and its
// watches: the router (spec changes and deletion), the objects it owns (its
// bundle ConfigMap among them: the manager's cache holds only the
// ConfigMaps the operator made), and the routes, sources, permissions,
// Secrets and document ConfigMaps (as metadata, see configmaps.go) mapped to
// the routers they affect through field indexes.
func (r *RouterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	if err := RegisterSharedIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := IndexFieldOnce(ctx, mgr.GetFieldIndexer(), &v1alpha1.ContextRouter{}, IndexRouterSecrets, RouterSecretNames); err != nil {
		return err
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("contextrouter.dev/operator")
	}
	if r.live == nil {
		r.live = mgr.GetAPIReader()
	}
	docs, err := documentConfigMaps(mgr, r.namespaces)
	if err != nil {
		return err
	}
	m := routerMapper{c: mgr.GetClient()}
	specChanged := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		Named("contextrouter").
		For(&v1alpha1.ContextRouter{}, builder.WithPredicates(specOrDeletionChanged)).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&v1alpha1.ContextRoute{}, handler.EnqueueRequestsFromMapFunc(m.forRoute), specChanged).
		Watches(&v1alpha1.ContextSource{}, handler.EnqueueRequestsFromMapFunc(m.forSource),
			builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, toolApprovalsChanged))).
		Watches(&v1alpha1.AgentPermission{}, handler.EnqueueRequestsFromMapFunc(m.forPermission), specChanged).
		Watches(&v1alpha1.ContextClassifier{}, handler.EnqueueRequestsFromMapFunc(m.forClassifier), specChanged).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(m.forSecret),
			builder.OnlyMetadata, builder.WithPredicates(createOrDeleteOnly)).
		// Updates too, for the few routers that read a Secret themselves.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(m.forOwnSecret),
			builder.OnlyMetadata, builder.WithPredicates(updateOnly)).
		WatchesRawSource(watchDocumentConfigMaps(docs, m.forConfigMap)).
		Complete(r)
}

// toolApprovalsChanged passes source updates that change the tool
// approvals, the one annotation a bundle carries (api.md §10.9): approving
// a tool changes no generation.
var toolApprovalsChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		o, okOld := e.ObjectOld.GetAnnotations()[v1alpha1.AnnotationApprovedTools]
		n, okNew := e.ObjectNew.GetAnnotations()[v1alpha1.AnnotationApprovedTools]
		return o != n || okOld != okNew
	},
}

// specOrDeletionChanged passes router updates that change the spec or start
// the deletion; status and metadata updates (the reconciler's own writes) do not.
var specOrDeletionChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

func (r *RouterReconciler) reader() client.Reader {
	if r.live != nil {
		return r.live
	}
	return r.Client
}

// writeVerdicts writes the bundle's verdict into the status of what hangs off
// the router: its entry in status.parents of each attached route (with the
// route's Ready recomputed from all entries), and its entry in
// status.excludedBy of each source it leaves out for a problem of the
// source's own, removing its entries from sources it no longer leaves out.
// It writes nothing when the build was cut short before a verdict.
func (r *RouterReconciler) writeVerdicts(ctx context.Context, s *routerScope) error {
	b := s.facts.Bundle
	if b == nil {
		return nil
	}
	ns, name := s.router.Namespace, s.router.Name
	routers, err := routerNames(ctx, r.Client, ns)
	if err != nil {
		return err
	}
	now := metav1.Now().Rfc3339Copy()
	var writes []func() error
	for i := range s.in.Routes {
		rt := s.in.Routes[i].DeepCopy()
		v, ok := b.Verdict(v1alpha1.KindContextRoute, rt.Name)
		if !ok || !rt.DeletionTimestamp.IsZero() {
			continue
		}
		entry, gen := routeEntry(rt, name, v), rt.Generation
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), rt, func(cur *v1alpha1.ContextRoute) bool {
				// A route changed since the build is judged again by the
				// reconcile its change triggers.
				if cur.Generation != gen || !cur.AttachesTo(name) {
					return false
				}
				before := cur.Status.DeepCopy()
				setParent(&cur.Status.Parents, entry, now)
				setReady(cur, routers, now)
				return !statusEqual(before, &cur.Status)
			})
		})
	}
	for i := range s.in.Classifiers {
		c := s.in.Classifiers[i].DeepCopy()
		v, ok := b.Verdict(v1alpha1.KindContextClassifier, c.Name)
		if !ok || !c.DeletionTimestamp.IsZero() {
			continue
		}
		gen := c.Generation
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), c, func(cur *v1alpha1.ContextClassifier) bool {
				if cur.Generation != gen || !cur.AttachesTo(name) {
					return false
				}
				return classifierVerdict(cur, name, routers, v, b, now)
			})
		})
	}
	used := make(map[string]bool)
	for i := range s.in.Sources {
		src := s.in.Sources[i].DeepCopy()
		used[src.Name] = true
		v, _ := b.Verdict(v1alpha1.KindContextSource, src.Name)
		entry, gen := sourceExclusion(src, name, v), src.Generation
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), src, func(cur *v1alpha1.ContextSource) bool {
				return cur.Generation == gen && setExclusion(&cur.Status.ExcludedBy, name, entry)
			})
		})
	}
	var stale v1alpha1.ContextSourceList
	if err := r.Client.List(ctx, &stale, client.InNamespace(ns), client.MatchingFields{IndexSourceExcludedBy: name}); err != nil {
		return fmt.Errorf("list ContextSources left out by %s/%s: %w", ns, name, err)
	}
	for i := range stale.Items {
		src := &stale.Items[i]
		if used[src.Name] {
			continue
		}
		writes = append(writes, func() error {
			return patchStatusLocked(ctx, r.Client, r.reader(), src, func(cur *v1alpha1.ContextSource) bool {
				return setExclusion(&cur.Status.ExcludedBy, name, nil)
			})
		})
	}
	return runBounded(writes, verdictWriters)
}

// runBounded runs fns, at most n at a time, and joins their errors.
func runBounded(fns []func() error, n int) error {
	errs := make([]error, len(fns))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
