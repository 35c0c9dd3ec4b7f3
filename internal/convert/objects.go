package convert

import (
	"fmt"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/contextrouter/contextrouter/internal/located"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// omap is an ordered mapping, so that output fields keep the order of
// docs/api.md.
type omap []kv

type kv struct {
	k string
	v any
}

func (m *omap) set(k string, v any) { *m = append(*m, kv{k, v}) }

// get is the value at a dotted path (list indexes as [i]), or nil.
func (m omap) get(path string) any {
	var v any = m
	for _, seg := range strings.Split(path, ".") {
		idx := -1
		if i := strings.IndexByte(seg, '['); i >= 0 && strings.HasSuffix(seg, "]") {
			fmt.Sscanf(seg[i+1:len(seg)-1], "%d", &idx)
			seg = seg[:i]
		}
		om, ok := v.(omap)
		if !ok {
			return nil
		}
		v = nil
		for _, e := range om {
			if e.k == seg {
				v = e.v
			}
		}
		if idx >= 0 {
			l, ok := v.([]any)
			if !ok || idx >= len(l) {
				return nil
			}
			v = l[idx]
		}
	}
	return v
}

// object is one manifest.
type object struct {
	Kind, Name string
	body       omap
}

const apiVersion = "contextrouter.dev/v1alpha1"

func newObject(kind, name string, meta omap, spec omap) *object {
	o := &object{Kind: kind, Name: name}
	o.body.set("apiVersion", apiVersion)
	o.body.set("kind", kind)
	md := omap{{"name", name}}
	md = append(md, meta...)
	o.body.set("metadata", md)
	o.body.set("spec", spec)
	return o
}

func (c *conv) router(top map[string]entry) *object {
	var meta omap
	name := "default"
	if e, ok := top["metadata"]; ok {
		md := c.fields(e.val, "metadata", "name", "description", "author")
		if v, ok := c.str(md["name"], "metadata.name"); ok {
			name = c.name(kindRouter, v, "default", md["name"].val, "metadata.name")
		}
		var ann omap
		for _, k := range []string{"description", "author"} {
			if v, ok := c.str(md[k], "metadata."+k); ok {
				ann.set("contextrouter.dev/"+k, v)
			}
		}
		if ann != nil {
			meta.set("annotations", ann)
		}
	}
	var spec omap
	// theaios lets an agent that no rule names read every source.
	spec.set("defaultAccess", "Allow")

	budget := omap{}
	ranking := omap{}
	b := c.fields(top["budget"].val, "budget", "max_tokens", "reserve_tokens", "estimator", "truncation", "ranking", "embedding")
	maxTokens := int64(8000)
	if v, ok := c.integer(b["max_tokens"], "budget.max_tokens"); ok {
		if v < 1 || v > 1<<31-1 {
			c.errorf(b["max_tokens"].val, "budget.max_tokens", "must be between 1 and %d", 1<<31-1)
		}
		maxTokens = v
	}
	budget.set("maxTokens", maxTokens)
	if v, ok := c.integer(b["reserve_tokens"], "budget.reserve_tokens"); ok {
		switch {
		case v < 0:
			c.errorf(b["reserve_tokens"].val, "budget.reserve_tokens", "must be 0 or more")
		case v >= maxTokens:
			c.note(b["reserve_tokens"].val, "budget.reserve_tokens", "", "%d leaves no budget (theaios then answers with no context); reserveTokens must be less than maxTokens here, so it is left out", v)
		case v > 0:
			budget.set("reserveTokens", v)
		}
	}
	trunc := "Drop"
	if v, ok := c.enum(b["truncation"], "budget.truncation", "drop", "truncate_end", "truncate_middle"); ok {
		trunc = map[string]string{"drop": "Drop", "truncate_end": "TruncateEnd", "truncate_middle": "TruncateMiddle"}[v]
	}
	budget.set("truncation", trunc)
	est := "CharsDiv4"
	if v, ok := c.enum(b["estimator"], "budget.estimator", "chars_div4", "words", "whitespace"); ok {
		// theaios's words and whitespace both count white-space-separated
		// fields, which is Whitespace here (Words counts ⌈words × 4/3⌉).
		est = map[string]string{"chars_div4": "CharsDiv4", "words": "Whitespace", "whitespace": "Whitespace"}[v]
	}
	budget.set("estimator", est)
	strategy := "Relevance"
	wantEmbedding := false
	if v, ok := c.enum(b["ranking"], "budget.ranking", "relevance", "recency", "manual", "embedding"); ok {
		if v == "embedding" {
			wantEmbedding = true
		} else {
			strategy = strings.ToUpper(v[:1]) + v[1:]
		}
		if v == "manual" {
			c.manual = true
			c.note(b["ranking"].val, "budget.ranking", "", "theaios keeps the order in which routes and their sources are listed; Manual orders by source priority, so every source gets a priority from its first place in the routes (the first highest), and chunks of one source are ordered by score")
		}
	}
	embedding := c.embedding(top, b, wantEmbedding)
	if embedding != nil {
		strategy = "Embedding"
	} else if wantEmbedding {
		c.note(b["ranking"].val, "budget.ranking", "", "embedding ranking needs an embedding block with enabled: true: Relevance (keyword overlap) is used")
	}
	spec.set("budget", budget)
	ranking.set("strategy", strategy)
	ranking.set("scorer", "Keyword") // the reference's overlap score
	ranking.set("dedupThreshold", "0")
	// theaios keeps every chunk of a matched source, scored 0 when it shares
	// no word; the nearest here is to give them when no chunk shares one.
	if strategy == "Recency" {
		ranking.set("onNoMatch", "Recent")
	} else {
		ranking.set("onNoMatch", "Priority")
	}
	if embedding != nil {
		ranking.set("embedding", embedding)
	}
	spec.set("ranking", ranking)
	if len(c.vars) > 0 {
		spec.set("variables", c.vars)
	}
	cache := omap{}
	cm := c.fields(top["cache"].val, "cache", "enabled", "directory", "ttl", "max_entries")
	ttl, entries := int64(300), int64(1000)
	if v, ok := c.integer(cm["ttl"], "cache.ttl"); ok {
		if v < 1 {
			c.errorf(cm["ttl"].val, "cache.ttl", "must be at least 1 (seconds)")
		}
		ttl = v
	}
	if v, ok := c.integer(cm["max_entries"], "cache.max_entries"); ok {
		if v < 0 || v > 1<<31-1 {
			c.errorf(cm["max_entries"].val, "cache.max_entries", "must be between 0 and %d", 1<<31-1)
		}
		entries = v
	}
	if on, _ := c.boolean(cm["enabled"], "cache.enabled"); !on {
		entries = 0
	} else {
		c.note(cm["enabled"].val, "cache.enabled", "", "the cache here keeps httpAPI results of serve only; Inline, Directory and GitRepo sources are indexed in memory")
	}
	if e, ok := cm["directory"]; ok {
		c.note(e.key, "cache.directory", "", "no manifest field: give the folder to serve --cache-dir")
	}
	cache.set("ttl", fmt.Sprintf("%ds", ttl))
	cache.set("maxEntries", entries)
	spec.set("cache", cache)
	return newObject(kindRouter, name, meta, spec)
}

// theaios's embedding defaults.
const (
	theaiosEmbeddingModel  = "text-embedding-3-small"
	theaiosEmbeddingURL    = "https://api.openai.com/v1/embeddings"
	theaiosEmbeddingKeyEnv = "OPENAI_API_KEY"
	// The Secret the converted router reads the key from.
	embeddingSecret, embeddingSecretKey = "embedding", "apiKey"
)

// embedding maps theaios's embedding settings (budget.embedding, or the
// top-level embedding when enabled) to spec.ranking.embedding, or returns nil
// when there are none, or when ranking is not by embedding (want false).
func (c *conv) embedding(top, b map[string]entry, want bool) omap {
	var em map[string]entry
	var at entry
	prefix := ""
	if e, ok := b["embedding"]; ok && deref(e.val).Tag != "!!null" {
		em, at, prefix = c.fields(e.val, "budget.embedding", "model", "url", "api_key_env", "cache_dir"), e, "budget.embedding"
	}
	if e, ok := top["embedding"]; ok {
		top := c.fields(e.val, "embedding", "enabled", "model", "url", "api_key_env", "cache_dir")
		if on, _ := c.boolean(top["enabled"], "embedding.enabled"); on {
			if em != nil {
				c.note(e.key, "embedding", "", "budget.embedding is used; this block is left out")
			} else {
				em, at, prefix = top, e, "embedding"
			}
		}
	}
	if em == nil {
		return nil
	}
	if !want {
		c.note(at.key, prefix, "", "embeddings are used only with budget.ranking: embedding; left out")
		return nil
	}
	model, url, keyEnv := theaiosEmbeddingModel, theaiosEmbeddingURL, ""
	if v, ok := c.str(em["model"], prefix+".model"); ok && v != "" {
		model = v
	}
	if v, ok := c.str(em["url"], prefix+".url"); ok && v != "" {
		url = v
	}
	if v, ok := c.str(em["api_key_env"], prefix+".api_key_env"); ok && v != "" {
		keyEnv = v
	} else if url == theaiosEmbeddingURL {
		keyEnv = theaiosEmbeddingKeyEnv // OpenAI needs a key; a local server may not
	}
	out := omap{{"endpoint", url}, {"model", model}}
	if keyEnv != "" {
		out.set("apiKeySecretRef", omap{{"name", embeddingSecret}, {"key", embeddingSecretKey}})
		c.note(at.key, prefix+".api_key_env", "", "the API key is read from Secret %s, key %s: standalone, set %s to the value of $%s",
			embeddingSecret, embeddingSecretKey, sources.SecretEnvVar(embeddingSecret, embeddingSecretKey), keyEnv)
	}
	if e, ok := em["cache_dir"]; ok {
		c.note(e.key, prefix+".cache_dir", "", "no manifest field: chunk vectors are cached under serve --cache-dir")
	}
	return out
}

var sourceKeys = map[string][]string{
	"inline":    {"content"},
	"directory": {"path", "patterns", "exclude_patterns", "recursive", "encoding", "max_file_size"},
	"git_repo":  {"url", "ref", "path", "patterns", "exclude_patterns", "recursive", "encoding", "max_file_size"},
	"http_api":  {"url", "method", "headers", "body_template", "response_path", "result_text_field", "result_title_field"},
}

func (c *conv) sources(e entry, res *Result) {
	n := c.collection(e, "sources", yamlv3.MappingNode, "a mapping of source names to sources")
	if n == nil {
		return
	}
	all := []string{"type", "tags", "priority"}
	for _, ks := range sourceKeys {
		all = append(all, ks...)
	}
	known := uniq(all)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := "sources." + k.Value
		if _, dup := c.srcMap[k.Value]; dup {
			c.errorf(k, key, "duplicate source name")
			continue
		}
		c.srcMap[k.Value] = ""
		f := c.fields(v, key, known...)
		if f == nil {
			continue
		}
		typ, ok := c.enum(f["type"], key+".type", "inline", "directory", "git_repo", "http_api")
		if !ok {
			if _, set := f["type"]; !set {
				c.errorf(k, key+".type", "required: inline, directory, git_repo or http_api")
			}
			continue
		}
		for name, fe := range f {
			if !slices.Contains(sourceKeys[typ], name) && !slices.Contains([]string{"type", "tags", "priority"}, name) {
				c.errorf(fe.key, key+"."+name, "not a key of a %s source (its keys: %s)", typ, strings.Join(sourceKeys[typ], ", "))
			}
		}
		obj := c.source(k, key, typ, f)
		if obj != nil {
			c.srcMap[k.Value] = obj.Name
			res.Sources = append(res.Sources, obj)
		}
	}
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (c *conv) source(k *yamlv3.Node, key, typ string, f map[string]entry) *object {
	var spec omap
	spec.set("type", map[string]string{"inline": "Inline", "directory": "Directory", "git_repo": "GitRepo", "http_api": "HTTPAPI"}[typ])
	if tags, ok := c.strings(f["tags"], key+".tags"); ok && len(tags) > 0 {
		spec.set("tags", uniq(tags))
	}
	if v, ok := c.integer(f["priority"], key+".priority"); ok && v != 0 {
		spec.set("priority", v)
		if c.manual {
			c.note(f["priority"].key, key+".priority", kindSource, "theaios ignores priority; under manual ranking it is replaced by the source's place in the routes")
		} else {
			c.note(f["priority"].key, key+".priority", kindSource, "theaios ignores priority; here it orders Manual ranking and breaks ties under every strategy")
		}
	}
	switch typ {
	case "inline":
		content, _ := c.str(f["content"], key+".content")
		if strings.TrimSpace(content) == "" {
			c.note(k, key, kindSource, "an inline source without content gives nothing; it is left out, and so are references to it")
			return nil
		}
		spec.set("inline", omap{{"content", content}})
	case "directory", "git_repo":
		files, ok := c.files(key, typ, f)
		if !ok {
			return nil
		}
		spec.set(map[string]string{"directory": "directory", "git_repo": "gitRepo"}[typ], files)
	case "http_api":
		h, ok := c.httpAPI(k, key, f)
		if !ok {
			return nil
		}
		spec.set("httpAPI", h)
	}
	name := c.name(kindSource, k.Value, "source", k, key)
	return newObject(kindSource, name, nil, spec)
}

func (c *conv) files(key, typ string, f map[string]entry) (omap, bool) {
	var out omap
	prefix := ""
	if typ == "directory" {
		p, ok := c.str(f["path"], key+".path")
		if !ok || p == "" {
			c.errorf(f["path"].key, key+".path", "required for a directory source")
			return nil, false
		}
		out.set("path", c.directoryPath(p))
	} else {
		u, ok := c.str(f["url"], key+".url")
		if !ok || u == "" {
			c.errorf(f["url"].key, key+".url", "required for a git_repo source")
			return nil, false
		}
		out.set("url", u)
		if ref, ok := c.str(f["ref"], key+".ref"); ok && ref != "" && ref != "HEAD" {
			out.set("ref", ref)
		}
		if p, ok := c.str(f["path"], key+".path"); ok && strings.Trim(p, "/.") != "" {
			prefix = strings.Trim(p, "/") + "/"
			c.note(f["path"].key, key+".path", kindSource, "there is no sub-folder field: include and exclude are prefixed with %q, and chunk paths keep that prefix (deny_paths written for paths inside the folder need it too)", prefix)
		}
	}
	recursive := true
	if v, ok := c.boolean(f["recursive"], key+".recursive"); ok {
		recursive = v
	}
	globs := func(field string, def []string) []string {
		pats, ok := c.strings(f[field], key+"."+field)
		if !ok {
			pats = def
		}
		var out []string
		for _, p := range pats {
			p = strings.TrimPrefix(p, "./")
			if recursive && !strings.Contains(p, "/") {
				p = "**/" + p
			}
			out = append(out, prefix+p)
		}
		return uniq(out)
	}
	if inc := globs("patterns", []string{"**/*"}); len(inc) > 0 {
		out.set("include", inc)
	}
	if exc := globs("exclude_patterns", nil); len(exc) > 0 {
		out.set("exclude", exc)
	}
	if enc, ok := c.str(f["encoding"], key+".encoding"); ok && !strings.EqualFold(strings.ReplaceAll(enc, "-", ""), "utf8") {
		c.note(f["encoding"].val, key+".encoding", kindSource, "%q: files are read as UTF-8 here; files in another encoding are skipped as not UTF-8", enc)
	}
	size := int64(1000000)
	if v, ok := c.integer(f["max_file_size"], key+".max_file_size"); ok {
		if v < 1 {
			c.errorf(f["max_file_size"].val, key+".max_file_size", "must be at least 1 (bytes)")
		}
		size = v
	}
	out.set("maxFileSize", fmt.Sprint(size))
	return out, true
}

func (c *conv) httpAPI(k *yamlv3.Node, key string, f map[string]entry) (omap, bool) {
	var out omap
	u, ok := c.str(f["url"], key+".url")
	if !ok || u == "" {
		c.errorf(k, key+".url", "required for an http_api source")
		return nil, false
	}
	out.set("url", u)
	method := "GET"
	if v, ok := c.enum(f["method"], key+".method", "GET", "POST"); ok {
		method = v
	}
	if method != "GET" {
		out.set("method", method)
	}
	if e, ok := f["headers"]; ok {
		hn := deref(e.val)
		if hn.Tag != "!!null" && hn.Kind != yamlv3.MappingNode {
			c.errorf(hn, key+".headers", "must be a mapping of header names to values, not %s", describe(hn))
		}
		var hs []any
		hm := c.fields(hn, key+".headers")
		for _, hk := range keys(hn) {
			hv := hm[hk.Value]
			v, _ := c.str(hv, key+".headers."+hk.Value)
			hs = append(hs, omap{{"name", hk.Value}, {"value", v}})
		}
		if len(hs) > 0 {
			out.set("headers", hs)
		}
	}
	if body, ok := c.str(f["body_template"], key+".body_template"); ok && body != "" {
		if method != "POST" {
			c.note(f["body_template"].key, key+".body_template", kindSource, "a body is sent with POST only here; the source is left out (set method: POST)")
			return nil, false
		}
		// theaios pastes the question into the template as is; here {{query}} is a JSON string literal.
		b := strings.ReplaceAll(body, `"{{query}}"`, "{{query}}")
		if strings.Contains(strings.ReplaceAll(body, `"{{query}}"`, ""), "{{query}}") {
			c.note(f["body_template"].val, key+".body_template", kindSource, "{{query}} inside a longer JSON string (or outside quotes) cannot be translated: {{query}} becomes a whole JSON string literal here; the source is left out")
			return nil, false
		}
		if b != body {
			c.note(f["body_template"].val, key+".body_template", kindSource, `"{{query}}" becomes {{query}}: the question is inserted as an escaped JSON string literal`)
		}
		out.set("body", b)
	}
	if v, ok := c.str(f["response_path"], key+".response_path"); ok && v != "" {
		out.set("responsePath", v)
	}
	text := "text"
	if v, ok := c.str(f["result_text_field"], key+".result_text_field"); ok && v != "" {
		text = v
	}
	out.set("textField", text)
	title := "title"
	if v, ok := c.str(f["result_title_field"], key+".result_title_field"); ok {
		title = v
	}
	if title != "" {
		out.set("titleField", title)
	}
	return out, true
}

// collection is the value of a top-level list or mapping; nil when absent,
// null, or of the wrong kind (an error).
func (c *conv) collection(e entry, key string, kind yamlv3.Kind, what string) *yamlv3.Node {
	n := deref(e.val)
	if n == nil || n.Tag == "!!null" {
		return nil
	}
	if n.Kind != kind {
		c.errorf(n, key, "must be %s, not %s", what, describe(n))
		return nil
	}
	return n
}

func (c *conv) routes(e entry, res *Result) {
	n := c.collection(e, "routes", yamlv3.SequenceNode, "a list of routes")
	if n == nil {
		return
	}
	for i, it := range n.Content {
		key := fmt.Sprintf("routes[%d]", i)
		f := c.fields(it, key, "name", "description", "enabled", "tags", "when", "sources")
		if f == nil {
			continue
		}
		rawName, _ := c.str(f["name"], key+".name")
		var spec omap
		if v, ok := c.str(f["description"], key+".description"); ok && v != "" {
			spec.set("description", v)
		}
		if tags, ok := c.strings(f["tags"], key+".tags"); ok && len(tags) > 0 {
			c.note(f["tags"].key, key+".tags", kindRoute, "routes have no tags here; left out (%s)", strings.Join(tags, ", "))
		}
		when, ok := c.str(f["when"], key+".when")
		keep := true
		if ok && strings.TrimSpace(when) != "" {
			cel, ok := c.condition(deref(f["when"].val), key+".when", when)
			if ok {
				spec.set("when", cel)
			} else {
				keep = false
			}
		}
		srcs, _ := c.strings(f["sources"], key+".sources")
		var refs []any
		for j, s := range srcs {
			ours, known := c.srcMap[s]
			switch {
			case !known:
				msg := fmt.Sprintf("source %q is not defined", s)
				var names []string
				for k := range c.srcMap {
					names = append(names, k)
				}
				slices.Sort(names)
				if sug := located.Closest(s, names); sug != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", sug)
				}
				c.errorf(deref(f["sources"].val).Content[j], fmt.Sprintf("%s.sources[%d]", key, j), "%s", msg)
			case ours == "":
				c.note(deref(f["sources"].val).Content[j], fmt.Sprintf("%s.sources[%d]", key, j), kindRoute, "source %q was left out (see its note)", s)
			case !slices.ContainsFunc(refs, func(r any) bool { return r.(omap)[0].v == ours }):
				refs = append(refs, omap{{"name", ours}})
			}
		}
		if enabled, ok := c.boolean(f["enabled"], key+".enabled"); ok && !enabled {
			c.note(f["enabled"].key, key+".enabled", kindRoute, "a disabled route never matches; it is left out")
			continue
		}
		if !keep {
			continue
		}
		if len(refs) == 0 {
			c.note(it, key+".sources", kindRoute, "the route names no source that is converted, so it is left out (a route needs at least one source here)")
			continue
		}
		spec.set("sources", refs)
		fallback := fmt.Sprintf("route-%d", i+1)
		if rawName == "" {
			rawName = fallback
			c.note(it, key+".name", kindRoute, "the route has no name; it is named %q", fallback)
		}
		nameNode := f["name"].val
		if nameNode == nil {
			nameNode = it
		}
		name := c.name(kindRoute, rawName, fallback, nameNode, key+".name")
		res.Routes = append(res.Routes, newObject(kindRoute, name, nil, spec))
	}
}

