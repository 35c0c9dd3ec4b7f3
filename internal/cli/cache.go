package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/cache"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

func newCacheCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "Inspect or clear the on-disk cache of httpAPI results",
		Long: `serve keeps the answers of httpAPI sources for spec.cache.ttl (at most spec.cache.maxEntries),
in memory and in files under <cache-dir>/http/<namespace>_<router>, one file per source and
question, so that a restarted router does not ask the same APIs again.

These commands work on those files, for the router the manifests select (--router), in the
folder serve uses with the same --cache-dir. They do not reach a running serve process: its
in-memory entries stay until they expire or it restarts.`,
	}
	cmd.AddCommand(newCacheStatsCommand(), newCacheClearCommand())
	return cmd
}

// cacheFlags select a router's cache folder.
type cacheFlags struct {
	files    []string
	router   string
	cacheDir string
}

func (f *cacheFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.files, "filename", "f", nil, "manifest file or directory (repeatable; directories are read recursively)")
	cmd.Flags().StringVar(&f.router, "router", "", "ContextRouter to use when the manifests hold several")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "the --cache-dir serve runs with (default: <user cache dir>/contextrouter)")
	_ = cmd.MarkFlagRequired("filename")
}

// cacheTarget is the selected router's cache: its folder, its settings and
// the fingerprints of its httpAPI sources.
type cacheTarget struct {
	router  string
	opts    cache.Options
	sources map[string]string // fingerprint -> source name
	names   []string          // httpAPI source names, sorted
}

// load reads the manifests only as far as the cache needs: the router and
// its sources. A configuration with other problems can still be inspected
// and cleared.
func (f *cacheFlags) load() (*cacheTarget, error) {
	set, err := manifest.Load(f.files...)
	if err != nil {
		return nil, err
	}
	cfg, err := set.Config(f.router)
	if err != nil {
		return nil, err
	}
	r := cfg.Router
	t := &cacheTarget{
		router:  r.Name,
		opts:    cache.OptionsFor(r.Spec.Cache, cache.Dir(f.cacheDir, r.Namespace, r.Name)),
		sources: map[string]string{},
	}
	if r.Namespace != "" {
		t.router = r.Namespace + "/" + r.Name
	}
	for i := range cfg.Sources {
		src := &cfg.Sources[i]
		if src.Spec.Type != v1alpha1.SourceHTTPAPI {
			continue
		}
		t.sources[engine.SourceFingerprint(src)] = src.Name
		t.names = append(t.names, src.Name)
	}
	sort.Strings(t.names)
	return t, nil
}

// cacheStats is the report of `cache stats -o json`.
type cacheStats struct {
	Router     string `json:"router"`
	Dir        string `json:"dir"`
	TTL        string `json:"ttl"`
	MaxEntries int    `json:"max_entries"`
	MaxBytes   int64  `json:"max_bytes"`
	// Entries counts every result file, Bytes their size.
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Expired entries are older than the TTL: never served, removed by serve.
	Expired int `json:"expired"`
	// Stale entries belong to a source spec that is no longer configured
	// (edited or removed): never served, removed by serve as they age.
	Stale int `json:"stale"`
	// Unreadable files are never served and are removed when serve starts.
	Unreadable int                `json:"unreadable"`
	Oldest     *time.Time         `json:"oldest,omitempty"`
	Newest     *time.Time         `json:"newest,omitempty"`
	Sources    []cacheSourceStats `json:"sources"`
}

type cacheSourceStats struct {
	Source  string `json:"source"`
	Entries int    `json:"entries"`
	Expired int    `json:"expired"`
	Bytes   int64  `json:"bytes"`
}

