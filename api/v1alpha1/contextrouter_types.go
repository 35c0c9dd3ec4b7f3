package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TruncationMode says what happens to a chunk that does not fit the remaining budget.
// +kubebuilder:validation:Enum=Drop;TruncateEnd;TruncateMiddle
type TruncationMode string

const (
	TruncationDrop           TruncationMode = "Drop"
	TruncationTruncateEnd    TruncationMode = "TruncateEnd"
	TruncationTruncateMiddle TruncationMode = "TruncateMiddle"
)

// TokenEstimator names how tokens are counted.
// +kubebuilder:validation:Enum=CharsDiv4;Words;Whitespace;O200kBase;Cl100kBase
type TokenEstimator string

const (
	// EstimatorCharsDiv4 counts ceil(characters / 4).
	EstimatorCharsDiv4 TokenEstimator = "CharsDiv4"
	// EstimatorWords counts ceil(words * 4 / 3), words being letter/digit runs and other symbols.
	EstimatorWords TokenEstimator = "Words"
	// EstimatorWhitespace counts whitespace-separated fields.
	EstimatorWhitespace TokenEstimator = "Whitespace"
	// EstimatorO200kBase counts the tokens of OpenAI's o200k_base encoding (GPT-4o and later).
	EstimatorO200kBase TokenEstimator = "O200kBase"
	// EstimatorCl100kBase counts the tokens of OpenAI's cl100k_base encoding (GPT-4, GPT-3.5).
	EstimatorCl100kBase TokenEstimator = "Cl100kBase"
)

// RankingStrategy orders the candidate chunks.
// +kubebuilder:validation:Enum=Relevance;Recency;Manual;Embedding;Hybrid
type RankingStrategy string

const (
	RankingRelevance RankingStrategy = "Relevance"
	RankingRecency   RankingStrategy = "Recency"
	RankingManual    RankingStrategy = "Manual"
	RankingEmbedding RankingStrategy = "Embedding"
	RankingHybrid    RankingStrategy = "Hybrid"
)

// Scorer computes relevance_score.
// +kubebuilder:validation:Enum=BM25;Keyword
type Scorer string

const (
	ScorerBM25    Scorer = "BM25"
	ScorerKeyword Scorer = "Keyword"
)

// NoMatchPolicy says what a query gets from its matched Directory and GitRepo
// sources when none of their chunks shares a term with the question.
// +kubebuilder:validation:Enum=Empty;Recent;Priority
type NoMatchPolicy string

const (
	// NoMatchEmpty returns none of their chunks.
	NoMatchEmpty NoMatchPolicy = "Empty"
	// NoMatchRecent returns their chunks, newest first.
	NoMatchRecent NoMatchPolicy = "Recent"
	// NoMatchPriority returns their chunks by source priority, then in source order.
	NoMatchPriority NoMatchPolicy = "Priority"
)

// AuthMode says how a router establishes the calling agent's identity.
// +kubebuilder:validation:Enum=None;ServiceAccountToken
type AuthMode string

const (
	AuthNone                AuthMode = "None"
	AuthServiceAccountToken AuthMode = "ServiceAccountToken"
)

// ContextRouterSpec configures one router: defaults, budget, ranking and how it runs.
type ContextRouterSpec struct {
	// DefaultAccess applies to agents that no AgentPermission matches.
	// +optional
	// +kubebuilder:default=Deny
	DefaultAccess AccessPolicy `json:"defaultAccess,omitempty"`

	// Budget limits the size of the assembled context.
	// +optional
	// +kubebuilder:default={}
	Budget BudgetSpec `json:"budget,omitempty"`

	// Ranking orders candidate chunks and removes near-duplicates.
	// +optional
	// +kubebuilder:default={}
	Ranking RankingSpec `json:"ranking,omitempty"`

	// Tools says how queries shortlist tools (api.md §10.3).
	// +optional
	// +kubebuilder:default={}
	Tools RouterToolsSpec `json:"tools,omitempty"`

	// Variables are exposed to route conditions as `vars`.
	// +optional
	Variables map[string]apiextensionsv1.JSON `json:"variables,omitempty"`

	// Cache configures the cache of HTTPAPI results.
	// +optional
	// +kubebuilder:default={}
	Cache CacheSpec `json:"cache,omitempty"`

	// Auth says how the router identifies callers.
	// +optional
	// +kubebuilder:default={}
	Auth AuthSpec `json:"auth,omitempty"`

	// Audit writes one JSON line per delivery of context (api.md §6.5).
	// +optional
	Audit *AuditSpec `json:"audit,omitempty"`

	// Deployment configures the router Deployment the operator creates.
	// +optional
	// +kubebuilder:default={}
	Deployment DeploymentSpec `json:"deployment,omitempty"`

	// Sessions says where sessions are kept and how long (api.md §11.8).
	// +optional
	// +kubebuilder:default={}
	Sessions SessionsSpec `json:"sessions,omitempty"`

	// Phases sets the pack budget and kind priorities of each phase of a
	// session (api.md §11.2).
	// +optional
	Phases *PhasesSpec `json:"phases,omitempty"`

	// AllowEmpty lets the router serve a configuration that no ContextRoute
	// attaches to, which answers every query with no context. Without it such
	// a configuration is refused like an invalid one: the previous one keeps
	// serving, and a router that has none is not ready.
	// +optional
	AllowEmpty bool `json:"allowEmpty,omitempty"`
}

