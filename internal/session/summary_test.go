package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/budget"
	"github.com/contextrouter/contextrouter/internal/session"
	"github.com/contextrouter/contextrouter/internal/session/sessiontest"
)

// summarise firewalls text as the result of a tool call and returns its
// artifact (the summary included).
func summarise(t *testing.T, text string, o session.Options, meta ...map[string]string) session.Artifact {
	t.Helper()
	call := session.Item{ID: "c7", Kind: session.KindToolCall, Text: "ci.build_log(job=42)"}
	res := session.Item{ID: "r7", Kind: session.KindToolResult, ParentID: "c7", Text: text}
	if len(meta) > 0 {
		call.Metadata, res.Metadata = meta[0], meta[1]
	}
	o.Phase = session.PhaseInterpret
	p := build(t, items(call, res), o)
	if len(p.Artifacts) != 1 {
		t.Fatalf("%d artifacts; want the result firewalled:\n%s", len(p.Artifacts), p.Text)
	}
	a := p.Artifacts[0]
	if !strings.Contains(p.Text, "tool result r7: "+a.Summary+"\n") {
		t.Fatalf("the summary is not what stands for the result:\n%s", p.Text)
	}
	return a
}

// logWith is a log of n lines of routine steps with the given lines at
// their numbers.
func logWith(n int, at map[int]string) string {
	var b strings.Builder
	for k := 1; k <= n; k++ {
		if l, ok := at[k]; ok {
			b.WriteString(l + "\n")
			continue
		}
		fmt.Fprintf(&b, "step %d of %d: compile module %d with the release toolchain\n", k, n, k)
	}
	return b.String()
}

