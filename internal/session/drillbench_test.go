package session_test

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

// BenchmarkDrillGrep searches a 256 KiB artifact (docs/benchmarks.md,
// "Session drill-down").
func BenchmarkDrillGrep(b *testing.B) {
	text := sessiontest.BigText(256 << 10)
	for _, bc := range []struct {
		name string
		req  session.DrillRequest
	}{
		{"literal", session.DrillRequest{View: session.ViewGrep, Pattern: "ERROR", Literal: true}},
		{"re2-prefix", session.DrillRequest{View: session.ViewGrep, Pattern: `ERROR upstream timed out after \d+s`}},
		{"re2-anycase", session.DrillRequest{View: session.ViewGrep, Pattern: `(?i)error`}},
		{"re2-class", session.DrillRequest{View: session.ViewGrep, Pattern: `worker-1[0-6]: ERROR`}},
		{"re2-nomatch", session.DrillRequest{View: session.ViewGrep, Pattern: `(?i)panic|fatal`}},
		{"context-max", session.DrillRequest{View: session.ViewGrep, Pattern: `batch \d+5 `, Context: ip(10), Max: ip(200)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := session.DrillDown("r", text, bc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDrillLines reads the last lines of a 256 KiB artifact.
func BenchmarkDrillLines(b *testing.B) {
	text := sessiontest.BigText(256 << 10)
	for b.Loop() {
		if _, err := session.DrillDown("r", text, session.DrillRequest{View: session.ViewLines, From: ip(-200)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirewallLog builds the interpret pack of a session whose tool
// result is the 400-line build log: the firewall's cost for it (hash, line
// count, head, tail and signal lines) and the rest of a small pack.
func BenchmarkFirewallLog(b *testing.B) {
	s := &session.Session{Items: []session.Item{
		{ID: "c7", Kind: session.KindToolCall, Text: "ci.build_log(job=42)"},
		{ID: "r7", Kind: session.KindToolResult, ParentID: "c7", Text: sessiontest.BuildLog(400)},
	}}
	for b.Loop() {
		if _, err := session.Build(s, session.Options{Phase: session.PhaseInterpret}); err != nil {
			b.Fatal(err)
		}
	}
}
