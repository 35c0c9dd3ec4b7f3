package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContextRouteSpec says when a set of sources is consulted.
type ContextRouteSpec struct {
	// ParentRefs are the ContextRouters in this namespace the route attaches to;
	// empty attaches it to every router in the namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	ParentRefs []ParentReference `json:"parentRefs,omitempty"`

	// When is a CEL expression over text, agent, tags, metadata and vars that
	// must evaluate to a bool; empty matches every query.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when,omitempty"`

	// Sources are the ContextSources in this namespace the route contributes.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	Sources []LocalObjectReference `json:"sources"`

	// Description for people.
	// +optional
	Description string `json:"description,omitempty"`

	// Fallback routes are considered only when no other route matched the
	// query; then each one whose condition holds contributes its sources.
	// +optional
	Fallback bool `json:"fallback,omitempty"`

	// Timeout caps the time this route's per-query sources may take, from
	// 10ms to 60s; unset, the query's timeout applies.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10ms') && duration(self) <= duration('60s')",message="timeout must be between 10ms and 60s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Alternate names a route of the same router whose sources are used when
	// every source of this route failed or timed out. One hop: the
	// alternate's own alternate is not followed.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Alternate string `json:"alternate,omitempty"`
}

// Bounds of spec.timeout of a route.
const (
	MinRouteTimeout = 10 * time.Millisecond
	MaxRouteTimeout = 60 * time.Second
)

// MaxStatusParents bounds status.parents of a route and status.excludedBy of
// a source (the MaxItems markers), as Gateway API bounds route parents. A
// route attached to more routers than that lists the routers that report a
// problem first.
const MaxStatusParents = 32

// RouteParentStatus is the status of a route as one router sees it.
type RouteParentStatus struct {
	// ParentRef is the router.
	ParentRef ParentReference `json:"parentRef"`
	// Conditions: Accepted, ResolvedRefs.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ContextRouteStatus is the observed state of a route.
type ContextRouteStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Parents holds one entry per router that considered the route, sorted
	// by router name: each router writes its own entry, and entries for
	// routers that do not exist say so. At most 32.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Parents []RouteParentStatus `json:"parents,omitempty"`
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ContextRoute selects sources for the queries its condition matches.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctxroute,categories=contextrouting
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="When",type=string,JSONPath=`.spec.when`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ContextRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ContextRouteSpec `json:"spec"`
	// +optional
	Status ContextRouteStatus `json:"status,omitempty"`
}

// ContextRouteList is a list of ContextRoutes.
// +kubebuilder:object:root=true
type ContextRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContextRoute `json:"items"`
}
