package server

import (
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// TestDetectionOverHTTP: the quickstart's incident-help route reads the intent
// classifier; the answer carries detection, and each classifier that ran is
// observed in contextrouter_classifier_confidence.
func TestDetectionOverHTTP(t *testing.T) {
	ts := startServer(t, Options{Paths: []string{quickstart}, PollInterval: -1})
	ts.waitReady()
	cases := []struct {
		name, text string
		detect     []string
		wantLabel  string
		wantTicket bool
		observed   float64
	}{
		{"read by a condition", "The robots in the Lisbon warehouse stopped picking orders", nil, "incident", false, 1},
		{"asked for", "What is FLEET-77 about?", []string{"intent"}, "", true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := ts.query(engine.Request{Text: tc.text, Agent: "eng-assistant", Detect: tc.detect})
			d := resp.Detection
			if d == nil {
				t.Fatal("no detection in the answer")
			}
			if c, ok := d.Classifiers["intent"]; !ok || (tc.wantLabel != "" && c.Label != tc.wantLabel) {
				t.Errorf("intent = %+v, want label %q", c, tc.wantLabel)
			}
			if got := len(d.Entities) > 0 && d.Entities[0].Type == "ticket"; got != tc.wantTicket {
				t.Errorf("entities %+v", d.Entities)
			}
			if v, ok := ts.metric("contextrouter_classifier_confidence", "classifier", "intent"); !ok || v != tc.observed {
				t.Errorf("classifier_confidence observations = %v, %v; want %v", v, ok, tc.observed)
			}
		})
	}
}
