package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

func items(its ...session.Item) *session.Session { return &session.Session{Items: its} }

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", session.MaxItemBytes+1)
	many := make([]session.Item, session.MaxItems+1)
	for i := range many {
		many[i] = session.Item{ID: fmt.Sprint("i", i), Kind: session.KindUserTurn}
	}
	tags := make([]string, session.MaxTags+1)
	for i := range tags {
		tags[i] = "t"
	}
	cases := []struct {
		name string
		s    *session.Session
		want string // "" = valid
	}{
		{"valid chain", items(session.Item{ID: "c", Kind: session.KindToolCall}, session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c"}), ""},
		{"parent after child", items(session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c"}, session.Item{ID: "c", Kind: session.KindToolCall}), ""},
		{"unknown kind", items(session.Item{ID: "a", Kind: "tool"}), `items[0].kind: unknown kind "tool"`},
		{"missing kind", items(session.Item{ID: "a"}), "items[0].kind: required"},
		{"missing id", items(session.Item{Kind: session.KindUserTurn}), "items[0].id: required"},
		{"duplicate id", items(session.Item{ID: "a", Kind: session.KindUserTurn}, session.Item{ID: "a", Kind: session.KindUserTurn}), `items[1].id: "a" is also the id of items[0]`},
		{"unknown parent", items(session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "nope"}), `items[0].parent_id: no item has id "nope"`},
		{"self parent", items(session.Item{ID: "a", Kind: session.KindUserTurn, ParentID: "a"}), "items[0].parent_id: an item cannot be its own parent"},
		{"cycle", items(session.Item{ID: "a", Kind: session.KindUserTurn, ParentID: "c"}, session.Item{ID: "b", Kind: session.KindUserTurn, ParentID: "a"}, session.Item{ID: "c", Kind: session.KindUserTurn, ParentID: "b"}),
			"parent_id: parent chain loops: a → c → b → a"},
		{"text past the limit", items(session.Item{ID: "a", Kind: session.KindUserTurn, Text: long}), fmt.Sprintf("items[0].text: %d bytes; an item's text is limited to %d bytes", session.MaxItemBytes+1, session.MaxItemBytes)},
		{"text at the limit", items(session.Item{ID: "a", Kind: session.KindUserTurn, Text: long[1:]}), ""},
		{"too many items", &session.Session{Items: many}, fmt.Sprintf("a session holds at most %d items", session.MaxItems)},
		{"too many tags", items(session.Item{ID: "a", Kind: session.KindUserTurn, Tags: tags}), "items[0].tags: 33 tags; at most 32"},
		{"id past the limit", items(session.Item{ID: strings.Repeat("i", session.MaxIDBytes+1), Kind: session.KindUserTurn}), "items[0].id: 129 bytes"},
		{"bad sensitivity", items(session.Item{ID: "a", Kind: session.KindUserTurn, Sensitivity: "secret"}), `items[0].sensitivity: unsupported value "secret"`},
		{"negative token estimate", items(session.Item{ID: "a", Kind: session.KindUserTurn, TokenEstimate: -1}), "items[0].token_estimate: -1"},
		{"fact value past the limit", &session.Session{Facts: []session.Fact{{Key: "k", Value: strings.Repeat("v", session.MaxFactBytes+1)}}}, "facts[0].value: 4097 bytes"},
		{"duplicate fact", &session.Session{Facts: []session.Fact{{Key: "k"}, {Key: "k"}}}, `facts[1].key: "k" is also the key of facts[0]`},
		{"episode without id", &session.Session{Episodes: []session.Episode{{Text: "x"}}}, "episodes[0].id: 0 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := session.Validate(c.s)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q; want it to contain %q", err, c.want)
			}
		})
	}
}

// filler is a session of n turns of distinct text.
func filler(n int) []session.Item {
	var out []session.Item
	for i := range n {
		out = append(out, session.Item{ID: fmt.Sprintf("f%03d", i), Kind: session.KindUserTurn,
			Text: fmt.Sprintf("turn %d talks about topic%d and subject%d with detail%d", i, i, i*7, i*13)})
	}
	return out
}

func build(t *testing.T, s *session.Session, o session.Options) *session.Pack {
	t.Helper()
	p, err := session.Build(s, o)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, p, o)
	return p
}

