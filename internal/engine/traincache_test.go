package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/classify"
)

// countingTrain trains for real and counts the trainings; while hold is
// open each training waits on it after counting.
type countingTrain struct {
	n    atomic.Int64
	hold chan struct{}
}

func (c *countingTrain) train(exs []classify.Example, opts classify.Options) (*classify.Model, error) {
	c.n.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	return classify.Train(exs, opts)
}

func trainExamples(i int) []classify.Example {
	return []classify.Example{
		{Text: fmt.Sprintf("refund order %d please", i), Label: "refund"},
		{Text: fmt.Sprintf("deploy release %d now", i), Label: "deploy"},
	}
}

// TestTrainCacheTrainsOnce: callers asking at once for one classifier get
// one model from one training; the others wait for it. Each training is
// held until all callers have trained or a moment has passed, so callers
// that each trained (no single flight) are all counted.
func TestTrainCacheTrainsOnce(t *testing.T) {
	const callers = 8
	ct := &countingTrain{hold: make(chan struct{})}
	c := newTrainCache(4, ct.train)
	go func() {
		deadline := time.Now().Add(300 * time.Millisecond)
		for ct.n.Load() < callers && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(ct.hold)
	}()
	models := make([]*classify.Model, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			m, err := c.get(trainExamples(0), classify.Options{OutOfScopeLabel: "other"})
			if err != nil {
				t.Error(err)
			}
			models[i] = m
		})
	}
	wg.Wait()
	if n := ct.n.Load(); n != 1 {
		t.Errorf("%d callers at once trained %d times, want once", callers, n)
	}
	for i, m := range models {
		if m == nil || m != models[0] {
			t.Fatalf("caller %d got model %p, caller 0 %p: want one shared model", i, m, models[0])
		}
	}
	if _, err := c.get(trainExamples(0), classify.Options{OutOfScopeLabel: "other"}); err != nil || ct.n.Load() != 1 {
		t.Errorf("a later caller: %v, %d trainings", err, ct.n.Load())
	}
}

// TestTrainCacheKeepsRecentlyUsed: past its bound the cache drops the
// model used longest ago, one, not all (it emptied itself at 64).
func TestTrainCacheKeepsRecentlyUsed(t *testing.T) {
	ct := &countingTrain{}
	c := newTrainCache(3, ct.train)
	get := func(i int) *classify.Model {
		t.Helper()
		m, err := c.get(trainExamples(i), classify.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m0 := get(0)
	get(1)
	get(2)
	if get(0) != m0 { // 0 is now the most recently used, 1 the least
		t.Fatal("model 0 retrained below the bound")
	}
	get(3) // one past the bound: 1 goes
	if n := ct.n.Load(); n != 4 {
		t.Fatalf("%d trainings for 4 classifiers", n)
	}
	for _, i := range []int{0, 2, 3} {
		get(i)
	}
	if n := ct.n.Load(); n != 4 {
		t.Errorf("the three most recently used models were retrained: %d trainings, want 4", n)
	}
	if get(0) != m0 {
		t.Error("model 0 was replaced")
	}
	get(1)
	if n := ct.n.Load(); n != 5 {
		t.Errorf("the least recently used model was kept: %d trainings, want 5", n)
	}
	if n := c.models.Len(); n != 3 {
		t.Errorf("%d models kept, want the bound, 3", n)
	}
}

// TestTrainCacheKeepsNoFailure: a failed training is answered to its
// callers and tried again by the next.
func TestTrainCacheKeepsNoFailure(t *testing.T) {
	ct := &countingTrain{}
	c := newTrainCache(3, ct.train)
	bad := classify.Options{Threshold: 2}
	for range 2 {
		if _, err := c.get(trainExamples(0), bad); err == nil {
			t.Fatal("threshold 2 trained")
		}
	}
	if n := ct.n.Load(); n != 2 || c.models.Len() != 0 {
		t.Errorf("%d trainings, %d models kept; want 2, 0", n, c.models.Len())
	}
}

// TestConcurrentCompilesShareOneModel: routers compiled at once with one
// classifier (examples no other test uses) share one trained model.
func TestConcurrentCompilesShareOneModel(t *testing.T) {
	const compiles = 6
	cfg := detectConfig()
	cfg.Classifiers[0].Spec.Labels[0].Examples = append(cfg.Classifiers[0].Spec.Labels[0].Examples,
		fmt.Sprintf("a refund asked at %d", time.Now().UnixNano()))
	snaps := make([]*Snapshot, compiles)
	var wg sync.WaitGroup
	for i := range compiles {
		wg.Go(func() {
			s, err := Compile(context.Background(), cfg, Options{})
			if err != nil {
				t.Error(err)
				return
			}
			snaps[i] = s
		})
	}
	wg.Wait()
	for i, s := range snaps {
		if s == nil || s.classifiers[0].model == nil || s.classifiers[0].model != snaps[0].classifiers[0].model {
			t.Fatalf("compile %d trained a model of its own", i)
		}
	}
}
