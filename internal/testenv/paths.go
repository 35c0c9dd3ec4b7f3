package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KubernetesVersion is the version of the control plane binaries that
// `make controlplane` builds from hack/controlplane.
const KubernetesVersion = "v1.36.3"

// modulePath identifies the repository's go.mod; hack/controlplane has a
// go.mod of its own that must not be taken for the root.
const modulePath = "github.com/contextrouter/contextrouter"

// assetsEnv is the variable envtest itself reads for the binary directory;
// `make test` sets it, so honouring it keeps both in agreement.
const assetsEnv = "KUBEBUILDER_ASSETS"

// controlPlaneBinaries are the programs envtest runs (kubectl only for
// helpers that shell out, but envtest resolves its path regardless).
var controlPlaneBinaries = []string{"etcd", "kube-apiserver", "kubectl"}

// RepoRoot returns the repository root: the nearest directory, walking up
// from the working directory, whose go.mod declares the contextrouter module.
// Tests run with the package directory as working directory, so this works
// from any package. It panics when there is no such directory, which only
// happens when the code runs outside the repository.
func RepoRoot() string {
	root, err := findRepoRoot()
	if err != nil {
		panic(err)
	}
	return root
}

// BinDir returns the directory holding kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS when set, else bin/k8s/<KubernetesVersion> in the
// repository root.
func BinDir() string {
	dir, err := binDir()
	if err != nil {
		panic(err)
	}
	return dir
}

func binDir() (string, error) {
	if dir := os.Getenv(assetsEnv); dir != "" {
		return filepath.Abs(dir)
	}
	root, err := findRepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s", KubernetesVersion), nil
}

func findRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testenv: working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		ok, err := declaresModule(filepath.Join(dir, "go.mod"), modulePath)
		if err != nil {
			return "", err
		}
		if ok {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("testenv: no go.mod of module %s in %s or any parent directory", modulePath, wd)
		}
	}
}

// declaresModule reports whether the go.mod at path exists and names module.
func declaresModule(path, module string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("testenv: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == module, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("testenv: read %s: %w", path, err)
	}
	return false, nil
}

// checkBinaries returns an error naming every control plane binary that is
// missing from dir or not executable, with the command that builds them.
func checkBinaries(dir string) error {
	var problems []string
	for _, name := range controlPlaneBinaries {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			problems = append(problems, name+" is missing")
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			problems = append(problems, name+" is not an executable file")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("testenv: control plane binaries in %s: %s; run `make controlplane` (it builds Kubernetes %s from hack/controlplane)",
		dir, strings.Join(problems, ", "), KubernetesVersion)
}
