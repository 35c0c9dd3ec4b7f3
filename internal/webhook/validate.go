package webhook

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// Reference checks read the manager's cache; this bounds how long they may
// delay an admission (the API server gives the webhook 10 s in all).
const refLookupTimeout = 3 * time.Second

// Only spec changes are validated on update: the matchCondition spares the
// API server the call, and ValidateUpdate repeats the test for configurations
// without it. So an object that a newer operator would refuse can still get
// labels, annotations and finalizers, and be deleted.
//
// +kubebuilder:webhook:path=/validate-contextrouter-dev-v1alpha1-contextrouter,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=contextrouter.dev,resources=contextrouters,verbs=create;update,versions=v1alpha1,name=vcontextrouter.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-contextrouter-dev-v1alpha1-contextroute,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=contextrouter.dev,resources=contextroutes,verbs=create;update,versions=v1alpha1,name=vcontextroute.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-contextrouter-dev-v1alpha1-contextsource,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=contextrouter.dev,resources=contextsources,verbs=create;update,versions=v1alpha1,name=vcontextsource.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-contextrouter-dev-v1alpha1-contextclassifier,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=contextrouter.dev,resources=contextclassifiers,verbs=create;update,versions=v1alpha1,name=vcontextclassifier.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-contextrouter-dev-v1alpha1-agentpermission,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,sideEffects=None,groups=contextrouter.dev,resources=agentpermissions,verbs=create;update,versions=v1alpha1,name=vagentpermission.contextrouter.dev,admissionReviewVersions=v1,timeoutSeconds=10,patch=`{"matchConditions":[{"name":"spec-changed","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`

// Reference warnings list routers, sources and classifiers.
// +kubebuilder:rbac:groups=contextrouter.dev,resources=contextrouters;contextsources;contextclassifiers,verbs=get;list;watch

// object is what every kind of api/v1alpha1 offers.
type object[T any] interface {
	client.Object
	DeepCopy() T
	Default()
	Validate() field.ErrorList
}

// validator implements admission.Validator for one kind: the engine's
// per-object check (Validate plus what only the engine knows, the same check
// `validate` and the operator run), and optional reference warnings.
type validator[T object[T]] struct {
	kind  string
	check func(obj T) field.ErrorList
	spec  func(obj T) any
	warn  func(ctx context.Context, obj T) admission.Warnings
}

// NewRouterValidator validates ContextRouters: Validate plus the engine's
// router checks (an unsupported ranking strategy, invalid variables). With a
// cached reader, the Secrets the router reads for itself (the Redis
// password) that do not exist are reported as warnings; live (optional,
// uncached) confirms each absence the cache reports.
func NewRouterValidator(cached, live client.Reader) admission.Validator[*v1alpha1.ContextRouter] {
	v := &validator[*v1alpha1.ContextRouter]{
		kind:  v1alpha1.KindContextRouter,
		check: engine.CheckRouter,
		spec:  func(r *v1alpha1.ContextRouter) any { return r.Spec },
	}
	if cached != nil {
		rr := refReaders{cached: cached, live: live}
		v.warn = rr.secretWarnings
	}
	return v
}

// secretWarnings names the Secrets a router reads for itself that do not
// exist. The router is admitted: the Secret may come next, and until it
// does the router reports Ready=False, reason SecretNotFound. Secrets are
// looked up as metadata only (the operator never caches their data), so a
// missing key is left to the router's status.
func (r refReaders) secretWarnings(ctx context.Context, router *v1alpha1.ContextRouter) admission.Warnings {
	refs := router.SecretRefs()
	if len(refs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, refLookupTimeout)
	defer cancel()
	secret := func() client.Object {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		return m
	}
	var ps problem.List
	for _, ref := range refs {
		key := client.ObjectKey{Namespace: router.Namespace, Name: ref.Name}
		err := r.cached.Get(ctx, key, secret())
		if apierrors.IsNotFound(err) && r.live != nil {
			// Confirm: the cache may not have seen a Secret created a moment ago.
			err = r.live.Get(ctx, key, secret())
		}
		if apierrors.IsNotFound(err) {
			ps = append(ps, warning(v1alpha1.ReasonSecretNotFound, ref.Field+".name",
				"Secret %q not found in namespace %q; the router reports Ready=False until it exists", ref.Name, router.Namespace))
		}
	}
	return warnings(ps)
}

