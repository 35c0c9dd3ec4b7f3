package engine

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// fuzzQueryDeadline is the context deadline of a fuzzed query; fuzzHangGuard
// is how long the target waits for Query to return before calling it a hang.
// Query stops at its deadline (a condition's loops are interruptible), so
// the guard is only reached when it does not: a real hang.
const (
	fuzzQueryDeadline = 2 * time.Second
	fuzzHangGuard     = 30 * time.Second
)

// fixtureConditions returns the route conditions of the example manifests.
func fixtureConditions(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, file := range []string{"../../examples/quickstart/routes.yaml", "../../config/samples/routes.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var r v1alpha1.ContextRoute
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if r.Spec.When != "" {
				out = append(out, r.Spec.When)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no conditions in the fixtures")
	}
	return out
}

// FuzzCondition compiles an arbitrary route condition and, when it compiles,
// runs a query with arbitrary text, agent, tags and metadata through a
// router whose route "fuzz" carries it. Inputs stay within the request
// bounds Query enforces; grow repeats them up to those bounds, where an
// expensive condition costs the most. Whatever the input: nothing panics,
// Query returns before a deadline-bound guard with an answer, a request
// error or a stop at the deadline, the route's outcome is what evaluating
// the condition gives, and the response keeps the budget and accounts for
// every candidate.
func FuzzCondition(f *testing.F) {
	for i, cond := range fixtureConditions(f) {
		f.Add(cond, "How many vacation days do I get, and can I carry them over?", "hr-assistant", "hr\nonboarding", "department=engineering", uint8(i), uint8(i), int(0))
	}
	// Conditions that fail at query time, and ones from the environment's tests.
	f.Add(`metadata["missing"] == "x"`, "what is new", "eng-bot", "", "department=engineering", uint8(0), uint8(2), int(0))
	f.Add(`vars.nope == 1 || int(text) > 0`, "12", "", "hr", "", uint8(3), uint8(8), int(0))
	f.Add(`1 / size(tags) > 0`, "divide", "", "", "a=b", uint8(0), uint8(4), int(0))
	f.Add(`text.split(" ").size() > 3 && tags.exists(t, t.startsWith("onb"))`, "deploy the canary", "", "onboarding", "", uint8(128), uint8(5), int(50))
	f.Add(`metadata[?"missing"].orValue("none") == "none" && vars.region == "eu"`, "budget", "eng-bot", "", "a=b", uint8(255), uint8(7), int(0))
	f.Add(`containsAllWords(text, [agent, "x y"]) || text.matches("^a+$")`, "aaaa", "x", "", "", uint8(200), uint8(1), int(10))

	f.Fuzz(func(t *testing.T, cond, text, agent, tagText, mdText string, grow, mode uint8, maxTokens int) {
		c, err := compileCached(cond)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("condition %q: empty compile error", cond)
			}
			return
		}
		if c != nil { // nil: no condition
			for _, n := range c.detect.names {
				if n != "intent" {
					return // a condition naming a classifier the router lacks is refused (TestValidateClassifiers)
				}
			}
			for _, l := range c.detect.labels {
				if !slices.ContainsFunc(intentClassifier().Spec.Labels, func(x v1alpha1.ClassifierLabel) bool { return x.Name == l.label }) && l.label != "other" {
					return // a label the classifier lacks is refused (TestDetectionConditionChecks)
				}
			}
		}
		req := fuzzRequest(text, agent, tagText, mdText, grow, maxTokens)

		truncations := []v1alpha1.TruncationMode{v1alpha1.TruncationDrop, v1alpha1.TruncationTruncateEnd, v1alpha1.TruncationTruncateMiddle}
		estimators := v1alpha1.TokenEstimators()
		cfg := &Config{
			Router: router(func(s *v1alpha1.ContextRouterSpec) {
				s.Budget.MaxTokens = 120
				s.Budget.ReserveTokens = 20
				s.Budget.Truncation = truncations[int(mode)%len(truncations)]
				s.Budget.Estimator = estimators[int(mode)/len(truncations)%len(estimators)]
				// One variable: a map of several would make map-order results of a
				// condition differ between two evaluations.
				s.Variables = map[string]apiextensionsv1.JSON{"region": {Raw: []byte(`"eu"`)}}
			}),
			Routes: []v1alpha1.ContextRoute{
				routeTo("always", "", "prompt"),
				routeTo("fuzz", cond, "echo", "handbook"),
			},
			Sources: []v1alpha1.ContextSource{
				inlineSource("prompt", "System prompt", "You are Acme's assistant. Answer briefly."),
				// The query text itself, so truncation sees arbitrary content.
				inlineSource("echo", "Echo", "Echo: "+req.Text),
				inlineSource("handbook", "Handbook", "# Handbook\n\n## Vacation\n\nEmployees get 25 vacation days per year; up to five carry over.\n\n## Deploys\n\nDeploys run through the pipeline with a canary stage."),
			},
			// The quickstart's conditions read detected.intent.
			Classifiers: []v1alpha1.ContextClassifier{intentClassifier()},
		}
		snap, err := Compile(context.Background(), cfg, Options{})
		if err != nil {
			t.Fatalf("Compile with condition %q: %v", cond, err)
		}

		type result struct {
			resp *Response
			err  error
		}
		done := make(chan result, 1)
		ctx, cancel := context.WithTimeout(context.Background(), fuzzQueryDeadline)
		defer cancel()
		go func() {
			resp, err := snap.Query(ctx, req)
			done <- result{resp, err}
		}()
		var res result
		select {
		case res = <-done:
		case <-time.After(fuzzHangGuard):
			t.Fatalf("Query did not return within %s (deadline %s): condition %q, text of %d bytes, %d tags, %d metadata pairs",
				fuzzHangGuard, fuzzQueryDeadline, cond, len(req.Text), len(req.Tags), len(req.Metadata))
		}

		var stopped *StoppedError
		switch {
		case res.err == nil:
		case errors.As(res.err, &stopped):
			if !errors.Is(res.err, context.DeadlineExceeded) || stopped.Route != "fuzz" {
				t.Fatalf("Query stopped, but not by its deadline in the fuzzed condition: %v", res.err)
			}
			return
		case errors.Is(res.err, ErrBadRequest):
			return
		default:
			t.Fatalf("Query error is neither a request error nor a stop: %v", res.err)
		}
		if strings.TrimSpace(req.Text) == "" || req.MaxTokens < 0 {
			t.Fatalf("Query answered an invalid request (text %q, max_tokens %d)", req.Text, req.MaxTokens)
		}
		resp := res.resp
		checkInvariants(t, snap, req, resp)
		if !slices.Contains(resp.MatchedRoutes, "always") {
			t.Errorf("matched_routes %v lacks the unconditional route", resp.MatchedRoutes)
		}
		if resp.Chunks == nil || resp.DeniedSources == nil || resp.FailedSources == nil || resp.RouteErrors == nil {
			t.Errorf("nil list in response: %+v", resp)
		}

		// The route's outcome is the condition's value on this request.
		matched := slices.Contains(resp.MatchedRoutes, "fuzz")
		errored := slices.ContainsFunc(resp.RouteErrors, func(e RouteError) bool { return e.Route == "fuzz" })
		if matched && errored {
			t.Fatalf("route both matched and failed: %+v", resp)
		}
		if len(req.Metadata) > 1 {
			return // map order may change the value of conditions that iterate metadata
		}
		want, werr := true, error(nil)
		if c != nil {
			act := newActivation(&req, snap.vars)
			act.det = snap.queryDetector(context.Background(), &req)
			want, werr = c.eval(context.Background(), act)
		}
		switch {
		case werr != nil && !errored:
			t.Errorf("condition %q fails (%v) but the query reports no route error (matched %v)", cond, werr, matched)
		case werr == nil && errored:
			t.Errorf("condition %q evaluates to %v but the query reports an error: %+v", cond, want, resp.RouteErrors)
		case werr == nil && want != matched:
			t.Errorf("condition %q evaluates to %v, the query matched = %v", cond, want, matched)
		}
	})
}