// checkInvariants holds for every pack: the stats account for every
// candidate, the text fits the budget, every included item's parent is
// included.
func checkInvariants(t *testing.T, p *session.Pack, o session.Options) {
	t.Helper()
	st := p.Stats
	if st.Included+st.Dropped.Total() != st.Candidates {
		t.Errorf("included %d + dropped %d != candidates %d", st.Included, st.Dropped.Total(), st.Candidates)
	}
	if len(p.Items) != st.Included {
		t.Errorf("%d items listed, %d included", len(p.Items), st.Included)
	}
	est := o.Estimator
	if est == nil {
		est, _ = budget.New("")
	}
	if n := est.Count(p.Text); n > p.Budget || p.TotalTokens > p.Budget {
		t.Errorf("text is %d tokens (total_tokens %d); budget %d", n, p.TotalTokens, p.Budget)
	}
	sum := 0
	for _, s := range p.Sections {
		sum += s.Tokens
	}
	if sum != p.TotalTokens {
		t.Errorf("sections sum to %d tokens, total_tokens %d", sum, p.TotalTokens)
	}
	if st.MemoryCap > 0 && st.SectionTokens[session.SectionEpisodes] > st.MemoryCap+16 {
		t.Errorf("episodes take %d tokens, memory cap %d", st.SectionTokens[session.SectionEpisodes], st.MemoryCap)
	}
}

func ids(p *session.Pack) map[string]session.PackItem {
	m := map[string]session.PackItem{}
	for _, it := range p.Items {
		m[it.ID] = it
	}
	return m
}

func TestClosure(t *testing.T) {
	s := items(append(filler(20),
		session.Item{ID: "call", Kind: session.KindToolCall, Text: "weather.get(city=Lisbon)"},
		session.Item{ID: "result", Kind: session.KindToolResult, ParentID: "call", Text: "sunny, 24 degrees"},
		session.Item{ID: "followup", Kind: session.KindAgentMessage, ParentID: "result", Text: "It is sunny in Lisbon."})...)
	t.Run("a tool_result brings its tool_call", func(t *testing.T) {
		p := build(t, s, session.Options{Phase: session.PhaseInterpret, Query: "sunny degrees"})
		got := ids(p)
		if _, ok := got["result"]; !ok {
			t.Fatal("result not included")
		}
		c, ok := got["call"]
		if !ok || !c.Closure || c.Section != session.SectionToolResults {
			t.Fatalf("call = %+v, %v; want it brought by closure into tool_results", c, ok)
		}
		if p.Stats.Closures < 1 {
			t.Fatalf("closures = %d", p.Stats.Closures)
		}
		if strings.Index(p.Text, "tool call call:") > strings.Index(p.Text, "tool result result:") {
			t.Fatal("the call is rendered after its result")
		}
	})
	// At every budget, an included item has its whole parent chain.
	for _, limit := range []int{10, 20, 30, 40, 60, 80, 120, 200, 400} {
		t.Run(fmt.Sprint("budget ", limit), func(t *testing.T) {
			for _, ph := range session.Phases {
				p := build(t, s, session.Options{Phase: ph, MaxTokens: limit, Query: "sunny"})
				got := ids(p)
				parents := map[string]string{"result": "call", "followup": "result"}
				for child, parent := range parents {
					if _, ok := got[child]; ok {
						if _, ok := got[parent]; !ok {
							t.Errorf("%s: %s included without its parent %s", ph, child, parent)
						}
					}
				}
			}
		})
	}
}

