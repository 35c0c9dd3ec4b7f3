package convert

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A file that cannot be converted is refused with every problem located at
// its line (and column inside a condition); nothing is produced.
func TestBadFiles(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"malformed YAML", "sources:\n  docs:\n    type: inline\n    content: [unclosed\nroutes: []\n",
			[]string{"f.yaml:4: invalid YAML: did not find expected ',' or ']'"}},
		{"not a mapping", "- a\n- b\n", []string{"f.yaml:1: must be a mapping, not a list"}},
		{"empty", "# nothing\n", []string{"f.yaml: the file is empty"}},
		{"unknown keys with suggestions", "rotues: []\nsources:\n  d:\n    type: directory\n    path: x\n    pattern: ['*.md']\n",
			[]string{`f.yaml:1: rotues: unknown key (did you mean "routes"?)`, `f.yaml:6: sources.d.pattern: unknown key (did you mean "patterns"?)`}},
		{"a key of another source type", "sources:\n  d:\n    type: inline\n    content: hi\n    url: https://x\n",
			[]string{"f.yaml:5: sources.d.url: not a key of a inline source (its keys: content)"}},
		{"unknown condition operator, at its column", "sources:\n  d: {type: inline, content: hi}\nroutes:\n  - name: r\n    when: 'text includes \"x\"'\n    sources: [d]\n",
			[]string{`f.yaml:5:17: routes[0].when: unknown operator "includes" (known: and, or, not, ==, !=, <, <=, >, >=, contains, starts_with, ends_with, matches, in, not in)`}},
		{"a condition in a block scalar", "sources:\n  d: {type: inline, content: hi}\nroutes:\n  - name: r\n    when: >-\n      text contains \"x\" or\n      text contains \"y\" and\n    sources: [d]\n",
			[]string{"f.yaml:7:28: routes[0].when: unexpected end of the condition: a value is missing"}},
		{"wrong types and values", "budget:\n  max_tokens: lots\n  truncation: cut\n  estimator: Words\ncache:\n  enabled: yes please\n",
			[]string{`f.yaml:2: budget.max_tokens: must be an integer, not the string "lots"`,
				`f.yaml:3: budget.truncation: unsupported value "cut": supported values: drop, truncate_end, truncate_middle`,
				`f.yaml:6: cache.enabled: must be true or false, not the string "yes please"`}},
		{"unknown key of budget.embedding", "budget:\n  embedding: {modle: m}\n", []string{`f.yaml:2: budget.embedding.modle: unknown key (did you mean "model"?)`}},
		{"an undefined source", "sources:\n  docs: {type: inline, content: hi}\nroutes:\n  - name: r\n    sources: [doc]\n",
			[]string{`f.yaml:5: routes[0].sources[0]: source "doc" is not defined (did you mean "docs"?)`}},
		{"a source without type", "sources:\n  docs: {content: hi}\n", []string{"f.yaml:2: sources.docs.type: required: inline, directory, git_repo or http_api"}},
		{"an undefined variable", "sources:\n  d: {type: inline, content: hi}\nroutes:\n  - name: r\n    when: $tier == 2\n    sources: [d]\n",
			[]string{"f.yaml:5:11: routes[0].when: $tier is not defined in variables"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Theaios("f.yaml", []byte(tt.in), Options{})
			var errs Errors
			if !errors.As(err, &errs) || res != nil {
				t.Fatalf("Theaios = %v, %v; want Errors", res, err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.String())
			}
			sameLines(t, "errors", got, tt.want)
		})
	}
}

