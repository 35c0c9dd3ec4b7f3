// Package sessiontest holds the fixtures of the session tests and
// benchmarks (docs/benchmarks.md), in process and through a store. Only
// tests import it: production code has no use for them.
package sessiontest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/contextrouter/contextrouter/internal/session"
)

// Bench is the session of the pack benchmarks (issue 10): 200 items:
// turns, messages, 40 tool call/result pairs of which 10 results are
// oversized JSON, facts, snippets and a policy.
func Bench() *session.Session {
	s := &session.Session{}
	for i := range 10 {
		s.Facts = append(s.Facts, session.Fact{Key: fmt.Sprint("pref", i), Value: fmt.Sprint("value number ", i)})
		s.Episodes = append(s.Episodes, session.Episode{ID: fmt.Sprint("ep", i), Text: fmt.Sprintf("on day %d the user asked about invoice batch %d", i, i*3)})
	}
	s.Items = append(s.Items, session.Item{ID: "policy", Kind: session.KindPolicy, Text: "Never send money without approval."})
	big := BigJSON(200)
	for i := 0; len(s.Items) < 200; i++ {
		switch i % 5 {
		case 0:
			s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("u%03d", i), Kind: session.KindUserTurn, Text: fmt.Sprintf("please check invoice %d status for customer %d", i, i%7), Tags: []string{"billing"}})
		case 1:
			s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("c%03d", i), Kind: session.KindToolCall, Text: fmt.Sprintf("invoices.get(id=%d)", i)})
		case 2:
			text := fmt.Sprintf(`{"id": %d, "status": "paid", "amount": %d}`, i, i*12)
			if i%20 == 2 && i < 200 {
				text = big
			}
			s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("r%03d", i), Kind: session.KindToolResult, ParentID: fmt.Sprintf("c%03d", i-1), Text: text})
		case 3:
			s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("a%03d", i), Kind: session.KindAgentMessage, Text: fmt.Sprintf("invoice %d is paid; the amount was %d euros and it settled on day %d", i, i*12, i%30)})
		default:
			s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("d%03d", i), Kind: session.KindDocSnippet, Text: fmt.Sprintf("Refund policy section %d: refunds over %d euros need a second approver.", i, i*10)})
		}
	}
	return s
}

// BigJSON is a JSON tool result of n invoice rows (about 60 bytes each).
func BigJSON(n int) string {
	type row struct {
		ID     int     `json:"id"`
		Name   string  `json:"name"`
		Amount float64 `json:"amount"`
	}
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{i, fmt.Sprintf("invoice-%04d-deepvalue", i), float64(i) * 10.5}
	}
	b, _ := json.Marshal(map[string]any{"status": "ok", "count": n, "invoices": rows, "page": map[string]int{"n": 1, "of": 3}})
	return string(b)
}

// BuildLog is the build log of the issue 18 checks: n lines (n >= 212) of
// "step K/n", one of them (212) a retry that failed, the last one the
// error, and a final line break.
func BuildLog(n int) string {
	var b strings.Builder
	for k := 1; k <= n; k++ {
		ts := fmt.Sprintf("2026-03-02T10:%02d:%02dZ", (k-1)/60, (k-1)%60)
		switch k {
		case 212:
			fmt.Fprintf(&b, "%s WARN retry 1/3 failed: timeout\n", ts)
		case n:
			fmt.Fprintf(&b, "%s ERROR payment-service: connection refused (dial tcp 10.0.3.7:5432)\n", ts)
		default:
			fmt.Fprintf(&b, "%s step %d/%d: compile module-%d\n", ts, k, n, k)
		}
	}
	return b.String()
}

// BigText is about n bytes of log lines with a signal word every 500
// lines: the 256 KiB artifact of the drill-down benchmarks.
func BigText(n int) string {
	var b strings.Builder
	for k := 1; b.Len() < n; k++ {
		if k%500 == 0 {
			fmt.Fprintf(&b, "2026-03-02T10:00:00Z worker-%d: ERROR upstream timed out after 30s (attempt %d)\n", k%17, k)
			continue
		}
		fmt.Fprintf(&b, "2026-03-02T10:00:00Z worker-%d: processed batch %d of customer records in %d ms\n", k%17, k, k%997)
	}
	return b.String()
}
