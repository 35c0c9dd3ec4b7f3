package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SessionStoreType names where a router keeps sessions.
// +kubebuilder:validation:Enum=Memory;Redis
type SessionStoreType string

const (
	// SessionStoreMemory keeps sessions in the router process (each replica
	// its own).
	SessionStoreMemory SessionStoreType = "Memory"
	// SessionStoreRedis keeps sessions in a Redis or Valkey server that the
	// replicas share.
	SessionStoreRedis SessionStoreType = "Redis"
)

// SessionSecretsMode says whether session text is scanned for secrets when
// it is written (api.md §11.10).
// +kubebuilder:validation:Enum=Mask;Off
type SessionSecretsMode string

const (
	// SessionSecretsMask masks secrets ([secret:RULE]) before an entry is
	// stored.
	SessionSecretsMask SessionSecretsMode = "Mask"
	// SessionSecretsOff stores session text as written.
	SessionSecretsOff SessionSecretsMode = "Off"
)

// As for BudgetSpec, the rule must pass on the schema default {} of spec.sessions.
// +kubebuilder:validation:XValidation:rule="!has(self.store) || self.store != 'Redis' || has(self.redis)",message="redis is required when store is Redis"

// SessionsSpec says where sessions are kept and how long (api.md §11.8).
type SessionsSpec struct {
	// Store is Memory (in the router process) or Redis (a server the
	// replicas share; set redis).
	// +optional
	// +kubebuilder:default=Memory
	Store SessionStoreType `json:"store,omitempty"`

	// TTL is the idle time after which a session expires: every read and
	// write of the session starts it again. From 1m to 720h.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('720h')",message="ttl must be between 1m and 720h"
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// MaxSessions bounds the sessions of the Memory store.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxSessions int32 `json:"maxSessions,omitempty"`

	// MaxBytes bounds the size of the Memory store's sessions.
	// +optional
	// +kubebuilder:default="256Mi"
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`

	// DedupThreshold is the Jaccard similarity of term sets at or above
	// which a pack drops an entry as a near-duplicate of one already taken:
	// a decimal greater than 0 and at most 1.
	// +optional
	// +kubebuilder:default="0.9"
	// +kubebuilder:validation:Pattern=`^(0\.[0-9]*[1-9][0-9]*|1(\.0+)?)$`
	DedupThreshold string `json:"dedupThreshold,omitempty"`

	// Firewall bounds the tool results that enter a pack whole.
	// +optional
	// +kubebuilder:default={}
	Firewall FirewallSpec `json:"firewall,omitempty"`

	// Secrets is Mask (secrets in session text are masked when written,
	// so no pack, drill-down or store holds them) or Off.
	// +optional
	// +kubebuilder:default=Mask
	Secrets SessionSecretsMode `json:"secrets,omitempty"`

	// Redis is the server of the Redis store.
	// +optional
	Redis *RedisSpec `json:"redis,omitempty"`
}

// FirewallSpec configures the tool-result firewall (api.md §11.4).
type FirewallSpec struct {
	// MaxChars: a tool_result longer than this many characters is stored as
	// an artifact and replaced by a summary in packs.
	// +optional
	// +kubebuilder:default=2000
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=262144
	MaxChars int32 `json:"maxChars,omitempty"`

	// Keep lists the JSON paths shown verbatim in the summary of a
	// firewalled result of the tools a rule names (api.md §11.4).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Keep []FirewallKeepRule `json:"keep,omitempty"`
}

// FirewallKeepRule keeps paths of the results of some tools.
type FirewallKeepRule struct {
	// Tools are globs (Go's path.Match: *, ?, [a-z]) of tool names: a
	// result's metadata.tool, else its tool_call's metadata.tool, else the
	// tool_call's text up to the first '(' or white space.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=atomic
	Tools []string `json:"tools"`

	// Paths are JSON paths (api.md §11.9) whose values the summary shows,
	// each as "keep: PATH = VALUE".
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// (A path must not be empty, which Validate checks with its syntax.)
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	Paths []string `json:"paths"`
}

// RedisSpec names a Redis or Valkey server (a standalone server or a
// primary, not a cluster).
type RedisSpec struct {
	// Address is host:port.
	// +required
	// +kubebuilder:validation:MaxLength=259
	// +kubebuilder:validation:Pattern=`^[^/@?# ]+:[0-9]+$`
	Address string `json:"address"`

	// PasswordSecretRef holds the password (AUTH).
	// +optional
	PasswordSecretRef *SecretKeySelector `json:"passwordSecretRef,omitempty"`

	// DB is the database number.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	DB int32 `json:"db,omitempty"`

	// KeyPrefix starts every key the router writes, so that several
	// routers can share a server. Empty: "contextrouter:NAMESPACE/ROUTER:".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// TLS connects with TLS, verifying the server's certificate.
	// +optional
	TLS bool `json:"tls,omitempty"`
}

// The API server checks each phase's maxBudget against its budget, or the
// phase's default budget (DefaultPhaseBudgets; TestMaxBudgetRules holds the
// numbers equal) when none is set.
// +kubebuilder:validation:XValidation:rule="!has(self.route) || !has(self.route.maxBudget) || self.route.maxBudget >= (has(self.route.budget) ? self.route.budget : 2000)",message="maxBudget of route must be at least its budget (default 2000)"
// +kubebuilder:validation:XValidation:rule="!has(self.call) || !has(self.call.maxBudget) || self.call.maxBudget >= (has(self.call.budget) ? self.call.budget : 3000)",message="maxBudget of call must be at least its budget (default 3000)"
// +kubebuilder:validation:XValidation:rule="!has(self.interpret) || !has(self.interpret.maxBudget) || self.interpret.maxBudget >= (has(self.interpret.budget) ? self.interpret.budget : 4000)",message="maxBudget of interpret must be at least its budget (default 4000)"
// +kubebuilder:validation:XValidation:rule="!has(self.answer) || !has(self.answer.maxBudget) || self.answer.maxBudget >= (has(self.answer.budget) ? self.answer.budget : 6000)",message="maxBudget of answer must be at least its budget (default 6000)"
// +kubebuilder:validation:XValidation:rule="!has(self.handoff) || !has(self.handoff.maxBudget) || self.handoff.maxBudget >= (has(self.handoff.budget) ? self.handoff.budget : 4000)",message="maxBudget of handoff must be at least its budget (default 4000)"

// PhasesSpec sets each LLM-call phase's pack budget, ceiling, kinds and
// kind priorities (api.md §11.2); what is unset keeps the defaults listed
// there.
type PhasesSpec struct {
	// +optional
	Route *PhaseSpec `json:"route,omitempty"`
	// +optional
	Call *PhaseSpec `json:"call,omitempty"`
	// +optional
	Interpret *PhaseSpec `json:"interpret,omitempty"`
	// +optional
	Answer *PhaseSpec `json:"answer,omitempty"`
	// Handoff is the pack another agent or a person takes the task over with.
	// +optional
	Handoff *PhaseSpec `json:"handoff,omitempty"`
}

// List is the phases' settings in the order of PhaseNames (nil where unset).
func (ps *PhasesSpec) List() []*PhaseSpec {
	return []*PhaseSpec{ps.Route, ps.Call, ps.Interpret, ps.Answer, ps.Handoff}
}

// PhaseSpec is one phase's settings.
type PhaseSpec struct {
	// Budget of a pack, in tokens; unset, the phase's default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Budget *int32 `json:"budget,omitempty"`

	// MaxBudget is the most a request's max_tokens may raise the budget to;
	// unset, the budget (max_tokens can only lower it). At least the budget.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxBudget *int32 `json:"maxBudget,omitempty"`

	// Kinds are the entry kinds the phase takes: item kinds, "fact" and
	// "episode" (knowledge chunks count as doc_snippet). Unset, the phase's
	// default; an entry of another kind is left out by policy.
	// +optional
	// +kubebuilder:validation:MinItems=1
	Kinds []PhaseKind `json:"kinds,omitempty"`

	// MaxItemsPerKind keeps at most that many entries of a kind (pinned
	// ones first, then by score); the rest are left out by policy.
	// (maxProperties keeps the cost of the key rule within the API
	// server's budget.)
	// +optional
	// +kubebuilder:validation:MaxProperties=10
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['user_turn', 'agent_message', 'tool_call', 'tool_result', 'doc_snippet', 'memory_fact', 'plan_state', 'policy', 'episode', 'fact'])",message="maxItemsPerKind keys must be item kinds, fact or episode"
	MaxItemsPerKind map[string]KindLimit `json:"maxItemsPerKind,omitempty"`

	// KindPriorities weigh entry kinds in this phase: an item kind or
	// "episode" → a decimal in [0, 1]. Kinds not listed keep their default
	// weight.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['user_turn', 'agent_message', 'tool_call', 'tool_result', 'doc_snippet', 'memory_fact', 'plan_state', 'policy', 'episode'])",message="kindPriorities keys must be item kinds or episode"
	KindPriorities map[string]KindPriority `json:"kindPriorities,omitempty"`
}

