package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validCase is one mutation of a valid object that must produce exactly one
// error, at field, whose body contains msg.
type validCase[T any] struct {
	name   string
	mutate func(*T)
	field  string
	msg    string
}

func runValidation[T any](t *testing.T, base func() *T, validate func(*T) field.ErrorList, cases []validCase[T]) {
	t.Helper()
	if errs := validate(base()); len(errs) != 0 {
		t.Fatalf("base object is invalid: %v", errs.ToAggregate())
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := base()
			tc.mutate(obj)
			errs := validate(obj)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1 at %s: %v", len(errs), tc.field, errs.ToAggregate())
			}
			if errs[0].Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", errs[0].Field, tc.field, errs[0])
			}
			if body := errs[0].ErrorBody(); !strings.Contains(body, tc.msg) {
				t.Errorf("message = %q, want it to contain %q", body, tc.msg)
			}
		})
	}
}

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func TestContextRouterValidate(t *testing.T) {
	base := func() *ContextRouter {
		r := &ContextRouter{ObjectMeta: meta("acme")}
		r.Default()
		return r
	}
	embedding := &EmbeddingSpec{Endpoint: "http://emb:8080/v1/embeddings", Model: "m"}
	runValidation(t, base, (*ContextRouter).Validate, []validCase[ContextRouter]{
		{"name required", func(r *ContextRouter) { r.Name = "" }, "metadata.name", "Required value"},
		{"name DNS-1123 subdomain", func(r *ContextRouter) { r.Name = "Acme_1" }, "metadata.name", "RFC 1123 subdomain"},
		{"namespace DNS-1123 label", func(r *ContextRouter) { r.Namespace = "a.b" }, "metadata.namespace", "must not contain dots"},
		{"defaultAccess enum", func(r *ContextRouter) { r.Spec.DefaultAccess = "allow" }, "spec.defaultAccess", `supported values: "Allow", "Deny"`},
		{"defaultAccess not defaulted", func(r *ContextRouter) { r.Spec.DefaultAccess = "" }, "spec.defaultAccess", "Required value"},
		{"maxTokens minimum", func(r *ContextRouter) { r.Spec.Budget.MaxTokens = -5 }, "spec.budget.maxTokens", "greater than or equal to 1"},
		{"reserveTokens minimum", func(r *ContextRouter) { r.Spec.Budget.ReserveTokens = -1 }, "spec.budget.reserveTokens", "greater than or equal to 0"},
		{"reserveTokens below maxTokens", func(r *ContextRouter) { r.Spec.Budget.ReserveTokens = 8000 }, "spec.budget.reserveTokens", "must be less than maxTokens (8000)"},
		{"truncation enum", func(r *ContextRouter) { r.Spec.Budget.Truncation = "Cut" }, "spec.budget.truncation", `"TruncateMiddle"`},
		{"estimator enum", func(r *ContextRouter) { r.Spec.Budget.Estimator = "Tiktoken" }, "spec.budget.estimator", `"Whitespace"`},
		{"estimator by tiktoken's name", func(r *ContextRouter) { r.Spec.Budget.Estimator = "o200k_base" }, "spec.budget.estimator",
			`Unsupported value: "o200k_base": supported values: "CharsDiv4", "Words", "Whitespace", "O200kBase", "Cl100kBase"`},
		{"estimator in the wrong case", func(r *ContextRouter) { r.Spec.Budget.Estimator = "O200KBase" }, "spec.budget.estimator",
			`(did you mean "O200kBase"?)`},
		{"strategy enum", func(r *ContextRouter) { r.Spec.Ranking.Strategy = "Random" }, "spec.ranking.strategy", `"Hybrid"`},
		{"scorer enum", func(r *ContextRouter) { r.Spec.Ranking.Scorer = "TFIDF" }, "spec.ranking.scorer", `"Keyword"`},
		{"onNoMatch enum", func(r *ContextRouter) { r.Spec.Ranking.OnNoMatch = "recent" },
			"spec.ranking.onNoMatch", `supported values: "Empty", "Recent", "Priority" (did you mean "Recent"?)`},
		{"scorer enum in the wrong case", func(r *ContextRouter) { r.Spec.Ranking.Scorer = "keyword" },
			"spec.ranking.scorer", `Unsupported value: "keyword": supported values: "BM25", "Keyword" (did you mean "Keyword"?)`},
		{"dedupThreshold above 1", func(r *ContextRouter) { r.Spec.Ranking.DedupThreshold = "1.5" }, "spec.ranking.dedupThreshold", "decimal number from 0 to 1"},
		{"dedupThreshold not a number", func(r *ContextRouter) { r.Spec.Ranking.DedupThreshold = "high" }, "spec.ranking.dedupThreshold", "decimal number from 0 to 1"},
		{"dedupThreshold negative", func(r *ContextRouter) { r.Spec.Ranking.DedupThreshold = "-0.1" }, "spec.ranking.dedupThreshold", "decimal number from 0 to 1"},
		{"embedding required for Embedding", func(r *ContextRouter) { r.Spec.Ranking.Strategy = RankingEmbedding }, "spec.ranking.embedding", "required for the Embedding strategy"},
		{"embedding required for Hybrid", func(r *ContextRouter) { r.Spec.Ranking.Strategy = RankingHybrid }, "spec.ranking.embedding", "required for the Hybrid strategy"},
		{"embedding endpoint scheme", func(r *ContextRouter) {
			r.Spec.Ranking.Strategy = RankingHybrid
			r.Spec.Ranking.Embedding = &EmbeddingSpec{Endpoint: "grpc://emb", Model: "m"}
		}, "spec.ranking.embedding.endpoint", "must start with http:// or https://"},
		{"embedding endpoint host", func(r *ContextRouter) {
			r.Spec.Ranking.Embedding = &EmbeddingSpec{Endpoint: "http:///v1", Model: "m"}
		}, "spec.ranking.embedding.endpoint", "must name a host"},
		{"embedding model required", func(r *ContextRouter) {
			r.Spec.Ranking.Embedding = &EmbeddingSpec{Endpoint: embedding.Endpoint}
		}, "spec.ranking.embedding.model", "Required value"},
		{"embedding secret key", func(r *ContextRouter) {
			e := *embedding
			e.APIKeySecretRef = &SecretKeySelector{Name: "openai", Key: "api key"}
			r.Spec.Ranking.Embedding = &e
		}, "spec.ranking.embedding.apiKeySecretRef.key", "valid config key"},
		{"embedding secret name", func(r *ContextRouter) {
			e := *embedding
			e.APIKeySecretRef = &SecretKeySelector{Name: "", Key: "k"}
			r.Spec.Ranking.Embedding = &e
		}, "spec.ranking.embedding.apiKeySecretRef.name", "Required value"},
		{"embedding dimensions bound", func(r *ContextRouter) {
			e := *embedding
			e.Dimensions = ptr[int32](MaxEmbeddingDimensions + 1)
			r.Spec.Ranking.Embedding = &e
		}, "spec.ranking.embedding.dimensions", "from 1 to 8192"},
		{"embedding batchSize bound", func(r *ContextRouter) {
			e := *embedding
			e.BatchSize = MaxEmbeddingBatchSize + 1
			r.Spec.Ranking.Embedding = &e
		}, "spec.ranking.embedding.batchSize", "from 1 to 2048"},
		{"embedding timeout bound", func(r *ContextRouter) {
			e := *embedding
			e.Timeout = dur(6 * time.Minute)
			r.Spec.Ranking.Embedding = &e
		}, "spec.ranking.embedding.timeout", "between 1ms and 5m"},
		{"hybrid denseWeight", func(r *ContextRouter) { r.Spec.Ranking.Hybrid = &HybridSpec{DenseWeight: "1.5"} }, "spec.ranking.hybrid.denseWeight", "from 0 to 1"},
		{"rerank endpoint", func(r *ContextRouter) {
			r.Spec.Ranking.Rerank = &RerankSpec{Endpoint: "ftp://rr", Format: RerankCohere}
		}, "spec.ranking.rerank.endpoint", "http://"},
		{"rerank format", func(r *ContextRouter) { r.Spec.Ranking.Rerank = &RerankSpec{Endpoint: "http://rr", Format: "Jina"} }, "spec.ranking.rerank.format", `"TEI"`},
		{"rerank topN bound", func(r *ContextRouter) {
			r.Spec.Ranking.Rerank = &RerankSpec{Endpoint: "http://rr", Format: RerankTEI, TopN: MaxRerankTopN + 1}
		}, "spec.ranking.rerank.topN", "from 1 to 200"},
		{"rerank under Manual", func(r *ContextRouter) {
			r.Spec.Ranking.Strategy = RankingManual
			r.Spec.Ranking.Rerank = &RerankSpec{Endpoint: "http://rr", Format: RerankCohere}
		}, "spec.ranking.rerank", "applies to the Relevance, Embedding and Hybrid"},
		{"cache ttl positive", func(r *ContextRouter) { r.Spec.Cache.TTL = dur(0) }, "spec.cache.ttl", "must be greater than 0"},
		{"cache maxEntries minimum", func(r *ContextRouter) { r.Spec.Cache.MaxEntries = ptr[int32](-1) }, "spec.cache.maxEntries", "greater than or equal to 0"},
		{"cache maxBytes positive", func(r *ContextRouter) { r.Spec.Cache.MaxBytes = qty("0") }, "spec.cache.maxBytes", "must be greater than 0"},
		{"cache maxBytes required", func(r *ContextRouter) { r.Spec.Cache.MaxBytes = nil }, "spec.cache.maxBytes", "Required value"},
		{"auth mode enum", func(r *ContextRouter) { r.Spec.Auth.Mode = "OIDC" }, "spec.auth.mode", `"ServiceAccountToken"`},
		{"replicas minimum", func(r *ContextRouter) { r.Spec.Deployment.Replicas = ptr[int32](-1) }, "spec.deployment.replicas", "greater than or equal to 0"},
		{"serviceAccountName", func(r *ContextRouter) { r.Spec.Deployment.ServiceAccountName = "Bad Name" }, "spec.deployment.serviceAccountName", "RFC 1123 subdomain"},
		{"negative resource", func(r *ContextRouter) {
			r.Spec.Deployment.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: *qty("-1Mi")}
		}, "spec.deployment.resources.limits[memory]", "greater than or equal to 0"},
		{"request above limit", func(r *ContextRouter) {
			r.Spec.Deployment.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: *qty("100m")}
			r.Spec.Deployment.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *qty("200m")}
		}, "spec.deployment.resources.requests[cpu]", "less than or equal to the cpu limit (100m)"},
		{"resource claim name required", func(r *ContextRouter) {
			r.Spec.Deployment.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}, {}}
		}, "spec.deployment.resources.claims[1].name", "Required value"},
		{"resource claim names unique", func(r *ContextRouter) {
			r.Spec.Deployment.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}, {Name: "gpu", Request: "a"}}
		}, "spec.deployment.resources.claims[1].name", `Duplicate value: "gpu"`},
	})

	// Valid variations that must not be rejected.
	for name, mutate := range map[string]func(*ContextRouter){
		"dedup disabled":       func(r *ContextRouter) { r.Spec.Ranking.DedupThreshold = "0" },
		"dedup 1.0":            func(r *ContextRouter) { r.Spec.Ranking.DedupThreshold = "1.0" },
		"hybrid with endpoint": func(r *ContextRouter) { r.Spec.Ranking.Strategy = RankingHybrid; r.Spec.Ranking.Embedding = embedding },
		"cache disabled":       func(r *ContextRouter) { r.Spec.Cache.MaxEntries = ptr[int32](0) },
		"zero replicas":        func(r *ContextRouter) { r.Spec.Deployment.Replicas = ptr[int32](0) },
	} {
		r := base()
		mutate(r)
		if errs := r.Validate(); len(errs) != 0 {
			t.Errorf("%s: unexpected errors: %v", name, errs.ToAggregate())
		}
	}
}

