package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/contextrouter/contextrouter/internal/engine"
)

// toolServer is a real MCP server (the SDK's) on 127.0.0.1 whose tools/list
// answers a test can hold on a channel.
type toolServer struct {
	*httptest.Server
	lists atomic.Int32 // tools/list requests received

	mu   sync.Mutex
	hold chan struct{} // while set, tools/list waits for it to close
}

func newToolServer(t *testing.T, tools ...string) *toolServer {
	t.Helper()
	ms := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "v1"}, nil)
	for _, name := range tools {
		ms.AddTool(&mcp.Tool{Name: name, Description: "Search the code of a repository.", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	s := &toolServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct{ Method string }
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/list" {
				s.lists.Add(1)
				s.mu.Lock()
				hold := s.hold
				s.mu.Unlock()
				if hold != nil {
					select {
					case <-hold:
					case <-r.Context().Done():
						return
					}
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// holdLists makes tools/list answers wait until the returned func is called.
func (s *toolServer) holdLists() (release func()) {
	hold := make(chan struct{})
	s.mu.Lock()
	s.hold = hold
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold = nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

// mcpSourceManifests: notes (inline) and an MCP source, both routed; the
// agent bot may read allowed.
func mcpSourceManifests(url, namespace string, allowed ...string) string {
	return fmt.Sprintf(`apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: r}
spec:
  defaultAccess: Deny
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: notes}
spec:
  type: Inline
  inline: {title: notes, content: "The vacation policy: 30 days a year."}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: gh}
spec:
  type: MCP
  mcp: {url: %q, namespace: %s, interval: 1h, timeout: 10m}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  sources: [{name: notes}, {name: gh}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: AgentPermission
metadata: {name: bot}
spec:
  agents: [bot]
  allowSources: [%s]
`, url+"/mcp", namespace, strings.Join(allowed, ", "))
}

// TestRevokeDoesNotWaitForAnMCPListing: while an MCP source's listing is
// held by its server (a page that does not come), a permission revoked in
// the manifests applies. Before, the reload that rebuilt the MCP source
// listed it inside the snapshot build, and every reload after it (the
// revoke) waited up to maxTools pages × timeout.
func TestRevokeDoesNotWaitForAnMCPListing(t *testing.T) {
	tools := newToolServer(t, "search_code")
	dir := t.TempDir()
	manifest := filepath.Join(dir, "router.yaml")
	writeAtomic(t, manifest, mcpSourceManifests(tools.URL, "github", "notes", "gh"))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady() // the first configuration lists before it serves
	// Then the sync loop lists once more, on the session it keeps open for
	// notifications.
	eventually(t, 20*time.Second, "the sync loop's first listing", func() bool { return tools.lists.Load() == 2 })
	bot := engine.Request{Text: "vacation policy search code", Agent: "bot"}
	if r := ts.query(bot); !hasSource(r, "notes") || !hasTool(r, "github", "search_code") {
		t.Fatalf("before: chunks %v, tools %v", r.Chunks, r.Tools)
	}

	// The MCP source changes (a new namespace: a new source, listed anew)
	// and its server holds the listing.
	release := tools.holdLists()
	defer release()
	lists := tools.lists.Load()
	writeAtomic(t, manifest, mcpSourceManifests(tools.URL, "github2", "notes", "gh"))
	eventually(t, 20*time.Second, "the new source's listing to reach the server", func() bool { return tools.lists.Load() > lists })

	// The revoke applies while that listing is still held.
	writeAtomic(t, manifest, mcpSourceManifests(tools.URL, "github2", "gh"))
	eventually(t, 20*time.Second, "the revoke to apply", func() bool {
		r := ts.query(bot)
		return !hasSource(r, "notes") && slices.Contains(r.DeniedSources, "notes")
	})
	r := ts.query(bot)
	if hasTool(r, "github", "search_code") || hasTool(r, "github2", "search_code") {
		t.Errorf("tools while the new source is not listed: %v", r.Tools)
	}
	if !failedWith(r, "gh", "not listed yet") {
		t.Errorf("failed_sources %v, want gh not listed yet", r.FailedSources)
	}
	if n := tools.lists.Load(); n != lists+1 {
		t.Errorf("%d tools/list requests since the change, want the one held", n-lists)
	}

	// The listing ends: its catalog serves, the revoke stays.
	release()
	eventually(t, 20*time.Second, "the new source's tools", func() bool { return hasTool(ts.query(bot), "github2", "search_code") })
	if r := ts.query(bot); hasSource(r, "notes") || len(r.FailedSources) != 0 {
		t.Errorf("after the listing: chunks %v, failed %v", r.Chunks, r.FailedSources)
	}
}

func hasSource(r engine.Response, source string) bool {
	return slices.ContainsFunc(r.Chunks, func(c engine.Chunk) bool { return c.Source == source })
}

func hasTool(r engine.Response, namespace, name string) bool {
	return slices.ContainsFunc(r.Tools, func(c engine.ToolCard) bool { return c.Namespace == namespace && c.Name == name })
}

func failedWith(r engine.Response, source, msg string) bool {
	return slices.ContainsFunc(r.FailedSources, func(f engine.SourceFailure) bool {
		return f.Source == source && strings.Contains(f.Error, msg)
	})
}
