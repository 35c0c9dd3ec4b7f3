package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// BenchmarkEntityHeavyQuestion is the probe of issue 22: n copies of an
// entity pattern on a question at the text bound whose b is at its end,
// asked with detect ["*"] under a query timeout. ns/op is the time to the
// answer or to the stop; stopped/op the share of queries stopped. A shape
// whose pattern the router refuses is skipped. It uses the exported API
// only, so it runs on older trees too (docs/benchmarks.md).
func BenchmarkEntityHeavyQuestion(b *testing.B) {
	question := strings.Repeat("a", MaxTextBytes-1) + "b"
	for _, tc := range []struct {
		pattern string
		n       int
		timeout time.Duration
	}{
		{`(?:a|aa){1,995}b`, 4, 2 * time.Second},
		{`(?:a|aa){1,199}b`, 4, 2 * time.Second},
		{`(?:a|aa){1,199}b`, 32, 2 * time.Second},
		{`(?:a|aa){1,199}b`, 32, 30 * time.Second},
	} {
		b.Run(fmt.Sprintf("pattern=%s/n=%d/timeout=%s", tc.pattern, tc.n, tc.timeout), func(b *testing.B) {
			c := v1alpha1.ContextClassifier{}
			c.Name = "heavy"
			c.Spec.Labels = []v1alpha1.ClassifierLabel{{Name: "runs", Examples: []string{"a run of letters"}}}
			for range tc.n {
				c.Spec.Entities = append(c.Spec.Entities, v1alpha1.EntityExtractor{Type: "run", Pattern: tc.pattern})
			}
			cfg := &Config{Router: router(nil), Sources: []v1alpha1.ContextSource{inlineSource("notes", "Notes", "Deploy with the pipeline.")},
				Classifiers: []v1alpha1.ContextClassifier{c}}
			s, err := Compile(context.Background(), cfg, Options{})
			if err != nil {
				b.Skipf("refused: %v", err)
			}
			stopped := 0
			for b.Loop() {
				if queryStopped(b, s, tc.timeout, Request{Text: question, Detect: []string{"*"}}) {
					stopped++
				}
			}
			b.ReportMetric(float64(stopped)/float64(b.N), "stopped/op")
		})
	}
}

// queryStopped asks s under a timeout and reports whether the query stopped.
func queryStopped(b *testing.B, s *Snapshot, timeout time.Duration, req Request) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := s.Query(ctx, req)
	var se *StoppedError
	if err != nil && !errors.As(err, &se) {
		b.Fatal(err)
	}
	return err != nil
}
