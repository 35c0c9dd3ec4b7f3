package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/atomicfile"
	"github.com/contextrouter/contextrouter/internal/manifest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// ToolDigests is the file `tools snapshot` writes and `tools diff` reads:
// the digests of the tool sources' catalogs (api.md §10.9), sources sorted
// by name, tools by id.
type ToolDigests struct {
	Sources []CatalogDigests `json:"sources"`
}

// CatalogDigests are the digests of one tool source's catalog.
type CatalogDigests struct {
	Name string              `json:"name"`
	Type v1alpha1.SourceType `json:"type"`
	// Digest is the catalog digest; Tools the digest of each tool by id.
	Digest string            `json:"digest"`
	Tools  map[string]string `json:"tools"`
}

// toolCatalog is a tool source of the manifests and its catalog as read now.
type toolCatalog struct {
	spec *v1alpha1.ContextSource
	CatalogDigests
}

// readCatalogs reads the catalogs of the manifests' Tools and MCP sources
// (those named, or all): catalog files, repositories and MCP servers as
// `tools` reads them (an MCP server is listed once). Any source that cannot
// be read fails the whole: a snapshot or a verdict must cover every source.
func (f *sourceFlags) readCatalogs(ctx context.Context, names []string) (*manifest.Set, []toolCatalog, error) {
	set, cfg, err := manifest.LoadConfig(f.files, f.router, slog.Default())
	if err != nil {
		return nil, nil, err
	}
	opts := f.options()
	var out []toolCatalog
	for i := range cfg.Sources {
		spec := &cfg.Sources[i]
		if spec.Spec.ToolApprovalMode() == "" || (len(names) > 0 && !slices.Contains(names, spec.Name)) {
			continue
		}
		src, err := sources.New(spec, sources.Env{BaseDir: cfg.BaseDirs[spec.Name], CacheDir: opts.CacheDir,
			Secrets: opts.Secrets, Logger: opts.Logger.With("source", spec.Name)})
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", v1alpha1.KindContextSource, spec.Name, err)
		}
		catalog, err := src.(sources.ToolSource).LoadTools(ctx)
		if c, ok := src.(io.Closer); ok {
			_ = c.Close()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", v1alpha1.KindContextSource, spec.Name, err)
		}
		tc := toolCatalog{spec: spec, CatalogDigests: CatalogDigests{Name: spec.Name, Type: spec.Spec.Type, Tools: map[string]string{}}}
		for j := range catalog {
			tc.Tools[catalog[j].ID()] = v1alpha1.ToolDigest(&catalog[j])
		}
		tc.Digest = v1alpha1.CatalogDigest(tc.Tools)
		out = append(out, tc)
	}
	slices.SortFunc(out, func(a, b toolCatalog) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range names {
		if !slices.ContainsFunc(out, func(c toolCatalog) bool { return c.Name == n }) {
			return nil, nil, fmt.Errorf("--source %s: the manifests have no Tools or MCP source of that name", n)
		}
	}
	return set, out, nil
}