func (c *conv) permissions(e entry, res *Result) {
	n := c.collection(e, "permissions", yamlv3.SequenceNode, "a list of permission rules")
	if n == nil {
		return
	}
	for i, it := range n.Content {
		key := fmt.Sprintf("permissions[%d]", i)
		f := c.fields(it, key, "agent", "default", "allow_sources", "deny_sources", "deny_paths")
		if f == nil {
			continue
		}
		agent, ok := c.str(f["agent"], key+".agent")
		if !ok || agent == "" {
			c.errorf(it, key+".agent", "required: the agent name, or \"*\" for every agent")
			continue
		}
		if agent == "default" {
			c.note(f["agent"].val, key+".agent", kindPermission, "%s", defaultAgentNote)
		}
		var spec omap
		spec.set("agents", []string{agent})
		ref := func(field string) []string {
			names, _ := c.strings(f[field], key+"."+field)
			var out []string
			for j, s := range names {
				ours, known := c.srcMap[s]
				switch {
				case !known:
					// As in our API, an unknown name here is harmless: keep it, with a note.
					c.note(deref(f[field].val).Content[j], fmt.Sprintf("%s.%s[%d]", key, field, j), kindPermission, "source %q is not defined", s)
					out = append(out, s)
				case ours == "":
					c.note(deref(f[field].val).Content[j], fmt.Sprintf("%s.%s[%d]", key, field, j), kindPermission, "source %q was left out (see its note)", s)
				default:
					out = append(out, ours)
				}
			}
			return uniq(out)
		}
		if l := ref("allow_sources"); len(l) > 0 {
			spec.set("allowSources", l)
		}
		if l := ref("deny_sources"); len(l) > 0 {
			spec.set("denySources", l)
		}
		if pats, ok := c.strings(f["deny_paths"], key+".deny_paths"); ok && len(pats) > 0 {
			var globs []string
			for j, p := range pats {
				pn := deref(f["deny_paths"].val).Content[j]
				pk := fmt.Sprintf("%s.deny_paths[%d]", key, j)
				g, exact := denyGlobs(p)
				if !exact {
					c.note(pn, pk, kindPermission, "%q: in theaios's fnmatch * also matches /, here it does not: this glob may deny fewer paths; check it (or add **/ forms)", p)
				}
				globs = append(globs, g...)
			}
			spec.set("denyPaths", uniq(globs))
		}
		def := "Allow"
		if v, ok := c.enum(f["default"], key+".default", "allow", "deny"); ok && v == "deny" {
			def = "Deny"
		}
		spec.set("default", def)
		fallback := dnsName(agent)
		if agent == "*" {
			fallback = "all-agents"
		}
		if fallback == "" {
			fallback = "agent"
		}
		name := c.name(kindPermission, fallback, "agent", f["agent"].val, key+".agent")
		res.Permissions = append(res.Permissions, newObject(kindPermission, name, nil, spec))
	}
}