func TestContextRouteValidate(t *testing.T) {
	base := func() *ContextRoute {
		return &ContextRoute{ObjectMeta: meta("hr"), Spec: ContextRouteSpec{
			ParentRefs: []ParentReference{{Name: "acme"}},
			When:       `"hr" in tags`,
			Sources:    []LocalObjectReference{{Name: "docs"}, {Name: "prompt"}},
		}}
	}
	runValidation(t, base, (*ContextRoute).Validate, []validCase[ContextRoute]{
		{"name", func(r *ContextRoute) { r.Name = "-hr" }, "metadata.name", "RFC 1123 subdomain"},
		{"sources required", func(r *ContextRoute) { r.Spec.Sources = nil }, "spec.sources", "at least one source"},
		{"sources max items", func(r *ContextRoute) {
			r.Spec.Sources = nil
			for i := 0; i < 65; i++ {
				r.Spec.Sources = append(r.Spec.Sources, LocalObjectReference{Name: "s" + strings.Repeat("x", i)})
			}
		}, "spec.sources", "must have at most 64 items"},
		{"source name required", func(r *ContextRoute) { r.Spec.Sources[1].Name = "" }, "spec.sources[1].name", "Required value"},
		{"source name too long", func(r *ContextRoute) { r.Spec.Sources[0].Name = strings.Repeat("a", 254) }, "spec.sources[0].name", "may not be more than 253"},
		{"duplicate source", func(r *ContextRoute) { r.Spec.Sources[1].Name = "docs" }, "spec.sources[1].name", `Duplicate value: "docs"`},
		{"timeout below 10ms", func(r *ContextRoute) { r.Spec.Timeout = &metav1.Duration{Duration: 9 * time.Millisecond} }, "spec.timeout", "between 10ms and 60s"},
		{"timeout above 60s", func(r *ContextRoute) { r.Spec.Timeout = &metav1.Duration{Duration: time.Minute + time.Millisecond} }, "spec.timeout", "between 10ms and 60s"},
		{"alternate too long", func(r *ContextRoute) { r.Spec.Alternate = strings.Repeat("a", 254) }, "spec.alternate", "may not be more than 253"},
		{"alternate is the route itself", func(r *ContextRoute) { r.Spec.Alternate = "hr" }, "spec.alternate", "cannot be its own alternate"},
		{"parentRefs max items", func(r *ContextRoute) {
			r.Spec.ParentRefs = nil
			for i := 0; i < 33; i++ {
				r.Spec.ParentRefs = append(r.Spec.ParentRefs, ParentReference{Name: "r" + strings.Repeat("x", i)})
			}
		}, "spec.parentRefs", "must have at most 32 items"},
		{"duplicate parentRef", func(r *ContextRoute) {
			r.Spec.ParentRefs = append(r.Spec.ParentRefs, ParentReference{Name: "acme"})
		}, "spec.parentRefs[1].name", `Duplicate value: "acme"`},
		{"parentRef name required", func(r *ContextRoute) { r.Spec.ParentRefs[0].Name = "" }, "spec.parentRefs[0].name", "Required value"},
		{"when too long", func(r *ContextRoute) { r.Spec.When = strings.Repeat("x", 4097) }, "spec.when", "may not be more than 4096 characters"},
	})
	// CEL is compiled by the engine, not here: nonsense passes validation.
	r := base()
	r.Spec.When = "((("
	if errs := r.Validate(); len(errs) != 0 {
		t.Errorf("validation must not compile CEL, got %v", errs.ToAggregate())
	}
}

