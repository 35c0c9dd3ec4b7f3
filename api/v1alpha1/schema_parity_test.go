package v1alpha1_test

// TestValidateMatchesCRDSchema holds the kubebuilder markers and Validate to
// one set of rules: every constraint the markers put into a CRD's spec schema
// (enum, minimum, maximum, minLength, maxLength, pattern, minItems, maxItems,
// required, unique list entries, x-kubernetes-validations) must be enforced
// by Validate too, so that a manifest `contextrouter validate` accepts is one
// the API server accepts. The cases are derived by walking the schemas the
// API server serves, not written by hand: a new marker without a Validate
// rule fails here, and so does a marker whose boundary Validate refuses.
// (Validate may be stricter: it also checks what a schema cannot express.)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
	"github.com/contextrouter/contextrouter/internal/testenv"
)

// parityBases are valid specs, per kind, that between them set every field
// a marker constrains: a constraint is probed on each base that reaches it.
var parityBases = map[string][]string{
	v1alpha1.KindContextRouter: {`{
		"defaultAccess": "Deny",
		"budget": {"maxTokens": 1000, "reserveTokens": 0, "truncation": "Drop", "estimator": "Words"},
		"ranking": {"strategy": "Relevance", "scorer": "BM25", "dedupThreshold": "0.5",
			"embedding": {"endpoint": "https://emb.example.com/v1", "model": "m", "apiKeySecretRef": {"name": "emb", "key": "token"},
				"dimensions": 8, "batchSize": 16, "timeout": "5s"},
			"hybrid": {"denseWeight": "0.7"},
			"rerank": {"endpoint": "https://rr.example.com/v1/rerank", "model": "r", "apiKeySecretRef": {"name": "rr", "key": "token"},
				"format": "TEI", "topN": 10, "timeout": "5s"}},
		"variables": {"team": "hr"},
		"cache": {"ttl": "1m", "maxEntries": 10, "maxBytes": "1Mi"},
		"auth": {"mode": "None"},
		"audit": {"enabled": true, "sampleRate": "0.5", "queryText": "Hash"},
		"deployment": {"replicas": 1, "image": "img", "serviceAccountName": "sa",
			"resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}, "claims": [{"name": "gpu"}]}},
		"tools": {"topK": 3, "minScore": "1.5", "minConfidence": "0.3", "collapseThreshold": "0.9", "adaptive": {"enabled": true, "rule": "Relative", "recallWeight": "2.5", "relativeCut": "0.2"}, "learning": {"scope": "Shared"},
			"fallback": [{"source": "web", "name": "web_search"}]},
		"sessions": {"store": "Redis", "ttl": "1h", "maxSessions": 100, "maxBytes": "1Mi", "dedupThreshold": "0.5", "secrets": "Off", "firewall": {"maxChars": 1000, "keep": [{"tools": ["payments.*"], "paths": [".status"]}]},
			"redis": {"address": "redis.cache.svc:6379", "passwordSecretRef": {"name": "redis", "key": "password"}, "db": 1, "keyPrefix": "cr:", "tls": true}},
		"phases": {"route": {"budget": 1500, "maxBudget": 3000, "kinds": ["user_turn"], "maxItemsPerKind": {"fact": 2}, "kindPriorities": {"user_turn": "0.9"}},
			"call": {"budget": 2500, "maxBudget": 3000, "kinds": ["tool_call"], "maxItemsPerKind": {"tool_call": 2}, "kindPriorities": {"tool_call": "1"}},
			"interpret": {"budget": 3000, "maxBudget": 4000, "kinds": ["tool_result"], "maxItemsPerKind": {"tool_result": 1}, "kindPriorities": {"tool_result": "0.95"}},
			"answer": {"budget": 5000, "maxBudget": 9000, "kinds": ["episode"], "maxItemsPerKind": {"episode": 0}, "kindPriorities": {"episode": "0"}},
			"handoff": {"budget": 4000, "maxBudget": 8000, "kinds": ["plan_state"], "maxItemsPerKind": {"plan_state": 5}, "kindPriorities": {"plan_state": "1"}}}}`,
		// Without rerank, which the Recency and Manual strategies refuse.
		`{"ranking": {"strategy": "Manual"}}`,
		// Budgets of 1 without ceilings: a maxBudget of 1, and a budget of
		// 1000000, are accepted here.
		`{"phases": {"route": {"budget": 1}, "call": {"budget": 1}, "interpret": {"budget": 1}, "answer": {"budget": 1}, "handoff": {"budget": 1}}}`},
	v1alpha1.KindContextRoute: {`{"parentRefs": [{"name": "r"}], "when": "true", "sources": [{"name": "docs"}], "description": "d",
		"fallback": true, "timeout": "1s", "alternate": "other"}`},
	v1alpha1.KindContextSource: {
		`{"type": "Inline", "tags": ["t"], "priority": 1, "sensitivity": "Public",
			"chunking": {"strategy": "WholeFile", "maxChunkTokens": 64}, "inline": {"title": "T", "content": "hello"}}`,
		`{"type": "Directory", "directory": {"path": "/docs", "volume": {"configMap": {"name": "cm"}},
			"include": ["**/*.md"], "exclude": ["x/**"], "maxFileSize": "1Ki"}, "freshness": {"maxAge": "1h", "staleAction": "Drop"}}`,
		`{"type": "Directory", "directory": {"volume": {"persistentVolumeClaim": {"claimName": "pvc"}}}}`,
		`{"type": "GitRepo", "gitRepo": {"url": "https://git.example.com/r.git", "ref": "main", "include": ["docs/**"],
			"exclude": ["x/**"], "interval": "1m", "auth": {"secretRef": {"name": "git"}}, "maxFileSize": "1Ki"}}`,
		`{"type": "HTTPAPI", "httpAPI": {"url": "https://kb.example.com/search?q={{query}}", "method": "POST",
			"headers": [{"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "kb", "key": "token"}}}, {"name": "X-Team", "value": "hr"}],
			"body": "{}", "responsePath": "results", "textField": "text", "titleField": "title", "pathField": "path",
			"timeout": "1s", "maxResults": 5, "maxResponseSize": "1Ki", "followRedirects": {"policy": "SameHost"}}}`,
		`{"type": "HTTPAPI", "httpAPI": {"url": "https://kb.example.com/search", "textField": "text",
			"followRedirects": {"policy": "AllowedHosts", "allowedHosts": ["kb-eu.example.com", "kb-us.example.com:8443"]}}}`,
		`{"type": "Tools", "tools": {"catalog": [{"name": "create_invoice", "namespace": "billing.invoices",
			"description": "Create an invoice.", "inputSchema": {"type": "object"}, "examples": ["bill ACME"],
			"antiPatterns": ["list invoices"], "tags": ["billing"], "sideEffects": "Write", "safetyTags": ["financial"],
			"costHint": "low", "latencyHint": "300ms"}]}}`,
		`{"type": "Tools", "tools": {"directory": {"path": "/tools", "volume": {"configMap": {"name": "cm"}},
			"include": ["*.yaml"], "exclude": ["x/**"], "maxFileSize": "1Ki"}}}`,
		`{"type": "Tools", "tools": {"directory": {"volume": {"persistentVolumeClaim": {"claimName": "pvc"}}}}}`,
		`{"type": "Tools", "tools": {"gitRepo": {"url": "https://git.example.com/tools.git", "ref": "main", "include": ["*.json"],
			"exclude": ["x/**"], "interval": "1m", "auth": {"secretRef": {"name": "git"}}, "maxFileSize": "1Ki"}}}`,
		`{"type": "Tools", "tools": {"http": {"url": "https://api.example.com/openapi.json",
			"headers": [{"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}],
			"interval": "1m", "timeout": "5s", "followRedirects": {"policy": "None"}},
			"openAPI": {"namespace": "petstore", "include": {"tags": ["pet"], "operations": ["find*"]}, "exclude": {"tags": ["admin"], "operations": ["delete*"]},
				"includeDeprecated": true, "overrides": [{"tags": ["store"], "operations": ["place*"], "sideEffects": "Write", "safetyTags": ["financial"]}]}}}`,
		`{"type": "Tools", "tools": {"http": {"url": "https://api.example.com/catalog.yaml",
			"followRedirects": {"policy": "AllowedHosts", "allowedHosts": ["api-eu.example.com", "api-us.example.com:8443"]}}}}`,
		`{"type": "MCP", "mcp": {"url": "https://mcp.example.com/mcp", "namespace": "github",
			"headers": [{"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "mcp", "key": "token"}}}],
			"interval": "1m", "timeout": "5s", "maxTools": 100, "followRedirects": {"policy": "None"}}}`,
		`{"type": "MCP", "mcp": {"url": "https://mcp.example.com/mcp",
			"followRedirects": {"policy": "AllowedHosts", "allowedHosts": ["mcp-eu.example.com", "mcp-us.example.com:8443"]}}}`,
	},
	v1alpha1.KindAgentPermission: {`{"parentRefs": [{"name": "r"}], "agents": ["a", "b"], "allowSources": ["s1"], "denySources": ["s2"],
		"denyPaths": ["secret/**"], "sourceDenyPaths": [{"source": "docs", "paths": ["drafts/**"]}], "pathMatching": "CaseInsensitive", "default": "Allow", "maxSensitivity": "Public",
		"sensitivityAction": "Redact",
		"tools": {"allow": ["billing.*"], "deny": ["billing.**.delete_*"], "maxSideEffects": "Read", "denySafetyTags": ["pii"], "teach": true}}`},
	v1alpha1.KindContextClassifier: {
		`{"parentRefs": [{"name": "r"}], "labels": [{"name": "refund", "examples": ["money back", "refund it"]}, {"name": "deploy", "examples": ["roll out"]}],
			"examplesFrom": {"source": "examples", "path": "intents/train.jsonl"}, "outOfScopeLabel": "other", "threshold": "0.5",
			"maxAlternatives": 2, "entities": [{"type": "team", "dictionary": {"values": ["payments", "platform"]}}], "description": "d"}`,
		`{"labels": [{"name": "a", "examples": ["x"]}], "entities": [{"type": "ticket", "pattern": "[A-Z]+-[0-9]+"}]}`,
		`{"labels": [{"name": "a", "examples": ["x"]}], "entities": [{"type": "team", "dictionary": {"valuesFrom": {"source": "lists", "path": "teams.txt"}}}]}`,
	},
}

