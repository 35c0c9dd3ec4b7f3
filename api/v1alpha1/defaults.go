package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultRouterName names the ContextRouter that standalone manifests imply
// when they declare none.
const DefaultRouterName = "default"

// Default values, mirroring the +kubebuilder:default markers so that objects
// read from files behave exactly like objects the API server has defaulted.
const (
	defaultMaxTokens       int32 = 8000
	defaultDedupThreshold        = "0.85"
	defaultCacheTTL              = 5 * time.Minute
	defaultCacheMaxEntries int32 = 1000
	defaultCacheMaxBytes         = "64Mi"
	defaultReplicas        int32 = 2
	defaultMaxChunkTokens  int32 = 512
	defaultGitInterval           = 5 * time.Minute
	defaultHTTPTimeout           = 5 * time.Second
	defaultMaxResults      int32 = 20
	defaultMaxSize               = "1Mi"
	// defaultFetchInterval and defaultFetchTimeout are those of the
	// sources that fetch from a server now and then: MCP listings and
	// catalogs over HTTP.
	defaultFetchInterval       = 5 * time.Minute
	defaultFetchTimeout        = 10 * time.Second
	defaultMCPMaxTools   int32 = 1000
	// DefaultToolsTopK, DefaultToolsMinConfidence,
	// DefaultToolsCollapseThreshold, DefaultToolsAdaptiveRule,
	// DefaultToolsRecallWeight and DefaultToolsRelativeCut are spec.tools's
	// defaults; eval tools measures with them. The adaptive ones were
	// picked on MetaTool dev (hack/toolshort, api.md §10.3).
	DefaultToolsTopK              int32 = 5
	DefaultToolsMinConfidence           = "0.5"
	DefaultToolsCollapseThreshold       = "0.8"
	DefaultToolsAdaptiveRule            = AdaptiveRelative
	DefaultToolsRecallWeight            = "1.75"
	DefaultToolsRelativeCut             = "0.15"
	defaultEmbedBatchSize         int32 = 64
	defaultEmbedTimeout                 = 30 * time.Second
	// DefaultDenseWeight applies also when spec.ranking.hybrid is absent.
	DefaultDenseWeight         = "0.5"
	defaultRerankTopN    int32 = 20
	defaultRerankTimeout       = 10 * time.Second
	// DefaultSessionTTL, DefaultMaxSessions and DefaultSessionBytes are
	// spec.sessions's defaults; the embedded store takes its own from them.
	DefaultSessionTTL         = 24 * time.Hour
	DefaultMaxSessions  int32 = 10000
	DefaultSessionBytes       = "256Mi"
)

// defaultInclude returns a fresh slice so that defaulted objects never share
// backing arrays.
func defaultInclude() []string { return []string{"**/*.md", "**/*.txt"} }

// defaultCatalogInclude is the include of a tool catalog's directory or
// repository: JSON and YAML files.
func defaultCatalogInclude() []string { return []string{"**/*.json", "**/*.yaml", "**/*.yml"} }

func defaultQuantity(q **resource.Quantity, s string) {
	if *q == nil {
		v := resource.MustParse(s)
		*q = &v
	}
}

