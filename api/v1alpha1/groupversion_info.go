// Package v1alpha1 holds the contextrouter.dev/v1alpha1 API: ContextRouter,
// ContextRoute, ContextSource and AgentPermission. It is the one schema used by
// the standalone CLI, the router Deployment, the sidecar and the operator.
//
// +kubebuilder:object:generate=true
// +groupName=contextrouter.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "contextrouter.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind names, as they appear in manifests.
const (
	KindContextRouter     = "ContextRouter"
	KindContextRoute      = "ContextRoute"
	KindContextSource     = "ContextSource"
	KindAgentPermission   = "AgentPermission"
	KindContextClassifier = "ContextClassifier"
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&ContextRouter{}, &ContextRouterList{},
		&ContextRoute{}, &ContextRouteList{},
		&ContextSource{}, &ContextSourceList{},
		&AgentPermission{}, &AgentPermissionList{},
		&ContextClassifier{}, &ContextClassifierList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