// The API server also checks this rule against the schema default of
// spec.budget, {}, whose fields are not defaulted: absent fields must pass.
// In a stored object both fields are always set (defaulted).
// +kubebuilder:validation:XValidation:rule="!has(self.maxTokens) || !has(self.reserveTokens) || self.reserveTokens < self.maxTokens",message="reserveTokens must be less than maxTokens"

// BudgetSpec limits the tokens of a response.
type BudgetSpec struct {
	// MaxTokens is the largest context a response may carry.
	// +optional
	// +kubebuilder:default=8000
	// +kubebuilder:validation:Minimum=1
	MaxTokens int32 `json:"maxTokens,omitempty"`

	// ReserveTokens are kept free of context (for the question and the answer).
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	ReserveTokens int32 `json:"reserveTokens,omitempty"`

	// Truncation says what happens to a chunk that does not fit.
	// +optional
	// +kubebuilder:default=Drop
	Truncation TruncationMode `json:"truncation,omitempty"`

	// Estimator says how tokens are counted.
	// +optional
	// +kubebuilder:default=CharsDiv4
	Estimator TokenEstimator `json:"estimator,omitempty"`
}

// As for BudgetSpec, the rule must pass on the schema default {} of spec.ranking.
// +kubebuilder:validation:XValidation:rule="!has(self.strategy) || !(self.strategy in ['Embedding', 'Hybrid']) || has(self.embedding)",message="embedding is required for the Embedding and Hybrid strategies"
// +kubebuilder:validation:XValidation:rule="!has(self.rerank) || !has(self.strategy) || !(self.strategy in ['Recency', 'Manual'])",message="rerank applies to the Relevance, Embedding and Hybrid strategies"

// RankingSpec orders chunks.
type RankingSpec struct {
	// Strategy orders the candidates.
	// +optional
	// +kubebuilder:default=Relevance
	Strategy RankingStrategy `json:"strategy,omitempty"`

	// Scorer computes relevance_score.
	// +optional
	// +kubebuilder:default=BM25
	Scorer Scorer `json:"scorer,omitempty"`

	// DedupThreshold is the Jaccard similarity of token sets at or above which a
	// chunk is dropped as a near-duplicate of a better-ranked one; "0" disables.
	// +optional
	// +kubebuilder:default="0.85"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	DedupThreshold string `json:"dedupThreshold,omitempty"`

	// OnNoMatch says what a query gets from the Directory and GitRepo sources
	// of its matched routes when none of their chunks shares a term with the
	// question (a route matched by tags or metadata, say): Empty (none), Recent
	// (newest first) or Priority (source priority, then source order).
	// +optional
	// +kubebuilder:default=Empty
	OnNoMatch NoMatchPolicy `json:"onNoMatch,omitempty"`

	// Embedding configures an OpenAI-compatible embeddings API.
	// +optional
	Embedding *EmbeddingSpec `json:"embedding,omitempty"`

	// Hybrid tunes the fusion of the Hybrid strategy.
	// +optional
	Hybrid *HybridSpec `json:"hybrid,omitempty"`

	// Rerank names a reranking API that reorders the best candidates.
	// +optional
	Rerank *RerankSpec `json:"rerank,omitempty"`
}

