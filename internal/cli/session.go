package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/server"
	"github.com/contextrouter/contextrouter/internal/session"
)

func newSessionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Build context packs from an agent's session",
	}
	cmd.AddCommand(newSessionBuildCommand())
	return cmd
}

func newSessionBuildCommand() *cobra.Command {
	var (
		sf        sourceFlags
		itemsFile string
		phase     string
		query     string
		agent     string
		tags      []string
		maxTokens int
		explain   bool
		output    string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "build -f PATH... --items FILE.jsonl --phase route|call|interpret|answer|handoff [--query TEXT] [-a AGENT] [--max-tokens N] [--explain] [-o text|json]",
		Short: "Print the context pack of a session for one phase",
		Long: `Build the context pack of a session (api.md §11): the items of a JSONL file,
cut to the phase budget, with oversized tool results replaced by summaries.
With --query, the router's query pipeline adds knowledge chunks (and tool cards
in the route phase).`,
		Example: `  contextrouter session build -f examples/quickstart --items session.jsonl --phase answer
  contextrouter session build -f examples/quickstart --items session.jsonl --phase route --query "roll back the deploy" -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("--query-timeout: %s must be positive", timeout)
			}
			ph, err := session.ParsePhase(phase)
			if err != nil {
				return fmt.Errorf("--phase: %w", err)
			}
			if maxTokens < 0 || maxTokens > session.MaxBudget {
				return fmt.Errorf("--max-tokens: %d must be between 0 and %d", maxTokens, session.MaxBudget)
			}
			sess, err := readSession(itemsFile)
			if err != nil {
				return err
			}
			snap, err := sf.compile(cmd.Context())
			if err != nil {
				return err
			}
			// The router's spec.phases, dedup threshold and firewall bound,
			// as serve applies them.
			policy, err := session.NewPolicy(snap.RouterSpec())
			if err != nil {
				return err
			}
			if _, err := policy.Limit(ph, maxTokens); err != nil {
				return fmt.Errorf("--max-tokens: %w", err)
			}
			// A session file enters whole: its secrets are masked as a
			// write to serve's API masks them (spec.sessions.secrets).
			sess, _ = session.MaskSessionSecrets(policy.Secrets(), sess)
			req := session.Request{Phase: ph, Query: query, Agent: agent, Tags: tags, MaxTokens: maxTokens, Explain: explain, Policy: policy}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			pack, resp, err := session.BuildFor(ctx, snap, sess, req)
			switch {
			case session.IsQueryError(err):
				return timeoutError(err, timeout)
			case err != nil:
				return fmt.Errorf("%s: %w", itemsFile, err)
			}
			if resp != nil {
				qr := req.QueryRequest()
				printWarnings(cmd.ErrOrStderr(), snap, qr.Agent, resp.Warnings)
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), pack)
			}
			printPack(cmd.OutOrStdout(), pack, resp)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&itemsFile, "items", "", "session file: JSON Lines of items, facts and episodes (api.md §11.6)")
	cmd.Flags().StringVar(&phase, "phase", "", "phase of the call: route, call, interpret, answer or handoff")
	cmd.Flags().StringVar(&query, "query", "", "what the call is about: ranks items and adds the query pipeline's chunks (and tool cards in the route phase)")
	cmd.Flags().StringVarP(&agent, "agent", "a", "", "agent identity: its permissions set the sensitivity floor")
	cmd.Flags().StringArrayVarP(&tags, "tag", "t", nil, "tag of the request (repeatable); items carrying it rank higher")
	cmd.Flags().IntVar(&maxTokens, "max-tokens", 0, "the pack's budget: below the phase's, or above it up to the phase's maxBudget")
	cmd.Flags().BoolVar(&explain, "explain", false, "list the entries left out and why (dropped_items)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().DurationVar(&timeout, "query-timeout", server.DefaultQueryTimeout, "longest the --query may take once the manifests are loaded")
	_ = cmd.MarkFlagRequired("items")
	_ = cmd.MarkFlagRequired("phase")
	return cmd
}

func readSession(name string) (*session.Session, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--items: %w", err)
	}
	defer f.Close()
	return session.ReadJSONL(name, f)
}

// printPack renders a pack for people: a summary of what went in and what
// was left out, then the text the model would see.
func printPack(w io.Writer, p *session.Pack, resp *engine.Response) {
	st := p.Stats
	fmt.Fprintf(w, "phase:           %s (budget %d tokens, memory cap %d)\n", p.Phase, p.Budget, st.MemoryCap)
	fmt.Fprintf(w, "pack:            %d of %d candidates, %d tokens", st.Included, st.Candidates, p.TotalTokens)
	var drops []string
	for _, x := range []struct {
		n    int
		what string
	}{{st.Dropped.Budget, "budget"}, {st.Dropped.Duplicate, "duplicate"}, {st.Dropped.MemoryCap, "memory cap"}, {st.Dropped.Sensitivity, "sensitivity"},
		{st.Dropped.Policy, "policy"}, {st.Dropped.Closure, "closure"}} {
		if x.n > 0 {
			drops = append(drops, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	if len(drops) > 0 {
		fmt.Fprintf(w, "; dropped: %s", strings.Join(drops, ", "))
	}
	for _, x := range []struct {
		n    int
		what string
	}{{st.Closures, "brought by closure"}, {st.Firewalled, "firewalled"}, {st.Firewall.TokensSaved, "tokens saved by the firewall"},
		{st.Redacted, "redacted"}, {st.SecretsMasked, "secrets masked"}, {st.PinnedDropped, "pinned but did not fit"}} {
		if x.n > 0 {
			fmt.Fprintf(w, "; %d %s", x.n, x.what)
		}
	}
	fmt.Fprintln(w)
	secs := make([]string, len(p.Sections))
	for i, s := range p.Sections {
		secs[i] = fmt.Sprintf("%s %d", s.Name, s.Tokens)
	}
	fmt.Fprintf(w, "sections:        %s\n", strings.Join(secs, ", "))
	for _, a := range p.Artifacts {
		fmt.Fprintf(w, "artifact:        %s (%s, %d bytes, %s)\n", a.Ref, a.ItemID, a.Bytes, a.MediaType)
	}
	for _, d := range p.DroppedItems {
		fmt.Fprintf(w, "dropped:         %s (%s, %s, %d tokens)\n", d.ID, d.Kind, d.Reason, d.Tokens)
	}
	if p.DroppedItemsTruncated {
		fmt.Fprintf(w, "dropped:         … the first %d listed; stats count them all\n", len(p.DroppedItems))
	}
	if resp != nil {
		fmt.Fprintf(w, "query:           %d chunks from routes %s\n", len(resp.Chunks), strings.Join(resp.MatchedRoutes, ", "))
		if p.Phase == session.PhaseRoute && (resp.Stats.Tools.Candidates > 0 || len(p.Tools) > 0) {
			printTools(w, p.Tools, resp.Stats.Tools)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, p.Text)
}