func TestFirewallSummary(t *testing.T) {
	longLine := strings.Repeat("x", 300) + " ERROR deep in a long line " + strings.Repeat("y", 50)
	var many = map[int]string{}
	for k := 10; k <= 120; k += 10 {
		many[k] = fmt.Sprintf("FATAL worker %d died", k)
	}
	tests := []struct {
		name     string
		text     string
		maxChars int
		want     []string
		not      []string
	}{
		{"the issue's log", sessiontest.BuildLog(400), 0, []string{
			"[21416 bytes, 400 lines; stored as artifact sha256:",
			"\nhead:\n  L1: 2026-03-02T10:00:00Z step 1/400: compile module-1\n  L2: 2026-03-02T10:00:01Z step 2/400: compile module-2\n  L3: 2026-03-02T10:00:02Z step 3/400: compile module-3\n",
			"\ntail:\n  L398: 2026-03-02T10:06:37Z step 398/400: compile module-398\n  L399: 2026-03-02T10:06:38Z step 399/400: compile module-399\n  L400: 2026-03-02T10:06:39Z ERROR payment-service: connection refused (dial tcp 10.0.3.7:5432)\n",
			"\nsignals:\n  L212: 2026-03-02T10:03:31Z WARN retry 1/3 failed: timeout",
		}, []string{"L4:", "L397:"}},
		{"more signal lines than shown", logWith(200, many), 0, []string{
			"signals (5 of 12):\n  L10: FATAL worker 10 died\n  L20: FATAL worker 20 died\n  L30: FATAL worker 30 died\n  L40: FATAL worker 40 died\n  L50: FATAL worker 50 died",
		}, []string{"L60:"}},
		{"a short text is all head", strings.Repeat("y", 2100) + "\nsecond line\n", 0, []string{"2 lines;", "head:\n  L1: " + strings.Repeat("y", 160) + "…\n  L2: second line"}, []string{"tail:", "signals"}},
		{"a signal past a head line's cut", longLine + "\n" + logWith(100, nil), 0, []string{
			"head:\n  L1: " + strings.Repeat("x", 160) + "…\n",
			"signals:\n  L1: …" + strings.Repeat("x", 39) + " ERROR deep in a long line " + strings.Repeat("y", 50),
		}, nil},
		{"no final line break", strings.TrimSuffix(logWith(50, map[int]string{50: "last: panic: runtime error"}), "\n"), 0, []string{"L50: last: panic: runtime error"}, []string{"signals"}},
		{"lines cut shorter to fit", strings.Repeat(strings.Repeat("z", 300)+" error here\n", 40), 0, []string{"head:\n  L1: " + strings.Repeat("z", 80) + "…", "tail:\n  L38:", "signals (5 of 40):\n  L1: …" + strings.Repeat("z", 19) + " error here\n  L2: …"}, nil},
		{"the smallest bound leaves lines out", strings.Repeat(strings.Repeat("z", 300)+" error here\n", 40), 100, []string{"head:\n  L1: " + strings.Repeat("z", 40) + "…"}, []string{"L40:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := summarise(t, tc.text, session.Options{FirewallMaxChars: tc.maxChars})
			for _, w := range tc.want {
				if !strings.Contains(a.Summary, w) {
					t.Errorf("summary lacks %q:\n%s", w, a.Summary)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(a.Summary, w) {
					t.Errorf("summary holds %q:\n%s", w, a.Summary)
				}
			}
			limit := max(max(tc.maxChars, session.DefaultFirewallMaxChars)/2, 200)
			if tc.maxChars > 0 {
				limit = max(tc.maxChars/2, 200)
			}
			if n := utf8.RuneCountInString(a.Summary); n > limit {
				t.Errorf("summary of %d characters; the bound is %d:\n%s", n, limit, a.Summary)
			}
			if a.MediaType != "text/plain" || a.Lines != strings.Count(strings.TrimSuffix(tc.text, "\n"), "\n")+1 {
				t.Errorf("artifact %s, %d lines", a.MediaType, a.Lines)
			}
		})
	}
}

// TestSignalWords: which words make a signal line, and which do not.
func TestSignalWords(t *testing.T) {
	for _, tc := range []struct {
		line   string
		signal bool
	}{
		{"ERROR: disk full", true},
		{"error: disk full", true},
		{"2 errors found", true},
		{"Fatal: no space", true},
		{"goroutine 1 panicked", true},
		{"panic: runtime error: index out of range", true},
		{"--- FAIL: TestDeploy (0.01s)", true},
		{"build FAILED", true},
		{"failure in step 3", true},
		{"Traceback (most recent call last):", true},
		{"TypeError: x is undefined", true},
		{"java.lang.NullPointerException at Foo.bar", true},
		{"IOError: broken pipe", true},
		{"raise ValueError(\"exception\")", true},
		{"a reign of terror", false},
		{"error_count=0", false},
		{"errorCount: 0", false},
		{"TERROR alert level", false},
		{"fail2ban started", false},
		{"the preferred option", false},
		{"exceptional results", false},
		{"panicky users", false},
		{"tracebacks_enabled", false},
	} {
		t.Run(tc.line, func(t *testing.T) {
			a := summarise(t, logWith(60, map[int]string{30: tc.line}), session.Options{})
			if got := strings.Contains(a.Summary, "  L30: "+tc.line); got != tc.signal {
				t.Errorf("signal %v, want %v:\n%s", got, tc.signal, a.Summary)
			}
		})
	}
}

// TestRefsNotBlobs: a pack lists an artifact by reference; the text of a
// 37 KB JSON result is not in it, and the pack stays small.
func TestRefsNotBlobs(t *testing.T) {
	big := sessiontest.BigJSON(650)
	if len(big) < 37_000 {
		t.Fatalf("fixture is %d bytes; want 37 kB", len(big))
	}
	deep := "invoice-0456-deepvalue" // a row far past the summary's head
	if !strings.Contains(big, deep) {
		t.Fatal("fixture lacks its deep value")
	}
	s := items(session.Item{ID: "u1", Kind: session.KindUserTurn, Text: "which invoices are open?"},
		session.Item{ID: "c1", Kind: session.KindToolCall, Text: "invoices.list()"},
		session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: big})
	for _, ph := range session.Phases {
		p := build(t, s, session.Options{Phase: ph})
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if ph == session.PhaseRoute {
			continue // the route phase may leave the result out
		}
		if len(p.Artifacts) != 1 || p.Artifacts[0].Bytes != len(big) || p.Artifacts[0].Summary == "" {
			t.Fatalf("%s: artifacts %+v", ph, p.Artifacts)
		}
		if strings.Contains(string(raw), deep) || strings.Contains(string(raw), `"content"`) {
			t.Errorf("%s: the pack holds the result's text", ph)
		}
		if len(raw) > 6000 {
			t.Errorf("%s: the pack is %d bytes for a %d-byte result", ph, len(raw), len(big))
		}
	}
}

