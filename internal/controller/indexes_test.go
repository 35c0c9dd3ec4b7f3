package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

func TestRouterSecretNames(t *testing.T) {
	embedding := func(secret string) *v1alpha1.ContextRouter {
		r := &v1alpha1.ContextRouter{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}
		r.Spec.Ranking.Embedding = &v1alpha1.EmbeddingSpec{Endpoint: "http://emb", Model: "m"}
		if secret != "" {
			r.Spec.Ranking.Embedding.APIKeySecretRef = &v1alpha1.SecretKeySelector{Name: secret, Key: "k"}
		}
		return r
	}
	tests := []struct {
		name string
		obj  *v1alpha1.ContextRouter
		want []string
	}{
		{"no embedding", &v1alpha1.ContextRouter{}, nil},
		{"embedding without key", embedding(""), nil},
		{"embedding key", embedding("openai"), []string{"openai"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RouterSecretNames(tt.obj); !slices.Equal(got, tt.want) {
				t.Errorf("RouterSecretNames = %v, want %v", got, tt.want)
			}
		})
	}
	if got := RouterSecretNames(&v1alpha1.ContextRoute{}); got != nil {
		t.Errorf("another kind gives %v", got)
	}
}

func TestRouterSet(t *testing.T) {
	s := newRouterSet("ns")
	s.addParents([]v1alpha1.ParentReference{{Name: "b"}, {Name: "a"}})
	s.addParents([]v1alpha1.ParentReference{{Name: "b"}})
	if s.all {
		t.Error("named parents must not select every router")
	}
	reqs := s.requests(t.Context(), nil)
	var got []string
	for _, r := range reqs {
		if r.Namespace != "ns" {
			t.Errorf("request in namespace %q", r.Namespace)
		}
		got = append(got, r.Name)
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("requests %v, want [a b] once each", got)
	}
	s.addParents(nil)
	if !s.all {
		t.Error("empty parentRefs must select every router in the namespace")
	}
}
