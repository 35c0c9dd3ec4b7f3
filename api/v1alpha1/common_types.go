package v1alpha1

// LocalObjectReference names an object of a known kind in the same namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ParentReference names a ContextRouter in the same namespace.
type ParentReference struct {
	// Name of the ContextRouter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeySelector selects one key of a Secret in the same namespace.
//
// In the standalone CLI a secret key is read from the environment variable
// CONTEXTROUTER_SECRET_<NAME>_<KEY> (upper-cased, other characters as "_") or
// from the file <secrets-dir>/<name>/<key>; in a cluster the operator mounts
// the Secret at that path. Secret values never enter a compiled bundle.
type SecretKeySelector struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// AccessPolicy decides access to sources that no list names.
// +kubebuilder:validation:Enum=Allow;Deny
type AccessPolicy string

const (
	AccessAllow AccessPolicy = "Allow"
	AccessDeny  AccessPolicy = "Deny"
)

// Sensitivity classifies a source; higher levels need a higher clearance.
// +kubebuilder:validation:Enum=Public;Internal;Confidential;Restricted
type Sensitivity string

const (
	SensitivityPublic       Sensitivity = "Public"
	SensitivityInternal     Sensitivity = "Internal"
	SensitivityConfidential Sensitivity = "Confidential"
	SensitivityRestricted   Sensitivity = "Restricted"
)

// Level orders sensitivities: Public 0 < Internal 1 < Confidential 2 < Restricted 3.
// An unknown value ranks as Restricted, so a typo never widens access.
func (s Sensitivity) Level() int {
	switch s {
	case SensitivityPublic:
		return 0
	case SensitivityInternal, "":
		return 1
	case SensitivityConfidential:
		return 2
	default:
		return 3
	}
}

// Condition types and reasons shared by the kinds.
const (
	ConditionReady        = "Ready"
	ConditionAccepted     = "Accepted"
	ConditionProgrammed   = "Programmed"
	ConditionResolvedRefs = "ResolvedRefs"
)