func TestSensitivityFloor(t *testing.T) {
	s := items(
		session.Item{ID: "u", Kind: session.KindUserTurn, Text: "what is my salary"},
		session.Item{ID: "c", Kind: session.KindToolCall, Text: "payroll.get(me)", Sensitivity: v1alpha1.SensitivityConfidential},
		session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: "salary 91234 EUR"},
		session.Item{ID: "pub", Kind: session.KindAgentMessage, Text: "looking it up", Sensitivity: v1alpha1.SensitivityPublic},
	)
	cases := []struct {
		name     string
		access   *engine.Access
		wantIn   []string
		wantOut  []string
		dropped  int
		redacted int
	}{
		{"no permission: Internal, Drop", nil, []string{"u", "pub"}, []string{"c", "r"}, 2, 0},
		{"Confidential clearance", &engine.Access{MaxSensitivity: v1alpha1.SensitivityConfidential, SensitivityAction: v1alpha1.SensitivityActionDrop}, []string{"u", "c", "r", "pub"}, nil, 0, 0},
		{"Public, Drop", &engine.Access{MaxSensitivity: v1alpha1.SensitivityPublic, SensitivityAction: v1alpha1.SensitivityActionDrop}, []string{"pub"}, []string{"u", "c", "r"}, 3, 0},
		{"Internal, Redact", &engine.Access{MaxSensitivity: v1alpha1.SensitivityInternal, SensitivityAction: v1alpha1.SensitivityActionRedact}, []string{"u", "c", "r", "pub"}, nil, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, s, session.Options{Phase: session.PhaseAnswer, Access: c.access})
			got := ids(p)
			for _, id := range c.wantIn {
				if _, ok := got[id]; !ok {
					t.Errorf("%s missing", id)
				}
			}
			for _, id := range c.wantOut {
				if _, ok := got[id]; ok {
					t.Errorf("%s included", id)
				}
			}
			if p.Stats.Dropped.Sensitivity != c.dropped || p.Stats.Redacted != c.redacted {
				t.Errorf("dropped.sensitivity %d, redacted %d; want %d, %d", p.Stats.Dropped.Sensitivity, p.Stats.Redacted, c.dropped, c.redacted)
			}
			if c.redacted > 0 {
				if strings.Contains(p.Text, "payroll.get") || !strings.Contains(p.Text, engine.RedactedContent("session", v1alpha1.SensitivityConfidential)) {
					t.Errorf("redaction not applied:\n%s", p.Text)
				}
			}
		})
	}
}

// Facts, episodes and items without a sensitivity are Internal: an agent
// cleared only to Public loses them, or sees the Internal placeholder.
func TestSensitivityFloorMemory(t *testing.T) {
	s := &session.Session{
		Facts:    []session.Fact{{Key: "home", Value: "Lisbon office"}},
		Episodes: []session.Episode{{ID: "e1", Text: "asked about the office move"}},
		Items:    []session.Item{{ID: "u", Kind: session.KindUserTurn, Text: "where do I sit"}, {ID: "p", Kind: session.KindPolicy, Text: "be kind", Sensitivity: v1alpha1.SensitivityPublic}},
	}
	public := func(a v1alpha1.SensitivityAction) *engine.Access {
		return &engine.Access{MaxSensitivity: v1alpha1.SensitivityPublic, SensitivityAction: a}
	}
	t.Run("Drop", func(t *testing.T) {
		p := build(t, s, session.Options{Phase: session.PhaseAnswer, Access: public(v1alpha1.SensitivityActionDrop)})
		if p.Stats.Dropped.Sensitivity != 3 || p.Stats.Included != 1 || strings.Contains(p.Text, "Lisbon") || strings.Contains(p.Text, "office move") {
			t.Fatalf("stats %+v\n%s", p.Stats, p.Text)
		}
	})
	t.Run("Redact", func(t *testing.T) {
		p := build(t, s, session.Options{Phase: session.PhaseAnswer, Access: public(v1alpha1.SensitivityActionRedact)})
		placeholder := engine.RedactedContent("session", v1alpha1.SensitivityInternal)
		if p.Stats.Redacted != 3 || strings.Count(p.Text, placeholder) != 3 || strings.Contains(p.Text, "Lisbon") || !strings.Contains(p.Text, "be kind") {
			t.Fatalf("stats %+v\n%s", p.Stats, p.Text)
		}
	})
}

