package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/session"
)

// TestSessionIncidentOverHTTP is issue 18's bar, end to end over the API: a
// 280-turn session written in a few calls, with secrets in an env dump and
// a 400-line log whose last line holds the error. The answer pack keeps the
// task and the log (as an artifact, by ref), the log's last line is
// reachable by view=lines&from=-3 and by view=grep&pattern=ERROR, no secret
// is in the pack, the drill-downs or GET, the pack's JSON is small, and
// explain lists what was left out with reasons.
func TestSessionIncidentOverHTTP(t *testing.T) {
	f := newFakeSecrets(t)
	const task = "The nightly deploy of billing-api failed; find out why and tell me how to fix it"
	const errLine = "ERROR deploy aborted: migration 0042_add_invoice_index failed with a lock wait timeout"
	var log strings.Builder
	for i := 1; i < 400; i++ {
		fmt.Fprintf(&log, "2026-03-14T02:%02d:%02d INFO step %d of the rollout: applied manifest chunk %d, %d objects unchanged\n", i/60%60, i%60, i, i*7%97, i%13)
	}
	log.WriteString(errLine)
	items := []session.Item{
		{ID: "u000", Kind: session.KindUserTurn, Text: task},
		{ID: "c001", Kind: session.KindToolCall, Text: "shell.run(\"env\")"},
		{ID: "r002", Kind: session.KindToolResult, ParentID: "c001", Text: f.envDump()},
		{ID: "c003", Kind: session.KindToolCall, Text: "kubectl logs job/billing-api-nightly-deploy -n billing --tail=400"},
		{ID: "r004", Kind: session.KindToolResult, ParentID: "c003", Text: log.String()},
	}
	for i := len(items); i < 280; i++ {
		kind, text := session.KindAgentMessage, fmt.Sprintf("heartbeat %d at 03:%02d:%02d: all checks green, status nominal, queue depth %d, p99 latency %d ms, %d of 3 pods ready, %d requests served since the last check", 1800+i, i/60%60, i%60, i%17, 150+i%40, 2+i%2, 4000+i*37)
		if i%2 == 0 {
			kind, text = session.KindUserTurn, fmt.Sprintf("tick %d: still ok?", i)
		}
		items = append(items, session.Item{ID: fmt.Sprintf("t%03d", i), Kind: kind, Text: text})
	}
	ts := startServer(t, Options{Paths: []string{quickstart}})
	ts.waitReady()
	const agent = "hr-assistant"
	base := "/v1/sessions/incident-7"
	for i := 0; i < len(items); i += 100 {
		ts.mustCall(200, "POST", base+"/items", sessionItems{Agent: agent, Items: items[i:min(i+100, len(items))]}, nil)
	}

	out := ts.mustCall(200, "POST", base+"/context", map[string]any{"agent": agent, "phase": "answer", "explain": true,
		"query": "What caused the deploy error, and what is the remedy?"}, nil)
	p := decodePack(t, out)
	byID := map[string]session.PackItem{}
	for _, it := range p.Items {
		byID[it.ID] = it
	}
	if it, ok := byID["u000"]; !ok || !it.Pinned || !strings.Contains(p.Text, "user: "+task) {
		t.Errorf("the task is not kept and pinned: %+v", it)
	}
	logItem, ok := byID["r004"]
	if !ok || logItem.Artifact == "" {
		t.Fatalf("the log is not in the answer pack as an artifact: %+v; stats %+v", logItem, p.Stats)
	}
	var art *session.Artifact
	for i := range p.Artifacts {
		if p.Artifacts[i].Ref == logItem.Artifact {
			art = &p.Artifacts[i]
		}
	}
	if art == nil || art.Lines != 400 || art.MediaType != "text/plain" || !strings.Contains(art.Summary, "L400: "+errLine) {
		t.Errorf("the log's artifact: %+v; want 400 lines and the error line in its summary", art)
	}
	// Refs, not blobs: nothing of the log's middle; an artifact is a few
	// hundred bytes of JSON whatever its size.
	if strings.Contains(out, "step 200 of the rollout") {
		t.Error("the pack carries the log's text")
	}
	if raw, _ := json.Marshal(p.Artifacts); len(raw) > 2048*len(p.Artifacts) {
		t.Errorf("artifacts take %d bytes of JSON for %d artifacts", len(raw), len(p.Artifacts))
	}
	if len(p.DroppedItems) == 0 || len(p.DroppedItems) != p.Stats.Dropped.Total() {
		t.Errorf("dropped_items %d, stats %+v", len(p.DroppedItems), p.Stats.Dropped)
	}
	for _, d := range p.DroppedItems {
		if d.Reason == "" || d.ID == "" || d.Tokens <= 0 {
			t.Errorf("dropped item without a reason, id or tokens: %+v", d)
		}
	}

	ref := url.PathEscape(logItem.Artifact)
	var lines struct {
		Content []string `json:"content"`
		From    int      `json:"from"`
		To      int      `json:"to"`
	}
	if err := json.Unmarshal([]byte(ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?agent="+agent+"&view=lines&from=-3", nil, nil)), &lines); err != nil {
		t.Fatal(err)
	}
	if lines.From != 398 || lines.To != 400 || len(lines.Content) != 3 || lines.Content[2] != errLine {
		t.Errorf("view=lines&from=-3: %+v", lines)
	}
	var grep struct {
		Matches []struct {
			Line int    `json:"line"`
			Text string `json:"text"`
		} `json:"matches"`
		TotalMatches int `json:"total_matches"`
	}
	grepOut := ts.mustCall(200, "GET", "/v1/artifacts/"+ref+"?agent="+agent+"&view=grep&pattern=ERROR", nil, nil)
	if err := json.Unmarshal([]byte(grepOut), &grep); err != nil {
		t.Fatal(err)
	}
	if grep.TotalMatches != 1 || len(grep.Matches) != 1 || grep.Matches[0].Line != 400 || grep.Matches[0].Text != errLine {
		t.Errorf("view=grep&pattern=ERROR: %s", grepOut)
	}

	// No secret anywhere it could be read back: the pack, the env dump's
	// drill-downs (every line of it), GET.
	envRef := url.PathEscape(session.ArtifactRef(maskedText(t, ts, base, agent, "r002")))
	reads := map[string]string{
		"pack":  out,
		"lines": ts.mustCall(200, "GET", "/v1/artifacts/"+envRef+"?agent="+agent+"&view=lines&from=1&to=200", nil, nil),
		"grep":  ts.mustCall(200, "GET", "/v1/artifacts/"+envRef+"?agent="+agent+"&view=grep&pattern=.&max=200", nil, nil),
		"GET":   ts.mustCall(200, "GET", base+"?agent="+agent, nil, nil),
	}
	for name, read := range reads {
		for _, v := range f.values() {
			if strings.Contains(read, v) {
				t.Errorf("%s holds the secret %q", name, v)
			}
		}
	}
	if !strings.Contains(reads["lines"], "[secret:github-token]") {
		t.Errorf("the env dump's lines show no mask:\n%s", reads["lines"])
	}
}

// maskedText is the stored text of an item, as GET answers it.
func maskedText(t *testing.T, ts *testServer, base, agent, id string) string {
	t.Helper()
	var s struct {
		Items []session.Item `json:"items"`
	}
	if err := json.Unmarshal([]byte(ts.mustCall(200, "GET", base+"?agent="+agent, nil, nil)), &s); err != nil {
		t.Fatal(err)
	}
	for _, it := range s.Items {
		if it.ID == id {
			return it.Text
		}
	}
	t.Fatalf("no item %s", id)
	return ""
}
