package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/tokenize"
)

// manifestConditions returns the non-empty `when` of every ContextRoute in
// the YAML files of dir.
func manifestConditions(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var r v1alpha1.ContextRoute
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if r.Kind == v1alpha1.KindContextRoute && r.Spec.When != "" {
				out = append(out, r.Spec.When)
			}
		}
	}
	if len(out) < 3 {
		t.Fatalf("%s: found %d conditions, expected the quickstart's", dir, len(out))
	}
	return out
}

// wordList is `fn(text, [...])` over n generated entries of the given words each.
func wordList(fn string, n, words int) string {
	entries := make([]string, n)
	for i := range entries {
		ws := make([]string, words)
		for j := range ws {
			ws[j] = fmt.Sprintf("term%dx%d", i, j)
		}
		entries[i] = fmt.Sprintf("%q", strings.Join(ws, " "))
	}
	return fmt.Sprintf("%s(text, [%s])", fn, strings.Join(entries, ", "))
}

// acceptedConditions must stay under the cost limit: the manifests' (added by
// the tests), the benchmarks', typical word lists and input tests.
var acceptedConditions = append(append([]string{}, benchRoutes[1:]...),
	wordList("containsAnyWord", 300, 1),
	wordList("containsAnyWord", 50, 2),
	wordList("containsAllWords", 20, 3),
	`containsAnyWord(text, tags)`,
	`containsAllWords(text, tags)`,
	`containsAnyWord(metadata["x"], ["urgent", "asap", "right now"])`,
	`containsAnyWord(text, tags.map(t, t.lowerAscii()))`,
	`containsAnyWord(text, ["first day", "per diem"]) && containsAllWords(text, ["vat", "reclaim"])`,
	`tags.exists(text, containsAnyWord(text, ["pto"]))`,
	`containsAnyWord(text, [agent, metadata["team"]])`,
	`agent.indexOf(metadata["x"]) >= 0`,
	`agent.lastIndexOf(metadata["x"]) >= 0 || metadata["x"].indexOf(agent) >= 0`,
	`text.lowerAscii().contains("vacation")`,
	`text.matches("(?i)vacation|pto|leave")`,
	`text.split(" ").exists(w, w == "pto")`,
	`text.split(" ").size() > 3`,
	`size(text) > 200 && text.size() < 60000`,
	`tags.exists(t, t.startsWith("eng-"))`,
	`tags.join(",").contains("eng")`,
	`[agent, metadata["team"]].join("/") == "a/b"`,
	`[tags, ["x"]].flatten().size() > 2`,
	`metadata.exists(k, k.startsWith("x-") && metadata[k] == "1")`,
	`"department" in metadata && metadata["department"] == "engineering"`,
	`metadata[?"priority"].orValue("low") == "high"`,
	`agent in vars.teams || vars.teams.exists(t, t == agent)`,
	`vars.region == "eu" && vars.tier >= 2`,
	`double(metadata["score"]) > 0.5`,
	`text.replace("-", " ").contains("day off")`,
	`tags.sort()[0] == "a" && tags.distinct().size() > 1`,
)

// refusedConditions must be refused. All but the last were accepted before
// the cost model priced what they name.
var refusedConditions = []struct{ when, why, want string }{
	{`lists.range(150).exists(i, containsAnyWord(text, tags))`, "word lists priced by their entries (was 6,555 per call)", "too expensive"},
	{`containsAnyWord(text, text.split(" "))`, "a list of up to 32,768 entries", "too expensive"},
	{`containsAnyWord(text, metadata["kw"].split(","))`, "up to 1,024 entries of unknown size", "too expensive"},
	{`text.indexOf(tags.join("") + "b") >= 0`, "join's result size (was 129 characters)", "too expensive"},
	{`lists.range(100000).exists(i, size(text) == i)`, "size(string) counts runes", "too expensive"},
	{`lists.range(50000).exists(i, text.size() > i)`, "size(string) counts runes", "too expensive"},
	{`lists.range(100000).exists(i, double(text) > 1.0)`, "parsing reads the whole string", "too expensive"},
	{`lists.range(100000).exists(i, text in metadata)`, "a map key is hashed", "too expensive"},
	{`lists.range(20000).exists(i, metadata[?text].hasValue())`, "an optional map key is hashed", "too expensive"},
	{`[lists.range(1000), lists.range(1000)].flatten().exists(i, text.contains("zz"))`, "flatten's result size (was 2)", "the worst-case cost cannot be bounded"},
	{`"%s %s".format([text, text]).size() > 0`, "format's output is not bounded", "format is not available"},
	{`tags.all(a, tags.all(b, tags.all(c, text.contains(a + b + c))))`, "nested loops", "too expensive"},
}

