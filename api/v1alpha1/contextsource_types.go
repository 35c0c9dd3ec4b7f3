package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceType names the block of a ContextSource that is set.
// +kubebuilder:validation:Enum=Inline;Directory;GitRepo;HTTPAPI;Tools;MCP
type SourceType string

const (
	SourceInline    SourceType = "Inline"
	SourceDirectory SourceType = "Directory"
	SourceGitRepo   SourceType = "GitRepo"
	SourceHTTPAPI   SourceType = "HTTPAPI"
	// SourceTools holds a tool catalog (api.md §10.1).
	SourceTools SourceType = "Tools"
	// SourceMCP imports the tools of an MCP server (api.md §10.2).
	SourceMCP SourceType = "MCP"
)

// ChunkingStrategy says how documents are split into chunks.
// +kubebuilder:validation:Enum=MarkdownSections;WholeFile
type ChunkingStrategy string

const (
	// ChunkingMarkdownSections splits at "## " headings outside code fences and
	// splits long sections at paragraph boundaries.
	ChunkingMarkdownSections ChunkingStrategy = "MarkdownSections"
	// ChunkingWholeFile keeps each document as one chunk.
	ChunkingWholeFile ChunkingStrategy = "WholeFile"
)

// HTTPMethod of an HTTPAPI request.
// +kubebuilder:validation:Enum=GET;POST
type HTTPMethod string

const (
	HTTPMethodGet  HTTPMethod = "GET"
	HTTPMethodPost HTTPMethod = "POST"
)

// RedirectPolicy says which HTTP redirects an HTTPAPI request follows.
// +kubebuilder:validation:Enum=None;SameHost;AllowedHosts
type RedirectPolicy string

const (
	// RedirectNone follows no redirect.
	RedirectNone RedirectPolicy = "None"
	// RedirectSameHost follows redirects to the host and port of the URL only.
	RedirectSameHost RedirectPolicy = "SameHost"
	// RedirectAllowedHosts also follows redirects to the hosts in allowedHosts.
	RedirectAllowedHosts RedirectPolicy = "AllowedHosts"
)

// ContextSourceSpec describes where chunks come from.
// +kubebuilder:validation:XValidation:rule="(self.type == 'Inline') == has(self.inline)",message="inline must be set exactly when type is Inline"
// +kubebuilder:validation:XValidation:rule="(self.type == 'Directory') == has(self.directory)",message="directory must be set exactly when type is Directory"
// +kubebuilder:validation:XValidation:rule="(self.type == 'GitRepo') == has(self.gitRepo)",message="gitRepo must be set exactly when type is GitRepo"
// +kubebuilder:validation:XValidation:rule="(self.type == 'HTTPAPI') == has(self.httpAPI)",message="httpAPI must be set exactly when type is HTTPAPI"
// +kubebuilder:validation:XValidation:rule="(self.type == 'Tools') == has(self.tools)",message="tools must be set exactly when type is Tools"
// +kubebuilder:validation:XValidation:rule="(self.type == 'MCP') == has(self.mcp)",message="mcp must be set exactly when type is MCP"
// +kubebuilder:validation:XValidation:rule="!has(self.freshness) || self.type in ['Directory', 'GitRepo', 'HTTPAPI']",message="freshness applies to Directory, GitRepo and HTTPAPI sources only"
type ContextSourceSpec struct {
	// Type names the block that is set: Inline, Directory, GitRepo, HTTPAPI, Tools or MCP.
	// +required
	Type SourceType `json:"type"`

	// Description for people.
	// +optional
	Description string `json:"description,omitempty"`

	// Tags for people and tooling.
	// +optional
	// +listType=set
	Tags []string `json:"tags,omitempty"`

	// Priority orders sources under Manual ranking (higher first) and breaks ties everywhere.
	// +optional
	// +kubebuilder:default=0
	Priority int32 `json:"priority,omitempty"`

	// Sensitivity of everything in the source.
	// +optional
	// +kubebuilder:default=Internal
	Sensitivity Sensitivity `json:"sensitivity,omitempty"`

	// Chunking says how documents are split.
	// +optional
	// +kubebuilder:default={}
	Chunking ChunkingSpec `json:"chunking,omitempty"`

	// Freshness flags or drops chunks older than maxAge (Directory, GitRepo
	// and HTTPAPI sources only).
	// +optional
	Freshness *FreshnessSpec `json:"freshness,omitempty"`

	// Inline holds text written in the manifest.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`

	// Directory reads files from a folder.
	// +optional
	Directory *DirectorySource `json:"directory,omitempty"`

	// GitRepo reads files from a git repository.
	// +optional
	GitRepo *GitRepoSource `json:"gitRepo,omitempty"`

	// HTTPAPI asks a search API per query.
	// +optional
	HTTPAPI *HTTPAPISource `json:"httpAPI,omitempty"`

	// Tools is a tool catalog.
	// +optional
	Tools *ToolsSource `json:"tools,omitempty"`

	// MCP imports the tools of an MCP server.
	// +optional
	MCP *MCPSource `json:"mcp,omitempty"`
}