// boundaryValues are the accepted values at a maxLength where a run of
// DNS labels (what the test writes otherwise) is not a valid value, or
// does not say enough.
var boundaryValues = map[string]string{
	// The longest host:port: a DNS name and a five-digit port.
	"ContextSource spec.httpAPI.followRedirects.allowedHosts[]":    dnsFiller(253) + ":65535",
	"ContextSource spec.mcp.followRedirects.allowedHosts[]":        dnsFiller(253) + ":65535",
	"ContextSource spec.mcp.url":                                   "https://mcp.example.com/" + strings.Repeat("a", 2048-len("https://mcp.example.com/")),
	"ContextSource spec.tools.http.followRedirects.allowedHosts[]": dnsFiller(253) + ":65535",
	"ContextSource spec.tools.http.url":                            "https://api.example.com/" + strings.Repeat("a", 2048-len("https://api.example.com/")),
	"ContextRouter spec.sessions.redis.address":                    dnsFiller(253) + ":65535",
	// A keep path must parse (jsonpath).
	"ContextRouter spec.sessions.firewall.keep[].paths[]": `.["` + strings.Repeat("a", 1019) + `"]`,
	// maxLength counts characters, not bytes.
	"ContextRoute spec.when": strings.Repeat("é", 4096),
	// A literal as long compiles to more than MaxPatternInstructions; a
	// character class is one instruction.
	"ContextClassifier spec.entities[].pattern": "[" + strings.Repeat("é", 1022) + "]",
}

