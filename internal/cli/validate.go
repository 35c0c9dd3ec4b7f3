package cli

import (
	"errors"
	"fmt"

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
(CEL conditions included) and reads every source. It prints one line per problem and exits 1 if any
is an error; warnings alone exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			errs, warns := 0, 0
			report := func(warning bool, line string) {
				if warning {
					warns++
					fmt.Fprintln(out, "warning: "+line)
					return
				}
				errs++
				fmt.Fprintln(out, line)
			}
			set, err := manifest.Load(sf.files...)
			if err != nil {
				var le *manifest.LoadError
				if errors.As(err, &le) {
					for _, p := range le.Problems {
						report(false, p.Error())
					}
				} else {
					report(false, err.Error())
				}
				return &ExitError{Code: 1}
			}
			for _, p := range set.Check() {
				report(p.Warning, p.Error())
			}
			routers := []string{""}
			if len(set.Routers) > 0 {
				routers = routers[:0]
				for _, r := range set.Routers {
					if sf.router == "" || sf.router == r.Name {
						routers = append(routers, r.Name)
					}
				}
			}
			for _, name := range routers {
				cfg, err := set.Config(name)
				if err != nil {
					report(false, err.Error())
					continue
				}
				snap, err := engine.Compile(cmd.Context(), cfg, sf.options())
				if err != nil {
					var ce *engine.CompileError
					if errors.As(err, &ce) {
						for _, p := range ce.Problems {
							report(false, p.Error())
						}
					} else {
						report(false, err.Error())
					}
					continue
				}
				for _, st := range snap.Sources() {
					if st.Error != "" {
						origin := cfg.Origin("ContextSource", st.Name)
						if origin != "" {
							origin += ": "
						}
						report(false, fmt.Sprintf("%sContextSource/%s: %s", origin, st.Name, st.Error))
					}
				}
			}
			if errs > 0 {
				return &ExitError{Code: 1}
			}
			fmt.Fprintf(out, "valid: %d routers, %d routes, %d sources, %d permissions", max(1, len(set.Routers)), len(set.Routes), len(set.Sources), len(set.Permissions))
			if len(set.Routers) == 0 {
				fmt.Fprint(out, " (implied default router)")
			}
			if warns > 0 {
				fmt.Fprintf(out, "; %d warnings", warns)
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	sf.register(cmd)
	return cmd
}
