package bundle

import (
	"context"
	"fmt"
	"testing"

	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/manifest"
)

// scaleInput is the scale case: 1,000 routes, 500 sources, 100 permissions.
func scaleInput() Input {
	in := Input{Router: router("acme")}
	for i := range 500 {
		in.Sources = append(in.Sources, inline(fmt.Sprintf("source-%03d", i), fmt.Sprintf(
			"## Topic %d\nThe answer to question %d is in section %d of the handbook. Ask team %d for details.", i, i, i%17, i%23)))
	}
	for i := range 1000 {
		when := fmt.Sprintf(`containsAnyWord(text, ["alpha%d", "beta%d"]) || "team%d" in tags`, i, i, i%50)
		in.Routes = append(in.Routes, route(fmt.Sprintf("route-%04d", i), when,
			fmt.Sprintf("source-%03d", i%500), fmt.Sprintf("source-%03d", (i*7+3)%500)))
	}
	for i := range 100 {
		var allow []string
		for j := range 5 {
			allow = append(allow, fmt.Sprintf("source-%03d", (i*5+j)%500))
		}
		in.Permissions = append(in.Permissions, permission(fmt.Sprintf("perm-%03d", i), []string{fmt.Sprintf("agent-%d", i)}, allow...))
	}
	return in
}

func BenchmarkBuildScale(b *testing.B) {
	in := scaleInput()
	var out *Bundle
	for b.Loop() {
		var err error
		if out, err = Build(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(out.Data)), "bundle-bytes")
}

// BenchmarkLoadScale is what a router pod does with the scale bundle before
// serving: decode (manifest.Parse, Check, Config), then engine.Compile.
func BenchmarkLoadScale(b *testing.B) {
	bn, err := Build(context.Background(), scaleInput())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeConfig(bn.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		cfg, err := decodeConfig(bn.Data)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := engine.Compile(context.Background(), cfg, engine.Options{SkipLoad: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func decodeConfig(data []byte) (*engine.Config, error) {
	set, err := manifest.Parse(FileName, data)
	if err != nil {
		return nil, err
	}
	for _, p := range set.Check() {
		if !p.IsWarning() {
			return nil, p
		}
	}
	return set.Config("")
}
