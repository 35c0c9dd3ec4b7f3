package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SensitivityAction says what happens to chunks above an agent's clearance.
// +kubebuilder:validation:Enum=Drop;Redact
type SensitivityAction string

const (
	SensitivityActionDrop   SensitivityAction = "Drop"
	SensitivityActionRedact SensitivityAction = "Redact"
)

// PathMatching says how denyPaths globs compare letters.
// +kubebuilder:validation:Enum=CaseSensitive;CaseInsensitive
type PathMatching string

const (
	// PathMatchingCaseSensitive compares paths as written.
	PathMatchingCaseSensitive PathMatching = "CaseSensitive"
	// PathMatchingCaseInsensitive ignores case, for content authored on case-insensitive file
	// systems (macOS, Windows), where Salaries/ and salaries/ are one folder.
	PathMatchingCaseInsensitive PathMatching = "CaseInsensitive"
)

// AgentPermissionSpec says what some agents may read.
//
// Every permission whose agents contain the agent or "*" applies; allow and
// deny lists are unioned; deny beats allow; one Deny default makes the default
// Deny; maxSensitivity is the minimum; Drop wins over Redact (the stricter action);
// denyPaths are unioned, each glob matched as its own permission's pathMatching says.
type AgentPermissionSpec struct {
	// ParentRefs are the routers the permission applies to; empty = every router in the namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	ParentRefs []ParentReference `json:"parentRefs,omitempty"`

	// Agents are agent identities; "*" is every agent.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Agents []string `json:"agents"`

	// AllowSources names sources the agents may read.
	// +optional
	// +listType=set
	AllowSources []string `json:"allowSources,omitempty"`

	// DenySources names sources the agents may not read; deny beats allow.
	// +optional
	// +listType=set
	DenySources []string `json:"denySources,omitempty"`

	// DenyPaths are doublestar globs matched against chunk paths of every
	// source the agents read.
	// +optional
	// +listType=set
	DenyPaths []string `json:"denyPaths,omitempty"`

	// SourceDenyPaths are denyPaths that apply to one source only: a glob
	// meant for one source's layout does not remove another's files.
	// +optional
	// +listType=map
	// +listMapKey=source
	// +kubebuilder:validation:MaxItems=64
	SourceDenyPaths []SourceDenyPaths `json:"sourceDenyPaths,omitempty"`

	// PathMatching says how this permission's denyPaths compare letters:
	// CaseSensitive, or CaseInsensitive (Salaries/x.md matches salaries/**).
	// +optional
	// +kubebuilder:default=CaseSensitive
	PathMatching PathMatching `json:"pathMatching,omitempty"`

	// Default applies to sources named in neither list.
	// +optional
	// +kubebuilder:default=Deny
	Default AccessPolicy `json:"default,omitempty"`

	// MaxSensitivity is the highest source sensitivity the agents may read.
	// +optional
	// +kubebuilder:default=Internal
	MaxSensitivity Sensitivity `json:"maxSensitivity,omitempty"`

	// SensitivityAction drops chunks above maxSensitivity, or keeps their
	// title and path and replaces their content.
	// +optional
	// +kubebuilder:default=Drop
	SensitivityAction SensitivityAction `json:"sensitivityAction,omitempty"`

	// Tools are the rules for the tools of readable tool sources (api.md §10.4).
	// +optional
	Tools ToolRules `json:"tools,omitempty"`
}

// SourceDenyPaths denies chunk paths of one source.
type SourceDenyPaths struct {
	// Source is the ContextSource whose chunks the globs apply to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`

	// Paths are doublestar globs matched against the source's chunk paths,
	// with the permission's pathMatching.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Paths []string `json:"paths"`
}

// AgentPermissionStatus is the observed state of a permission.
type AgentPermissionStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: ResolvedRefs, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentPermission grants or denies agents access to sources.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=agentperm,categories=contextrouting
// +kubebuilder:printcolumn:name="Agents",type=string,JSONPath=`.spec.agents`
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Resolved",type=string,JSONPath=`.status.conditions[?(@.type=="ResolvedRefs")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentPermission struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentPermissionSpec `json:"spec"`
	// +optional
	Status AgentPermissionStatus `json:"status,omitempty"`
}

// AgentPermissionList is a list of AgentPermissions.
// +kubebuilder:object:root=true
type AgentPermissionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentPermission `json:"items"`
}
