package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

const testNS = "team-a"

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: testNS} }

func testRoute(when string, srcs ...string) *v1alpha1.ContextRoute {
	r := &v1alpha1.ContextRoute{ObjectMeta: meta("r"), Spec: v1alpha1.ContextRouteSpec{When: when}}
	for _, s := range srcs {
		r.Spec.Sources = append(r.Spec.Sources, v1alpha1.LocalObjectReference{Name: s})
	}
	return r
}

func inlineSource(name string) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{ObjectMeta: meta(name), Spec: v1alpha1.ContextSourceSpec{
		Type:   v1alpha1.SourceInline,
		Inline: &v1alpha1.InlineSource{Content: "## Leave\n\n25 days a year."},
	}}
}

func httpSource(method v1alpha1.HTTPMethod, body string) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{ObjectMeta: meta("search"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceHTTPAPI,
		HTTPAPI: &v1alpha1.HTTPAPISource{
			URL: "https://search.example.com/api", Method: method, Body: body, TextField: "text",
		},
	}}
}

// causes returns field -> message of an Invalid error, failing the test for
// any other error.
func causes(t *testing.T, err error) map[string][]string {
	t.Helper()
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid StatusError, got %T %v", err, err)
	}
	out := map[string][]string{}
	for _, c := range se.ErrStatus.Details.Causes {
		out[c.Field] = append(out[c.Field], c.Message)
	}
	return out
}

// want is one expected cause: the field and fragments its message contains.
type want struct {
	field    string
	contains []string
}

func checkCauses(t *testing.T, err error, wants []want) {
	t.Helper()
	if len(wants) == 0 {
		if err != nil {
			t.Fatalf("want accepted, got %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("want refused with causes on %v, got accepted", wants)
	}
	got := causes(t, err)
	for _, w := range wants {
		msgs := got[w.field]
		if len(msgs) != 1 {
			t.Errorf("field %s: want exactly one cause, got %q (all: %v)", w.field, msgs, got)
			continue
		}
		for _, frag := range w.contains {
			if !strings.Contains(msgs[0], frag) {
				t.Errorf("field %s: message %q does not contain %q", w.field, msgs[0], frag)
			}
		}
	}
	if len(got) != len(wants) {
		t.Errorf("want causes on %d fields, got %d: %v", len(wants), len(got), got)
	}
}

func TestRouteValidator(t *testing.T) {
	long := strings.Repeat("a", 4097)
	tests := []struct {
		name  string
		route *v1alpha1.ContextRoute
		want  []want
	}{
		{"empty condition matches every query", testRoute("", "faq"), nil},
		{"valid condition", testRoute(`containsAnyWord(text, ["vacation", "leave"]) && agent == "hr-assistant"`, "faq", "handbook"), nil},
		{"undeclared variable", testRoute("nosuch == 1", "faq"),
			[]want{{"spec.when", []string{`Invalid value: "nosuch == 1"`, "undeclared reference to 'nosuch'"}}}},
		{"not a bool", testRoute("text", "faq"),
			[]want{{"spec.when", []string{"must evaluate to bool, not string"}}}},
		{"syntax error", testRoute(`text.contains("x"`, "faq"),
			[]want{{"spec.when", []string{"Syntax error"}}}},
		{"wrong argument type", testRoute(`text.contains(1)`, "faq"),
			[]want{{"spec.when", []string{"found no matching overload for 'contains'"}}}},
		{"too long: reported once, not compiled", testRoute(long, "faq"),
			[]want{{"spec.when", []string{"Too long", "4096"}}}},
		{"no sources", testRoute("true"),
			[]want{{"spec.sources", []string{"Required value"}}}},
		{"duplicate source", testRoute("true", "faq", "faq"),
			[]want{{"spec.sources[1].name", []string{"Duplicate value"}}}},
		{"bad CEL and a duplicate: both reported", testRoute("1 +", "faq", "faq"),
			[]want{{"spec.when", []string{"Syntax error"}}, {"spec.sources[1].name", []string{"Duplicate value"}}}},
	}
	v := NewRouteValidator(nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings, err := v.ValidateCreate(context.Background(), tt.route)
			checkCauses(t, err, tt.want)
			if len(warnings) != 0 {
				t.Errorf("no reader, so no warnings; got %q", warnings)
			}
		})
	}
}