// NewRouteValidator validates ContextRoutes: Validate plus the CEL compile of
// spec.when. With a cached reader, parentRefs and sources that do not exist
// are reported as warnings; live (optional, uncached) confirms each absence
// the cache reports.
func NewRouteValidator(cached, live client.Reader) admission.Validator[*v1alpha1.ContextRoute] {
	v := &validator[*v1alpha1.ContextRoute]{
		kind:  v1alpha1.KindContextRoute,
		check: engine.CheckRoute,
		spec:  func(r *v1alpha1.ContextRoute) any { return r.Spec },
	}
	if cached != nil {
		rr := refReaders{cached: cached, live: live}
		v.warn = func(ctx context.Context, r *v1alpha1.ContextRoute) admission.Warnings {
			w := routeWarnings(r, rr.lookup(ctx, r.Namespace, r.ParentNames(), r.SourceNames()))
			return append(w, rr.classifierWarnings(ctx, r)...)
		}
	}
	return v
}

// NewSourceValidator validates ContextSources: Validate plus the source
// factory's checks (without reading anything).
func NewSourceValidator() admission.Validator[*v1alpha1.ContextSource] {
	return &validator[*v1alpha1.ContextSource]{
		kind:  v1alpha1.KindContextSource,
		check: engine.CheckSource,
		spec:  func(s *v1alpha1.ContextSource) any { return s.Spec },
	}
}

// NewPermissionValidator validates AgentPermissions. With a cached reader,
// parentRefs and allow/deny entries naming objects that do not exist are
// reported as warnings; live (optional, uncached) confirms each absence the
// cache reports.
func NewPermissionValidator(cached, live client.Reader) admission.Validator[*v1alpha1.AgentPermission] {
	v := &validator[*v1alpha1.AgentPermission]{
		kind:  v1alpha1.KindAgentPermission,
		check: engine.CheckPermission,
		spec:  func(p *v1alpha1.AgentPermission) any { return p.Spec },
	}
	if cached != nil {
		rr := refReaders{cached: cached, live: live}
		v.warn = func(ctx context.Context, p *v1alpha1.AgentPermission) admission.Warnings {
			return permissionWarnings(p, rr.lookup(ctx, p.Namespace, p.ParentNames(), p.SourceNames()))
		}
	}
	return v
}

// NewClassifierValidator validates ContextClassifiers: Validate (labels and
// their examples, limits, entity patterns). With a cached reader, parentRefs
// and an examplesFrom source that do not exist are reported as warnings.
// The examples file itself is read by the router, not at admission.
func NewClassifierValidator(cached, live client.Reader) admission.Validator[*v1alpha1.ContextClassifier] {
	v := &validator[*v1alpha1.ContextClassifier]{
		kind:  v1alpha1.KindContextClassifier,
		check: engine.CheckClassifier,
		spec:  func(c *v1alpha1.ContextClassifier) any { return c.Spec },
	}
	if cached != nil {
		rr := refReaders{cached: cached, live: live}
		v.warn = func(ctx context.Context, c *v1alpha1.ContextClassifier) admission.Warnings {
			return classifierWarnings(c, rr.lookup(ctx, c.Namespace, c.ParentNames(), c.SourceNames()))
		}
	}
	return v
}

