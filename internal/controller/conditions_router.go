package controller

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/bundle"
)

// Condition reasons of the ContextRouter status (Accepted also uses
// ReasonAccepted and ReasonInvalidSpec from conditions.go).
const (
	// ReasonInvalidName: the router's name cannot name its Service (a DNS-1035 label).
	ReasonInvalidName = "InvalidName"
	// ReasonProgrammed: the bundle and the router's workload are written.
	ReasonProgrammed = "Programmed"
	// ReasonInvalid: the router is not accepted, so nothing is written.
	ReasonInvalid = "Invalid"
	// ReasonInvalidPermissions: a permission does not compile; permissions are
	// never left out (that could widen access), so the last bundle keeps serving.
	ReasonInvalidPermissions = "InvalidPermissions"
	// ReasonCompileFailed: the bundle does not compile for another reason.
	ReasonCompileFailed = "CompileFailed"
	// ReasonBundleTooLarge: the bundle exceeds what a ConfigMap holds.
	ReasonBundleTooLarge = "BundleTooLarge"
	// ReasonApplyFailed: writing the bundle or the workload failed.
	ReasonApplyFailed = "ApplyFailed"

	// ReasonReady: every replica runs the current bundle and is ready.
	ReasonReady = "Ready"
	// ReasonNotProgrammed: Programmed is not True.
	ReasonNotProgrammed = "NotProgrammed"
	// ReasonDeploymentPending: the Deployment controller has not seen the latest spec.
	ReasonDeploymentPending = "DeploymentPending"
	// ReasonRollingOut: pods of an older template are still being replaced.
	ReasonRollingOut = "RollingOut"
	// ReasonReplicasNotReady: pods of the current template are not all ready.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonRolloutFailed: the Deployment exceeded its progress deadline.
	ReasonRolloutFailed = "RolloutFailed"
)

// routerFacts is what a router's conditions depend on. The reconciler
// gathers them; the functions below only compute.
type routerFacts struct {
	// NameProblem says why the router's name cannot be used ("" if it can).
	NameProblem string
	// BuildErr is the bundle.Build error (*bundle.InvalidError for invalid objects).
	BuildErr error
	// Bundle is the built bundle (nil when the build failed).
	Bundle *bundle.Bundle
	// ApplyErr is the error of writing the bundle ConfigMap or the workload.
	ApplyErr error
	// Deployment is the router Deployment as last written or read (nil if none).
	Deployment *appsv1.Deployment
	// Replicas is the desired replica count.
	Replicas int32
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
		return newCondition(v1alpha1.ConditionAccepted, false, ReasonInvalidName, gen, f.NameProblem)
	}
	var ie *bundle.InvalidError
	if errors.As(f.BuildErr, &ie) {
		if ps := ie.RouterProblems(); len(ps) > 0 {
			return newCondition(v1alpha1.ConditionAccepted, false, ReasonInvalidSpec, gen, problemLines(ps))
		}
	}
	return newCondition(v1alpha1.ConditionAccepted, true, ReasonAccepted, gen, "the router spec is valid")
}