// The error is what kubectl prints as `The ContextRoute "r" is invalid: ...`:
// an Invalid status naming the kind, group and object.
func TestInvalidErrorNamesTheObject(t *testing.T) {
	_, err := NewRouteValidator(nil, nil).ValidateCreate(context.Background(), testRoute("nosuch == 1", "faq"))
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("want a StatusError, got %T %v", err, err)
	}
	st := se.ErrStatus
	if st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid {
		t.Errorf("code %d reason %s, want 422 Invalid", st.Code, st.Reason)
	}
	if d := st.Details; d == nil || d.Kind != "ContextRoute" || d.Group != "contextrouter.dev" || d.Name != "r" {
		t.Errorf("details %+v, want kind ContextRoute, group contextrouter.dev, name r", d)
	}
	wantPrefix := `ContextRoute.contextrouter.dev "r" is invalid: spec.when: Invalid value: "nosuch == 1": ERROR: <input>:1:1: undeclared reference to 'nosuch'`
	if !strings.HasPrefix(st.Message, wantPrefix) {
		t.Errorf("message\n%s\nwant prefix\n%s", st.Message, wantPrefix)
	}
}

func TestRouterValidator(t *testing.T) {
	router := func(mutate func(*v1alpha1.ContextRouterSpec)) *v1alpha1.ContextRouter {
		r := &v1alpha1.ContextRouter{ObjectMeta: meta("main")}
		mutate(&r.Spec)
		return r
	}
	embedding := &v1alpha1.EmbeddingSpec{Endpoint: "https://embed.example.com/v1/embeddings", Model: "small"}
	tests := []struct {
		name   string
		router *v1alpha1.ContextRouter
		want   []want
	}{
		{"defaults", router(func(*v1alpha1.ContextRouterSpec) {}), nil},
		{"explicit budget and variables", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Budget = v1alpha1.BudgetSpec{MaxTokens: 4000, ReserveTokens: 1000, Truncation: v1alpha1.TruncationTruncateEnd}
			s.Variables = map[string]apiextensionsv1.JSON{"team": {Raw: []byte(`"hr"`)}}
		}), nil},
		{"reserveTokens equal to maxTokens: one message", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Budget = v1alpha1.BudgetSpec{MaxTokens: 100, ReserveTokens: 100}
		}), []want{{"spec.budget.reserveTokens", []string{"Invalid value: 100", "must be less than maxTokens (100)"}}}},
		{"reserveTokens above maxTokens", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Budget = v1alpha1.BudgetSpec{MaxTokens: 100, ReserveTokens: 500}
		}), []want{{"spec.budget.reserveTokens", []string{"must be less than maxTokens (100)"}}}},
		{"Hybrid without embedding: one cause", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Ranking = v1alpha1.RankingSpec{Strategy: v1alpha1.RankingHybrid}
		}), []want{{"spec.ranking.embedding", []string{"Required value", "required for the Hybrid strategy"}}}},
		{"rerank under Manual", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Ranking = v1alpha1.RankingSpec{Strategy: v1alpha1.RankingManual, Embedding: embedding,
				Rerank: &v1alpha1.RerankSpec{Endpoint: "http://rr/rerank"}}
		}), []want{{"spec.ranking.rerank", []string{"rerank applies to the Relevance, Embedding and Hybrid strategies"}}}},
		{"dedupThreshold out of range: one message", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Ranking.DedupThreshold = "1.5"
		}), []want{{"spec.ranking.dedupThreshold", []string{"from 0 to 1"}}}},
		{"variable that is not JSON", router(func(s *v1alpha1.ContextRouterSpec) {
			s.Variables = map[string]apiextensionsv1.JSON{"team": {Raw: []byte(`{`)}}
		}), []want{{"spec.variables.team", []string{"invalid JSON"}}}},
	}
	v := NewRouterValidator(nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), tt.router)
			checkCauses(t, err, tt.want)
		})
	}
}

