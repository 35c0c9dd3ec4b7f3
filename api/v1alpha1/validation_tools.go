package v1alpha1

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of tool catalogs and tool settings, declared by markers except
// where noted.
const (
	// MaxCatalogTools bounds a catalog file set or an MCP listing;
	// maxInlineTools an inline catalog (an object must fit in etcd).
	MaxCatalogTools      = 10000
	maxInlineTools       = 1000
	maxToolName          = 128
	maxToolNamespace     = 253
	maxToolDescription   = 4096
	maxToolExamples      = 256
	maxToolExampleLength = 1024
	maxToolTags          = 32
	maxToolTagLength     = 63
	maxToolHint          = 64
	// MaxInputSchemaBytes bounds a tool's inputSchema (no marker: a
	// schemaless field has no size in the CRD schema).
	MaxInputSchemaBytes = 64 << 10
	// MaxInputSchemaDepth bounds how deep a tool's inputSchema nests
	// objects and arrays (checked with the schema: internal/sources), so
	// that reading one stays cheap.
	MaxInputSchemaDepth = 64
	maxMCPURLLength     = 2048
	maxMCPHeaders       = 32
	maxToolsTopK        = 100
	maxToolFallbacks    = 8
	maxToolRefLength    = maxToolNamespace + 1 + maxToolName
	maxToolGlobs        = 64
)

func validateToolsSource(p *field.Path, t *ToolsSource) field.ErrorList {
	var allErrs field.ErrorList
	set := 0
	for _, b := range []bool{len(t.Catalog) > 0, t.Directory != nil, t.GitRepo != nil, t.HTTP != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		allErrs = append(allErrs, field.Invalid(p, fmt.Sprintf("%d of them set", set), "exactly one of catalog, directory, gitRepo and http must be set"))
	}
	if len(t.Catalog) > maxInlineTools {
		allErrs = append(allErrs, field.TooMany(p.Child("catalog"), len(t.Catalog), maxInlineTools))
	}
	allErrs = append(allErrs, ValidateCatalog(p.Child("catalog"), t.Catalog)...)
	if t.Directory != nil {
		allErrs = append(allErrs, validateDirectory(p.Child("directory"), t.Directory)...)
	}
	if t.GitRepo != nil {
		allErrs = append(allErrs, validateGitRepo(p.Child("gitRepo"), t.GitRepo)...)
	}
	allErrs = append(allErrs, validateEnum(p.Child("approval"), t.Approval, toolApprovals)...)
	if h := t.HTTP; h != nil {
		allErrs = append(allErrs, validateFetch(p.Child("http"), h.URL, h.Headers, h.Interval, h.Timeout, &h.FollowRedirects)...)
	}
	if o := t.OpenAPI; o != nil {
		op := p.Child("openAPI")
		if len(t.Catalog) > 0 {
			allErrs = append(allErrs, field.Forbidden(op, "openAPI reads documents from directory, gitRepo or http, not an inline catalog"))
		}
		allErrs = append(allErrs, validateOpenAPITools(op, o)...)
	}
	return allErrs
}

// Limits of spec.tools.openAPI, declared by markers.
const (
	maxOperationSelectors = 64
	maxOperationTagLength = 256
	maxOpenAPIOverrides   = 64
)

func validateOpenAPITools(p *field.Path, o *OpenAPITools) field.ErrorList {
	allErrs := validateToolNamespace(p.Child("namespace"), o.Namespace, "petstore")
	if o.Include != nil {
		allErrs = append(allErrs, validateOperationSelector(p.Child("include"), o.Include)...)
	}
	if o.Exclude != nil {
		allErrs = append(allErrs, validateOperationSelector(p.Child("exclude"), o.Exclude)...)
	}
	op := p.Child("overrides")
	if len(o.Overrides) > maxOpenAPIOverrides {
		allErrs = append(allErrs, field.TooMany(op, len(o.Overrides), maxOpenAPIOverrides))
	}
	for i := range o.Overrides {
		ov, ip := &o.Overrides[i], op.Index(i)
		allErrs = append(allErrs, validateOperationSelector(ip, &ov.OperationSelector)...)
		if ov.SideEffects == "" && len(ov.SafetyTags) == 0 {
			allErrs = append(allErrs, field.Required(ip, "set sideEffects or safetyTags"))
		}
		if ov.SideEffects != "" {
			allErrs = append(allErrs, validateEnum(ip.Child("sideEffects"), ov.SideEffects, sideEffectLevels)...)
		}
		allErrs = append(allErrs, validateBoundedStrings(ip.Child("safetyTags"), ov.SafetyTags, maxToolTags, maxToolTagLength)...)
	}
	return allErrs
}

