package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// Chunks of a source above the agent's clearance under sensitivityAction:
// Drop do not take the dense places either: 120 Confidential files nearer to
// the question than the one Internal file the agent may read.
func TestDenseSkipsSensitivityDroppedRows(t *testing.T) {
	srv := denseServer(t)
	open, secret := t.TempDir(), t.TempDir()
	writeDocs(t, open, map[string]string{"open.md": "# Vehicle servicing\n\nVehicle servicing happens in spring, booked by the fleet office.\n"})
	docs := map[string]string{}
	for i := range 120 {
		docs[fmt.Sprintf("s%03d.md", i)] = "# Vehicle servicing\n\nVehicle servicing.\n"
	}
	writeDocs(t, secret, docs)
	cfg := denseConfig(t, srv, open, func(r *v1alpha1.RankingSpec) { r.Strategy = v1alpha1.RankingEmbedding })
	src := cfg.Sources[0]
	src.ObjectMeta = meta("secret")
	src.Spec.Directory = &v1alpha1.DirectorySource{Path: secret}
	src.Spec.Sensitivity = v1alpha1.SensitivityConfidential
	cfg.Sources = append(cfg.Sources, src)
	cfg.Routes = []v1alpha1.ContextRoute{routeTo("all", "", "docs", "secret")}
	cfg.Permissions = []v1alpha1.AgentPermission{
		perm("drop", v1alpha1.AgentPermissionSpec{Agents: []string{"a"}, Default: v1alpha1.AccessAllow, SensitivityAction: v1alpha1.SensitivityActionDrop}),
		perm("redact", v1alpha1.AgentPermissionSpec{Agents: []string{"b"}, Default: v1alpha1.AccessAllow, SensitivityAction: v1alpha1.SensitivityActionRedact}),
	}
	s := compileDenseCfg(t, cfg, t.TempDir())
	resp := query(t, s, Request{Text: "car maintenance", Agent: "a"})
	if got := paths(resp); !slices.Equal(got, []string{"open.md"}) {
		t.Errorf("agent a gets %v (dropped for sensitivity: %d), want [open.md]", got, resp.Stats.Dropped.Sensitivity)
	}
	// Under Redact the placeholders reach the agent, so they keep their places.
	resp = query(t, s, Request{Text: "car maintenance", Agent: "b", MaxTokens: 100000})
	if resp.Stats.Redacted != 100 || slices.Contains(paths(resp), "open.md") {
		t.Errorf("agent b: %d redacted (open.md among the chunks: %t), want the 100 nearest, redacted", resp.Stats.Redacted, slices.Contains(paths(resp), "open.md"))
	}
}