// TestFirewallStats: stats.firewall counts the included firewalled
// results, their bytes and the tokens their summaries saved.
func TestFirewallStats(t *testing.T) {
	log, js := sessiontest.BuildLog(400), sessiontest.BigJSON(300)
	s := items(
		session.Item{ID: "c1", Kind: session.KindToolCall, Text: "ci.log()"},
		session.Item{ID: "r1", Kind: session.KindToolResult, ParentID: "c1", Text: log},
		session.Item{ID: "c2", Kind: session.KindToolCall, Text: "invoices.list()"},
		session.Item{ID: "r2", Kind: session.KindToolResult, ParentID: "c2", Text: js},
		session.Item{ID: "r3", Kind: session.KindToolResult, ParentID: "c2", Text: "small"},
	)
	for _, name := range []v1alpha1.TokenEstimator{v1alpha1.EstimatorCharsDiv4, v1alpha1.EstimatorWords} {
		t.Run(string(name), func(t *testing.T) {
			est, _ := budget.New(name)
			p := build(t, s, session.Options{Phase: session.PhaseAnswer, Estimator: est})
			want := 0
			for _, a := range p.Artifacts {
				text := map[string]string{"r1": log, "r2": js}[a.ItemID]
				raw := est.Count("tool result " + a.ItemID + ": " + text + "\n")
				if d := est.Count(text) + est.Count("tool result "+a.ItemID+": \n") - raw; d < 0 || d > 1 {
					t.Errorf("%s: the text and its label counted apart differ from the line by %d tokens", a.ItemID, d)
				}
				want += est.Count(text) + est.Count("tool result "+a.ItemID+": \n") - est.Count("tool result "+a.ItemID+": "+a.Summary+"\n")
			}
			fw := p.Stats.Firewall
			if fw.Artifacts != 2 || p.Stats.Firewalled != 2 || fw.Bytes != len(log)+len(js) || fw.TokensSaved != want || want < 5000 {
				t.Fatalf("stats.firewall %+v; want 2 artifacts, %d bytes, %d tokens saved", fw, len(log)+len(js), want)
			}
			// A result left out by the budget is not counted.
			p = build(t, s, session.Options{Phase: session.PhaseAnswer, Estimator: est, MaxTokens: 200})
			if p.Stats.Firewall.Artifacts != len(p.Artifacts) || p.Stats.Firewall.Artifacts == 2 {
				t.Fatalf("under 200 tokens: stats.firewall %+v, %d artifacts", p.Stats.Firewall, len(p.Artifacts))
			}
		})
	}
}

