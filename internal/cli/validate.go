package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

func newValidateCommand() *cobra.Command {
	var sf sourceFlags
	cmd := &cobra.Command{
		Use:   "validate -f PATH...",
		Short: "Check manifests: schema, references, CEL conditions and that every source can be read",
		Long: `validate loads the manifests strictly, checks every rule of the API, compiles every router
(CEL conditions included) and reads every source. It prints every problem it finds, one line each,
and exits 1 if any is an error; warnings alone exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			set, problems := manifest.Validate(cmd.Context(), sf.files, sf.router, sf.options())
			for _, p := range problems {
				if p.IsWarning() {
					fmt.Fprintln(out, "warning: "+p.Error())
				} else {
					fmt.Fprintln(out, p.Error())
				}
			}
			for _, c := range set.TrainedClassifiers() {
				fmt.Fprintln(out, classifierLine(c))
			}
			if problems.HasErrors() {
				return &ExitError{Code: 1}
			}
			fmt.Fprintf(out, "valid: %d routers, %d routes, %d sources, %d permissions", max(1, len(set.Routers)), len(set.Routes), len(set.Sources), len(set.Permissions))
			if n := len(set.Classifiers); n > 0 {
				fmt.Fprintf(out, ", %d classifiers", n)
			}
			if len(set.Routers) == 0 {
				fmt.Fprint(out, " (implied default router)")
			}
			if w := len(problems.Warnings()); w > 0 {
				fmt.Fprintf(out, "; %d warnings", w)
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	sf.register(cmd)
	return cmd
}

// classifierLine describes a compiled classifier for validate:
// "classifier intent: 3 labels (deploy 12, other 9, vacation 15), training accuracy 0.972, 2 entity extractors".
func classifierLine(c engine.ClassifierStatus) string {
	if !c.Trained {
		return fmt.Sprintf("classifier %s: not trained, %d entity extractors", c.Name, c.Extractors)
	}
	labels := slices.Sorted(maps.Keys(c.Labels))
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s %d", l, c.Labels[l])
	}
	return fmt.Sprintf("classifier %s: %d labels (%s), training accuracy %.3f, %d entity extractors",
		c.Name, len(labels), strings.Join(parts, ", "), c.TrainingAccuracy, c.Extractors)
}
