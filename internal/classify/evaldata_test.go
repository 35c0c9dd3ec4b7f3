package classify

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// evalDir is where the public intent sets are: $CONTEXTROUTER_EVAL_DIR, or
// the development layout's shared folder.
var evalDir = func() string {
	if d := os.Getenv("CONTEXTROUTER_EVAL_DIR"); d != "" {
		return d
	}
	return "/work/shared/eval"
}()

// loadJSONL reads an eval set: one {"text", "label"} object a line.
func loadJSONL(t testing.TB, path string) []Example {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Example
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e Example
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}