// ChunkingSpec says how documents are split.
type ChunkingSpec struct {
	// Strategy: MarkdownSections or WholeFile.
	// +optional
	// +kubebuilder:default=MarkdownSections
	Strategy ChunkingStrategy `json:"strategy,omitempty"`
	// MaxChunkTokens bounds a MarkdownSections chunk; longer sections are split at paragraphs.
	// +optional
	// +kubebuilder:default=512
	// +kubebuilder:validation:Minimum=16
	MaxChunkTokens int32 `json:"maxChunkTokens,omitempty"`
}

// InlineSource is text written in the manifest.
type InlineSource struct {
	// Title of the text.
	// +optional
	Title string `json:"title,omitempty"`
	// Content is the text.
	// +required
	// +kubebuilder:validation:MinLength=1
	Content string `json:"content"`
}

// DirectorySource reads files from a folder.
type DirectorySource struct {
	// Path of the folder: standalone, relative to the manifest file's folder;
	// in a cluster, where the volume is mounted (default /var/run/contextrouter/sources/<name>).
	// +optional
	Path string `json:"path,omitempty"`
	// Volume holds the files in a cluster.
	// +optional
	Volume *DirectoryVolume `json:"volume,omitempty"`
	// Include are doublestar globs of files to read; `**/*.md` matches top-level files too.
	// Default: **/*.md and **/*.txt; for a tool catalog (spec.tools), JSON and YAML files.
	// +optional
	Include []string `json:"include,omitempty"`
	// Exclude are doublestar globs of files to skip.
	// +optional
	Exclude []string `json:"exclude,omitempty"`
	// MaxFileSize skips larger files (with a logged reason).
	// +optional
	// +kubebuilder:default="1Mi"
	MaxFileSize *resource.Quantity `json:"maxFileSize,omitempty"`
}

// DirectoryVolume is the volume a Directory source reads in a cluster.
// +kubebuilder:validation:XValidation:rule="has(self.configMap) != has(self.persistentVolumeClaim)",message="exactly one of configMap and persistentVolumeClaim must be set"
type DirectoryVolume struct {
	// ConfigMap whose keys are the files.
	// +optional
	ConfigMap *LocalObjectReference `json:"configMap,omitempty"`
	// PersistentVolumeClaim holding the files.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimReference `json:"persistentVolumeClaim,omitempty"`
}

