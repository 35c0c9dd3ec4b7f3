package tools

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

var benchQueries = []string{
	"create a stripe invoice for the customer",
	"list kubernetes pods across all regions",
	"archive an old slack channel",
	"export hr employee records as CSV",
	"who is on call in pagerduty for this incident",
	"summarize the history of the jira ticket",
	"find flights and hotels for my trip",
	"what's the weather forecast for tomorrow",
}

// benchOptions are the router's defaults (spec.tools.collapseThreshold
// "0.8").
var benchOptions = Options{Collapse: 0.8}

func BenchmarkToolIndex10k(b *testing.B) {
	entries := genCatalog(10000, 1)
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(entries, benchOptions)
	}
}

func benchSearch(b *testing.B, allowed func(i int) bool) {
	entries := genCatalog(10000, 1)
	ix := NewIndex(entries, benchOptions)
	var mask []bool
	if allowed != nil {
		mask = make([]bool, len(entries))
		for i := range mask {
			mask[i] = allowed(i)
		}
	}
	b.ReportAllocs()
	// Per-query percentiles besides the mean: the target is a p50.
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		ix.Search(benchQueries[i%len(benchQueries)], 10, mask)
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

func BenchmarkToolSearch10k(b *testing.B) { benchSearch(b, nil) }

func BenchmarkToolSearch10kAllowed1pct(b *testing.B) {
	benchSearch(b, func(i int) bool { return i%100 == 0 })
}

func BenchmarkToolGraph10k(b *testing.B) {
	ix := NewIndex(genCatalog(10000, 1), Options{})
	b.ReportAllocs()
	for b.Loop() {
		ix.Graph(nil)
	}
}

// BenchmarkToolSearchLongQuery asks the longest question a request may
// carry (64 KiB) made of distinct catalog words, in a catalog where every
// tool has a word of its own: its cost must stay linear in its terms.
func BenchmarkToolSearchLongQuery(b *testing.B) {
	entries := genCatalog(10000, 1)
	for i := range entries {
		entries[i].Tool.Description += fmt.Sprintf(" Code k%05d.", i)
	}
	ix := NewIndex(entries, benchOptions)
	q := longQuery(entries, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		ix.Search(q, 10, nil)
	}
}

// longQuery joins the distinct words of the catalog's names and
// descriptions, then numbers, up to size bytes.
func longQuery(entries []Entry, size int) string {
	var sb strings.Builder
	seen := map[string]bool{}
	for _, e := range entries {
		for _, w := range strings.Fields(nameWords(e.Tool.Name) + " " + e.Tool.Description) {
			if !seen[w] && sb.Len()+len(w)+1 <= size {
				seen[w] = true
				sb.WriteString(w + " ")
			}
		}
	}
	for i := 0; sb.Len()+8 <= size; i++ {
		fmt.Fprintf(&sb, "w%06d ", i)
	}
	return sb.String()
}
