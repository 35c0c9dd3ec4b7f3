// Package cli holds the contextrouter command line (cobra). Commands are thin:
// they parse flags, call internal/manifest and internal/engine, and print.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X ...cli.Version=v0.1.0".
var Version = "dev"

// ExitError carries a process exit code without printing anything more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// NewRootCommand builds the command tree.
func NewRootCommand() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:           "contextrouter",
		Short:         "Decide what goes into an AI agent's context window",
		Long:          "contextrouter routes an agent's question to the sources it may read, ranks their chunks and trims them to a token budget.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), logOptions(lvl))))
			return nil
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	root.AddCommand(newQueryCommand(), newToolsCommand(), newValidateCommand(), newEvalCommand(), newOperatorCommand(), newProbeCommand())
	root.AddCommand(newCacheCommand(), newSessionCommand())
	root.AddCommand(newServeCommand())
	root.AddCommand(newConvertCommand())
	return root
}

// Execute runs the CLI and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	cmd := NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		if e, ok := err.(*ExitError); ok {
			return e.Code
		}
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// sourceFlags are the flags every command that compiles manifests shares.
type sourceFlags struct {
	files      []string
	router     string
	cacheDir   string
	secretsDir string
}

func (f *sourceFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.files, "filename", "f", nil, "manifest file or directory (repeatable; directories are read recursively)")
	cmd.Flags().StringVar(&f.router, "router", "", "ContextRouter to use when the manifests hold several")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "where git sources are cloned (default: the user cache directory)")
	cmd.Flags().StringVar(&f.secretsDir, "secrets-dir", defaultSecretsDir(), "folder with one subfolder per Secret, one file per key")
	_ = cmd.MarkFlagRequired("filename")
}

func defaultSecretsDir() string {
	if d := os.Getenv("CONTEXTROUTER_SECRETS_DIR"); d != "" {
		return d
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "contextrouter", "secrets")
	}
	return ""
}

// logOptions are the handler options of every logger the CLI sets up. A
// duration is written as a Go duration string ("1.5s"), the way flags and
// manifests spell durations, not as the JSON handler's integer nanoseconds.
func logOptions(lvl slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: lvl, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindDuration {
			a.Value = slog.StringValue(a.Value.Duration().String())
		}
		return a
	}}
}
