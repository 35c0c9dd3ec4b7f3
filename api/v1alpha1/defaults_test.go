package v1alpha1

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// defaulter is implemented by every kind.
type defaulter interface{ Default() }

func TestDefault(t *testing.T) {
	fullRouterSpec := ContextRouterSpec{
		DefaultAccess: AccessDeny,
		Budget:        BudgetSpec{MaxTokens: 8000, ReserveTokens: 0, Truncation: TruncationDrop, Estimator: EstimatorCharsDiv4},
		Ranking:       RankingSpec{Strategy: RankingRelevance, Scorer: ScorerBM25, DedupThreshold: "0.85", OnNoMatch: NoMatchEmpty},
		Cache:         CacheSpec{TTL: dur(5 * time.Minute), MaxEntries: ptr[int32](1000), MaxBytes: qty("64Mi")},
		Auth:          AuthSpec{Mode: AuthNone},
		Deployment:    DeploymentSpec{Replicas: ptr[int32](2)},
		Tools: RouterToolsSpec{TopK: 5, MinScore: "0", MinConfidence: "0.5", CollapseThreshold: "0.8",
			Adaptive: ToolsAdaptive{Rule: AdaptiveRelative, RecallWeight: "1.75", RelativeCut: "0.15"}, Expansion: ToolExpansionSynonyms, Learning: ToolLearning{Scope: ToolLearningAgent}},
		Sessions: SessionsSpec{Store: SessionStoreMemory, TTL: dur(24 * time.Hour), MaxSessions: 10000, MaxBytes: qty("256Mi"),
			DedupThreshold: "0.9", Firewall: FirewallSpec{MaxChars: 2000}, Secrets: SessionSecretsMask},
	}
	tests := []struct {
		name string
		in   defaulter
		want defaulter
	}{
		{
			name: "router empty",
			in:   &ContextRouter{},
			want: &ContextRouter{Spec: fullRouterSpec},
		},
		{
			name: "router keeps set values",
			in: &ContextRouter{Spec: ContextRouterSpec{
				DefaultAccess: AccessAllow,
				Budget:        BudgetSpec{MaxTokens: 100, ReserveTokens: 10, Truncation: TruncationTruncateEnd, Estimator: EstimatorWords},
				Ranking:       RankingSpec{Strategy: RankingManual, Scorer: ScorerKeyword, DedupThreshold: "0", OnNoMatch: NoMatchRecent},
				Cache:         CacheSpec{TTL: dur(time.Second), MaxEntries: ptr[int32](0), MaxBytes: qty("1Ki")},
				Auth:          AuthSpec{Mode: AuthServiceAccountToken},
				Deployment:    DeploymentSpec{Replicas: ptr[int32](0), Image: "img"},
				Tools: RouterToolsSpec{TopK: 1, MinScore: "2", MinConfidence: "0", CollapseThreshold: "0",
					Adaptive: ToolsAdaptive{Enabled: true, Rule: AdaptiveRelative, RecallWeight: "0", RelativeCut: "0.5"}, Expansion: ToolExpansionNone, Learning: ToolLearning{Scope: ToolLearningShared}},
				Sessions: SessionsSpec{Store: SessionStoreRedis, TTL: dur(time.Hour), MaxSessions: 5, MaxBytes: qty("1Mi"),
					DedupThreshold: "0.5", Firewall: FirewallSpec{MaxChars: 500}, Secrets: SessionSecretsOff, Redis: &RedisSpec{Address: "r:6379"}},
			}},
			want: &ContextRouter{Spec: ContextRouterSpec{
				DefaultAccess: AccessAllow,
				Budget:        BudgetSpec{MaxTokens: 100, ReserveTokens: 10, Truncation: TruncationTruncateEnd, Estimator: EstimatorWords},
				Ranking:       RankingSpec{Strategy: RankingManual, Scorer: ScorerKeyword, DedupThreshold: "0", OnNoMatch: NoMatchRecent},
				Cache:         CacheSpec{TTL: dur(time.Second), MaxEntries: ptr[int32](0), MaxBytes: qty("1Ki")},
				Auth:          AuthSpec{Mode: AuthServiceAccountToken},
				Deployment:    DeploymentSpec{Replicas: ptr[int32](0), Image: "img"},
				Tools: RouterToolsSpec{TopK: 1, MinScore: "2", MinConfidence: "0", CollapseThreshold: "0",
					Adaptive: ToolsAdaptive{Enabled: true, Rule: AdaptiveRelative, RecallWeight: "0", RelativeCut: "0.5"}, Expansion: ToolExpansionNone, Learning: ToolLearning{Scope: ToolLearningShared}},
				Sessions: SessionsSpec{Store: SessionStoreRedis, TTL: dur(time.Hour), MaxSessions: 5, MaxBytes: qty("1Mi"),
					DedupThreshold: "0.5", Firewall: FirewallSpec{MaxChars: 500}, Secrets: SessionSecretsOff, Redis: &RedisSpec{Address: "r:6379"}},
			}},
		},
		{
			name: "route has no defaults",
			in:   &ContextRoute{Spec: ContextRouteSpec{Sources: []LocalObjectReference{{Name: "a"}}}},
			want: &ContextRoute{Spec: ContextRouteSpec{Sources: []LocalObjectReference{{Name: "a"}}}},
		},
		{
			name: "inline source",
			in:   &ContextSource{Spec: ContextSourceSpec{Type: SourceInline, Inline: &InlineSource{Content: "x"}}},
			want: &ContextSource{Spec: ContextSourceSpec{
				Type: SourceInline, Sensitivity: SensitivityInternal,
				Chunking: ChunkingSpec{Strategy: ChunkingMarkdownSections, MaxChunkTokens: 512},
				Inline:   &InlineSource{Content: "x"},
			}},
		},
		{
			name: "directory source",
			in:   &ContextSource{Spec: ContextSourceSpec{Type: SourceDirectory, Directory: &DirectorySource{Path: "docs"}}},
			want: &ContextSource{Spec: ContextSourceSpec{
				Type: SourceDirectory, Sensitivity: SensitivityInternal,
				Chunking:  ChunkingSpec{Strategy: ChunkingMarkdownSections, MaxChunkTokens: 512},
				Directory: &DirectorySource{Path: "docs", Include: []string{"**/*.md", "**/*.txt"}, MaxFileSize: qty("1Mi")},
			}},
		},
		{
			name: "directory source keeps set values and treats an empty include as absent",
			in: &ContextSource{Spec: ContextSourceSpec{Type: SourceDirectory, Priority: 3, Sensitivity: SensitivityPublic,
				Chunking:  ChunkingSpec{Strategy: ChunkingWholeFile, MaxChunkTokens: 64},
				Directory: &DirectorySource{Include: []string{}, Exclude: []string{"x/**"}, MaxFileSize: qty("2Ki")}}},
			want: &ContextSource{Spec: ContextSourceSpec{Type: SourceDirectory, Priority: 3, Sensitivity: SensitivityPublic,
				Chunking:  ChunkingSpec{Strategy: ChunkingWholeFile, MaxChunkTokens: 64},
				Directory: &DirectorySource{Include: []string{"**/*.md", "**/*.txt"}, Exclude: []string{"x/**"}, MaxFileSize: qty("2Ki")}}},
		},
		{
			name: "git source",
			in:   &ContextSource{Spec: ContextSourceSpec{Type: SourceGitRepo, GitRepo: &GitRepoSource{URL: "https://h/r.git", Include: []string{"docs/**"}}}},
			want: &ContextSource{Spec: ContextSourceSpec{
				Type: SourceGitRepo, Sensitivity: SensitivityInternal,
				Chunking: ChunkingSpec{Strategy: ChunkingMarkdownSections, MaxChunkTokens: 512},
				GitRepo: &GitRepoSource{URL: "https://h/r.git", Include: []string{"docs/**"},
					Interval: dur(5 * time.Minute), MaxFileSize: qty("1Mi")},
			}},
		},
		{
			name: "http source",
			in:   &ContextSource{Spec: ContextSourceSpec{Type: SourceHTTPAPI, HTTPAPI: &HTTPAPISource{URL: "https://h/s", TextField: "t"}}},
			want: &ContextSource{Spec: ContextSourceSpec{
				Type: SourceHTTPAPI, Sensitivity: SensitivityInternal,
				Chunking: ChunkingSpec{Strategy: ChunkingMarkdownSections, MaxChunkTokens: 512},
				HTTPAPI: &HTTPAPISource{URL: "https://h/s", TextField: "t", Method: HTTPMethodGet,
					Timeout: dur(5 * time.Second), MaxResults: 20, MaxResponseSize: qty("1Mi"),
					FollowRedirects: FollowRedirects{Policy: RedirectSameHost}},
			}},
		},
		{
			name: "http source keeps POST",
			in:   &ContextSource{Spec: ContextSourceSpec{Type: SourceHTTPAPI, HTTPAPI: &HTTPAPISource{Method: HTTPMethodPost, MaxResults: 5, Timeout: dur(time.Second)}}},
			want: &ContextSource{Spec: ContextSourceSpec{
				Type: SourceHTTPAPI, Sensitivity: SensitivityInternal,
				Chunking: ChunkingSpec{Strategy: ChunkingMarkdownSections, MaxChunkTokens: 512},
				HTTPAPI: &HTTPAPISource{Method: HTTPMethodPost, Timeout: dur(time.Second), MaxResults: 5,
					MaxResponseSize: qty("1Mi"), FollowRedirects: FollowRedirects{Policy: RedirectSameHost}},
			}},
		},
		{
			name: "permission",
			in:   &AgentPermission{Spec: AgentPermissionSpec{Agents: []string{"*"}}},
			want: &AgentPermission{Spec: AgentPermissionSpec{Agents: []string{"*"},
				Default: AccessDeny, MaxSensitivity: SensitivityInternal, SensitivityAction: SensitivityActionDrop,
				PathMatching: PathMatchingCaseSensitive}},
		},
		{
			name: "permission keeps set values",
			in: &AgentPermission{Spec: AgentPermissionSpec{Agents: []string{"a"},
				Default: AccessAllow, MaxSensitivity: SensitivityRestricted, SensitivityAction: SensitivityActionRedact,
				PathMatching: PathMatchingCaseInsensitive}},
			want: &AgentPermission{Spec: AgentPermissionSpec{Agents: []string{"a"},
				Default: AccessAllow, MaxSensitivity: SensitivityRestricted, SensitivityAction: SensitivityActionRedact,
				PathMatching: PathMatchingCaseInsensitive}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Default()
			if !equality.Semantic.DeepEqual(tt.in, tt.want) {
				t.Fatalf("Default() =\n%+v\nwant\n%+v", tt.in, tt.want)
			}
			// Idempotent: a second pass changes nothing, not even pointers.
			once := reflect.ValueOf(tt.in).Elem().Interface()
			tt.in.Default()
			if again := reflect.ValueOf(tt.in).Elem().Interface(); !reflect.DeepEqual(once, again) {
				t.Fatalf("second Default() changed the object:\n%+v\nthen\n%+v", once, again)
			}
		})
	}
}

