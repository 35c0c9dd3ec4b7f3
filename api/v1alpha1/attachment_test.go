package v1alpha1

import (
	"slices"
	"testing"
)

func TestSecretNames(t *testing.T) {
	header := func(secret string) HTTPHeader {
		return HTTPHeader{Name: "X-" + secret, ValueFrom: &HeaderValueSource{SecretKeyRef: SecretKeySelector{Name: secret, Key: "k"}}}
	}
	literal := "v"
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"inline", (&ContextSource{Spec: ContextSourceSpec{Type: SourceInline, Inline: &InlineSource{Content: "x"}}}).SecretNames(), nil},
		{"git", (&ContextSource{Spec: ContextSourceSpec{Type: SourceGitRepo, GitRepo: &GitRepoSource{
			Auth: &GitAuth{SecretRef: LocalObjectReference{Name: "git-creds"}}}}}).SecretNames(), []string{"git-creds"}},
		{"headers, sorted and once each", (&ContextSource{Spec: ContextSourceSpec{Type: SourceHTTPAPI, HTTPAPI: &HTTPAPISource{
			Headers: []HTTPHeader{header("other"), {Name: "X-Lit", Value: &literal}, header("api"), header("other")}}}}).SecretNames(),
			[]string{"api", "other"}},
		{"MCP headers", (&ContextSource{Spec: ContextSourceSpec{Type: SourceMCP, MCP: &MCPSource{
			Headers: []HTTPHeader{header("mcp"), {Name: "X-Lit", Value: &literal}}}}}).SecretNames(), []string{"mcp"}},
		{"tool catalog over HTTP", (&ContextSource{Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{HTTP: &CatalogHTTPSource{
			Headers: []HTTPHeader{header("openapi"), {Name: "X-Lit", Value: &literal}}}}}}).SecretNames(), []string{"openapi"}},
		{"tool catalog repository", (&ContextSource{Spec: ContextSourceSpec{Type: SourceTools, Tools: &ToolsSource{GitRepo: &GitRepoSource{
			Auth: &GitAuth{SecretRef: LocalObjectReference{Name: "tools-git"}}}}}}).SecretNames(), []string{"tools-git"}},
		{"router without embedding", (&ContextRouter{}).SecretNames(), nil},
		{"router embedding key", (&ContextRouter{Spec: ContextRouterSpec{Ranking: RankingSpec{Embedding: &EmbeddingSpec{
			APIKeySecretRef: &SecretKeySelector{Name: "emb", Key: "k"}}}}}).SecretNames(), []string{"emb"}},
		{"router embedding and rerank keys", (&ContextRouter{Spec: ContextRouterSpec{Ranking: RankingSpec{
			Embedding: &EmbeddingSpec{APIKeySecretRef: &SecretKeySelector{Name: "emb", Key: "k"}},
			Rerank:    &RerankSpec{APIKeySecretRef: &SecretKeySelector{Name: "a-rr", Key: "k"}}}}}).SecretNames(), []string{"a-rr", "emb"}},
		{"router one secret for both", (&ContextRouter{Spec: ContextRouterSpec{Ranking: RankingSpec{
			Embedding: &EmbeddingSpec{APIKeySecretRef: &SecretKeySelector{Name: "ai", Key: "k"}},
			Rerank:    &RerankSpec{APIKeySecretRef: &SecretKeySelector{Name: "ai", Key: "k"}}}}}).SecretNames(), []string{"ai"}},
		{"router redis password, sorted", (&ContextRouter{Spec: ContextRouterSpec{
			Ranking:  RankingSpec{Embedding: &EmbeddingSpec{APIKeySecretRef: &SecretKeySelector{Name: "emb", Key: "k"}}},
			Sessions: SessionsSpec{Store: SessionStoreRedis, Redis: &RedisSpec{PasswordSecretRef: &SecretKeySelector{Name: "cache", Key: "password"}}}}}).SecretNames(),
			[]string{"cache", "emb"}},
		{"redis password of a Memory store is not read", (&ContextRouter{Spec: ContextRouterSpec{
			Sessions: SessionsSpec{Store: SessionStoreMemory, Redis: &RedisSpec{PasswordSecretRef: &SecretKeySelector{Name: "cache", Key: "password"}}}}}).SecretNames(),
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("SecretNames() = %q, want %q", tt.got, tt.want)
			}
		})
	}
}
