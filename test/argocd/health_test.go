// Package argocd_test runs the Argo CD health checks of config/argocd the way
// Argo CD does — gopher-lua with only the package, base and table libraries,
// the object as the global obj, a one-second limit — against the test cases
// next to each script (Argo CD's resource_customizations layout:
// health_test.yaml naming testdata/*.yaml and the expected status and
// message). It also keeps config/argocd/argocd-cm.yaml, the ConfigMap patch
// users apply, equal to the scripts (go test -update rewrites it), and makes
// sure every condition reason the operator writes (api/v1alpha1, through a
// replace of the root module) has a test case.
package argocd_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite config/argocd/argocd-cm.yaml from the health.lua scripts")

// root is config/argocd, relative to this package.
const root = "../../config/argocd"

const group = "contextrouter.dev"

// kinds must each have a health check.
var kinds = []string{v1alpha1.KindAgentPermission, v1alpha1.KindContextClassifier, v1alpha1.KindContextRoute, v1alpha1.KindContextRouter, v1alpha1.KindContextSource}

// healthStatus is what a health.lua returns (Argo CD's health.HealthStatus).
type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// validStatuses are the health codes Argo CD accepts from a script.
var validStatuses = []string{"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}

type healthTests struct {
	Tests []struct {
		HealthStatus healthStatus `json:"healthStatus"`
		InputPath    string       `json:"inputPath"`
	} `json:"tests"`
}

// runHealth executes script with obj the way Argo CD's Lua VM does.
func runHealth(script string, obj map[string]any) (healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	// Argo CD opens these and no others (plus a cut-down os): a script
	// calling string.format or math.max works in a plain Lua but fails
	// there, so it must fail here too.
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return healthStatus{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return healthStatus{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return healthStatus{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	var hs healthStatus
	var errs []error
	ret.ForEach(func(k, v lua.LValue) {
		switch k.String() {
		case "status":
			hs.Status = v.String()
		case "message":
			hs.Message = v.String()
		default:
			errs = append(errs, fmt.Errorf("the returned table has the unknown key %q", k.String()))
		}
	})
	if !slices.Contains(validStatuses, hs.Status) {
		errs = append(errs, fmt.Errorf("status %q is not an Argo CD health status", hs.Status))
	}
	return hs, errors.Join(errs...)
}

// toLua converts decoded JSON into Lua values as Argo CD does: objects and
// arrays become tables (arrays 1-based), numbers LNumber.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestHealthChecks(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(root, group, kind)
			script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
			if err != nil {
				t.Fatal(err)
			}
			var cases healthTests
			readYAML(t, filepath.Join(dir, "health_test.yaml"), &cases)
			if len(cases.Tests) == 0 {
				t.Fatal("health_test.yaml has no tests")
			}
			covered := map[string]bool{}
			statuses := map[string]bool{}
			for _, tc := range cases.Tests {
				covered[filepath.Clean(tc.InputPath)] = true
				statuses[tc.HealthStatus.Status] = true
				t.Run(strings.TrimSuffix(filepath.Base(tc.InputPath), ".yaml"), func(t *testing.T) {
					var obj map[string]any
					readYAML(t, filepath.Join(dir, tc.InputPath), &obj)
					if obj["apiVersion"] != group+"/v1alpha1" || obj["kind"] != kind {
						t.Fatalf("%s is a %v %v, not a %s/v1alpha1 %s", tc.InputPath, obj["apiVersion"], obj["kind"], group, kind)
					}
					got, err := runHealth(string(script), obj)
					if err != nil {
						t.Fatalf("health.lua: %v", err)
					}
					if got != tc.HealthStatus {
						t.Errorf("got    %s %q\nwant   %s %q", got.Status, got.Message, tc.HealthStatus.Status, tc.HealthStatus.Message)
					}
				})
			}
			// Every input is used, and the three outcomes are all exercised.
			inputs, err := filepath.Glob(filepath.Join(dir, "testdata", "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range inputs {
				rel, _ := filepath.Rel(dir, in)
				if !covered[rel] {
					t.Errorf("%s is not used by health_test.yaml", rel)
				}
			}
			for _, s := range []string{"Healthy", "Progressing", "Degraded"} {
				if !statuses[s] {
					t.Errorf("no test case expects %s", s)
				}
			}
		})
	}
}

// statusReasons collects every "reason" in an object's status: conditions,
// status.parents[].conditions, status.excludedBy[].
func statusReasons(v any, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if r, ok := e.(string); ok && k == "reason" {
				into[r] = true
			}
			statusReasons(e, into)
		}
	case []any:
		for _, e := range v {
			statusReasons(e, into)
		}
	}
}