func TestConditionCostTable(t *testing.T) {
	accepted := append(append(manifestConditions(t, "../../examples/quickstart"), manifestConditions(t, "../../config/samples")...), acceptedConditions...)
	for _, when := range accepted {
		t.Run("accepted/"+short(when), func(t *testing.T) {
			if _, err := compileCondition(when); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
	for _, tt := range refusedConditions {
		t.Run("refused/"+short(tt.when), func(t *testing.T) {
			_, err := compileCondition(tt.when)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q (%s)", err, tt.want, tt.why)
			}
		})
	}
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

// maxInputs are requests at every bound, shaped to make word matching and
// string searches work hardest: many one-letter words, one huge word,
// repeated phrases, multi-byte letters, and words the stemmer has not seen.
func maxInputs() map[string]*Request {
	mk := func(text, tag, key, value, agent string) *Request {
		tags := make([]string, MaxTags)
		for i := range tags {
			tags[i] = tag
		}
		md := map[string]string{}
		for _, k := range []string{"x", "department", "priority", "kw", "team", "score"} {
			md[k] = value
		}
		for i := 0; len(md) < MaxMetadataPairs; i++ {
			md[fmt.Sprintf("%s%04d", key[:len(key)-4], i)] = value
		}
		return &Request{Text: text, Agent: agent, Tags: tags, Metadata: md}
	}
	fill := func(unit string, n int) string {
		s := strings.Repeat(unit, n/len(unit)+1)[:n]
		return strings.ToValidUTF8(s, "")
	}
	rng := rand.New(rand.NewSource(7))
	var distinct strings.Builder
	for distinct.Len() < MaxTextBytes-16 {
		for range 5 + rng.Intn(5) {
			distinct.WriteByte(byte('a' + rng.Intn(26)))
		}
		distinct.WriteByte(' ')
	}
	return map[string]*Request{
		"spaces":         mk(fill("a ", MaxTextBytes), fill("a ", MaxTagBytes-2)+" b", fill("k", MaxMetadataKeyBytes), fill("a ", MaxMetadataValueBytes-2)+" b", fill("a", MaxAgentBytes)),
		"one word":       mk(fill("a", MaxTextBytes), fill("a", MaxTagBytes), fill("k", MaxMetadataKeyBytes), fill("a", MaxMetadataValueBytes), fill("a", MaxAgentBytes)),
		"phrases":        mk(fill("vacation days per diem first day ", MaxTextBytes), fill("first day ", MaxTagBytes), fill("day ", MaxMetadataKeyBytes), fill("per diem, vacation,", MaxMetadataValueBytes), fill("b", MaxAgentBytes)),
		"unicode":        mk(fill("üä ", MaxTextBytes), fill("üä ", MaxTagBytes), fill("ü", MaxMetadataKeyBytes), fill("üä ", MaxMetadataValueBytes), fill("ü", MaxAgentBytes)),
		"short question": mk(fill("a ", sharedWordsMinBytes), fill("a ", MaxTagBytes-2)+" b", fill("k", MaxMetadataKeyBytes), fill("a ", MaxMetadataValueBytes-2)+" b", fill("a", MaxAgentBytes)),
		"distinct":       mk(distinct.String(), fill("zq ", MaxTagBytes), fill("k", MaxMetadataKeyBytes), fill("0.75", MaxMetadataValueBytes), fill("a", MaxAgentBytes)),
	}
}

// maxVars are spec.variables at MaxVarsSize.
func maxVars() ref.Val {
	teams := make([]any, MaxVarsSize)
	for i := range teams {
		teams[i] = strings.Repeat("t", MaxVarsSize-4) + fmt.Sprintf("%04d", i)
	}
	return types.DefaultTypeAdapter.NativeToValue(map[string]any{"region": strings.Repeat("e", MaxVarsSize), "tier": 2.0, "teams": teams})
}

// wordsCostTracker is the runtime side of the cost model of the word
// functions: the same formula as the estimate, applied to the actual
// arguments. cel-go tracks every other function itself.
type wordsCostTracker struct{}

func (wordsCostTracker) CallCost(_, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	if overloadID != containsAnyWordID && overloadID != containsAllWordsID {
		return nil
	}
	text := string(args[0].(types.String))
	textWords := uint64(len(wordsOf(text).stems))
	cost := uint64(1)
	if registeredText(text) == nil {
		cost += tokenizeCost(uint64(utf8.RuneCountInString(text)))
	}
	list := args[1].(traits.Lister)
	for i := types.Int(0); i < list.Size().(types.Int); i++ {
		e := string(list.Get(i).(types.String))
		cost += wordsEntryCost(uint64(utf8.RuneCountInString(e)), uint64(len(tokenize.WordStems(e))), textWords)
	}
	return &cost
}

// The static estimate is an upper bound of the cost cel-go measures while
// evaluating every accepted condition on inputs at the request bounds. This
// is the evidence that the estimator is sound.
func TestCostEstimateBoundsActualCost(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates every condition on inputs at the request bounds")
	}
	accepted := append(append(manifestConditions(t, "../../examples/quickstart"), manifestConditions(t, "../../config/samples")...), acceptedConditions...)
	inputs := maxInputs()
	vars := maxVars()
	for _, when := range accepted {
		t.Run(short(when), func(t *testing.T) {
			ast, iss := celEnv.Compile(when)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			estimate, err := checkCost(ast)
			if err != nil {
				t.Fatal(err)
			}
			prg, err := celEnv.Program(ast, cel.CostTracking(wordsCostTracker{}), cel.EvalOptions(cel.OptOptimize))
			if err != nil {
				t.Fatal(err)
			}
			for name, req := range inputs {
				act := newActivation(req, vars)
				act.det = maxDetector()
				act.question.register(req.Text) // as matchRoutes does
				_, det, _ := prg.Eval(act)
				act.question.unregister()
				if det == nil || det.ActualCost() == nil {
					t.Fatalf("%s: no cost tracked", name)
				}
				if actual := *det.ActualCost(); actual > estimate {
					t.Errorf("%s: actual cost %d exceeds the estimate %d", name, actual, estimate)
				}
			}
		})
	}
}

func TestContainsSeqMatchesNaiveSearch(t *testing.T) {
	naive := func(stems, seq []string) bool {
		for i := 0; i+len(seq) <= len(stems); i++ {
			if strings.Join(stems[i:i+len(seq)], " ") == strings.Join(seq, " ") {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewSource(3))
	pick := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + rng.Intn(3)))
		}
		return out
	}
	for i := 0; i < 5000; i++ {
		stems, seq := pick(rng.Intn(40)), pick(1+rng.Intn(20))
		if got, want := containsSeq(stems, seq), naive(stems, seq); got != want {
			t.Fatalf("containsSeq(%v, %v) = %v, want %v", stems, seq, got, want)
		}
	}
}

