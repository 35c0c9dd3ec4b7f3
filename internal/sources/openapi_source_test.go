package sources

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources/doctest"
)

// petstoreIDs are the tool ids of the Petstore (petstoreDoc) under
// a namespace.
func petstoreIDs(ns string) []string {
	var out []string
	for _, id := range []string{"addPet", "createUser", "createUsersWithListInput", "deleteOrder", "deletePet", "deleteUser",
		"findPetsByStatus", "findPetsByTags", "getInventory", "getOrderById", "getPetById", "getUserByName",
		"loginUser", "logoutUser", "placeOrder", "updatePet", "updatePetWithForm", "updateUser", "uploadFile"} {
		out = append(out, ns+"."+id)
	}
	return out
}

func TestToolsOpenAPIDirectory(t *testing.T) {
	root := t.TempDir()
	pet := readTestDoc(t, petstoreDoc).Content
	writeTestFile(t, root, "apis/petstore.yaml", pet)
	writeTestFile(t, root, "README.md", "not read: not JSON or YAML")
	src, err := New(toolsSpec("pets", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root},
		OpenAPI: &v1alpha1.OpenAPITools{Namespace: "petstore"}}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(Syncer); ok {
		t.Error("a directory catalog is not a Syncer")
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, petstoreIDs("petstore")) {
		t.Fatalf("ids = %q, %v", ids, err)
	}

	// A document that turns into Swagger 2.0 keeps the last good catalog.
	writeTestFile(t, root, "apis/petstore.yaml", "# converted back by mistake\nswagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n")
	ids, err = loadToolIDs(t, src)
	var stale *StaleError
	if !errors.As(err, &stale) || !slices.Equal(ids, petstoreIDs("petstore")) {
		t.Fatalf("after a bad edit: ids = %q, err = %v; want the last good catalog and a StaleError", ids, err)
	}
	if !strings.Contains(err.Error(), "apis/petstore.yaml:2: Swagger 2.0 is not supported; convert the document to OpenAPI 3.0 or 3.1") {
		t.Errorf("error = %v", err)
	}

	// A second document: both are read, their tools in one namespace.
	writeTestFile(t, root, "apis/petstore.yaml", pet)
	writeTestFile(t, root, "apis/incidents.json", readTestDoc(t, incidentsDoc).Content)
	ids, err = loadToolIDs(t, src)
	if err != nil || len(ids) != 19+6 || !slices.Contains(ids, "petstore.incidents.list") {
		t.Fatalf("two documents: ids = %q, %v", ids, err)
	}

	// Another JSON or YAML file is not an OpenAPI document: an error, so
	// that include is set to the documents.
	writeTestFile(t, root, "package.json", `{"name": "web"}`)
	if _, err = loadToolIDs(t, src); err == nil || !strings.Contains(err.Error(), "package.json:1: not an OpenAPI document: the openapi field is missing") {
		t.Errorf("a file that is no document: %v", err)
	}
}

