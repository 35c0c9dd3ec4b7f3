package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestClassifierSeriesFollowReloads: a classifier that a reload removes (here
// renamed) leaves no contextrouter_classifier_confidence series behind.
func TestClassifierSeriesFollowReloads(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(quickstart)); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()
	ts.query(engine.Request{Text: "The site is unreachable", Agent: "eng-assistant", Detect: []string{"intent"}})
	if _, ok := ts.metric("contextrouter_classifier_confidence", "classifier", "intent"); !ok {
		t.Fatal("no series for the classifier intent")
	}

	rename := func(file string, pairs ...string) {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		writeAtomic(t, filepath.Join(dir, file), strings.NewReplacer(pairs...).Replace(string(data)))
	}
	rename("routes.yaml", "detected.intent.", "detected.triage.")
	rename("classifiers.yaml", "name: intent\n", "name: triage\n")
	eventually(t, 10*time.Second, "the renamed classifier", func() bool {
		r := ts.query(engine.Request{Text: "The site is unreachable", Agent: "eng-assistant", Detect: []string{"*"}})
		if r.Detection == nil {
			return false
		}
		_, ok := r.Detection.Classifiers["triage"]
		return ok
	})
	if _, ok := ts.metric("contextrouter_classifier_confidence", "classifier", "intent"); ok {
		t.Error("the series of the removed classifier intent is still exported")
	}
	if _, ok := ts.metric("contextrouter_classifier_confidence", "classifier", "triage"); !ok {
		t.Error("no series for the classifier triage")
	}
}