// boundaryMaps are the accepted maps at a maxProperties: keys the schema
// allows (what the test would write otherwise are variants of the first).
var boundaryMaps = func() map[string]map[string]any {
	every := map[string]any{}
	for _, k := range v1alpha1.PhaseEntryKinds {
		every[k] = 1
	}
	m := map[string]map[string]any{}
	for _, ph := range v1alpha1.PhaseNames {
		m["ContextRouter spec.phases."+ph+".maxItemsPerKind"] = every
	}
	return m
}()

// itemKeys name, for atomic lists whose entries Validate requires to be
// unique though the schema cannot say so, the fields that tell entries apart.
var itemKeys = map[string][]string{
	// Tool ids are unique within a source; a list-map key cannot be optional.
	"ContextSource spec.tools.catalog": {"name"},
}

// celCases break and keep each x-kubernetes-validations rule, found by its
// message. Every rule of the CRDs needs one, and every case a rule.
var celCases = []struct {
	kind, path, message string
	// bad breaks the rule on a base that reaches path; good keeps it.
	bad, good []edit
}{
	{v1alpha1.KindContextRouter, "spec.budget", "reserveTokens must be less than maxTokens",
		[]edit{set("spec.budget.reserveTokens", 1000)}, []edit{set("spec.budget.reserveTokens", 999)}},
	{v1alpha1.KindContextRouter, "spec.ranking", "embedding is required for the Embedding and Hybrid strategies",
		[]edit{set("spec.ranking.strategy", "Hybrid"), del("spec.ranking.embedding")}, []edit{set("spec.ranking.strategy", "Hybrid")}},
	{v1alpha1.KindContextRouter, "spec.ranking", "rerank applies to the Relevance, Embedding and Hybrid strategies",
		[]edit{set("spec.ranking.strategy", "Manual"), set("spec.ranking.rerank", map[string]any{"endpoint": "http://rr"})},
		[]edit{set("spec.ranking.strategy", "Relevance"), set("spec.ranking.rerank", map[string]any{"endpoint": "http://rr"})}},
	{v1alpha1.KindContextRouter, "spec.ranking.embedding.timeout", "timeout must be between 1ms and 5m",
		[]edit{set("spec.ranking.embedding.timeout", "301s")}, []edit{set("spec.ranking.embedding.timeout", "5m")}},
	{v1alpha1.KindContextRouter, "spec.ranking.embedding.timeout", "timeout must be between 1ms and 5m",
		[]edit{set("spec.ranking.embedding.timeout", "0s")}, []edit{set("spec.ranking.embedding.timeout", "1ms")}},
	{v1alpha1.KindContextRouter, "spec.ranking.rerank.timeout", "timeout must be between 1ms and 5m",
		[]edit{set("spec.ranking.rerank.timeout", "6m")}, []edit{set("spec.ranking.rerank.timeout", "1ms")}},
	{v1alpha1.KindContextRouter, "spec.sessions", "redis is required when store is Redis",
		[]edit{set("spec.sessions.store", "Redis"), del("spec.sessions.redis")}, []edit{set("spec.sessions.store", "Redis")}},
	{v1alpha1.KindContextRouter, "spec.sessions.ttl", "ttl must be between 1m and 720h",
		[]edit{set("spec.sessions.ttl", "59s")}, []edit{set("spec.sessions.ttl", "1m")}},
	{v1alpha1.KindContextRouter, "spec.sessions.ttl", "ttl must be between 1m and 720h",
		[]edit{set("spec.sessions.ttl", "721h")}, []edit{set("spec.sessions.ttl", "720h")}},
	{v1alpha1.KindContextRouter, "spec.phases.route.kindPriorities", "kindPriorities keys must be item kinds or episode",
		[]edit{set("spec.phases.route.kindPriorities", map[string]any{"thought": "0.5"})}, []edit{set("spec.phases.route.kindPriorities", map[string]any{"plan_state": "0.5"})}},
	{v1alpha1.KindContextRouter, "spec.phases.answer.kindPriorities", "kindPriorities keys must be item kinds or episode",
		[]edit{set("spec.phases.answer.kindPriorities", map[string]any{"facts": "0.5"})}, []edit{set("spec.phases.answer.kindPriorities", map[string]any{"episode": "0.5"})}},
	{v1alpha1.KindContextRouter, "spec.phases.call.maxItemsPerKind", "maxItemsPerKind keys must be item kinds, fact or episode",
		[]edit{set("spec.phases.call.maxItemsPerKind", map[string]any{"chunk": 1})}, []edit{set("spec.phases.call.maxItemsPerKind", map[string]any{"fact": 1})}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of route must be at least its budget (default 2000)",
		[]edit{set("spec.phases.route.budget", 1500), set("spec.phases.route.maxBudget", 1499)},
		[]edit{set("spec.phases.route.budget", 1500), set("spec.phases.route.maxBudget", 1500)}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of route must be at least its budget (default 2000)",
		[]edit{del("spec.phases.route.budget"), set("spec.phases.route.maxBudget", 1999)},
		[]edit{del("spec.phases.route.budget"), set("spec.phases.route.maxBudget", 2000)}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of call must be at least its budget (default 3000)",
		[]edit{del("spec.phases.call.budget"), set("spec.phases.call.maxBudget", 2999)},
		[]edit{del("spec.phases.call.budget"), set("spec.phases.call.maxBudget", 3000)}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of interpret must be at least its budget (default 4000)",
		[]edit{del("spec.phases.interpret.budget"), set("spec.phases.interpret.maxBudget", 3999)},
		[]edit{del("spec.phases.interpret.budget"), set("spec.phases.interpret.maxBudget", 4000)}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of answer must be at least its budget (default 6000)",
		[]edit{del("spec.phases.answer.budget"), set("spec.phases.answer.maxBudget", 5999)},
		[]edit{del("spec.phases.answer.budget"), set("spec.phases.answer.maxBudget", 6000)}},
	{v1alpha1.KindContextRouter, "spec.phases", "maxBudget of handoff must be at least its budget (default 4000)",
		[]edit{del("spec.phases.handoff.budget"), set("spec.phases.handoff.maxBudget", 3999)},
		[]edit{del("spec.phases.handoff.budget"), set("spec.phases.handoff.maxBudget", 4000)}},
	{v1alpha1.KindContextRoute, "spec.timeout", "timeout must be between 10ms and 60s",
		[]edit{set("spec.timeout", "9ms")}, []edit{set("spec.timeout", "10ms")}},
	{v1alpha1.KindContextRoute, "spec.timeout", "timeout must be between 10ms and 60s",
		[]edit{set("spec.timeout", "61s")}, []edit{set("spec.timeout", "60s")}},
	{v1alpha1.KindContextSource, "spec", "inline must be set exactly when type is Inline",
		[]edit{del("spec.inline")}, []edit{set("spec.type", "Inline")}},
	{v1alpha1.KindContextSource, "spec", "directory must be set exactly when type is Directory",
		[]edit{del("spec.directory")}, []edit{set("spec.type", "Directory")}},
	{v1alpha1.KindContextSource, "spec", "gitRepo must be set exactly when type is GitRepo",
		[]edit{del("spec.gitRepo")}, []edit{set("spec.type", "GitRepo")}},
	{v1alpha1.KindContextSource, "spec", "httpAPI must be set exactly when type is HTTPAPI",
		[]edit{del("spec.httpAPI")}, []edit{set("spec.type", "HTTPAPI")}},
	{v1alpha1.KindContextSource, "spec", "tools must be set exactly when type is Tools",
		[]edit{del("spec.tools")}, []edit{set("spec.type", "Tools")}},
	{v1alpha1.KindContextSource, "spec", "mcp must be set exactly when type is MCP",
		[]edit{del("spec.mcp")}, []edit{set("spec.type", "MCP")}},
	{v1alpha1.KindContextSource, "spec", "freshness applies to Directory, GitRepo and HTTPAPI sources only",
		[]edit{set("spec.freshness.staleAction", "Flag"), del("spec.directory"), set("spec.type", "Inline"), set("spec.inline", map[string]any{"content": "x"})}, nil},
	{v1alpha1.KindContextSource, "spec.freshness.maxAge", "maxAge must be greater than 0",
		[]edit{set("spec.freshness.maxAge", "0s")}, []edit{set("spec.freshness.maxAge", "1s")}},
	{v1alpha1.KindContextSource, "spec.tools", "exactly one of catalog, directory, gitRepo and http must be set",
		[]edit{set("spec.tools.directory", map[string]any{"path": "/t"}), set("spec.tools.gitRepo", map[string]any{"url": "https://git.example.com/t.git"})}, nil},
	{v1alpha1.KindContextSource, "spec.tools", "openAPI reads documents from directory, gitRepo or http, not an inline catalog",
		[]edit{keep("spec.tools.catalog"), set("spec.tools.openAPI", map[string]any{})}, []edit{keep("spec.tools.directory"), set("spec.tools.openAPI", map[string]any{})}},
	{v1alpha1.KindContextSource, "spec.tools.openAPI.include", "set tags or operations",
		[]edit{del("spec.tools.openAPI.include.tags"), del("spec.tools.openAPI.include.operations")}, []edit{del("spec.tools.openAPI.include.tags")}},
	{v1alpha1.KindContextSource, "spec.tools.openAPI.exclude", "set tags or operations",
		[]edit{del("spec.tools.openAPI.exclude.tags"), del("spec.tools.openAPI.exclude.operations")}, []edit{del("spec.tools.openAPI.exclude.operations")}},
	{v1alpha1.KindContextSource, "spec.tools.openAPI.overrides[]", "set tags or operations",
		[]edit{del("spec.tools.openAPI.overrides[].tags"), del("spec.tools.openAPI.overrides[].operations")}, []edit{del("spec.tools.openAPI.overrides[].tags")}},
	{v1alpha1.KindContextSource, "spec.tools.openAPI.overrides[]", "set sideEffects or safetyTags",
		[]edit{del("spec.tools.openAPI.overrides[].sideEffects"), del("spec.tools.openAPI.overrides[].safetyTags")}, []edit{del("spec.tools.openAPI.overrides[].sideEffects")}},
	{v1alpha1.KindContextSource, "spec.tools.http.followRedirects", "allowedHosts must be set exactly when policy is AllowedHosts",
		[]edit{set("spec.tools.http.followRedirects.policy", "SameHost"), set("spec.tools.http.followRedirects.allowedHosts", []any{"api-eu.example.com"})},
		[]edit{set("spec.tools.http.followRedirects.policy", "AllowedHosts")}},
	{v1alpha1.KindContextSource, "spec.tools.http.headers[]", "exactly one of value and valueFrom must be set",
		[]edit{set("spec.tools.http.headers[].value", "v")}, nil},
	{v1alpha1.KindContextSource, "spec.directory.volume", "exactly one of configMap and persistentVolumeClaim must be set",
		[]edit{set("spec.directory.volume.configMap", map[string]any{"name": "cm"}),
			set("spec.directory.volume.persistentVolumeClaim", map[string]any{"claimName": "pvc"})}, nil},
	{v1alpha1.KindContextSource, "spec.httpAPI.followRedirects", "allowedHosts must be set exactly when policy is AllowedHosts",
		[]edit{set("spec.httpAPI.followRedirects.policy", "SameHost"), set("spec.httpAPI.followRedirects.allowedHosts", []any{"kb-eu.example.com"})},
		[]edit{set("spec.httpAPI.followRedirects.policy", "AllowedHosts")}},
	{v1alpha1.KindContextSource, "spec.mcp.headers[]", "exactly one of value and valueFrom must be set",
		[]edit{set("spec.mcp.headers[].value", "v")}, nil},
	{v1alpha1.KindContextSource, "spec.httpAPI.headers[]", "exactly one of value and valueFrom must be set",
		[]edit{set("spec.httpAPI.headers[].value", "v")}, nil},
	{v1alpha1.KindContextClassifier, "spec", "set labels or examplesFrom (or both)",
		[]edit{del("spec.labels"), del("spec.examplesFrom")}, []edit{del("spec.labels")}},
	{v1alpha1.KindContextClassifier, "spec.entities[].dictionary", "set exactly one of values and valuesFrom",
		[]edit{set("spec.entities[].dictionary.valuesFrom", map[string]any{"source": "lists", "path": "teams.txt"}),
			set("spec.entities[].dictionary.values", []any{"v"})}, nil},
	{v1alpha1.KindContextClassifier, "spec.entities[]", "set exactly one of dictionary and pattern",
		[]edit{set("spec.entities[].pattern", "x+"), set("spec.entities[].dictionary", map[string]any{"values": []any{"v"}})}, nil},
}