// What is valid there but has no equivalent here is converted around and
// noted at its line, never dropped silently.
func TestNotes(t *testing.T) {
	in := `sources:
  api:
    type: http_api
    url: https://kb.example.com/s
    method: POST
    body_template: '{"q": "about {{query}}"}'
  docs:
    type: directory
    path: ${DOCS}
    patterns: ["${EXT}"]
routes:
  - name: kb
    sources: [api]
  - name: docs
    when: 'text matches email'
    sources: [docs]
  - name: x
    when: 'user.role == "admin"'
    sources: [docs]
permissions:
  - agent: bot
    deny_paths: ["a*/b*.md"]
budget:
  max_tokens: 100
  reserve_tokens: 100
  ranking: embedding
  estimator: words
`
	res, got := notesOf(t, in)
	want := []string{
		"f.yaml: validate warns: ContextRouter/default: no ContextRoute attaches to this router, so it answers every query with no context; set spec.allowEmpty: true (or run serve --allow-empty) if that is intended",
		"f.yaml:6: sources.api.body_template: {{query}} inside a longer JSON string (or outside quotes) cannot be translated: {{query}} becomes a whole JSON string literal here; the source is left out",
		"f.yaml:10: sources.docs.patterns[0]: ${EXT} is kept as written: this field is not expanded here (only inline text, directory path, git URL and ref, httpAPI URL and body at load, and header values per request)",
		"f.yaml:12: routes[0].sources: the route names no source that is converted, so it is left out (a route needs at least one source here)",
		"f.yaml:13: routes[0].sources[0]: source \"api\" was left out (see its note)",
		"f.yaml:15: routes[1].when: cannot be translated, so the route is left out: matches with a named matcher has no equivalent: write the regular expression as a string",
		"f.yaml:18: routes[2].when: cannot be translated, so the route is left out: \"user.role\": request metadata here is a flat map of strings, so a dotted path has no equivalent",
		"f.yaml:22: permissions[0].deny_paths[0]: \"a*/b*.md\": in theaios's fnmatch * also matches /, here it does not: this glob may deny fewer paths; check it (or add **/ forms)",
		"f.yaml:25: budget.reserve_tokens: 100 leaves no budget (theaios then answers with no context); reserveTokens must be less than maxTokens here, so it is left out",
		"f.yaml:26: budget.ranking: embedding ranking needs an embedding block with enabled: true: Relevance (keyword overlap) is used",
	}
	sameLines(t, "notes", got, want)
	if est := res.Router.body.get("spec.budget.estimator"); est != "Whitespace" {
		t.Errorf("estimator words became %v, want Whitespace (both count white-space-separated fields)", est)
	}
	if len(res.Routes) != 0 || len(res.Sources) != 1 || res.Sources[0].Name != "docs" {
		t.Errorf("routes %d, sources %v", len(res.Routes), res.Sources)
	}
	// The notes head the output too.
	if out := string(res.Stream()); !strings.Contains(out, "# Notes (what could not be translated as is):\n#   f.yaml: validate warns: ContextRouter/default: no ContextRoute attaches") {
		t.Errorf("stream header:\n%s", out)
	}
}

// What theaios accepts and this API refuses is found by the checks of
// validate on the output and noted; a field with a ${NAME} reference is
// checked only after expansion, at load.
func TestOutputCheckedAsValidateDoes(t *testing.T) {
	in := `sources:
  kb: {type: http_api, url: "kb.example.com/search?q={{query}}"}
  env: {type: http_api, url: "${KB_URL}/search"}
routes:
  - {name: kb, sources: [kb, env]}
`
	_, got := notesOf(t, in)
	want := []string{`f.yaml: validate refuses the output: ContextSource/kb: spec.httpAPI.url: Invalid value: "kb.example.com/search?q={{query}}": must start with http:// or https://`}
	sameLines(t, "notes", got, want)
}

