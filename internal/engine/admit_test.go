package engine

import (
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

func TestFloor(t *testing.T) {
	access := func(maxSens v1alpha1.Sensitivity, action v1alpha1.SensitivityAction) *Access {
		return &Access{MaxSensitivity: maxSens, SensitivityAction: action}
	}
	tests := []struct {
		name   string
		access *Access
		sens   v1alpha1.Sensitivity
		want   FloorVerdict
	}{
		{"at the clearance", access(v1alpha1.SensitivityInternal, v1alpha1.SensitivityActionDrop), v1alpha1.SensitivityInternal, FloorClear},
		{"below the clearance", access(v1alpha1.SensitivityConfidential, v1alpha1.SensitivityActionDrop), v1alpha1.SensitivityPublic, FloorClear},
		{"above it under Drop", access(v1alpha1.SensitivityInternal, v1alpha1.SensitivityActionDrop), v1alpha1.SensitivityConfidential, FloorDrop},
		{"above it under Redact", access(v1alpha1.SensitivityInternal, v1alpha1.SensitivityActionRedact), v1alpha1.SensitivityRestricted, FloorRedact},
		{"Public clearance, Internal content", access(v1alpha1.SensitivityPublic, v1alpha1.SensitivityActionRedact), v1alpha1.SensitivityInternal, FloorRedact},
		{"no sensitivity is Internal: cleared", access(v1alpha1.SensitivityInternal, v1alpha1.SensitivityActionDrop), "", FloorClear},
		{"no sensitivity is Internal: above Public", access(v1alpha1.SensitivityPublic, v1alpha1.SensitivityActionDrop), "", FloorDrop},
		{"an unset action drops", access(v1alpha1.SensitivityPublic, ""), v1alpha1.SensitivityConfidential, FloorDrop},
		{"Restricted clearance reads everything", access(v1alpha1.SensitivityRestricted, v1alpha1.SensitivityActionDrop), v1alpha1.SensitivityRestricted, FloorClear},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.access.Floor(tt.sens); got != tt.want {
				t.Errorf("Floor(%q) = %d, want %d", tt.sens, got, tt.want)
			}
			// Cleared and Floor say the same about reading content as it is.
			if cleared := tt.access.Cleared(tt.sens); cleared != (tt.want == FloorClear) {
				t.Errorf("Cleared(%q) = %t, Floor = %d", tt.sens, cleared, tt.want)
			}
		})
	}
}