func defaultDuration(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

func defaultInt32Ptr(p **int32, v int32) {
	if *p == nil {
		*p = &v
	}
}

// setDefault sets *p to v when *p is the zero value.
func setDefault[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Default fills the fields the kubebuilder markers default. It is idempotent.
//
// Integer fields with a nonzero default are not pointers, so an explicit 0 is
// indistinguishable from an absent field and receives the default too.
func (r *ContextRouter) Default() {
	s := &r.Spec
	setDefault(&s.DefaultAccess, AccessDeny)

	setDefault(&s.Budget.MaxTokens, defaultMaxTokens)
	// ReserveTokens defaults to 0, its zero value.
	setDefault(&s.Budget.Truncation, TruncationDrop)
	setDefault(&s.Budget.Estimator, EstimatorCharsDiv4)

	setDefault(&s.Ranking.Strategy, RankingRelevance)
	setDefault(&s.Ranking.Scorer, ScorerBM25)
	setDefault(&s.Ranking.DedupThreshold, defaultDedupThreshold)
	setDefault(&s.Ranking.OnNoMatch, NoMatchEmpty)
	if e := s.Ranking.Embedding; e != nil {
		setDefault(&e.BatchSize, defaultEmbedBatchSize)
		defaultDuration(&e.Timeout, defaultEmbedTimeout)
	}
	if h := s.Ranking.Hybrid; h != nil {
		setDefault(&h.DenseWeight, DefaultDenseWeight)
	}
	if rr := s.Ranking.Rerank; rr != nil {
		setDefault(&rr.Format, RerankCohere)
		setDefault(&rr.TopN, defaultRerankTopN)
		defaultDuration(&rr.Timeout, defaultRerankTimeout)
	}

	defaultDuration(&s.Cache.TTL, defaultCacheTTL)
	defaultInt32Ptr(&s.Cache.MaxEntries, defaultCacheMaxEntries)
	defaultQuantity(&s.Cache.MaxBytes, defaultCacheMaxBytes)

	setDefault(&s.Auth.Mode, AuthNone)
	s.Audit.Default()

	defaultInt32Ptr(&s.Deployment.Replicas, defaultReplicas)

	setDefault(&s.Tools.TopK, DefaultToolsTopK)
	setDefault(&s.Tools.MinScore, "0")
	setDefault(&s.Tools.MinConfidence, DefaultToolsMinConfidence)
	setDefault(&s.Tools.CollapseThreshold, DefaultToolsCollapseThreshold)
	setDefault(&s.Tools.Adaptive.Rule, DefaultToolsAdaptiveRule)
	setDefault(&s.Tools.Adaptive.RecallWeight, DefaultToolsRecallWeight)
	setDefault(&s.Tools.Adaptive.RelativeCut, DefaultToolsRelativeCut)
	setDefault(&s.Tools.Expansion, ToolExpansionSynonyms)
	setDefault(&s.Tools.Learning.Scope, ToolLearningAgent)

	setDefault(&s.Sessions.Store, SessionStoreMemory)
	defaultDuration(&s.Sessions.TTL, DefaultSessionTTL)
	setDefault(&s.Sessions.MaxSessions, DefaultMaxSessions)
	defaultQuantity(&s.Sessions.MaxBytes, DefaultSessionBytes)
	setDefault(&s.Sessions.DedupThreshold, DefaultSessionDedupThreshold)
	setDefault(&s.Sessions.Secrets, SessionSecretsMask)
	setDefault(&s.Sessions.Firewall.MaxChars, DefaultFirewallMaxChars)
}

// Default fills the fields the kubebuilder markers default. A route has none;
// the method exists so that every kind can be defaulted the same way.
func (r *ContextRoute) Default() {}

// Default fills the fields the kubebuilder markers default, including those of
// whichever source block is set. It is idempotent.
func (r *ContextSource) Default() {
	s := &r.Spec
	// Priority defaults to 0, its zero value.
	setDefault(&s.Sensitivity, SensitivityInternal)
	setDefault(&s.Chunking.Strategy, ChunkingMarkdownSections)
	setDefault(&s.Chunking.MaxChunkTokens, defaultMaxChunkTokens)
	s.Freshness.Default()

	defaultDirectory(s.Directory, defaultInclude)
	defaultGitRepo(s.GitRepo, defaultInclude)
	if h := s.HTTPAPI; h != nil {
		setDefault(&h.Method, HTTPMethodGet)
		defaultDuration(&h.Timeout, defaultHTTPTimeout)
		setDefault(&h.MaxResults, defaultMaxResults)
		defaultQuantity(&h.MaxResponseSize, defaultMaxSize)
		setDefault(&h.FollowRedirects.Policy, RedirectSameHost)
	}
	if t := s.Tools; t != nil {
		defaultDirectory(t.Directory, defaultCatalogInclude)
		defaultGitRepo(t.GitRepo, defaultCatalogInclude)
		if h := t.HTTP; h != nil {
			defaultDuration(&h.Interval, defaultFetchInterval)
			defaultDuration(&h.Timeout, defaultFetchTimeout)
			setDefault(&h.FollowRedirects.Policy, RedirectSameHost)
		}
		setDefault(&t.Approval, ToolApprovalAuto)
		for i := range t.Catalog {
			t.Catalog[i].Default()
		}
	}
	if m := s.MCP; m != nil {
		defaultDuration(&m.Interval, defaultFetchInterval)
		defaultDuration(&m.Timeout, defaultFetchTimeout)
		setDefault(&m.MaxTools, defaultMCPMaxTools)
		setDefault(&m.FollowRedirects.Policy, RedirectSameHost)
		setDefault(&m.Approval, ToolApprovalAuto)
	}
}

// Default fills a catalog entry's defaults; catalog files are defaulted
// with it too. It is idempotent.
func (t *Tool) Default() {
	setDefault(&t.SideEffects, SideEffectsDestructive)
}

// defaultDirectory defaults a directory block; include depends on what the
// files are (documents or tool catalogs), so it has no marker default. An
// empty list counts as absent: it cannot survive a JSON round trip
// (omitempty), and a source that includes nothing is never intended.
func defaultDirectory(d *DirectorySource, include func() []string) {
	if d == nil {
		return
	}
	if len(d.Include) == 0 {
		d.Include = include()
	}
	defaultQuantity(&d.MaxFileSize, defaultMaxSize)
}

// defaultGitRepo defaults a gitRepo block, as defaultDirectory.
func defaultGitRepo(g *GitRepoSource, include func() []string) {
	if g == nil {
		return
	}
	if len(g.Include) == 0 {
		g.Include = include()
	}
	defaultDuration(&g.Interval, defaultGitInterval)
	defaultQuantity(&g.MaxFileSize, defaultMaxSize)
}

// Default fills the fields the kubebuilder markers default. It is idempotent.
func (r *AgentPermission) Default() {
	s := &r.Spec
	setDefault(&s.Default, AccessDeny)
	setDefault(&s.MaxSensitivity, SensitivityInternal)
	setDefault(&s.SensitivityAction, SensitivityActionDrop)
	setDefault(&s.PathMatching, PathMatchingCaseSensitive)
}

// DefaultRouter returns the router that standalone manifests imply when they
// declare none: named "default", fully defaulted, and with defaultAccess Allow
// so that a quick start needs only routes and sources.
func DefaultRouter(namespace string) *ContextRouter {
	r := &ContextRouter{
		TypeMeta:   metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: KindContextRouter},
		ObjectMeta: metav1.ObjectMeta{Name: DefaultRouterName, Namespace: namespace},
		Spec:       ContextRouterSpec{DefaultAccess: AccessAllow},
	}
	r.Default()
	return r
}
