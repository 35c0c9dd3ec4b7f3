package engine

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestSplitFieldError(t *testing.T) {
	tests := []struct{ in, path, msg string }{
		{"spec.httpAPI.body: not valid JSON", "spec.httpAPI.body", "not valid JSON"},
		{"spec.httpAPI.headers[0].name: bad: really", "spec.httpAPI.headers[0].name", "bad: really"},
		{"spec.type: unsupported source type \"X\"", "spec.type", `unsupported source type "X"`},
		{"secret foo: not found", "spec", "secret foo: not found"},
		{"no colon at all", "spec", "no colon at all"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			path, msg := SplitFieldError(tt.in)
			if path != tt.path || msg != tt.msg {
				t.Errorf("got (%q, %q), want (%q, %q)", path, msg, tt.path, tt.msg)
			}
		})
	}
}

func TestValueAt(t *testing.T) {
	omit := field.OmitValueType{} // no scalar to show
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "main"}, Spec: v1alpha1.ContextRouterSpec{
		Budget:  v1alpha1.BudgetSpec{MaxTokens: 100},
		Ranking: v1alpha1.RankingSpec{Strategy: v1alpha1.RankingEmbedding},
	}}
	s := &v1alpha1.ContextSource{Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{
		URL: "https://kb.example.com/?q={{query}}", TextField: "text", Headers: []v1alpha1.HTTPHeader{{Name: "Accept"}},
	}}}
	tests := []struct {
		obj  any
		path string
		want any
	}{
		{r, "spec.budget.maxTokens", int64(100)},
		{r, "spec.ranking.strategy", "Embedding"},
		{r, "spec.ranking", omit},
		{r, "spec.nosuch", omit},
		{s, "spec.httpAPI.headers[0].name", "Accept"},
		{s, "spec.httpAPI.headers[3].name", omit},
		{s, "spec.httpAPI.headers[x].name", omit},
	}
	for _, tt := range tests {
		if got := valueAt(tt.obj, tt.path); got != tt.want {
			t.Errorf("valueAt(%s) = %#v, want %#v", tt.path, got, tt.want)
		}
	}
}

// TestChecksReportEachFieldOnce: a rule both Validate and the engine enforce
// is reported once, in Validate's words; CEL messages fit one line.
func TestChecksReportEachFieldOnce(t *testing.T) {
	r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}
	r.Default()
	r.Spec.Ranking.Scorer = "keyword"
	errs := CheckRouter(r)
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want 1: %v", len(errs), errs.ToAggregate())
	}
	if got, want := errs[0].Error(), `spec.ranking.scorer: Unsupported value: "keyword": supported values: "BM25", "Keyword" (did you mean "Keyword"?)`; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	r.Spec.Ranking.Scorer = v1alpha1.ScorerBM25
	r.Spec.Ranking.Strategy = v1alpha1.RankingEmbedding
	r.Spec.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: "http://emb/v1", Model: "m"}
	if errs = CheckRouter(r); len(errs) != 0 {
		t.Errorf("the Embedding strategy is served: %v", errs.ToAggregate())
	}

	rt := &v1alpha1.ContextRoute{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: v1alpha1.ContextRouteSpec{When: "text.contains(", Sources: []v1alpha1.LocalObjectReference{{Name: "s"}}}}
	rt.Default()
	errs = CheckRoute(rt)
	if len(errs) != 1 || errs[0].Field != "spec.when" {
		t.Fatalf("route: %v", errs.ToAggregate())
	}
	if msg := errs[0].Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "<input>:1:15: Syntax error") {
		t.Errorf("CEL error %q: want one line naming the column", msg)
	}

	src := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "kb"}, Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/", TextField: "text", Body: `{"q": {{query}}}`},
	}}
	src.Default()
	errs = CheckSource(src)
	if len(errs) != 1 || errs[0].Field != "spec.httpAPI.body" {
		t.Errorf("source: %v", errs.ToAggregate())
	}
}
