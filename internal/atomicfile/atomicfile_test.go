package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "router.yaml")
	for _, tc := range []struct {
		name string
		data string
		perm os.FileMode
	}{
		{"creates", "kind: ContextSource\n", 0o644},
		{"replaces content and mode", "kind: ContextRouter\n", 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := WriteFile(path, []byte(tc.data), tc.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != tc.data {
				t.Fatalf("content %q (%v), want %q", got, err, tc.data)
			}
			if info, _ := os.Stat(path); info.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, want %v", info.Mode().Perm(), tc.perm)
			}
			// No temporary file is left beside it.
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("directory holds %d entries, want 1", len(entries))
			}
		})
	}
	missing := filepath.Join(dir, "no", "such", "dir", "x.yaml")
	if err := WriteFile(missing, []byte("x"), 0o644); err == nil || !strings.Contains(err.Error(), "writing "+missing) {
		t.Errorf("error %v, want one naming %s", err, missing)
	}
}
