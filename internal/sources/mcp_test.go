package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Secrets of the MCP tests: a Secret's header value, an environment
// variable's and the URL's password. No error may show them.
const (
	mcpSecretKey   = "k3y-from-a-Secret"
	mcpEnvToken    = "t0ken-from-env"
	mcpURLPassword = "url-pa55word"
)

// mcpTestServer is a real MCP server (the SDK's) on 127.0.0.1 whose answers
// a test can break, and which records the headers it received.
type mcpTestServer struct {
	*httptest.Server
	mcp *mcp.Server

	stop chan struct{} // closed at the end of the test: slow answers end

	mu      sync.Mutex
	mode    string // "" serves; "slow", "malformed", "unauthorized", "null result", "no tools" break
	headers []http.Header
	// onList, when set, runs before a tools/list request is answered.
	onList func()
	// lists counts the tools/list requests.
	lists atomic.Int32
}

func newMCPTestServer(t *testing.T, pageSize int, tools ...*mcp.Tool) *mcpTestServer {
	t.Helper()
	s := &mcpTestServer{stop: make(chan struct{}), mcp: mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v1"}, &mcp.ServerOptions{PageSize: pageSize})}
	for _, tool := range tools {
		s.add(tool)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		mode := s.mode
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		// A broken server echoes what it was sent, as some do in errors.
		echo := r.Header.Get("X-Api-Key") + " " + r.Header.Get("Authorization")
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/list" {
				s.lists.Add(1)
				s.mu.Lock()
				hook := s.onList
				s.mu.Unlock()
				if hook != nil {
					hook()
				}
				// Answers the SDK reads as a list, though they are not one (or
				// not the whole one): a stream's event, or a JSON body.
				switch mode {
				case "null result":
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\": \"2.0\", \"id\": %s, \"result\": null}\n\n", msg.ID)
					return
				case "no tools":
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc": "2.0", "id": %s, "result": {"nextCursor": ""}}`, msg.ID)
					return
				}
			}
		}
		switch mode {
		case "slow":
			select {
			case <-r.Context().Done():
			case <-s.stop:
			}
			return
		case "malformed":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc": "2.0", "id": 1, "result": {"tools": [ %s`, echo)
			return
		case "unauthorized":
			http.Error(w, "bad credentials "+echo, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.stop) }) // runs first
	return s
}

func (s *mcpTestServer) add(tool *mcp.Tool) {
	if tool.InputSchema == nil {
		tool.InputSchema = map[string]any{"type": "object"}
	}
	s.mcp.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
}

func (s *mcpTestServer) setMode(mode string) {
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
}

// setOnList sets the hook run before each tools/list answer.
func (s *mcpTestServer) setOnList(f func()) {
	s.mu.Lock()
	s.onList = f
	s.mu.Unlock()
}

func (s *mcpTestServer) seen() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.headers)
}

// withUserinfo puts user:mcpURLPassword into an http URL.
func withUserinfo(u string) string {
	return strings.Replace(u, "http://", "http://robot:"+mcpURLPassword+"@", 1)
}

// newMCPSource builds an MCP source for url with a Secret header and an
// environment header; edit adjusts the spec.
func newMCPSource(t *testing.T, rawURL string, edit func(*v1alpha1.MCPSource)) *MCP {
	t.Helper()
	spec := &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: "gh"},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP, MCP: &v1alpha1.MCPSource{
			URL:       rawURL,
			Namespace: "github",
			Timeout:   &metav1.Duration{Duration: 5 * time.Second},
			Headers: []v1alpha1.HTTPHeader{
				{Name: "X-Api-Key", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.SecretKeySelector{Name: "gh", Key: "key"}}},
				{Name: "Authorization", Value: ptrTo("Bearer ${MCP_TOKEN}")},
			},
		}},
	}
	if edit != nil {
		edit(spec.Spec.MCP)
	}
	getenv := func(k string) string {
		switch k {
		case "CONTEXTROUTER_SECRET_GH_KEY":
			return mcpSecretKey
		case "MCP_TOKEN":
			return mcpEnvToken
		}
		return ""
	}
	src, err := New(spec, Env{Getenv: getenv})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m := src.(*MCP)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func ptrTo[T any](v T) *T { return &v }

func assertNoMCPSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, secret := range []string{mcpSecretKey, mcpEnvToken, mcpURLPassword, "robot"} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows %q: %s", what, secret, text)
		}
	}
}

func toolIDs(tools []v1alpha1.Tool) []string {
	out := make([]string, len(tools))
	for i := range tools {
		out[i] = tools[i].ID()
	}
	return out
}

func TestMCPListsEveryPage(t *testing.T) {
	var tools []*mcp.Tool
	for i := range 23 {
		tools = append(tools, &mcp.Tool{Name: fmt.Sprintf("tool_%02d", 22-i), Description: fmt.Sprintf("Tool number %d.", 22-i)})
	}
	tools = append(tools,
		&mcp.Tool{Name: "get_issue", Description: "Read an issue.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"number": map[string]any{"type": "integer"}}, "required": []any{"number"}}},
		&mcp.Tool{Name: "create_issue", Description: "Open an issue.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptrTo(false)}},
		&mcp.Tool{Name: "delete_repo", Description: "Delete a repository.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptrTo(true)}},
		&mcp.Tool{Name: "titled", Title: "Titled tool"},
		&mcp.Tool{Name: "annotated", Annotations: &mcp.ToolAnnotations{Title: "Annotated title"}},
		&mcp.Tool{Name: "bare"},
		&mcp.Tool{Name: "long", Description: strings.Repeat("é", maxToolDescription+10)},
	)
	srv := newMCPTestServer(t, 4, tools...) // 30 tools in 8 pages
	m := newMCPSource(t, withUserinfo(srv.URL), nil)

	got, err := m.LoadTools(context.Background())
	if err != nil {
		t.Fatalf("LoadTools: %v", err)
	}
	if len(got) != 30 {
		t.Fatalf("got %d tools, want 30: %v", len(got), toolIDs(got))
	}
	ids := toolIDs(got)
	if !slices.IsSorted(ids) {
		t.Errorf("ids are not sorted: %v", ids)
	}
	byName := map[string]v1alpha1.Tool{}
	for _, tool := range got {
		if tool.Namespace != "github" {
			t.Errorf("%s: namespace %q, want github", tool.Name, tool.Namespace)
		}
		byName[tool.Name] = tool
	}
	for _, c := range []struct {
		name, desc, schema string
		effects            v1alpha1.SideEffects
	}{
		{"get_issue", "Read an issue.", `{"properties":{"number":{"type":"integer"}},"required":["number"],"type":"object"}`, v1alpha1.SideEffectsRead},
		{"create_issue", "Open an issue.", `{"type":"object"}`, v1alpha1.SideEffectsWrite},
		{"delete_repo", "Delete a repository.", `{"type":"object"}`, v1alpha1.SideEffectsDestructive},
		{"tool_07", "Tool number 7.", `{"type":"object"}`, v1alpha1.SideEffectsDestructive},
		{"titled", "Titled tool", `{"type":"object"}`, v1alpha1.SideEffectsDestructive},
		{"annotated", "Annotated title", `{"type":"object"}`, v1alpha1.SideEffectsDestructive},
		{"bare", "bare", `{"type":"object"}`, v1alpha1.SideEffectsDestructive},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, ok := byName[c.name]
			if !ok {
				t.Fatalf("tool %s missing", c.name)
			}
			if tool.ID() != "github."+c.name || tool.Description != c.desc || tool.SideEffects != c.effects {
				t.Errorf("got id %q description %q side effects %s; want github.%s, %q, %s", tool.ID(), tool.Description, tool.SideEffects, c.name, c.desc, c.effects)
			}
			if tool.InputSchema == nil || string(tool.InputSchema.Raw) != c.schema {
				t.Errorf("inputSchema %v, want %s", tool.InputSchema, c.schema)
			}
		})
	}
	if d := byName["long"].Description; len([]rune(d)) != maxToolDescription {
		t.Errorf("a long description is %d characters, want it cut at %d", len([]rune(d)), maxToolDescription)
	}

	// Every request carried the headers; the URL's user part went as Basic auth.
	for i, h := range srv.seen() {
		if h.Get("X-Api-Key") != mcpSecretKey || h.Get("Authorization") != "Bearer "+mcpEnvToken {
			t.Errorf("request %d: X-Api-Key %q, Authorization %q", i, h.Get("X-Api-Key"), h.Get("Authorization"))
		}
	}
	// The transport kept the SDK server's last answer, read from its stream.
	if k := m.listed.Load(); k == nil || !bytes.Contains(k.msg, []byte(`"tools":[`)) || emptyListProblem(k) != "" {
		t.Errorf("kept answer %+v, want the last page's", k)
	}
	// LoadTools does no I/O once listed.
	before := len(srv.seen())
	if _, err := m.LoadTools(context.Background()); err != nil || len(srv.seen()) != before {
		t.Errorf("a second LoadTools: err %v, %d more requests", err, len(srv.seen())-before)
	}
}

func TestMCPFollowsListChanged(t *testing.T) {
	srv := newMCPTestServer(t, 0, &mcp.Tool{Name: "search_code", Description: "Search code."})
	m := newMCPSource(t, srv.URL, func(s *v1alpha1.MCPSource) { s.Interval = &metav1.Duration{Duration: time.Hour} })
	changed := m.Changed() // serve's sync loop listens
	if _, err := m.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	srv.add(&mcp.Tool{Name: "merge_pr", Description: "Merge a pull request."})
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("no signal on Changed after the server's tool list changed")
	}
	ch, err := m.Sync(context.Background())
	if err != nil || !ch {
		t.Fatalf("Sync after list_changed: changed %v, err %v", ch, err)
	}
	got, err := m.LoadTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ids := toolIDs(got); !slices.Equal(ids, []string{"github.merge_pr", "github.search_code"}) {
		t.Errorf("catalog after list_changed: %v", ids)
	}
	// An unchanged listing is not a change.
	if ch, err := m.Sync(context.Background()); err != nil || ch {
		t.Errorf("Sync of an unchanged server: changed %v, err %v", ch, err)
	}
}

