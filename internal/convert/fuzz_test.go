package convert

import (
	"os"
	"testing"
)

// No input makes the converter panic, and a conversion that succeeds gives
// output that loads as manifests.
func FuzzTheaios(f *testing.F) {
	if data, err := os.ReadFile(fixture); err == nil {
		f.Add(data)
	}
	f.Add([]byte("routes:\n  - {name: r, when: 'not (a == 1 or $v in [1, \"x\"]) and tags contains \"y\"', sources: [s]}\nsources: {s: {type: inline, content: x}}\nvariables: {v: [1]}\n"))
	f.Add([]byte("sources: [1]\nroutes: {a: b}\npermissions: x\nbudget: 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, words := range []bool{false, true} {
			res, err := Theaios("f.yaml", data, Options{Words: words})
			if err != nil {
				continue
			}
			_ = res.Stream()
		}
	})
}

func FuzzCondition(f *testing.F) {
	for _, s := range []string{`text contains "x" or not (agent == 'a')`, `$v in tags`, `metadata["k"] >= 1e3`, `"\u00e9" in text`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tree, err := parseCondition(s)
		if err != nil {
			return
		}
		for _, words := range []bool{false, true} {
			_, _ = (&translator{vars: testVars, words: words}).translate(tree)
		}
	})
}
