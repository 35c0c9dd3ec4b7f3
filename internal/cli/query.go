package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/server"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

func newQueryCommand() *cobra.Command {
	var (
		sf       sourceFlags
		req      engine.Request
		metadata []string
		output   string
		showFull bool
		timeout  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "query -f PATH... [-a AGENT] [-t TAG]... [-m KEY=VALUE]... [-o text|json] TEXT",
		Short: "Answer one question from manifest files",
		Example: `  contextrouter query -f examples/quickstart -a hr-assistant "How many vacation days do I get?"
  contextrouter query -f examples/quickstart -a eng-assistant -m department=engineering -o json "How do I roll back a deploy?"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			snap, err := sf.question(cmd.Context(), &req, args, metadata, output, timeout)
			if err != nil {
				return err
			}
			// The timeout covers the query, not loading the manifests and sources.
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			resp, err := snap.Query(ctx, req)
			if err != nil {
				return timeoutError(err, timeout)
			}
			printWarnings(cmd.ErrOrStderr(), snap, req.Agent, resp.Warnings)
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			printText(cmd.OutOrStdout(), snap, resp, showFull, len(req.Detect) > 0)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVarP(&req.Agent, "agent", "a", "", "agent identity asking the question")
	cmd.Flags().StringArrayVarP(&req.Tags, "tag", "t", nil, "tag of the question (repeatable)")
	cmd.Flags().StringArrayVarP(&metadata, "metadata", "m", nil, "metadata KEY=VALUE (repeatable)")
	cmd.Flags().IntVar(&req.MaxTokens, "max-tokens", 0, "lower the router's token budget for this question")
	cmd.Flags().IntVar(&req.MaxChunks, "max-chunks", 0, "return at most this many chunks")
	cmd.Flags().IntVar(&req.MaxTools, "max-tools", 0, fmt.Sprintf("number of tool cards when a route names tool sources (0 = the router's spec.tools.topK; at most %d)", engine.MaxToolsPerRequest))
	cmd.Flags().StringArrayVar(&req.Detect, "detect", nil, "ContextClassifier to run and report in detection even when no route reads it (\"*\" = all); repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().BoolVar(&showFull, "full", false, "print whole chunks instead of previews")
	cmd.Flags().DurationVar(&timeout, "query-timeout", server.DefaultQueryTimeout, "longest the question may take once the manifests are loaded, fetches included")
	return cmd
}

// printText renders a response for people: what matched, what was refused,
// what detection found (with --detect), then each chunk with its score, size, origin and a preview.
func printText(w io.Writer, snap *engine.Snapshot, r *engine.Response, full, detect bool) {
	// How a route came to serve, when not by its condition.
	matched := make([]string, len(r.RouteMatches))
	for i, m := range r.RouteMatches {
		switch m.MatchedBy {
		case engine.MatchedByFallback:
			matched[i] = m.Route + " (fallback)"
		case engine.MatchedByAlternate:
			matched[i] = m.Route + " (alternate for " + m.AlternateFor + ")"
		default:
			matched[i] = m.Route
		}
	}
	printRouting(w, snap, matched, r.DeniedSources, r.FailedSources, r.RouteErrors)
	if detect {
		// Only when asked: -o json always carries it.
		printDetection(w, r.Detection)
	}
	d := r.Stats.Dropped
	var drops []string
	for _, x := range []struct {
		n    int
		what string
	}{{d.Budget, "budget"}, {d.Duplicate, "duplicate"}, {d.PathDenied, "path denied"}, {d.Sensitivity, "sensitivity"}, {d.Stale, "stale"}} {
		if x.n > 0 {
			drops = append(drops, fmt.Sprintf("%d %s", x.n, x.what))
		}
	}
	sort.Strings(drops)
	fmt.Fprintf(w, "chunks:          %d of %d candidates, %d tokens", r.Stats.Included, r.Stats.Candidates, r.TotalTokens)
	if len(drops) > 0 {
		fmt.Fprintf(w, "; dropped: %s", strings.Join(drops, ", "))
	}
	if r.Stats.Redacted > 0 {
		fmt.Fprintf(w, "; %d redacted", r.Stats.Redacted)
	}
	if r.Stats.PinnedDropped > 0 {
		fmt.Fprintf(w, "; %d inline chunks did not fit", r.Stats.PinnedDropped)
	}
	if r.Stats.NoTermMatch > 0 {
		fmt.Fprintf(w, "; %d sources share no term with the question", r.Stats.NoTermMatch)
		if r.Stats.NoMatchFallback > 0 {
			fmt.Fprintf(w, " (onNoMatch added %d chunks)", r.Stats.NoMatchFallback)
		}
	}
	if r.WasTruncated {
		fmt.Fprint(w, " (truncated to fit the budget)")
	}
	fmt.Fprintf(w, "\ntime:            %.3f ms\n", r.EvaluationTimeMS)
	for i, c := range r.Chunks {
		where := c.Source
		if c.Path != "" {
			where += ":" + c.Path
		}
		age := ""
		if a := c.Metadata.AgeSeconds; a != nil {
			age = ", " + (time.Duration(*a) * time.Second).String() + " old"
			if *c.Metadata.Stale {
				age += ", STALE"
			}
		}
		fmt.Fprintf(w, "\n[%d] %s  (score %.2f, %d tokens%s)\n    %s\n", i+1, c.Title, c.RelevanceScore, c.TokenCount, age, where)
		if full {
			for _, line := range strings.Split(c.Content, "\n") {
				fmt.Fprintf(w, "    | %s\n", line)
			}
			continue
		}
		fmt.Fprintf(w, "    %s\n", preview(c.Content, 160))
	}
	if len(r.Chunks) == 0 {
		fmt.Fprintln(w, "\n(no context for this question)")
	}
	// A question no tool route took is a document question: no tools line.
	if r.Stats.Tools.Reason != engine.ToolsNoToolSource {
		fmt.Fprintln(w)
		printTools(w, r.Tools, r.Stats.Tools)
	}
}

// printRouting renders what routing decided: the router, the matched
// routes, denied and failed sources, and route errors.
func printRouting(w io.Writer, snap *engine.Snapshot, matched, denied []string, failedSources []engine.SourceFailure, routeErrors []engine.RouteError) {
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "(none)"
		}
		return strings.Join(xs, ", ")
	}
	fmt.Fprintf(w, "router:          %s\n", snap.Router())
	fmt.Fprintf(w, "matched routes:  %s\n", list(matched))
	fmt.Fprintf(w, "denied sources:  %s\n", list(denied))
	var failed []string
	for _, f := range failedSources {
		if f.Reason == engine.FailureTimeout {
			failed = append(failed, fmt.Sprintf("%s (%s, the timeout of route %s)", f.Source, f.Error, f.Route))
			continue
		}
		failed = append(failed, fmt.Sprintf("%s (%s)", f.Source, f.Error))
	}
	fmt.Fprintf(w, "failed sources:  %s\n", list(failed))
	for _, e := range routeErrors {
		fmt.Fprintf(w, "route error:     %s: %s\n", e.Route, e.Error)
	}
}

// printDetection renders what detection found, when it ran: one line per
// classifier ("intent = vacation (0.93; deploy 0.04)") and the entities.
func printDetection(w io.Writer, det *engine.Detection) {
	if det == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(det.Classifiers)) {
		c := det.Classifiers[name]
		alts := make([]string, len(c.Alternatives))
		for i, a := range c.Alternatives {
			alts[i] = fmt.Sprintf("%s %.2f", a.Label, a.Confidence)
		}
		line := fmt.Sprintf("%s = %s (%.2f", name, c.Label, c.Confidence)
		if len(alts) > 0 {
			line += "; " + strings.Join(alts, ", ")
		}
		fmt.Fprintf(w, "detected:        %s)\n", line)
	}
	for _, e := range det.Entities {
		fmt.Fprintf(w, "entity:          %s %q [%d:%d]\n", e.Type, e.Value, e.Start, e.End)
	}
}

// preview is the first n characters of a text on one line, without heading
// lines (the title already shows them).
func preview(s string, n int) string {
	var parts []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			parts = append(parts, line)
		}
	}
	p := strings.Join(parts, " ")
	if cut := textutil.CutRunes(p, n, ""); len(cut) < len(p) {
		return strings.TrimRight(cut, " ") + textutil.Ellipsis
	}
	return p
}

// printWarnings writes an answer's warnings to stderr. For an agent no
// permission names, the local user also gets the agents that are named (the
// response itself never lists them).
func printWarnings(w io.Writer, snap *engine.Snapshot, agent string, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintln(w, "warning: "+msg)
	}
	if len(warnings) == 0 || slices.Contains(snap.KnownAgents(), agent) {
		return
	}
	if known := snap.KnownAgents(); len(known) > 0 {
		fmt.Fprintf(w, "warning: known agents: %s (-a/--agent)\n", strings.Join(known, ", "))
	}
}
