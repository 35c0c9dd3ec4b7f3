package docs

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// tableColumn returns the first column (the text between backticks) of the
// first table after heading in docs/api.md whose header row starts with
// header.
func tableColumn(t *testing.T, heading, header string) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("docs/api.md has no line %q", heading)
	}
	var out []string
	in := false
	for _, l := range lines[start+1:] {
		switch {
		case strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "### ") && in:
			t.Fatalf("no table %q under %q", header, heading)
		case !in && strings.HasPrefix(l, header):
			in = true
		case in && strings.HasPrefix(l, "|---"):
		case in && strings.HasPrefix(l, "| `"):
			cell := strings.TrimPrefix(l, "| `")
			out = append(out, cell[:strings.Index(cell, "`")])
		case in:
			return out
		}
	}
	return out
}

// TestMCPToolListDocumented: the tools of §10.6's table are exactly those
// tools/list of a real /mcp returns.
func TestMCPToolListDocumented(t *testing.T) {
	documented := tableColumn(t, "### 10.6 MCP server", "| tool | arguments | result |")
	if len(documented) == 0 {
		t.Fatal("no tool in §10.6's table")
	}
	t.Chdir("../..")
	base := startServe(t, []string{"-f", "examples/quickstart"})
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: %s %v", resp.Status, err)
	}
	if answer.Result.NextCursor != "" {
		t.Fatal("tools/list pages: read the next page too")
	}
	var listed []string
	for _, tl := range answer.Result.Tools {
		listed = append(listed, tl.Name)
	}
	slices.Sort(listed)
	slices.Sort(documented)
	if !slices.Equal(listed, documented) {
		t.Errorf("tools/list = %q; docs/api.md §10.6 documents %q", listed, documented)
	}
}

// TestToolsReasonsDocumented: §10.3's table of stats.tools.reason holds the
// reasons the engine decides, in its order.
func TestToolsReasonsDocumented(t *testing.T) {
	documented := tableColumn(t, "### 10.3 Selection and choice cards", "| `reason` | when |")
	if want := engine.ToolsReasons(); !slices.Equal(documented, want) {
		t.Errorf("docs/api.md §10.3 lists %q; the engine decides %q", documented, want)
	}
}