// TestAdmitChunk is the chunk visibility rule as a policy chain: each link
// (path, freshness, sensitivity) decides or passes on, in that order.
func TestAdmitChunk(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	old, recent := now.Add(-2*time.Hour), now.Add(-10*time.Minute)
	source := func(sens v1alpha1.Sensitivity, maxAge time.Duration, drop bool) *sourceState {
		st := &sourceState{name: "docs", sensitivity: sens}
		st.fresh.maxAge, st.fresh.drop = maxAge, drop
		return st
	}
	cleared := &Access{MaxSensitivity: v1alpha1.SensitivityRestricted, SensitivityAction: v1alpha1.SensitivityActionDrop}
	denies := &Access{MaxSensitivity: v1alpha1.SensitivityInternal, SensitivityAction: v1alpha1.SensitivityActionDrop,
		DenyPaths: []string{"secret/**"}, SourceDenyPaths: map[string][]string{"docs": {"hr/*.md"}, "other": {"open/*.md"}}}
	redacts := &Access{MaxSensitivity: v1alpha1.SensitivityPublic, SensitivityAction: v1alpha1.SensitivityActionRedact}
	fetchedAt := func(t time.Time) sources.Chunk { return sources.Chunk{Path: "api/r1", Fetched: t.UnixNano()} }

	tests := []struct {
		name   string
		st     *sourceState
		chunk  sources.Chunk
		access *Access
		want   admission
	}{
		{"nothing applies", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{Path: "a.md", ModTime: old}, cleared, admission{}},
		{"denyPaths", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{Path: "secret/a.md"}, denies, admission{verdict: chunkDropPath}},
		{"sourceDenyPaths of its source", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{Path: "hr/pay.md"}, denies, admission{verdict: chunkDropPath}},
		{"sourceDenyPaths of another source", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{Path: "open/a.md"}, denies, admission{}},
		{"case-insensitive sourceDenyPaths alone", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{Path: "HR/Pay.md"},
			&Access{MaxSensitivity: v1alpha1.SensitivityInternal, SourceDenyPaths: map[string][]string{}, SourceDenyPathsIgnoreCase: map[string][]string{"docs": {"hr/*.md"}}},
			admission{verdict: chunkDropPath}},
		{"a path rule never hides a chunk without a path", source(v1alpha1.SensitivityInternal, 0, false), sources.Chunk{}, &Access{DenyPaths: []string{"**"}, MaxSensitivity: v1alpha1.SensitivityInternal}, admission{}},
		{"path beats staleness and sensitivity", source(v1alpha1.SensitivityRestricted, time.Hour, true), sources.Chunk{Path: "secret/a.md", ModTime: old}, denies, admission{verdict: chunkDropPath}},
		{"stale under Drop", source(v1alpha1.SensitivityInternal, time.Hour, true), sources.Chunk{Path: "a.md", ModTime: old}, cleared, admission{verdict: chunkDropStale, aged: true, stale: true}},
		{"stale under Flag is kept, flagged", source(v1alpha1.SensitivityInternal, time.Hour, false), sources.Chunk{Path: "a.md", ModTime: old}, cleared, admission{aged: true, stale: true}},
		{"fresh under Drop", source(v1alpha1.SensitivityInternal, time.Hour, true), sources.Chunk{Path: "a.md", ModTime: recent}, cleared, admission{aged: true}},
		{"a fetch time counts as the content time", source(v1alpha1.SensitivityInternal, time.Hour, true), fetchedAt(old), cleared, admission{verdict: chunkDropStale, aged: true, stale: true}},
		{"no content time: not aged, never stale", source(v1alpha1.SensitivityInternal, time.Hour, true), sources.Chunk{Path: "a.md"}, cleared, admission{}},
		{"content from the future is fresh", source(v1alpha1.SensitivityInternal, time.Hour, true), sources.Chunk{Path: "a.md", ModTime: now.Add(time.Hour)}, cleared, admission{aged: true}},
		{"staleness beats sensitivity", source(v1alpha1.SensitivityRestricted, time.Hour, true), sources.Chunk{Path: "a.md", ModTime: old}, denies, admission{verdict: chunkDropStale, aged: true, stale: true}},
		{"above the clearance under Drop", source(v1alpha1.SensitivityConfidential, 0, false), sources.Chunk{Path: "a.md"}, denies, admission{verdict: chunkDropSensitivity}},
		{"above it, stale under Flag: dropped, age known", source(v1alpha1.SensitivityConfidential, time.Hour, false), sources.Chunk{Path: "a.md", ModTime: old}, denies, admission{verdict: chunkDropSensitivity, aged: true, stale: true}},
		{"above the clearance under Redact", source(v1alpha1.SensitivityInternal, time.Hour, false), sources.Chunk{Path: "a.md", ModTime: recent}, redacts, admission{verdict: chunkRedact, aged: true}},
		{"at the clearance", source(v1alpha1.SensitivityPublic, 0, false), sources.Chunk{Path: "a.md"}, redacts, admission{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := admitChunk(tt.st, &tt.chunk, tt.access, now)
			if got != tt.want {
				t.Errorf("admitChunk = %+v, want %+v", got, tt.want)
			}
			if got.verdict.dropped() && !mayDrop(tt.st, tt.access) {
				t.Errorf("admitChunk dropped (%d) where mayDrop says it cannot", got.verdict)
			}
		})
	}
}