// Word matching on a text long enough for the word set, and the entry bound.
func TestContainsWordsLongText(t *testing.T) {
	text := strings.Repeat("Employees ask about sick leave. ", 20) + "How many vacation-days do new employees get?"
	tests := []struct {
		when string
		want bool
		err  string
	}{
		{`containsAnyWord(text, ["vacation"])`, true, ""},
		{`containsAnyWord(text, ["vacations day"])`, true, ""},
		{`containsAnyWord(text, ["days vacation"])`, false, ""},
		{`containsAnyWord(text, ["vacation salary"])`, false, ""},
		{`containsAllWords(text, ["sick leave", "new employee"])`, true, ""},
		{`containsAllWords(text, ["sick leave", "salary"])`, false, ""},
		{`containsAnyWord(text, ["leave employees ask"])`, true, ""},
		{`containsAnyWord(text, [metadata["long"]])`, false, "list entry 0 is 1025 bytes; entries are limited to 1024 bytes"},
	}
	req := &Request{Text: text, Metadata: map[string]string{"long": strings.Repeat("a", MaxWordEntryBytes+1)}}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			act := newActivation(req, nil)
			act.question.register(req.Text)
			defer act.question.unregister()
			if w := wordsOf(req.Text); w.set == nil {
				t.Fatalf("%d words: the test needs more than %d to use the word set", len(w.stems), linearScanMax)
			}
			checkCondition(t, tt.when, act, tt.want, tt.err)
		})
	}
}