// PersistentVolumeClaimReference names a claim in the same namespace.
type PersistentVolumeClaimReference struct {
	// ClaimName of the PersistentVolumeClaim.
	// +required
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`
}

// GitRepoSource reads files from a git repository.
type GitRepoSource struct {
	// URL of the repository: https, ssh or file.
	// +required
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// Ref is a branch, tag or commit; empty means the remote's default branch.
	// +optional
	Ref string `json:"ref,omitempty"`
	// Include are doublestar globs of files to read.
	// Default: **/*.md and **/*.txt; for a tool catalog (spec.tools), JSON and YAML files.
	// +optional
	Include []string `json:"include,omitempty"`
	// Exclude are doublestar globs of files to skip.
	// +optional
	Exclude []string `json:"exclude,omitempty"`
	// Interval between fetches; a failed sync keeps serving the last good commit.
	// +optional
	// +kubebuilder:default="5m"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// Auth names credentials.
	// +optional
	Auth *GitAuth `json:"auth,omitempty"`
	// MaxFileSize skips larger files.
	// +optional
	// +kubebuilder:default="1Mi"
	MaxFileSize *resource.Quantity `json:"maxFileSize,omitempty"`
}

// GitAuth names the Secret with git credentials.
type GitAuth struct {
	// SecretRef: keys username+password, token, or ssh-privatekey (+ known_hosts).
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// HTTPAPISource asks a search API per query.
type HTTPAPISource struct {
	// URL; {{query}} is replaced by the URL-encoded query text.
	// +required
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Method: GET or POST.
	// +optional
	// +kubebuilder:default=GET
	Method HTTPMethod `json:"method,omitempty"`
	// Headers sent with the request.
	// +optional
	// +listType=map
	// +listMapKey=name
	Headers []HTTPHeader `json:"headers,omitempty"`
	// Body of a POST; {{query}} is replaced by the query as a JSON string literal.
	// +optional
	Body string `json:"body,omitempty"`
	// ResponsePath is the dotted path to the result list; empty means the response is the list.
	// +optional
	ResponsePath string `json:"responsePath,omitempty"`
	// TextField is the dotted path of the text inside each result.
	// +required
	// +kubebuilder:validation:MinLength=1
	TextField string `json:"textField"`
	// TitleField is the dotted path of the title inside each result.
	// +optional
	TitleField string `json:"titleField,omitempty"`
	// PathField is the dotted path of a path inside each result; it enables denyPaths.
	// +optional
	PathField string `json:"pathField,omitempty"`
	// TimeField is the dotted path of each result's date (an RFC 3339 string
	// or Unix seconds); it is the chunk's mtime, for Recency and freshness.
	// +optional
	TimeField string `json:"timeField,omitempty"`
	// Timeout of one request.
	// +optional
	// +kubebuilder:default="5s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxResults keeps the first results only.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxResults int32 `json:"maxResults,omitempty"`
	// MaxResponseSize refuses larger response bodies.
	// +optional
	// +kubebuilder:default="1Mi"
	MaxResponseSize *resource.Quantity `json:"maxResponseSize,omitempty"`
	// FollowRedirects says which redirects are followed; by default only
	// those to the URL's own host and port.
	// +optional
	// +kubebuilder:default={}
	FollowRedirects FollowRedirects `json:"followRedirects,omitempty"`
}

// FollowRedirects says which redirects an HTTPAPI request follows. A
// redirect to another host never carries the spec's headers.
// +kubebuilder:validation:XValidation:rule="(has(self.policy) && self.policy == 'AllowedHosts') == (has(self.allowedHosts) && size(self.allowedHosts) > 0)",message="allowedHosts must be set exactly when policy is AllowedHosts"
type FollowRedirects struct {
	// Policy: None, SameHost (the URL's host and port) or AllowedHosts
	// (the URL's host and port, and allowedHosts).
	// +optional
	// +kubebuilder:default=SameHost
	Policy RedirectPolicy `json:"policy,omitempty"`
	// AllowedHosts are the other hosts a redirect may go to, as host or
	// host:port; a host without a port means the scheme's default port.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=259
	AllowedHosts []string `json:"allowedHosts,omitempty"`
}

// HTTPHeader is one request header.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="exactly one of value and valueFrom must be set"
type HTTPHeader struct {
	// Name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value; ${VAR} is replaced by the environment variable VAR.
	// +optional
	Value *string `json:"value,omitempty"`
	// ValueFrom reads the value from a Secret.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource reads a header value from a Secret.
type HeaderValueSource struct {
	// SecretKeyRef selects the key.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SourceExclusion says why a ContextRouter leaves a source out of its bundle.
type SourceExclusion struct {
	// Router is the name of the ContextRouter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Router string `json:"router"`
	// Reason is a machine-readable reason, such as InvalidMount.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Reason ConditionReason `json:"reason"`
	// Message says what is wrong.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation of the source the router judged.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ContextSourceStatus is the observed state of a source.
type ContextSourceStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ExcludedBy lists the ContextRouters that leave the source out of their
	// bundle, and why, sorted by router; each router writes its own entry.
	// At most 32.
	// +optional
	// +listType=map
	// +listMapKey=router
	// +kubebuilder:validation:MaxItems=32
	ExcludedBy []SourceExclusion `json:"excludedBy,omitempty"`
	// Tools is what each router's pods make of a Tools or MCP source's
	// catalog (api.md §10.9), sorted by router; each router writes its own
	// entry. At most 32.
	// +optional
	// +listType=map
	// +listMapKey=router
	// +kubebuilder:validation:MaxItems=32
	Tools []SourceToolsStatus `json:"tools,omitempty"`
}

// SourceToolsStatus is one router's reading of a tool source's catalog.
type SourceToolsStatus struct {
	// Router is the name of the ContextRouter whose pods read the catalog.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Router string `json:"router"`
	// Approval is the source's approval as the router serves it.
	// +optional
	Approval ToolApproval `json:"approval,omitempty"`
	// Digest is the catalog digest, tools held back included ("" before
	// the catalog was read).
	// +optional
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest,omitempty"`
	// Tools is the number of tools the router serves.
	// +optional
	Tools int32 `json:"tools,omitempty"`
	// PendingTools counts the tools held back under approval Manual.
	// +optional
	PendingTools int32 `json:"pendingTools,omitempty"`
	// Pending lists the first 100 tools held back, by id.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Pending []PendingTool `json:"pending,omitempty"`
}

// PendingTool is a tool a source holds back under approval Manual: new, or
// changed since its approved digest (api.md §10.9).
type PendingTool struct {
	// ID is the tool's id.
	// +required
	// +kubebuilder:validation:MaxLength=382
	ID string `json:"id"`
	// Digest is the tool's current digest: the value that approves it.
	// +required
	// +kubebuilder:validation:MaxLength=41
	Digest string `json:"digest"`
	// Change is New (no approved digest) or Changed.
	// +required
	// +kubebuilder:validation:Enum=New;Changed
	Change string `json:"change"`
	// Fields names the parts that changed (description, inputSchema,
	// annotations, examples); absent for a new tool, and when the digests
	// cannot tell.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Fields []string `json:"fields,omitempty"`
}

// ContextSource is a place chunks come from.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctxsrc,categories=contextrouting
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Sensitivity",type=string,JSONPath=`.spec.sensitivity`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ContextSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ContextSourceSpec `json:"spec"`
	// +optional
	Status ContextSourceStatus `json:"status,omitempty"`
}

// ContextSourceList is a list of ContextSources.
// +kubebuilder:object:root=true
type ContextSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContextSource `json:"items"`
}
