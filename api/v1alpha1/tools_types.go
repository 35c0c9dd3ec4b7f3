package v1alpha1

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SideEffects says what calling a tool can do, from least to most.
// +kubebuilder:validation:Enum=None;Read;Write;Destructive
type SideEffects string

const (
	// SideEffectsNone: a pure computation.
	SideEffectsNone SideEffects = "None"
	// SideEffectsRead: reads data, changes nothing.
	SideEffectsRead SideEffects = "Read"
	// SideEffectsWrite: creates or changes data, nothing it cannot undo.
	SideEffectsWrite SideEffects = "Write"
	// SideEffectsDestructive: may delete or overwrite; also what an
	// undeclared tool is assumed to do, as MCP assumes.
	SideEffectsDestructive SideEffects = "Destructive"
)

// Level orders side effects: None 0 … Destructive 3; an unknown value is
// Destructive's level, the worst case.
func (s SideEffects) Level() int {
	switch s {
	case SideEffectsNone:
		return 0
	case SideEffectsRead:
		return 1
	case SideEffectsWrite:
		return 2
	}
	return 3
}

// ToolsSource is a tool catalog: written inline, or read from catalog files
// (JSON or YAML lists of tools) in a folder, a volume, a git repository or
// at a URL. With openAPI, the files (or the fetched document) are OpenAPI
// documents, one tool per operation. Exactly one of catalog, directory,
// gitRepo and http is set.
// +kubebuilder:validation:XValidation:rule="[has(self.catalog), has(self.directory), has(self.gitRepo), has(self.http)].filter(x, x).size() == 1",message="exactly one of catalog, directory, gitRepo and http must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.openAPI) || !has(self.catalog)",message="openAPI reads documents from directory, gitRepo or http, not an inline catalog"
type ToolsSource struct {
	// Catalog lists the tools. Larger catalogs belong in files.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Catalog []Tool `json:"catalog,omitempty"`

	// Directory reads catalog files from a folder or a volume; include
	// defaults to JSON and YAML files.
	// +optional
	Directory *DirectorySource `json:"directory,omitempty"`

	// GitRepo reads catalog files from a git repository; include defaults
	// to JSON and YAML files.
	// +optional
	GitRepo *GitRepoSource `json:"gitRepo,omitempty"`

	// HTTP fetches one catalog file (or OpenAPI document) from a URL.
	// +optional
	HTTP *CatalogHTTPSource `json:"http,omitempty"`

	// OpenAPI says that the files (or the fetched document) are OpenAPI
	// 3.0 or 3.1 documents, each operation a tool, and how operations
	// become tools; {} takes the defaults.
	// +optional
	OpenAPI *OpenAPITools `json:"openAPI,omitempty"`

	// Approval: Auto serves every tool of the catalog; Manual serves a tool
	// only while the contextrouter.dev/approved-tools annotation holds its
	// current digest (api.md §10.9).
	// +optional
	// +kubebuilder:default=Auto
	Approval ToolApproval `json:"approval,omitempty"`
}

// CatalogHTTPSource fetches a catalog file or an OpenAPI document from a
// URL, again every interval.
type CatalogHTTPSource struct {
	// URL of the file: http or https.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// Headers sent with every request, such as Authorization from a Secret.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Interval between fetches.
	// +optional
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Timeout of one fetch, the body included.
	// +optional
	// +kubebuilder:default="10s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// FollowRedirects says which redirects a fetch follows, as for httpAPI.
	// +optional
	// +kubebuilder:default={}
	FollowRedirects FollowRedirects `json:"followRedirects,omitempty"`
}

// OpenAPITools says how the operations of OpenAPI documents become tools.
type OpenAPITools struct {
	// Namespace given to the tools.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Namespace string `json:"namespace,omitempty"`

	// Include keeps only the operations it selects; unset keeps all.
	// +optional
	Include *OperationSelector `json:"include,omitempty"`

	// Exclude leaves out the operations it selects.
	// +optional
	Exclude *OperationSelector `json:"exclude,omitempty"`

	// IncludeDeprecated keeps deprecated operations (tagged deprecated);
	// by default they are left out.
	// +optional
	IncludeDeprecated bool `json:"includeDeprecated,omitempty"`

	// Overrides set the side effects or add safety tags of the operations
	// they select, in order, after the document's own x-contextrouter.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Overrides []OperationOverride `json:"overrides,omitempty"`
}

// OperationSelector selects the operations that have one of the tags or
// whose tool name matches one of the globs.
// +kubebuilder:validation:XValidation:rule="has(self.tags) || has(self.operations)",message="set tags or operations"
type OperationSelector struct {
	// Tags of operations.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	Tags []string `json:"tags,omitempty"`

	// Operations are globs over tool names ("." separates levels, as in
	// AgentPermission globs), such as "find*" or "pets.**".
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=382
	Operations []string `json:"operations,omitempty"`
}