// validateOperationSelector checks a selector of OpenAPI operations: tags,
// or globs over tool names as AgentPermission's globs over ids.
func validateOperationSelector(p *field.Path, s *OperationSelector) field.ErrorList {
	var allErrs field.ErrorList
	if len(s.Tags) == 0 && len(s.Operations) == 0 {
		allErrs = append(allErrs, field.Required(p, "set tags or operations"))
	}
	allErrs = append(allErrs, validateBoundedStrings(p.Child("tags"), s.Tags, maxOperationSelectors, maxOperationTagLength)...)
	allErrs = append(allErrs, validateToolGlobs(p.Child("operations"), s.Operations, maxOperationSelectors)...)
	return allErrs
}

// validateFetch checks the fields of a source that fetches from a server
// now and then (spec.mcp, spec.tools.http).
func validateFetch(p *field.Path, rawURL string, headers []HTTPHeader, interval, timeout *metav1.Duration, fr *FollowRedirects) field.ErrorList {
	var allErrs field.ErrorList
	if utf8.RuneCountInString(rawURL) > maxMCPURLLength {
		allErrs = append(allErrs, field.TooLongCharacters(p.Child("url"), "", maxMCPURLLength))
	} else {
		allErrs = append(allErrs, validateHTTPURL(p.Child("url"), rawURL, rawURL)...)
	}
	if len(headers) > maxMCPHeaders {
		allErrs = append(allErrs, field.TooMany(p.Child("headers"), len(headers), maxMCPHeaders))
	}
	allErrs = append(allErrs, validateHeaders(p.Child("headers"), headers)...)
	allErrs = append(allErrs, validatePositiveDuration(p.Child("interval"), interval)...)
	allErrs = append(allErrs, validatePositiveDuration(p.Child("timeout"), timeout)...)
	allErrs = append(allErrs, validateFollowRedirects(p.Child("followRedirects"), fr)...)
	return allErrs
}

// validateToolNamespace checks a namespace given to tools; example names one.
func validateToolNamespace(p *field.Path, ns, example string) field.ErrorList {
	switch {
	case utf8.RuneCountInString(ns) > maxToolNamespace:
		return field.ErrorList{field.TooLongCharacters(p, ns, maxToolNamespace)}
	case ns != "" && !toolNamespacePattern.MatchString(ns):
		return field.ErrorList{field.Invalid(p, ns, "must be dotted words of letters, digits, '_' and '-', such as "+example)}
	}
	return nil
}

// ValidateCatalog checks defaulted tools: each one, and that their ids are
// unique. Catalog files and MCP listings are checked with it too.
func ValidateCatalog(p *field.Path, tools []Tool) field.ErrorList {
	var allErrs field.ErrorList
	seen := make(map[string]int, len(tools))
	for i := range tools {
		ip := p.Index(i)
		errs := ValidateTool(ip, &tools[i])
		allErrs = append(allErrs, errs...)
		if len(errs) > 0 {
			continue
		}
		id := tools[i].ID()
		if j, dup := seen[id]; dup {
			allErrs = append(allErrs, field.Duplicate(ip.Child("name"), fmt.Sprintf("%s (the id of [%d] too)", id, j)))
			continue
		}
		seen[id] = i
	}
	return allErrs
}

// toolNameRule says what toolNamePattern asks of a tool's name: the
// characters MCP allows, as dotted words, because a tool's id
// (namespace.name) is read word by word by the globs of permissions and
// routes; an empty word (".", "a..b") would make an id those globs cannot
// name.
const toolNameRule = "must be dotted words of letters, digits, '_' and '-' with at least one letter or digit, such as create_invoice or issues.list"

