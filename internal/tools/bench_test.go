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

// BenchmarkToolSearch10kLearned is BenchmarkToolSearch10k with an agent's
// learned outcomes at their bound (learning.DefaultBounds.PerAgent, 2,000:
// 1,800 successes and 200 failures over 500 tools), the overlay a query
// of that agent ranks with.
func BenchmarkToolSearch10kLearned(b *testing.B) {
	entries := genCatalog(10000, 1)
	ix := NewIndex(entries, benchOptions)
	var ex []LearnedExample
	for i := range 2000 {
		q := benchQueries[i%len(benchQueries)]
		ex = append(ex, LearnedExample{Entry: (i * 7919) % 500 * 20, Text: fmt.Sprintf("%s for team %d in region r%d", q, i, i%37), Success: i%10 != 0})
	}
	l := ix.Learn(ex)
	b.ReportAllocs()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		ix.SearchLearned(benchQueries[i%len(benchQueries)], 10, nil, l)
		lat = append(lat, time.Since(start))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkToolLearn2000 builds the overlay of 2,000 learned outcomes
// over 10,000 tools: the cost of the first query after a change.
func BenchmarkToolLearn2000(b *testing.B) {
	ix := NewIndex(genCatalog(10000, 1), benchOptions)
	var ex []LearnedExample
	for i := range 2000 {
		ex = append(ex, LearnedExample{Entry: i * 5, Text: fmt.Sprintf("%s for team %d", benchQueries[i%len(benchQueries)], i), Success: true})
	}
	b.ReportAllocs()
	for b.Loop() {
		ix.Learn(ex)
	}
}
