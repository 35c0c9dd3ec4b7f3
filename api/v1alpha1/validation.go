package v1alpha1

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/net/http/httpguts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/internal/redact"
)

// Validation covers every rule the kubebuilder markers declare (enums, bounds,
// patterns, list sizes and keys, the x-kubernetes-validations rules) and the
// rules a CRD schema cannot express (name formats, globs, URLs, durations,
// quantities). It expects a defaulted object: call Default first, as the API
// server does. CEL conditions are compiled by the engine, not here.

// Limits declared by markers.
const (
	maxNameLength     = 253
	maxParentRefs     = 32
	maxRouteSources   = 64
	maxWhenLength     = 4096
	MinChunkTokens    = 16
	MaxHTTPAPIResults = 1000
	// maxAllowedHosts and maxAllowedHostLen bound followRedirects.allowedHosts:
	// the longest entry is a DNS name (253), ":" and a five-digit port.
	maxAllowedHosts   = 16
	maxAllowedHostLen = 259
)

// maxResponseSizeLimit bounds httpAPI.maxResponseSize: the body is buffered
// whole, so more is a mistake.
var maxResponseSizeLimit = resource.MustParse("1Gi")

// clientHeaders are the headers the HTTP client sets itself; a spec header of
// one of these names would corrupt the request.
var clientHeaders = []string{"connection", "content-length", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}

var (
	accessPolicies     = []AccessPolicy{AccessAllow, AccessDeny}
	sensitivities      = []Sensitivity{SensitivityPublic, SensitivityInternal, SensitivityConfidential, SensitivityRestricted}
	sensitivityActions = []SensitivityAction{SensitivityActionDrop, SensitivityActionRedact}
	pathMatchings      = []PathMatching{PathMatchingCaseSensitive, PathMatchingCaseInsensitive}
	truncationModes    = []TruncationMode{TruncationDrop, TruncationTruncateEnd, TruncationTruncateMiddle}
	toolExpansions     = []ToolExpansion{ToolExpansionSynonyms, ToolExpansionNone}
	adaptiveRules      = []AdaptiveRule{AdaptiveUtility, AdaptiveRelative}
	toolLearningScopes = []ToolLearningScope{ToolLearningOff, ToolLearningAgent, ToolLearningShared}
	tokenEstimators    = []TokenEstimator{EstimatorCharsDiv4, EstimatorWords, EstimatorWhitespace, EstimatorO200kBase, EstimatorCl100kBase}
	rankingStrategies  = []RankingStrategy{RankingRelevance, RankingRecency, RankingManual, RankingEmbedding, RankingHybrid}
	scorers            = []Scorer{ScorerBM25, ScorerKeyword}
	noMatchPolicies    = []NoMatchPolicy{NoMatchEmpty, NoMatchRecent, NoMatchPriority}
	rerankFormats      = []RerankFormat{RerankCohere, RerankTEI}
	authModes          = []AuthMode{AuthNone, AuthServiceAccountToken}
	sourceTypes        = []SourceType{SourceInline, SourceDirectory, SourceGitRepo, SourceHTTPAPI, SourceTools, SourceMCP}
	sideEffectLevels   = []SideEffects{SideEffectsNone, SideEffectsRead, SideEffectsWrite, SideEffectsDestructive}
	chunkingStrategies = []ChunkingStrategy{ChunkingMarkdownSections, ChunkingWholeFile}
	httpMethods        = []HTTPMethod{HTTPMethodGet, HTTPMethodPost}
	redirectPolicies   = []RedirectPolicy{RedirectNone, RedirectSameHost, RedirectAllowedHosts}
	toolApprovals      = []ToolApproval{ToolApprovalAuto, ToolApprovalManual}

	// dedupThresholdPattern is the marker's pattern: a decimal in [0, 1].
	dedupThresholdPattern = regexp.MustCompile(`^(0(\.[0-9]+)?|1(\.0+)?)$`)
	// decimalPattern is a non-negative decimal (spec.tools.minScore).
	decimalPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	// toolNamePattern and toolNamespacePattern are the markers' patterns of
	// a tool's name (dotted words of the characters MCP allows, with a letter
	// or digit: toolNameRule) and namespace (dotted words).
	toolNamePattern      = regexp.MustCompile(`^([A-Za-z0-9_-]+\.)*[_-]*[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$`)
	toolNamespacePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	// gitSchemes are the URL schemes go-git can fetch from.
	gitSchemes = []string{"http", "https", "ssh", "file"}
)

// ValidateSensitivity returns "" for one of the four levels, else the
// message the schema gives, for inputs outside manifests (session items).
func ValidateSensitivity(s Sensitivity) string {
	if slices.Contains(sensitivities, s) {
		return ""
	}
	q := make([]string, len(sensitivities))
	for i, v := range sensitivities {
		q[i] = strconv.Quote(string(v))
	}
	return fmt.Sprintf("unsupported value %q: supported values: %s", s, strings.Join(q, ", "))
}

