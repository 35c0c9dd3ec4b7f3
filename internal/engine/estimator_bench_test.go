package engine_test

import (
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// BenchmarkQueryQuickstartEstimator is BenchmarkQueryQuickstart's query with
// each token estimator: what exact counting costs on the query path. Chunk
// counts are made when the snapshot is built; a query counts only what it
// cuts. Compare with `benchstat -col /estimator`.
func BenchmarkQueryQuickstartEstimator(b *testing.B) {
	for _, est := range []v1alpha1.TokenEstimator{v1alpha1.EstimatorCharsDiv4, v1alpha1.EstimatorO200kBase, v1alpha1.EstimatorCl100kBase} {
		b.Run("estimator="+string(est), func(b *testing.B) {
			s := quickstartSnapshot(b, func(set *manifest.Set) {
				for i := range set.Routers {
					set.Routers[i].Spec.Budget.Estimator = est
				}
			})
			benchQuestion(b, s, func(resp *engine.Response) bool { return len(resp.Chunks) > 0 && resp.WasTruncated })
		})
	}
}