// TestRankersHideTheSameRows keeps the two rankers on one visibility rule:
// for random permissions (path denies, sourceDenyPaths, clearance, action)
// over random sources (sensitivity, freshness Flag or Drop, file ages), the
// rows the dense search keeps are exactly the static chunks the BM25 or
// Keyword pipeline lets through its filters (kept or redacted).
func TestRankersHideTheSameRows(t *testing.T) {
	srv := denseServer(t)
	now := time.Now().Truncate(time.Second)
	ages := []time.Duration{10 * time.Minute, 2 * time.Hour, 48 * time.Hour}
	dirs := []string{"pub", "priv", "Mixed", "."}
	sens := []v1alpha1.Sensitivity{v1alpha1.SensitivityPublic, v1alpha1.SensitivityInternal, v1alpha1.SensitivityConfidential, v1alpha1.SensitivityRestricted}
	globs := []string{"priv/**", "**/f1.md", "mixed/**", "f*.md", "pub/f2.md"}
	rng := rand.New(rand.NewPCG(23, 1))
	pick := func(n int) int { return rng.IntN(n) }

	for trial := range 12 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			cfg := denseConfig(t, srv, t.TempDir(), func(r *v1alpha1.RankingSpec) {
				r.Strategy = v1alpha1.RankingEmbedding
				if trial%2 == 1 {
					r.Scorer = v1alpha1.ScorerKeyword
				}
			})
			cfg.Router.Spec.Budget.MaxTokens = 1 << 20
			base := cfg.Sources[0]
			cfg.Sources = nil
			var names []string
			for i := range 3 {
				dir := t.TempDir()
				for _, d := range dirs {
					if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
						t.Fatal(err)
					}
					for f := range 4 {
						p := filepath.Join(dir, d, fmt.Sprintf("f%d.md", f))
						if err := os.WriteFile(p, []byte(fmt.Sprintf("# Alpha %s %d\n\nalpha vehicle note %d-%s-%d\n", d, f, i, d, f)), 0o644); err != nil {
							t.Fatal(err)
						}
						at := now.Add(-ages[pick(len(ages))])
						if err := os.Chtimes(p, at, at); err != nil {
							t.Fatal(err)
						}
					}
				}
				src := base
				src.ObjectMeta = meta(fmt.Sprintf("s%d", i))
				src.Spec.Directory = &v1alpha1.DirectorySource{Path: dir}
				src.Spec.Sensitivity = sens[pick(len(sens))]
				if f := pick(3); f > 0 {
					src.Spec.Freshness = &v1alpha1.FreshnessSpec{MaxAge: metav1.Duration{Duration: time.Hour}, StaleAction: []v1alpha1.StaleAction{v1alpha1.StaleFlag, v1alpha1.StaleDrop}[f-1]}
				}
				cfg.Sources = append(cfg.Sources, src)
				names = append(names, src.Name)
			}
			cfg.Routes = []v1alpha1.ContextRoute{routeTo("all", "", names...)}
			agents := []string{"", "a0", "a1", "a2"}
			for i, agent := range agents[1:] {
				spec := v1alpha1.AgentPermissionSpec{Agents: []string{agent}, Default: v1alpha1.AccessAllow,
					MaxSensitivity:    sens[pick(len(sens))],
					SensitivityAction: []v1alpha1.SensitivityAction{v1alpha1.SensitivityActionDrop, v1alpha1.SensitivityActionRedact}[pick(2)]}
				for _, g := range globs {
					if pick(4) == 0 {
						spec.DenyPaths = append(spec.DenyPaths, g)
					}
				}
				if pick(2) == 0 {
					spec.PathMatching = v1alpha1.PathMatchingCaseInsensitive
				}
				if pick(2) == 0 {
					spec.SourceDenyPaths = []v1alpha1.SourceDenyPaths{{Source: names[pick(len(names))], Paths: []string{globs[pick(len(globs))]}}}
				}
				cfg.Permissions = append(cfg.Permissions, perm(fmt.Sprintf("p%d", i), spec))
			}
			s, err := Compile(context.Background(), cfg, Options{CacheDir: t.TempDir(), Secrets: mapSecrets{"ai/key": denseKey}, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			for _, agent := range agents {
				resp := query(t, s, Request{Text: "alpha vehicle", Agent: agent})
				var pipeline []string
				for _, c := range resp.Chunks {
					pipeline = append(pipeline, c.Source+"/"+c.Path)
				}
				allowed := make([]bool, len(s.byGroup))
				for i := range allowed {
					allowed[i] = true
				}
				dq := s.searchDense(context.Background(), "alpha vehicle", allowed, s.accessFor(agent), s.now(), len(s.docs), &Response{})
				if dq == nil {
					t.Fatal("the dense search did not run")
				}
				var dense []string
				for _, h := range dq.hits {
					c := &s.docs[h.Row].chunk
					dense = append(dense, c.Source+"/"+c.Path)
				}
				slices.Sort(pipeline)
				slices.Sort(dense)
				if !slices.Equal(dense, pipeline) {
					t.Errorf("agent %q (%+v): the dense search keeps %d rows %v, the pipeline %d %v (stats %+v)",
						agent, s.accessFor(agent), len(dense), dense, len(pipeline), pipeline, resp.Stats.Dropped)
				}
				if trial == 0 && agent == "" && len(dense) == 0 {
					t.Error("nothing visible: the test shows nothing")
				}
			}
		})
	}
}