// Validate reports every invalid field of a defaulted ContextRouter.
func (r *ContextRouter) Validate() field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, field.NewPath("metadata"))
	// A router names its Service and Deployment, so it must be a DNS-1035 label.
	if r.Name != "" && len(allErrs) == 0 {
		for _, msg := range validation.IsDNS1035Label(r.Name) {
			allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), r.Name, msg+" (a router names its Service)"))
		}
	}
	spec := field.NewPath("spec")
	s := &r.Spec
	allErrs = append(allErrs, validateEnum(spec.Child("defaultAccess"), s.DefaultAccess, accessPolicies)...)

	b := spec.Child("budget")
	if s.Budget.MaxTokens < 1 {
		allErrs = append(allErrs, field.Invalid(b.Child("maxTokens"), s.Budget.MaxTokens, "must be greater than or equal to 1"))
	}
	switch {
	case s.Budget.ReserveTokens < 0:
		allErrs = append(allErrs, field.Invalid(b.Child("reserveTokens"), s.Budget.ReserveTokens, "must be greater than or equal to 0"))
	case s.Budget.MaxTokens >= 1 && s.Budget.ReserveTokens >= s.Budget.MaxTokens:
		allErrs = append(allErrs, field.Invalid(b.Child("reserveTokens"), s.Budget.ReserveTokens,
			fmt.Sprintf("must be less than maxTokens (%d)", s.Budget.MaxTokens)))
	}
	allErrs = append(allErrs, validateEnum(b.Child("truncation"), s.Budget.Truncation, truncationModes)...)
	allErrs = append(allErrs, validateEnum(b.Child("estimator"), s.Budget.Estimator, tokenEstimators)...)

	rk := spec.Child("ranking")
	allErrs = append(allErrs, validateEnum(rk.Child("strategy"), s.Ranking.Strategy, rankingStrategies)...)
	allErrs = append(allErrs, validateEnum(rk.Child("scorer"), s.Ranking.Scorer, scorers)...)
	allErrs = append(allErrs, validateEnum(rk.Child("onNoMatch"), s.Ranking.OnNoMatch, noMatchPolicies)...)
	if !validDedupThreshold(s.Ranking.DedupThreshold) {
		allErrs = append(allErrs, field.Invalid(rk.Child("dedupThreshold"), s.Ranking.DedupThreshold,
			`must be a decimal number from 0 to 1, such as "0.85" ("0" disables deduplication)`))
	}
	if e := s.Ranking.Embedding; e != nil {
		ep := rk.Child("embedding")
		allErrs = append(allErrs, validateHTTPURL(ep.Child("endpoint"), e.Endpoint, e.Endpoint)...)
		if e.Model == "" {
			allErrs = append(allErrs, field.Required(ep.Child("model"), "the model sent to the embeddings API"))
		}
		if e.APIKeySecretRef != nil {
			allErrs = append(allErrs, validateSecretKeySelector(ep.Child("apiKeySecretRef"), e.APIKeySecretRef)...)
		}
		if d := e.Dimensions; d != nil && (*d < 1 || *d > MaxEmbeddingDimensions) {
			allErrs = append(allErrs, field.Invalid(ep.Child("dimensions"), *d, fmt.Sprintf("must be from 1 to %d", MaxEmbeddingDimensions)))
		}
		// 0 is unset: Default gives it the default.
		if e.BatchSize < 0 || e.BatchSize > MaxEmbeddingBatchSize {
			allErrs = append(allErrs, field.Invalid(ep.Child("batchSize"), e.BatchSize, fmt.Sprintf("must be from 1 to %d", MaxEmbeddingBatchSize)))
		}
		allErrs = append(allErrs, validateRankingTimeout(ep.Child("timeout"), e.Timeout)...)
	} else if s.Ranking.Strategy == RankingEmbedding || s.Ranking.Strategy == RankingHybrid {
		allErrs = append(allErrs, field.Required(rk.Child("embedding"),
			fmt.Sprintf("required for the %s strategy", s.Ranking.Strategy)))
	}
	if h := s.Ranking.Hybrid; h != nil && !validDedupThreshold(h.DenseWeight) {
		allErrs = append(allErrs, field.Invalid(rk.Child("hybrid", "denseWeight"), h.DenseWeight, `must be a decimal number from 0 to 1, such as "0.5"`))
	}
	if rr := s.Ranking.Rerank; rr != nil {
		rp := rk.Child("rerank")
		allErrs = append(allErrs, validateHTTPURL(rp.Child("endpoint"), rr.Endpoint, rr.Endpoint)...)
		if rr.APIKeySecretRef != nil {
			allErrs = append(allErrs, validateSecretKeySelector(rp.Child("apiKeySecretRef"), rr.APIKeySecretRef)...)
		}
		allErrs = append(allErrs, validateEnum(rp.Child("format"), rr.Format, rerankFormats)...)
		if rr.TopN < 0 || rr.TopN > MaxRerankTopN {
			allErrs = append(allErrs, field.Invalid(rp.Child("topN"), rr.TopN, fmt.Sprintf("must be from 1 to %d", MaxRerankTopN)))
		}
		allErrs = append(allErrs, validateRankingTimeout(rp.Child("timeout"), rr.Timeout)...)
		if s.Ranking.Strategy == RankingRecency || s.Ranking.Strategy == RankingManual {
			allErrs = append(allErrs, field.Invalid(rp, s.Ranking.Strategy, "rerank applies to the Relevance, Embedding and Hybrid strategies"))
		}
	}

	c := spec.Child("cache")
	allErrs = append(allErrs, validatePositiveDuration(c.Child("ttl"), s.Cache.TTL)...)
	if s.Cache.MaxEntries == nil {
		allErrs = append(allErrs, field.Required(c.Child("maxEntries"), ""))
	} else if *s.Cache.MaxEntries < 0 {
		allErrs = append(allErrs, field.Invalid(c.Child("maxEntries"), *s.Cache.MaxEntries, "must be greater than or equal to 0 (0 disables the cache)"))
	}
	allErrs = append(allErrs, validatePositiveQuantity(c.Child("maxBytes"), s.Cache.MaxBytes)...)

	allErrs = append(allErrs, validateEnum(spec.Child("auth", "mode"), s.Auth.Mode, authModes)...)
	allErrs = append(allErrs, validateAudit(spec.Child("audit"), s.Audit)...)

	d := spec.Child("deployment")
	if s.Deployment.Replicas == nil {
		allErrs = append(allErrs, field.Required(d.Child("replicas"), ""))
	} else if *s.Deployment.Replicas < 0 {
		allErrs = append(allErrs, field.Invalid(d.Child("replicas"), *s.Deployment.Replicas, "must be greater than or equal to 0"))
	}
	if n := s.Deployment.ServiceAccountName; n != "" {
		allErrs = append(allErrs, validateDNSSubdomain(d.Child("serviceAccountName"), n)...)
	}
	allErrs = append(allErrs, validateResources(d.Child("resources"), &s.Deployment.Resources)...)
	allErrs = append(allErrs, validateRouterTools(spec.Child("tools"), &s.Tools)...)
	allErrs = append(allErrs, validateSessions(spec.Child("sessions"), &s.Sessions)...)
	if s.Phases != nil {
		allErrs = append(allErrs, ValidatePhases(spec.Child("phases"), s.Phases)...)
	}
	return allErrs
}