// OperationOverride changes what the tools of the operations it selects
// declare.
// +kubebuilder:validation:XValidation:rule="has(self.tags) || has(self.operations)",message="set tags or operations"
// +kubebuilder:validation:XValidation:rule="has(self.sideEffects) || has(self.safetyTags)",message="set sideEffects or safetyTags"
type OperationOverride struct {
	OperationSelector `json:",inline"`

	// SideEffects replaces the tools' side effects.
	// +optional
	SideEffects SideEffects `json:"sideEffects,omitempty"`

	// SafetyTags are added to the tools' safety tags.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	SafetyTags []string `json:"safetyTags,omitempty"`
}

// ToolApproval says whether a tool source serves tools nobody approved.
// +kubebuilder:validation:Enum=Auto;Manual
type ToolApproval string

const (
	// ToolApprovalAuto serves every tool the catalog holds, and reports
	// their digests.
	ToolApprovalAuto ToolApproval = "Auto"
	// ToolApprovalManual holds back a tool that is new or changed since its
	// approved digest until the annotation approves the new one.
	ToolApprovalManual ToolApproval = "Manual"
)

// Tool is one entry of a tool catalog. Its id is "<namespace>.<name>", or
// the name when the namespace is empty; ids are unique within a source.
type Tool struct {
	// Name of the tool, as the agent calls it: dotted words of the
	// characters MCP allows, with at least one letter or digit.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9_-]+\.)*[_-]*[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`
	Name string `json:"name"`

	// Namespace groups tools: dotted words such as billing.invoices.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Namespace string `json:"namespace,omitempty"`

	// Description says what the tool does; it is what selection reads most.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description"`

	// InputSchema is the JSON Schema (draft 2020-12) of the arguments, an
	// object schema; default {"type": "object"}.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	InputSchema *apiextensionsv1.JSON `json:"inputSchema,omitempty"`

	// Examples are questions the tool serves well.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	Examples []string `json:"examples,omitempty"`

	// AntiPatterns are questions the tool must not take.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	AntiPatterns []string `json:"antiPatterns,omitempty"`

	// Tags for selection and people.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Tags []string `json:"tags,omitempty"`

	// SideEffects says what calling the tool can do.
	// +optional
	// +kubebuilder:default=Destructive
	SideEffects SideEffects `json:"sideEffects,omitempty"`

	// SafetyTags mark what permissions may deny, such as pii or financial.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	SafetyTags []string `json:"safetyTags,omitempty"`

	// CostHint is free text for the agent, such as "low" or "$0.01/call".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CostHint string `json:"costHint,omitempty"`

	// LatencyHint is free text for the agent, such as "300ms".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LatencyHint string `json:"latencyHint,omitempty"`
}

// ID is the tool's id: "<namespace>.<name>", or the name.
func (t *Tool) ID() string {
	if t.Namespace == "" {
		return t.Name
	}
	return t.Namespace + "." + t.Name
}

// MCPSource imports the tools of an MCP server (streamable HTTP).
type MCPSource struct {
	// URL of the server's streamable HTTP endpoint.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`

	// Headers sent with every request, such as Authorization from a Secret.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Namespace given to the server's tools.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Namespace string `json:"namespace,omitempty"`

	// Interval between listings; the server's tools/list_changed
	// notifications also trigger one.
	// +optional
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Timeout of each request to the server.
	// +optional
	// +kubebuilder:default="10s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// MaxTools bounds the listing; a larger one is refused.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxTools int32 `json:"maxTools,omitempty"`

	// FollowRedirects says which redirects requests follow, as for httpAPI.
	// +optional
	// +kubebuilder:default={}
	FollowRedirects FollowRedirects `json:"followRedirects,omitempty"`

	// Approval: Auto serves every tool the server lists; Manual serves a
	// tool only while the contextrouter.dev/approved-tools annotation holds
	// its current digest (api.md §10.9).
	// +optional
	// +kubebuilder:default=Auto
	Approval ToolApproval `json:"approval,omitempty"`
}

// ToolExpansion says which words besides a question's own count as evidence
// for a tool.
// +kubebuilder:validation:Enum=Synonyms;None
type ToolExpansion string

const (
	// ToolExpansionSynonyms also counts, at a fraction of a word's weight,
	// the words WordNet relates to it: synonyms, related forms, broader
	// words (api.md §10.3).
	ToolExpansionSynonyms ToolExpansion = "Synonyms"
	// ToolExpansionNone counts the question's own words only.
	ToolExpansionNone ToolExpansion = "None"
)