func TestRequestBounds(t *testing.T) {
	kb := knowledgeBase(t)
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "prompt")}, Sources: kb[:1]})
	n := func(c byte, k int) string { return strings.Repeat(string(c), k) }
	manyTags := func(k int) []string { return strings.Split(n('t', k), "") }
	manyPairs := func(k int) map[string]string {
		m := map[string]string{}
		for i := range k {
			m[fmt.Sprint(i)] = "v"
		}
		return m
	}
	tests := []struct {
		name string
		req  Request
		want string // "" = accepted
	}{
		{"text at the limit", Request{Text: n('x', MaxTextBytes)}, ""},
		{"text past the limit", Request{Text: n('x', MaxTextBytes+1)}, "bad request: text is 65537 bytes; it is limited to 65536 bytes"},
		{"blank text", Request{Text: " \n"}, "bad request: text must not be empty"},
		{"agent at the limit", Request{Text: "q", Agent: n('a', MaxAgentBytes)}, ""},
		{"agent past the limit", Request{Text: "q", Agent: n('a', 576<<10)}, "bad request: agent is 589824 bytes; it is limited to 253 bytes"},
		{"tags at the limit", Request{Text: "q", Tags: manyTags(MaxTags)}, ""},
		{"too many tags", Request{Text: "q", Tags: manyTags(MaxTags + 1)}, "bad request: 65 tags; at most 64 are allowed"},
		{"tag at the limit", Request{Text: "q", Tags: []string{n('t', MaxTagBytes)}}, ""},
		{"tag past the limit", Request{Text: "q", Tags: []string{"hr", n('t', 576<<10)}}, "bad request: tags[1] is 589824 bytes; tags are limited to 256 bytes"},
		{"pairs at the limit", Request{Text: "q", Metadata: manyPairs(MaxMetadataPairs)}, ""},
		{"too many pairs", Request{Text: "q", Metadata: manyPairs(MaxMetadataPairs + 1)}, "bad request: 65 metadata pairs; at most 64 are allowed"},
		{"key and value at the limit", Request{Text: "q", Metadata: map[string]string{n('k', MaxMetadataKeyBytes): n('v', MaxMetadataValueBytes)}}, ""},
		{"value past the limit", Request{Text: "q", Metadata: map[string]string{"team": "a", "x": n('v', 900000)}}, `bad request: metadata["x"] is 900000 bytes; values are limited to 1024 bytes`},
		{"key past the limit", Request{Text: "q", Metadata: map[string]string{n('k', 300): "v"}}, `bad request: metadata key "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"… is 300 bytes; keys are limited to 256 bytes`},
		{"smallest bad key is named", Request{Text: "q", Metadata: map[string]string{"b": n('v', 2000), "a": n('v', 2000), "c": "ok"}}, `bad request: metadata["a"] is 2000 bytes`},
		{"negative max_tokens", Request{Text: "q", MaxTokens: -1}, "bad request: max_tokens and max_chunks must not be negative"},
		{"max_tools at the limit", Request{Text: "q", MaxTools: MaxToolsPerRequest}, ""},
		{"max_tools past the limit", Request{Text: "q", MaxTools: MaxToolsPerRequest + 1}, "bad request: max_tools is 101; it must be between 0 and 100"},
		{"negative max_tools", Request{Text: "q", MaxTools: -1}, "bad request: max_tools is -1; it must be between 0 and 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Query(context.Background(), tt.req)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrBadRequest with %q", err, tt.want)
			}
		})
	}
}