// Validate reports every invalid field of a ContextRoute.
func (r *ContextRoute) Validate() field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	s := &r.Spec
	allErrs = append(allErrs, validateParentRefs(spec.Child("parentRefs"), s.ParentRefs)...)
	if n := utf8.RuneCountInString(s.When); n > maxWhenLength {
		allErrs = append(allErrs, field.TooLongCharacters(spec.Child("when"), s.When, maxWhenLength))
	}

	sp := spec.Child("sources")
	switch {
	case len(s.Sources) == 0:
		allErrs = append(allErrs, field.Required(sp, "a route contributes at least one source"))
	case len(s.Sources) > maxRouteSources:
		allErrs = append(allErrs, field.TooMany(sp, len(s.Sources), maxRouteSources))
	}
	names := make([]string, len(s.Sources))
	for i, ref := range s.Sources {
		names[i] = ref.Name
	}
	allErrs = append(allErrs, validateRefNames(sp, names)...)
	if t := s.Timeout; t != nil && (t.Duration < MinRouteTimeout || t.Duration > MaxRouteTimeout) {
		allErrs = append(allErrs, field.Invalid(spec.Child("timeout"), t.Duration.String(), "timeout must be between 10ms and 60s"))
	}
	if s.Alternate != "" {
		ap := spec.Child("alternate")
		allErrs = append(allErrs, validateRefName(ap, s.Alternate)...)
		if s.Alternate == r.Name {
			allErrs = append(allErrs, field.Invalid(ap, s.Alternate, "a route cannot be its own alternate"))
		}
	}
	return allErrs
}

