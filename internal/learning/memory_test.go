package learning_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/learning"
	"github.com/contextrouter/contextrouter/internal/learning/learningtest"
)

var ctx = context.Background()

func TestMemoryConformance(t *testing.T) {
	for name, file := range map[string]bool{"memory": false, "file": true} {
		t.Run(name, func(t *testing.T) {
			learningtest.Run(t, func(t *testing.T) learning.Store {
				dir := ""
				if file {
					dir = t.TempDir()
				}
				m, err := learning.NewMemory(dir)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.CloseOutcomes() })
				return m
			})
		})
	}
}

// A restarted store reads its records back, deletes included, and a line
// a crash cut short is skipped.
func TestMemoryFileRestart(t *testing.T) {
	dir := t.TempDir()
	m, err := learning.NewMemory(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := learning.DefaultBounds
	for _, q := range []string{"q1", "q2", "q3"} {
		if _, err := learning.Learn(ctx, m, learning.Record{Owner: "a", Agent: "a", Source: "s", Tool: "t", Text: q, Outcome: learning.Success}, b); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := m.DeleteOutcomes(ctx, learning.Filter{Agent: "a", ID: learning.Key("a", "s", "t", "q2")}); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	m.CloseOutcomes()
	f, _ := os.OpenFile(filepath.Join(dir, learning.FileName), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"add": {"id": "x", "own`)
	f.Close()
	m2, err := learning.NewMemory(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.CloseOutcomes()
	got, _ := m2.Outcomes(ctx, "a")
	var texts []string
	for _, r := range got {
		texts = append(texts, r.Text)
	}
	if len(got) != 2 || !strings.Contains(strings.Join(texts, ","), "q1") || !strings.Contains(strings.Join(texts, ","), "q3") {
		t.Errorf("after restart: %v, want q1 and q3", texts)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct{ text, outcome, want string }{
		{"q", "success", ""},
		{"q", "maybe", `outcome: "maybe" must be success or failure`},
		{"  ", "failure", "text: the question is empty"},
		{strings.Repeat("a", learning.MaxText+1), "success", "text is 1025 bytes; learned questions are limited to 1024 bytes"},
	} {
		t.Run(c.want, func(t *testing.T) {
			err := learning.Check(c.text, c.outcome)
			if got := errString(err); got != c.want {
				t.Errorf("Check = %q, want %q", got, c.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