// ${NAME} is kept as written everywhere; where this API does not expand it
// (theaios expands it in every string) it is noted, field by field.
func TestEnvReferences(t *testing.T) {
	in := `metadata: {name: acme, description: "for ${TEAM}"}
variables: {domain: "${DOMAIN}"}
sources:
  text: {type: inline, content: "Hi ${USER}", tags: ["${TAG}"]}
  dir: {type: directory, path: "${DOCS}", exclude_patterns: ["${SKIP}"]}
  git: {type: git_repo, url: "${GIT_URL}", ref: "${REF}", path: "${SUB}"}
  api:
    type: http_api
    url: "${KB}/s"
    method: POST
    headers: {Authorization: "Bearer ${TOKEN}", "X-${H}": v}
    body_template: '{"q": "{{query}}", "t": "${TENANT}"}'
    result_text_field: "${FIELD}"
routes:
  - {name: r, when: 'agent == "${BOT}"', sources: [text, dir, git, api]}
permissions:
  - {agent: "${AGENT}", deny_paths: ["${SECRET}/**"]}
`
	res, err := Theaios("f.yaml", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range res.Notes {
		if strings.Contains(n.Message, "is kept as written") {
			got = append(got, fmt.Sprintf("%d %s %s", n.Line, n.Key, strings.Fields(n.Message)[0]))
		}
	}
	want := []string{
		"1 metadata.description ${TEAM}",
		"2 variables.domain ${DOMAIN}",
		"4 sources.text.tags[0] ${TAG}",
		"5 sources.dir.exclude_patterns[0] ${SKIP}",
		"6 sources.git.path ${SUB}",
		"11 sources.api.headers.X-${H} ${H}",
		"13 sources.api.result_text_field ${FIELD}",
		"15 routes[0].when ${BOT}",
		"17 permissions[0].agent ${AGENT}",
		"17 permissions[0].deny_paths[0] ${SECRET}",
	}
	sameLines(t, "notes", got, want)
	// Kept as written in the output.
	for _, s := range []string{"Hi ${USER}", "path: ${DOCS}", "url: ${GIT_URL}", "ref: ${REF}", "url: ${KB}/s", "Bearer ${TOKEN}", `"t": "${TENANT}"`, `agent == "${BOT}"`} {
		if !strings.Contains(string(res.Stream()), s) {
			t.Errorf("the output lost %q", s)
		}
	}
}

// Embedding ranking becomes spec.ranking.embedding when an embedding block
// is there, from either place the format has it; what cannot be used is noted.
func TestEmbeddingConverted(t *testing.T) {
	const tail = "sources: {s: {type: inline, content: x}}\nroutes: [{name: r, sources: [s]}]\n"
	tests := []struct {
		name, in string
		notes    []string
		out      []string // lines of the output
		absent   string
	}{
		{"OpenAI defaults and a key", "budget:\n  ranking: embedding\nembedding: {enabled: true, cache_dir: .emb}\n",
			[]string{
				"f.yaml:3: embedding.api_key_env: the API key is read from Secret embedding, key apiKey: standalone, set CONTEXTROUTER_SECRET_EMBEDDING_APIKEY to the value of $OPENAI_API_KEY",
				"f.yaml:3: embedding.cache_dir: no manifest field: chunk vectors are cached under serve --cache-dir",
			},
			[]string{"strategy: Embedding", "endpoint: https://api.openai.com/v1/embeddings", "model: text-embedding-3-small", "name: embedding", "key: apiKey"}, ""},
		{"a local server without a key", "budget:\n  ranking: embedding\nembedding: {enabled: true, model: nomic-embed-text, url: http://localhost:11434/v1/embeddings}\n",
			nil, []string{"strategy: Embedding", "endpoint: http://localhost:11434/v1/embeddings", "model: nomic-embed-text"}, "apiKeySecretRef"},
		{"budget.embedding wins over the top-level block", "budget:\n  ranking: embedding\n  embedding: {model: m2, url: http://emb:8080/v1/embeddings, api_key_env: EMB_KEY}\nembedding: {enabled: true, model: m}\n",
			[]string{
				"f.yaml:3: budget.embedding.api_key_env: the API key is read from Secret embedding, key apiKey: standalone, set CONTEXTROUTER_SECRET_EMBEDDING_APIKEY to the value of $EMB_KEY",
				"f.yaml:4: embedding: budget.embedding is used; this block is left out",
			}, []string{"strategy: Embedding", "model: m2"}, ""},
		{"ranking by embedding without a block", "budget:\n  ranking: embedding\nembedding: {enabled: false, model: m}\n",
			[]string{"f.yaml:2: budget.ranking: embedding ranking needs an embedding block with enabled: true: Relevance (keyword overlap) is used"},
			[]string{"strategy: Relevance"}, "embedding:"},
		{"a block without ranking by embedding", "budget:\n  ranking: recency\nembedding: {enabled: true, model: m}\n",
			[]string{"f.yaml:3: embedding: embeddings are used only with budget.ranking: embedding; left out"},
			[]string{"strategy: Recency"}, "endpoint:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, got := notesOf(t, tt.in+tail)
			sameLines(t, "notes", got, tt.notes)
			out := string(res.Stream())
			for _, line := range tt.out {
				if !strings.Contains(out, line) {
					t.Errorf("output lacks %q:\n%s", line, out)
				}
			}
			if tt.absent != "" && strings.Contains(out, tt.absent) {
				t.Errorf("output has %q:\n%s", tt.absent, out)
			}
		})
	}
}

// notesOf converts in, which must convert, and returns its notes as printed.
func notesOf(t *testing.T, in string) (*Result, []string) {
	t.Helper()
	res, err := Theaios("f.yaml", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range res.Notes {
		got = append(got, n.String())
	}
	return res, got
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// theaios names a query without an agent "default"; where a configuration
// relies on that, a note says that callers must send it.
func TestDefaultAgentNoted(t *testing.T) {
	_, got := notesOf(t, `sources: {s: {type: inline, content: x}}
routes:
  - {name: r, when: 'agent == "default" or "default" == agent', sources: [s]}
permissions:
  - {agent: default, allow_sources: [s]}
`)
	sameLines(t, "notes", got, []string{
		`f.yaml:3: routes[0].when: ` + defaultAgentNote,
		`f.yaml:5: permissions[0].agent: ` + defaultAgentNote,
	})
}