// Validate reports every invalid field of a defaulted ContextSource.
func (r *ContextSource) Validate() field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	s := &r.Spec
	allErrs = append(allErrs, validateEnum(spec.Child("type"), s.Type, sourceTypes)...)
	allErrs = append(allErrs, validateStringSet(spec.Child("tags"), s.Tags)...)
	allErrs = append(allErrs, validateEnum(spec.Child("sensitivity"), s.Sensitivity, sensitivities)...)

	ch := spec.Child("chunking")
	allErrs = append(allErrs, validateEnum(ch.Child("strategy"), s.Chunking.Strategy, chunkingStrategies)...)
	if s.Chunking.MaxChunkTokens < MinChunkTokens {
		allErrs = append(allErrs, field.Invalid(ch.Child("maxChunkTokens"), s.Chunking.MaxChunkTokens,
			fmt.Sprintf("must be greater than or equal to %d", MinChunkTokens)))
	}

	// The union: exactly the block named by type is set.
	blocks := []struct {
		t     SourceType
		child string
		set   bool
	}{
		{SourceInline, "inline", s.Inline != nil},
		{SourceDirectory, "directory", s.Directory != nil},
		{SourceGitRepo, "gitRepo", s.GitRepo != nil},
		{SourceHTTPAPI, "httpAPI", s.HTTPAPI != nil},
		{SourceTools, "tools", s.Tools != nil},
		{SourceMCP, "mcp", s.MCP != nil},
	}
	for _, b := range blocks {
		switch {
		case s.Type == b.t && !b.set:
			allErrs = append(allErrs, field.Required(spec.Child(b.child), fmt.Sprintf("must be set when type is %s", b.t)))
		case s.Type != b.t && b.set:
			msg := "must not be set unless type is " + string(b.t)
			if s.Type != "" {
				msg += fmt.Sprintf(" (type is %s)", s.Type)
			}
			allErrs = append(allErrs, field.Forbidden(spec.Child(b.child), msg))
		}
	}

	allErrs = append(allErrs, validateFreshness(spec.Child("freshness"), s)...)
	if in := s.Inline; in != nil && strings.TrimSpace(in.Content) == "" {
		allErrs = append(allErrs, field.Required(spec.Child("inline", "content"), "the text of the source, not blank"))
	}
	if d := s.Directory; d != nil {
		allErrs = append(allErrs, validateDirectory(spec.Child("directory"), d)...)
	}
	if g := s.GitRepo; g != nil {
		allErrs = append(allErrs, validateGitRepo(spec.Child("gitRepo"), g)...)
	}
	if h := s.HTTPAPI; h != nil {
		allErrs = append(allErrs, validateHTTPAPI(spec.Child("httpAPI"), h)...)
	}
	if t := s.Tools; t != nil {
		allErrs = append(allErrs, validateToolsSource(spec.Child("tools"), t)...)
	}
	if m := s.MCP; m != nil {
		allErrs = append(allErrs, validateMCP(spec.Child("mcp"), m)...)
	}
	allErrs = append(allErrs, validateApprovedTools(field.NewPath("metadata", "annotations"), r)...)
	return allErrs
}

// Validate reports every invalid field of a defaulted AgentPermission.
func (r *AgentPermission) Validate() field.ErrorList {
	allErrs := validateObjectMeta(&r.ObjectMeta, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	s := &r.Spec
	allErrs = append(allErrs, validateParentRefs(spec.Child("parentRefs"), s.ParentRefs)...)
	if len(s.Agents) == 0 {
		allErrs = append(allErrs, field.Required(spec.Child("agents"), `at least one agent identity, or "*" for every agent`))
	}
	allErrs = append(allErrs, validateStringSet(spec.Child("agents"), s.Agents)...)
	allErrs = append(allErrs, validateStringSet(spec.Child("allowSources"), s.AllowSources)...)
	allErrs = append(allErrs, validateStringSet(spec.Child("denySources"), s.DenySources)...)
	allErrs = append(allErrs, validateStringSet(spec.Child("denyPaths"), s.DenyPaths)...)
	allErrs = append(allErrs, validateGlobs(spec.Child("denyPaths"), s.DenyPaths, true)...)
	allErrs = append(allErrs, validateSourceDenyPaths(spec.Child("sourceDenyPaths"), s.SourceDenyPaths)...)
	allErrs = append(allErrs, validateEnum(spec.Child("pathMatching"), s.PathMatching, pathMatchings)...)
	allErrs = append(allErrs, validateEnum(spec.Child("default"), s.Default, accessPolicies)...)
	allErrs = append(allErrs, validateEnum(spec.Child("maxSensitivity"), s.MaxSensitivity, sensitivities)...)
	allErrs = append(allErrs, validateEnum(spec.Child("sensitivityAction"), s.SensitivityAction, sensitivityActions)...)
	allErrs = append(allErrs, validateToolRules(spec.Child("tools"), &s.Tools)...)
	return allErrs
}

func validateObjectMeta(m *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if m.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateDNSSubdomain(p.Child("name"), m.Name)...)
	}
	if m.Namespace != "" {
		if msgs := validation.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("namespace"), m.Namespace, strings.Join(msgs, "; ")))
		}
	}
	// The API server's rule, so that standalone manifests keep it too.
	if err := apivalidation.ValidateAnnotationsSize(m.Annotations); err != nil {
		allErrs = append(allErrs, field.TooLong(p.Child("annotations"), "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return allErrs
}

func validateDNSSubdomain(p *field.Path, name string) field.ErrorList {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, strings.Join(msgs, "; "))}
	}
	return nil
}