func TestFirewallKeep(t *testing.T) {
	order := `{"order": {"id": "o-17", "status": "declined", "lines": [{"sku": "A-1", "qty": 2}]}, "error": {"code": 4012, "message": "card expired"}, "audit": "` + strings.Repeat("a", 3000) + `", "note": "` + strings.Repeat("n", 1500) + `"}`
	policy := func(t *testing.T, rules ...v1alpha1.FirewallKeepRule) *session.Policy {
		t.Helper()
		pol, err := session.NewPolicy(&v1alpha1.ContextRouterSpec{Sessions: v1alpha1.SessionsSpec{Firewall: v1alpha1.FirewallSpec{Keep: rules}}})
		if err != nil {
			t.Fatal(err)
		}
		return pol
	}
	payments := v1alpha1.FirewallKeepRule{Tools: []string{"payments.*"}, Paths: []string{".order.status", `["error"].code`, ".order.lines[0]", ".missing.path", ".order.lines[9]"}}
	tests := []struct {
		name      string
		rules     []v1alpha1.FirewallKeepRule
		callMeta  map[string]string
		resMeta   map[string]string
		callText  string
		maxChars  int
		want, not []string
	}{
		{"by the call's text", []v1alpha1.FirewallKeepRule{payments}, nil, nil, "payments.charge(order=17)", 0,
			[]string{"\nkeep: .order.status = \"declined\"\nkeep: .error.code = 4012\nkeep: .order.lines[0] = {\"sku\":\"A-1\",\"qty\":2}\nhead:"}, []string{".missing", "lines[9]"}},
		{"by the result's metadata", []v1alpha1.FirewallKeepRule{payments}, map[string]string{"tool": "ci.log"}, map[string]string{"tool": "payments.refund"}, "whatever()", 0,
			[]string{"keep: .order.status = \"declined\""}, nil},
		{"by the call's metadata", []v1alpha1.FirewallKeepRule{payments}, map[string]string{"tool": "payments.refund"}, nil, "whatever()", 0,
			[]string{"keep: .order.status = \"declined\""}, nil},
		{"another tool", []v1alpha1.FirewallKeepRule{payments}, nil, nil, "payment.charge()", 0, nil, []string{"keep:"}},
		{"the call's text up to white space", []v1alpha1.FirewallKeepRule{{Tools: []string{"lookup"}, Paths: []string{".error.message"}}}, nil, nil, "  lookup order 17", 0,
			[]string{`keep: .error.message = "card expired"`}, nil},
		{"rules in order, a path once", []v1alpha1.FirewallKeepRule{{Tools: []string{"*"}, Paths: []string{".error.code"}}, {Tools: []string{"x", "pay*"}, Paths: []string{".order.id", `.["error"]["code"]`}}}, nil, nil, "payments.charge()", 0,
			[]string{"keep: .error.code = 4012\nkeep: .order.id = \"o-17\"\nhead:"}, nil},
		{"a value cut at 1,000 characters", []v1alpha1.FirewallKeepRule{{Tools: []string{"*"}, Paths: []string{".note"}}}, nil, nil, "t()", 0,
			[]string{`keep: .note = "` + strings.Repeat("n", session.MaxKeepValueRunes-1) + "…\n"}, nil},
		{"keep lines bounded together", []v1alpha1.FirewallKeepRule{{Tools: []string{"*"}, Paths: []string{".audit", ".order.status", ".note", ".error.code"}}}, nil, nil, "t()", 0,
			[]string{"keep: .audit = \"" + strings.Repeat("a", 999) + "…\nkeep: .order.status = \"declined\"\nkeep: .note = ", "\nkeep: .error.code = 4012\n"}, []string{"more paths left out"}},
		{"keep lines survive the smallest bound", []v1alpha1.FirewallKeepRule{payments}, nil, nil, "payments.charge()", 100,
			[]string{"keep: .order.status = \"declined\"", "keep: .error.code = 4012"}, []string{"head:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := map[string]string{"x": "y"}
			if tc.resMeta != nil {
				res = tc.resMeta
			}
			call := session.Item{ID: "c7", Kind: session.KindToolCall, Text: tc.callText, Metadata: tc.callMeta}
			s := items(call, session.Item{ID: "r7", Kind: session.KindToolResult, ParentID: "c7", Text: order, Metadata: res})
			p := build(t, s, session.Options{Phase: session.PhaseAnswer, Policy: policy(t, tc.rules...), FirewallMaxChars: tc.maxChars})
			if len(p.Artifacts) != 1 {
				t.Fatalf("%d artifacts", len(p.Artifacts))
			}
			sum := p.Artifacts[0].Summary
			for _, w := range tc.want {
				if !strings.Contains(sum, w) {
					t.Errorf("summary lacks %q:\n%s", w, sum)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(sum, w) {
					t.Errorf("summary holds %q:\n%s", w, sum)
				}
			}
		})
	}
	t.Run("the keep lines' bound", func(t *testing.T) {
		var paths []string
		doc := map[string]string{}
		for i := range 6 {
			k := fmt.Sprint("k", i)
			doc[k] = strings.Repeat(k, 600)
			paths = append(paths, "."+k)
		}
		raw, _ := json.Marshal(doc)
		s := items(session.Item{ID: "c", Kind: session.KindToolCall, Text: "t()"}, session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: string(raw)})
		p := build(t, s, session.Options{Phase: session.PhaseAnswer, Policy: policy(t, v1alpha1.FirewallKeepRule{Tools: []string{"t"}, Paths: paths})})
		sum := p.Artifacts[0].Summary
		kept := strings.Count(sum, "\nkeep: .k")
		if kept != 3 || !strings.Contains(sum, "\nkeep: 3 more paths left out: the keep lines' 4000-character bound\n") {
			t.Fatalf("%d keep lines:\n%s", kept, sum)
		}
	})
	t.Run("a text result keeps nothing", func(t *testing.T) {
		s := items(session.Item{ID: "c", Kind: session.KindToolCall, Text: "t()"}, session.Item{ID: "r", Kind: session.KindToolResult, ParentID: "c", Text: sessiontest.BuildLog(100)})
		p := build(t, s, session.Options{Phase: session.PhaseAnswer, Policy: policy(t, v1alpha1.FirewallKeepRule{Tools: []string{"*"}, Paths: []string{"."}})})
		if strings.Contains(p.Text, "keep:") || len(p.Artifacts) != 1 {
			t.Fatalf("%s", p.Text)
		}
	})
	t.Run("a bad rule is refused naming it", func(t *testing.T) {
		_, err := session.NewPolicy(&v1alpha1.ContextRouterSpec{Sessions: v1alpha1.SessionsSpec{Firewall: v1alpha1.FirewallSpec{Keep: []v1alpha1.FirewallKeepRule{payments, {Tools: []string{"a["}, Paths: []string{"status"}}}}}})
		if err == nil || !strings.Contains(err.Error(), "spec.sessions.firewall.keep[1].tools[0]") || !strings.Contains(err.Error(), `spec.sessions.firewall.keep[1].paths[0]: Invalid value: "status": path "status": unexpected 's' at byte 0`) {
			t.Fatalf("error %v", err)
		}
	})
}