func TestFirewall(t *testing.T) {
	j := sessiontest.BigJSON(200)
	if len(j) < 10_000 {
		t.Fatalf("fixture is %d bytes; want > 10 kB", len(j))
	}
	plain := strings.Repeat("log line with words\n", 200)
	cases := []struct {
		name     string
		text     string
		maxChars int
		want     []string // in the summary
		media    string   // "" = not firewalled
	}{
		{"10 kB JSON", j, 0, []string{"JSON object with 4 keys", "invoices (array of 200)", "page (object of 2 keys)", "facts: count = 200; status = ok", "stored as artifact sha256:"}, "application/json"},
		{"JSON array", "[" + strings.Repeat(`{"a":1,"b":[1,2]},`, 300) + `{"a":2,"b":[]}]`, 0, []string{"JSON array of 301 elements, the first object of 2 keys"}, "application/json"},
		{"plain text", plain, 0, []string{"4000 bytes, 200 lines", "head:\n  L1: log line with words\n  L2: log line with words\n  L3: log line with words\ntail:\n  L198: log line with words\n  L199: log line with words\n  L200: log line with words\n\n"}, "text/plain"},
		{"broken JSON is text", `{"a": [1, 2` + strings.Repeat(" ", 3000), 0, []string{"head:"}, "text/plain"},
		{"under the limit", `{"a": 1}`, 0, []string{`{"a": 1}`}, ""},
		{"lower maxChars", `{"status":"ok","n":12345}`, 10, []string{"facts: status = ok; n = 12345"}, "application/json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := items(session.Item{ID: "call", Kind: session.KindToolCall, Text: "invoices.list()"}, session.Item{ID: "res", Kind: session.KindToolResult, ParentID: "call", Text: c.text})
			p := build(t, s, session.Options{Phase: session.PhaseInterpret, FirewallMaxChars: c.maxChars})
			for _, w := range c.want {
				if !strings.Contains(p.Text, w) {
					t.Errorf("text lacks %q:\n%s", w, p.Text)
				}
			}
			if c.media == "" {
				if len(p.Artifacts) != 0 || p.Stats.Firewalled != 0 {
					t.Fatalf("firewalled a small result: %+v", p.Artifacts)
				}
				return
			}
			if len(p.Artifacts) != 1 || p.Stats.Firewalled != 1 {
				t.Fatalf("artifacts %d, firewalled %d; want 1", len(p.Artifacts), p.Stats.Firewalled)
			}
			a := p.Artifacts[0]
			sum := sha256.Sum256([]byte(c.text))
			if a.Ref != "sha256:"+hex.EncodeToString(sum[:]) || a.MediaType != c.media || a.ItemID != "res" || a.Bytes != len(c.text) {
				t.Errorf("artifact %s %s %s, %d bytes", a.Ref, a.MediaType, a.ItemID, a.Bytes)
			}
			if !strings.Contains(p.Text, "tool result res: "+a.Summary+"\n") || !strings.HasPrefix(a.Summary, "[") {
				t.Errorf("the artifact's summary is not what stands for the result:\n%s\n---\n%s", a.Summary, p.Text)
			}
			if ids(p)["res"].Artifact != a.Ref {
				t.Errorf("item does not name its artifact")
			}
			if len(c.text) > 3000 && strings.Contains(p.Text, c.text[len(c.text)-200:]) {
				t.Error("the end of the result is still in the prompt")
			}
			if n := len(p.Sections[3].Text); n > 1600 {
				t.Errorf("tool results section is %d bytes", n)
			}
		})
	}
}

func TestBudgetAndMemoryCap(t *testing.T) {
	s := &session.Session{Items: filler(150)}
	for i := range 60 {
		s.Facts = append(s.Facts, session.Fact{Key: fmt.Sprint("fact", i), Value: strings.Repeat(fmt.Sprint("value", i, " "), 10)})
		s.Episodes = append(s.Episodes, session.Episode{ID: fmt.Sprint("e", i), Text: strings.Repeat(fmt.Sprint("episode", i, " "), 12)})
	}
	for _, estName := range v1alpha1.TokenEstimators() {
		est, _ := budget.New(estName)
		for _, ph := range session.Phases {
			for _, mt := range []int{0, 37, 400, 1500} {
				t.Run(fmt.Sprintf("%s/%s/%d", estName, ph, mt), func(t *testing.T) {
					o := session.Options{Phase: ph, MaxTokens: mt, Estimator: est}
					p := build(t, s, o)
					want := session.DefaultBudget(ph)
					if mt > 0 {
						want = min(want, mt)
					}
					if p.Budget != want {
						t.Fatalf("budget %d, want %d", p.Budget, want)
					}
					mem := 0
					for _, it := range p.Items {
						if it.Kind == "fact" || it.Kind == "episode" {
							mem += it.Tokens
						}
					}
					if mem > p.Stats.MemoryCap {
						t.Errorf("memory takes %d tokens; cap %d", mem, p.Stats.MemoryCap)
					}
					if mt == 0 && p.Stats.SectionTokens[session.SectionHistory] == 0 {
						t.Error("memory crowded out the conversation")
					}
				})
			}
		}
	}
}