// TokenEstimators lists the values of spec.budget.estimator, for messages outside this package.
func TokenEstimators() []TokenEstimator { return slices.Clone(tokenEstimators) }

// validateEnum checks a defaulted enum field; empty means it was never defaulted.
func validateEnum[T ~string](p *field.Path, v T, allowed []T) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if !slices.Contains(allowed, v) {
		err := field.NotSupported(p, v, allowed)
		// Enum values are case-sensitive; the most common slip is the case.
		for _, a := range allowed {
			if strings.EqualFold(string(a), string(v)) {
				err.Detail += fmt.Sprintf(" (did you mean %q?)", a)
				break
			}
		}
		return field.ErrorList{err}
	}
	return nil
}

// validateRefName applies the MinLength/MaxLength markers of an object reference.
func validateRefName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(name) > maxNameLength {
		return field.ErrorList{field.TooLong(p, name, maxNameLength)}
	}
	return nil
}

// validateRefNames checks the names of a list keyed by name (listMapKey=name).
func validateRefNames(p *field.Path, names []string) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		np := p.Index(i).Child("name")
		allErrs = append(allErrs, validateRefName(np, n)...)
		if n != "" && seen[n] {
			allErrs = append(allErrs, field.Duplicate(np, n))
		}
		seen[n] = true
	}
	return allErrs
}

func validateParentRefs(p *field.Path, refs []ParentReference) field.ErrorList {
	var allErrs field.ErrorList
	if len(refs) > maxParentRefs {
		allErrs = append(allErrs, field.TooMany(p, len(refs), maxParentRefs))
	}
	names := make([]string, len(refs))
	for i, ref := range refs {
		names[i] = ref.Name
	}
	return append(allErrs, validateRefNames(p, names)...)
}

// validateStringSet checks a listType=set of names: no empty entries, no duplicates.
func validateStringSet(p *field.Path, list []string) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]bool, len(list))
	for i, v := range list {
		switch {
		case strings.TrimSpace(v) == "":
			allErrs = append(allErrs, field.Required(p.Index(i), "entries must not be empty"))
		case seen[v]:
			allErrs = append(allErrs, field.Duplicate(p.Index(i), v))
		}
		seen[v] = true
	}
	return allErrs
}

// validateGlobs checks doublestar patterns matched against slash-separated
// paths relative to a source root. Empty entries are reported unless the list
// is a set, whose checks already report them.
func validateGlobs(p *field.Path, globs []string, isSet bool) field.ErrorList {
	var allErrs field.ErrorList
	for i, g := range globs {
		switch {
		case strings.TrimSpace(g) == "":
			if !isSet {
				allErrs = append(allErrs, field.Required(p.Index(i), "a glob such as \"**/*.md\""))
			}
		case !doublestar.ValidatePattern(g):
			allErrs = append(allErrs, field.Invalid(p.Index(i), g, "is not a valid doublestar glob (check brackets, braces and trailing backslashes)"))
		case strings.HasPrefix(g, "/"):
			allErrs = append(allErrs, field.Invalid(p.Index(i), g, "must be relative to the source root: paths never start with \"/\""))
		}
	}
	return allErrs
}

func validatePositiveDuration(p *field.Path, d *metav1.Duration) field.ErrorList {
	if d == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be greater than 0")}
	}
	return nil
}

func validatePositiveQuantity(p *field.Path, q *resource.Quantity) field.ErrorList {
	if q == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(p, q.String(), "must be greater than 0")}
	}
	return nil
}

func validateSecretKeySelector(p *field.Path, s *SecretKeySelector) field.ErrorList {
	allErrs := validateRefName(p.Child("name"), s.Name)
	if len(allErrs) == 0 {
		allErrs = append(allErrs, validateDNSSubdomain(p.Child("name"), s.Name)...)
	}
	if s.Key == "" {
		allErrs = append(allErrs, field.Required(p.Child("key"), ""))
	} else if msgs := validation.IsConfigMapKey(s.Key); len(msgs) > 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("key"), s.Key, strings.Join(msgs, "; ")))
	}
	return allErrs
}