// PhaseKind is an entry kind a phase takes (PhaseEntryKinds).
// +kubebuilder:validation:Enum=user_turn;agent_message;tool_call;tool_result;doc_snippet;memory_fact;plan_state;policy;episode;fact
type PhaseKind string

// KindLimit is the most entries of one kind a pack takes.
// +kubebuilder:validation:Minimum=0
type KindLimit int32

// KindPriority is a decimal in [0, 1], such as "0.8".
// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
type KindPriority string

// SessionEntryKinds are the keys of kindPriorities: the session item kinds
// (internal/session.Kinds, whose test holds the two lists equal) and
// episode.
var SessionEntryKinds = []string{"user_turn", "agent_message", "tool_call", "tool_result", "doc_snippet", "memory_fact", "plan_state", "policy", "episode"}

// PhaseEntryKinds are the kinds of spec.phases.*.kinds and the keys of
// maxItemsPerKind: SessionEntryKinds and fact.
var PhaseEntryKinds = []string{"user_turn", "agent_message", "tool_call", "tool_result", "doc_snippet", "memory_fact", "plan_state", "policy", "episode", "fact"}

// PhaseNames are the LLM-call phases of session packs, in pipeline order
// (internal/session.Phases), and DefaultPhaseBudgets their default
// budgets in tokens, in that order (api.md §11.2).
var (
	PhaseNames          = []string{"route", "call", "interpret", "answer", "handoff"}
	DefaultPhaseBudgets = []int32{2000, 3000, 4000, 6000, 4000}
)

// Bounds and defaults of spec.sessions.
const (
	MinSessionTTL = time.Minute
	MaxSessionTTL = 720 * time.Hour
	// DefaultFirewallMaxChars is also the firewall's own default.
	DefaultFirewallMaxChars int32 = 2000
	MinFirewallMaxChars     int32 = 100
	MaxFirewallMaxChars     int32 = 262144
	// Bounds of spec.sessions.firewall.keep.
	MaxKeepRules           = 16
	MaxKeepTools           = 32
	MaxKeepToolBytes       = 256
	MaxKeepPaths           = 32
	MaxSessionsLimit int32 = 1_000_000
	MaxPhaseBudget   int32 = 1_000_000
	// DefaultSessionDedupThreshold is spec.sessions.dedupThreshold's default.
	DefaultSessionDedupThreshold       = "0.9"
	maxRedisDB                   int32 = 1023
	maxKeyPrefix                       = 256
)