// classifierWarnings names the parentRefs and the examplesFrom source of a
// classifier that do not exist.
func classifierWarnings(c *v1alpha1.ContextClassifier, known refs) admission.Warnings {
	ps := parentRefWarnings(c.Spec.ParentRefs, known, "the classifier attaches to it once it exists")
	if known.sources != nil {
		for _, f := range c.Files() {
			if !known.sources[f.File.Source] {
				ps = append(ps, warning(v1alpha1.ReasonSourceNotFound, f.Field,
					"ContextSource %q not found in namespace %q; the classifier is left out of its routers until it exists", f.File.Source, known.namespace))
			}
		}
	}
	return warnings(ps)
}

func (v *validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	return v.validate(ctx, obj)
}

func (v *validator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if newObj.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	if equality.Semantic.DeepEqual(v.spec(defaulted(oldObj)), v.spec(defaulted(newObj))) {
		return nil, nil
	}
	return v.validate(ctx, newObj)
}

// ValidateDelete allows every delete: nothing depends on an object so
// strongly that removing it must be refused.
func (v *validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func (v *validator[T]) validate(ctx context.Context, obj T) (admission.Warnings, error) {
	obj = defaulted(obj)
	var warnings admission.Warnings
	if v.warn != nil {
		warnings = v.warn(ctx, obj)
	}
	if errs := v.check(obj); len(errs) > 0 {
		gk := v1alpha1.GroupVersion.WithKind(v.kind).GroupKind()
		return warnings, apierrors.NewInvalid(gk, obj.GetName(), errs)
	}
	return warnings, nil
}

// defaulted returns a defaulted copy, as the API server would store it.
func defaulted[T object[T]](obj T) T {
	c := obj.DeepCopy()
	c.Default()
	return c
}

// refs holds the names of the ContextRouters and ContextSources of one
// namespace that matter to an object. A nil set means unknown (the lookup
// failed, or nothing to look up): no warnings then.
type refs struct {
	namespace string
	routers   map[string]bool
	sources   map[string]bool
}

// refReaders find referenced objects: cached lists first, then a live read
// for each name the cache lacks, because GitOps tools create a source and
// the route naming it within milliseconds, before the cache has caught up.
type refReaders struct {
	cached client.Reader
	live   client.Reader // nil: trust the cache
}

// lookup finds which of the named routers and sources exist in namespace.
// Failures only cost warnings, never the admission.
func (r refReaders) lookup(ctx context.Context, namespace string, routers, srcs []string) refs {
	ctx, cancel := context.WithTimeout(ctx, refLookupTimeout)
	defer cancel()
	out := refs{namespace: namespace}
	if len(routers) > 0 {
		out.routers = r.find(ctx, namespace, routers, &v1alpha1.ContextRouterList{}, func() client.Object { return &v1alpha1.ContextRouter{} })
	}
	if len(srcs) > 0 {
		out.sources = r.find(ctx, namespace, srcs, &v1alpha1.ContextSourceList{}, func() client.Object { return &v1alpha1.ContextSource{} })
	}
	return out
}

func (r refReaders) find(ctx context.Context, namespace string, names []string, list client.ObjectList, newObj func() client.Object) map[string]bool {
	log := logf.FromContext(ctx)
	if err := r.cached.List(ctx, list, client.InNamespace(namespace)); err != nil {
		log.V(1).Info("cannot check references", "namespace", namespace, "error", err.Error())
		return nil
	}
	known := map[string]bool{}
	_ = apimeta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			known[obj.GetName()] = true
		}
		return nil
	})
	if r.live == nil {
		return known
	}
	for _, name := range names {
		if known[name] {
			continue
		}
		// Warn only about a confirmed absence.
		err := r.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, newObj())
		known[name] = !apierrors.IsNotFound(err)
	}
	return known
}