// validateHTTPURL checks the ^https?:// marker pattern and that the URL parses
// with a host. parsed is the text to parse (raw with placeholders substituted).
func validateHTTPURL(p *field.Path, raw, parsed string) field.ErrorList {
	if raw == "" {
		return field.ErrorList{field.Required(p, "an http:// or https:// URL")}
	}
	// The URL is shown through redact.URL: its user part may hold a token.
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return field.ErrorList{field.Invalid(p, redact.URL(raw), "must start with http:// or https://")}
	}
	u, err := url.Parse(parsed)
	if err != nil {
		return field.ErrorList{field.Invalid(p, redact.InvalidURL, "is not a valid URL: "+redact.ParseError(err))}
	}
	if u.Host == "" {
		return field.ErrorList{field.Invalid(p, redact.URL(raw), "must name a host")}
	}
	return nil
}

// Bounds of spec.ranking.embedding and spec.ranking.rerank (api.md §1.1).
const (
	MaxEmbeddingDimensions = 8192
	MaxEmbeddingBatchSize  = 2048
	MaxRerankTopN          = 200
	MinRankingTimeout      = time.Millisecond
	MaxRankingTimeout      = 5 * time.Minute
)

// validateRankingTimeout checks the timeout of an embedding or rerank
// request; unset takes the default.
func validateRankingTimeout(p *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && (d.Duration < MinRankingTimeout || d.Duration > MaxRankingTimeout) {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "timeout must be between 1ms and 5m")}
	}
	return nil
}

func validDedupThreshold(s string) bool { return validFraction(s) }

// validFraction reports whether s is a decimal from 0 to 1 (the pattern of
// dedupThreshold and audit.sampleRate).
func validFraction(s string) bool {
	if !dedupThresholdPattern.MatchString(s) {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f >= 0 && f <= 1
}

func validateResources(p *field.Path, rr *corev1.ResourceRequirements) field.ErrorList {
	var allErrs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", rr.Limits}, {"requests", rr.Requests}} {
		for _, name := range sortedResourceNames(list.rl) {
			q := list.rl[name]
			if q.Sign() < 0 {
				allErrs = append(allErrs, field.Invalid(p.Child(list.name).Key(string(name)), q.String(), "must be greater than or equal to 0"))
			}
		}
	}
	for _, name := range sortedResourceNames(rr.Requests) {
		req := rr.Requests[name]
		if lim, ok := rr.Limits[name]; ok && req.Cmp(lim) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit (%s)", name, lim.String())))
		}
	}
	// claims is a list keyed by name (its markers): required and unique.
	seen := make(map[string]bool, len(rr.Claims))
	for i, c := range rr.Claims {
		np := p.Child("claims").Index(i).Child("name")
		switch {
		case c.Name == "":
			allErrs = append(allErrs, field.Required(np, ""))
		case seen[c.Name]:
			allErrs = append(allErrs, field.Duplicate(np, c.Name))
		}
		seen[c.Name] = true
	}
	return allErrs
}

