package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StaleAction says what a query does with a chunk older than its source's
// freshness.maxAge.
// +kubebuilder:validation:Enum=Flag;Drop
type StaleAction string

const (
	// StaleFlag keeps stale chunks and marks them (metadata.stale: true).
	StaleFlag StaleAction = "Flag"
	// StaleDrop removes stale chunks before ranking (stats.dropped.stale).
	StaleDrop StaleAction = "Drop"
)

// FreshnessSpec gives a source's content an age limit (api.md §4.7). The age
// of a chunk is measured at query time from its content time: the file's
// modification time (Directory), the served commit's time (GitRepo), the
// result's own date when httpAPI.timeField gives one, else the fetch time
// (HTTPAPI). The router's status and its content-age gauge use the same time.
type FreshnessSpec struct {
	// MaxAge: a chunk older than this is stale. Greater than 0.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxAge must be greater than 0"
	MaxAge metav1.Duration `json:"maxAge"`
	// StaleAction: Flag keeps stale chunks and marks them; Drop leaves them
	// out before ranking.
	// +optional
	// +kubebuilder:default=Flag
	StaleAction StaleAction `json:"staleAction,omitempty"`
}

// AuditQueryText says how an audit record holds the question.
// +kubebuilder:validation:Enum=Omit;Hash;Full
type AuditQueryText string

const (
	// AuditQueryOmit leaves the question out.
	AuditQueryOmit AuditQueryText = "Omit"
	// AuditQueryHash records a SHA-256 of the question, so equal questions can be grouped.
	AuditQueryHash AuditQueryText = "Hash"
	// AuditQueryFull records the question, with secrets redacted.
	AuditQueryFull AuditQueryText = "Full"
)

// AuditSpec turns on the router's audit log (api.md §6.5): one JSON line
// per delivery of context to an agent.
type AuditSpec struct {
	// Enabled writes the audit log to the router's standard output (or to
	// serve --audit-log).
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// SampleRate is the share of deliveries recorded, a decimal from 0 to 1;
	// the choice is a hash of the request id under a key each serve process
	// draws at start, so callers cannot choose ids that are never recorded.
	// +optional
	// +kubebuilder:default="1"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	SampleRate string `json:"sampleRate,omitempty"`
	// QueryText: Omit (default), Hash or Full (secrets redacted).
	// +optional
	// +kubebuilder:default=Omit
	QueryText AuditQueryText `json:"queryText,omitempty"`
}