func TestVariablesBound(t *testing.T) {
	big := make([]string, MaxVarsSize+1)
	for i := range big {
		big[i] = `"t"`
	}
	for _, tt := range []struct{ name, json, want string }{
		{"long string", fmt.Sprintf("%q", strings.Repeat("e", MaxVarsSize+1)), "spec.variables.v: string of 1025 bytes; variables are limited to 1024 bytes per string"},
		{"long list", "[" + strings.Join(big, ",") + "]", "spec.variables.v: list of 1025 entries"},
		{"nested", fmt.Sprintf(`{"a": [1, %q]}`, strings.Repeat("e", MaxVarsSize+1)), "spec.variables.v.a[1]: string of 1025 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := router(func(s *v1alpha1.ContextRouterSpec) {
				s.Variables = map[string]apiextensionsv1.JSON{"v": {Raw: []byte(tt.json)}}
			})
			_, err := Compile(context.Background(), &Config{Router: r}, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// A condition with a loop stops when its context ends, deterministically:
// the context is over before the evaluation starts.
func TestConditionStopsWhenContextEnds(t *testing.T) {
	c, err := compileCached(`text.split(" ").exists(w, w == "zz")`)
	if err != nil {
		t.Fatal(err)
	}
	if !c.loops {
		t.Fatal("the condition must count as an interruptible loop")
	}
	act := newActivation(maxInputs()["spaces"], nil)
	if got, err := c.eval(context.Background(), act); got || err != nil {
		t.Fatalf("without a deadline = %v, %v; want false, nil", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.eval(ctx, act); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want it to wrap context.Canceled", err)
	}
}

// slowRoutes are routes whose conditions take milliseconds each at the
// request bounds, within the cost limit.
func slowRoutes(n int) []v1alpha1.ContextRoute {
	routes := []v1alpha1.ContextRoute{routeTo("always", "", "prompt")}
	for i := range n {
		routes = append(routes, routeTo(fmt.Sprintf("slow-%d", i), `text.split(" ").exists(w, w == "zz") || text.split(" ").exists(w, w == "yy")`, "prompt"))
	}
	return routes
}

func TestQueryStopsAtDeadline(t *testing.T) {
	kb := knowledgeBase(t)
	s := compile(t, &Config{Router: router(nil), Routes: slowRoutes(20), Sources: kb[:1]})
	req := Request{Text: maxInputs()["spaces"].Text}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	resp, err := s.Query(ctx, req)
	var stopped *StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.DeadlineExceeded) || resp != nil {
		t.Fatalf("Query = %v, %v; want a *StoppedError wrapping context.DeadlineExceeded and no answer", resp, err)
	}
	if !strings.HasPrefix(stopped.Route, "slow-") {
		t.Errorf("stopped at route %q, want a slow one", stopped.Route)
	}
	want := fmt.Sprintf("query exceeded the 20ms timeout while evaluating the condition of route %q", stopped.Route)
	if got := stopped.TimeoutMessage(20 * time.Millisecond); got != want {
		t.Errorf("TimeoutMessage = %q, want %q", got, want)
	}

	// Past its deadline, a query stops before the first condition.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	if _, err := s.Query(past, req); !errors.As(err, &stopped) || stopped.Route != "slow-0" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: error = %v, want a *StoppedError at route slow-0", err)
	}
	// A canceled query (the client went away) is stopped too, not answered.
	canceled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := s.Query(canceled, req); !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: error = %v, want a *StoppedError wrapping context.Canceled", err)
	}
}

// Concurrent queries with long questions each match on their own words:
// the shared words of one query's text never serve another's.
func TestConcurrentQuestionsKeepTheirWords(t *testing.T) {
	kb := knowledgeBase(t)
	const n = 8
	var routes []v1alpha1.ContextRoute
	for i := range n {
		routes = append(routes, routeTo(fmt.Sprintf("r%d", i), fmt.Sprintf(`containsAnyWord(text, ["marker%d"]) && containsAllWords(text, ["filler", "marker%d"])`, i, i), "prompt"))
	}
	s := compile(t, &Config{Router: router(nil), Routes: routes, Sources: kb[:1]})
	filler := strings.Repeat("filler words of a long question ", 20)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				// A fresh string each time, as every request decodes its own.
				text := fmt.Sprintf("%s marker%d %d", filler, i, j)
				resp, err := s.Query(context.Background(), Request{Text: text})
				if err != nil {
					errs <- err
					return
				}
				if got := strings.Join(resp.MatchedRoutes, ","); got != fmt.Sprintf("r%d", i) {
					errs <- fmt.Errorf("question %d/%d matched %q", i, j, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
