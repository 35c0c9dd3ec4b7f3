package convert

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/internal/located"
)

const fixture = "testdata/context-router.yaml"

func convertFixture(t *testing.T, opts Options) *Result {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Theaios(fixture, data, opts)
	if err != nil {
		t.Fatalf("convert: %v", err)
	}
	return res
}

// keyPaths lists every key of a YAML tree as a path (list items as [i]).
func keyPaths(n *yamlv3.Node, prefix string, out *[]string) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		keyPaths(n.Content[0], prefix, out)
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := joinKey(prefix, n.Content[i].Value)
			*out = append(*out, p)
			keyPaths(n.Content[i+1], p, out)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			keyPaths(c, fmt.Sprintf("%s[%d]", prefix, i), out)
		}
	}
}

// Every key of the fixture is either mapped to a field of an output object
// or reported in a note; the table must name every key the fixture has, so
// a key added to the fixture without a check fails the test.
func TestEveryKeyMappedOrReported(t *testing.T) {
	res := convertFixture(t, Options{})
	objs := map[string]map[string]any{}
	for _, doc := range located.SplitYAML(res.Stream()) {
		var m map[string]any
		if err := sigsyaml.Unmarshal(doc.Text, &m); err != nil {
			t.Fatal(err)
		}
		objs[fmt.Sprintf("%s/%s", m["kind"], m["metadata"].(map[string]any)["name"])] = m
	}
	field := func(obj, path string) string {
		v := any(objs[obj])
		for _, seg := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return "<missing>"
			}
			if v, ok = m[seg]; !ok {
				return "<missing>"
			}
		}
		return fmt.Sprint(v)
	}
	noteFor := func(key string) string {
		for _, n := range res.Notes {
			if n.Key == key {
				return n.Message
			}
		}
		return ""
	}
	type exp struct{ obj, path, want, note string }
	const (
		router = "ContextRouter/acme-assist"
		prompt = "ContextSource/system-prompt"
		docs   = "ContextSource/company-docs"
		wiki   = "ContextSource/eng-wiki"
		kb     = "ContextSource/kb-search"
		all    = "AgentPermission/all-agents"
		hr     = "AgentPermission/hr-assistant"
	)
	table := map[string]exp{
		"version":                                 {note: "-"},
		"metadata":                                {obj: router, path: "metadata.name", want: "acme-assist"},
		"metadata.name":                           {obj: router, path: "metadata.name", want: "acme-assist", note: `"Acme Assist" is named "acme-assist"`},
		"metadata.description":                    {obj: router, path: "metadata.annotations", want: "map[contextrouter.dev/author:platform-team contextrouter.dev/description:Context for the Acme assistants]"},
		"metadata.author":                         {obj: router, path: "metadata.annotations", want: "map[contextrouter.dev/author:platform-team contextrouter.dev/description:Context for the Acme assistants]"},
		"variables":                               {obj: router, path: "spec.variables", want: "map[company_domain:acme.com vip_tags:[vip exec]]"},
		"variables.company_domain":                {obj: "ContextRoute/support", path: "spec.when", want: "text.contains(vars.company_domain) || text.startsWith(\"Ticket\")"},
		"variables.vip_tags":                      {obj: router, path: "spec.variables.vip_tags", want: "[vip exec]"},
		"sources":                                 {obj: prompt, path: "spec.type", want: "Inline"},
		"sources.system_prompt":                   {obj: prompt, path: "kind", want: "ContextSource", note: `"system_prompt" is named "system-prompt"`},
		"sources.system_prompt.type":              {obj: prompt, path: "spec.type", want: "Inline"},
		"sources.system_prompt.tags":              {obj: prompt, path: "spec.tags", want: "[prompt]"},
		"sources.system_prompt.priority":          {obj: prompt, path: "spec.priority", want: "10", note: "theaios ignores priority"},
		"sources.system_prompt.content":           {obj: prompt, path: "spec.inline.content", want: "You are the Acme assistant. Answer from the documents below.\n"},
		"sources.company_docs":                    {obj: docs, path: "kind", want: "ContextSource", note: "is named"},
		"sources.company_docs.type":               {obj: docs, path: "spec.type", want: "Directory"},
		"sources.company_docs.tags":               {obj: docs, path: "spec.tags", want: "[docs hr]"},
		"sources.company_docs.path":               {obj: docs, path: "spec.directory.path", want: "docs/"},
		"sources.company_docs.patterns":           {obj: docs, path: "spec.directory.include", want: "[**/*.md]"},
		"sources.company_docs.exclude_patterns":   {obj: docs, path: "spec.directory.exclude", want: "[drafts/*]"},
		"sources.company_docs.recursive":          {obj: docs, path: "spec.directory.include", want: "[**/*.md]"},
		"sources.company_docs.encoding":           {note: "-"},
		"sources.company_docs.max_file_size":      {obj: docs, path: "spec.directory.maxFileSize", want: "500000"},
		"sources.eng_wiki":                        {obj: wiki, path: "kind", want: "ContextSource", note: "is named"},
		"sources.eng_wiki.type":                   {obj: wiki, path: "spec.type", want: "GitRepo"},
		"sources.eng_wiki.url":                    {obj: wiki, path: "spec.gitRepo.url", want: "${WIKI_GIT_URL}"},
		"sources.eng_wiki.ref":                    {obj: wiki, path: "spec.gitRepo.ref", want: "main"},
		"sources.eng_wiki.path":                   {obj: wiki, path: "spec.gitRepo.include", want: "[wiki/**/*.md]", note: "no sub-folder field"},
		"sources.eng_wiki.patterns":               {obj: wiki, path: "spec.gitRepo.include", want: "[wiki/**/*.md]"},
		"sources.eng_wiki.exclude_patterns":       {obj: wiki, path: "spec.gitRepo.exclude", want: "<missing>"},
		"sources.eng_wiki.recursive":              {obj: wiki, path: "spec.gitRepo.include", want: "[wiki/**/*.md]"},
		"sources.eng_wiki.encoding":               {note: "files are read as UTF-8 here"},
		"sources.eng_wiki.max_file_size":          {obj: wiki, path: "spec.gitRepo.maxFileSize", want: "1000000"},
		"sources.kb_search":                       {obj: kb, path: "kind", want: "ContextSource", note: "is named"},
		"sources.kb_search.type":                  {obj: kb, path: "spec.type", want: "HTTPAPI"},
		"sources.kb_search.url":                   {obj: kb, path: "spec.httpAPI.url", want: "${KB_URL}/search"},
		"sources.kb_search.method":                {obj: kb, path: "spec.httpAPI.method", want: "POST"},
		"sources.kb_search.headers":               {obj: kb, path: "spec.httpAPI.headers", want: "[map[name:Authorization value:Bearer ${KB_TOKEN}] map[name:X-Team value:support]]"},
		"sources.kb_search.headers.Authorization": {obj: kb, path: "spec.httpAPI.headers", want: "[map[name:Authorization value:Bearer ${KB_TOKEN}] map[name:X-Team value:support]]"},
		"sources.kb_search.headers.X-Team":        {obj: kb, path: "spec.httpAPI.headers", want: "[map[name:Authorization value:Bearer ${KB_TOKEN}] map[name:X-Team value:support]]"},
		"sources.kb_search.body_template":         {obj: kb, path: "spec.httpAPI.body", want: `{"q": {{query}}, "k": 5}`, note: "escaped JSON string literal"},
		"sources.kb_search.response_path":         {obj: kb, path: "spec.httpAPI.responsePath", want: "data.results"},
		"sources.kb_search.result_text_field":     {obj: kb, path: "spec.httpAPI.textField", want: "body"},
		"sources.kb_search.result_title_field":    {obj: kb, path: "spec.httpAPI.titleField", want: "title"},
		"routes":                                  {obj: "ContextRoute/always", path: "spec.sources", want: "[map[name:system-prompt]]"},
		"routes[0].name":                          {obj: "ContextRoute/always", path: "metadata.name", want: "always"},
		"routes[0].description":                   {obj: "ContextRoute/always", path: "spec.description", want: "The system prompt for every question"},
		"routes[0].when":                          {obj: "ContextRoute/always", path: "spec.when", want: "<missing>"},
		"routes[0].sources":                       {obj: "ContextRoute/always", path: "spec.sources", want: "[map[name:system-prompt]]"},
		"routes[1].name":                          {obj: "ContextRoute/policy-questions", path: "metadata.name", want: "policy-questions"},
		"routes[1].description":                   {obj: "ContextRoute/policy-questions", path: "spec.description", want: "HR policies"},
		"routes[1].enabled":                       {obj: "ContextRoute/policy-questions", path: "kind", want: "ContextRoute"},
		"routes[1].tags":                          {note: "routes have no tags here"},
		"routes[1].when":                          {obj: "ContextRoute/policy-questions", path: "spec.when", want: `text.contains("policy") || text.contains("PTO") || "hr" in tags`},
		"routes[1].sources":                       {obj: "ContextRoute/policy-questions", path: "spec.sources", want: "[map[name:company-docs]]"},
		"routes[2].name":                          {obj: "ContextRoute/engineering", path: "metadata.name", want: "engineering", note: `"Engineering" is named "engineering"`},
		"routes[2].when": {obj: "ContextRoute/engineering", path: "spec.when",
			want: `agent == "eng-assistant" && !text.contains("salary") || ("department" in metadata && metadata["department"] == "engineering")`},
		"routes[2].sources":            {obj: "ContextRoute/engineering", path: "spec.sources", want: "[map[name:eng-wiki] map[name:company-docs]]"},
		"routes[3].name":               {obj: "ContextRoute/support", path: "metadata.name", want: "support"},
		"routes[3].when":               {obj: "ContextRoute/support", path: "spec.when", want: `text.contains(vars.company_domain) || text.startsWith("Ticket")`},
		"routes[3].sources":            {obj: "ContextRoute/support", path: "spec.sources", want: "[map[name:kb-search]]"},
		"routes[4].name":               {obj: "ContextRoute/retired", path: "kind", want: "<missing>"},
		"routes[4].enabled":            {note: "a disabled route never matches; it is left out"},
		"routes[4].when":               {obj: "ContextRoute/retired", path: "kind", want: "<missing>"},
		"routes[4].sources":            {obj: "ContextRoute/retired", path: "kind", want: "<missing>"},
		"permissions":                  {obj: all, path: "spec.agents", want: "[*]"},
		"permissions[0].agent":         {obj: all, path: "spec.agents", want: "[*]"},
		"permissions[0].default":       {obj: all, path: "spec.default", want: "Allow"},
		"permissions[0].deny_paths":    {obj: all, path: "spec.denyPaths", want: "[**/secrets/** **/*.env]"},
		"permissions[1].agent":         {obj: hr, path: "spec.agents", want: "[hr-assistant]"},
		"permissions[1].default":       {obj: hr, path: "spec.default", want: "Deny"},
		"permissions[1].allow_sources": {obj: hr, path: "spec.allowSources", want: "[system-prompt company-docs]"},
		"permissions[1].deny_sources":  {obj: hr, path: "spec.denySources", want: "[eng-wiki]"},
		"permissions[1].deny_paths":    {obj: hr, path: "spec.denyPaths", want: "[salaries/**]"},
		"budget":                       {obj: router, path: "spec.budget.maxTokens", want: "4000"},
		"budget.max_tokens":            {obj: router, path: "spec.budget.maxTokens", want: "4000"},
		"budget.reserve_tokens":        {obj: router, path: "spec.budget.reserveTokens", want: "200"},
		"budget.estimator":             {obj: router, path: "spec.budget.estimator", want: "CharsDiv4"},
		"budget.truncation":            {obj: router, path: "spec.budget.truncation", want: "TruncateEnd"},
		"budget.ranking":               {obj: router, path: "spec.ranking.strategy", want: "Relevance"},
		"cache":                        {obj: router, path: "spec.cache.maxEntries", want: "500"},
		"cache.enabled":                {obj: router, path: "spec.cache.maxEntries", want: "500", note: "httpAPI results of serve only"},
		"cache.directory":              {note: "serve --cache-dir"},
		"cache.ttl":                    {obj: router, path: "spec.cache.ttl", want: "600s"},
		"cache.max_entries":            {obj: router, path: "spec.cache.maxEntries", want: "500"},
		// A disabled embedding block has nothing to convert.
		"embedding":             {note: "-"},
		"embedding.enabled":     {note: "-"},
		"embedding.model":       {note: "-"},
		"embedding.url":         {note: "-"},
		"embedding.api_key_env": {note: "-"},
		"embedding.cache_dir":   {note: "-"},
	}
	var doc yamlv3.Node
	data, _ := os.ReadFile(fixture)
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	keyPaths(&doc, "", &paths)
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			e, ok := table[p]
			if !ok {
				t.Fatalf("the fixture's key %s has no expectation in this table", p)
			}
			if e.obj != "" {
				if got := field(e.obj, e.path); got != e.want {
					t.Errorf("%s %s = %q, want %q", e.obj, e.path, got, e.want)
				}
			}
			switch got := noteFor(p); {
			case e.note == "-" || e.note == "" && e.obj != "":
				if got != "" && e.note == "-" {
					t.Errorf("unexpected note: %s", got)
				}
			case !strings.Contains(got, e.note):
				t.Errorf("note = %q, want one containing %q", got, e.note)
			}
		})
	}
	for k := range table {
		if !slices.Contains(paths, k) {
			t.Errorf("the table names %s, which the fixture does not have", k)
		}
	}
	// Every note is about a key of the fixture, at its line.
	for _, n := range res.Notes {
		if n.Line == 0 || n.File != fixture {
			t.Errorf("note without a place: %v", n)
		}
	}
}