func TestSourceValidator(t *testing.T) {
	unionViolation := inlineSource("faq")
	unionViolation.Spec.Inline = nil
	unionViolation.Spec.Directory = &v1alpha1.DirectorySource{Path: "docs"}

	smallChunks := inlineSource("faq")
	smallChunks.Spec.Chunking.MaxChunkTokens = 8

	badRef := &v1alpha1.ContextSource{ObjectMeta: meta("handbook"), Spec: v1alpha1.ContextSourceSpec{
		Type:    v1alpha1.SourceGitRepo,
		GitRepo: &v1alpha1.GitRepoSource{URL: "https://git.example.com/handbook.git", Ref: "main..dev"},
	}}
	configMapDir := &v1alpha1.ContextSource{ObjectMeta: meta("policies"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceDirectory,
		Directory: &v1alpha1.DirectorySource{Volume: &v1alpha1.DirectoryVolume{
			ConfigMap: &v1alpha1.LocalObjectReference{Name: "policies"},
		}},
	}}

	tests := []struct {
		name   string
		source *v1alpha1.ContextSource
		want   []want
	}{
		{"inline", inlineSource("faq"), nil},
		{"directory from a ConfigMap: nothing is read", configMapDir, nil},
		{"POST with a JSON body", httpSource(v1alpha1.HTTPMethodPost, `{"q": {{query}}, "k": 5}`), nil},
		{"union: type Inline with a directory block", unionViolation, []want{
			{"spec.inline", []string{"Required value", "must be set when type is Inline"}},
			{"spec.directory", []string{"Forbidden", "must not be set unless type is Directory (type is Inline)"}},
		}},
		{"body that is not JSON (factory only)", httpSource(v1alpha1.HTTPMethodPost, `{"q": {{query}}`),
			[]want{{"spec.httpAPI.body", []string{"not valid JSON once {{query}} is replaced by a JSON string"}}}},
		{"quoted placeholder (factory only)", httpSource(v1alpha1.HTTPMethodPost, `{"q": "{{query}}"}`),
			[]want{{"spec.httpAPI.body", []string{"do not put it in quotes"}}}},
		{"invalid git ref (factory only)", badRef,
			[]want{{"spec.gitRepo.ref", []string{`"main..dev" is not a valid branch, tag or commit name`}}}},
		{"body with GET: one message", httpSource(v1alpha1.HTTPMethodGet, `{}`),
			[]want{{"spec.httpAPI.body", []string{"must be empty when method is GET"}}}},
		{"maxChunkTokens too small: one message", smallChunks,
			[]want{{"spec.chunking.maxChunkTokens", []string{"must be greater than or equal to 16"}}}},
	}
	v := NewSourceValidator()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), tt.source)
			checkCauses(t, err, tt.want)
		})
	}
}

// A denial quotes the offending URL without its user part, whether
// validation or the source factory refuses it.
func TestSourceValidatorHidesURLCredentials(t *testing.T) {
	git := func(url string) *v1alpha1.ContextSource {
		return &v1alpha1.ContextSource{ObjectMeta: meta("wiki"), Spec: v1alpha1.ContextSourceSpec{
			Type: v1alpha1.SourceGitRepo, GitRepo: &v1alpha1.GitRepoSource{URL: url}}}
	}
	hosts := httpSource(v1alpha1.HTTPMethodGet, "")
	hosts.Spec.HTTPAPI.FollowRedirects = v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{"ghp_Tok3nValue@kb-eu.example.com"}}
	tests := []struct {
		name   string
		source *v1alpha1.ContextSource
		want   []want
	}{
		{"git scheme", git("gopher://ghp_Tok3nValue@git.example.com/r.git"),
			[]want{{"spec.gitRepo.url", []string{`"gopher://***@git.example.com/r.git"`, `unsupported scheme "gopher"`}}}},
		{"git file host (factory only)", git("file://x-access-token:Tok3nValue@server/r.git"),
			[]want{{"spec.gitRepo.url", []string{`"file://***@server/r.git": a file URL cannot name a host`}}}},
		{"allowedHosts entry with a user part", hosts,
			[]want{{"spec.httpAPI.followRedirects.allowedHosts[0]", []string{`"***@kb-eu.example.com"`, "no scheme, user or path"}}}},
	}
	v := NewSourceValidator()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.source.Default()
			_, err := v.ValidateCreate(context.Background(), tt.source)
			checkCauses(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), "Tok3nValue") {
				t.Errorf("the denial shows the credentials: %v", err)
			}
		})
	}
}

func TestPermissionValidator(t *testing.T) {
	perm := func(mutate func(*v1alpha1.AgentPermissionSpec)) *v1alpha1.AgentPermission {
		p := &v1alpha1.AgentPermission{ObjectMeta: meta("hr"), Spec: v1alpha1.AgentPermissionSpec{
			Agents: []string{"hr-assistant"}, AllowSources: []string{"handbook"}, DenyPaths: []string{"**/salaries/**"},
		}}
		mutate(&p.Spec)
		return p
	}
	tests := []struct {
		name string
		perm *v1alpha1.AgentPermission
		want []want
	}{
		{"valid", perm(func(*v1alpha1.AgentPermissionSpec) {}), nil},
		{"every agent", perm(func(s *v1alpha1.AgentPermissionSpec) { s.Agents = []string{"*"} }), nil},
		{"no agents", perm(func(s *v1alpha1.AgentPermissionSpec) { s.Agents = nil }),
			[]want{{"spec.agents", []string{"Required value"}}}},
		{"invalid glob", perm(func(s *v1alpha1.AgentPermissionSpec) { s.DenyPaths = []string{"secret/[a"} }),
			[]want{{"spec.denyPaths[0]", []string{"not a valid doublestar glob"}}}},
		{"absolute glob", perm(func(s *v1alpha1.AgentPermissionSpec) { s.DenyPaths = []string{"/etc/**"} }),
			[]want{{"spec.denyPaths[0]", []string{"must be relative to the source root"}}}},
		{"unknown sensitivity", perm(func(s *v1alpha1.AgentPermissionSpec) { s.MaxSensitivity = "Secret" }),
			[]want{{"spec.maxSensitivity", []string{"Unsupported value", `"Secret"`}}}},
	}
	v := NewPermissionValidator(nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), tt.perm)
			checkCauses(t, err, tt.want)
		})
	}
}

