package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/internal/convert"
)

func newConvertCommand() *cobra.Command {
	var from, outDir string
	var opts convert.Options
	cmd := &cobra.Command{
		Use:   "convert --from theaios FILE [-o DIR] [--words]",
		Short: "Convert another context router's configuration into manifests",
		Long: "convert turns a theaios-context-router configuration (context-router.yaml) into ContextRouter, " +
			"ContextSource, ContextRoute and AgentPermission manifests. What has no equivalent is listed as a note " +
			"on stderr and in the output's header comment.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from != "theaios" {
				return fmt.Errorf("--from %q: supported formats: theaios", from)
			}
			file := args[0]
			data, err := os.ReadFile(file)
			if err != nil {
				return err // "open FILE: no such file or directory"
			}
			opts.OutputDir = outDir
			res, err := convert.Theaios(file, data, opts)
			var errs convert.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					fmt.Fprintln(cmd.ErrOrStderr(), "error:", e.String())
				}
				return &ExitError{Code: 1}
			}
			if err != nil {
				return err
			}
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "note:", n.String())
			}
			if outDir == "" {
				_, err := cmd.OutOrStdout().Write(res.Stream())
				return err
			}
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			for _, f := range convert.Files {
				path := filepath.Join(outDir, f.Name)
				data := res.FileFor(f.Kind)
				if data == nil {
					// A file of an earlier run must not add objects this configuration does not have.
					if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
					continue
				}
				if err := os.WriteFile(path, data, 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "input format: theaios")
	cmd.Flags().StringVarP(&outDir, "output-dir", "o", "", "write router.yaml, sources.yaml, routes.yaml and permissions.yaml here (default: one stream on stdout)")
	cmd.Flags().BoolVar(&opts.Words, "words", false, `translate text contains "x" to containsAnyWord(text, ["x"]) (whole words, any case) instead of text.contains("x")`)
	_ = cmd.MarkFlagRequired("from")
	return cmd
}
