package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/eval"
)

// routeThreshold is one --fail-under-* flag.
type routeThreshold struct {
	flag  string
	min   float64
	value func(*eval.RouteReport) float64
	what  string
}

func newEvalRoutesCommand() *cobra.Command {
	var (
		sf     sourceFlags
		cases  string
		output string
	)
	thresholds := []*routeThreshold{
		{flag: "fail-under-accuracy", what: "route accuracy", value: func(r *eval.RouteReport) float64 { return r.RouteAccuracy }},
		{flag: "fail-under-precision", what: "micro precision", value: func(r *eval.RouteReport) float64 { return r.MicroPrecision }},
		{flag: "fail-under-recall", what: "micro recall", value: func(r *eval.RouteReport) float64 { return r.MicroRecall }},
	}
	cmd := &cobra.Command{
		Use:   "routes -f PATH... --cases FILE [-o text|json] [--fail-under-accuracy X] [--fail-under-precision X] [--fail-under-recall X]",
		Short: "Route accuracy, precision and recall on labelled questions",
		Long: `eval routes compiles the router of the manifests (without reading its sources), asks which routes
serve each case of --cases — JSON lines {"text", "agent", "tags", "metadata", "expected_routes"} — and
reports per case, the route accuracy (the share of cases served by exactly the expected routes), micro
precision and recall over (case, route) pairs, and precision and recall per route. Conditions and
fallback routes are evaluated as for a query; alternates, which depend on sources failing, are not.
With a --fail-under-* threshold, a score below it fails the command (exit status 1) after the report.`,
		Example: `  contextrouter eval routes -f examples/quickstart --cases routes.jsonl --fail-under-accuracy 0.95`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output: must be text or json, not %q", output)
			}
			for _, t := range thresholds {
				if t.min < 0 || t.min > 1 {
					return fmt.Errorf("--%s: must be between 0 and 1, not %g", t.flag, t.min)
				}
			}
			opts := sf.options()
			opts.SkipLoad = true // routing needs the conditions, not the documents
			snap, err := sf.compileWith(cmd.Context(), opts)
			if err != nil {
				return err
			}
			cs, err := eval.LoadRouteCases(cases, snap.Routes())
			if err != nil {
				return err
			}
			report, err := eval.Routes(cmd.Context(), snap, cases, cs)
			if err != nil {
				return err
			}
			if output == "json" {
				err = printJSON(cmd.OutOrStdout(), report)
			} else {
				err = printRouteReport(cmd.OutOrStdout(), report)
			}
			if err != nil {
				return err
			}
			var under []string
			for _, t := range thresholds {
				if v := t.value(report); v < t.min {
					under = append(under, fmt.Sprintf("%s %.4f is under --%s %g", t.what, v, t.flag, t.min))
				}
			}
			if len(under) > 0 {
				return fmt.Errorf("%s", strings.Join(under, "; "))
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&cases, "cases", "", `JSON lines {"text", "agent", "tags", "metadata", "expected_routes"}`)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	for _, t := range thresholds {
		cmd.Flags().Float64Var(&t.min, t.flag, 0, fmt.Sprintf("fail when the %s is below this (0 to 1; 0 = never)", t.what))
	}
	_ = cmd.MarkFlagRequired("cases")
	return cmd
}

func printRouteReport(w io.Writer, r *eval.RouteReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "cases:\t%d\n", r.Cases)
	fmt.Fprintf(tw, "route accuracy:\t%.4f\n", r.RouteAccuracy)
	fmt.Fprintf(tw, "micro precision / recall:\t%.4f  %.4f\n", r.MicroPrecision, r.MicroRecall)
	fmt.Fprintln(tw, "route\texpected\tserved\tcorrect\tprecision\trecall")
	score := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.4f", *p)
	}
	for _, s := range r.Routes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", s.Route, s.Expected, s.Served, s.Correct, score(s.Precision), score(s.Recall))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Results {
		if c.Correct {
			continue
		}
		fmt.Fprintf(w, "line %d: %q: served %s, expected %s", c.Line, preview(c.Text, 80), list(c.Served), list(c.Expected))
		for _, e := range c.RouteErrors {
			fmt.Fprintf(w, "; route %s failed: %s", e.Route, e.Error)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	return "[" + strings.Join(names, ", ") + "]"
}