func sortedResourceNames(rl corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func validateDirectory(p *field.Path, d *DirectorySource) field.ErrorList {
	var allErrs field.ErrorList
	if v := d.Volume; v != nil {
		vp := p.Child("volume")
		switch {
		case v.ConfigMap == nil && v.PersistentVolumeClaim == nil:
			allErrs = append(allErrs, field.Required(vp, "exactly one of configMap and persistentVolumeClaim must be set"))
		case v.ConfigMap != nil && v.PersistentVolumeClaim != nil:
			allErrs = append(allErrs, field.Forbidden(vp, "exactly one of configMap and persistentVolumeClaim must be set"))
		}
		if v.ConfigMap != nil {
			allErrs = append(allErrs, validateRefName(vp.Child("configMap", "name"), v.ConfigMap.Name)...)
		}
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "" {
			allErrs = append(allErrs, field.Required(vp.Child("persistentVolumeClaim", "claimName"), ""))
		}
	}
	allErrs = append(allErrs, validateGlobs(p.Child("include"), d.Include, false)...)
	allErrs = append(allErrs, validateGlobs(p.Child("exclude"), d.Exclude, false)...)
	allErrs = append(allErrs, validatePositiveQuantity(p.Child("maxFileSize"), d.MaxFileSize)...)
	return allErrs
}

func validateGitRepo(p *field.Path, g *GitRepoSource) field.ErrorList {
	var allErrs field.ErrorList
	up := p.Child("url")
	switch {
	case g.URL == "":
		allErrs = append(allErrs, field.Required(up, "an https, ssh or file URL of the repository"))
	case strings.Contains(g.URL, "://"):
		u, err := url.Parse(g.URL)
		switch {
		case err != nil:
			allErrs = append(allErrs, field.Invalid(up, redact.InvalidURL, "is not a valid URL: "+redact.ParseError(err)))
		case !slices.Contains(gitSchemes, u.Scheme):
			allErrs = append(allErrs, field.Invalid(up, redact.URL(g.URL),
				fmt.Sprintf("unsupported scheme %q: use one of %s", u.Scheme, strings.Join(gitSchemes, ", "))))
		case u.Scheme != "file" && u.Host == "":
			allErrs = append(allErrs, field.Invalid(up, redact.URL(g.URL), "must name a host"))
		}
	}
	// Anything else is git's user@host:path ssh shorthand or a local path,
	// which only a fetch can check.
	allErrs = append(allErrs, validateGlobs(p.Child("include"), g.Include, false)...)
	allErrs = append(allErrs, validateGlobs(p.Child("exclude"), g.Exclude, false)...)
	allErrs = append(allErrs, validatePositiveDuration(p.Child("interval"), g.Interval)...)
	if g.Auth != nil {
		np := p.Child("auth", "secretRef", "name")
		errs := validateRefName(np, g.Auth.SecretRef.Name)
		if len(errs) == 0 {
			errs = validateDNSSubdomain(np, g.Auth.SecretRef.Name)
		}
		allErrs = append(allErrs, errs...)
	}
	allErrs = append(allErrs, validatePositiveQuantity(p.Child("maxFileSize"), g.MaxFileSize)...)
	return allErrs
}

// queryPlaceholder is replaced by the query text in HTTPAPI URLs and bodies.
const queryPlaceholder = "{{query}}"

func validateHTTPAPI(p *field.Path, h *HTTPAPISource) field.ErrorList {
	allErrs := validateHTTPURL(p.Child("url"), h.URL, strings.ReplaceAll(h.URL, queryPlaceholder, "q"))
	allErrs = append(allErrs, validateEnum(p.Child("method"), h.Method, httpMethods)...)
	if h.Method == HTTPMethodGet && h.Body != "" {
		allErrs = append(allErrs, field.Forbidden(p.Child("body"), "must be empty when method is GET (use POST to send a body)"))
	}

	allErrs = append(allErrs, validateHeaders(p.Child("headers"), h.Headers)...)

	if strings.TrimSpace(h.TextField) == "" {
		allErrs = append(allErrs, field.Required(p.Child("textField"), "the dotted path of the text inside each result"))
	}
	allErrs = append(allErrs, validatePositiveDuration(p.Child("timeout"), h.Timeout)...)
	if h.MaxResults < 1 || h.MaxResults > MaxHTTPAPIResults {
		allErrs = append(allErrs, field.Invalid(p.Child("maxResults"), h.MaxResults,
			fmt.Sprintf("must be between 1 and %d", MaxHTTPAPIResults)))
	}
	if errs := validatePositiveQuantity(p.Child("maxResponseSize"), h.MaxResponseSize); len(errs) > 0 {
		allErrs = append(allErrs, errs...)
	} else if h.MaxResponseSize.Cmp(maxResponseSizeLimit) > 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("maxResponseSize"), h.MaxResponseSize.String(),
			"must be at most "+maxResponseSizeLimit.String()+" (the body is buffered whole)"))
	}
	allErrs = append(allErrs, validateFollowRedirects(p.Child("followRedirects"), &h.FollowRedirects)...)
	return allErrs
}

// validateHeaders checks the headers of an httpAPI or MCP source.
func validateHeaders(hp *field.Path, headers []HTTPHeader) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]int, len(headers))
	for i, hd := range headers {
		ip := hp.Index(i)
		if hd.Name == "" {
			allErrs = append(allErrs, field.Required(ip.Child("name"), ""))
		} else {
			// Header names are case-insensitive, so Authorization and
			// authorization would silently overwrite each other.
			key := strings.ToLower(hd.Name)
			switch {
			case !httpguts.ValidHeaderFieldName(hd.Name):
				allErrs = append(allErrs, field.Invalid(ip.Child("name"), hd.Name,
					"is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"))
			case slices.Contains(clientHeaders, key):
				allErrs = append(allErrs, field.Invalid(ip.Child("name"), hd.Name, "is set by the HTTP client"))
			}
			if j, dup := seen[key]; dup {
				allErrs = append(allErrs, field.Invalid(ip.Child("name"), hd.Name,
					fmt.Sprintf("duplicates headers[%d] (header names are case-insensitive)", j)))
			} else {
				seen[key] = i
			}
		}
		switch {
		case hd.Value == nil && hd.ValueFrom == nil:
			allErrs = append(allErrs, field.Required(ip, "exactly one of value and valueFrom must be set"))
		case hd.Value != nil && hd.ValueFrom != nil:
			allErrs = append(allErrs, field.Forbidden(ip, "exactly one of value and valueFrom must be set"))
		}
		if hd.Value != nil && !ValidHeaderValue(*hd.Value) {
			allErrs = append(allErrs, field.Invalid(ip.Child("value"), "<value omitted>", "must not contain line breaks or other control characters (tab is allowed)"))
		}
		if hd.ValueFrom != nil {
			allErrs = append(allErrs, validateSecretKeySelector(ip.Child("valueFrom", "secretKeyRef"), &hd.ValueFrom.SecretKeyRef)...)
		}
	}
	return allErrs
}

