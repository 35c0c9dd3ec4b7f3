package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources/doctest"
)

// readOpenAPITestDoc reads a document by its path from the repository root.
func readOpenAPITestDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openAPIManifests: a router whose route reaches the tools of OpenAPI
// documents fetched over HTTP, one source per url (named pets, ops, …) with
// its interval.
func openAPIManifests(sources ...[3]string) string {
	out := "apiVersion: contextrouter.dev/v1alpha1\nkind: ContextRouter\nmetadata: {name: r}\nspec: {defaultAccess: Allow}\n"
	route := ""
	for _, s := range sources {
		name, url, interval := s[0], s[1], s[2]
		out += fmt.Sprintf("---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextSource\nmetadata: {name: %s}\nspec:\n  type: Tools\n  tools:\n    http: {url: %q, interval: %s, timeout: 5s}\n    openAPI: {namespace: %s}\n",
			name, url, interval, name)
		route += fmt.Sprintf("{name: %s}, ", name)
	}
	return out + "---\napiVersion: contextrouter.dev/v1alpha1\nkind: ContextRoute\nmetadata: {name: all}\nspec:\n  sources: [" + route + "]\n"
}

func topTool(r engine.Response) string {
	if len(r.Tools) == 0 {
		return ""
	}
	return r.Tools[0].Namespace + "." + r.Tools[0].Name
}

// TestOpenAPICatalogOverHTTP: serve shortlists the operations of an OpenAPI
// document it fetches, fetches it again every interval, keeps the last good
// catalog while the server fails (counting the failures), and fetches a
// source added while it serves on that source's sync loop at once.
func TestOpenAPICatalogOverHTTP(t *testing.T) {
	api := doctest.New(t, readOpenAPITestDoc(t, "examples/openapi/api/petstore.yaml"))
	dir := t.TempDir()
	manifest := filepath.Join(dir, "router.yaml")
	pets := [3]string{"pets", api.URL + "/openapi.yaml", "200ms"}
	writeAtomic(t, manifest, openAPIManifests(pets))
	ts := startServer(t, Options{Paths: []string{dir}, PollInterval: -1})
	ts.waitReady()

	find := engine.Request{Text: "find pets by status"}
	if r := ts.query(find); topTool(r) != "pets.findPetsByStatus" || len(r.FailedSources) != 0 {
		t.Fatalf("cards %v, failed %v; want pets.findPetsByStatus first", r.Tools, r.FailedSources)
	}

	// The server fails: the catalog serves on, the source is reported and
	// the failures counted.
	api.Serve(http.StatusInternalServerError, "upstream down")
	eventually(t, 20*time.Second, "a counted fetch failure", func() bool {
		n, _ := ts.metric("contextrouter_catalog_fetch_failures_total", "source", "pets")
		return n >= 1
	})
	eventually(t, 20*time.Second, "the failure reported", func() bool { return failedWith(ts.query(find), "pets", "HTTP 500") })
	if r := ts.query(find); topTool(r) != "pets.findPetsByStatus" {
		t.Errorf("while failing: cards %v, want the last good catalog", r.Tools)
	}

	// A new document serves at the next fetch.
	api.Serve(http.StatusOK, readOpenAPITestDoc(t, "internal/sources/testdata/openapi/incidents-3.1.json"))
	page := engine.Request{Text: "open an incident and page the on-call engineer"}
	eventually(t, 20*time.Second, "the new document's tools", func() bool { return topTool(ts.query(page)) == "pets.incidents.open" })

	// A source added while serving, with an interval of an hour: its sync
	// loop fetches at once, not an hour later.
	other := doctest.New(t, readOpenAPITestDoc(t, "examples/openapi/api/petstore.yaml"))
	writeAtomic(t, manifest, openAPIManifests(pets, [3]string{"ops", other.URL + "/openapi.yaml", "1h"}))
	eventually(t, 20*time.Second, "the added source's tools", func() bool { return hasTool(ts.query(find), "ops", "findPetsByStatus") })
	if r := ts.query(find); len(r.FailedSources) != 0 {
		t.Errorf("failed sources %v", r.FailedSources)
	}
}