func (t *cacheTarget) stats(now time.Time) (*cacheStats, error) {
	entries, err := cache.ReadDir(t.opts.Dir)
	if err != nil {
		return nil, err
	}
	st := &cacheStats{
		Router: t.router, Dir: t.opts.Dir, TTL: t.opts.TTL.String(), MaxEntries: t.opts.MaxEntries, MaxBytes: t.opts.MaxBytes,
		Sources: make([]cacheSourceStats, len(t.names)),
	}
	pos := map[string]int{}
	for i, n := range t.names {
		st.Sources[i].Source = n
		pos[n] = i
	}
	for _, e := range entries {
		st.Entries++
		st.Bytes += e.Size
		if e.Unreadable {
			st.Unreadable++
			continue
		}
		created := e.Created
		if st.Oldest == nil || created.Before(*st.Oldest) {
			st.Oldest = &created
		}
		if st.Newest == nil || created.After(*st.Newest) {
			st.Newest = &created
		}
		expired := now.Sub(created) >= t.opts.TTL
		if expired {
			st.Expired++
		}
		name, ok := t.sources[e.Source]
		if !ok {
			st.Stale++
			continue
		}
		s := &st.Sources[pos[name]]
		s.Entries++
		s.Bytes += e.Size
		if expired {
			s.Expired++
		}
	}
	return st, nil
}

func newCacheStatsCommand() *cobra.Command {
	var (
		f      cacheFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "stats -f PATH... [--router NAME] [--cache-dir DIR] [-o text|json]",
		Short: "Show what the router's on-disk cache holds",
		Example: `  contextrouter cache stats -f examples/quickstart
  contextrouter cache stats -f /etc/contextrouter/bundle --cache-dir /var/cache/contextrouter -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output: must be text or json, not %q", output)
			}
			t, err := f.load()
			if err != nil {
				return err
			}
			now := time.Now()
			st, err := t.stats(now)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printCacheStats(cmd.OutOrStdout(), st, now)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

func printCacheStats(w io.Writer, st *cacheStats, now time.Time) {
	fmt.Fprintf(w, "router:    %s\n", st.Router)
	fmt.Fprintf(w, "folder:    %s\n", st.Dir)
	if st.MaxEntries == 0 {
		fmt.Fprintln(w, "settings:  cache disabled (spec.cache.maxEntries: 0)")
	} else {
		fmt.Fprintf(w, "settings:  ttl %s, at most %d entries and %s\n", st.TTL, st.MaxEntries, formatBytes(st.MaxBytes))
	}
	fmt.Fprintf(w, "entries:   %d (%d expired, %d of an edited or removed source, %d unreadable)\n", st.Entries, st.Expired, st.Stale, st.Unreadable)
	fmt.Fprintf(w, "size:      %s\n", formatBytes(st.Bytes))
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), now.Sub(*t).Round(time.Second))
	}
	fmt.Fprintf(w, "oldest:    %s\n", when(st.Oldest))
	fmt.Fprintf(w, "newest:    %s\n", when(st.Newest))
	if len(st.Sources) == 0 {
		fmt.Fprintln(w, "sources:   (no httpAPI source)")
		return
	}
	fmt.Fprintln(w, "sources:")
	width := 0
	for _, s := range st.Sources {
		width = max(width, len(s.Source))
	}
	for _, s := range st.Sources {
		fmt.Fprintf(w, "  %-*s  %d entries, %d expired, %s\n", width, s.Source, s.Entries, s.Expired, formatBytes(s.Bytes))
	}
}

func newCacheClearCommand() *cobra.Command {
	var f cacheFlags
	cmd := &cobra.Command{
		Use:   "clear -f PATH... [--router NAME] [--cache-dir DIR]",
		Short: "Remove the router's on-disk cache entries",
		Long: `Removes every result file of the router's cache folder. A running serve process misses on
the removed files and asks the APIs again once its in-memory entries expire.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := f.load()
			if err != nil {
				return err
			}
			n, size, err := cache.Purge(t.opts.Dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %d entries (%s) from %s\n", n, formatBytes(size), t.opts.Dir)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// formatBytes writes a size in binary units, as Kubernetes quantities do.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}
