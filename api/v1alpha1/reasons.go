package v1alpha1

// ConditionReason is the machine-readable reason (CamelCase) of a status
// condition, and of a problem found in an object.
type ConditionReason string

// Condition reasons. Route reasons follow Gateway API route status. Every
// constant of this type must be listed for a kind in conditionReasons (a
// test parses this package to make sure), and the Argo CD health check of
// that kind must have a test case that carries it (test/argocd).
const (
	// ReasonAccepted: the object is valid and its router takes it.
	ReasonAccepted ConditionReason = "Accepted"
	// ReasonInvalidSpec: the spec fails validation or the engine refuses it.
	ReasonInvalidSpec ConditionReason = "InvalidSpec"
	// ReasonValid: the spec is valid and everything it needs exists.
	ReasonValid ConditionReason = "Valid"
	// ReasonResolvedRefs: every referenced object exists and is usable.
	ReasonResolvedRefs ConditionReason = "ResolvedRefs"
	// ReasonSourceNotFound: a referenced ContextSource does not exist.
	ReasonSourceNotFound ConditionReason = "SourceNotFound"

	// ReasonInvalidCondition: a route's spec.when does not compile; the message is the CEL error.
	ReasonInvalidCondition ConditionReason = "InvalidCondition"
	// ReasonNoMatchingParent: a parentRef names no ContextRouter, or the
	// namespace has no router for the route to attach to.
	ReasonNoMatchingParent ConditionReason = "NoMatchingParent"
	// ReasonPending: a router the route attaches to has not judged the
	// route's current generation yet.
	ReasonPending ConditionReason = "Pending"
	// ReasonInvalidSource: a ContextSource the route uses is left out of the
	// router's bundle (its spec is invalid or its volume cannot be mounted),
	// so the route is left out too.
	ReasonInvalidSource ConditionReason = "InvalidSource"
	// ReasonAlternateNotFound: the route's spec.alternate names no route of
	// the router (none by that name, or it is left out of the bundle).
	ReasonAlternateNotFound ConditionReason = "AlternateNotFound"

	// ReasonInvalidMount: a Directory source's volume cannot be mounted in
	// the router pod: its path is one the pod uses, or another source of the
	// same router mounts a different volume there.
	ReasonInvalidMount ConditionReason = "InvalidMount"
	// ReasonSecretNotFound: a Secret, or a key of it, that the source (or the
	// router itself: its Redis password) reads does not exist.
	ReasonSecretNotFound ConditionReason = "SecretNotFound"
	// ReasonConfigMapNotFound: the ConfigMap of spec.directory.volume does not exist.
	ReasonConfigMapNotFound ConditionReason = "ConfigMapNotFound"
	// ReasonPersistentVolumeClaimNotFound: the claim of spec.directory.volume does not exist.
	ReasonPersistentVolumeClaimNotFound ConditionReason = "PersistentVolumeClaimNotFound"

	// ReasonInvalidName: the router's name cannot name its Service (a DNS-1035 label).
	ReasonInvalidName ConditionReason = "InvalidName"
	// ReasonProgrammed: the bundle and the router's workload are written.
	ReasonProgrammed ConditionReason = "Programmed"
	// ReasonInvalid: the router is not accepted, so nothing is written.
	ReasonInvalid ConditionReason = "Invalid"
	// ReasonInvalidPermissions: a permission is invalid; permissions are
	// never left out (that could widen access), so the last bundle keeps serving.
	ReasonInvalidPermissions ConditionReason = "InvalidPermissions"
	// ReasonCompileFailed: the bundle does not compile for another reason.
	ReasonCompileFailed ConditionReason = "CompileFailed"
	// ReasonBundleTooLarge: the bundle exceeds what a ConfigMap holds.
	ReasonBundleTooLarge ConditionReason = "BundleTooLarge"
	// ReasonApplyFailed: writing the bundle or the workload failed.
	ReasonApplyFailed ConditionReason = "ApplyFailed"
	// ReasonReady: every replica runs the current bundle and is ready.
	ReasonReady ConditionReason = "Ready"
	// ReasonNotProgrammed: Programmed is not True.
	ReasonNotProgrammed ConditionReason = "NotProgrammed"
	// ReasonDeploymentPending: the Deployment controller has not seen the latest spec.
	ReasonDeploymentPending ConditionReason = "DeploymentPending"
	// ReasonRollingOut: pods of an older template are still being replaced.
	ReasonRollingOut ConditionReason = "RollingOut"
	// ReasonReplicasNotReady: pods of the current template are not all ready.
	ReasonReplicasNotReady ConditionReason = "ReplicasNotReady"
	// ReasonRolloutFailed: the Deployment exceeded its progress deadline.
	ReasonRolloutFailed ConditionReason = "RolloutFailed"
)

// conditionReasons lists, per kind, the reasons the operator writes in that
// kind's status: status.conditions, a route's status.parents[].conditions
// and a source's status.excludedBy[].
var conditionReasons = map[string][]ConditionReason{
	KindContextRouter: {
		ReasonAccepted, ReasonInvalidName, ReasonInvalidSpec,
		ReasonProgrammed, ReasonInvalid, ReasonInvalidPermissions, ReasonCompileFailed, ReasonBundleTooLarge, ReasonApplyFailed,
		ReasonReady, ReasonNotProgrammed, ReasonDeploymentPending, ReasonRollingOut, ReasonReplicasNotReady, ReasonRolloutFailed,
		ReasonSecretNotFound,
	},
	KindContextRoute: {
		ReasonAccepted, ReasonInvalidSpec, ReasonInvalidCondition, ReasonNoMatchingParent, ReasonPending,
		ReasonResolvedRefs, ReasonSourceNotFound, ReasonInvalidSource, ReasonAlternateNotFound,
	},
	KindContextSource: {
		ReasonValid, ReasonInvalidSpec, ReasonInvalidMount,
		ReasonSecretNotFound, ReasonConfigMapNotFound, ReasonPersistentVolumeClaimNotFound,
	},
	KindAgentPermission: {
		ReasonValid, ReasonInvalidSpec, ReasonResolvedRefs, ReasonSourceNotFound,
	},
	KindContextClassifier: {
		ReasonAccepted, ReasonInvalidSpec, ReasonNoMatchingParent, ReasonPending,
		ReasonResolvedRefs, ReasonSourceNotFound, ReasonInvalidSource,
	},
}

// ConditionReasons returns the reasons the operator writes in the status of
// kind, in a fixed order; nil for an unknown kind.
func ConditionReasons(kind string) []ConditionReason {
	return append([]ConditionReason(nil), conditionReasons[kind]...)
}