// EmbeddingSpec names an OpenAI-compatible embeddings endpoint.
type EmbeddingSpec struct {
	// Endpoint is the full URL the requests are POSTed to, such as
	// https://api.openai.com/v1/embeddings.
	// +required
	// +kubebuilder:validation:Pattern=`^https?://`
	Endpoint string `json:"endpoint"`
	// Model is sent as the request's model.
	// +required
	// +kubebuilder:validation:MinLength=1
	Model string `json:"model"`
	// APIKeySecretRef holds the API key, sent as a bearer token.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
	// Dimensions is the length every returned vector must have; unset
	// accepts the model's, as long as all vectors agree.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8192
	Dimensions *int32 `json:"dimensions,omitempty"`
	// BatchSize is the number of texts sent in one request.
	// +optional
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2048
	BatchSize int32 `json:"batchSize,omitempty"`
	// Timeout bounds one request, 1ms to 5m.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('5m')",message="timeout must be between 1ms and 5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// HybridSpec weighs the dense ranking against BM25 in reciprocal rank fusion.
type HybridSpec struct {
	// DenseWeight is the share of the dense (embedding) rank in the fused
	// score, a decimal from 0 to 1; BM25 gets the rest.
	// +optional
	// +kubebuilder:default="0.5"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	DenseWeight string `json:"denseWeight,omitempty"`
}

// RerankFormat is the wire format of a reranking API.
// +kubebuilder:validation:Enum=Cohere;TEI
type RerankFormat string

const (
	// RerankCohere: {model, query, documents, top_n} answered by
	// {results: [{index, relevance_score}]} (Cohere, Jina, vLLM, LiteLLM).
	RerankCohere RerankFormat = "Cohere"
	// RerankTEI: {query, texts} answered by [{index, score}]
	// (Hugging Face text-embeddings-inference).
	RerankTEI RerankFormat = "TEI"
)

// RerankSpec names a reranking endpoint.
type RerankSpec struct {
	// Endpoint is the full URL the requests are POSTed to.
	// +required
	// +kubebuilder:validation:Pattern=`^https?://`
	Endpoint string `json:"endpoint"`
	// Model is sent as the request's model (Cohere format).
	// +optional
	Model string `json:"model,omitempty"`
	// APIKeySecretRef holds the API key, sent as a bearer token.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`
	// Format is the wire format.
	// +optional
	// +kubebuilder:default=Cohere
	Format RerankFormat `json:"format,omitempty"`
	// TopN is how many of the best candidates are reranked.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=200
	TopN int32 `json:"topN,omitempty"`
	// Timeout bounds one request, 1ms to 5m.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('5m')",message="timeout must be between 1ms and 5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// CacheSpec configures the cache of HTTPAPI results (in memory, and on disk
// under `serve --cache-dir`).
type CacheSpec struct {
	// TTL of a cached result.
	// +optional
	// +kubebuilder:default="5m"
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// MaxEntries bounds the cache; 0 disables it.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	MaxEntries *int32 `json:"maxEntries,omitempty"`
	// MaxBytes bounds the size of the cached results, in memory and,
	// separately, on disk; the least recently used go first, and a result
	// larger than the bound is not cached.
	// +optional
	// +kubebuilder:default="64Mi"
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
}

// AuthSpec says how callers are identified.
type AuthSpec struct {
	// Mode None trusts the request's agent field (trusted networks only);
	// ServiceAccountToken verifies a projected token with TokenReview.
	// +optional
	// +kubebuilder:default=None
	Mode AuthMode `json:"mode,omitempty"`
}

// DeploymentSpec configures the router Deployment.
type DeploymentSpec struct {
	// Replicas of the router.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// Image overrides the operator's own image.
	// +optional
	Image string `json:"image,omitempty"`
	// Resources of the router container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// ServiceAccountName the router runs as; empty means one the operator creates.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// BundleStatus names the compiled bundle.
type BundleStatus struct {
	// ConfigMapName holds the bundle.
	ConfigMapName string `json:"configMapName,omitempty"`
	// Hash of the bundle's content ("sha256:…").
	Hash string `json:"hash,omitempty"`
}

// ContextRouterStatus is the observed state of a router.
type ContextRouterStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted, Programmed, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// AttachedRoutes counts the routes compiled into the bundle.
	// +optional
	AttachedRoutes int32 `json:"attachedRoutes,omitempty"`
	// Sources counts the sources compiled into the bundle.
	// +optional
	Sources int32 `json:"sources,omitempty"`
	// Bundle names the compiled bundle.
	// +optional
	Bundle *BundleStatus `json:"bundle,omitempty"`
	// Replicas of the router Deployment.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas of the router Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

// ContextRouter answers "what goes into this agent's context window?" for the
// routes, sources and permissions attached to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctxrouter,categories=contextrouting
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Routes",type=integer,JSONPath=`.status.attachedRoutes`
// +kubebuilder:printcolumn:name="Sources",type=integer,JSONPath=`.status.sources`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ContextRouter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	// +kubebuilder:default={}
	Spec ContextRouterSpec `json:"spec,omitempty"`
	// +optional
	Status ContextRouterStatus `json:"status,omitempty"`
}

// ContextRouterList is a list of ContextRouters.
// +kubebuilder:object:root=true
type ContextRouterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContextRouter `json:"items"`
}