func TestMemoryCapOnly(t *testing.T) {
	s := &session.Session{}
	for i := range 100 {
		s.Facts = append(s.Facts, session.Fact{Key: fmt.Sprint("fact", i), Value: fmt.Sprint("remembered value ", i)})
	}
	p := build(t, s, session.Options{Phase: session.PhaseRoute})
	if p.Stats.Dropped.MemoryCap == 0 || p.Stats.Included == 0 {
		t.Fatalf("stats %+v", p.Stats)
	}
	if n := p.Stats.SectionTokens[session.SectionFacts]; n > p.Stats.MemoryCap || n < p.Stats.MemoryCap*3/4 {
		t.Fatalf("facts take %d tokens; cap %d", n, p.Stats.MemoryCap)
	}
}

func TestDedup(t *testing.T) {
	s := items(
		session.Item{ID: "a", Kind: session.KindUserTurn, Text: "restart the payment service in staging"},
		session.Item{ID: "b", Kind: session.KindUserTurn, Text: "Restart the payment service in staging!"},
		session.Item{ID: "c", Kind: session.KindUserTurn, Text: "and then check the logs"},
	)
	p := build(t, s, session.Options{Phase: session.PhaseAnswer})
	got := ids(p)
	if p.Stats.Dropped.Duplicate != 1 || p.Stats.Dedup.Removed != 1 || len(got) != 2 {
		t.Fatalf("duplicate %d, items %v", p.Stats.Dropped.Duplicate, got)
	}
	if _, ok := got["c"]; !ok {
		t.Fatal("a distinct turn was dropped")
	}
}