// routerProgrammed says whether the current bundle and workload are written.
func routerProgrammed(gen int64, accepted metav1.Condition, f routerFacts) metav1.Condition {
	if accepted.Status != metav1.ConditionTrue {
		return newCondition(v1alpha1.ConditionProgrammed, false, ReasonInvalid, gen,
			"the router is not accepted ("+accepted.Reason+"); the last bundle, if any, keeps serving")
	}
	if f.BuildErr != nil {
		var ie *bundle.InvalidError
		if errors.As(f.BuildErr, &ie) {
			if ps := ie.PermissionProblems(); len(ps) > 0 {
				return newCondition(v1alpha1.ConditionProgrammed, false, ReasonInvalidPermissions, gen,
					"permissions are never left out of a bundle; the last bundle keeps serving until they are fixed:\n"+problemLines(ps))
			}
		}
		return newCondition(v1alpha1.ConditionProgrammed, false, ReasonCompileFailed, gen, f.BuildErr.Error())
	}
	b := f.Bundle
	if b == nil {
		return newCondition(v1alpha1.ConditionProgrammed, false, ReasonCompileFailed, gen, "no bundle was built")
	}
	if b.TooLarge() {
		return newCondition(v1alpha1.ConditionProgrammed, false, ReasonBundleTooLarge, gen, fmt.Sprintf(
			"the bundle is %d bytes, more than the %d a ConfigMap holds (%d routes, %d sources, %d permissions); "+
				"split the routes over several routers, or move large inline content into Directory or GitRepo sources; "+
				"the last bundle keeps serving",
			b.Size(), bundle.MaxSize, len(b.Routes), len(b.Sources), len(b.Permissions)))
	}
	if f.ApplyErr != nil {
		return newCondition(v1alpha1.ConditionProgrammed, false, ReasonApplyFailed, gen, f.ApplyErr.Error())
	}
	msg := fmt.Sprintf("bundle %s (%d bytes): %d routes, %d sources, %d permissions",
		b.Hash, b.Size(), len(b.Routes), len(b.Sources), len(b.Permissions))
	if len(b.Excluded) > 0 {
		lines := make([]string, len(b.Excluded))
		for i, e := range b.Excluded {
			lines[i] = fmt.Sprintf("%s %q: %s", e.Kind, e.Name, e.Reason)
		}
		msg += fmt.Sprintf("; %d left out (see their status):\n%s", len(b.Excluded), strings.Join(lines, "\n"))
	}
	return newCondition(v1alpha1.ConditionProgrammed, true, ReasonProgrammed, gen, msg)
}

// routerReady follows kstatus: True only when the router is programmed and
// every desired replica runs the current pod template and is ready.
func routerReady(gen int64, programmed metav1.Condition, f routerFacts) metav1.Condition {
	notReady := func(reason, msg string) metav1.Condition {
		return newCondition(v1alpha1.ConditionReady, false, reason, gen, msg)
	}
	if programmed.Status != metav1.ConditionTrue {
		return notReady(ReasonNotProgrammed, "Programmed is False ("+programmed.Reason+")")
	}
	d := f.Deployment
	if d == nil {
		return notReady(ReasonDeploymentPending, "the router Deployment does not exist yet")
	}
	if d.Status.ObservedGeneration < d.Generation {
		return notReady(ReasonDeploymentPending, fmt.Sprintf(
			"Deployment %s: generation %d is not yet observed (at %d)", d.Name, d.Generation, d.Status.ObservedGeneration))
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return notReady(ReasonRolloutFailed, fmt.Sprintf("Deployment %s: %s", d.Name, c.Message))
		}
	}
	want := f.Replicas
	st := d.Status
	switch {
	case st.UpdatedReplicas < want:
		return notReady(ReasonRollingOut, fmt.Sprintf("Deployment %s: %d of %d replicas run the current bundle", d.Name, st.UpdatedReplicas, want))
	case st.Replicas > st.UpdatedReplicas:
		return notReady(ReasonRollingOut, fmt.Sprintf("Deployment %s: %d replicas of an older bundle are terminating", d.Name, st.Replicas-st.UpdatedReplicas))
	case st.ReadyReplicas < want || st.AvailableReplicas < want:
		return notReady(ReasonReplicasNotReady, fmt.Sprintf("Deployment %s: %d of %d replicas ready", d.Name, min(st.ReadyReplicas, st.AvailableReplicas), want))
	}
	if want == 0 {
		return newCondition(v1alpha1.ConditionReady, true, ReasonReady, gen, "scaled to 0 replicas")
	}
	return newCondition(v1alpha1.ConditionReady, true, ReasonReady, gen, fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want))
}

// routerConditions computes Accepted, Programmed and Ready.
func routerConditions(gen int64, f routerFacts) []metav1.Condition {
	accepted := routerAccepted(gen, f)
	programmed := routerProgrammed(gen, accepted, f)
	return []metav1.Condition{accepted, programmed, routerReady(gen, programmed, f)}
}

func problemLines(ps []bundle.Problem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}