// TestToolsOpenAPIMaxFileSize: a document over maxFileSize is an error for
// an OpenAPI source, not a skip: its API would lose its tools unseen.
func TestToolsOpenAPIMaxFileSize(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "petstore.yaml", readTestDoc(t, petstoreDoc).Content)
	small := resource.MustParse("1Ki")
	spec := func(o *v1alpha1.OpenAPITools) *v1alpha1.ContextSource {
		return toolsSpec("pets", &v1alpha1.ToolsSource{Directory: &v1alpha1.DirectorySource{Path: root, MaxFileSize: &small}, OpenAPI: o})
	}
	src, err := New(spec(&v1alpha1.OpenAPITools{}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err == nil || ids != nil || !strings.Contains(err.Error(), "skipped 1 files: 1 file larger than maxFileSize (petstore.yaml); an OpenAPI document is not skipped: raise spec.tools.directory.maxFileSize (documents may have up to 10Mi)") {
		t.Errorf("ids = %q, err = %v", ids, err)
	}
	// A catalog file over the size is skipped, as before.
	writeTestFile(t, root, "petstore.yaml", "- {name: a, description: '"+strings.Repeat("x", 2000)+"'}\n")
	src, err = New(spec(nil), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := loadToolIDs(t, src); err != nil || ids != nil {
		t.Errorf("catalog files: ids = %q, err = %v; want the file skipped", ids, err)
	}
}

func TestToolsOpenAPIGitRepo(t *testing.T) {
	u := newGitUpstream(t, "main")
	u.commit("api", map[string]string{"api/openapi.yaml": readTestDoc(t, petstoreDoc).Content, "docs/readme.md": "# Petstore"})
	env, _ := gitEnv(t, nil)
	src, err := New(toolsSpec("pets", &v1alpha1.ToolsSource{
		GitRepo: &v1alpha1.GitRepoSource{URL: u.fileURL(), Ref: "main", Include: []string{"api/openapi.yaml"}},
		OpenAPI: &v1alpha1.OpenAPITools{Namespace: "petstore", Exclude: &v1alpha1.OperationSelector{Tags: []string{"user"}}},
	}), env)
	if err != nil {
		t.Fatal(err)
	}
	sy, ok := src.(Syncer)
	if !ok {
		t.Fatalf("%T is not a Syncer", src)
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || len(ids) != 12 || slices.Contains(ids, "petstore.loginUser") {
		t.Fatalf("ids = %q, %v; want the 12 pet and store operations", ids, err)
	}

	// A commit with a reference to another document: the catalog stays.
	bad := strings.Replace(readTestDoc(t, petstoreDoc).Content, "$ref: '#/components/requestBodies/Pet'", "$ref: 'bodies.yaml#/Pet'", 1)
	u.commit("split", map[string]string{"api/openapi.yaml": bad})
	if changed, err := sy.Sync(context.Background()); err != nil || !changed {
		t.Fatalf("sync: changed=%v err=%v", changed, err)
	}
	ids, err = loadToolIDs(t, src)
	var stale *StaleError
	if !errors.As(err, &stale) || len(ids) != 12 {
		t.Fatalf("after a bad commit: ids = %q, err = %v", ids, err)
	}
	if !strings.Contains(err.Error(), `api/openapi.yaml:24: paths[/pet].put.requestBody.$ref: "bodies.yaml#/Pet" refers to another document`) {
		t.Errorf("error = %v", err)
	}

	u.commit("fix", map[string]string{"api/openapi.yaml": readTestDoc(t, incidentsDoc).Content})
	if _, err := sy.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A .yaml file holding JSON is read too: JSON is YAML.
	ids, err = loadToolIDs(t, src)
	if err != nil || !slices.Contains(ids, "petstore.incidents.list") || len(ids) != 6 {
		t.Errorf("after the fix: ids = %q, %v", ids, err)
	}
}

func httpToolsSpec(url string, o *v1alpha1.OpenAPITools, headers ...v1alpha1.HTTPHeader) *v1alpha1.ContextSource {
	return toolsSpec("pets", &v1alpha1.ToolsSource{HTTP: &v1alpha1.CatalogHTTPSource{URL: url, Headers: headers,
		Timeout: &metav1.Duration{Duration: 2 * time.Second}}, OpenAPI: o})
}

func TestToolsOpenAPIHTTP(t *testing.T) {
	pet := readTestDoc(t, petstoreDoc).Content
	srv := doctest.New(t, pet)
	token := "tok-4f9a1c7e2b"
	env := Env{Logger: discardTestLogger(), Getenv: func(k string) string { return map[string]string{"PET_TOKEN": token}[k] }}
	value := "Bearer ${PET_TOKEN}"
	src, err := New(httpToolsSpec(srv.URL+"/api/v3/openapi.yaml?sig=s3cret-sig", &v1alpha1.OpenAPITools{Namespace: "petstore"},
		v1alpha1.HTTPHeader{Name: "Authorization", Value: &value}), env)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := src.(Fetcher)
	if !ok || f.Interval() != 5*time.Minute || f.Fetched() {
		t.Fatalf("%T: a Fetcher with the default interval, not fetched before its first load", src)
	}
	ids, err := loadToolIDs(t, src)
	if err != nil || !slices.Equal(ids, petstoreIDs("petstore")) {
		t.Fatalf("ids = %q, %v", ids, err)
	}
	h, q := srv.Request(0)
	if h.Get("Authorization") != "Bearer "+token || h.Get("User-Agent") != "contextrouter" || q != "sig=s3cret-sig" {
		t.Errorf("request: headers %v, query %q", h, q)
	}
	// Loading again does not fetch: the sync loop does.
	if _, err := loadToolIDs(t, src); err != nil || srv.Requests() != 1 {
		t.Errorf("a second load fetched: %d requests, %v", srv.Requests(), err)
	}
	if changed, err := f.Sync(context.Background()); changed || err != nil {
		t.Errorf("sync of the same document: changed=%v err=%v", changed, err)
	}

	// A failing server: the catalog stays, the error says why without the
	// token it echoes or the URL's query string.
	srv.Serve(http.StatusUnauthorized, "bad credentials: Bearer "+token)
	changed, err := f.Sync(context.Background())
	if !changed || err == nil {
		t.Fatalf("sync of a 401: changed=%v err=%v", changed, err)
	}
	ids, lerr := loadToolIDs(t, src)
	var stale *StaleError
	if !errors.As(lerr, &stale) || len(ids) != 19 {
		t.Fatalf("after a 401: ids = %q, err = %v", ids, lerr)
	}
	want := "http " + srv.URL + "/api/v3/openapi.yaml: HTTP 401 Unauthorized: bad credentials: ***"
	for _, e := range []error{err, lerr} {
		if msg := e.Error(); !strings.Contains(msg, want) || strings.Contains(msg, token) || strings.Contains(msg, "s3cret") {
			t.Errorf("error = %q\nwant it to contain %q, without the token and the query string", msg, want)
		}
	}

	// A malformed document: fetched, refused by the catalog, which stays.
	srv.Serve(http.StatusOK, "openapi: 3.1.0\ninfo: {title: t\n")
	if changed, err := f.Sync(context.Background()); !changed || err != nil {
		t.Fatalf("sync of a malformed document: changed=%v err=%v", changed, err)
	}
	ids, err = loadToolIDs(t, src)
	if !errors.As(err, &stale) || len(ids) != 19 || !strings.Contains(err.Error(), srv.URL+"/api/v3/openapi.yaml:2: invalid YAML") {
		t.Fatalf("malformed: ids = %q, err = %v", ids, err)
	}

	// The server's next good document serves.
	srv.Serve(http.StatusOK, readTestDoc(t, incidentsDoc).Content)
	if changed, err := f.Sync(context.Background()); !changed || err != nil {
		t.Fatalf("sync: changed=%v err=%v", changed, err)
	}
	if ids, err = loadToolIDs(t, src); err != nil || len(ids) != 6 || ids[0] != "petstore.get_incidents_id" {
		t.Errorf("after the fix: ids = %q, %v", ids, err)
	}
}

// TestToolsHTTPLimits: a fetch is bounded in size and time, follows
// redirects to the URL's host only, and without a fetch there is no
// catalog.
func TestToolsHTTPLimits(t *testing.T) {
	other := doctest.New(t, readTestDoc(t, petstoreDoc).Content)
	tests := []struct {
		name  string
		setup func(s *doctest.Server)
		want  string
	}{
		{"larger than 10Mi", func(s *doctest.Server) { s.Serve(http.StatusOK, strings.Repeat("#", MaxFetchedCatalogBytes+1)) }, "/openapi.yaml: response larger than 10Mi"},
		{"at 10Mi, fetched and read", func(s *doctest.Server) {
			doc := readTestDoc(t, petstoreDoc).Content
			s.Serve(http.StatusOK, doc+strings.Repeat("#", MaxFetchedCatalogBytes-len(doc)))
		}, ""},
		{"slower than the timeout", func(s *doctest.Server) { s.Delay(5 * time.Second) }, "/openapi.yaml: timeout after 300ms"},
		{"redirect to another host", func(s *doctest.Server) {
			s.Config.Handler = http.RedirectHandler(other.URL+"/openapi.yaml", http.StatusFound)
		}, "redirect to another host refused: " + other.URL + "/openapi.yaml (set spec.tools.http.followRedirects to allow it)"},
		{"server down", func(s *doctest.Server) { s.Close() }, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := doctest.New(t, "")
			tt.setup(srv)
			spec := httpToolsSpec(srv.URL+"/openapi.yaml", &v1alpha1.OpenAPITools{})
			spec.Spec.Tools.HTTP.Timeout.Duration = 300 * time.Millisecond
			src, err := New(spec, Env{Logger: discardTestLogger()})
			if err != nil {
				t.Fatal(err)
			}
			ids, err := loadToolIDs(t, src)
			if tt.want == "" {
				if err != nil || len(ids) != 19 {
					t.Errorf("ids = %q, err = %v", ids, err)
				}
				return
			}
			var stale *StaleError
			if err == nil || errors.As(err, &stale) || ids != nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ids = %q, err = %v; want no catalog and %q", ids, err, tt.want)
			}
		})
	}
}

// TestToolsHTTPBackground: a source built while a configuration serves
// fetches on its sync loop only; until then it has no catalog.
func TestToolsHTTPBackground(t *testing.T) {
	srv := doctest.New(t, "- {name: web_search, description: Search the web., sideEffects: Read}\n")
	src, err := New(toolsSpec("web", &v1alpha1.ToolsSource{HTTP: &v1alpha1.CatalogHTTPSource{URL: srv.URL + "/catalog.yaml"}}),
		Env{Logger: discardTestLogger(), ListInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err == nil || err.Error() != "http "+srv.URL+"/catalog.yaml: not fetched yet" || ids != nil || srv.Requests() != 0 {
		t.Fatalf("before the first fetch: ids = %q, err = %v, %d requests", ids, err, srv.Requests())
	}
	f := src.(Fetcher)
	if changed, err := f.Sync(context.Background()); !changed || err != nil || !f.Fetched() {
		t.Fatalf("first sync: changed=%v err=%v fetched=%v", changed, err, f.Fetched())
	}
	// Without openAPI, the file is a catalog file.
	if ids, err := loadToolIDs(t, src); err != nil || !slices.Equal(ids, []string{"web_search"}) {
		t.Errorf("ids = %q, %v", ids, err)
	}
}

func TestToolsOpenAPIFactoryErrors(t *testing.T) {
	tests := []struct {
		name string
		ts   *v1alpha1.ToolsSource
		want string
	}{
		{"openAPI of an inline catalog", &v1alpha1.ToolsSource{Catalog: []v1alpha1.Tool{{Name: "a", Description: "A."}}, OpenAPI: &v1alpha1.OpenAPITools{}},
			"spec.tools.openAPI: reads documents from directory, gitRepo or http, not an inline catalog"},
		{"url not http", &v1alpha1.ToolsSource{HTTP: &v1alpha1.CatalogHTTPSource{URL: "ftp://x.example.com/a.json"}}, "spec.tools.http.url: must be an absolute http or https URL"},
		{"header variable", &v1alpha1.ToolsSource{HTTP: &v1alpha1.CatalogHTTPSource{URL: "https://x.example.com/a.json",
			Headers: []v1alpha1.HTTPHeader{{Name: "X-Key", Value: ptrTo("${1BAD}")}}}}, "spec.tools.http.headers[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(toolsSpec("t", tt.ts), Env{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestToolsHTTPURLCredentials: a URL's user part is sent as Basic
// authentication and never shown: not in the file name errors carry, not
// in what the server echoes of it.
func TestToolsHTTPURLCredentials(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, "no access for %s with %s (header %s)", user, pass, r.Header.Get("Authorization"))
	}))
	t.Cleanup(echo.Close)
	const user, pass = "catalog-reader", "pa55-w0rd-9c1e"
	raw := strings.Replace(echo.URL, "http://", "http://"+user+":"+pass+"@", 1) + "/openapi.json"
	src, err := New(httpToolsSpec(raw, &v1alpha1.OpenAPITools{}), Env{Logger: discardTestLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := loadToolIDs(t, src)
	if err == nil || ids != nil {
		t.Fatalf("ids = %q, err = %v; want a 403", ids, err)
	}
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	msg := err.Error()
	if !strings.Contains(msg, "http "+echo.URL+"/openapi.json: HTTP 403 Forbidden: no access for *** with *** (header Basic ***)") {
		t.Errorf("error = %q", msg)
	}
	for _, secret := range []string{pass, basic, user} {
		if strings.Contains(msg, secret) {
			t.Errorf("error %q shows %q", msg, secret)
		}
	}
}