// ValidateTool checks one defaulted tool.
func ValidateTool(p *field.Path, t *Tool) field.ErrorList {
	var allErrs field.ErrorList
	switch n := utf8.RuneCountInString(t.Name); {
	case n == 0:
		allErrs = append(allErrs, field.Required(p.Child("name"), "the name the agent calls the tool by"))
	case n > maxToolName:
		allErrs = append(allErrs, field.TooLongCharacters(p.Child("name"), t.Name, maxToolName))
	case !toolNamePattern.MatchString(t.Name):
		allErrs = append(allErrs, field.Invalid(p.Child("name"), t.Name, toolNameRule))
	}
	switch {
	case utf8.RuneCountInString(t.Namespace) > maxToolNamespace:
		allErrs = append(allErrs, field.TooLongCharacters(p.Child("namespace"), t.Namespace, maxToolNamespace))
	case t.Namespace != "" && !toolNamespacePattern.MatchString(t.Namespace):
		allErrs = append(allErrs, field.Invalid(p.Child("namespace"), t.Namespace, "must be dotted words of letters, digits, '_' and '-', such as billing.invoices"))
	}
	switch n := utf8.RuneCountInString(t.Description); {
	case n == 0:
		allErrs = append(allErrs, field.Required(p.Child("description"), "what the tool does; selection reads it"))
	case n > maxToolDescription:
		allErrs = append(allErrs, field.TooLongCharacters(p.Child("description"), "", maxToolDescription))
	}
	if s := t.InputSchema; s != nil {
		sp := p.Child("inputSchema")
		var obj map[string]json.RawMessage
		switch {
		case len(s.Raw) > MaxInputSchemaBytes:
			allErrs = append(allErrs, field.TooLong(sp, "", MaxInputSchemaBytes))
		case json.Unmarshal(s.Raw, &obj) != nil || obj == nil:
			allErrs = append(allErrs, field.Invalid(sp, "", "must be a JSON Schema object"))
		}
	}
	allErrs = append(allErrs, validateBoundedStrings(p.Child("examples"), t.Examples, maxToolExamples, maxToolExampleLength)...)
	allErrs = append(allErrs, validateBoundedStrings(p.Child("antiPatterns"), t.AntiPatterns, maxToolExamples, maxToolExampleLength)...)
	allErrs = append(allErrs, validateBoundedStrings(p.Child("tags"), t.Tags, maxToolTags, maxToolTagLength)...)
	allErrs = append(allErrs, validateBoundedStrings(p.Child("safetyTags"), t.SafetyTags, maxToolTags, maxToolTagLength)...)
	allErrs = append(allErrs, validateEnum(p.Child("sideEffects"), t.SideEffects, sideEffectLevels)...)
	for _, h := range []struct {
		name, v string
	}{{"costHint", t.CostHint}, {"latencyHint", t.LatencyHint}} {
		if utf8.RuneCountInString(h.v) > maxToolHint {
			allErrs = append(allErrs, field.TooLongCharacters(p.Child(h.name), h.v, maxToolHint))
		}
	}
	return allErrs
}

// validateBoundedStrings checks a list's length and its entries' lengths
// in characters.
func validateBoundedStrings(p *field.Path, list []string, maxItems, maxLen int) field.ErrorList {
	var allErrs field.ErrorList
	if len(list) > maxItems {
		allErrs = append(allErrs, field.TooMany(p, len(list), maxItems))
	}
	for i, v := range list {
		if utf8.RuneCountInString(v) > maxLen {
			allErrs = append(allErrs, field.TooLongCharacters(p.Index(i), v, maxLen))
		}
	}
	return allErrs
}

func validateMCP(p *field.Path, m *MCPSource) field.ErrorList {
	allErrs := validateFetch(p, m.URL, m.Headers, m.Interval, m.Timeout, &m.FollowRedirects)
	allErrs = append(allErrs, validateToolNamespace(p.Child("namespace"), m.Namespace, "github")...)
	if m.MaxTools < 1 || m.MaxTools > MaxCatalogTools {
		allErrs = append(allErrs, field.Invalid(p.Child("maxTools"), m.MaxTools, fmt.Sprintf("must be between 1 and %d", MaxCatalogTools)))
	}
	allErrs = append(allErrs, validateEnum(p.Child("approval"), m.Approval, toolApprovals)...)
	return allErrs
}

