package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFreshnessValidate(t *testing.T) {
	base := func() *ContextSource {
		s := &ContextSource{ObjectMeta: meta("docs"), Spec: ContextSourceSpec{
			Type: SourceDirectory, Directory: &DirectorySource{Path: "docs"},
			Freshness: &FreshnessSpec{MaxAge: metav1.Duration{Duration: time.Hour}}}}
		s.Default()
		return s
	}
	if got := base().Spec.Freshness.StaleAction; got != StaleFlag {
		t.Errorf("staleAction defaults to %q, want Flag", got)
	}
	runValidation(t, base, (*ContextSource).Validate, []validCase[ContextSource]{
		{"maxAge required", func(s *ContextSource) { s.Spec.Freshness.MaxAge = metav1.Duration{} }, "spec.freshness.maxAge", "must be greater than 0"},
		{"maxAge negative", func(s *ContextSource) { s.Spec.Freshness.MaxAge.Duration = -time.Minute }, "spec.freshness.maxAge", "must be greater than 0"},
		{"staleAction enum", func(s *ContextSource) { s.Spec.Freshness.StaleAction = "drop" }, "spec.freshness.staleAction", `"Drop"`},
		{"not for Inline", func(s *ContextSource) {
			s.Spec.Type, s.Spec.Directory, s.Spec.Inline = SourceInline, nil, &InlineSource{Content: "x"}
		}, "spec.freshness", "Directory, GitRepo and HTTPAPI sources only (type is Inline)"},
		{"not for Tools", func(s *ContextSource) {
			s.Spec.Type, s.Spec.Directory, s.Spec.Tools = SourceTools, nil, &ToolsSource{Approval: ToolApprovalAuto, Catalog: []Tool{{Name: "t", Description: "d", SideEffects: SideEffectsNone}}}
		}, "spec.freshness", "(type is Tools)"},
	})
	for _, typ := range []SourceType{SourceGitRepo, SourceHTTPAPI} {
		s := &ContextSource{ObjectMeta: meta("s"), Spec: ContextSourceSpec{Type: typ, Freshness: &FreshnessSpec{MaxAge: metav1.Duration{Duration: time.Hour}}}}
		if typ == SourceGitRepo {
			s.Spec.GitRepo = &GitRepoSource{URL: "https://git.example.com/r.git"}
		} else {
			s.Spec.HTTPAPI = &HTTPAPISource{URL: "https://kb.example.com/s?q={{query}}", TextField: "text"}
		}
		s.Default()
		if errs := s.Validate(); len(errs) != 0 {
			t.Errorf("%s with freshness: %v", typ, errs.ToAggregate())
		}
	}
}

func TestAuditValidate(t *testing.T) {
	base := func() *ContextRouter {
		r := &ContextRouter{ObjectMeta: meta("acme"), Spec: ContextRouterSpec{Audit: &AuditSpec{Enabled: true}}}
		r.Default()
		return r
	}
	if a := base().Spec.Audit; a.SampleRate != "1" || a.QueryText != AuditQueryOmit {
		t.Errorf("audit defaults to %+v, want sampleRate 1, queryText Omit", a)
	}
	if r := (&ContextRouter{ObjectMeta: meta("acme")}); func() bool { r.Default(); return r.Spec.Audit != nil }() {
		t.Error("Default created an audit block")
	}
	runValidation(t, base, (*ContextRouter).Validate, []validCase[ContextRouter]{
		{"sampleRate above 1", func(r *ContextRouter) { r.Spec.Audit.SampleRate = "1.5" }, "spec.audit.sampleRate", "decimal number from 0 to 1"},
		{"sampleRate not a number", func(r *ContextRouter) { r.Spec.Audit.SampleRate = "half" }, "spec.audit.sampleRate", "decimal number from 0 to 1"},
		{"sampleRate negative", func(r *ContextRouter) { r.Spec.Audit.SampleRate = "-0.1" }, "spec.audit.sampleRate", "decimal number from 0 to 1"},
		{"queryText enum", func(r *ContextRouter) { r.Spec.Audit.QueryText = "full" }, "spec.audit.queryText", `"Full"`},
	})
	for _, tc := range []struct {
		rate string
		want float64
	}{{"0", 0}, {"0.25", 0.25}, {"1", 1}, {"1.000", 1}} {
		if got, ok := (&AuditSpec{SampleRate: tc.rate}).Rate(); !ok || got != tc.want {
			t.Errorf("Rate(%q) = %v, %v; want %v", tc.rate, got, ok, tc.want)
		}
	}
}
