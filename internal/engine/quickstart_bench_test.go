package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// BenchmarkQueryQuickstart is one full query on examples/quickstart (about
// 150 chunks): routes, permissions, BM25, ranking, dedup, budget, assembly.
func BenchmarkQueryQuickstart(b *testing.B) {
	s := quickstartSnapshot(b)
	benchQuestion(b, s, func(resp *engine.Response) bool { return len(resp.Chunks) > 0 })
	b.ReportMetric(float64(s.Chunks()), "chunks")
}

// benchQuestion asks the quickstart's vacation question in a loop; ok
// checks each answer.
func benchQuestion(b *testing.B, s *engine.Snapshot, ok func(*engine.Response) bool) {
	req := engine.Request{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := s.Query(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if !ok(resp) {
			b.Fatal("unexpected answer")
		}
	}
}

// quickstartSnapshot compiles examples/quickstart, after edit changes the
// loaded objects (if given).
func quickstartSnapshot(b testing.TB, edit ...func(*manifest.Set)) *engine.Snapshot {
	b.Helper()
	set, err := manifest.Load("../../examples/quickstart")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range edit {
		e(set)
	}
	cfg, err := set.Config("")
	if err != nil {
		b.Fatal(err)
	}
	s, err := engine.Compile(context.Background(), cfg, engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, st := range s.Sources() {
		if st.Error != "" {
			b.Fatalf("source %s: %s", st.Name, st.Error)
		}
	}
	return s
}

// BenchmarkQueryQuickstartTools is a query whose routes name the quickstart's
// tool source: the query of BenchmarkQueryQuickstart plus the tool
// shortlist (tool rules, search, cards); FindTools is the shortlist alone.
func BenchmarkQueryQuickstartTools(b *testing.B) {
	s := quickstartSnapshot(b)
	req := engine.Request{Text: "list the open incidents and recent deploys", Agent: "eng-assistant"}
	ctx := context.Background()
	b.Run("Query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := s.Query(ctx, req)
			if err != nil || len(resp.Tools) == 0 {
				b.Fatal(err, "no tools")
			}
		}
	})
	b.Run("FindTools", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := s.FindTools(ctx, req)
			if err != nil || len(resp.Tools) == 0 {
				b.Fatal(err, "no tools")
			}
		}
	})
}

// BenchmarkQueryQuickstartDetection is BenchmarkQueryQuickstart's query with
// the quickstart's intent classifier (classifier=on: the incident-help route
// reads detected.intent and entities, so every query classifies the question
// and extracts entities) and without it (classifier=off: the classifier and
// that route removed). Compare with `benchstat -col /classifier`.
func BenchmarkQueryQuickstartDetection(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "classifier=off"
		if on {
			name = "classifier=on"
		}
		b.Run(name, func(b *testing.B) {
			s := quickstartSnapshot(b, func(set *manifest.Set) {
				if !on {
					set.Classifiers = nil
					set.Routes = slices.DeleteFunc(set.Routes, func(r v1alpha1.ContextRoute) bool {
						return strings.Contains(r.Spec.When, "detected") || strings.Contains(r.Spec.When, "entities")
					})
				}
			})
			req := engine.Request{Text: "How many vacation days do I get, and can I carry them over?", Agent: "hr-assistant"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := s.Query(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if (resp.Detection != nil) != on {
					b.Fatalf("detection %+v with classifier=%v", resp.Detection, on)
				}
			}
		})
	}
}
