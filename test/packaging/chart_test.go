// Package packaging_test checks what users install: the Helm chart renders
// (bin/helm, `make helm`) into objects a real API server accepts, with the
// operator settings, RBAC and webhooks that config/ (generated from the
// code's markers) has; the chart's CRDs are config/crd/bases; and the Argo CD
// health-check test inputs are real objects of the four kinds.
package packaging_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/contextrouter/contextrouter/internal/testenv"
)

const (
	chartDir    = "charts/contextrouter"
	releaseName = "contextrouter"
	testNS      = "contextrouter-system"
)

// repo returns path inside the repository.
func repo(path ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, path...)...)
}

// helmBin is bin/helm, which `make helm` installs (and `make test` needs).
func helmBin(t *testing.T) string {
	t.Helper()
	p := repo("bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v; run `make helm`", p, err)
	}
	return p
}

// render runs `helm template` for the chart in namespace ns with the given
// extra arguments (--set ...) and decodes every rendered object.
func render(t *testing.T, ns string, args ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", releaseName, repo(chartDir), "--namespace", ns}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	objs, err := decodeAll(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", strings.Join(args, " "), err)
	}
	return objs, nil
}

func mustRender(t *testing.T, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(t, ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeAll splits a multi-document YAML stream into objects, skipping
// empty documents.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// readObjects decodes the YAML file at path (relative to the repository).
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(repo(path))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// find returns the object of kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// typed converts the object of kind and name in objs into out, failing the
// test when there is none.
func typed(t *testing.T, objs []*unstructured.Unstructured, kind, name string, out any) {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		t.Fatalf("no %s %q among %s", kind, name, names(objs))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %q: %v", kind, name, err)
	}
}

func names(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// operator returns the operator Deployment and its manager container.
func operator(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	var d appsv1.Deployment
	typed(t, objs, "Deployment", "contextrouter-controller-manager", &d)
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "manager" {
			return &d, c
		}
	}
	t.Fatal("the operator Deployment has no container named manager")
	return nil, nil
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// appVersion is the chart's default image tag.
func appVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(repo(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml: appVersion %q, %v", c.AppVersion, err)
	}
	return c.AppVersion
}

func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	want, err := filepath.Glob(repo("config", "crd", "bases", "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("config/crd/bases: %v (%d files)", err, len(want))
	}
	got, err := filepath.Glob(repo(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(base(got), base(want)) {
		t.Fatalf("chart CRDs %q, config/crd/bases %q: run `make chart-crds`", base(got), base(want))
	}
	for _, p := range want {
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(repo(chartDir, "crds", filepath.Base(p)))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from config/crd/bases: run `make chart-crds`", filepath.Base(p))
		}
	}
}
