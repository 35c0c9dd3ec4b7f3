package engine

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// TestOpenAPIShortlist: the operations of the Petstore (OpenAPI 3.0, read
// from a folder) are shortlisted like any catalog: a question reaches its
// operation, and the side effects the methods give are what permissions
// filter on.
func TestOpenAPIShortlist(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "openapi", "api"))
	if err != nil {
		t.Fatal(err)
	}
	src := v1alpha1.ContextSource{ObjectMeta: meta("petstore"), Spec: v1alpha1.ContextSourceSpec{
		Type: v1alpha1.SourceTools, Tools: &v1alpha1.ToolsSource{
			Directory: &v1alpha1.DirectorySource{Path: dir, Include: []string{"petstore.yaml"}},
			OpenAPI:   &v1alpha1.OpenAPITools{Namespace: "petstore"},
		},
	}}
	reader := perm("reader", v1alpha1.AgentPermissionSpec{Agents: []string{"reader"}, AllowSources: []string{"petstore"}, Tools: v1alpha1.ToolRules{MaxSideEffects: v1alpha1.SideEffectsRead}})
	s := compile(t, &Config{Router: router(nil), Routes: []v1alpha1.ContextRoute{routeTo("all", "", "petstore")},
		Sources: []v1alpha1.ContextSource{src}, Permissions: []v1alpha1.AgentPermission{reader}})

	tests := []struct{ text, want string }{
		{"find pets by status", "petstore.findPetsByStatus"},
		{"which pets have the tag 'fluffy'?", "petstore.findPetsByTags"},
		{"place an order for a pet", "petstore.placeOrder"},
		{"upload an image of my pet", "petstore.uploadFile"},
		{"how many pets per status are in the inventory", "petstore.getInventory"},
		{"log the user into the system", "petstore.loginUser"},
		{"delete a user", "petstore.deleteUser"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			r := query(t, s, Request{Text: tt.text})
			if ids := cardIDs(r.Tools); len(ids) == 0 || ids[0] != tt.want {
				t.Errorf("cards = %q, want %s first", ids, tt.want)
			}
		})
	}

	// DELETE is Destructive: a reader may not use it; GET is Read: it may.
	if ids := cardIDs(query(t, s, Request{Text: "delete a pet"}).Tools); len(ids) == 0 || ids[0] != "petstore.deletePet" {
		t.Errorf("cards = %q, want petstore.deletePet first", ids)
	}
	r := query(t, s, Request{Text: "delete a pet", Agent: "reader"})
	if ids := cardIDs(r.Tools); slices.Contains(ids, "petstore.deletePet") || slices.Contains(ids, "petstore.addPet") {
		t.Errorf("reader's cards = %q, want no operation that writes", ids)
	}
	if ids := cardIDs(query(t, s, Request{Text: "find a pet by its id", Agent: "reader"}).Tools); len(ids) == 0 || ids[0] != "petstore.getPetById" {
		t.Errorf("reader's cards = %q, want petstore.getPetById first", ids)
	}
	e, ok := s.DescribeTool("", "petstore", "petstore.findPetsByStatus")
	if !ok || string(e.Tool.InputSchema.Raw) != `{"properties":{"status":{"default":"available","description":"Status values to filter by","enum":["available","pending","sold"],"type":"string"}},"type":"object"}` {
		t.Errorf("describe = %+v, %v", e, ok)
	}
}