// classifierWarnings names the ContextClassifiers a route's condition reads
// (detected.<name>) that do not exist: the routers leave the route out until
// they do, as for a missing source.
func (r refReaders) classifierWarnings(ctx context.Context, rt *v1alpha1.ContextRoute) admission.Warnings {
	names := engine.ConditionClassifiers(rt.Spec.When)
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, refLookupTimeout)
	defer cancel()
	known := r.find(ctx, rt.Namespace, names, &v1alpha1.ContextClassifierList{}, func() client.Object { return &v1alpha1.ContextClassifier{} })
	if known == nil {
		return nil
	}
	var ps problem.List
	for _, n := range names {
		if !known[n] {
			ps = append(ps, warning(v1alpha1.ReasonInvalidCondition, "spec.when",
				"ContextClassifier %q (detected.%s) not found in namespace %q; the route is left out of its routers until it exists", n, n, rt.Namespace))
		}
	}
	return warnings(ps)
}

// routeWarnings names the parentRefs and sources of a route that do not
// exist. The route still works for the rest: the controller leaves it out of
// the bundle until its sources exist, and attaches it to a router once the
// router exists.
func routeWarnings(r *v1alpha1.ContextRoute, known refs) admission.Warnings {
	ps := parentRefWarnings(r.Spec.ParentRefs, known, "the route attaches to it once it exists")
	if known.sources != nil {
		for i, ref := range r.Spec.Sources {
			if !known.sources[ref.Name] {
				ps = append(ps, warning(v1alpha1.ReasonSourceNotFound, fmt.Sprintf("spec.sources[%d].name", i),
					"ContextSource %q not found in namespace %q; the route is left out of its routers until it exists", ref.Name, known.namespace))
			}
		}
	}
	return warnings(ps)
}

// permissionWarnings names the parentRefs and allow/deny entries of a
// permission that do not exist. The permission applies regardless; an entry
// takes effect once its source exists.
func permissionWarnings(p *v1alpha1.AgentPermission, known refs) admission.Warnings {
	ps := parentRefWarnings(p.Spec.ParentRefs, known, "the permission applies to it once it exists")
	if known.sources != nil {
		for _, list := range []struct {
			field string
			names []string
		}{{"allowSources[%d]", p.Spec.AllowSources}, {"denySources[%d]", p.Spec.DenySources}, {"sourceDenyPaths[%d].source", sourceDenyNames(p)}} {
			for i, name := range list.names {
				if !known.sources[name] {
					ps = append(ps, warning(v1alpha1.ReasonSourceNotFound, "spec."+fmt.Sprintf(list.field, i),
						"ContextSource %q not found in namespace %q; the entry takes effect once it exists", name, known.namespace))
				}
			}
		}
	}
	return warnings(ps)
}

// parentRefWarnings names the parentRefs that name no existing router;
// then says what happens once it exists.
func parentRefWarnings(parents []v1alpha1.ParentReference, known refs, then string) problem.List {
	var ps problem.List
	if known.routers == nil {
		return nil
	}
	for i, ref := range parents {
		if !known.routers[ref.Name] {
			ps = append(ps, warning(v1alpha1.ReasonNoMatchingParent, fmt.Sprintf("spec.parentRefs[%d].name", i),
				"ContextRouter %q not found in namespace %q; %s", ref.Name, known.namespace, then))
		}
	}
	return ps
}

// warning is a reference problem that does not refuse the object.
func warning(reason v1alpha1.ConditionReason, path, format string, args ...any) problem.Problem {
	p := problem.Errorf(reason, "", "", path, format, args...)
	p.Severity = problem.Warning
	return p
}

// warnings renders problems as admission warnings: "field: message" (kubectl
// names the object).
func warnings(ps problem.List) admission.Warnings {
	var w admission.Warnings
	for _, p := range ps {
		w = append(w, p.Detail())
	}
	return w
}

func sourceDenyNames(p *v1alpha1.AgentPermission) []string {
	names := make([]string, len(p.Spec.SourceDenyPaths))
	for i, e := range p.Spec.SourceDenyPaths {
		names[i] = e.Source
	}
	return names
}