func TestDefaultDoesNotShareState(t *testing.T) {
	a := &ContextSource{Spec: ContextSourceSpec{Type: SourceDirectory, Directory: &DirectorySource{}}}
	b := &ContextSource{Spec: ContextSourceSpec{Type: SourceDirectory, Directory: &DirectorySource{}}}
	a.Default()
	b.Default()
	a.Spec.Directory.Include[0] = "changed"
	a.Spec.Directory.MaxFileSize.Set(1)
	if b.Spec.Directory.Include[0] != "**/*.md" {
		t.Errorf("include shared between objects: %v", b.Spec.Directory.Include)
	}
	if got := b.Spec.Directory.MaxFileSize.String(); got != "1Mi" {
		t.Errorf("maxFileSize shared between objects: %s", got)
	}
	r1, r2 := DefaultRouter(""), DefaultRouter("")
	*r1.Spec.Cache.MaxEntries = 5
	if *r2.Spec.Cache.MaxEntries != 1000 {
		t.Errorf("cache.maxEntries shared between routers: %d", *r2.Spec.Cache.MaxEntries)
	}
}

func TestDefaultRouter(t *testing.T) {
	r := DefaultRouter("team-a")
	if r.Name != "default" || r.Namespace != "team-a" {
		t.Errorf("name/namespace = %q/%q, want default/team-a", r.Name, r.Namespace)
	}
	if r.APIVersion != "contextrouter.dev/v1alpha1" || r.Kind != "ContextRouter" {
		t.Errorf("type = %s %s", r.APIVersion, r.Kind)
	}
	if r.Spec.DefaultAccess != AccessAllow {
		t.Errorf("defaultAccess = %q, want Allow", r.Spec.DefaultAccess)
	}
	want := &ContextRouter{}
	want.Default()
	want.Spec.DefaultAccess = AccessAllow
	if !equality.Semantic.DeepEqual(r.Spec, want.Spec) {
		t.Errorf("spec = %+v, want every other default: %+v", r.Spec, want.Spec)
	}
	if errs := r.Validate(); len(errs) != 0 {
		t.Errorf("the implied router is invalid: %v", errs)
	}
}

func TestAdaptiveRuleUtility(t *testing.T) {
	for _, tt := range []struct {
		rule AdaptiveRule
		want bool
	}{
		{"", DefaultToolsAdaptiveRule == AdaptiveUtility},
		{AdaptiveRelative, false},
		{AdaptiveUtility, true},
	} {
		t.Run(string(tt.rule), func(t *testing.T) {
			if got := tt.rule.Utility(); got != tt.want {
				t.Errorf("%q.Utility() = %v, want %v", tt.rule, got, tt.want)
			}
		})
	}
}