func validateRouterTools(p *field.Path, t *RouterToolsSpec) field.ErrorList {
	var allErrs field.ErrorList
	if t.TopK < 1 || t.TopK > maxToolsTopK {
		allErrs = append(allErrs, field.Invalid(p.Child("topK"), t.TopK, fmt.Sprintf("must be between 1 and %d", maxToolsTopK)))
	}
	for _, d := range []struct {
		path  *field.Path
		value string
	}{
		{p.Child("minScore"), t.MinScore},
		{p.Child("adaptive", "recallWeight"), t.Adaptive.RecallWeight},
	} {
		if !decimalPattern.MatchString(d.value) {
			allErrs = append(allErrs, field.Invalid(d.path, d.value, `must be a decimal number of at least 0, such as "1.5"`))
		}
	}
	for _, d := range []struct {
		path  *field.Path
		value string
	}{
		{p.Child("minConfidence"), t.MinConfidence},
		{p.Child("collapseThreshold"), t.CollapseThreshold},
		{p.Child("adaptive", "relativeCut"), t.Adaptive.RelativeCut},
	} {
		if !dedupThresholdPattern.MatchString(d.value) {
			allErrs = append(allErrs, field.Invalid(d.path, d.value, `must be a decimal number from 0 to 1, such as "0.3"`))
		}
	}
	allErrs = append(allErrs, validateEnum(p.Child("expansion"), t.Expansion, toolExpansions)...)
	allErrs = append(allErrs, validateEnum(p.Child("adaptive", "rule"), t.Adaptive.Rule, adaptiveRules)...)
	allErrs = append(allErrs, validateEnum(p.Child("learning", "scope"), t.Learning.Scope, toolLearningScopes)...)
	fp := p.Child("fallback")
	if len(t.Fallback) > maxToolFallbacks {
		allErrs = append(allErrs, field.TooMany(fp, len(t.Fallback), maxToolFallbacks))
	}
	seen := make(map[ToolReference]bool, len(t.Fallback))
	for i, ref := range t.Fallback {
		ip := fp.Index(i)
		allErrs = append(allErrs, validateRefName(ip.Child("source"), ref.Source)...)
		switch n := utf8.RuneCountInString(ref.Name); {
		case n == 0:
			allErrs = append(allErrs, field.Required(ip.Child("name"), "the tool's id"))
		case n > maxToolRefLength:
			allErrs = append(allErrs, field.TooLongCharacters(ip.Child("name"), ref.Name, maxToolRefLength))
		case seen[ref]:
			allErrs = append(allErrs, field.Duplicate(ip, ref.Source+"/"+ref.Name))
		}
		seen[ref] = true
	}
	return allErrs
}

func validateToolRules(p *field.Path, r *ToolRules) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateToolGlobs(p.Child("allow"), r.Allow, maxToolGlobs)...)
	allErrs = append(allErrs, validateToolGlobs(p.Child("deny"), r.Deny, maxToolGlobs)...)
	if r.MaxSideEffects != "" {
		allErrs = append(allErrs, validateEnum(p.Child("maxSideEffects"), r.MaxSideEffects, sideEffectLevels)...)
	}
	allErrs = append(allErrs, validateBoundedStrings(p.Child("denySafetyTags"), r.DenySafetyTags, maxToolTags, maxToolTagLength)...)
	return allErrs
}

// validateToolGlobs checks globs over tool ids or names ("." separates
// levels): at most maxItems, each non-empty and valid.
func validateToolGlobs(lp *field.Path, globs []string, maxItems int) field.ErrorList {
	allErrs := validateBoundedStrings(lp, globs, maxItems, maxToolRefLength)
	for i, g := range globs {
		switch {
		case g == "":
			allErrs = append(allErrs, field.Required(lp.Index(i), `a glob over tool ids such as "billing.*"`))
		case !doublestar.ValidatePattern(ToolPath(g)):
			allErrs = append(allErrs, field.Invalid(lp.Index(i), g, "is not a valid glob (check brackets, braces and trailing backslashes)"))
		}
	}
	return allErrs
}