// parityHandled are the schema keywords the test derives cases from, or that
// constrain nothing beyond what the decoder enforces (types, formats).
var parityHandled = []string{"type", "format", "description", "default", "properties", "items", "additionalProperties",
	"enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "maxProperties", "required",
	"x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-validations", "x-kubernetes-int-or-string",
	"anyOf", "x-kubernetes-preserve-unknown-fields"}

func TestValidateMatchesCRDSchema(t *testing.T) {
	env := testenv.Start(t)
	p := &parity{c: env.Client, ns: env.Namespace(t)}
	crds := servedSchemas(t, env)

	kinds := slices.Sorted(maps.Keys(parityBases))
	if len(crds) != len(kinds) {
		t.Fatalf("the API server serves %d kinds, the test has bases for %d", len(crds), len(kinds))
	}
	var cases []parityCase
	celSeen := map[string]bool{}
	for _, kind := range kinds {
		root, ok := crds[kind]
		if !ok {
			t.Fatalf("no CRD serves %s", kind)
		}
		t.Run("bases/"+kind, func(t *testing.T) {
			for i := range parityBases[kind] {
				p.expect(t, parityCase{kind: kind, base: i, name: fmt.Sprintf("base %d", i)}, false)
			}
		})
		d := &deriver{kind: kind, t: t}
		spec := root.Properties["spec"]
		d.walk([]string{"spec"}, &spec)
		if slices.Contains(root.Required, "spec") {
			d.add([]string{"spec"}, "required", true, del("spec"))
		}
		cases = append(cases, d.cases...)
		for _, r := range d.cel {
			celSeen[kind+" "+r.Message] = true
		}
	}
	celUsed := map[string]bool{}
	for _, cc := range celCases {
		key := cc.kind + " " + cc.message
		if !celSeen[key] {
			t.Errorf("celCases: no x-kubernetes-validations rule of %s has the message %q", cc.kind, cc.message)
		}
		// A rule of a type used in two places (HTTPHeader) has a case for each.
		celUsed[key] = true
		name := cc.path + " rule " + strconv.Quote(cc.message)
		cases = append(cases, parityCase{kind: cc.kind, name: name + " broken", base: -1, scope: cc.path, edits: cc.bad, refuse: true})
		cases = append(cases, parityCase{kind: cc.kind, name: name + " kept", base: -1, scope: cc.path,
			edits: append(slices.Clone(cc.good), keep(cc.path))})
	}
	for key := range celSeen {
		if !celUsed[key] {
			t.Errorf("x-kubernetes-validations rule of %s has no case in celCases", key)
		}
	}

	// Each marker constraint has exactly one case that breaks it.
	constraints := map[string]int{}
	for _, c := range cases {
		if c.rule != "" && c.refuse {
			constraints[c.rule]++
		}
	}
	t.Logf("%d cases for the marker constraints %v and %d x-kubernetes-validations rules", len(cases), constraints, len(celCases))

	for _, c := range cases {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			p.run(t, c)
		})
	}
}

