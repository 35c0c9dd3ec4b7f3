package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/contextrouter/contextrouter/internal/tools"
)

// describe prints the mean features of the first cards of each setting,
// right and wrong apart.
func describe(w io.Writer, rows []row) {
	type acc struct {
		n   int
		sum [tools.NumFeatures]float64
	}
	m := map[string]*acc{}
	var keys []string
	for _, r := range rows {
		if r.ev.Rank != 0 {
			continue
		}
		k := r.setting + map[bool]string{true: " right", false: " wrong"}[r.relevant]
		a := m[k]
		if a == nil {
			a = &acc{}
			m[k] = a
			keys = append(keys, k)
		}
		a.n++
		f := r.ev.Features()
		for i := range f {
			a.sum[i] += f[i]
		}
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "%-34s %5s  softlg  cov   name  self  ex    rel   marg  top   words cards match\n", "", "n")
	for _, k := range keys {
		a := m[k]
		fmt.Fprintf(w, "%-34s %5d", k, a.n)
		for _, s := range a.sum {
			fmt.Fprintf(w, " %5.2f", s/float64(a.n))
		}
		fmt.Fprintln(w)
	}
}
