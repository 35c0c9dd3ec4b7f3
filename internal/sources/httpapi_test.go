package sources

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// httpSeen is what the test server received.
type httpSeen struct {
	Method     string
	RequestURI string
	Path       string
	RawQuery   string
	Host       string
	Header     http.Header
	Body       string
}

// httpRecorder keeps every request an httptest server receives.
type httpRecorder struct {
	mu   sync.Mutex
	seen []httpSeen
}

func (r *httpRecorder) all() []httpSeen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// last returns the only or latest request and fails when there was none.
func (r *httpRecorder) last(t *testing.T) httpSeen {
	t.Helper()
	all := r.all()
	if len(all) == 0 {
		t.Fatal("the server received no request")
	}
	return all[len(all)-1]
}

// newHTTPTestServer starts a real server on 127.0.0.1 that records each
// request and then calls respond.
func newHTTPTestServer(t testing.TB, respond http.HandlerFunc) (*httptest.Server, *httpRecorder) {
	t.Helper()
	rec := &httpRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.seen = append(rec.seen, httpSeen{
			Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Host: r.Host, Header: r.Header.Clone(), Body: string(body),
		})
		rec.mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

// httpRespondJSON answers every request with the same JSON text.
func httpRespondJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

func httpTestSpec(name string, s v1alpha1.HTTPAPISource) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceHTTPAPI, HTTPAPI: &s},
	}
}

// newTestHTTPAPI builds the source through the registry, as the engine does.
func newTestHTTPAPI(t testing.TB, s v1alpha1.HTTPAPISource, env Env) *HTTPAPI {
	t.Helper()
	src, err := New(httpTestSpec("kb", s), env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h, ok := src.(*HTTPAPI)
	if !ok {
		t.Fatalf("New returned %T, want *HTTPAPI", src)
	}
	return h
}

func httpStrPtr(s string) *string { return &s }

func httpDurPtr(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func httpQtyPtr(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func httpSecretHeader(name, secret, key string) v1alpha1.HTTPHeader {
	return v1alpha1.HTTPHeader{Name: name, ValueFrom: &v1alpha1.HeaderValueSource{
		SecretKeyRef: v1alpha1.SecretKeySelector{Name: secret, Key: key},
	}}
}

func httpMapGetenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const httpOneResult = `[{"text": "result"}]`

func TestHTTPAPIRegistered(t *testing.T) {
	if !slices.Contains(Types(), v1alpha1.SourceHTTPAPI) {
		t.Fatalf("Types() = %v, want it to contain %s", Types(), v1alpha1.SourceHTTPAPI)
	}
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: "https://kb.example.com/search?q={{query}}", TextField: "text"}, Env{})
	if h.Name() != "kb" {
		t.Errorf("Name() = %q, want kb", h.Name())
	}
	if h.Timeout() != 5*time.Second {
		t.Errorf("default Timeout() = %s, want 5s", h.Timeout())
	}
	h = newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: "https://kb.example.com/?q={{query}}", TextField: "text", Timeout: httpDurPtr(1500 * time.Millisecond)}, Env{})
	if h.Timeout() != 1500*time.Millisecond {
		t.Errorf("Timeout() = %s, want 1.5s", h.Timeout())
	}
}

func TestHTTPAPIQueryInQueryString(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/search?q={{query}}&k=5", TextField: "text"}, Env{})

	tests := []struct {
		query   string
		encoded string
	}{
		{"remote work", "remote+work"},
		{"a&b=c", "a%26b%3Dc"},
		{"#1 issue", "%231+issue"},
		{"c++", "c%2B%2B"},
		{`say "hi" it's`, "say+%22hi%22+it%27s"},
		{"naïve café 日本", "na%C3%AFve+caf%C3%A9+%E6%97%A5%E6%9C%AC"},
		{"100%", "100%25"},
		{"a/b?c", "a%2Fb%3Fc"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			chunks, err := h.Fetch(t.Context(), tt.query)
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) != 1 {
				t.Fatalf("got %d chunks, want 1", len(chunks))
			}
			got := rec.last(t)
			if want := "q=" + tt.encoded + "&k=5"; got.RawQuery != want {
				t.Errorf("raw query = %q, want %q", got.RawQuery, want)
			}
			if got.Path != "/search" {
				t.Errorf("path = %q, want /search", got.Path)
			}
			v, err := url.ParseQuery(got.RawQuery)
			if err != nil {
				t.Fatal(err)
			}
			if v.Get("q") != tt.query || v.Get("k") != "5" {
				t.Errorf("decoded q = %q k = %q, want %q and 5", v.Get("q"), v.Get("k"), tt.query)
			}
			if got.Method != http.MethodGet || got.Body != "" {
				t.Errorf("method %s body %q, want GET without body", got.Method, got.Body)
			}
		})
	}
}

func TestHTTPAPIQueryInPath(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/docs/{{query}}/view?also={{query}}", TextField: "text"}, Env{})

	tests := []struct {
		query      string
		requestURI string
	}{
		{"simple", "/docs/simple/view?also=simple"},
		{"a b/c?d", "/docs/a%20b%2Fc%3Fd/view?also=a+b%2Fc%3Fd"},
		{"x+y&z=1", "/docs/x+y&z=1/view?also=x%2By%26z%3D1"},
		{"#frag", "/docs/%23frag/view?also=%23frag"},
		{"über", "/docs/%C3%BCber/view?also=%C3%BCber"},
		{"..", "/docs/%2E%2E/view?also=.."},
		{".", "/docs/%2E/view?also=."},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if _, err := h.Fetch(t.Context(), tt.query); err != nil {
				t.Fatal(err)
			}
			got := rec.last(t)
			if got.RequestURI != tt.requestURI {
				t.Errorf("request URI = %q, want %q", got.RequestURI, tt.requestURI)
			}
			if want := "/docs/" + tt.query + "/view"; got.Path != want {
				t.Errorf("decoded path = %q, want %q", got.Path, want)
			}
		})
	}
}