// servedSchemas returns the schema of each contextrouter kind, as the API
// server serves it.
func servedSchemas(t *testing.T, env *testenv.Env) map[string]*apiextensionsv1.JSONSchemaProps {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var list apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, crd := range list.Items {
		if crd.Spec.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == v1alpha1.GroupVersion.Version {
				out[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out
}

// parityCase is one object: a base with edits, refused or accepted.
type parityCase struct {
	kind, name string
	// rule is the schema keyword the case probes ("" for CEL rules and bases).
	rule string
	// base is the index in parityBases; -1 tries every base that reaches scope.
	base int
	// scope is the field path (with [] for list entries) the edits touch;
	// a refusal must name a field within it or its parent.
	scope  string
	edits  []edit
	refuse bool
}

type deriver struct {
	t     *testing.T
	kind  string
	cases []parityCase
	cel   []apiextensionsv1.ValidationRule
}

func (d *deriver) add(path []string, rule string, refuse bool, e ...edit) {
	scope := joinPath(path)
	verb := "keeps"
	if refuse {
		verb = "breaks"
	}
	name := fmt.Sprintf("%s %s %s", scope, verb, rule)
	if len(e) == 1 && e[0].op == opSet {
		name += fmt.Sprintf(" (%s)", shortValue(e[0].value))
	}
	d.cases = append(d.cases, parityCase{kind: d.kind, name: name, rule: strings.Fields(rule)[0],
		base: -1, scope: scope, edits: e, refuse: refuse})
}

// walk derives the cases of the schema s at path.
func (d *deriver) walk(path []string, s *apiextensionsv1.JSONSchemaProps) {
	path = slices.Clip(path)
	p := joinPath(path)
	d.checkKeywords(p, s)
	d.cel = append(d.cel, s.XValidations...)
	hasDefault := s.Default != nil

	for _, v := range s.Enum {
		var val string
		if err := json.Unmarshal(v.Raw, &val); err != nil {
			d.t.Fatalf("%s: enum value %s is not a string", p, v.Raw)
		}
		d.add(path, "enum "+val, false, set(p, val))
	}
	if len(s.Enum) > 0 {
		d.add(path, "enum", true, set(p, "NotInTheEnum"))
	}
	if s.Minimum != nil {
		m := int64(*s.Minimum)
		bad := m - 1
		if bad == 0 && hasDefault {
			// An explicit 0 of a non-pointer field reads as absent, and
			// gets the default, in Go (docs/api.md, common rules).
			bad = -1
		}
		d.add(path, fmt.Sprintf("minimum %d", m), true, set(p, bad))
		d.add(path, fmt.Sprintf("minimum %d", m), false, set(p, m))
	}
	if s.Maximum != nil {
		m := int64(*s.Maximum)
		d.add(path, fmt.Sprintf("maximum %d", m), true, set(p, m+1))
		d.add(path, fmt.Sprintf("maximum %d", m), false, set(p, m))
	}
	if s.MinLength != nil {
		n := int(*s.MinLength)
		d.add(path, fmt.Sprintf("minLength %d", n), true, set(p, dnsFiller(n-1)))
		d.add(path, fmt.Sprintf("minLength %d", n), false, set(p, dnsFiller(n)))
	}
	if s.MaxLength != nil {
		n := int(*s.MaxLength)
		good, ok := boundaryValues[d.kind+" "+p]
		if !ok {
			good = dnsFiller(n)
		}
		if l := utf8.RuneCountInString(good); l != n {
			d.t.Errorf("%s %s: the boundary value is %d characters, maxLength is %d", d.kind, p, l, n)
		}
		d.add(path, fmt.Sprintf("maxLength %d", n), true, set(p, dnsFiller(n+1)))
		d.add(path, fmt.Sprintf("maxLength %d", n), false, set(p, good))
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			d.t.Fatalf("%s: pattern %q: %v", p, s.Pattern, err)
		}
		bad := ""
		for _, c := range []string{"~", "x", "-1", "2"} {
			if !re.MatchString(c) {
				bad = c
				break
			}
		}
		d.add(path, "pattern "+s.Pattern, true, set(p, bad))
		// The bases hold a matching value.
		d.add(path, "pattern "+s.Pattern, false, keep(p))
	}
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		keys := s.XListMapKeys
		if k, ok := itemKeys[d.kind+" "+p]; ok {
			keys = k
		}
		if s.MinItems != nil {
			n := int(*s.MinItems)
			d.add(path, fmt.Sprintf("minItems %d", n), true, setItems(p, n-1, keys))
			d.add(path, fmt.Sprintf("minItems %d", n), false, setItems(p, n, keys))
		}
		if s.MaxItems != nil {
			n := int(*s.MaxItems)
			d.add(path, fmt.Sprintf("maxItems %d", n), true, setItems(p, n+1, keys))
			d.add(path, fmt.Sprintf("maxItems %d", n), false, setItems(p, n, keys))
		}
		if lt := s.XListType; lt != nil && (*lt == "set" || *lt == "map") {
			d.add(path, "x-kubernetes-list-type "+*lt, true, duplicateFirst(p))
			d.add(path, "x-kubernetes-list-type "+*lt, false, setItems(p, 2, keys))
		}
		d.walk(append(path, "[]"), s.Items.Schema)
	}
	if s.MaxProperties != nil {
		n := int(*s.MaxProperties)
		good, ok := boundaryMaps[d.kind+" "+p]
		if !ok || len(good) != n {
			d.t.Errorf("%s %s: boundaryMaps needs a map of %d allowed keys", d.kind, p, n)
		}
		d.add(path, fmt.Sprintf("maxProperties %d", n), true, setProps(p, n+1))
		d.add(path, fmt.Sprintf("maxProperties %d", n), false, set(p, good))
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		d.walk(append(path, "{}"), s.AdditionalProperties.Schema)
	}
	for _, name := range sortedNames(s.Properties) {
		prop := s.Properties[name]
		d.walk(append(path, name), &prop)
	}
	for _, name := range s.Required {
		d.add(append(path, name), "required", true, del(p+"."+name))
		d.add(append(path, name), "required", false, keep(p+"."+name))
	}
}

// joinPath joins ["spec", "a", "[]", "b"] into "spec.a[].b".
func joinPath(path []string) string {
	s := strings.Join(path, ".")
	s = strings.ReplaceAll(s, ".[]", "[]")
	return strings.ReplaceAll(s, ".{}", "{}")
}

// checkKeywords fails on a schema keyword the derivation does not know, so
// a new kind of marker cannot go unprobed.
func (d *deriver) checkKeywords(p string, s *apiextensionsv1.JSONSchemaProps) {
	raw, err := json.Marshal(s)
	if err != nil {
		d.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		d.t.Fatal(err)
	}
	for k := range m {
		if !slices.Contains(parityHandled, k) {
			d.t.Errorf("%s %s: schema keyword %q is not probed by this test", d.kind, p, k)
		}
	}
	if s.Format != "" && s.Format != "int32" && s.Format != "int64" {
		d.t.Errorf("%s %s: format %q is not probed by this test", d.kind, p, s.Format)
	}
}

func sortedNames(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// dnsFiller is a string of n characters that is a valid DNS subdomain (and
// name, key and path) for every n from 1 to 253: labels of "a"s.
func dnsFiller(n int) string {
	b := []byte(strings.Repeat(strings.Repeat("a", 62)+".", n/63+1)[:n])
	if n > 0 && b[n-1] == '.' {
		b[n-1] = 'a'
	}
	return string(b)
}

func shortValue(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 24 {
		s = fmt.Sprintf("%d characters", len(s))
	}
	if s == "" {
		s = `""`
	}
	return s
}

// An edit changes a spec at a field path; [] is the first list entry.
type edit struct {
	op    editOp
	path  string
	value any
	n     int
	keys  []string
}

type editOp int

const (
	opSet editOp = iota
	opDelete
	opKeep     // only requires the path to exist
	opItems    // sets the list to n distinct entries made from its first
	opDupFirst // appends a copy of the first entry
	opProps    // sets the map to n entries: the first's value under variants of its key
)

func set(path string, v any) edit { return edit{op: opSet, path: path, value: v} }
func del(path string) edit        { return edit{op: opDelete, path: path} }
func keep(path string) edit       { return edit{op: opKeep, path: path} }
func setItems(path string, n int, keys []string) edit {
	return edit{op: opItems, path: path, n: n, keys: keys}
}
func duplicateFirst(path string) edit  { return edit{op: opDupFirst, path: path} }
func setProps(path string, n int) edit { return edit{op: opProps, path: path, n: n} }

// splitPath turns "spec.a[].b" into ["spec", "a", "[]", "b"].
func splitPath(p string) []string {
	p = strings.ReplaceAll(p, "[]", ".[]")
	return strings.Split(strings.ReplaceAll(p, "{}", ".{}"), ".")
}

// firstKey is the smallest key of a map, which {} in a path stands for.
func firstKey(m map[string]any) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	return slices.Min(slices.Collect(maps.Keys(m))), true
}

// apply makes the edit on obj; false means obj does not reach the path.
func (e edit) apply(obj map[string]any) bool {
	segs := splitPath(e.path)
	var cur any = obj
	for _, s := range segs[:len(segs)-1] {
		var ok bool
		if cur, ok = child(cur, s); !ok {
			return false
		}
	}
	last := segs[len(segs)-1]
	old, exists := child(cur, last)
	switch e.op {
	case opKeep:
		return exists
	case opDelete:
		m, ok := cur.(map[string]any)
		if !ok || !exists {
			return false
		}
		delete(m, last)
		return true
	case opProps:
		m, ok := old.(map[string]any)
		k, found := firstKey(m)
		if !exists || !ok || !found {
			return false
		}
		props := make(map[string]any, e.n)
		for i := range e.n {
			props[variant(k, i, nil).(string)] = m[k]
		}
		return put(cur, last, props)
	case opItems, opDupFirst:
		list, ok := old.([]any)
		if !exists || !ok || len(list) == 0 {
			return false
		}
		var items []any
		if e.op == opDupFirst {
			items = append(slices.Clone(list), list[0])
		} else {
			items = make([]any, e.n)
			for i := range items {
				items[i] = variant(list[0], i, e.keys)
			}
		}
		return put(cur, last, items)
	}
	return put(cur, last, e.value)
}

func child(cur any, seg string) (any, bool) {
	if seg == "{}" {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if seg, ok = firstKey(m); !ok {
			return nil, false
		}
	}
	if seg == "[]" {
		l, ok := cur.([]any)
		if !ok || len(l) == 0 {
			return nil, false
		}
		return l[0], true
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := m[seg]
	return v, ok
}

func put(cur any, seg string, v any) bool {
	if seg == "{}" {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if seg, ok = firstKey(m); !ok {
			return false
		}
	}
	if seg == "[]" {
		l, ok := cur.([]any)
		if !ok || len(l) == 0 {
			return false
		}
		l[0] = v
		return true
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return false
	}
	m[seg] = v
	return true
}

// variant returns entry i of a list made from its first entry: entry 0 is
// the first itself; the others differ in the list's keys (or, for strings,
// in a prefix), so a set or map list stays free of duplicates.
func variant(v any, i int, keys []string) any {
	if i == 0 {
		return v
	}
	switch v := v.(type) {
	case string:
		if rest, ok := strings.CutPrefix(v, "."); ok {
			// A JSON path (a keep-list's) starts with its dot.
			return fmt.Sprintf(".x%d%s", i, rest)
		}
		return fmt.Sprintf("x%d%s", i, v)
	case map[string]any:
		c := make(map[string]any, len(v))
		for k, x := range v {
			c[k] = x
			if slices.Contains(keys, k) {
				c[k] = variant(x, i, nil)
			}
		}
		return c
	}
	return v
}

// parity runs cases against the API server (a dry-run create) and Validate.
type parity struct {
	c  client.Client
	ns string
}

func (p *parity) run(t *testing.T, c parityCase) {
	if c.base >= 0 {
		p.expect(t, c, c.refuse)
		return
	}
	// A refusal must hold on every base that reaches the field; an accepted
	// boundary needs one base on which both accept.
	reached := 0
	var why []string
	for i := range parityBases[c.kind] {
		one := c
		one.base = i
		obj, ok := one.object(t)
		if !ok {
			continue
		}
		reached++
		api, goErr := p.verdicts(t, obj, one)
		if c.refuse {
			if api == nil || goErr == nil {
				t.Errorf("base %d: want both to refuse;\n  API server: %v\n  Validate:   %v", i, orAccepted(api), orAccepted(goErr))
			}
			continue
		}
		if api == nil && goErr == nil {
			return
		}
		why = append(why, fmt.Sprintf("base %d:\n  API server: %v\n  Validate:   %v", i, orAccepted(api), orAccepted(goErr)))
	}
	switch {
	case reached == 0:
		t.Errorf("no base object of %s sets %s: add one to parityBases", c.kind, c.scope)
	case !c.refuse:
		t.Errorf("no base on which both accept:\n%s", strings.Join(why, "\n"))
	}
}

// expect runs a case on its base, which must reach the edits.
func (p *parity) expect(t *testing.T, c parityCase, refuse bool) {
	obj, ok := c.object(t)
	if !ok {
		t.Fatalf("base %d of %s does not set %s", c.base, c.kind, c.scope)
	}
	api, goErr := p.verdicts(t, obj, c)
	if refuse && (api == nil || goErr == nil) || !refuse && (api != nil || goErr != nil) {
		verb := "accept"
		if refuse {
			verb = "refuse"
		}
		t.Errorf("want both to %s;\n  API server: %v\n  Validate:   %v", verb, orAccepted(api), orAccepted(goErr))
	}
}

func orAccepted(err error) any {
	if err == nil {
		return "accepted"
	}
	return err
}

// object builds the case's object from its base; false if an edit does not
// reach its path on that base.
func (c parityCase) object(t *testing.T) (map[string]any, bool) {
	var spec map[string]any
	if err := json.Unmarshal([]byte(parityBases[c.kind][c.base]), &spec); err != nil {
		t.Fatalf("base %d of %s: %v", c.base, c.kind, err)
	}
	obj := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": c.kind,
		"metadata": map[string]any{"name": "x"}, "spec": spec}
	for _, e := range c.edits {
		if !e.apply(obj) {
			return nil, false
		}
	}
	return obj, true
}

// verdicts returns the API server's and Validate's errors for obj (nil when
// accepted). A refusal that names no field within the case's scope (or its
// parent) is reported as a test error: it refused for another reason.
func (p *parity) verdicts(t *testing.T, obj map[string]any, c parityCase) (api, goErr error) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	scope := strings.ReplaceAll(c.scope, "[]", "[0]")
	if strings.Contains(scope, "{}") {
		scope = scope[:strings.Index(scope, "{}")]
	}

	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(p.ns)
	if err := p.c.Create(context.Background(), u, client.DryRunAll); err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
			t.Fatalf("dry-run create: %v", err)
		}
		api = err
		var fields []string
		if d := status.Status().Details; d != nil {
			for _, cause := range d.Causes {
				fields = append(fields, cause.Field)
			}
		}
		if c.refuse && !related(fields, scope) {
			t.Errorf("the API server refused for another field than %s: %v", scope, err)
		}
	}

	obj2 := newObject(c.kind)
	if err := json.Unmarshal(raw, obj2); err != nil {
		// The loader refuses what does not decode (a malformed quantity).
		return api, fmt.Errorf("decode: %w", err)
	}
	obj2.Default()
	if errs := obj2.Validate(); len(errs) > 0 {
		goErr = errs.ToAggregate()
		var fields []string
		for _, e := range errs {
			fields = append(fields, e.Field)
		}
		if c.refuse && !related(fields, scope) {
			t.Errorf("Validate refused for another field than %s: %v", scope, goErr)
		}
	}
	return api, goErr
}

// related reports whether a refusal names the scope, a field inside it, or
// the object holding it (where rules across fields and list sizes report).
func related(fields []string, scope string) bool {
	parent := scope
	if i := strings.LastIndexAny(scope, ".["); i > 0 {
		parent = scope[:i]
	}
	for _, f := range fields {
		if problem.Within(f, scope) || f == parent {
			return true
		}
	}
	return false
}

type validated interface {
	Default()
	Validate() field.ErrorList
}

func newObject(kind string) validated {
	switch kind {
	case v1alpha1.KindContextRouter:
		return &v1alpha1.ContextRouter{}
	case v1alpha1.KindContextRoute:
		return &v1alpha1.ContextRoute{}
	case v1alpha1.KindContextSource:
		return &v1alpha1.ContextSource{}
	case v1alpha1.KindAgentPermission:
		return &v1alpha1.AgentPermission{}
	case v1alpha1.KindContextClassifier:
		return &v1alpha1.ContextClassifier{}
	}
	panic("unknown kind " + kind)
}
