package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/server"
	"github.com/contextrouter/contextrouter/internal/tools"
)

func newToolsCommand() *cobra.Command {
	var (
		sf       sourceFlags
		req      engine.Request
		metadata []string
		output   string
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "tools -f PATH... [-a AGENT] [-t TAG]... [-m KEY=VALUE]... [--max-tools N] [--explain] [--format openai|openai-responses|anthropic] [-o text|json] TEXT",
		Short: "Shortlist the tools for one question from manifest files",
		Long: `Shortlist the tools for one question: the tool cards of POST /v1/tools
(api.md §10). No document is read. A question whose first word is "tree",
"snapshot", "diff" or "approve" needs another word first, or that word is
the subcommand.`,
		Example: `  contextrouter tools -f examples/quickstart -a eng-assistant "roll back the last deploy"
  contextrouter tools -f examples/quickstart --max-tools 2 -o json "open a ticket"
  contextrouter tools -f examples/quickstart --explain "who is on call for payments"
  contextrouter tools -f examples/quickstart -a eng-assistant --format openai -o json "is fleet-api live"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := engine.CheckToolFormat(req.Format); err != nil {
				return fmt.Errorf("--format: %w", err)
			}
			snap, err := sf.question(cmd.Context(), &req, args, metadata, output, timeout)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			resp, err := snap.FindTools(ctx, req)
			if err != nil {
				return timeoutError(err, timeout)
			}
			printWarnings(cmd.ErrOrStderr(), snap, req.Agent, snap.ToolWarnings(req.Agent, len(resp.DeniedSources)))
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			w := cmd.OutOrStdout()
			printRouting(w, snap, resp.MatchedRoutes, resp.DeniedSources, resp.FailedSources, resp.RouteErrors)
			printTools(w, resp.Tools, resp.Stats.Tools)
			if resp.Definitions != nil {
				return printDefinitions(w, resp.Definitions)
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVarP(&req.Agent, "agent", "a", "", "agent identity asking the question")
	cmd.Flags().StringArrayVarP(&req.Tags, "tag", "t", nil, "tag of the question (repeatable)")
	cmd.Flags().StringArrayVarP(&metadata, "metadata", "m", nil, "metadata KEY=VALUE (repeatable)")
	cmd.Flags().IntVar(&req.MaxTools, "max-tools", 0, fmt.Sprintf("number of tool cards (0 = the router's spec.tools.topK; at most %d)", engine.MaxToolsPerRequest))
	cmd.Flags().BoolVar(&req.Explain, "explain", false, "show why each card scored and how sure it is (matched words and fields, closest example, score parts, confidence before and after calibration)")
	cmd.Flags().StringVar(&req.Format, "format", "", "also give the cards as a provider's tool definitions, input schemas included: "+strings.Join(engine.ToolFormats, ", "))
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().DurationVar(&timeout, "query-timeout", server.DefaultQueryTimeout, "longest the question may take once the manifests are loaded")
	cmd.AddCommand(newToolsTreeCommand(), newToolsSnapshotCommand(), newToolsDiffCommand(), newToolsApproveCommand())
	return cmd
}

func newToolsTreeCommand() *cobra.Command {
	var (
		sf     sourceFlags
		agent  string
		output string
	)
	cmd := &cobra.Command{
		Use:   "tree -f PATH... [-a AGENT] [-o text|json]",
		Short: "Print the choice graph of the tools an agent may use",
		Long: `Print the choice graph of every tool the agent may use in the router's
tool sources (GET /v1/tools/tree): tools grouped by namespace, large groups
split by similarity. No route is evaluated.`,
		Example: `  contextrouter tools tree -f examples/quickstart -a eng-assistant`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := engine.CheckAgent(agent); err != nil {
				return fmt.Errorf("--agent: %w", err)
			}
			snap, err := sf.compile(cmd.Context())
			if err != nil {
				return err
			}
			root := snap.ToolTree(agent)
			printWarnings(cmd.ErrOrStderr(), snap, agent, snap.ToolTreeWarnings(agent, root))
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), struct {
					Root engine.ToolNode `json:"root"`
				}{root})
			}
			printTree(cmd.OutOrStdout(), root, "")
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVarP(&agent, "agent", "a", "", "agent whose tools to show")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// question checks the flags that query and tools share, fills req from
// them and the arguments, and compiles the router.
func (f *sourceFlags) question(ctx context.Context, req *engine.Request, args, metadata []string, output string, timeout time.Duration) (*engine.Snapshot, error) {
	if err := checkOutput(output); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("--query-timeout: %s must be positive", timeout)
	}
	req.Text = strings.Join(args, " ")
	var err error
	if req.Metadata, err = parseMetadata(metadata); err != nil {
		return nil, err
	}
	return f.compile(ctx)
}

// timeoutError words a question stopped by --query-timeout; other errors
// pass as they are.
func timeoutError(err error, timeout time.Duration) error {
	var stopped *engine.StoppedError
	if errors.As(err, &stopped) && errors.Is(err, context.DeadlineExceeded) {
		return errors.New(stopped.TimeoutMessage(timeout) + " (--query-timeout)")
	}
	return err
}

func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("--output: must be text or json, not %q", output)
	}
	return nil
}

// parseMetadata reads -m KEY=VALUE flags, split at the first "=".
func parseMetadata(kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--metadata %q: want KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func toolID(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// printTools renders tool cards for people: a summary line, then each card
// with its id, score, side effects, source and description.
func printTools(w io.Writer, cards []engine.ToolCard, st engine.ToolStats) {
	fmt.Fprintf(w, "tools:           %d of %d candidates", st.Returned, st.Candidates)
	var notes []string
	if st.Denied > 0 {
		notes = append(notes, fmt.Sprintf("%d denied by tool rules", st.Denied))
	}
	if st.BelowCut > 0 {
		notes = append(notes, fmt.Sprintf("%d below the adaptive cut", st.BelowCut))
	}
	if st.BelowThreshold > 0 {
		notes = append(notes, fmt.Sprintf("%d below minScore", st.BelowThreshold))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(notes, ", "))
	}
	if st.Reason != "" {
		fmt.Fprintf(w, "; reason: %s (%s)", st.Reason, engine.ToolsReasonText(st.Reason))
	}
	fmt.Fprintln(w)
	for i, c := range cards {
		how := fmt.Sprintf("score %.2f, confidence %.2f", c.Score, c.Confidence)
		if c.Fallback {
			how = "fallback"
		}
		fmt.Fprintf(w, "\n(%d) %s  (%s, %s)\n    %s\n    %s\n", i+1, toolID(c.Namespace, c.Name), how, c.SideEffects, c.Source, preview(c.Description, 160))
		var extra []string
		if len(c.SafetyTags) > 0 {
			extra = append(extra, "safety: "+strings.Join(c.SafetyTags, ", "))
		}
		if c.CostHint != "" {
			extra = append(extra, "cost: "+c.CostHint)
		}
		if len(extra) > 0 {
			fmt.Fprintf(w, "    %s\n", strings.Join(extra, "; "))
		}
		if len(c.Also) > 0 {
			also := make([]string, len(c.Also))
			for i, r := range c.Also {
				also[i] = r.ID + " (" + r.Source + ")"
			}
			fmt.Fprintf(w, "    also: %s\n", strings.Join(also, ", "))
		}
		if c.Explain != nil {
			printExplanation(w, c.Explain)
		}
	}
}

// printDefinitions prints a shortlist in a provider's format: the name
// each tool goes by, the cards left out, then the definitions as JSON to
// send as the request's tools.
func printDefinitions(w io.Writer, d *engine.ToolDefinitions) error {
	fmt.Fprintf(w, "\n%s definitions: %d", d.Format, len(d.Tools))
	if len(d.Omitted) > 0 {
		fmt.Fprintf(w, " (%d omitted)", len(d.Omitted))
	}
	fmt.Fprintln(w)
	for _, name := range slices.Sorted(maps.Keys(d.Names)) {
		ref := d.Names[name]
		fmt.Fprintf(w, "    %s → %s (%s)\n", name, ref.ID, ref.Source)
	}
	for _, o := range d.Omitted {
		fmt.Fprintf(w, "    omitted: %s (%s): %s\n", o.ID, o.Source, o.Reason)
	}
	return printJSON(w, d.Tools)
}

// printExplanation prints a card's explain (api.md §10.3), indented.
func printExplanation(w io.Writer, e *tools.Explanation) {
	words := func(ms []tools.TermMatch) string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = fmt.Sprintf("%s [%s] %.2f", m.Term, strings.Join(m.Fields, ", "), m.Score)
		}
		return strings.Join(out, "; ")
	}
	if len(e.Terms) > 0 {
		fmt.Fprintf(w, "    words: %s\n", words(e.Terms))
	}
	if len(e.Related) > 0 {
		fmt.Fprintf(w, "    related words: %s\n", words(e.Related))
	}
	if e.Example != nil {
		fmt.Fprintf(w, "    closest example (%.2f): %s\n", e.Example.Similarity, preview(e.Example.Text, 120))
	}
	if e.AntiPattern != nil {
		fmt.Fprintf(w, "    closest anti-pattern (%.2f): %s\n", e.AntiPattern.Similarity, preview(e.AntiPattern.Text, 120))
	}
	p := e.Parts
	fmt.Fprintf(w, "    score = (words %.2f + related %.2f + example %.2f) × anti-pattern %.2f\n", p.Terms, p.Related, p.Example, p.AntiPattern)
	v := e.Evidence
	fmt.Fprintf(w, "    confidence %.2f before calibration, %.2f after (coverage %.2f, name %.2f, example %.2f, %d of %d words, %d cards)\n",
		e.ConfidenceBefore, e.Confidence, v.Coverage, v.NameCoverage, v.Example, v.Matched, v.Words, v.Cards)
}

// printTree renders the choice graph as an indented outline.
func printTree(w io.Writer, n engine.ToolNode, indent string) {
	fmt.Fprintf(w, "%s%s/\n", indent, n.Label)
	for _, c := range n.Children {
		printTree(w, c, indent+"  ")
	}
	for _, t := range n.Tools {
		fmt.Fprintf(w, "%s  %s  (%s, %s)  %s\n", indent, toolID(t.Namespace, t.Name), t.SideEffects, t.Source, preview(t.Description, 80))
	}
}
