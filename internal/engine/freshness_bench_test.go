package engine_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// BenchmarkQueryQuickstartFreshness is BenchmarkQueryQuickstart with
// freshness on every Directory source (Flag, an age no file reaches): the
// clock read per query and the age of every candidate.
func BenchmarkQueryQuickstartFreshness(b *testing.B) {
	s := quickstartSnapshot(b, func(set *manifest.Set) {
		for i := range set.Sources {
			if set.Sources[i].Spec.Type == v1alpha1.SourceDirectory {
				set.Sources[i].Spec.Freshness = &v1alpha1.FreshnessSpec{MaxAge: metav1.Duration{Duration: 100 * 365 * 24 * time.Hour}, StaleAction: v1alpha1.StaleFlag}
			}
		}
	})
	benchQuestion(b, s, func(resp *engine.Response) bool {
		return len(resp.Chunks) > 1 && resp.Chunks[1].Metadata.AgeSeconds != nil
	})
}
