package controller

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// routerFacts is what a router's conditions depend on. The reconciler
// gathers them; the functions below only compute.
type routerFacts struct {
	// NameProblem says why the router's name cannot be used ("" if it can).
	NameProblem string
	// BuildErr is an unexpected bundle.Build error (nil when Build judged the objects).
	BuildErr error
	// Bundle is the build's result: the bundle, or the problems that refused
	// it (Bundle.Refused), with the verdict on every object (nil when
	// Build failed).
	Bundle *bundle.Bundle
	// ApplyErr is the error of writing the bundle ConfigMap or the workload.
	ApplyErr error
	// Deployment is the router Deployment as last written or read (nil if none).
	Deployment *appsv1.Deployment
	// Replicas is the desired replica count.
	Replicas int32
	// SecretProblems are the router's own Secret keys that do not exist
	// (the Redis password): the pods run, but what needs them fails.
	SecretProblems problem.List
}

// routerNameProblem checks that the router's name can name its Service and
// label its objects (a DNS-1035 label: at most 63 characters, starting with a
// letter); the API server accepts longer names for the ContextRouter itself.
func routerNameProblem(name string) string {
	if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
		return fmt.Sprintf("the name %q cannot name the router's Service: %s", name, strings.Join(msgs, "; "))
	}
	return ""
}

// routerAccepted says whether the router's own spec is usable.
func routerAccepted(gen int64, f routerFacts) metav1.Condition {
	if f.NameProblem != "" {
		return newCondition(v1alpha1.ConditionAccepted, false, v1alpha1.ReasonInvalidName, gen, f.NameProblem)
	}
	if b := f.Bundle; b != nil {
		if ps := b.Refused.OfKind(v1alpha1.KindContextRouter); len(ps) > 0 {
			return newCondition(v1alpha1.ConditionAccepted, false, v1alpha1.ReasonInvalidSpec, gen, ps.Details())
		}
	}
	return newCondition(v1alpha1.ConditionAccepted, true, v1alpha1.ReasonAccepted, gen, "the router spec is valid")
}

// routerProgrammed says whether the current bundle and workload are written.
func routerProgrammed(gen int64, accepted metav1.Condition, f routerFacts) metav1.Condition {
	if accepted.Status != metav1.ConditionTrue {
		return newCondition(v1alpha1.ConditionProgrammed, false, v1alpha1.ReasonInvalid, gen,
			"the router is not accepted ("+accepted.Reason+"); the last bundle, if any, keeps serving")
	}
	b := f.Bundle
	if f.BuildErr != nil || b == nil {
		msg := "no bundle was built"
		if f.BuildErr != nil {
			msg = f.BuildErr.Error()
		}
		return newCondition(v1alpha1.ConditionProgrammed, false, v1alpha1.ReasonCompileFailed, gen, msg)
	}
	if ps := b.Refused.OfKind(v1alpha1.KindAgentPermission); len(ps) > 0 {
		return newCondition(v1alpha1.ConditionProgrammed, false, v1alpha1.ReasonInvalidPermissions, gen,
			"permissions are never left out of a bundle; the last bundle keeps serving until they are fixed:\n"+problemLines(ps))
	}
	if b.TooLarge() {
		return newCondition(v1alpha1.ConditionProgrammed, false, v1alpha1.ReasonBundleTooLarge, gen, fmt.Sprintf(
			"the bundle is %d bytes, more than the %d a ConfigMap holds (%d routes, %d sources, %d permissions); "+
				"split the routes over several routers, or move large inline content into Directory or GitRepo sources; "+
				"the last bundle keeps serving",
			b.Size(), bundle.MaxSize, len(b.Routes), len(b.Sources), len(b.Permissions)))
	}
	if f.ApplyErr != nil {
		return newCondition(v1alpha1.ConditionProgrammed, false, v1alpha1.ReasonApplyFailed, gen, f.ApplyErr.Error())
	}
	msg := fmt.Sprintf("bundle %s (%d bytes): %d routes, %d sources, %d permissions",
		b.Hash, b.Size(), len(b.Routes), len(b.Sources), len(b.Permissions))
	if ex := b.Excluded(); len(ex) > 0 {
		lines := make([]string, len(ex))
		for i, e := range ex {
			lines[i] = fmt.Sprintf("%s %q: %s", e.Kind, e.Name, e.Problems.Details())
		}
		msg += fmt.Sprintf("; %d left out (see their status):\n%s", len(ex), strings.Join(lines, "\n"))
	}
	return newCondition(v1alpha1.ConditionProgrammed, true, v1alpha1.ReasonProgrammed, gen, msg)
}

// routerReady follows kstatus: True only when the router is programmed and
// every desired replica runs the current pod template and is ready.
func routerReady(gen int64, programmed metav1.Condition, f routerFacts) metav1.Condition {
	notReady := func(reason v1alpha1.ConditionReason, msg string) metav1.Condition {
		return newCondition(v1alpha1.ConditionReady, false, reason, gen, msg)
	}
	if programmed.Status != metav1.ConditionTrue {
		return notReady(v1alpha1.ReasonNotProgrammed, "Programmed is False ("+programmed.Reason+")")
	}
	// A missing Secret is a configuration problem: it outranks the rollout's progress.
	if ps := f.SecretProblems; len(ps) > 0 {
		return notReady(v1alpha1.ReasonSecretNotFound, ps.Details()+
			"; the router pods run, and what needs the Secret fails until it exists")
	}
	d := f.Deployment
	if d == nil {
		return notReady(v1alpha1.ReasonDeploymentPending, "the router Deployment does not exist yet")
	}
	if d.Status.ObservedGeneration < d.Generation {
		return notReady(v1alpha1.ReasonDeploymentPending, fmt.Sprintf(
			"Deployment %s: generation %d is not yet observed (at %d)", d.Name, d.Generation, d.Status.ObservedGeneration))
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return notReady(v1alpha1.ReasonRolloutFailed, fmt.Sprintf("Deployment %s: %s", d.Name, c.Message))
		}
	}
	want := f.Replicas
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return notReady(v1alpha1.ReasonRollingOut, fmt.Sprintf("Deployment %s: %d of %d replicas run the current bundle", d.Name, st.UpdatedReplicas, want))
	case st.Replicas > st.UpdatedReplicas:
		return notReady(v1alpha1.ReasonRollingOut, fmt.Sprintf("Deployment %s: %d replicas of an older bundle are terminating", d.Name, st.Replicas-st.UpdatedReplicas))
	case st.ReadyReplicas < want || st.AvailableReplicas < want:
		return notReady(v1alpha1.ReasonReplicasNotReady, fmt.Sprintf("Deployment %s: %d of %d replicas ready", d.Name, min(st.ReadyReplicas, st.AvailableReplicas), want))
	}
	if want == 0 {
		return newCondition(v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, gen, "scaled to 0 replicas")
	}
	return newCondition(v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, gen, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want))
}

// routerConditions computes Accepted, Programmed and Ready.
func routerConditions(gen int64, f routerFacts) []metav1.Condition {
	accepted := routerAccepted(gen, f)
	programmed := routerProgrammed(gen, accepted, f)
	return []metav1.Condition{accepted, programmed, routerReady(gen, programmed, f)}
}

func problemLines(ps problem.List) string { return ps.Error() }