// denyGlobs turns an fnmatch pattern (where * also matches /) into
// doublestar globs that deny the same paths; exact is false when the
// translation may deny fewer paths. A ** segment also matches no folder
// here, so **/x/** denies a top-level x/ too, which theaios misses.
func denyGlobs(p string) ([]string, bool) {
	p = strings.TrimPrefix(p, "./")
	single := strings.ReplaceAll(p, "**", "")
	if !strings.Contains(single, "*") {
		return []string{p}, true // no lone *: the same set of paths (or more, with **)
	}
	if !strings.Contains(p, "/") && !strings.Contains(p, "**") {
		starts, ends := strings.HasPrefix(p, "*"), strings.HasSuffix(p, "*")
		inner := strings.Trim(p, "*")
		if !strings.Contains(inner, "*") {
			switch {
			case starts && ends: // the text anywhere: in one path segment
				return []string{"**/" + p, "**/" + p + "/**"}, true
			case starts: // a suffix of the path: in the last segment
				return []string{"**/" + p}, true
			case ends: // a prefix of the path: in the first segment
				return []string{p, p + "/**"}, true
			}
		}
	}
	// A lone * next to other text in a path: the most common reading.
	if strings.HasSuffix(p, "/*") && !strings.Contains(strings.TrimSuffix(single, "/*"), "*") {
		return []string{p[:len(p)-1] + "**"}, true
	}
	return []string{p}, false
}

// manualPriorities gives the sources priorities from their first place in the
// routes, so that Manual ranking keeps theaios's order of routes and sources.
// theaios ignores its own priority, so it is replaced.
func manualPriorities(res *Result) {
	var order []string
	for _, r := range res.Routes {
		for _, ref := range r.body.get("spec.sources").([]any) {
			if name := ref.(omap)[0].v.(string); !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
	}
	for _, src := range res.Sources {
		prio := 0
		if i := slices.Index(order, src.Name); i >= 0 {
			prio = len(order) - i
		}
		spec := src.body.get("spec").(omap)
		var out omap
		for _, e := range spec {
			if e.k == "priority" {
				continue
			}
			out = append(out, e)
			if e.k == "tags" || e.k == "type" && !slices.ContainsFunc(spec, func(e kv) bool { return e.k == "tags" }) {
				if prio != 0 {
					out.set("priority", prio)
				}
			}
		}
		for i := range src.body {
			if src.body[i].k == "spec" {
				src.body[i].v = out
			}
		}
	}
}