// TestEveryReasonHasACase: each reason the operator writes on a kind
// (v1alpha1.ConditionReasons) appears in the status of at least one test
// case of that kind's health check, so a new reason cannot ship without
// the Lua script being tested against it.
func TestEveryReasonHasACase(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dir := filepath.Join(root, group, kind)
			var cases healthTests
			readYAML(t, filepath.Join(dir, "health_test.yaml"), &cases)
			seen := map[string]bool{}
			for _, tc := range cases.Tests {
				var obj map[string]any
				readYAML(t, filepath.Join(dir, tc.InputPath), &obj)
				statusReasons(obj["status"], seen)
			}
			reasons := v1alpha1.ConditionReasons(kind)
			if len(reasons) == 0 {
				t.Fatalf("v1alpha1.ConditionReasons(%q) is empty", kind)
			}
			for _, r := range reasons {
				if !seen[string(r)] {
					t.Errorf("no test case of %s/health_test.yaml carries the reason %s: add one to testdata", kind, r)
				}
			}
		})
	}
}

// TestRunHealthIsStrict makes sure the runner fails the way Argo CD would,
// so that a passing test case means something.
func TestRunHealthIsStrict(t *testing.T) {
	tests := []struct{ name, script, want string }{
		{"string library", `return {status = string.format("%s", "Healthy")}`, "string"},
		{"bad status", `return {status = "Fine", message = ""}`, `status "Fine" is not an Argo CD health status`},
		{"no table", `return "Healthy"`, "returned string, not a table"},
		{"unknown key", `return {status = "Healthy", msg = "x"}`, `unknown key "msg"`},
		{"endless loop", `while true do end`, "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runHealth(tt.script, map[string]any{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// argocdCM renders the argocd-cm patch that installs every health check.
func argocdCM(t *testing.T) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString(`# Generated from config/argocd/contextrouter.dev/*/health.lua by
# "go -C test/argocd test . -update"; do not edit.
#
# Installs the Argo CD health checks of the four contextrouter.dev kinds:
#   kubectl -n argocd patch configmap argocd-cm --patch-file config/argocd/argocd-cm.yaml
# or, when Argo CD is installed with kustomize, add config/argocd as a component.
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
`)
	for _, kind := range kinds {
		script, err := os.ReadFile(filepath.Join(root, group, kind, "health.lua"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  resource.customizations.health.%s_%s: |\n", group, kind)
		for _, line := range strings.Split(strings.TrimRight(string(script), "\n"), "\n") {
			if line == "" {
				b.WriteString("\n")
				continue
			}
			b.WriteString("    " + line + "\n")
		}
	}
	return []byte(b.String())
}

func TestArgoCDConfigMapMatchesTheScripts(t *testing.T) {
	path := filepath.Join(root, "argocd-cm.yaml")
	want := argocdCM(t)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: run `go -C test/argocd test . -update`", path)
	}
	// The patch carries each script unchanged through YAML.
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(got, &cm); err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		script, _ := os.ReadFile(filepath.Join(root, group, kind, "health.lua"))
		key := "resource.customizations.health." + group + "_" + kind
		if cm.Data[key] != string(script) {
			t.Errorf("data[%s] differs from %s/health.lua", key, kind)
		}
	}
}