// RouterToolsSpec says how many tools a query shortlists and when the
// fallback tools join.
type RouterToolsSpec struct {
	// TopK is the number of cards a query returns unless it asks for fewer or more.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TopK int32 `json:"topK,omitempty"`

	// MinScore leaves out cards scoring below it (a decimal).
	// +optional
	// +kubebuilder:default="0"
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MinScore string `json:"minScore,omitempty"`

	// MinConfidence: when the best card's confidence is below it, the
	// fallback tools are added (a decimal in [0, 1]). Confidence is the
	// calibrated chance that a card's tool is one the question needs.
	// +optional
	// +kubebuilder:default="0.5"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	MinConfidence string `json:"minConfidence,omitempty"`

	// CollapseThreshold: tools whose descriptions and tags are at least
	// this alike (Jaccard of their term sets, numbers aside) are
	// near-duplicates and share one card, which lists the others in
	// "also" (a decimal in [0, 1]; "0" gives every tool its own card).
	// +optional
	// +kubebuilder:default="0.8"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	CollapseThreshold string `json:"collapseThreshold,omitempty"`

	// Adaptive shortens the shortlist to the cards whose confidence is
	// close to the best card's.
	// +optional
	// +kubebuilder:default={}
	Adaptive ToolsAdaptive `json:"adaptive,omitempty"`

	// Fallback tools, such as a web search, added when no card is confident.
	// +optional
	// +listType=map
	// +listMapKey=source
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Fallback []ToolReference `json:"fallback,omitempty"`

	// Expansion: Synonyms also counts the words related to the question's
	// words (synonyms, related forms, broader words) at a fraction of their
	// weight; None counts the question's own words only.
	// +optional
	// +kubebuilder:default=Synonyms
	Expansion ToolExpansion `json:"expansion,omitempty"`

	// Learning says whom the outcomes agents report teach (api.md §10.10).
	// +optional
	// +kubebuilder:default={}
	Learning ToolLearning `json:"learning,omitempty"`
}

// ToolLearningScope says whom a learned outcome helps.
// +kubebuilder:validation:Enum=Off;Agent;Shared
type ToolLearningScope string

const (
	// ToolLearningOff refuses outcomes; nothing is learned.
	ToolLearningOff ToolLearningScope = "Off"
	// ToolLearningAgent: an outcome re-ranks the reporting agent's
	// shortlists only.
	ToolLearningAgent ToolLearningScope = "Agent"
	// ToolLearningShared: an outcome re-ranks every agent's shortlists; only
	// agents whose AgentPermission sets tools.teach may report.
	ToolLearningShared ToolLearningScope = "Shared"
)

// ToolLearning configures learning from outcomes.
type ToolLearning struct {
	// Scope: Agent (the default), Shared or Off.
	// +optional
	// +kubebuilder:default=Agent
	Scope ToolLearningScope `json:"scope,omitempty"`
}

// ToolsAdaptive says whether and where the shortlist is cut.
type ToolsAdaptive struct {
	// Enabled cuts the shortlist: without it a query gets topK cards.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Rule: Relative (the default: the cut the issue specified, relative to
	// the best card) or Utility.
	// +optional
	// +kubebuilder:default=Relative
	Rule AdaptiveRule `json:"rule,omitempty"`
	// RecallWeight (rule Utility): the first k cards kept maximise their
	// expected precision plus this weight times the relevant tools they
	// are expected to hold (a decimal of at least 0).
	// +optional
	// +kubebuilder:default="1.75"
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	RecallWeight string `json:"recallWeight,omitempty"`
	// RelativeCut (rule Relative): a card is kept when its confidence is at
	// least this share of the best card's (a decimal in [0, 1]).
	// +optional
	// +kubebuilder:default="0.15"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	RelativeCut string `json:"relativeCut,omitempty"`
}

// AdaptiveRule is how an adaptive shortlist is cut (api.md §10.3).
// +kubebuilder:validation:Enum=Utility;Relative
type AdaptiveRule string

const (
	// AdaptiveUtility keeps the first k cards that maximise the sum of
	// their confidences over k plus RecallWeight times that sum.
	AdaptiveUtility AdaptiveRule = "Utility"
	// AdaptiveRelative keeps the cards whose confidence is at least
	// RelativeCut times the best card's.
	AdaptiveRelative AdaptiveRule = "Relative"
)

// Utility says whether the rule, or the default when it is unset, is
// AdaptiveUtility: the one reading of the rule for the router and eval.
func (r AdaptiveRule) Utility() bool {
	if r == "" {
		r = DefaultToolsAdaptiveRule
	}
	return r == AdaptiveUtility
}

// ToolReference names a tool of a source.
type ToolReference struct {
	// Source is the ContextSource's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Source string `json:"source"`
	// Name is the tool's id.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=382
	Name string `json:"name"`
}

// ToolRules are the tool rules of an AgentPermission.
type ToolRules struct {
	// Allow are globs over tool ids ("." separates levels); when any
	// applying permission lists some, a tool must match one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=382
	Allow []string `json:"allow,omitempty"`

	// Deny are globs over tool ids; deny beats allow.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=382
	Deny []string `json:"deny,omitempty"`

	// MaxSideEffects is the most a usable tool may do; unset is no limit.
	// +optional
	MaxSideEffects SideEffects `json:"maxSideEffects,omitempty"`

	// DenySafetyTags: a tool carrying one of them is not usable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	DenySafetyTags []string `json:"denySafetyTags,omitempty"`

	// Teach lets the agent's outcomes teach every agent when the router's
	// spec.tools.learning.scope is Shared (api.md §10.10).
	// +optional
	Teach bool `json:"teach,omitempty"`
}

// ToolPath is a tool id as a slash path, which is how tool rules' globs
// match it: "." separates levels, as "/" does for doublestar.
func ToolPath(id string) string { return strings.ReplaceAll(id, ".", "/") }
