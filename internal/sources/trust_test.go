package sources

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/problem"
)

// TestFactoriesTrustValidate: the rules of the API live in v1alpha1 Validate
// alone. For a spec that breaks one, Validate names the field, and the
// factory, which does not check it again, builds the source or returns an
// error without panicking (a spec written by hand in Go never passed Validate).
func TestFactoriesTrustValidate(t *testing.T) {
	const u = "https://kb.example.com/search?q={{query}}"
	zero := resource.MustParse("0")
	value := func(name, v string) v1alpha1.HTTPHeader { return v1alpha1.HTTPHeader{Name: name, Value: httpStrPtr(v)} }
	http := func(h v1alpha1.HTTPAPISource) *v1alpha1.ContextSource {
		if h.URL == "" {
			h.URL = u
		}
		if h.TextField == "" {
			h.TextField = "text"
		}
		return httpTestSpec("kb", h)
	}
	git := func(g v1alpha1.GitRepoSource) *v1alpha1.ContextSource {
		g.URL = "https://example.com/r.git"
		return &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "wiki"},
			Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceGitRepo, GitRepo: &g}}
	}
	tests := []struct {
		name  string
		spec  *v1alpha1.ContextSource
		field string
	}{
		{"inline blank content", inlineSpec("p", &v1alpha1.InlineSource{Content: " \n\t"}, v1alpha1.ChunkingSpec{}), "spec.inline.content"},
		{"chunking strategy", inlineSpec("p", &v1alpha1.InlineSource{Content: "x"}, v1alpha1.ChunkingSpec{Strategy: "Lines"}), "spec.chunking.strategy"},
		{"chunking maxChunkTokens", inlineSpec("p", &v1alpha1.InlineSource{Content: "x"}, v1alpha1.ChunkingSpec{MaxChunkTokens: 4}), "spec.chunking.maxChunkTokens"},
		{"directory include glob", dirSpec("docs", &v1alpha1.DirectorySource{Path: "x", Include: []string{"**/*.md", "[a"}}), "spec.directory.include[1]"},
		{"directory absolute exclude", dirSpec("docs", &v1alpha1.DirectorySource{Path: "x", Exclude: []string{"/abs/**"}}), "spec.directory.exclude[0]"},
		{"directory maxFileSize", dirSpec("docs", &v1alpha1.DirectorySource{Path: "x", MaxFileSize: &zero}), "spec.directory.maxFileSize"},
		{"git include glob", git(v1alpha1.GitRepoSource{Include: []string{"docs/[.md"}}), "spec.gitRepo.include[0]"},
		{"git blank exclude", git(v1alpha1.GitRepoSource{Exclude: []string{" "}}), "spec.gitRepo.exclude[0]"},
		{"git maxFileSize", git(v1alpha1.GitRepoSource{MaxFileSize: &zero}), "spec.gitRepo.maxFileSize"},
		{"git interval", git(v1alpha1.GitRepoSource{Interval: &metav1.Duration{Duration: -time.Second}}), "spec.gitRepo.interval"},
		{"git secret name", git(v1alpha1.GitRepoSource{Auth: &v1alpha1.GitAuth{}}), "spec.gitRepo.auth.secretRef.name"},
		{"http url scheme", http(v1alpha1.HTTPAPISource{URL: "ftp://kb.example.com/{{query}}"}), "spec.httpAPI.url"},
		{"http url host", http(v1alpha1.HTTPAPISource{URL: "http:///search?q={{query}}"}), "spec.httpAPI.url"},
		{"http method", http(v1alpha1.HTTPAPISource{Method: "get"}), "spec.httpAPI.method"},
		{"http body on GET", http(v1alpha1.HTTPAPISource{Body: `{"q": {{query}}}`}), "spec.httpAPI.body"},
		{"http blank textField", http(v1alpha1.HTTPAPISource{TextField: " "}), "spec.httpAPI.textField"},
		{"http maxResults", http(v1alpha1.HTTPAPISource{MaxResults: 1001}), "spec.httpAPI.maxResults"},
		{"http timeout", http(v1alpha1.HTTPAPISource{Timeout: httpDurPtr(-time.Second)}), "spec.httpAPI.timeout"},
		{"http maxResponseSize zero", http(v1alpha1.HTTPAPISource{MaxResponseSize: httpQtyPtr("0")}), "spec.httpAPI.maxResponseSize"},
		{"http maxResponseSize large", http(v1alpha1.HTTPAPISource{MaxResponseSize: httpQtyPtr("2Gi")}), "spec.httpAPI.maxResponseSize"},
		{"http header name", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{value("X Bad", "x")}}), "spec.httpAPI.headers[0].name"},
		{"http header set by the client", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{value("content-length", "3")}}), "spec.httpAPI.headers[0].name"},
		{"http duplicate header", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{value("Authorization", "a"), value("authorization", "c")}}), "spec.httpAPI.headers[1].name"},
		{"http header value and valueFrom", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{{Name: "X-A", Value: httpStrPtr("a"),
			ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.SecretKeySelector{Name: "s", Key: "k"}}}}}), "spec.httpAPI.headers[0]"},
		{"http header value control character", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{value("X-A", "a\nX-B: b")}}), "spec.httpAPI.headers[0].value"},
		{"http secret name", http(v1alpha1.HTTPAPISource{Headers: []v1alpha1.HTTPHeader{httpSecretHeader("X-A", "", "k")}}), "spec.httpAPI.headers[0].valueFrom.secretKeyRef.name"},
		{"http allowedHosts entry", http(v1alpha1.HTTPAPISource{FollowRedirects: v1alpha1.FollowRedirects{
			Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{"https://kb-eu.example.com"}}}), "spec.httpAPI.followRedirects.allowedHosts[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.spec.DeepCopy()
			obj.Default()
			errs := obj.Validate()
			found := false
			for _, e := range errs {
				found = found || problem.Within(e.Field, tt.field)
			}
			if !found {
				t.Errorf("Validate reports %v, want an error at %s", errs.ToAggregate(), tt.field)
			}
			env, _ := gitEnv(t, nil)
			if _, err := New(tt.spec, env); err != nil {
				t.Logf("the factory refuses it too: %v", err)
			}
		})
	}
}
