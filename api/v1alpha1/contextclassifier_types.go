package v1alpha1

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits of a ContextClassifier (docs/api.md §1.5, §9). The markers carry
// the same numbers; schema_parity_test.go keeps them equal.
const (
	MaxClassifierLabels    = 256
	MaxExamplesPerLabel    = 1000
	MaxExampleBytes        = 1024
	MaxClassifierExamples  = 20000
	MaxLabelNameLength     = 63
	MaxEntityExtractors    = 32
	MaxDictionaryValues    = 10000
	MaxDictionaryValueSize = 256
	MaxPatternLength       = 1024
	MaxExamplesPathLength  = 1024
	MaxAlternativesLimit   = 10
	// DefaultMaxAlternatives is spec.maxAlternatives when 0.
	DefaultMaxAlternatives = 3
)

// Bounds of the examples of a classifier, inline and examplesFrom together
// (ExampleTotalsError; no markers: they span lists and files), with
// MaxClassifierExamples. A reload trains on them: training time grows with
// the labels times the text (every step updates a weight per label of
// each feature of an example), memory with the text (docs/benchmarks.md,
// "Training at the limits").
const (
	// MaxClassifierExampleBytes bounds the examples' text.
	MaxClassifierExampleBytes = 1 << 20
	// MaxClassifierTrainingSize bounds labels × bytes of example text: 256
	// labels with 128 KiB of examples, 32 with 1 MiB. (CLINC150's whole train
	// split, 151 labels and 602,402 bytes, is 91 Mi: `eval intents` trains on
	// such sets offline.)
	MaxClassifierTrainingSize = 32 << 20
)

// ClassifierLabel is one label and its examples.
type ClassifierLabel struct {
	// Name of the label, as conditions compare it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	Name string `json:"name"`
	// Examples are questions that carry this label.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	Examples []string `json:"examples"`
}

// SourceFile names a file in a ContextSource: a classifier's examples
// (JSONL of {"text", "label"}) or a dictionary's values (one a line).
type SourceFile struct {
	// Source is a Directory or GitRepo ContextSource in this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`
	// Path of the file, relative to the source root, with slashes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`
}

// EntityDictionary lists the values of an entity type: exactly one of values and valuesFrom.
// +kubebuilder:validation:XValidation:rule="has(self.values) != has(self.valuesFrom)",message="set exactly one of values and valuesFrom"
type EntityDictionary struct {
	// Values match case-insensitively as whole words.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	Values []string `json:"values,omitempty"`
	// ValuesFrom reads the values from a file of a ContextSource, one a
	// line (blank lines and lines starting with # are skipped).
	// +optional
	ValuesFrom *SourceFile `json:"valuesFrom,omitempty"`
}

// EntityExtractor finds entities of one type: exactly one of dictionary and pattern.
// +kubebuilder:validation:XValidation:rule="has(self.dictionary) != (has(self.pattern) && size(self.pattern) > 0)",message="set exactly one of dictionary and pattern"
type EntityExtractor struct {
	// Type names the entities found (entities[].type in CEL).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	Type string `json:"type"`
	// Dictionary of values.
	// +optional
	Dictionary *EntityDictionary `json:"dictionary,omitempty"`
	// Pattern is an RE2 regular expression (Go regexp syntax).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Pattern string `json:"pattern,omitempty"`
}