func TestRouteWarnings(t *testing.T) {
	known := refs{namespace: testNS, routers: map[string]bool{"main": true}, sources: map[string]bool{"faq": true}}
	tests := []struct {
		name  string
		route *v1alpha1.ContextRoute
		known refs
		want  []string
	}{
		{"everything exists", withParents(testRoute("", "faq"), "main"), known, nil},
		{"missing source and router", withParents(testRoute("", "faq", "handbook"), "main", "ghost"), known, []string{
			`spec.parentRefs[1].name: ContextRouter "ghost" not found in namespace "team-a"; the route attaches to it once it exists`,
			`spec.sources[1].name: ContextSource "handbook" not found in namespace "team-a"; the route is left out of its routers until it exists`,
		}},
		{"lookups failed: no warnings", testRoute("", "handbook"), refs{namespace: testNS}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := routeWarnings(tt.route, tt.known); !slices.Equal(got, tt.want) {
				t.Errorf("warnings\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func withParents(r *v1alpha1.ContextRoute, parents ...string) *v1alpha1.ContextRoute {
	for _, p := range parents {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, v1alpha1.ParentReference{Name: p})
	}
	return r
}

func TestPermissionWarnings(t *testing.T) {
	p := &v1alpha1.AgentPermission{ObjectMeta: meta("hr"), Spec: v1alpha1.AgentPermissionSpec{
		ParentRefs:   []v1alpha1.ParentReference{{Name: "main"}, {Name: "other"}},
		Agents:       []string{"*"},
		AllowSources: []string{"faq", "payroll"},
		DenySources:  []string{"salaries"},
	}}
	known := refs{namespace: testNS, routers: map[string]bool{"main": true}, sources: map[string]bool{"faq": true}}
	want := []string{
		`spec.parentRefs[1].name: ContextRouter "other" not found in namespace "team-a"; the permission applies to it once it exists`,
		`spec.allowSources[1]: ContextSource "payroll" not found in namespace "team-a"; the entry takes effect once it exists`,
		`spec.denySources[0]: ContextSource "salaries" not found in namespace "team-a"; the entry takes effect once it exists`,
	}
	if got := permissionWarnings(p, known); !slices.Equal(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
	if got := permissionWarnings(p, refs{namespace: testNS, routers: map[string]bool{"main": true, "other": true}}); len(got) != 0 {
		t.Errorf("sources unknown and routers present: want no warnings, got %q", got)
	}
}

// A missing reference never blocks an apply: the warning comes with an
// accepted object, and with a refused one it comes alongside the error.
func TestMissingSourceIsAWarningNotAnError(t *testing.T) {
	known := refs{namespace: testNS, routers: map[string]bool{}, sources: map[string]bool{"faq": true}}
	v := &validator[*v1alpha1.ContextRoute]{
		kind:  v1alpha1.KindContextRoute,
		check: engine.CheckRoute,
		spec:  func(r *v1alpha1.ContextRoute) any { return r.Spec },
		warn: func(_ context.Context, r *v1alpha1.ContextRoute) admission.Warnings {
			return routeWarnings(r, known)
		},
	}
	warnings, err := v.ValidateCreate(context.Background(), testRoute(`"leave" in tags`, "faq", "handbook"))
	if err != nil {
		t.Fatalf("a missing source must not refuse the route: %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `ContextSource "handbook" not found`) {
		t.Errorf("warnings %q, want one about handbook", warnings)
	}

	warnings, err = v.ValidateCreate(context.Background(), testRoute(`nosuch`, "handbook"))
	checkCauses(t, err, []want{{"spec.when", []string{"undeclared reference to 'nosuch'"}}})
	if len(warnings) != 1 {
		t.Errorf("a refused route still carries its warnings; got %q", warnings)
	}
}

func TestUpdateAndDelete(t *testing.T) {
	v := NewRouteValidator(nil, nil)
	ctx := context.Background()
	invalid := testRoute("nosuch", "faq")

	relabelled := invalid.DeepCopy()
	relabelled.Labels = map[string]string{"team": "hr"}
	if w, err := v.ValidateUpdate(ctx, invalid, relabelled); err != nil || w != nil {
		t.Errorf("metadata-only update of an object a newer version refuses: want allowed, got %q %v", w, err)
	}

	worse := testRoute("alsonosuch", "faq")
	_, err := v.ValidateUpdate(ctx, testRoute("true", "faq"), worse)
	checkCauses(t, err, []want{{"spec.when", []string{"undeclared reference to 'alsonosuch'"}}})

	fixed := testRoute("true", "faq")
	if _, err := v.ValidateUpdate(ctx, invalid, fixed); err != nil {
		t.Errorf("fixing the condition: want allowed, got %v", err)
	}

	deleting := worse.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	if _, err := v.ValidateUpdate(ctx, testRoute("true", "faq"), deleting); err != nil {
		t.Errorf("update of an object being deleted (finalizer removal): want allowed, got %v", err)
	}

	if w, err := v.ValidateDelete(ctx, invalid); err != nil || w != nil {
		t.Errorf("delete: want allowed, got %q %v", w, err)
	}

	// Defaulting counts as no change: a router stored without defaults and
	// updated with them spelled out has the same spec.
	rv := NewRouterValidator(nil, nil)
	bare := &v1alpha1.ContextRouter{ObjectMeta: meta("main"), Spec: v1alpha1.ContextRouterSpec{
		Ranking: v1alpha1.RankingSpec{Strategy: v1alpha1.RankingEmbedding},
	}}
	spelled := bare.DeepCopy()
	spelled.Default()
	if _, err := rv.ValidateUpdate(ctx, bare, spelled); err != nil {
		t.Errorf("update that only spells out defaults: want allowed, got %v", err)
	}
}

// TestWebhookAndValidateAgree: `kubectl apply` and `contextrouter validate`
// refuse an object for the same reasons, in the same words: the webhook's
// causes are exactly the field and message of each problem validate prints
// about the object itself.
func TestWebhookAndValidateAgree(t *testing.T) {
	docs := []string{
		`{apiVersion: contextrouter.dev/v1alpha1, kind: ContextRouter, metadata: {name: acme},
		  spec: {ranking: {scorer: keyword, strategy: Hybrid, embedding: {endpoint: "http://e/v1", model: m, batchSize: 5000}}}}`,
		`{apiVersion: contextrouter.dev/v1alpha1, kind: ContextRoute, metadata: {name: r},
		  spec: {when: 'text.contains(', sources: [{name: s}, {name: s}]}}`,
		`{apiVersion: contextrouter.dev/v1alpha1, kind: ContextSource, metadata: {name: s},
		  spec: {type: HTTPAPI, sensitivity: secret, httpAPI: {url: "https://kb.example.com/", textField: text, body: '{"q": {{query}}}'}}}`,
		`{apiVersion: contextrouter.dev/v1alpha1, kind: AgentPermission, metadata: {name: p},
		  spec: {agents: ["*"], denyPaths: ["[x"], maxSensitivity: public}}`,
	}
	for _, doc := range docs {
		set, err := manifest.Parse("m.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		var problems []string
		for _, p := range set.Check().Errors() {
			// References to other objects: errors in files that must be
			// complete, warnings at apply (GitOps applies in any order).
			if p.Reason != v1alpha1.ReasonSourceNotFound {
				problems = append(problems, p.Field+": "+p.Message)
			}
		}
		ctx := context.Background()
		switch {
		case len(set.Routers) == 1:
			_, err = NewRouterValidator(nil, nil).ValidateCreate(ctx, &set.Routers[0])
		case len(set.Routes) == 1:
			_, err = NewRouteValidator(nil, nil).ValidateCreate(ctx, &set.Routes[0])
		case len(set.Sources) == 1:
			_, err = NewSourceValidator().ValidateCreate(ctx, &set.Sources[0])
		default:
			_, err = NewPermissionValidator(nil, nil).ValidateCreate(ctx, &set.Permissions[0])
		}
		var se *apierrors.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("%s: the webhook accepted it (%v); validate: %q", doc, err, problems)
		}
		var denied []string
		for _, c := range se.ErrStatus.Details.Causes {
			denied = append(denied, c.Field+": "+c.Message)
		}
		slices.Sort(problems)
		slices.Sort(denied)
		if len(problems) < 2 || !slices.Equal(problems, denied) {
			t.Errorf("%s\nvalidate: %q\nwebhook:  %q", doc, problems, denied)
		}
	}
}