func TestHTTPAPIPostBody(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{
		URL:       srv.URL + "/search",
		Method:    v1alpha1.HTTPMethodPost,
		Body:      `{"q": {{query}}, "k": 8, "also": [{{query}}]}`,
		TextField: "text",
	}, Env{})

	tests := []struct {
		name    string
		query   string
		rawBody string // exactly what the server must receive
	}{
		{"quotes", `He said "hi"`, `{"q": "He said \"hi\"", "k": 8, "also": ["He said \"hi\""]}`},
		{"backslashes", `C:\dir\file`, `{"q": "C:\\dir\\file", "k": 8, "also": ["C:\\dir\\file"]}`},
		{"html characters stay readable", `a & b <c> d`, `{"q": "a & b <c> d", "k": 8, "also": ["a & b <c> d"]}`},
		{"newline and tab", "line1\nline2\tend", `{"q": "line1\nline2\tend", "k": 8, "also": ["line1\nline2\tend"]}`},
		{"unicode", "日本語 ✓", `{"q": "日本語 ✓", "k": 8, "also": ["日本語 ✓"]}`},
		{"placeholder text in the query", "{{query}}", `{"q": "{{query}}", "k": 8, "also": ["{{query}}"]}`},
		{"empty", "", `{"q": "", "k": 8, "also": [""]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.Fetch(t.Context(), tt.query); err != nil {
				t.Fatal(err)
			}
			got := rec.last(t)
			if got.Method != http.MethodPost {
				t.Errorf("method = %s, want POST", got.Method)
			}
			if got.Body != tt.rawBody {
				t.Errorf("body = %s\nwant   %s", got.Body, tt.rawBody)
			}
			var decoded struct {
				Q    string   `json:"q"`
				K    int      `json:"k"`
				Also []string `json:"also"`
			}
			if err := json.Unmarshal([]byte(got.Body), &decoded); err != nil {
				t.Fatalf("body is not valid JSON: %v", err)
			}
			if decoded.Q != tt.query || decoded.K != 8 || len(decoded.Also) != 1 || decoded.Also[0] != tt.query {
				t.Errorf("decoded body = %+v, want q %q", decoded, tt.query)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if a := got.Header.Get("Accept"); a != "application/json" {
				t.Errorf("Accept = %q, want application/json", a)
			}
			if ua := got.Header.Get("User-Agent"); ua != "contextrouter" {
				t.Errorf("User-Agent = %q, want contextrouter", ua)
			}
		})
	}

	t.Run("POST without body", func(t *testing.T) {
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/s?q={{query}}", Method: v1alpha1.HTTPMethodPost, TextField: "text"}, Env{})
		if _, err := h.Fetch(t.Context(), "x"); err != nil {
			t.Fatal(err)
		}
		got := rec.last(t)
		if got.Method != http.MethodPost || got.Body != "" || got.Header.Get("Content-Type") != "" {
			t.Errorf("got %s body %q Content-Type %q; want POST, no body, no Content-Type", got.Method, got.Body, got.Header.Get("Content-Type"))
		}
	})
}

func TestHTTPAPIResponseMapping(t *testing.T) {
	const nested = `{
	  "took": 3,
	  "data": [{"hits": {"total": 9, "items": [
	    {"doc": {"body": {"text": "Remote work is allowed."}}, "titles": ["Remote Work", "alt"], "meta": {"path": "/policies/remote.md"}},
	    {"doc": {"body": {"text": ""}}, "titles": ["empty text"]},
	    {"doc": {"body": {"text": 42}}, "titles": [7], "meta": {"path": "numbers/./answer.md"}},
	    {"doc": {"body": {"text": {"nested": "object"}}}, "titles": ["object text"]},
	    {"doc": {"body": {"text": true}}, "titles": [], "meta": {"path": {"not": "scalar"}}},
	    {"doc": {}, "titles": ["missing text"]},
	    {"doc": {"body": {"text": null}}},
	    {"doc": {"body": {"text": ["list", "text"]}}},
	    {"doc": {"body": {"text": "   \n\t "}}},
	    "a bare string",
	    {"doc": {"body": {"text": "Second  line\nkept as is "}}, "titles": ["  Spaced title  "], "meta": {"path": "../../etc/passwd"}},
	    {"doc": {"body": {"text": 1.50e3}}, "meta": {"path": 12}}
	  ]}}]
	}`
	srv, _ := newHTTPTestServer(t, httpRespondJSON(nested))

	tests := []struct {
		name string
		spec v1alpha1.HTTPAPISource
		want []Chunk
	}{
		{
			name: "nested responsePath, array indices, title and path",
			spec: v1alpha1.HTTPAPISource{
				ResponsePath: "data.0.hits.items", TextField: "doc.body.text",
				TitleField: "titles.0", PathField: "meta.path",
			},
			want: []Chunk{
				{Source: "kb", Index: 0, Title: "Remote Work", Path: "policies/remote.md", Content: "Remote work is allowed."},
				{Source: "kb", Index: 2, Title: "7", Path: "numbers/answer.md", Content: "42"},
				{Source: "kb", Index: 4, Content: "true"},
				{Source: "kb", Index: 10, Title: "Spaced title", Path: "etc/passwd", Content: "Second  line\nkept as is "},
				{Source: "kb", Index: 11, Path: "12", Content: "1.50e3"},
			},
		},
		{
			name: "maxResults counts chunks, not skipped items",
			spec: v1alpha1.HTTPAPISource{ResponsePath: "data.0.hits.items", TextField: "doc.body.text", MaxResults: 2},
			want: []Chunk{
				{Source: "kb", Index: 0, Content: "Remote work is allowed."},
				{Source: "kb", Index: 2, Content: "42"},
			},
		},
		{
			name: "text from a list element",
			spec: v1alpha1.HTTPAPISource{ResponsePath: "data.0.hits.items", TextField: "titles.1"},
			want: []Chunk{{Source: "kb", Index: 0, Content: "alt"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.URL = srv.URL + "/?q={{query}}"
			h := newTestHTTPAPI(t, tt.spec, Env{})
			got, err := h.Fetch(t.Context(), "remote")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("chunks:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestHTTPAPIMaxResults(t *testing.T) {
	var items []string
	for i := range 30 {
		items = append(items, fmt.Sprintf(`{"text": "result %d"}`, i))
	}
	srv, _ := newHTTPTestServer(t, httpRespondJSON(`{"results": [`+strings.Join(items, ",")+`]}`))

	tests := []struct {
		maxResults int32
		want       int
	}{
		{0, 20}, // default
		{5, 5},
		{1, 1},
		{30, 30},
		{1000, 30},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.maxResults), func(t *testing.T) {
			h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", ResponsePath: "results", TextField: "text", MaxResults: tt.maxResults}, Env{})
			got, err := h.Fetch(t.Context(), "q")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Fatalf("got %d chunks, want %d", len(got), tt.want)
			}
			for i, c := range got {
				if c.Index != i || c.Content != fmt.Sprintf("result %d", i) {
					t.Errorf("chunk %d = %+v", i, c)
				}
			}
		})
	}

	t.Run("empty list", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, httpRespondJSON(`{"results": []}`))
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", ResponsePath: "results", TextField: "text"}, Env{})
		got, err := h.Fetch(t.Context(), "q")
		if err != nil || len(got) != 0 {
			t.Errorf("Fetch = %v, %v; want no chunks and no error", got, err)
		}
	})
}

func TestHTTPAPIHeaders(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	secretDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secretDir, "kb"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "kb", "token"), []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := httpMapGetenv(map[string]string{
		"API_TOKEN":                             "tok-123",
		"A":                                     "1",
		"B_2":                                   "two",
		"CONTEXTROUTER_SECRET_OTHER_KB_API_KEY": "env-secret",
	})
	spec := v1alpha1.HTTPAPISource{
		URL:       srv.URL + "/search?q={{query}}",
		TextField: "text",
		Headers: []v1alpha1.HTTPHeader{
			{Name: "X-Literal", Value: httpStrPtr("plain $dollar and {braces}")},
			{Name: "Authorization", Value: httpStrPtr("Bearer ${API_TOKEN}")},
			{Name: "x-combo", Value: httpStrPtr("${A}:${B_2}!")},
			httpSecretHeader("X-File-Secret", "kb", "token"),
			httpSecretHeader("X-Env-Secret", "other-kb", "api.key"),
			{Name: "accept", Value: httpStrPtr("application/vnd.kb+json")},
		},
	}
	want := map[string]string{
		"X-Literal":     "plain $dollar and {braces}",
		"Authorization": "Bearer tok-123",
		"X-Combo":       "1:two!",
		"X-File-Secret": "file-secret",
		"X-Env-Secret":  "env-secret",
		"Accept":        "application/vnd.kb+json",
		"User-Agent":    "contextrouter",
	}

	t.Run("literal, ${VAR}, secret file and secret env var", func(t *testing.T) {
		h := newTestHTTPAPI(t, spec, Env{Getenv: getenv, Secrets: EnvFileSecrets{Dir: secretDir, Getenv: getenv}})
		if _, err := h.Fetch(t.Context(), "q"); err != nil {
			t.Fatal(err)
		}
		got := rec.last(t)
		for k, v := range want {
			if got.Header.Get(k) != v {
				t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
			}
		}
		if vs := got.Header.Values("Accept"); len(vs) != 1 {
			t.Errorf("Accept sent %d times: %q", len(vs), vs)
		}
	})

	t.Run("default secrets read env vars through Env.Getenv", func(t *testing.T) {
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{
			URL: srv.URL + "/?q={{query}}", TextField: "text",
			Headers: []v1alpha1.HTTPHeader{httpSecretHeader("X-Env-Secret", "other-kb", "api.key")},
		}, Env{Getenv: getenv})
		if _, err := h.Fetch(t.Context(), "q"); err != nil {
			t.Fatal(err)
		}
		if got := rec.last(t).Header.Get("X-Env-Secret"); got != "env-secret" {
			t.Errorf("X-Env-Secret = %q, want env-secret", got)
		}
	})

	t.Run("Host header sets the request host", func(t *testing.T) {
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{
			URL: srv.URL + "/?q={{query}}", TextField: "text",
			Headers: []v1alpha1.HTTPHeader{{Name: "Host", Value: httpStrPtr("kb.internal")}},
		}, Env{})
		if _, err := h.Fetch(t.Context(), "q"); err != nil {
			t.Fatal(err)
		}
		if got := rec.last(t).Host; got != "kb.internal" {
			t.Errorf("Host = %q, want kb.internal", got)
		}
	})

	t.Run("Content-Type header replaces the JSON default", func(t *testing.T) {
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{
			URL: srv.URL + "/", Method: v1alpha1.HTTPMethodPost, Body: "q={{query}}", TextField: "text",
			Headers: []v1alpha1.HTTPHeader{{Name: "Content-Type", Value: httpStrPtr("text/plain")}},
		}, Env{})
		if _, err := h.Fetch(t.Context(), "a b"); err != nil {
			t.Fatal(err)
		}
		got := rec.last(t)
		if got.Header.Get("Content-Type") != "text/plain" || got.Body != `q="a b"` {
			t.Errorf("Content-Type %q body %q; want text/plain and q=\"a b\"", got.Header.Get("Content-Type"), got.Body)
		}
	})
}

func TestHTTPAPISecretRotation(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	dir := t.TempDir()
	file := filepath.Join(dir, "kb", "token")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{
		URL: srv.URL + "/?q={{query}}", TextField: "text",
		Headers: []v1alpha1.HTTPHeader{httpSecretHeader("Authorization", "kb", "token")},
	}, Env{Secrets: EnvFileSecrets{Dir: dir, Getenv: httpMapGetenv(nil)}})

	for _, token := range []string{"first", "second"} {
		if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Fetch(t.Context(), "q"); err != nil {
			t.Fatal(err)
		}
		if got := rec.last(t).Header.Get("Authorization"); got != token {
			t.Errorf("Authorization = %q, want the rotated value %q", got, token)
		}
	}
}

func TestHTTPAPIHeaderResolutionErrors(t *testing.T) {
	srv, rec := newHTTPTestServer(t, httpRespondJSON(httpOneResult))
	dir := t.TempDir()
	tests := []struct {
		name    string
		headers []v1alpha1.HTTPHeader
		getenv  map[string]string
		wantErr string
		wantIs  error
	}{
		{
			name:    "missing secret",
			headers: []v1alpha1.HTTPHeader{{Name: "X-A", Value: httpStrPtr("a")}, httpSecretHeader("Authorization", "kb", "token")},
			wantErr: "spec.httpAPI.headers[1].valueFrom.secretKeyRef: secret kb key token: secret not found (set CONTEXTROUTER_SECRET_KB_TOKEN or create " + filepath.Join(dir, "kb", "token") + ")",
			wantIs:  ErrSecretNotFound,
		},
		{
			name:    "unset variable",
			headers: []v1alpha1.HTTPHeader{{Name: "Authorization", Value: httpStrPtr("Bearer ${API_TOKEN}")}},
			wantErr: "spec.httpAPI.headers[0].value: environment variable API_TOKEN is not set",
		},
		{
			name:    "second variable unset",
			headers: []v1alpha1.HTTPHeader{{Name: "X-Pair", Value: httpStrPtr("${SET}/${UNSET}")}},
			getenv:  map[string]string{"SET": "yes"},
			wantErr: "spec.httpAPI.headers[0].value: environment variable UNSET is not set",
		},
		{
			name:    "variable with a line break",
			headers: []v1alpha1.HTTPHeader{{Name: "X-Token", Value: httpStrPtr("${TOKEN}")}},
			getenv:  map[string]string{"TOKEN": "abc\r\nX-Injected: 1"},
			wantErr: "spec.httpAPI.headers[0].value: environment variable TOKEN contains a line break or control character",
		},
		{
			name:    "secret with a line break",
			headers: []v1alpha1.HTTPHeader{httpSecretHeader("X-Token", "multi", "line")},
			getenv:  map[string]string{"CONTEXTROUTER_SECRET_MULTI_LINE": "abc\nX-Injected: 1"},
			wantErr: "spec.httpAPI.headers[0].valueFrom.secretKeyRef: secret multi key line contains a line break or control character",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := httpMapGetenv(tt.getenv)
			h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text", Headers: tt.headers},
				Env{Getenv: getenv, Secrets: EnvFileSecrets{Dir: dir, Getenv: getenv}})
			before := len(rec.all())
			_, err := h.Fetch(t.Context(), "q")
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("err = %v\nwant  %s", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(err, %v) = false", tt.wantIs)
			}
			if strings.Contains(err.Error(), "X-Injected") {
				t.Errorf("error repeats the value: %v", err)
			}
			if n := len(rec.all()) - before; n != 0 {
				t.Errorf("server received %d requests, want none", n)
			}
		})
	}
}

// httpSlowHandler writes prefix (headers only when empty), then waits until the
// client goes away, so the test server closes promptly.
func httpSlowHandler(prefix string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if prefix != "" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, prefix)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}
}

func TestHTTPAPITimeout(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no response headers", httpSlowHandler("")},
		{"body stalls", httpSlowHandler(`[{"text": "partial"},`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newHTTPTestServer(t, tt.handler)
			h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text", Timeout: httpDurPtr(100 * time.Millisecond)}, Env{})
			start := time.Now()
			chunks, err := h.Fetch(t.Context(), "q")
			elapsed := time.Since(start)
			if err == nil {
				t.Fatalf("Fetch returned %v and no error", chunks)
			}
			if err.Error() != "timeout after 100ms" {
				t.Errorf("err = %q, want %q", err, "timeout after 100ms")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) = false")
			}
			if elapsed < 100*time.Millisecond || elapsed > time.Second {
				t.Errorf("Fetch returned after %s, want 100ms to 1s", elapsed)
			}
		})
	}

	t.Run("caller deadline shorter than the timeout", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, httpSlowHandler(""))
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text"}, Env{})
		ctx, cancel := context.WithTimeout(t.Context(), 80*time.Millisecond)
		defer cancel()
		_, err := h.Fetch(ctx, "q")
		var te *timeoutError
		if !errors.As(err, &te) {
			t.Fatalf("err = %v, want a timeout", err)
		}
		if te.after <= 0 || te.after > 80*time.Millisecond {
			t.Errorf("err = %q, want the caller's 80ms deadline, not the 5s timeout", err)
		}
	})

	t.Run("caller deadline equal to the timeout", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, httpSlowHandler(""))
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text", Timeout: httpDurPtr(100 * time.Millisecond)}, Env{})
		ctx, cancel := context.WithTimeout(t.Context(), h.Timeout())
		defer cancel()
		if _, err := h.Fetch(ctx, "q"); err == nil || err.Error() != "timeout after 100ms" {
			t.Errorf("err = %v, want timeout after 100ms", err)
		}
	})

	t.Run("cancelled by the caller", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, httpSlowHandler(""))
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text"}, Env{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := h.Fetch(ctx, "q")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "q=") {
			t.Errorf("err = %q: must not claim a timeout nor show the query string", err)
		}
	})
}

func TestHTTPAPIResponseErrors(t *testing.T) {
	bigBody := strings.Repeat("x", 500)
	padded := func(n int) string { // a valid result list of exactly n bytes
		const frame = `[{"text": ""}]`
		return `[{"text": "` + strings.Repeat("a", n-len(frame)) + `"}]`
	}
	tests := []struct {
		name    string
		spec    v1alpha1.HTTPAPISource
		handler http.HandlerFunc
		wantErr string // exact, or a prefix when it ends in "…"
	}{
		{
			name: "500 with a body excerpt",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, bigBody)
			},
			wantErr: "HTTP 500 Internal Server Error: " + bigBody[:200],
		},
		{
			name: "503 with an HTML body on one line",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "<h1>down</h1>\n\n   retry later\n")
			},
			wantErr: "HTTP 503 Service Unavailable: <h1>down</h1> retry later",
		},
		{
			name:    "404 without a body",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) },
			wantErr: "HTTP 404 Not Found",
		},
		{
			name:    "invalid JSON",
			handler: httpRespondJSON("<html>oops</html>"),
			wantErr: "invalid JSON response: invalid character '<' looking for beginning of value: <html>oops</html>",
		},
		{
			name:    "truncated JSON",
			handler: httpRespondJSON(`[{"text": "a"`),
			wantErr: "invalid JSON response: unexpected EOF: [{\"text\": \"a\"",
		},
		{
			name:    "data after the JSON value",
			handler: httpRespondJSON(`[] []`),
			wantErr: "invalid JSON response: data after the JSON value: [] []",
		},
		{
			name:    "empty body",
			handler: httpRespondJSON(""),
			wantErr: "invalid JSON response: the body is empty",
		},
		{
			name:    "oversized with Content-Length",
			spec:    v1alpha1.HTTPAPISource{MaxResponseSize: httpQtyPtr("1Ki")},
			handler: httpRespondJSON(padded(1025)),
			wantErr: "response larger than 1Ki",
		},
		{
			name: "oversized without Content-Length",
			spec: v1alpha1.HTTPAPISource{MaxResponseSize: httpQtyPtr("1Ki")},
			handler: func(w http.ResponseWriter, _ *http.Request) {
				body := padded(4096)
				for i := 0; i < len(body); i += 512 {
					_, _ = io.WriteString(w, body[i:i+512])
					w.(http.Flusher).Flush()
				}
			},
			wantErr: "response larger than 1Ki",
		},
		{
			name:    "default limit is 1Mi",
			handler: httpRespondJSON(padded(1<<20 + 1)),
			wantErr: "response larger than 1Mi",
		},
		{
			name:    "responsePath is an object",
			spec:    v1alpha1.HTTPAPISource{ResponsePath: "data"},
			handler: httpRespondJSON(`{"data": {"items": []}}`),
			wantErr: `responsePath "data": is an object, not a list`,
		},
		{
			name:    "responsePath is a number",
			spec:    v1alpha1.HTTPAPISource{ResponsePath: "data.count"},
			handler: httpRespondJSON(`{"data": {"count": 3}}`),
			wantErr: `responsePath "data.count": is a number, not a list`,
		},
		{
			name:    "responsePath missing",
			spec:    v1alpha1.HTTPAPISource{ResponsePath: "data.items"},
			handler: httpRespondJSON(`{"data": {"hits": []}}`),
			wantErr: `responsePath "data.items": not found in the response`,
		},
		{
			name:    "responsePath null",
			spec:    v1alpha1.HTTPAPISource{ResponsePath: "items"},
			handler: httpRespondJSON(`{"items": null}`),
			wantErr: `responsePath "items": is null, not a list`,
		},
		{
			name:    "no responsePath and an object",
			handler: httpRespondJSON(`{"items": []}`),
			wantErr: "response is an object, not a list; set spec.httpAPI.responsePath to the path of the result list",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newHTTPTestServer(t, tt.handler)
			tt.spec.URL = srv.URL + "/?q={{query}}"
			tt.spec.TextField = "text"
			h := newTestHTTPAPI(t, tt.spec, Env{})
			chunks, err := h.Fetch(t.Context(), "q")
			if err == nil {
				t.Fatalf("Fetch returned %d chunks and no error, want %q", len(chunks), tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("err = %q\nwant  %q", err, tt.wantErr)
			}
		})
	}

	t.Run("exactly maxResponseSize is accepted", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, httpRespondJSON(padded(1024)))
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text", MaxResponseSize: httpQtyPtr("1Ki")}, Env{})
		chunks, err := h.Fetch(t.Context(), "q")
		if err != nil || len(chunks) != 1 || len(chunks[0].Content) != 1024-len(`[{"text": ""}]`) {
			t.Errorf("Fetch = %d chunks, %v; want one chunk", len(chunks), err)
		}
	})

	t.Run("connection refused names the target without the query", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		base := srv.URL
		srv.Close()
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: base + "/search?q={{query}}", TextField: "text"}, Env{})
		_, err := h.Fetch(t.Context(), "private words")
		if err == nil {
			t.Fatal("Fetch succeeded against a closed server")
		}
		if want := "GET " + base + "/search: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("err = %q, want prefix %q", err, want)
		}
		if strings.Contains(err.Error(), "private") {
			t.Errorf("err = %q repeats the query", err)
		}
	})
}

// redirectSpec is a source on origin's /start that sends a secret X-Api-Key,
// an Authorization built from ${VAR}, a literal header and, for POST, a body.
func redirectSpec(origin string, method v1alpha1.HTTPMethod, fr v1alpha1.FollowRedirects) v1alpha1.HTTPAPISource {
	s := v1alpha1.HTTPAPISource{
		URL: origin + "/start?q={{query}}", TextField: "text", Method: method, FollowRedirects: fr,
		Headers: []v1alpha1.HTTPHeader{
			httpSecretHeader("X-Api-Key", "kb", "key"),
			{Name: "Authorization", Value: httpStrPtr("Bearer ${KB_TOKEN}")},
			{Name: "X-Tenant", Value: httpStrPtr("acme")},
		},
	}
	if method == v1alpha1.HTTPMethodPost {
		s.Body = `{"q": {{query}}}`
	}
	return s
}

var redirectEnv = Env{Getenv: httpMapGetenv(map[string]string{
	"KB_TOKEN":                    "bearer-s3cret",
	"CONTEXTROUTER_SECRET_KB_KEY": "key-s3cret",
})}

func TestHTTPAPIRedirects(t *testing.T) {
	// other is another host: same address, another port.
	other, otherRec := newHTTPTestServer(t, httpRespondJSON(`[{"text": "from the other host"}]`))
	otherHost := strings.TrimPrefix(other.URL, "http://")
	redirectTo := func(code int, loc func(r *http.Request) string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/start" {
				w.Header().Set("Location", loc(r))
				w.WriteHeader(code)
				return
			}
			httpRespondJSON(`[{"text": "from the same host"}]`)(w, r)
		}
	}
	toOther := func(*http.Request) string { return other.URL + "/moved?sig=abc" }
	toSelf := func(r *http.Request) string { return "/moved" }

	tests := []struct {
		name    string
		method  v1alpha1.HTTPMethod
		code    int
		to      func(*http.Request) string
		fr      v1alpha1.FollowRedirects
		want    string // the chunk's text, or
		wantErr string // the error after "GET <origin>/start: "
	}{
		{name: "same host is followed by default", code: http.StatusFound, to: toSelf, want: "from the same host"},
		{name: "another host is refused by default", code: http.StatusFound, to: toOther,
			wantErr: "redirect to another host refused: " + other.URL + "/moved (set spec.httpAPI.followRedirects to allow it)"},
		{name: "307 POST to another host is refused by default", method: v1alpha1.HTTPMethodPost, code: http.StatusTemporaryRedirect, to: toOther,
			wantErr: "redirect to another host refused: " + other.URL + "/moved (set spec.httpAPI.followRedirects to allow it)"},
		{name: "None refuses the same host too", code: http.StatusFound, to: toSelf, fr: v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectNone},
			wantErr: "redirect to http://127.0.0.1:PORT/moved refused: spec.httpAPI.followRedirects.policy is None"},
		{name: "an allowed host is followed", code: http.StatusFound, to: toOther,
			fr: v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{otherHost}}, want: "from the other host"},
		{name: "307 POST to an allowed host", method: v1alpha1.HTTPMethodPost, code: http.StatusTemporaryRedirect, to: toOther,
			fr: v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{otherHost}}, want: "from the other host"},
		{name: "a host without port allows the default port only", code: http.StatusFound, to: toOther,
			fr:      v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{"127.0.0.1"}},
			wantErr: "redirect to another host refused: " + other.URL + "/moved (not in spec.httpAPI.followRedirects.allowedHosts)"},
		{name: "non-http scheme is refused", code: http.StatusFound, to: func(*http.Request) string { return "file:///etc/passwd" },
			wantErr: `redirect to a "file" URL refused`},
		{name: "a loop stops", code: http.StatusFound, to: func(*http.Request) string { return "/start" },
			wantErr: "stopped after 10 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := cmp.Or(tt.method, v1alpha1.HTTPMethodGet)
			origin, originRec := newHTTPTestServer(t, redirectTo(tt.code, tt.to))
			before := len(otherRec.all())
			h := newTestHTTPAPI(t, redirectSpec(origin.URL, method, tt.fr), redirectEnv)
			chunks, err := h.Fetch(t.Context(), "private words")
			if tt.wantErr != "" {
				want := string(method) + " " + origin.URL + "/start: " + strings.ReplaceAll(tt.wantErr, "http://127.0.0.1:PORT", origin.URL)
				if err == nil || err.Error() != want {
					t.Fatalf("err = %v\nwant  %s", err, want)
				}
				if n := len(otherRec.all()) - before; n != 0 {
					t.Errorf("the other host received %d requests", n)
				}
				return
			}
			if err != nil || len(chunks) != 1 || chunks[0].Content != tt.want {
				t.Fatalf("Fetch = %+v, %v; want %q", chunks, err, tt.want)
			}
			first := originRec.all()[0]
			if first.Header.Get("X-Api-Key") != "key-s3cret" || first.Header.Get("Authorization") != "Bearer bearer-s3cret" {
				t.Fatalf("the first request lacks its headers: %v", first.Header)
			}
			var got httpSeen
			if tt.want == "from the other host" {
				if len(otherRec.all()) != before+1 {
					t.Fatalf("the other host received %d requests, want 1", len(otherRec.all())-before)
				}
				got = otherRec.last(t)
				for _, name := range []string{"X-Api-Key", "Authorization", "X-Tenant", "Referer", "Cookie"} {
					if v := got.Header.Get(name); v != "" {
						t.Errorf("the other host received %s: %q", name, v)
					}
				}
				for _, secret := range []string{"key-s3cret", "bearer-s3cret"} {
					if strings.Contains(fmt.Sprint(got.Header), secret) {
						t.Errorf("the other host received %s in %v", secret, got.Header)
					}
				}
			} else {
				got = originRec.last(t)
				// The same host gets the spec's headers again, but no Referer
				// (the previous URL holds the query text).
				if got.Header.Get("X-Api-Key") != "key-s3cret" || got.Header.Get("X-Tenant") != "acme" || got.Header.Get("Referer") != "" {
					t.Errorf("same-host redirect headers: %v", got.Header)
				}
			}
			if got.Path != "/moved" {
				t.Errorf("redirect target got path %q", got.Path)
			}
			if tt.code == http.StatusTemporaryRedirect && got.Body != `{"q": "private words"}` {
				t.Errorf("307 to an allowed host: body %q, want it re-sent", got.Body)
			}
		})
	}

	t.Run("https to http is refused, also with a custom client", func(t *testing.T) {
		tlsSrv := httptest.NewTLSServer(redirectTo(http.StatusFound, toOther))
		t.Cleanup(tlsSrv.Close)
		before := len(otherRec.all())
		fr := v1alpha1.FollowRedirects{Policy: v1alpha1.RedirectAllowedHosts, AllowedHosts: []string{otherHost}}
		h := newTestHTTPAPI(t, redirectSpec(tlsSrv.URL, v1alpha1.HTTPMethodGet, fr), Env{HTTPClient: tlsSrv.Client(), Getenv: redirectEnv.Getenv})
		_, err := h.Fetch(t.Context(), "q")
		if err == nil || !strings.HasSuffix(err.Error(), "redirect from https to http refused") {
			t.Errorf("err = %v, want the downgrade refused", err)
		}
		if len(otherRec.all()) != before {
			t.Error("the plain-http target received the redirected request")
		}
	})

	t.Run("custom client redirect policy still applies", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, redirectTo(http.StatusFound, toSelf))
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return errors.New("no redirects here") }}
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/start?q={{query}}", TextField: "text"}, Env{HTTPClient: client})
		_, err := h.Fetch(t.Context(), "q")
		if err == nil || !strings.HasSuffix(err.Error(), "no redirects here") {
			t.Errorf("err = %v, want the client's own policy", err)
		}
		if client.CheckRedirect(nil, nil).Error() != "no redirects here" {
			t.Error("the caller's client was modified")
		}
	})
}

// An upstream that echoes its request in an error body: the excerpt callers
// see in failed_sources holds none of the values sent, even cut in half, and
// no control characters.
func TestHTTPAPIErrorBodyHidesRequestValues(t *testing.T) {
	echo := func(status int, prefix string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			var b strings.Builder
			b.WriteString(prefix)
			for _, name := range []string{"X-Api-Key", "Authorization", "X-Tenant"} {
				fmt.Fprintf(&b, "%s=%s\r\n", name, r.Header.Get(name))
			}
			_, _ = io.WriteString(w, b.String())
		}
	}
	secrets := []string{"key-s3cret", "bearer-s3cret", "Bearer bearer-s3cret", "acme-tenant"}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string // prefix of the error
	}{
		{"401 echoing the headers", echo(http.StatusUnauthorized, "\x1b[31mdenied\x00\u202e: "), "HTTP 401 Unauthorized: [31mdenied: X-Api-Key=*** Authorization=*** X-Tenant=***"},
		// 200 bytes end with "X-Api-Key=key-": the start of the secret goes too.
		{"a cut inside a secret", echo(http.StatusBadGateway, strings.Repeat("x", 185)+" "), "HTTP 502 Bad Gateway: " + strings.Repeat("x", 185) + " X-Api-Key="},
		{"invalid JSON echoing the headers", echo(http.StatusOK, "not json "), "invalid JSON response: invalid character 'o' in literal null (expecting 'u'): not json X-Api-Key=*** Authorization=*** X-Tenant=***"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := newHTTPTestServer(t, tt.handler)
			spec := redirectSpec(srv.URL, v1alpha1.HTTPMethodGet, v1alpha1.FollowRedirects{})
			spec.Headers[2].Value = httpStrPtr("acme-tenant")
			h := newTestHTTPAPI(t, spec, redirectEnv)
			_, err := h.Fetch(t.Context(), "q")
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.want) {
				t.Errorf("err = %q\nwant prefix %q", msg, tt.want)
			}
			for _, secret := range secrets {
				if strings.Contains(msg, secret) || strings.HasSuffix(msg, secret[:4]) {
					t.Errorf("err shows (part of) %q: %q", secret, msg)
				}
			}
			if strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\u202e' }) {
				t.Errorf("err has control characters: %q", msg)
			}
		})
	}

	t.Run("credentials in the URL", func(t *testing.T) {
		srv, _ := newHTTPTestServer(t, func(w http.ResponseWriter, r *http.Request) {
			user, pw, _ := r.BasicAuth()
			http.Error(w, "bad credentials "+r.Header.Get("Authorization")+" for "+user+":"+pw, http.StatusForbidden)
		})
		u := strings.Replace(srv.URL, "http://", "http://robot:url-s3cret@", 1)
		h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: u + "/?q={{query}}", TextField: "text"}, Env{})
		_, err := h.Fetch(t.Context(), "q")
		if want := "HTTP 403 Forbidden: bad credentials Basic *** for robot:***"; err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant  %s", err, want)
		}
	})
}

func TestHTTPAPIConcurrentFetch(t *testing.T) {
	srv, _ := newHTTPTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]map[string]string{{"text": "echo " + r.URL.Query().Get("q")}})
	})
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", TextField: "text"}, Env{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			q := fmt.Sprintf("query %d", i)
			chunks, err := h.Fetch(t.Context(), q)
			if err != nil {
				errs <- err
				return
			}
			if len(chunks) != 1 || chunks[0].Content != "echo "+q {
				errs <- fmt.Errorf("query %q got %+v", q, chunks)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHTTPAPIValidation(t *testing.T) {
	const u = "https://kb.example.com/search?q={{query}}"
	value := func(name, v string) v1alpha1.HTTPHeader { return v1alpha1.HTTPHeader{Name: name, Value: httpStrPtr(v)} }
	tests := []struct {
		name    string
		spec    *v1alpha1.HTTPAPISource // nil: no httpAPI block
		wantErr string
	}{
		{"missing block", nil, "spec.httpAPI: required when type is HTTPAPI"},
		{"unparseable", &v1alpha1.HTTPAPISource{URL: "https://kb.example.com:port/?q={{query}}", TextField: "text"}, "spec.httpAPI.url: invalid URL: invalid port after host"},
		{"password cut by a slash", &v1alpha1.HTTPAPISource{URL: "https://bob:hunter2/x@kb.example.com/?q={{query}}", TextField: "text"}, "spec.httpAPI.url: invalid URL: invalid port after host"},
		{"white space", &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/search?q={{query}}&x=a b", TextField: "text"}, "spec.httpAPI.url: contains white space; write a space as %20"},
		{"query in host", &v1alpha1.HTTPAPISource{URL: "https://{{query}}.example.com/", TextField: "text"}, "spec.httpAPI.url: {{query}} may appear only in the path or the query string"},
		{"query in fragment", &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/?a=1#{{query}}", TextField: "text"}, "spec.httpAPI.url: {{query}} in the fragment (after #) is never sent to the server"},
		{"misspelt placeholder", &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/?q={{ query }}", TextField: "text"}, `spec.httpAPI.url: "{{ query }}" is not replaced; write {{query}}`},
		{"capitalised placeholder", &v1alpha1.HTTPAPISource{URL: "https://kb.example.com/?q={{Query}}", TextField: "text"}, `spec.httpAPI.url: "{{Query}}" is not replaced; write {{query}}`},
		{"body not JSON", &v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: `{"q": {{query}},}`, TextField: "text"}, "spec.httpAPI.body: not valid JSON once {{query}} is replaced by a JSON string"},
		{"quoted placeholder in body", &v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: `{"q": "{{query}}"}`, TextField: "text"}, "spec.httpAPI.body: not valid JSON: {{query}} is inserted as a quoted JSON string, so do not put it in quotes"},
		{"misspelt placeholder in body", &v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: `{"q": {{QUERY}}}`, TextField: "text"}, `spec.httpAPI.body: "{{QUERY}}" is not replaced; write {{query}}`},
		{"textField empty segment", &v1alpha1.HTTPAPISource{URL: u, TextField: "doc..text"}, `spec.httpAPI.textField: empty segment 2 in "doc..text"`},
		{"responsePath empty segment", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", ResponsePath: ".items"}, `spec.httpAPI.responsePath: empty segment 1 in ".items"`},
		{"titleField empty segment", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", TitleField: "t."}, `spec.httpAPI.titleField: empty segment 2 in "t."`},
		{"timeField empty segment", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", TimeField: ".t"}, `spec.httpAPI.timeField: empty segment 1 in ".t"`},
		{"pathField empty segment", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", PathField: "a..b"}, `spec.httpAPI.pathField: empty segment 2 in "a..b"`},
		// Validate refuses it too; the factory must not let Fetch panic.
		{"maxResults negative", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", MaxResults: -1}, "spec.httpAPI.maxResults: -1 is not positive"},
		{"header with neither", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", Headers: []v1alpha1.HTTPHeader{{Name: "X-A"}}}, "spec.httpAPI.headers[0]: set one of value and valueFrom"},
		{"unclosed variable", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", Headers: []v1alpha1.HTTPHeader{value("X-A", "a"), value("Authorization", "Bearer ${TOKEN")}}, "spec.httpAPI.headers[1].value: unclosed ${ at byte 7"},
		{"empty variable", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", Headers: []v1alpha1.HTTPHeader{value("X-A", "${}")}}, "spec.httpAPI.headers[0].value: ${} is not a valid variable reference (letters, digits and _; not starting with a digit)"},
		{"bad variable name", &v1alpha1.HTTPAPISource{URL: u, TextField: "text", Headers: []v1alpha1.HTTPHeader{value("X-A", "${API-TOKEN}")}}, "spec.httpAPI.headers[0].value: ${API-TOKEN} is not a valid variable reference (letters, digits and _; not starting with a digit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := httpTestSpec("kb", v1alpha1.HTTPAPISource{})
			spec.Spec.HTTPAPI = tt.spec
			src, err := New(spec, Env{})
			if err == nil {
				t.Fatalf("New succeeded (%T), want %q", src, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("err = %q\nwant  %q", err, tt.wantErr)
			}
		})
	}

	valid := []struct {
		name string
		spec v1alpha1.HTTPAPISource
	}{
		{"minimal", v1alpha1.HTTPAPISource{URL: u, TextField: "text"}},
		{"no placeholder", v1alpha1.HTTPAPISource{URL: "http://kb.example.com/latest", TextField: "text"}},
		{"placeholder in path and query", v1alpha1.HTTPAPISource{URL: "http://user:pw@kb.example.com:8080/d/{{query}}?q={{query}}#top", TextField: "text"}},
		{"POST with JSON body", v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: `{"q": {{query}}, "k": 8}`, TextField: "a.0.b"}},
		{"POST with form body and its Content-Type", v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: "q={{query}}", TextField: "text",
			Headers: []v1alpha1.HTTPHeader{value("Content-Type", "application/x-www-form-urlencoded")}}},
		{"POST body typed by a secret header is not checked", v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: "q={{query}}", TextField: "text",
			Headers: []v1alpha1.HTTPHeader{httpSecretHeader("Content-Type", "s", "k")}}},
		{"body with other braces", v1alpha1.HTTPAPISource{URL: u, Method: "POST", Body: `{"tpl": "{{name}}", "q": {{query}}}`, TextField: "text"}},
		{"limits at their bounds", v1alpha1.HTTPAPISource{URL: u, TextField: "text", MaxResults: 1000, MaxResponseSize: httpQtyPtr("1Gi"), Timeout: httpDurPtr(time.Millisecond)}},
		{"dollar without brace", v1alpha1.HTTPAPISource{URL: u, TextField: "text", Headers: []v1alpha1.HTTPHeader{value("X-Price", "$5 and $")}}},
	}
	for _, tt := range valid {
		t.Run("valid/"+tt.name, func(t *testing.T) {
			if _, err := New(httpTestSpec("kb", tt.spec), Env{}); err != nil {
				t.Errorf("New: %v", err)
			}
		})
	}
}

func TestHTTPAPIErrorTargetHidesSecrets(t *testing.T) {
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: "http://user:pw@kb.example.com:8080/d/{{query}}?q={{query}}&key=abc#top", TextField: "text"}, Env{})
	if want := "http://kb.example.com:8080/d/{{query}}"; h.target != want {
		t.Errorf("target = %q, want %q", h.target, want)
	}
}

func TestCleanResultPath(t *testing.T) {
	tests := map[string]string{
		"":                   "",
		"  ":                 "",
		"docs/a.md":          "docs/a.md",
		"/docs/a.md":         "docs/a.md",
		"docs/./b/../a.md":   "docs/a.md",
		"../../etc/passwd":   "etc/passwd",
		"//double//slash.md": "double/slash.md",
		"/":                  "",
	}
	for in, want := range tests {
		if got := cleanResultPath(in); got != want {
			t.Errorf("cleanResultPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkHTTPAPIFetch(b *testing.B) {
	type item struct {
		Title string `json:"title"`
		Path  string `json:"path"`
		Body  struct {
			Text string `json:"text"`
		} `json:"body"`
	}
	var resp struct {
		Results struct {
			Items []item `json:"items"`
		} `json:"results"`
	}
	for i := range 20 {
		var it item
		it.Title = fmt.Sprintf("Result %d", i)
		it.Path = fmt.Sprintf("docs/result-%d.md", i)
		it.Body.Text = strings.Repeat(fmt.Sprintf("Paragraph of result %d about remote work policy. ", i), 10)
		resp.Results.Items = append(resp.Results.Items, it)
	}
	payload, err := json.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	srv, _ := newHTTPTestServer(b, httpRespondJSON(string(payload)))
	h := newTestHTTPAPI(b, v1alpha1.HTTPAPISource{
		URL: srv.URL + "/search?q={{query}}", ResponsePath: "results.items",
		TextField: "body.text", TitleField: "title", PathField: "path",
	}, Env{})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		chunks, err := h.Fetch(ctx, "remote work policy")
		if err != nil {
			b.Fatal(err)
		}
		if len(chunks) != 20 {
			b.Fatalf("got %d chunks, want 20", len(chunks))
		}
	}
}

// TestHTTPAPITimeField: each result's date becomes the chunk's mtime (for
// Recency and freshness); a date that is neither RFC 3339 nor Unix seconds,
// or none, leaves the chunk without one.
func TestHTTPAPITimeField(t *testing.T) {
	srv, _ := newHTTPTestServer(t, httpRespondJSON(`{"results": [
	  {"text": "rfc 3339", "meta": {"updated": "2026-11-01T10:00:00Z"}},
	  {"text": "with offset and fraction", "meta": {"updated": "2026-11-01T12:00:00.5+02:00"}},
	  {"text": "unix seconds", "meta": {"updated": 1700000000}},
	  {"text": "unix seconds with fraction", "meta": {"updated": 1700000000.25}},
	  {"text": "digits in a string", "meta": {"updated": "1700000000"}},
	  {"text": "words", "meta": {"updated": "yesterday"}},
	  {"text": "negative", "meta": {"updated": -5}},
	  {"text": "an object", "meta": {"updated": {"at": 1}}},
	  {"text": "none"}
	]}`))
	h := newTestHTTPAPI(t, v1alpha1.HTTPAPISource{URL: srv.URL + "/?q={{query}}", ResponsePath: "results", TextField: "text", TimeField: "meta.updated"}, Env{})
	got, err := h.Fetch(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{
		"rfc 3339":                   time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
		"with offset and fraction":   time.Date(2026, 11, 1, 10, 0, 0, 5e8, time.UTC),
		"unix seconds":               time.Unix(1700000000, 0),
		"unix seconds with fraction": time.Unix(1700000000, 25e7),
	}
	if len(got) != 9 {
		t.Fatalf("%d chunks, want 9", len(got))
	}
	for _, c := range got {
		if w, ok := want[c.Content]; ok != !c.ModTime.IsZero() || (ok && !c.ModTime.Equal(w)) {
			t.Errorf("%s: mtime %v, want %v", c.Content, c.ModTime, w)
		}
	}
}
