package session_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// The case (issue 18 item 5), generated here: a 280-item session
// whose first user turn is the task, two tool calls early on (one result a
// 400-line deploy log whose last line holds the error), then 274 routine
// status turns that differ in their timestamps and counters.
const (
	taskText = "The nightly deploy of billing-api failed; find out why and tell me how to fix it"
	errLine  = "ERROR deploy aborted: migration 0042_add_invoice_index failed with a lock wait timeout; the failure was caused by the analytics export holding a lock on invoices"
)

func deployLog() string {
	var b strings.Builder
	for i := 1; i < 400; i++ {
		fmt.Fprintf(&b, "2026-03-14T02:%02d:%02d INFO step %d of the rollout: applied manifest chunk %d, %d objects unchanged\n", i/60%60, i%60, i, i*7%97, i%13)
	}
	b.WriteString(errLine)
	return b.String()
}

func incidentSession() *session.Session {
	s := &session.Session{Items: []session.Item{
		{ID: "u000", Kind: session.KindUserTurn, Text: taskText},
		{ID: "a001", Kind: session.KindAgentMessage, Text: "I will look at the pods and the deploy job's log."},
		{ID: "c002", Kind: session.KindToolCall, Text: "kubectl get pods -n billing -l app=billing-api"},
		{ID: "r003", Kind: session.KindToolResult, ParentID: "c002", Text: "NAME                           READY   STATUS    RESTARTS\nbilling-api-6c9f7d8b5-x2k4q   1/1     Running   0\nbilling-api-6c9f7d8b5-p8m2z   1/1     Running   0"},
		{ID: "c004", Kind: session.KindToolCall, Text: "kubectl logs job/billing-api-nightly-deploy -n billing --tail=400"},
		{ID: "r005", Kind: session.KindToolResult, ParentID: "c004", Text: deployLog()},
	}}
	for i := len(s.Items); i < 280; i++ {
		kind, text := session.KindAgentMessage, fmt.Sprintf("heartbeat %d at 03:%02d:%02d: all checks green, status nominal, queue depth %d, p99 latency %d ms, %d of 3 pods ready, %d requests served since the last check", 1800+i, i/60%60, i%60, i%17, 150+i%40, 2+i%2, 4000+i*37)
		switch i % 4 {
		case 0:
			kind, text = session.KindUserTurn, fmt.Sprintf("tick %d: still ok?", i)
		case 2:
			kind, text = session.KindUserTurn, fmt.Sprintf("monitor tick %d (03:%02d:%02d): anything new on the dashboards, error budget at %d.%d percent?", i, i/60%60, i%60, 90+i%9, i%10)
		}
		s.Items = append(s.Items, session.Item{ID: fmt.Sprintf("t%03d", i), Kind: kind, Text: text})
	}
	return s
}

// TestTaskAndEvidence: the answer-phase pack of the incident session, at the
// default budget, with a question about the failure, keeps the task and
// the deploy log (as a firewalled artifact); before issue 18 it kept
// routine turns and dropped both.
func TestTaskAndEvidence(t *testing.T) {
	s := incidentSession()
	if len(s.Items) != 280 {
		t.Fatalf("%d items, want 280", len(s.Items))
	}
	p := build(t, s, session.Options{Phase: session.PhaseAnswer, Query: "What caused the error, and what is the remedy?"})
	got := ids(p)
	if task, ok := got["u000"]; !ok || !task.Pinned {
		t.Errorf("the task was dropped or not pinned (%+v); stats %+v", task, p.Stats)
	}
	log, ok := got["r005"]
	if !ok || log.Artifact == "" {
		t.Fatalf("the deploy log is not in the pack as an artifact (%+v, %v); stats %+v", log, ok, p.Stats)
	}
	if _, ok := got["c004"]; !ok {
		t.Error("the log came without its tool call")
	}
	if !strings.Contains(p.Text, "user: "+taskText) {
		t.Error("the pack's text lacks the task")
	}
	routine := 0
	for id := range got {
		if id[0] == 't' {
			routine++
		}
	}
	if routine < 100 {
		t.Errorf("%d routine turns fill the rest; want the budget used", routine)
	}
	// The log outranks every routine turn that does not share a word with
	// the query ("error budget" does): its recency is that of the latest
	// tool result, and its relevance that of its whole text.
	text := map[string]string{}
	for _, it := range s.Items {
		text[it.ID] = it.Text
	}
	for id, it := range got {
		if id[0] == 't' && !strings.Contains(text[id], "error") && it.Score >= log.Score {
			t.Errorf("routine turn %s scores %v, the log %v", id, it.Score, log.Score)
		}
	}
	// Interpret reads tool results first of all: the log is there too.
	p = build(t, s, session.Options{Phase: session.PhaseInterpret, Query: "What caused the error, and what is the remedy?"})
	if _, ok := ids(p)["r005"]; !ok {
		t.Errorf("interpret: the log was dropped; stats %+v", p.Stats)
	}
}

