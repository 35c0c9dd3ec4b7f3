package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/classify"
)

// limitExamples builds n examples of textBytes bytes each, shared by
// labels labels in turn and written with words drawn from a vocabulary of
// 20,000 made-up words: many character n-grams occur in two texts or more
// and are kept as features, and the labels have nothing to do with the
// text, so no label's gradient ever fades (the expensive case; real
// examples train several times faster).
func limitExamples(n, textBytes, labels int) []classify.Example {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 20000)
	for i := range vocab {
		b := make([]byte, 3+rng.IntN(8))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		vocab[i] = string(b)
	}
	out := make([]classify.Example, n)
	var sb strings.Builder
	for i := range out {
		sb.Reset()
		for {
			w := vocab[rng.IntN(len(vocab))]
			if sb.Len()+1+len(w) > textBytes {
				// The last word fills the text to textBytes exactly.
				if room := textBytes - sb.Len() - 1; room > 0 {
					sb.WriteString(" " + w[:min(len(w), room)])
				}
				break
			}
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(w)
		}
		out[i] = classify.Example{Text: sb.String(), Label: fmt.Sprintf("label-%03d", i%labels)}
	}
	return out
}

// BenchmarkTrainAtLimits trains a classifier at the limits, as a reload
// does (docs/benchmarks.md, "Training at the limits"). peak-heap-MiB is
// the most heap in use seen while training, sampled every 10ms; cpu-s/op
// the process's CPU time (both cores), which a loaded machine stretches
// less than the wall time.
func BenchmarkTrainAtLimits(b *testing.B) {
	const short = 52 // bytes: questions of about ten words
	maxLabels := v1alpha1.MaxClassifierTrainingSize / v1alpha1.MaxClassifierExampleBytes
	shapes := []struct {
		name              string
		n, nbytes, labels int
	}{
		// The most labels, with the text they may have.
		{"most-labels", v1alpha1.MaxClassifierTrainingSize / v1alpha1.MaxClassifierLabels / short, short, v1alpha1.MaxClassifierLabels},
		// The most examples and text, with the labels they may have.
		{"most-examples", v1alpha1.MaxClassifierExamples, short, maxLabels},
		// The longest examples, as many as the text allows.
		{"longest", v1alpha1.MaxClassifierExampleBytes / v1alpha1.MaxExampleBytes, v1alpha1.MaxExampleBytes, maxLabels},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			examples := limitExamples(sh.n, sh.nbytes, sh.labels)
			if msg := v1alpha1.ExampleTotalsError(sh.n, sh.n*sh.nbytes, sh.labels); msg != "" {
				b.Fatalf("the shape is past the limits: %s", msg)
			}
			runtime.GC()
			var peak atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				var ms runtime.MemStats
				t := time.NewTicker(10 * time.Millisecond)
				defer t.Stop()
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			})
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := classify.Train(examples, classify.Options{MaxAlternatives: v1alpha1.DefaultMaxAlternatives}); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuTime is the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