func newToolsSnapshotCommand() *cobra.Command {
	var (
		sf     sourceFlags
		names  []string
		output string
	)
	cmd := &cobra.Command{
		Use:   "snapshot -f PATH... [--source NAME]... [-o FILE]",
		Short: "Write the digests of the tool sources' catalogs, for tools diff",
		Long: `Read the catalog of every Tools and MCP source of the manifests (or those
named with --source), as the router would, and write the digest of each tool
and of each catalog as JSON (YAML when the -o file ends in .yaml or .yml):
the same catalogs always give the same bytes (api.md §10.9). Tools held back for approval are included: a snapshot records
what the sources offer.`,
		Example: `  contextrouter tools snapshot -f deploy/ -o tools.lock.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, catalogs, err := sf.readCatalogs(cmd.Context(), names)
			if err != nil {
				return err
			}
			snap := ToolDigests{Sources: []CatalogDigests{}}
			for _, c := range catalogs {
				snap.Sources = append(snap.Sources, c.CatalogDigests)
			}
			var buf bytes.Buffer
			if err := printJSON(&buf, snap); err != nil {
				return err
			}
			data := buf.Bytes()
			if isYAMLFile(output) {
				if data, err = yaml.JSONToYAML(data); err != nil {
					return err
				}
			}
			if output == "" || output == "-" {
				_, err := cmd.OutOrStdout().Write(data)
				return err
			}
			return os.WriteFile(output, data, 0o644)
		},
	}
	sf.register(cmd)
	cmd.Flags().StringArrayVar(&names, "source", nil, "a Tools or MCP source to include (repeatable; default: all)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write, YAML when it ends in .yaml or .yml (default: JSON on standard output)")
	return cmd
}

// toolDrift is how one source's catalog differs from its snapshot.
type toolDrift struct {
	Source string `json:"source"`
	// Change is Added or Removed for a source only one side has.
	Change  string        `json:"change,omitempty"`
	Added   []string      `json:"added"`
	Removed []string      `json:"removed"`
	Changed []changedTool `json:"changed"`
}

type changedTool struct {
	ID string `json:"id"`
	// Fields names the parts that changed (empty when the digests cannot tell).
	Fields []string `json:"fields"`
	Before string   `json:"before"`
	After  string   `json:"after"`
}

// diffDigests compares catalogs read now with a snapshot, source by source
// in name order; only sources that differ are listed.
func diffDigests(was, now []CatalogDigests) []toolDrift {
	byName := func(list []CatalogDigests) map[string]CatalogDigests {
		m := map[string]CatalogDigests{}
		for _, c := range list {
			m[c.Name] = c
		}
		return m
	}
	before, after := byName(was), byName(now)
	names := slices.Sorted(maps.Keys(before))
	for n := range after {
		if _, ok := before[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []toolDrift
	for _, n := range names {
		b, inBefore := before[n]
		a, inAfter := after[n]
		d := toolDrift{Source: n, Added: []string{}, Removed: []string{}, Changed: []changedTool{}}
		switch {
		case !inBefore:
			d.Change = "Added"
		case !inAfter:
			d.Change = "Removed"
		}
		for _, id := range slices.Sorted(maps.Keys(a.Tools)) {
			old, ok := b.Tools[id]
			switch {
			case !ok:
				d.Added = append(d.Added, id)
			case old != a.Tools[id]:
				d.Changed = append(d.Changed, changedTool{ID: id, Fields: v1alpha1.ChangedParts(old, a.Tools[id]), Before: old, After: a.Tools[id]})
			}
		}
		for _, id := range slices.Sorted(maps.Keys(b.Tools)) {
			if _, ok := a.Tools[id]; !ok {
				d.Removed = append(d.Removed, id)
			}
		}
		if d.Change != "" || len(d.Added)+len(d.Removed)+len(d.Changed) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// isYAMLFile says whether a snapshot file is written as YAML (its name ends
// in .yaml or .yml) rather than JSON.
func isYAMLFile(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// readToolDigests reads a snapshot file (JSON, or YAML by its name) strictly.
func readToolDigests(path string) (*ToolDigests, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if isYAMLFile(path) {
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: not a tools snapshot: %w", path, err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var snap ToolDigests
	if err := dec.Decode(&snap); err != nil {
		return nil, fmt.Errorf("%s: not a tools snapshot: %w", path, err)
	}
	if snap.Sources == nil {
		return nil, fmt.Errorf(`%s: not a tools snapshot: no "sources" (write one with contextrouter tools snapshot)`, path)
	}
	return &snap, nil
}

// exitErrors makes a command's failures exit with code 2 (1 says drift):
// flag, argument and run errors alike are printed and become ExitError{2}.
func exitErrors(cmd *cobra.Command, run func(cmd *cobra.Command, args []string) error) {
	fail := func(c *cobra.Command, err error) error {
		fmt.Fprintln(c.ErrOrStderr(), "error:", err)
		return &ExitError{Code: 2}
	}
	cmd.SetFlagErrorFunc(fail)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		err := run(c, args)
		var exit *ExitError
		if err == nil || errors.As(err, &exit) {
			return err
		}
		return fail(c, err)
	}
}

func newToolsDiffCommand() *cobra.Command {
	var (
		sf       sourceFlags
		names    []string
		snapshot string
		output   string
	)
	cmd := &cobra.Command{
		Use:   "diff -f PATH... --snapshot FILE [--source NAME]... [-o text|json]",
		Short: "Compare the tool sources' catalogs with a snapshot; exit 1 on drift",
		Long: `Read the catalogs as tools snapshot does and compare them with a snapshot
file: tools added, removed and changed (naming the parts that changed:
description, inputSchema, annotations, examples). Exit status 0 when they
match, 1 on drift, 2 on errors (api.md §10.9).`,
		Example: `  contextrouter tools diff -f deploy/ --snapshot tools.lock.json`,
	}
	exitErrors(cmd, func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) > 0:
			return fmt.Errorf("unexpected arguments %q", args)
		case len(sf.files) == 0:
			return errors.New(`required flag "filename" not set`)
		case snapshot == "":
			return errors.New(`required flag "snapshot" not set`)
		}
		if err := checkOutput(output); err != nil {
			return err
		}
		was, err := readToolDigests(snapshot)
		if err != nil {
			return err
		}
		_, catalogs, err := sf.readCatalogs(cmd.Context(), names)
		if err != nil {
			return err
		}
		var now []CatalogDigests
		for _, c := range catalogs {
			now = append(now, c.CatalogDigests)
		}
		if len(names) > 0 {
			was.Sources = slices.DeleteFunc(was.Sources, func(c CatalogDigests) bool { return !slices.Contains(names, c.Name) })
		}
		drift := diffDigests(was.Sources, now)
		if output == "json" {
			if err := printJSON(cmd.OutOrStdout(), struct {
				Drift   bool        `json:"drift"`
				Sources []toolDrift `json:"sources"`
			}{len(drift) > 0, append([]toolDrift{}, drift...)}); err != nil {
				return err
			}
		} else {
			printDrift(cmd.OutOrStdout(), drift, len(now))
		}
		if len(drift) > 0 {
			return &ExitError{Code: 1}
		}
		return nil
	})
	sf.register(cmd)
	// Checked in RunE, so that a missing flag exits 2 as other errors do.
	delete(cmd.Flags().Lookup("filename").Annotations, cobra.BashCompOneRequiredFlag)
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "snapshot file written by tools snapshot")
	cmd.Flags().StringArrayVar(&names, "source", nil, "a Tools or MCP source to compare (repeatable; default: all)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// printDrift writes the differences for people: per source, + added,
// - removed, ~ changed with the parts, then a summary.
func printDrift(w io.Writer, drift []toolDrift, sources int) {
	if len(drift) == 0 {
		fmt.Fprintf(w, "no drift: the %d tool sources match the snapshot\n", sources)
		return
	}
	var added, removed, changed int
	for _, d := range drift {
		head := "source " + d.Source
		if d.Change != "" {
			head += " (" + strings.ToLower(d.Change) + ")"
		}
		fmt.Fprintln(w, head)
		for _, id := range d.Added {
			fmt.Fprintf(w, "  + %s\n", id)
		}
		for _, id := range d.Removed {
			fmt.Fprintf(w, "  - %s\n", id)
		}
		for _, c := range d.Changed {
			what := strings.Join(c.Fields, ", ")
			if what == "" {
				what = "changed"
			}
			fmt.Fprintf(w, "  ~ %s: %s\n", c.ID, what)
		}
		added, removed, changed = added+len(d.Added), removed+len(d.Removed), changed+len(d.Changed)
	}
	fmt.Fprintf(w, "drift: %d added, %d removed, %d changed in %d sources\n", added, removed, changed, len(drift))
}

// approval is what `tools approve` does to one source: its annotation
// before and after, and why each tool approved now was not approved before.
type approval struct {
	spec      *v1alpha1.ContextSource
	file      string
	before    map[string]string
	after     map[string]string
	approved  []string // "id (New)", "id (Changed: description)"
	forgotten []string // approvals of tools the catalog no longer holds
}

func newToolsApproveCommand() *cobra.Command {
	var (
		sf    sourceFlags
		names []string
		tools []string
		all   bool
		print bool
	)
	cmd := &cobra.Command{
		Use:   "approve -f PATH... [--source NAME]... (--tool ID[=DIGEST]... | --all) [--print]",
		Short: "Approve tools of sources under approval Manual: write their digests into the manifests",
		Long: `Approve the current digest of tools (--tool ID, or every tool with --all) of
the manifests' Tools and MCP sources, reading the catalogs as tools snapshot
does, or an exact digest (--tool ID=DIGEST, as /v1/status lists a pending
tool) without reading them. The approvals go into the source's annotation
` + v1alpha1.AnnotationApprovedTools + ` (api.md §10.9), kept for the other
tools; approvals of tools a catalog no longer holds are dropped. The file
that defines the source is edited in place: only its metadata is written
again. With --print nothing is edited: a kubectl annotate command per
source is printed instead, for a cluster.`,
		Example: `  contextrouter tools approve -f deploy/ --source github --tool github.search_code
  contextrouter tools approve -f deploy/ --all
  contextrouter tools approve -f deploy/ --source github --tool github.search_code=5d0c6a7be1f2093c4a8d7e61.9b1c0e4f27aa3d10 --print`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == (len(tools) > 0) {
				return errors.New("name the tools to approve with --tool, or approve every tool with --all")
			}
			changes, err := sf.approve(cmd.Context(), names, tools, all)
			if err != nil {
				return err
			}
			return writeApprovals(cmd.OutOrStdout(), changes, print)
		},
	}
	sf.register(cmd)
	cmd.Flags().StringArrayVar(&names, "source", nil, "a Tools or MCP source whose tools to approve (repeatable; default: all)")
	cmd.Flags().StringArrayVar(&tools, "tool", nil, "a tool id to approve at its current digest, or ID=DIGEST (repeatable)")
	cmd.Flags().BoolVar(&all, "all", false, "approve every tool at its current digest")
	cmd.Flags().BoolVar(&print, "print", false, "print kubectl annotate commands instead of editing the files")
	return cmd
}

// approve works out the new annotation of each source. The catalogs are read
// unless every --tool gives its digest.
func (f *sourceFlags) approve(ctx context.Context, names, tools []string, all bool) ([]approval, error) {
	exact := map[string]string{}
	var current []string
	for _, t := range tools {
		if id, d, ok := strings.Cut(t, "="); ok {
			if _, err := v1alpha1.ParseApprovedTools(t); err != nil {
				return nil, fmt.Errorf("--tool %s: %w", t, err)
			}
			exact[id] = d
		} else {
			current = append(current, t)
		}
	}
	var set *manifest.Set
	var catalogs []toolCatalog
	var err error
	if all || len(current) > 0 {
		if set, catalogs, err = f.readCatalogs(ctx, names); err != nil {
			return nil, err
		}
	} else if catalogs, set, err = f.unreadCatalogs(names); err != nil {
		return nil, err
	}
	found := map[string]bool{}
	var out []approval
	for _, c := range catalogs {
		// The object as the file has it, not the defaulted copy.
		orig := set.Sources[slices.IndexFunc(set.Sources, func(s v1alpha1.ContextSource) bool { return s.Name == c.Name })]
		origin, _ := set.Origin(v1alpha1.KindContextSource, c.Name)
		a := approval{spec: &orig, file: origin.File, before: orig.ApprovedTools(), after: map[string]string{}}
		read := c.Tools != nil
		for id, d := range a.before {
			if _, ok := c.Tools[id]; read && !ok {
				a.forgotten = append(a.forgotten, id)
				continue
			}
			a.after[id] = d
		}
		for id, d := range c.Tools {
			if all || slices.Contains(current, id) {
				a.set(id, d)
				found[id] = true
			}
		}
		for id, d := range exact {
			if _, ok := c.Tools[id]; ok || !read {
				a.set(id, d)
				found[id] = true
			}
		}
		slices.Sort(a.approved)
		slices.Sort(a.forgotten)
		out = append(out, a)
	}
	for _, t := range tools {
		if id, _, _ := strings.Cut(t, "="); !found[id] {
			return nil, fmt.Errorf("--tool %s: no tool of that id in the sources %s", id, strings.Join(catalogNames(catalogs), ", "))
		}
	}
	return out, nil
}

// set approves digest d of tool id, noting why it was not approved before.
func (a *approval) set(id, d string) {
	old, ok := a.before[id]
	switch {
	case !ok:
		a.approved = append(a.approved, id+" (New)")
	case old != d:
		what := strings.Join(v1alpha1.ChangedParts(old, d), ", ")
		if what == "" {
			what = "digest"
		}
		a.approved = append(a.approved, id+" (Changed: "+what+")")
	}
	a.after[id] = d
}

// unreadCatalogs are the sources --tool ID=DIGEST may approve without
// reading them: the named one, or the manifests' only tool source.
func (f *sourceFlags) unreadCatalogs(names []string) ([]toolCatalog, *manifest.Set, error) {
	set, cfg, err := manifest.LoadConfig(f.files, f.router, slog.Default())
	if err != nil {
		return nil, nil, err
	}
	var out []toolCatalog
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if s.Spec.ToolApprovalMode() != "" && (len(names) == 0 || slices.Contains(names, s.Name)) {
			out = append(out, toolCatalog{spec: s, CatalogDigests: CatalogDigests{Name: s.Name, Type: s.Spec.Type}})
		}
	}
	if len(out) != 1 {
		return nil, nil, fmt.Errorf("--tool ID=DIGEST approves without reading the catalogs: name one Tools or MCP source with --source (%d match)", len(out))
	}
	return out, set, nil
}

func catalogNames(cs []toolCatalog) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// writeApprovals checks each new annotation as admission would, then edits
// the files (or prints kubectl commands) and says what it did.
func writeApprovals(w io.Writer, changes []approval, print bool) error {
	for _, a := range changes {
		obj := a.spec.DeepCopy()
		if obj.Annotations == nil {
			obj.Annotations = map[string]string{}
		}
		obj.Annotations[v1alpha1.AnnotationApprovedTools] = v1alpha1.FormatApprovedTools(a.after, "\n")
		obj.Default()
		if errs := obj.Validate(); len(errs) > 0 {
			return fmt.Errorf("%s %q: the approvals cannot be written: %v", v1alpha1.KindContextSource, a.spec.Name, errs.ToAggregate())
		}
	}
	for _, a := range changes {
		if print {
			ns := ""
			if a.spec.Namespace != "" {
				ns = " -n " + a.spec.Namespace
			}
			fmt.Fprintf(w, "kubectl annotate contextsource %s%s --overwrite %s='%s'\n", a.spec.Name, ns,
				v1alpha1.AnnotationApprovedTools, v1alpha1.FormatApprovedTools(a.after, ","))
			continue
		}
		if maps.Equal(a.before, a.after) {
			fmt.Fprintf(w, "%s: nothing to approve (%d tools approved)\n", a.spec.Name, len(a.after))
			continue
		}
		if err := editApprovals(a); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: approved %s; %d tools approved in %s\n", a.spec.Name, listOrNone(a.approved), len(a.after), a.file)
		if len(a.forgotten) > 0 {
			fmt.Fprintf(w, "%s: dropped the approvals of tools no longer listed: %s\n", a.spec.Name, strings.Join(a.forgotten, ", "))
		}
	}
	return nil
}

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "no new tool"
	}
	return strings.Join(list, ", ")
}

// editApprovals writes a source's new annotation into its manifest file.
func editApprovals(a approval) error {
	if strings.EqualFold(filepath.Ext(a.file), ".json") {
		return fmt.Errorf("%s: a JSON manifest is not edited; use --print, or set %s by hand", a.file, v1alpha1.AnnotationApprovedTools)
	}
	data, err := os.ReadFile(a.file)
	if err != nil {
		return err
	}
	out, err := setAnnotation(data, a.spec.Name, v1alpha1.AnnotationApprovedTools, v1alpha1.FormatApprovedTools(a.after, "\n"))
	if err != nil {
		return fmt.Errorf("%s: %w", a.file, err)
	}
	info, err := os.Stat(a.file)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(a.file, out, info.Mode().Perm())
}