// TestHandoff: the handoff pack of a session holds the task, the facts,
// the open plan items, the decisions, the artifacts by ref with their
// summaries and the last turns, pinned; closed plan items and old routine
// turns compete by score (api.md §11.2).
func TestHandoff(t *testing.T) {
	s := incidentSession()
	s.Facts = []session.Fact{{Key: "cluster", Value: "prod-eu-1"}, {Key: "owner", Value: "team billing"}}
	s.Items = append(s.Items,
		session.Item{ID: "plan1", Kind: session.KindPlanState, Text: "1. read the deploy log", Metadata: map[string]string{"status": "done"}},
		session.Item{ID: "plan2", Kind: session.KindPlanState, Text: "2. stop the analytics export before the next run", Metadata: map[string]string{"status": "open"}},
		session.Item{ID: "plan3", Kind: session.KindPlanState, Text: "3. rerun the migration with a lock timeout of 30 s"},
		session.Item{ID: "dec1", Kind: session.KindAgentMessage, Text: "We will not roll back: the new index is needed.", Tags: []string{"decision"}},
		session.Item{ID: "dec2", Kind: session.KindMemoryFact, Text: "The export moves to 05:00.", Metadata: map[string]string{"decision": "agreed with the analytics team"}},
	)
	p, why := explained(t, s, session.Options{Phase: session.PhaseHandoff})
	if p.Budget != 4000 {
		t.Errorf("budget %d, want 4000", p.Budget)
	}
	got := ids(p)
	// The last six turns: dec1 and t275..t279.
	pinned := []string{"u000", "plan2", "plan3", "dec1", "dec2", "r005", "t275", "t276", "t277", "t278", "t279"}
	n := 0
	for _, it := range p.Items {
		if it.Pinned {
			n++
		}
	}
	if n != len(pinned) {
		t.Errorf("%d entries pinned, want %d", n, len(pinned))
	}
	for _, id := range pinned {
		if it, ok := got[id]; !ok || !it.Pinned {
			t.Errorf("%s: %+v, %v (%s)", id, it, ok, why[id])
		}
	}
	for _, id := range []string{"fact:cluster", "fact:owner", "c004"} {
		if _, ok := got[id]; !ok {
			t.Errorf("%s left out (%s)", id, why[id])
		}
	}
	if it := got["plan1"]; it.Pinned {
		t.Error("a done plan item is pinned")
	}
	if len(p.Artifacts) != 1 || p.Artifacts[0].ItemID != "r005" || !strings.Contains(p.Text, p.Artifacts[0].Ref) {
		t.Errorf("artifacts %+v", p.Artifacts)
	}
	if p.Stats.PinnedDropped != 0 || p.TotalTokens > p.Budget {
		t.Errorf("stats %+v, %d tokens", p.Stats, p.TotalTokens)
	}
}