func TestScoring(t *testing.T) {
	s := items(
		session.Item{ID: "old", Kind: session.KindUserTurn, Text: "kubernetes rollback procedure for the billing deploy"},
		session.Item{ID: "x1", Kind: session.KindUserTurn, Text: "lunch menu for friday"},
		session.Item{ID: "x2", Kind: session.KindUserTurn, Text: "weather in lisbon"},
		session.Item{ID: "tagged", Kind: session.KindUserTurn, Text: "team offsite planning", Tags: []string{"offsite"}},
		session.Item{ID: "new", Kind: session.KindUserTurn, Text: "parking garage closes early"},
	)
	// Which item scores highest says which signal counts.
	cases := []struct {
		name string
		o    session.Options
		want string
	}{
		{"recency", session.Options{Phase: session.PhaseAnswer}, "new"},
		{"query relevance", session.Options{Phase: session.PhaseAnswer, Query: "kubernetes rollback of the billing deploy"}, "old"},
		{"tag match", session.Options{Phase: session.PhaseAnswer, Tags: []string{"offsite"}}, "tagged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, s, c.o)
			best := p.Items[0]
			for _, it := range p.Items {
				if it.Score > best.Score {
					best = it
				}
			}
			if best.ID != c.want {
				t.Fatalf("items %+v; want %s to score highest", p.Items, c.want)
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	s := sessiontest.Bench()
	o := session.Options{Phase: session.PhaseInterpret, Query: "invoice status", Tags: []string{"billing"}}
	var first []byte
	for i := range 5 {
		p := build(t, s, o)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
			continue
		}
		if string(b) != string(first) {
			t.Fatalf("build %d differs from the first", i)
		}
	}
	// Equal scores are ordered by id: two identical-weight facts.
	s2 := &session.Session{Facts: []session.Fact{{Key: "b", Value: "x y"}, {Key: "a", Value: "x z"}}}
	p := build(t, s2, session.Options{Phase: session.PhaseAnswer, MaxTokens: 20})
	if len(p.Items) != 1 || p.Items[0].ID != "fact:a" {
		t.Fatalf("tie not broken by id: %+v", p.Items)
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name string
		s    *session.Session
		o    session.Options
		want string
	}{
		{"unknown phase", items(), session.Options{Phase: "plan"}, `unknown phase "plan"`},
		{"max_tokens past the limit", items(), session.Options{Phase: session.PhaseAnswer, MaxTokens: session.MaxBudget + 1}, "max_tokens is 1000001"},
		{"invalid session", items(session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "gone"}), session.Options{Phase: session.PhaseAnswer}, `no item has id "gone"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := session.Build(c.s, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want %q", err, c.want)
			}
		})
	}
}

func TestReadJSONL(t *testing.T) {
	good := `{"fact": {"key": "customer", "value": "ACME"}}

{"episode": {"id": "e1", "text": "asked about invoices"}}
{"id": "c1", "kind": "tool_call", "text": "invoices.list()", "pinned": true}
{"id": "r1", "kind": "tool_result", "parent_id": "c1", "text": "[]", "tags": ["billing"], "metadata": {"tool": "invoices"}, "token_estimate": 3}
`
	s, err := session.ReadJSONL("s.jsonl", strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Items) != 2 || len(s.Facts) != 1 || len(s.Episodes) != 1 || s.Items[1].ParentID != "c1" || s.Items[1].Metadata["tool"] != "invoices" ||
		!s.Items[0].Pinned || s.Items[1].Pinned {
		t.Fatalf("read %+v", s)
	}
	cases := []struct {
		name, text, want string
	}{
		{"unknown parent", "{\"id\":\"a\",\"kind\":\"user_turn\"}\n\n{\"id\":\"b\",\"kind\":\"tool_result\",\"parent_id\":\"x\"}\n", `s.jsonl:3: parent_id: no item has id "x"`},
		{"cycle", "{\"id\":\"a\",\"kind\":\"user_turn\",\"parent_id\":\"b\"}\n{\"id\":\"b\",\"kind\":\"user_turn\",\"parent_id\":\"a\"}\n", "s.jsonl:1: parent_id: parent chain loops: a → b → a"},
		{"unknown kind", `{"id":"a","kind":"thought"}`, `s.jsonl:1: kind: unknown kind "thought"`},
		{"unknown field", `{"id":"a","kind":"user_turn","parent":"b"}`, "s.jsonl:1: parent: unknown field"},
		{"wrong type", `{"id":"a","kind":"user_turn","tags":"x"}`, "s.jsonl:1: tags: want a list, not a JSON string"},
		{"not JSON", `{"id":`, "s.jsonl:1: not a JSON object"},
		{"two values", `{"id":"a","kind":"user_turn"} {}`, "s.jsonl:1: more than one JSON value"},
		{"fact and item", `{"id":"a","kind":"user_turn","fact":{"key":"k"}}`, "s.jsonl:1: a line holds one item, one fact or one episode"},
		{"fact and a pin", `{"pinned":true,"fact":{"key":"k"}}`, "s.jsonl:1: a line holds one item, one fact or one episode"},
		{"bad fact", "{\"id\":\"a\",\"kind\":\"user_turn\"}\n{\"fact\":{\"value\":\"v\"}}", "s.jsonl:2: fact.key: 0 bytes"},
		{"line too long", `{"id":"a","kind":"user_turn","text":"` + strings.Repeat("x", session.MaxLineBytes) + `"}`, fmt.Sprintf("s.jsonl:1: line longer than %d bytes", session.MaxLineBytes)},
		{"text past the item limit", `{"id":"a","kind":"user_turn","text":"` + strings.Repeat("x", session.MaxItemBytes+1) + `"}`, "s.jsonl:1: text: 262145 bytes"},
		{"id with a line separator", "{\"id\":\"a\",\"kind\":\"user_turn\"}\n{\"id\":\"b\\u2028## Facts\",\"kind\":\"doc_snippet\"}", "s.jsonl:2: id: U+2028 at byte 1 is a line separator"},
		{"fact key with ESC", `{"fact":{"key":"k\u001b[8m","value":"v"}}`, "s.jsonl:1: fact.key: U+001B at byte 1 is a control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := session.ReadJSONL("s.jsonl", strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want %q", err, c.want)
			}
		})
	}
}

func TestBenchSessionShape(t *testing.T) {
	s := sessiontest.Bench()
	n := 0
	for _, it := range s.Items {
		if it.Kind == session.KindToolResult && len(it.Text) > session.DefaultFirewallMaxChars {
			n++
		}
	}
	if len(s.Items) != 200 || n != 10 {
		t.Fatalf("%d items, %d oversized; want 200 and 10", len(s.Items), n)
	}
	p := build(t, s, session.Options{Phase: session.PhaseAnswer, Query: "invoice status"})
	if p.Stats.Firewalled == 0 {
		t.Fatal("no oversized result reached the pack")
	}
}

func BenchmarkBuild200(b *testing.B) {
	s := sessiontest.Bench()
	// answer-deep: the 10 oversized results differ (a trailing space
	// each) and the query names an invoice only their last rows hold, so
	// the answer phase reads each one's whole text for its relevance
	// (api.md §11.3 step 6): the most that rule costs.
	distinct := sessiontest.Bench()
	for i, it := range distinct.Items {
		if len(it.Text) > session.DefaultFirewallMaxChars {
			distinct.Items[i].Text += strings.Repeat(" ", i)
		}
	}
	for _, c := range []struct {
		name, query string
		ph          session.Phase
		s           *session.Session
	}{{"route", "invoice status", session.PhaseRoute, s}, {"answer", "invoice status", session.PhaseAnswer, s},
		{"answer-deep", "invoice 0199 status", session.PhaseAnswer, distinct}} {
		ph, s, query := c.ph, c.s, c.query
		b.Run(c.name, func(b *testing.B) {
			o := session.Options{Phase: ph, Query: query, Tags: []string{"billing"}}
			b.ReportAllocs()
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := session.Build(s, o); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			// The target is a p50; the mean alone hides the spread.
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// TestNames: ids, parent ids, fact keys and episode ids (and session ids)
// refuse what would start a line of a pack or hide what a label says
// (issue 22: a forged "## Facts" section), naming the entry, the field and
// the rune; other Unicode is kept.
func TestNames(t *testing.T) {
	bad := []struct {
		name, s, want string
	}{
		{"NUL", "a\x00b", "U+0000 at byte 1 is a control character"},
		{"ESC", "a\x1b[31m", "U+001B at byte 1 is a control character"},
		{"tab", "a\tb", "U+0009 at byte 1 is a control character"},
		{"line feed", "a\n## Facts", "U+000A at byte 1 is a control character"},
		{"carriage return", "a\rb", "U+000D at byte 1 is a control character"},
		{"next line", "a\u0085## Facts", "U+0085 at byte 1 is a control character"},
		{"line separator", "a\u2028## Facts", "U+2028 at byte 1 is a line separator"},
		{"paragraph separator", "a\u2029## Facts", "U+2029 at byte 1 is a paragraph separator"},
		{"bidi override", "ab\u202Ecd", "U+202E at byte 2 is a format character"},
		{"zero-width space", "a\u200Bb", "U+200B at byte 1 is a format character"},
		{"tag character", "a\U000E0041", "U+E0041 at byte 1 is a format character"},
		{"invalid UTF-8", "a\xffb", "byte 1 is not valid UTF-8"},
	}
	const rule = "; ids and keys must be UTF-8 without control, format or separator characters"
	// at puts a name in each place that holds one; want is the error's prefix.
	type place struct {
		field, want string
		sess        *session.Session
	}
	at := func(s string) []place {
		return []place{
			{"item id", "items[1].id: ", items(session.Item{ID: "u", Kind: session.KindUserTurn}, session.Item{ID: s, Kind: session.KindUserTurn})},
			{"parent id", "items[1].parent_id: ", items(session.Item{ID: "u", Kind: session.KindUserTurn}, session.Item{ID: "r", Kind: session.KindToolResult, ParentID: s})},
			{"fact key", "facts[1].key: ", &session.Session{Facts: []session.Fact{{Key: "k", Value: "v"}, {Key: s, Value: "v"}}}},
			{"episode id", "episodes[0].id: ", &session.Session{Episodes: []session.Episode{{ID: s, Text: "t"}}}},
		}
	}
	for _, b := range bad {
		for _, e := range at(b.s) {
			t.Run(b.name+"/"+e.field, func(t *testing.T) {
				err := session.Validate(e.sess)
				if err == nil || err.Error() != e.want+b.want+rule {
					t.Fatalf("error %v\nwant %s%s%s", err, e.want, b.want, rule)
				}
			})
		}
		t.Run(b.name+"/session id", func(t *testing.T) {
			err := session.ValidateSessionID(b.s)
			if err == nil || !strings.Contains(err.Error(), ": "+b.want+"; only ASCII letters") {
				t.Fatalf("error %v, want it to name %s", err, b.want)
			}
		})
	}
	// Letters of any script, spaces, symbols and emoji stay names.
	for _, s := range []string{"café", "日本語", "a b", "tool:call/1", "🎉", "x\u0301"} {
		for _, e := range at(s) {
			if e.field == "parent id" {
				e.sess.Items[0].ID = s
			}
			if err := session.Validate(e.sess); err != nil {
				t.Errorf("%s %q: %v", e.field, s, err)
			}
		}
	}
	if err := session.ValidateSessionID("a/b"); err == nil || !strings.Contains(err.Error(), `'/' (U+002F) at byte 1 is not allowed`) {
		t.Errorf("session id a/b: %v", err)
	}
}