func TestContextSourceValidate(t *testing.T) {
	inline := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("prompt"), Spec: ContextSourceSpec{
			Type: SourceInline, Tags: []string{"a", "b"}, Inline: &InlineSource{Content: "Be nice."}}}
		s.Default()
		return s
	}
	runValidation(t, inline, (*ContextSource).Validate, []validCase[ContextSource]{
		{"type required", func(s *ContextSource) { s.Spec.Type = ""; s.Spec.Inline = nil }, "spec.type", "Required value"},
		{"type enum", func(s *ContextSource) { s.Spec.Type = "S3"; s.Spec.Inline = nil }, "spec.type", `"HTTPAPI"`},
		{"union: block missing", func(s *ContextSource) { s.Spec.Inline = nil }, "spec.inline", "must be set when type is Inline"},
		{"union: other block set", func(s *ContextSource) {
			s.Spec.Type = SourceDirectory
			s.Spec.Inline = nil
			s.Spec.Directory = &DirectorySource{Path: "d"}
			s.Spec.GitRepo = &GitRepoSource{URL: "https://h/r.git"}
			s.Default()
		}, "spec.gitRepo", "must not be set unless type is GitRepo (type is Directory)"},
		{"inline content", func(s *ContextSource) { s.Spec.Inline.Content = "" }, "spec.inline.content", "Required value"},
		{"inline content blank", func(s *ContextSource) { s.Spec.Inline.Content = " \n\t" }, "spec.inline.content", "not blank"},
		{"sensitivity enum", func(s *ContextSource) { s.Spec.Sensitivity = "Secret" }, "spec.sensitivity", `"Restricted"`},
		{"chunking strategy enum", func(s *ContextSource) { s.Spec.Chunking.Strategy = "Lines" }, "spec.chunking.strategy", `"WholeFile"`},
		{"maxChunkTokens minimum", func(s *ContextSource) { s.Spec.Chunking.MaxChunkTokens = 15 }, "spec.chunking.maxChunkTokens", "greater than or equal to 16"},
		{"duplicate tag", func(s *ContextSource) { s.Spec.Tags = []string{"a", "a"} }, "spec.tags[1]", `Duplicate value: "a"`},
	})

	directory := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("docs"), Spec: ContextSourceSpec{
			Type: SourceDirectory, Directory: &DirectorySource{Path: "docs", Exclude: []string{"drafts/**"}}}}
		s.Default()
		return s
	}
	runValidation(t, directory, (*ContextSource).Validate, []validCase[ContextSource]{
		{"include glob", func(s *ContextSource) { s.Spec.Directory.Include = []string{"**/*.md", "docs/[a-"} }, "spec.directory.include[1]", "not a valid doublestar glob"},
		{"exclude glob", func(s *ContextSource) { s.Spec.Directory.Exclude = []string{"{a,b"} }, "spec.directory.exclude[0]", "not a valid doublestar glob"},
		{"absolute glob", func(s *ContextSource) { s.Spec.Directory.Include = []string{"/docs/*.md"} }, "spec.directory.include[0]", "must be relative"},
		{"empty glob", func(s *ContextSource) { s.Spec.Directory.Exclude = []string{""} }, "spec.directory.exclude[0]", "Required value"},
		{"blank glob", func(s *ContextSource) { s.Spec.Directory.Include = []string{"**/*.md", "  "} }, "spec.directory.include[1]", "Required value"},
		{"maxFileSize positive", func(s *ContextSource) { s.Spec.Directory.MaxFileSize = qty("0") }, "spec.directory.maxFileSize", "must be greater than 0"},
		{"volume one-of: neither", func(s *ContextSource) { s.Spec.Directory.Volume = &DirectoryVolume{} }, "spec.directory.volume", "exactly one of configMap and persistentVolumeClaim"},
		{"volume one-of: both", func(s *ContextSource) {
			s.Spec.Directory.Volume = &DirectoryVolume{ConfigMap: &LocalObjectReference{Name: "cm"},
				PersistentVolumeClaim: &PersistentVolumeClaimReference{ClaimName: "pvc"}}
		}, "spec.directory.volume", "exactly one of configMap and persistentVolumeClaim"},
		{"volume claimName", func(s *ContextSource) {
			s.Spec.Directory.Volume = &DirectoryVolume{PersistentVolumeClaim: &PersistentVolumeClaimReference{}}
		}, "spec.directory.volume.persistentVolumeClaim.claimName", "Required value"},
		{"volume configMap name", func(s *ContextSource) {
			s.Spec.Directory.Volume = &DirectoryVolume{ConfigMap: &LocalObjectReference{}}
		}, "spec.directory.volume.configMap.name", "Required value"},
	})

	git := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("wiki"), Spec: ContextSourceSpec{
			Type: SourceGitRepo, GitRepo: &GitRepoSource{URL: "https://git.example.com/eng/wiki.git", Ref: "main",
				Auth: &GitAuth{SecretRef: LocalObjectReference{Name: "wiki-git"}}}}}
		s.Default()
		return s
	}
	runValidation(t, git, (*ContextSource).Validate, []validCase[ContextSource]{
		{"url required", func(s *ContextSource) { s.Spec.GitRepo.URL = "" }, "spec.gitRepo.url", "Required value"},
		{"url scheme", func(s *ContextSource) { s.Spec.GitRepo.URL = "ftp://h/r.git" }, "spec.gitRepo.url", `unsupported scheme "ftp"`},
		{"url host", func(s *ContextSource) { s.Spec.GitRepo.URL = "https:///r.git" }, "spec.gitRepo.url", "must name a host"},
		{"interval positive", func(s *ContextSource) { s.Spec.GitRepo.Interval = &metav1.Duration{Duration: -time.Second} }, "spec.gitRepo.interval", "must be greater than 0"},
		{"include glob", func(s *ContextSource) { s.Spec.GitRepo.Include = []string{"[z-a"} }, "spec.gitRepo.include[0]", "not a valid doublestar glob"},
		{"maxFileSize positive", func(s *ContextSource) { s.Spec.GitRepo.MaxFileSize = qty("-1") }, "spec.gitRepo.maxFileSize", "must be greater than 0"},
		{"auth secret name", func(s *ContextSource) { s.Spec.GitRepo.Auth.SecretRef.Name = "Wiki Git" }, "spec.gitRepo.auth.secretRef.name", "RFC 1123 subdomain"},
	})
	for _, u := range []string{"git@github.com:org/repo.git", "ssh://git@h:22/r.git", "file:///srv/repos/wiki", "/srv/repos/wiki"} {
		s := git()
		s.Spec.GitRepo.URL = u
		if errs := s.Validate(); len(errs) != 0 {
			t.Errorf("git url %q rejected: %v", u, errs.ToAggregate())
		}
	}

	api := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("kb"), Spec: ContextSourceSpec{
			Type: SourceHTTPAPI, HTTPAPI: &HTTPAPISource{
				URL: "https://kb.example.com/search?q={{query}}", TextField: "body.text",
				Headers: []HTTPHeader{
					{Name: "Authorization", ValueFrom: &HeaderValueSource{SecretKeyRef: SecretKeySelector{Name: "kb", Key: "token"}}},
					{Name: "X-Tenant", Value: ptr("${TENANT}")},
				}}}}
		s.Default()
		return s
	}
	runValidation(t, api, (*ContextSource).Validate, []validCase[ContextSource]{
		{"url scheme", func(s *ContextSource) { s.Spec.HTTPAPI.URL = "kb.example.com/search" }, "spec.httpAPI.url", "must start with http:// or https://"},
		{"url parses after substitution", func(s *ContextSource) { s.Spec.HTTPAPI.URL = "https://kb example.com/?q={{query}}" }, "spec.httpAPI.url", "is not a valid URL"},
		{"method enum", func(s *ContextSource) { s.Spec.HTTPAPI.Method = "PUT" }, "spec.httpAPI.method", `supported values: "GET", "POST"`},
		{"GET with body", func(s *ContextSource) { s.Spec.HTTPAPI.Body = `{"q": {{query}}}` }, "spec.httpAPI.body", "must be empty when method is GET"},
		{"header value one-of: neither", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Value = nil }, "spec.httpAPI.headers[1]", "exactly one of value and valueFrom"},
		{"header value one-of: both", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].ValueFrom = s.Spec.HTTPAPI.Headers[0].ValueFrom }, "spec.httpAPI.headers[1]", "exactly one of value and valueFrom"},
		{"header name required", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Name = "" }, "spec.httpAPI.headers[1].name", "Required value"},
		{"header name token", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Name = "X Tenant" }, "spec.httpAPI.headers[1].name", "not a valid HTTP header name"},
		{"duplicate header ignores case", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Name = "authorization" }, "spec.httpAPI.headers[1].name", "duplicates headers[0]"},
		{"header value line break", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Value = ptr("a\r\nX-Evil: 1") }, "spec.httpAPI.headers[1].value", "must not contain line breaks"},
		{"header value control character", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Value = ptr("a\x1bb") }, "spec.httpAPI.headers[1].value", "other control characters"},
		{"header value DEL", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Value = ptr("a\x7f") }, "spec.httpAPI.headers[1].value", "other control characters"},
		{"header set by the client", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[1].Name = "transfer-encoding" }, "spec.httpAPI.headers[1].name", "is set by the HTTP client"},
		{"header secret key", func(s *ContextSource) { s.Spec.HTTPAPI.Headers[0].ValueFrom.SecretKeyRef.Key = "" }, "spec.httpAPI.headers[0].valueFrom.secretKeyRef.key", "Required value"},
		{"textField required", func(s *ContextSource) { s.Spec.HTTPAPI.TextField = "" }, "spec.httpAPI.textField", "Required value"},
		{"textField blank", func(s *ContextSource) { s.Spec.HTTPAPI.TextField = " " }, "spec.httpAPI.textField", "Required value"},
		{"timeout positive", func(s *ContextSource) { s.Spec.HTTPAPI.Timeout = dur(0) }, "spec.httpAPI.timeout", "must be greater than 0"},
		{"maxResults maximum", func(s *ContextSource) { s.Spec.HTTPAPI.MaxResults = 1001 }, "spec.httpAPI.maxResults", "between 1 and 1000"},
		{"maxResults minimum", func(s *ContextSource) { s.Spec.HTTPAPI.MaxResults = -1 }, "spec.httpAPI.maxResults", "between 1 and 1000"},
		{"maxResponseSize positive", func(s *ContextSource) { s.Spec.HTTPAPI.MaxResponseSize = qty("0") }, "spec.httpAPI.maxResponseSize", "must be greater than 0"},
		{"maxResponseSize at most 1Gi", func(s *ContextSource) { s.Spec.HTTPAPI.MaxResponseSize = qty("1025Mi") }, "spec.httpAPI.maxResponseSize", "must be at most 1Gi"},
		{"redirect policy enum", func(s *ContextSource) { s.Spec.HTTPAPI.FollowRedirects.Policy = "Always" }, "spec.httpAPI.followRedirects.policy", `supported values: "None", "SameHost", "AllowedHosts"`},
		{"allowedHosts required", func(s *ContextSource) { s.Spec.HTTPAPI.FollowRedirects.Policy = RedirectAllowedHosts },
			"spec.httpAPI.followRedirects.allowedHosts", "Required value"},
		{"allowedHosts only with AllowedHosts", func(s *ContextSource) { s.Spec.HTTPAPI.FollowRedirects.AllowedHosts = []string{"kb-eu.example.com"} },
			"spec.httpAPI.followRedirects.allowedHosts", "must be empty unless policy is AllowedHosts"},
		{"allowedHosts too many", func(s *ContextSource) {
			s.Spec.HTTPAPI.FollowRedirects = FollowRedirects{Policy: RedirectAllowedHosts}
			for i := range 17 {
				s.Spec.HTTPAPI.FollowRedirects.AllowedHosts = append(s.Spec.HTTPAPI.FollowRedirects.AllowedHosts, fmt.Sprintf("h%d.example.com", i))
			}
		}, "spec.httpAPI.followRedirects.allowedHosts", "must have at most 16 items"},
	})
	// Each allowedHosts entry alone.
	hosts := map[string]string{ // entry -> error substring ("" = valid)
		"kb-eu.example.com":      "",
		"KB-EU.example.com:8443": "",
		"10.0.0.1:80":            "",
		"[2001:db8::1]":          "",
		"[2001:db8::1]:8443":     "",
		"":                       "must not be empty",
		"https://kb.example.com": "no scheme, user or path",
		"kb.example.com/api":     "no scheme, user or path",
		"tok@kb.example.com":     "no scheme, user or path",
		"kb_eu.example.com":      "such as kb-eu.example.com",
		"kb.example.com:0":       "port must be a number from 1 to 65535",
		"kb.example.com:65536":   "port must be a number from 1 to 65535",
		"kb.example.com:":        "port must be a number from 1 to 65535",
		"kb.example.com:+80":     "port must be a number from 1 to 65535",
		"2001:db8::1":            "in brackets",
		"[10.0.0.1]":             "only an IPv6 address",
		"[2001:db8::1":           "closing bracket",
		strings.Repeat("a", 260): "at most 259 characters",
	}
	for entry, want := range hosts {
		t.Run("allowedHosts/"+entry, func(t *testing.T) {
			s := api()
			s.Spec.HTTPAPI.FollowRedirects = FollowRedirects{Policy: RedirectAllowedHosts, AllowedHosts: []string{entry}}
			errs := s.Validate()
			if want == "" {
				if len(errs) != 0 {
					t.Fatalf("rejected: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != "spec.httpAPI.followRedirects.allowedHosts[0]" || !strings.Contains(errs[0].Error(), want) {
				t.Fatalf("errors = %v, want one on allowedHosts[0] containing %q", errs.ToAggregate(), want)
			}
			if strings.Contains(errs[0].Error(), "tok@") {
				t.Errorf("the error shows the user part: %v", errs[0])
			}
		})
	}
	dup := api()
	dup.Spec.HTTPAPI.FollowRedirects = FollowRedirects{Policy: RedirectAllowedHosts, AllowedHosts: []string{"kb.example.com", "KB.example.com"}}
	if errs := dup.Validate(); len(errs) != 1 || errs[0].Field != "spec.httpAPI.followRedirects.allowedHosts[1]" || errs[0].Type != field.ErrorTypeDuplicate {
		t.Errorf("hosts differing in case only: %v", errs.ToAggregate())
	}
	s := api()
	s.Spec.HTTPAPI.Method = HTTPMethodPost
	s.Spec.HTTPAPI.Body = `{"q": {{query}}, "k": 8}`
	if errs := s.Validate(); len(errs) != 0 {
		t.Errorf("POST with body rejected: %v", errs.ToAggregate())
	}
	// The boundaries of the rules above are accepted.
	s = api()
	s.Spec.HTTPAPI.MaxResponseSize = qty("1Gi")
	s.Spec.HTTPAPI.Headers[1].Value = ptr("a\tb")
	if errs := s.Validate(); len(errs) != 0 {
		t.Errorf("maxResponseSize 1Gi and a tab in a header value rejected: %v", errs.ToAggregate())
	}
}

func TestAgentPermissionValidate(t *testing.T) {
	base := func() *AgentPermission {
		p := &AgentPermission{ObjectMeta: meta("hr"), Spec: AgentPermissionSpec{
			ParentRefs:   []ParentReference{{Name: "acme"}},
			Agents:       []string{"hr-assistant", "*"},
			AllowSources: []string{"docs"},
			DenySources:  []string{"finance"},
			DenyPaths:    []string{"**/secrets/**", "salaries/*"},
		}}
		p.Default()
		return p
	}
	runValidation(t, base, (*AgentPermission).Validate, []validCase[AgentPermission]{
		{"agents required", func(p *AgentPermission) { p.Spec.Agents = nil }, "spec.agents", "at least one agent"},
		{"agent entry empty", func(p *AgentPermission) { p.Spec.Agents = []string{"a", ""} }, "spec.agents[1]", "must not be empty"},
		{"agent duplicate", func(p *AgentPermission) { p.Spec.Agents = []string{"a", "a"} }, "spec.agents[1]", `Duplicate value: "a"`},
		{"allowSources entry empty", func(p *AgentPermission) { p.Spec.AllowSources = []string{" "} }, "spec.allowSources[0]", "must not be empty"},
		{"denySources duplicate", func(p *AgentPermission) { p.Spec.DenySources = []string{"x", "x"} }, "spec.denySources[1]", "Duplicate value"},
		{"denyPaths glob", func(p *AgentPermission) { p.Spec.DenyPaths = []string{"a/[b"} }, "spec.denyPaths[0]", "not a valid doublestar glob"},
		{"denyPaths empty reported once", func(p *AgentPermission) { p.Spec.DenyPaths = []string{""} }, "spec.denyPaths[0]", "must not be empty"},
		{"sourceDenyPaths glob", func(p *AgentPermission) {
			p.Spec.SourceDenyPaths = []SourceDenyPaths{{Source: "docs", Paths: []string{"/abs/**"}}}
		}, "spec.sourceDenyPaths[0].paths[0]", "must be relative to the source root"},
		{"sourceDenyPaths without paths", func(p *AgentPermission) { p.Spec.SourceDenyPaths = []SourceDenyPaths{{Source: "docs"}} },
			"spec.sourceDenyPaths[0].paths", "Required value"},
		{"sourceDenyPaths without source", func(p *AgentPermission) { p.Spec.SourceDenyPaths = []SourceDenyPaths{{Paths: []string{"a"}}} },
			"spec.sourceDenyPaths[0].source", "Required value"},
		{"sourceDenyPaths source twice", func(p *AgentPermission) {
			p.Spec.SourceDenyPaths = []SourceDenyPaths{{Source: "docs", Paths: []string{"a"}}, {Source: "docs", Paths: []string{"b"}}}
		}, "spec.sourceDenyPaths[1].source", "Duplicate value"},
		{"default enum", func(p *AgentPermission) { p.Spec.Default = "Maybe" }, "spec.default", `supported values: "Allow", "Deny"`},
		{"maxSensitivity enum", func(p *AgentPermission) { p.Spec.MaxSensitivity = "TopSecret" }, "spec.maxSensitivity", `"Confidential"`},
		{"sensitivityAction enum", func(p *AgentPermission) { p.Spec.SensitivityAction = "Mask" }, "spec.sensitivityAction", `supported values: "Drop", "Redact"`},
		{"pathMatching enum", func(p *AgentPermission) { p.Spec.PathMatching = "IgnoreCase" }, "spec.pathMatching", `supported values: "CaseSensitive", "CaseInsensitive"`},
		{"parentRef duplicate", func(p *AgentPermission) { p.Spec.ParentRefs = []ParentReference{{Name: "a"}, {Name: "a"}} }, "spec.parentRefs[1].name", "Duplicate value"},
	})
}

// Validation errors quote the offending URL; its user part (a password, or
// GitHub's token-as-user form, percent-encoded or not) is never among it.
func TestURLErrorsHideCredentials(t *testing.T) {
	const token = "ghp_T0ken"
	git := func(u string) field.ErrorList {
		src := &ContextSource{Spec: ContextSourceSpec{Type: SourceGitRepo, GitRepo: &GitRepoSource{URL: u}}}
		src.Name = "wiki"
		src.Default()
		return src.Validate()
	}
	http := func(u string) field.ErrorList {
		src := &ContextSource{Spec: ContextSourceSpec{Type: SourceHTTPAPI, HTTPAPI: &HTTPAPISource{URL: u, TextField: "t"}}}
		src.Name = "kb"
		src.Default()
		return src.Validate()
	}
	embedding := func(u string) field.ErrorList {
		r := &ContextRouter{Spec: ContextRouterSpec{Ranking: RankingSpec{Strategy: RankingEmbedding, Embedding: &EmbeddingSpec{Endpoint: u, Model: "m"}}}}
		r.Name = "acme"
		r.Default()
		return r.Validate()
	}
	tests := []struct {
		name     string
		validate func(string) field.ErrorList
		url      string
		wantText string
	}{
		{"git scheme", git, "gopher://alice:s3cret@example.com/repo.git", `"gopher://***@example.com/repo.git"`},
		{"git token scheme", git, "gopher://" + token + "@example.com/repo.git", `"gopher://***@example.com/repo.git"`},
		{"git no host", git, "https://alice:s3cret@/repo.git", `"https://***@/repo.git": must name a host`},
		{"git token no host", git, "https://ghp%5FT0ken@/repo.git", `"https://***@/repo.git"`},
		{"git unparsable", git, "https://alice:s3cret@exa mple.com/%zz", `"<invalid URL>": is not a valid URL`},
		{"git port echo", git, "https://" + token + ":x/y@host/r.git", `"<invalid URL>": is not a valid URL: invalid port after host`},
		{"httpAPI scheme", http, "htps://" + token + "@kb.example.com/?q={{query}}", "must start with http:// or https://"},
		{"httpAPI no host", http, "https://" + token + "@/?q={{query}}", `"https://***@/?q={{query}}": must name a host`},
		{"httpAPI unparsable", http, "https://" + token + "@kb example.com/?q={{query}}", `"<invalid URL>": is not a valid URL`},
		{"embedding no host", embedding, "https://user:" + token + "@", `"https://***@": must name a host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.validate(tt.url)
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			msg := errs.ToAggregate().Error()
			for _, secret := range []string{"s3cret", "alice", token, "ghp%5FT0ken"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error shows %q: %s", secret, msg)
				}
			}
			if !strings.Contains(msg, tt.wantText) {
				t.Errorf("error %q does not contain %q", msg, tt.wantText)
			}
		})
	}
}

func TestRouterNameIsDNS1035Label(t *testing.T) {
	for name, ok := range map[string]bool{"acme": true, "acme-2": true, "2acme": false, "acme.corp": false} {
		r := &ContextRouter{}
		r.Name = name
		r.Default()
		errs := r.Validate()
		if got := len(errs) == 0; got != ok {
			t.Errorf("%q: valid = %v, want %v (%v)", name, got, ok, errs)
		}
	}
}

// TestToolNames holds tool names to one rule: dotted words of the
// characters MCP allows, with a letter or digit. A name with an empty word
// ("." gives the id "billing..") escapes globs such as "billing.*".
func TestToolNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"create_invoice", true}, {"issues.list", true}, {"a", true}, {"_a-", true}, {"v2", true}, {"x-1.y_2.z", true}, {"-.a", true},
		{".", false}, {"..", false}, {"-", false}, {"_", false}, {"_.-", false}, {"a..b", false}, {".a", false}, {"a.", false},
		{"re fund", false}, {"a/b", false}, {"é", false}, {"a*", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool := Tool{Name: c.name, Description: "d", SideEffects: SideEffectsRead}
			errs := ValidateTool(field.NewPath("t"), &tool)
			if c.ok != (len(errs) == 0) {
				t.Fatalf("errors %v; want accepted %v", errs, c.ok)
			}
			if !c.ok && (errs[0].Field != "t.name" || !strings.Contains(errs[0].Detail, "dotted words")) {
				t.Errorf("error %v, want one naming t.name and the rule", errs[0])
			}
		})
	}
}

func TestToolFieldsValidate(t *testing.T) {
	catalog := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("billing-tools"), Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{
			Catalog: []Tool{
				{Name: "create_invoice", Namespace: "billing.invoices", Description: "Create an invoice.",
					InputSchema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}, SideEffects: SideEffectsWrite},
				{Name: "refund", Namespace: "billing", Description: "Refund a payment."},
			}}}}
		s.Default()
		return s
	}
	runValidation(t, catalog, (*ContextSource).Validate, []validCase[ContextSource]{
		{"tools block required", func(s *ContextSource) { s.Spec.Tools = nil }, "spec.tools", "must be set when type is Tools"},
		{"one of catalog, directory, gitRepo", func(s *ContextSource) { s.Spec.Tools.Directory = &DirectorySource{Path: "t"}; s.Default() },
			"spec.tools", "exactly one of catalog, directory, gitRepo and http"},
		{"none of them", func(s *ContextSource) { s.Spec.Tools.Catalog = nil }, "spec.tools", "exactly one of catalog, directory, gitRepo and http"},
		{"catalog and http", func(s *ContextSource) {
			s.Spec.Tools.HTTP = &CatalogHTTPSource{URL: "https://api.example.com/openapi.json"}
			s.Default()
		},
			"spec.tools", "exactly one of catalog, directory, gitRepo and http"},
		{"openAPI of an inline catalog", func(s *ContextSource) { s.Spec.Tools.OpenAPI = &OpenAPITools{} }, "spec.tools.openAPI", "not an inline catalog"},
		{"name required", func(s *ContextSource) { s.Spec.Tools.Catalog[1].Name = "" }, "spec.tools.catalog[1].name", "Required value"},
		{"name characters", func(s *ContextSource) { s.Spec.Tools.Catalog[1].Name = "re fund" }, "spec.tools.catalog[1].name", "letters, digits"},
		{"name length", func(s *ContextSource) { s.Spec.Tools.Catalog[1].Name = strings.Repeat("a", 129) }, "spec.tools.catalog[1].name", "128"},
		{"namespace words", func(s *ContextSource) { s.Spec.Tools.Catalog[1].Namespace = "billing..x" }, "spec.tools.catalog[1].namespace", "dotted words"},
		{"description required", func(s *ContextSource) { s.Spec.Tools.Catalog[0].Description = "" }, "spec.tools.catalog[0].description", "Required value"},
		{"description length", func(s *ContextSource) { s.Spec.Tools.Catalog[0].Description = strings.Repeat("é", 4097) }, "spec.tools.catalog[0].description", "4096"},
		{"duplicate id", func(s *ContextSource) { s.Spec.Tools.Catalog[1] = s.Spec.Tools.Catalog[0] }, "spec.tools.catalog[1].name",
			`Duplicate value: "billing.invoices.create_invoice (the id of [0] too)"`},
		{"schema not an object", func(s *ContextSource) { s.Spec.Tools.Catalog[0].InputSchema.Raw = []byte(`["string"]`) },
			"spec.tools.catalog[0].inputSchema", "must be a JSON Schema object"},
		{"schema size", func(s *ContextSource) {
			s.Spec.Tools.Catalog[0].InputSchema.Raw = []byte(`{"description":"` + strings.Repeat("x", MaxInputSchemaBytes) + `"}`)
		}, "spec.tools.catalog[0].inputSchema", "65536"},
		{"side effects enum", func(s *ContextSource) { s.Spec.Tools.Catalog[0].SideEffects = "Harmless" }, "spec.tools.catalog[0].sideEffects", `"Destructive"`},
		{"too many examples", func(s *ContextSource) { s.Spec.Tools.Catalog[0].Examples = make([]string, 257) }, "spec.tools.catalog[0].examples", "256"},
		{"example length", func(s *ContextSource) { s.Spec.Tools.Catalog[0].AntiPatterns = []string{strings.Repeat("a", 1025)} },
			"spec.tools.catalog[0].antiPatterns[0]", "1024"},
		{"safety tag length", func(s *ContextSource) { s.Spec.Tools.Catalog[0].SafetyTags = []string{strings.Repeat("a", 64)} },
			"spec.tools.catalog[0].safetyTags[0]", "63"},
		{"cost hint length", func(s *ContextSource) { s.Spec.Tools.Catalog[0].CostHint = strings.Repeat("a", 65) }, "spec.tools.catalog[0].costHint", "64"},
		{"inline catalog size", func(s *ContextSource) {
			s.Spec.Tools.Catalog = make([]Tool, 1001)
			for i := range s.Spec.Tools.Catalog {
				s.Spec.Tools.Catalog[i] = Tool{Name: fmt.Sprintf("t%d", i), Description: "d", SideEffects: SideEffectsRead}
			}
		}, "spec.tools.catalog", "must have at most 1000 items"},
		{"catalog directory glob", func(s *ContextSource) {
			s.Spec.Tools.Catalog = nil
			s.Spec.Tools.Directory = &DirectorySource{Path: "t", Include: []string{"[a-"}}
			s.Default()
		}, "spec.tools.directory.include[0]", "not a valid doublestar glob"},
	})

	// A catalog directory defaults to JSON and YAML files, a document one to text.
	s := &ContextSource{Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{Directory: &DirectorySource{Path: "t"}}}}
	s.Default()
	if want := []string{"**/*.json", "**/*.yaml", "**/*.yml"}; !slices.Equal(s.Spec.Tools.Directory.Include, want) {
		t.Errorf("catalog directory include = %q, want %q", s.Spec.Tools.Directory.Include, want)
	}
	if s.Spec.Tools.Catalog != nil || s.Spec.Tools.Directory.MaxFileSize == nil {
		t.Errorf("catalog directory not defaulted as a directory: %+v", s.Spec.Tools)
	}

	openAPI := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("petstore"), Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{
			HTTP: &CatalogHTTPSource{URL: "https://petstore.example.com/openapi.json",
				Headers: []HTTPHeader{{Name: "Authorization", ValueFrom: &HeaderValueSource{SecretKeyRef: SecretKeySelector{Name: "pet", Key: "token"}}}}},
			OpenAPI: &OpenAPITools{Namespace: "petstore", Include: &OperationSelector{Tags: []string{"pet"}},
				Exclude:   &OperationSelector{Operations: []string{"delete*"}},
				Overrides: []OperationOverride{{OperationSelector: OperationSelector{Operations: []string{"findPetsByTags"}}, SideEffects: SideEffectsRead}}},
		}}}
		s.Default()
		return s
	}
	runValidation(t, openAPI, (*ContextSource).Validate, []validCase[ContextSource]{
		{"url scheme", func(s *ContextSource) { s.Spec.Tools.HTTP.URL = "ftp://bob:pw@api.example.com/" }, "spec.tools.http.url", "must start with http:// or https://"},
		{"url hides credentials", func(s *ContextSource) { s.Spec.Tools.HTTP.URL = "ftp://bob:pw@api.example.com/" }, "spec.tools.http.url", "***@"},
		{"url length", func(s *ContextSource) { s.Spec.Tools.HTTP.URL = "https://h/" + strings.Repeat("a", 2048) }, "spec.tools.http.url", "2048"},
		{"header secret key", func(s *ContextSource) { s.Spec.Tools.HTTP.Headers[0].ValueFrom.SecretKeyRef.Key = "" },
			"spec.tools.http.headers[0].valueFrom.secretKeyRef.key", "Required value"},
		{"too many headers", func(s *ContextSource) {
			s.Spec.Tools.HTTP.Headers = nil
			for i := range 33 {
				s.Spec.Tools.HTTP.Headers = append(s.Spec.Tools.HTTP.Headers, HTTPHeader{Name: fmt.Sprintf("X-H%d", i), Value: ptr("v")})
			}
		}, "spec.tools.http.headers", "must have at most 32 items"},
		{"timeout positive", func(s *ContextSource) { s.Spec.Tools.HTTP.Timeout = dur(0) }, "spec.tools.http.timeout", "must be greater than 0"},
		{"interval positive", func(s *ContextSource) { s.Spec.Tools.HTTP.Interval = dur(-time.Second) }, "spec.tools.http.interval", "must be greater than 0"},
		{"redirect hosts", func(s *ContextSource) { s.Spec.Tools.HTTP.FollowRedirects.AllowedHosts = []string{"a.example.com"} },
			"spec.tools.http.followRedirects.allowedHosts", "must be empty unless policy is AllowedHosts"},
		{"namespace words", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Namespace = "pet..store" }, "spec.tools.openAPI.namespace", "dotted words"},
		{"empty selector", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Include = &OperationSelector{} }, "spec.tools.openAPI.include", "set tags or operations"},
		{"selector glob", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Exclude.Operations = []string{"find[a-"} },
			"spec.tools.openAPI.exclude.operations[0]", "not a valid glob"},
		{"selector empty glob", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Exclude.Operations = []string{""} },
			"spec.tools.openAPI.exclude.operations[0]", "Required value"},
		{"selector tag length", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Include.Tags = []string{strings.Repeat("t", 257)} },
			"spec.tools.openAPI.include.tags[0]", "256"},
		{"selector tags count", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Include.Tags = make([]string, 65) }, "spec.tools.openAPI.include.tags", "must have at most 64 items"},
		{"override changes nothing", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Overrides[0].SideEffects = "" },
			"spec.tools.openAPI.overrides[0]", "set sideEffects or safetyTags"},
		{"override selects nothing", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Overrides[0].Operations = nil },
			"spec.tools.openAPI.overrides[0]", "set tags or operations"},
		{"override side effects enum", func(s *ContextSource) { s.Spec.Tools.OpenAPI.Overrides[0].SideEffects = "Safe" },
			"spec.tools.openAPI.overrides[0].sideEffects", `"Destructive"`},
		{"override safety tag length", func(s *ContextSource) {
			s.Spec.Tools.OpenAPI.Overrides[0].SafetyTags = []string{strings.Repeat("a", 64)}
		},
			"spec.tools.openAPI.overrides[0].safetyTags[0]", "63"},
		{"too many overrides", func(s *ContextSource) {
			s.Spec.Tools.OpenAPI.Overrides = slices.Repeat(s.Spec.Tools.OpenAPI.Overrides, 65)
		}, "spec.tools.openAPI.overrides", "must have at most 64 items"},
	})
	// An http catalog is defaulted as an MCP source's fetches are.
	h := openAPI().Spec.Tools.HTTP
	if h.Interval.Duration != 5*time.Minute || h.Timeout.Duration != 10*time.Second || h.FollowRedirects.Policy != RedirectSameHost {
		t.Errorf("http catalog defaults = %v, %v, %q; want 5m, 10s, SameHost", h.Interval, h.Timeout, h.FollowRedirects.Policy)
	}

	mcp := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("github"), Spec: ContextSourceSpec{Type: SourceMCP, MCP: &MCPSource{
			URL: "https://mcp.example.com/mcp", Namespace: "github",
			Headers: []HTTPHeader{{Name: "Authorization", ValueFrom: &HeaderValueSource{SecretKeyRef: SecretKeySelector{Name: "gh", Key: "token"}}}}}}}
		s.Default()
		return s
	}
	runValidation(t, mcp, (*ContextSource).Validate, []validCase[ContextSource]{
		{"url scheme", func(s *ContextSource) { s.Spec.MCP.URL = "ftp://bob:pw@mcp.example.com/" }, "spec.mcp.url", "must start with http:// or https://"},
		{"url hides credentials", func(s *ContextSource) { s.Spec.MCP.URL = "ftp://bob:pw@mcp.example.com/" }, "spec.mcp.url", "***@"},
		{"url length", func(s *ContextSource) { s.Spec.MCP.URL = "https://h/" + strings.Repeat("a", 2048) }, "spec.mcp.url", "2048"},
		{"header secret key", func(s *ContextSource) { s.Spec.MCP.Headers[0].ValueFrom.SecretKeyRef.Key = "" }, "spec.mcp.headers[0].valueFrom.secretKeyRef.key", "Required value"},
		{"header line break", func(s *ContextSource) { s.Spec.MCP.Headers[0] = HTTPHeader{Name: "X", Value: ptr("a\nb")} }, "spec.mcp.headers[0].value", "line breaks"},
		{"namespace words", func(s *ContextSource) { s.Spec.MCP.Namespace = ".github" }, "spec.mcp.namespace", "dotted words"},
		{"interval positive", func(s *ContextSource) { s.Spec.MCP.Interval = dur(0) }, "spec.mcp.interval", "must be greater than 0"},
		{"maxTools bound", func(s *ContextSource) { s.Spec.MCP.MaxTools = 10001 }, "spec.mcp.maxTools", "between 1 and 10000"},
		{"redirect policy", func(s *ContextSource) { s.Spec.MCP.FollowRedirects.Policy = "Always" }, "spec.mcp.followRedirects.policy", `"SameHost"`},
	})
	if s := mcp(); s.Spec.MCP.Interval.Duration != 5*time.Minute || s.Spec.MCP.Timeout.Duration != 10*time.Second || s.Spec.MCP.MaxTools != 1000 {
		t.Errorf("MCP defaults: interval %v, timeout %v, maxTools %d", s.Spec.MCP.Interval, s.Spec.MCP.Timeout, s.Spec.MCP.MaxTools)
	}

	router := func() *ContextRouter {
		r := &ContextRouter{ObjectMeta: meta("acme"), Spec: ContextRouterSpec{Tools: RouterToolsSpec{
			Fallback: []ToolReference{{Source: "web", Name: "web_search"}}}}}
		r.Default()
		return r
	}
	runValidation(t, router, (*ContextRouter).Validate, []validCase[ContextRouter]{
		{"topK bound", func(r *ContextRouter) { r.Spec.Tools.TopK = 101 }, "spec.tools.topK", "between 1 and 100"},
		{"minScore decimal", func(r *ContextRouter) { r.Spec.Tools.MinScore = "-1" }, "spec.tools.minScore", "at least 0"},
		{"minConfidence range", func(r *ContextRouter) { r.Spec.Tools.MinConfidence = "1.5" }, "spec.tools.minConfidence", "from 0 to 1"},
		{"collapseThreshold range", func(r *ContextRouter) { r.Spec.Tools.CollapseThreshold = "2" }, "spec.tools.collapseThreshold", "from 0 to 1"},
		{"relativeCut decimal", func(r *ContextRouter) { r.Spec.Tools.Adaptive.RelativeCut = "half" }, "spec.tools.adaptive.relativeCut", "from 0 to 1"},
		{"recallWeight decimal", func(r *ContextRouter) { r.Spec.Tools.Adaptive.RecallWeight = "-1" }, "spec.tools.adaptive.recallWeight", "at least 0"},
		{"adaptive rule enum", func(r *ContextRouter) { r.Spec.Tools.Adaptive.Rule = "utility" }, "spec.tools.adaptive.rule", `did you mean "Utility"?`},
		{"expansion enum", func(r *ContextRouter) { r.Spec.Tools.Expansion = "synonyms" }, "spec.tools.expansion", `did you mean "Synonyms"?`},
		{"learning scope enum", func(r *ContextRouter) { r.Spec.Tools.Learning.Scope = "shared" }, "spec.tools.learning.scope", `did you mean "Shared"?`},
		{"fallback source", func(r *ContextRouter) { r.Spec.Tools.Fallback[0].Source = "" }, "spec.tools.fallback[0].source", "Required value"},
		{"fallback duplicate", func(r *ContextRouter) {
			r.Spec.Tools.Fallback = append(r.Spec.Tools.Fallback, r.Spec.Tools.Fallback[0])
		},
			"spec.tools.fallback[1]", "Duplicate value"},
	})

	perm := func() *AgentPermission {
		p := &AgentPermission{ObjectMeta: meta("support"), Spec: AgentPermissionSpec{Agents: []string{"support-bot"},
			Tools: ToolRules{Allow: []string{"billing.*"}, Deny: []string{"billing.**.delete_*"}, MaxSideEffects: SideEffectsRead}}}
		p.Default()
		return p
	}
	runValidation(t, perm, (*AgentPermission).Validate, []validCase[AgentPermission]{
		{"allow glob", func(p *AgentPermission) { p.Spec.Tools.Allow = []string{"billing.[a-"} }, "spec.tools.allow[0]", "not a valid glob"},
		{"deny empty", func(p *AgentPermission) { p.Spec.Tools.Deny = []string{""} }, "spec.tools.deny[0]", "Required value"},
		{"maxSideEffects enum", func(p *AgentPermission) { p.Spec.Tools.MaxSideEffects = "Harmless" }, "spec.tools.maxSideEffects", `"Write"`},
		{"too many globs", func(p *AgentPermission) {
			p.Spec.Tools.Deny = nil
			for i := range 65 {
				p.Spec.Tools.Deny = append(p.Spec.Tools.Deny, fmt.Sprintf("t%d", i))
			}
		}, "spec.tools.deny", "must have at most 64 items"},
	})
}

func TestSideEffectsLevel(t *testing.T) {
	order := []SideEffects{SideEffectsNone, SideEffectsRead, SideEffectsWrite, SideEffectsDestructive}
	for i := 1; i < len(order); i++ {
		if order[i-1].Level() >= order[i].Level() {
			t.Errorf("%s is not below %s", order[i-1], order[i])
		}
	}
	if SideEffects("").Level() != SideEffectsDestructive.Level() || SideEffects("Harmless").Level() != SideEffectsDestructive.Level() {
		t.Error("an unset or unknown level is not the worst case")
	}
	if got := (&Tool{Name: "create", Namespace: "billing.invoices"}).ID(); got != "billing.invoices.create" {
		t.Errorf("ID() = %q", got)
	}
	if got := (&Tool{Name: "search"}).ID(); got != "search" {
		t.Errorf("ID() without namespace = %q", got)
	}
}

// TestTokenEstimatorsAccepted: every estimator the API lists passes validation, the byte-pair
// encodings included.
func TestTokenEstimatorsAccepted(t *testing.T) {
	for _, est := range TokenEstimators() {
		r := &ContextRouter{ObjectMeta: meta("acme")}
		r.Default()
		r.Spec.Budget.Estimator = est
		if errs := r.Validate(); len(errs) != 0 {
			t.Errorf("%s: %v", est, errs.ToAggregate())
		}
	}
	if got := TokenEstimators(); !slices.Contains(got, EstimatorO200kBase) || !slices.Contains(got, EstimatorCl100kBase) {
		t.Errorf("TokenEstimators() = %v, lacks the byte-pair encodings", got)
	}
}