// ValidHeaderValue reports whether s may be sent as an HTTP header value: no
// control characters but tab (a line break would split the header). The
// HTTPAPI source applies it to values resolved per request as well.
func ValidHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// validateFollowRedirects checks a defaulted httpAPI.followRedirects.
func validateFollowRedirects(p *field.Path, f *FollowRedirects) field.ErrorList {
	allErrs := validateEnum(p.Child("policy"), f.Policy, redirectPolicies)
	hp := p.Child("allowedHosts")
	switch {
	case f.Policy == RedirectAllowedHosts && len(f.AllowedHosts) == 0:
		allErrs = append(allErrs, field.Required(hp, "the hosts a redirect may go to when policy is AllowedHosts"))
	case f.Policy != RedirectAllowedHosts && len(f.AllowedHosts) > 0:
		allErrs = append(allErrs, field.Forbidden(hp, "must be empty unless policy is AllowedHosts"))
	case len(f.AllowedHosts) > maxAllowedHosts:
		allErrs = append(allErrs, field.TooMany(hp, len(f.AllowedHosts), maxAllowedHosts))
	}
	seen := make(map[string]bool, len(f.AllowedHosts))
	for i, entry := range f.AllowedHosts {
		host, port, err := ParseAllowedHost(entry)
		if err != nil {
			// An entry written as a URL may carry a user part.
			allErrs = append(allErrs, field.Invalid(hp.Index(i), redact.URL(entry), err.Error()))
			continue
		}
		key := net.JoinHostPort(host, port)
		if seen[key] {
			allErrs = append(allErrs, field.Duplicate(hp.Index(i), entry))
		}
		seen[key] = true
	}
	return allErrs
}

// ParseAllowedHost checks an entry of followRedirects.allowedHosts, "host" or
// "host:port" (an IPv6 address in brackets), and returns the host in lower
// case, without brackets, and the port ("" when none is written).
func ParseAllowedHost(entry string) (host, port string, err error) {
	const want = "must be a host or host:port such as kb-eu.example.com or kb-eu.example.com:8443, with no scheme, user or path"
	switch {
	case entry == "":
		return "", "", fmt.Errorf("must not be empty")
	case len(entry) > maxAllowedHostLen:
		return "", "", fmt.Errorf("must be at most %d characters", maxAllowedHostLen)
	case strings.ContainsAny(entry, "/@?# \t"):
		return "", "", errors.New(want)
	}
	host = entry
	if strings.HasPrefix(entry, "[") {
		end := strings.IndexByte(entry, ']')
		if end < 0 {
			return "", "", errors.New("an IPv6 address needs a closing bracket")
		}
		host = strings.ToLower(entry[1:end])
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return "", "", errors.New("only an IPv6 address is written in brackets")
		}
		rest := entry[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", "", errors.New(want)
			}
			port = rest[1:]
		}
	} else {
		if i := strings.LastIndexByte(entry, ':'); i >= 0 {
			host, port = entry[:i], entry[i+1:]
		}
		if strings.Contains(host, ":") {
			return "", "", errors.New("write an IPv6 address in brackets, such as [2001:db8::1]:8443")
		}
		host = strings.ToLower(host)
		if net.ParseIP(host) == nil {
			if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
				return "", "", errors.New(want)
			}
		}
	}
	if port != "" || strings.HasSuffix(entry, ":") {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return "", "", errors.New("the port must be a number from 1 to 65535")
		}
	}
	return host, port, nil
}

// maxSourceDenyPaths bounds spec.sourceDenyPaths (its MaxItems marker).
const maxSourceDenyPaths = 64

func validateSourceDenyPaths(p *field.Path, list []SourceDenyPaths) field.ErrorList {
	var allErrs field.ErrorList
	if len(list) > maxSourceDenyPaths {
		allErrs = append(allErrs, field.TooMany(p, len(list), maxSourceDenyPaths))
	}
	seen := map[string]bool{}
	for i, e := range list {
		ip := p.Index(i)
		switch {
		case e.Source == "":
			allErrs = append(allErrs, field.Required(ip.Child("source"), ""))
		case len(e.Source) > 253:
			allErrs = append(allErrs, field.TooLong(ip.Child("source"), "", 253))
		case seen[e.Source]:
			allErrs = append(allErrs, field.Duplicate(ip.Child("source"), e.Source))
		}
		seen[e.Source] = true
		if len(e.Paths) == 0 {
			allErrs = append(allErrs, field.Required(ip.Child("paths"), "at least one glob"))
		}
		allErrs = append(allErrs, validateStringSet(ip.Child("paths"), e.Paths)...)
		allErrs = append(allErrs, validateGlobs(ip.Child("paths"), e.Paths, true)...)
	}
	return allErrs
}