// fuzzRequest builds a request within Query's bounds from fuzzed parts:
// tags one per line, metadata "key=value" per line. grow > 0 repeats the
// text up to grow/255 of MaxTextBytes and the tags and metadata up to their
// counts; grow > 127 also makes every tag and metadata value as long as
// allowed. That is where conditions cost the most.
func fuzzRequest(text, agent, tagText, mdText string, grow uint8, maxTokens int) Request {
	req := Request{Text: fill(text, MaxTextBytes*int(grow)/255, MaxTextBytes), Agent: agent[:min(len(agent), MaxAgentBytes)], MaxTokens: maxTokens}
	tagLen, valueLen := 0, 0
	if grow > 127 {
		tagLen, valueLen = MaxTagBytes, MaxMetadataValueBytes
	}
	if tagText != "" {
		req.Tags = strings.Split(tagText, "\n")
		for i, tag := range req.Tags {
			req.Tags[i] = fill(tag, tagLen, MaxTagBytes)
		}
	}
	if n := len(req.Tags); grow > 0 && n > 0 {
		for i := n; i < MaxTags; i++ {
			req.Tags = append(req.Tags, fill(req.Tags[i%n]+strconv.Itoa(i), 0, MaxTagBytes))
		}
	}
	req.Tags = req.Tags[:min(len(req.Tags), MaxTags)]
	for _, line := range strings.Split(mdText, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if req.Metadata == nil {
			req.Metadata = map[string]string{}
		}
		req.Metadata[k[:min(len(k), MaxMetadataKeyBytes)]] = fill(v, valueLen, MaxMetadataValueBytes)
	}
	if grow > 0 && len(req.Metadata) > 0 {
		keys := make([]string, 0, len(req.Metadata))
		for k := range req.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i := 0; len(req.Metadata) < MaxMetadataPairs && i < 4*MaxMetadataPairs; i++ {
			k := keys[i%len(keys)]
			req.Metadata[k[:min(len(k), MaxMetadataKeyBytes-4)]+strconv.Itoa(i)] = req.Metadata[k]
		}
	}
	for k := range req.Metadata {
		if len(req.Metadata) <= MaxMetadataPairs {
			break
		}
		delete(req.Metadata, k)
	}
	return req
}

// fill repeats s up to about want bytes and cuts it to at most limit bytes.
func fill(s string, want, limit int) string {
	if s != "" && want > len(s) {
		s = strings.Repeat(s, want/len(s))
	}
	return s[:min(len(s), limit)]
}
