package router_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/contextrouter/contextrouter/pkg/router"
)

// Load the quickstart's manifests and ask the question an HR assistant
// got: the router picks the routes, checks the agent's permissions and
// returns the chunks that fit the budget, best first.
func Example() {
	ctx := context.Background()
	r, err := router.Load(ctx, []string{"../../examples/quickstart"}, router.Options{})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := r.Query(ctx, router.Request{Text: "How many vacation days do I get?", Agent: "hr-assistant"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("routes:", resp.MatchedRoutes)
	for _, c := range resp.Chunks[:2] {
		fmt.Printf("%s: %s\n", c.Source, c.Title)
	}
	// Output:
	// routes: [always hr-policies]
	// system-prompt: Acme Assist system prompt
	// hr-docs: Vacation and Time Off (PTO) Policy - Annual vacation allowance
}

// Build the context pack of an agent's session for the answer phase: the
// session's turns, tool results (oversized ones replaced by a summary and an
// artifact ref) and facts, cut to the phase budget.
func ExampleRouter_BuildPack() {
	ctx := context.Background()
	r, err := router.Load(ctx, []string{"../../examples/quickstart"}, router.Options{})
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Open("../../examples/sessions/pto.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	s, err := router.ReadSession(f.Name(), f)
	if err != nil {
		log.Fatal(err)
	}
	pack, err := r.BuildPack(ctx, s, router.PackRequest{Phase: router.PhaseAnswer, Agent: "hr-assistant"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("budget:", pack.Budget, "within:", pack.TotalTokens <= pack.Budget)
	fmt.Println("every candidate accounted for:", pack.Stats.Included+pack.Stats.Dropped.Total() == pack.Stats.Candidates)
	fmt.Println("firewalled tool results:", pack.Stats.Firewalled)
	// Output:
	// budget: 6000 within: true
	// every candidate accounted for: true
	// firewalled tool results: 1
}