// ContextClassifierSpec declares one classification of questions, learned
// from examples, and entity extractors.
// +kubebuilder:validation:XValidation:rule="has(self.labels) || has(self.examplesFrom)",message="set labels or examplesFrom (or both)"
type ContextClassifierSpec struct {
	// ParentRefs are the ContextRouters in this namespace the classifier
	// attaches to; empty attaches it to every router in the namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	ParentRefs []ParentReference `json:"parentRefs,omitempty"`

	// Labels with inline examples.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=map
	// +listMapKey=name
	Labels []ClassifierLabel `json:"labels,omitempty"`

	// ExamplesFrom reads more examples from a file of a ContextSource.
	// +optional
	ExamplesFrom *SourceFile `json:"examplesFrom,omitempty"`

	// OutOfScopeLabel is the label of a question whose confidence is below
	// threshold (and of out-of-scope examples).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	OutOfScopeLabel string `json:"outOfScopeLabel,omitempty"`

	// Threshold is the confidence, a decimal in [0, 1], below which the label
	// is outOfScopeLabel; "0" disables the gate.
	// +optional
	// +kubebuilder:default="0"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	Threshold string `json:"threshold,omitempty"`

	// MaxAlternatives is how many runner-up labels a result reports (0 means 3).
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxAlternatives int32 `json:"maxAlternatives,omitempty"`

	// Entities are extractors run on the question.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Entities []EntityExtractor `json:"entities,omitempty"`

	// Description for people.
	// +optional
	Description string `json:"description,omitempty"`
}

// LabelStatus is how many examples a label was trained on.
type LabelStatus struct {
	// Name of the label.
	Name string `json:"name"`
	// Examples is how many examples of the label the model learned from.
	Examples int32 `json:"examples"`
}

// ContextClassifierStatus is the observed state of a classifier.
type ContextClassifierStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Parents holds one entry per router that considered the classifier,
	// sorted by router name, as a route's.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Parents []RouteParentStatus `json:"parents,omitempty"`
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Labels are the learned labels with their example counts, sorted by name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=257
	Labels []LabelStatus `json:"labels,omitempty"`
	// LabelCount is len(labels).
	// +optional
	LabelCount int32 `json:"labelCount,omitempty"`
	// TrainingAccuracy is the share of training examples the model labels
	// right, a decimal string ("0.972").
	// +optional
	TrainingAccuracy string `json:"trainingAccuracy,omitempty"`
}

// ContextClassifier labels questions from examples and extracts entities;
// route conditions read detected.<name> and entities.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctxclassifier,categories=contextrouting
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Labels",type=integer,JSONPath=`.status.labelCount`
// +kubebuilder:printcolumn:name="Accuracy",type=string,JSONPath=`.status.trainingAccuracy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ContextClassifier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ContextClassifierSpec `json:"spec"`
	// +optional
	Status ContextClassifierStatus `json:"status,omitempty"`
}

// ContextClassifierList is a list of ContextClassifiers.
// +kubebuilder:object:root=true
type ContextClassifierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContextClassifier `json:"items"`
}

// AttachesTo reports whether the classifier belongs to the named router: an
// empty parentRefs list attaches it to every router in its namespace.
func (c *ContextClassifier) AttachesTo(router string) bool {
	return attached(c.Spec.ParentRefs, router)
}

// FileRef is a file a classifier reads, with the field that names its source.
type FileRef struct {
	// Field is the path of the source's name: "spec.examplesFrom.source",
	// "spec.entities[2].dictionary.valuesFrom.source".
	Field string
	File  *SourceFile
}

// Files lists the files a classifier reads, in spec order: examplesFrom,
// then the dictionaries' valuesFrom.
func (c *ContextClassifier) Files() []FileRef {
	var out []FileRef
	if f := c.Spec.ExamplesFrom; f != nil {
		out = append(out, FileRef{"spec.examplesFrom.source", f})
	}
	for i, x := range c.Spec.Entities {
		if x.Dictionary != nil && x.Dictionary.ValuesFrom != nil {
			out = append(out, FileRef{fmt.Sprintf("spec.entities[%d].dictionary.valuesFrom.source", i), x.Dictionary.ValuesFrom})
		}
	}
	return out
}

// SourceNames lists, sorted and once each, the ContextSources whose files a
// classifier reads.
func (c *ContextClassifier) SourceNames() []string {
	var names []string
	for _, f := range c.Files() {
		names = append(names, f.File.Source)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ParentNames lists the routers a classifier names in parentRefs (empty = all).
func (c *ContextClassifier) ParentNames() []string { return refNames(c.Spec.ParentRefs) }