func TestMCPFailuresKeepTheLastGoodCatalog(t *testing.T) {
	for _, c := range []struct {
		name string
		// breakIt breaks the server after a good listing.
		breakIt func(s *mcpTestServer)
		want    string
	}{
		{"down", func(s *mcpTestServer) { s.Close() }, "connect: connection refused"},
		{"slow", func(s *mcpTestServer) { s.setMode("slow") }, "timeout after 300ms"},
		{"malformed", func(s *mcpTestServer) { s.setMode("malformed") }, "invalid answer: not a JSON-RPC message"},
		{"unauthorized", func(s *mcpTestServer) { s.setMode("unauthorized") }, "HTTP 401 Unauthorized"},
		{"oversized page", func(s *mcpTestServer) {
			s.add(&mcp.Tool{Name: "huge", Description: strings.Repeat("x", MaxMCPResponseBytes)})
		}, "response larger than 4Mi"},
		{"too many tools", func(s *mcpTestServer) {
			for i := range 3 {
				s.add(&mcp.Tool{Name: fmt.Sprintf("more_%d", i), Description: "More."})
			}
		}, "more than 4 tools (spec.mcp.maxTools); the listing is refused"},
		{"invalid name", func(s *mcpTestServer) { s.add(&mcp.Tool{Name: "bad name!", Description: "Spaces."}) }, `tool "bad name!": name: Invalid value: "bad name!": must be dotted words`},
		{"a name of dots only", func(s *mcpTestServer) { s.add(&mcp.Tool{Name: ".", Description: "Dots."}) }, `tool ".": name: Invalid value: ".": must be dotted words of letters, digits, '_' and '-' with at least one letter or digit`},
		{"a schema nested too deep", func(s *mcpTestServer) {
			var schema map[string]any
			if err := json.Unmarshal(nestedSchema(490, `{"type":"object"}`), &schema); err != nil {
				panic(err)
			}
			s.add(&mcp.Tool{Name: "deep", Description: "Deep.", InputSchema: schema})
		}, `tools/list: tool "deep": inputSchema: nested more than 64 levels deep`},
		{"null result", func(s *mcpTestServer) { s.setMode("null result") }, `tools/list: invalid answer: no list of tools (the result is null)`},
		{"result without tools", func(s *mcpTestServer) { s.setMode("no tools") }, `tools/list: invalid answer: no list of tools (the result has no "tools")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newMCPTestServer(t, 2,
				&mcp.Tool{Name: "a", Description: "First."}, &mcp.Tool{Name: "b", Description: "Second."})
			m := newMCPSource(t, withUserinfo(srv.URL)+"/mcp?sig="+mcpSecretKey, func(s *v1alpha1.MCPSource) {
				// Short for the slow server; the others get time to answer
				// (a 4 MiB page on a loaded machine can take 300ms).
				s.Timeout = &metav1.Duration{Duration: 30 * time.Second}
				if c.name == "slow" {
					s.Timeout.Duration = 300 * time.Millisecond
				}
				s.MaxTools = 4
			})
			good, err := m.LoadTools(context.Background())
			if err != nil || len(good) != 2 {
				t.Fatalf("first listing: %v, %v", toolIDs(good), err)
			}
			c.breakIt(srv)
			changed, err := m.Sync(context.Background())
			if err == nil || !changed {
				t.Fatalf("Sync of a broken server: changed %v, err %v; want a change (the failure) and an error", changed, err)
			}
			got, err := m.LoadTools(context.Background())
			var stale *StaleError
			if !errors.As(err, &stale) {
				t.Fatalf("LoadTools: err %v, want a *StaleError", err)
			}
			if ids := toolIDs(got); !slices.Equal(ids, []string{"github.a", "github.b"}) {
				t.Errorf("catalog after the failure: %v, want the last good one", ids)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "MCP http://127.0.0.1:") {
				t.Errorf("error %q, want it to start with the redacted URL and contain %q", err, c.want)
			}
			assertNoMCPSecrets(t, "the error", err.Error())
			// The same failure again is no change: nothing to rebuild.
			if changed, err := m.Sync(context.Background()); err == nil || changed {
				t.Errorf("second failing Sync: changed %v, err %v", changed, err)
			}
		})
	}
}

func TestMCPFirstListingFails(t *testing.T) {
	srv := newMCPTestServer(t, 0, &mcp.Tool{Name: "a", Description: "First."})
	srv.setMode("unauthorized")
	m := newMCPSource(t, withUserinfo(srv.URL), nil)
	got, err := m.LoadTools(context.Background())
	var stale *StaleError
	if err == nil || errors.As(err, &stale) || got != nil {
		t.Fatalf("LoadTools: %v, %v; want no tools and a plain error", got, err)
	}
	if !strings.Contains(err.Error(), "initialize: HTTP 401 Unauthorized") {
		t.Errorf("error %q", err)
	}
	assertNoMCPSecrets(t, "the error", err.Error())
	// Recovery is a change.
	srv.setMode("")
	if changed, err := m.Sync(context.Background()); err != nil || !changed {
		t.Fatalf("Sync after recovery: changed %v, err %v", changed, err)
	}
	if got, err := m.LoadTools(context.Background()); err != nil || len(got) != 1 {
		t.Errorf("LoadTools after recovery: %v, %v", toolIDs(got), err)
	}
}

func TestMCPRedirects(t *testing.T) {
	srv := newMCPTestServer(t, 0, &mcp.Tool{Name: "a", Description: "First."})
	target, _ := url.Parse(srv.URL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer front.Close()
	for _, c := range []struct {
		name    string
		follow  v1alpha1.FollowRedirects
		wantErr string
	}{
		{"same host only", v1alpha1.FollowRedirects{}, "redirect to another host refused: " + srv.URL + "/mcp (set spec.mcp.followRedirects to allow it)"},
		{"none", v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectNone}, "refused: spec.mcp.followRedirects.policy is None"},
		{"allowed host", v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{target.Host}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(srv.seen())
			m := newMCPSource(t, withUserinfo(front.URL)+"/mcp", func(s *v1alpha1.MCPSource) { s.FollowRedirects = c.follow })
			got, err := m.LoadTools(context.Background())
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("LoadTools: %v, want an error containing %q", err, c.wantErr)
				}
				assertNoMCPSecrets(t, "the error", err.Error())
			} else if err != nil || len(got) != 1 {
				t.Fatalf("LoadTools: %v, %v", toolIDs(got), err)
			}
			seen := srv.seen()[before:]
			if c.wantErr != "" && len(seen) > 0 {
				t.Errorf("the other host was asked %d times", len(seen))
			}
			for i, h := range seen {
				for _, name := range []string{"X-Api-Key", "Authorization", "Cookie"} {
					if v := h.Get(name); v != "" {
						t.Errorf("request %d to the other host carried %s: %q", i, name, v)
					}
				}
			}
		})
	}
}

func TestMCPSpecErrors(t *testing.T) {
	for _, c := range []struct{ name, url, want string }{
		{"unparsable", "http://robot:" + mcpURLPassword + "@host:port/mcp", "spec.mcp.url: invalid URL: invalid port after host"},
		{"white space", "http://host/m cp", "spec.mcp.url: contains white space"},
		{"relative", "/mcp", "spec.mcp.url: must be an absolute http or https URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP, MCP: &v1alpha1.MCPSource{URL: c.url}}}
			_, err := New(spec, Env{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want %q", err, c.want)
			}
			assertNoMCPSecrets(t, "the error", err.Error())
		})
	}
	bad := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP,
		MCP: &v1alpha1.MCPSource{URL: "http://h/mcp", Headers: []v1alpha1.HTTPHeader{{Name: "A", Value: ptrTo("${1X}")}}}}}
	if _, err := New(bad, Env{}); err == nil || !strings.Contains(err.Error(), "spec.mcp.headers[0].value: ${1X} is not a valid variable reference") {
		t.Errorf("New with a bad header: %v", err)
	}
}

// TestMCPListingDeadline: a server that answers every page within the
// timeout but pages on past the listing's deadline fails the listing
// (before, it held the sync for pages × timeout), and the last good
// catalog keeps serving.
func TestMCPListingDeadline(t *testing.T) {
	var tools []*mcp.Tool
	for i := range 12 {
		tools = append(tools, &mcp.Tool{Name: fmt.Sprintf("t%02d", i), Description: "A tool."})
	}
	srv := newMCPTestServer(t, 2, tools...) // 6 pages
	m := newMCPSource(t, srv.URL, func(s *v1alpha1.MCPSource) { s.Timeout = &metav1.Duration{Duration: 5 * time.Second} })
	if m.deadline != MCPListingDeadline {
		t.Fatalf("deadline %s, want %s", m.deadline, MCPListingDeadline)
	}
	if got, err := m.LoadTools(context.Background()); err != nil || len(got) != 12 {
		t.Fatalf("first listing: %v, %v", toolIDs(got), err)
	}
	// Each page now waits for the test: the listing's deadline passes
	// during the third page, long before any page's timeout.
	m.deadline = 300 * time.Millisecond
	pages := make(chan struct{})
	var served atomic.Int32
	srv.setOnList(func() {
		if served.Add(1) > 2 {
			<-pages
		}
	})
	defer close(pages)
	changed, err := m.Sync(context.Background())
	if err == nil || !changed {
		t.Fatalf("Sync past the deadline: changed %v, err %v", changed, err)
	}
	if want := "tools/list: timeout after 300ms for the whole listing (initialize and every page)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
	if got, err := m.LoadTools(context.Background()); len(got) != 12 || !errors.As(err, new(*StaleError)) {
		t.Errorf("after the failure: %d tools, %v; want the last good 12 and a *StaleError", len(got), err)
	}
	// The spec's timeout raises the deadline: at least two requests' worth.
	long := newMCPSource(t, srv.URL, func(s *v1alpha1.MCPSource) { s.Timeout = &metav1.Duration{Duration: 45 * time.Second} })
	if long.deadline != 90*time.Second {
		t.Errorf("deadline with a 45s timeout: %s, want 1m30s", long.deadline)
	}
}

// TestMCPListsInBackground: with Env.ListInBackground, LoadTools never
// asks the server; the sync (serve's loop) lists.
func TestMCPListsInBackground(t *testing.T) {
	srv := newMCPTestServer(t, 0, &mcp.Tool{Name: "a", Description: "First."})
	listing := make(chan struct{})
	srv.setOnList(func() { <-listing })
	spec := &v1alpha1.ContextSource{ObjectMeta: metav1.ObjectMeta{Name: "gh"},
		Spec: v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceMCP, MCP: &v1alpha1.MCPSource{URL: srv.URL}}}
	spec.Default()
	src, err := New(spec, Env{ListInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	m := src.(*MCP)
	t.Cleanup(func() { _ = m.Close() })
	got, err := m.LoadTools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not listed yet") || got != nil {
		t.Fatalf("LoadTools before a listing: %v, %v; want no tools and \"not listed yet\"", got, err)
	}
	if n := len(srv.seen()); n != 0 {
		t.Fatalf("LoadTools sent %d requests", n)
	}
	synced := make(chan error, 1)
	go func() { _, err := m.Sync(context.Background()); synced <- err }()
	// While the listing waits on the server, LoadTools answers at once.
	eventually(t, func() bool { return srv.lists.Load() == 1 })
	if _, err := m.LoadTools(context.Background()); err == nil || !strings.Contains(err.Error(), "not listed yet") {
		t.Fatalf("LoadTools during the listing: %v", err)
	}
	close(listing)
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got, err := m.LoadTools(context.Background()); err != nil || len(got) != 1 {
		t.Fatalf("LoadTools after the listing: %v, %v", toolIDs(got), err)
	}
}

// TestMCPDebouncesListChanged: a burst of notifications/tools/list_changed
// (20 tools added 30 ms apart, each notified) signals Changed once, after
// MCPNotifyQuiet: a loop that lists on each signal, as serve's does, lists
// once for the burst, not once per notification.
func TestMCPDebouncesListChanged(t *testing.T) {
	srv := newMCPTestServer(t, 0, &mcp.Tool{Name: "first", Description: "First."})
	m := newMCPSource(t, srv.URL, func(s *v1alpha1.MCPSource) { s.Interval = &metav1.Duration{Duration: time.Hour} })
	changed := m.Changed()
	if _, err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := srv.lists.Load()
	var listings atomic.Int32
	var last atomic.Int32 // tools in the latest listing
	ctx, cancel := context.WithCancel(context.Background())
	loop := make(chan struct{})
	go func() {
		defer close(loop)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			if _, err := m.Sync(ctx); err == nil {
				listings.Add(1)
				got, _ := m.LoadTools(ctx)
				last.Store(int32(len(got)))
			}
		}
	}()
	defer func() { cancel(); <-loop }()
	for i := range 20 {
		srv.add(&mcp.Tool{Name: fmt.Sprintf("burst_%02d", i), Description: "Added."})
		time.Sleep(30 * time.Millisecond) // past the SDK server's own 10 ms batching
	}
	eventually(t, func() bool { return last.Load() == 21 })
	if n := listings.Load(); n > 2 {
		t.Errorf("%d listings for one burst of notifications; want at most 2", n)
	}
	if n := srv.lists.Load() - before; n > 2 {
		t.Errorf("the server was asked tools/list %d times for one burst; want at most 2", n)
	}
}

// TestMCPNotifyMinInterval: signals for list_changed are at least
// minRelist apart, however soon the next notification comes.
func TestMCPNotifyMinInterval(t *testing.T) {
	m := newMCPSource(t, "http://127.0.0.1:1/mcp", nil)
	m.quiet, m.minRelist = 10*time.Millisecond, 300*time.Millisecond
	changed := m.Changed()
	m.listChanged()
	m.listChanged() // joins the first
	<-changed
	first := time.Now()
	m.listChanged()
	<-changed
	if gap := time.Since(first); gap < m.minRelist {
		t.Errorf("second signal %s after the first, want at least %s", gap, m.minRelist)
	}
	select {
	case <-changed:
		t.Error("a third signal: the notification that joined the first was signalled again")
	default:
	}
}

// eventually polls cond until it holds, for at most 20 seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
	}
}
