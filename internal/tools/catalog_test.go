package tools

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Vocabulary of the generated catalogs: platforms with their resources,
// actions with the words people use for them.
var (
	genPlatforms = []string{"billing", "crm", "github", "gitlab", "jira", "slack", "kubernetes", "aws", "gcp",
		"azure", "datadog", "pagerduty", "stripe", "salesforce", "zendesk", "hubspot", "notion", "confluence",
		"postgres", "snowflake", "s3", "calendar", "gmail", "drive", "figma", "linear", "sentry", "vault",
		"okta", "twilio", "shopify", "analytics", "search", "weather", "maps", "news", "translate", "finance",
		"travel", "hr"}
	genResources = []string{"invoice", "customer", "payment", "refund", "subscription", "issue", "pull_request",
		"repository", "branch", "commit", "ticket", "comment", "channel", "message", "user", "group", "role",
		"deployment", "pod", "service", "bucket", "object", "alert", "incident", "dashboard", "metric", "log",
		"query", "table", "report", "event", "meeting", "email", "file", "folder", "page", "document", "secret",
		"policy", "order", "product", "flight", "hotel", "forecast", "route", "article", "contact", "lead",
		"campaign", "employee"}
	genActions = []struct{ verb, desc string }{
		{"create", "Create a new"}, {"get", "Fetch one"}, {"list", "List every"}, {"update", "Update the fields of a"},
		{"delete", "Delete a"}, {"search", "Search for a"}, {"export", "Export each"}, {"archive", "Archive an old"},
		{"assign", "Assign an owner to a"}, {"summarize", "Summarize the history of a"}, {"approve", "Approve a pending"},
		{"sync", "Synchronise a"}, {"restore", "Restore a deleted"}, {"count", "Count the"}, {"watch", "Watch for changes to a"},
	}
	genDetails = []string{"by id", "for a customer", "in a project", "with filters on status and date",
		"and notify the owner", "from the last 30 days", "across all regions", "for the current user",
		"with pagination", "as CSV", "in the audit trail", "for a team"}
	genAsks = []string{"please %s the %s", "can you %s a %s for me", "I need to %s this %s", "%s %s now",
		"how do I %s the %s", "help me %s our %s"}
)

// genCatalog makes n tools across platform.resource namespaces (a few
// without a namespace), with descriptions, tags and examples.
func genCatalog(n int, seed uint64) []Entry {
	r := rand.New(rand.NewPCG(seed, 7))
	entries := make([]Entry, 0, n)
	seen := map[string]bool{}
	for len(entries) < n {
		p := genPlatforms[r.IntN(len(genPlatforms))]
		res := genResources[r.IntN(len(genResources))]
		a := genActions[r.IntN(len(genActions))]
		name := a.verb + "_" + res
		ns := p + "." + strings.ReplaceAll(res, "_", "")
		if r.IntN(50) == 0 {
			ns = ""
			name = p + "_" + name
		}
		if seen[ns+"."+name] {
			// Variants keep big catalogs unique: create_invoice_v2...
			name = fmt.Sprintf("%s_v%d", name, len(entries))
		}
		seen[ns+"."+name] = true
		words := strings.ReplaceAll(res, "_", " ")
		t := v1alpha1.Tool{
			Name:        name,
			Namespace:   ns,
			Description: fmt.Sprintf("%s %s %s in %s %s.", a.desc, words, genDetails[r.IntN(len(genDetails))], p, genDetails[r.IntN(len(genDetails))]),
			Tags:        []string{p, a.verb},
			SideEffects: v1alpha1.SideEffectsRead,
		}
		for range 3 {
			t.Examples = append(t.Examples, fmt.Sprintf(genAsks[r.IntN(len(genAsks))], a.verb, p+" "+words))
		}
		entries = append(entries, Entry{Source: []string{"platform", "team"}[r.IntN(2)], Tool: t})
	}
	return entries
}
