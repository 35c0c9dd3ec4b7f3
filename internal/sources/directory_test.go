package sources

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
)

// lockedLogBuffer collects log output.
type lockedLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedLogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedLogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeTestFile(t *testing.T, root, rel, content string) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func makeSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func dirSpec(name string, d *v1alpha1.DirectorySource) *v1alpha1.ContextSource {
	return &v1alpha1.ContextSource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.ContextSourceSpec{Type: v1alpha1.SourceDirectory, Directory: d},
	}
}

// loadDir builds a Directory source and loads it, returning its chunks and log.
func loadDir(t *testing.T, d *v1alpha1.DirectorySource, env Env) ([]Chunk, string, error) {
	t.Helper()
	var logs lockedLogBuffer
	env.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	src, err := New(dirSpec("docs", d), env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	chunks, err := src.(StaticSource).Load(context.Background())
	return chunks, logs.String(), err
}

// chunkPaths lists the distinct chunk paths in order.
func chunkPaths(chunks []Chunk) []string {
	out := []string{}
	for _, c := range chunks {
		if len(out) == 0 || out[len(out)-1] != c.Path {
			out = append(out, c.Path)
		}
	}
	return out
}

func TestDirectoryLoad(t *testing.T) {
	size10 := resource.MustParse("10")
	tests := []struct {
		name      string
		setup     func(t *testing.T, root, outside string)
		dir       v1alpha1.DirectorySource // Path is set to the root
		wantPaths []string
		wantLogs  []string
		noLogs    []string
	}{
		{
			name: "default include reads md and txt at every depth",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "a.md", "# A\nalpha")
				writeTestFile(t, root, "notes.txt", "plain")
				writeTestFile(t, root, "sub/deep/b.md", "beta")
				writeTestFile(t, root, "main.go", "package main")
				writeTestFile(t, root, "empty.md", "\n\n")
			},
			wantPaths: []string{"a.md", "notes.txt", "sub/deep/b.md"},
		},
		{
			name: "include and exclude",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "docs/a.md", "a")
				writeTestFile(t, root, "docs/drafts/b.md", "b")
				writeTestFile(t, root, "docs/c.txt", "c")
				writeTestFile(t, root, "other/d.md", "d")
			},
			dir:       v1alpha1.DirectorySource{Include: []string{"docs/**/*.md"}, Exclude: []string{"**/drafts/**"}},
			wantPaths: []string{"docs/a.md"},
		},
		{
			name: "oversize file skipped with a reason",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "small.md", "0123456789")
				writeTestFile(t, root, "big.md", "0123456789A")
			},
			dir:       v1alpha1.DirectorySource{MaxFileSize: &size10},
			wantPaths: []string{"small.md"},
			wantLogs:  []string{"skipping big.md: file larger than maxFileSize", "level=INFO"},
		},
		{
			name: "binary and invalid UTF-8 skipped",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "bin.md", "abc\x00def")
				writeTestFile(t, root, "latin1.txt", "gr\xfc\xdfe")
				writeTestFile(t, root, "ok.md", "fine")
			},
			wantPaths: []string{"ok.md"},
			wantLogs:  []string{"skipping bin.md: not UTF-8 text", "skipping latin1.txt: not UTF-8 text"},
		},
		{
			name: "symlinks inside the root are followed",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "real/a.md", "a")
				makeSymlink(t, "real/a.md", filepath.Join(root, "link.md"))
				makeSymlink(t, filepath.Join(root, "real"), filepath.Join(root, "alias")) // absolute target
				writeTestFile(t, root, "hidden/..store/x.md", "x")
				makeSymlink(t, "hidden/..store", filepath.Join(root, "store"))
			},
			// alias/ is the same folder as real/ and is read once, under its real name;
			// store/ points into a ".." folder the walk skips, so it is read through the link.
			wantPaths: []string{"link.md", "real/a.md", "store/x.md"},
			wantLogs:  []string{"skipping alias/: folder already read", "readAs=real"},
		},
		{
			name: "symlinks escaping the root are refused",
			setup: func(t *testing.T, root, outside string) {
				writeTestFile(t, outside, "secret.md", "top secret")
				writeTestFile(t, outside, "dir/s.md", "secret too")
				writeTestFile(t, root, "ok.md", "ok")
				makeSymlink(t, filepath.Join(outside, "secret.md"), filepath.Join(root, "leak.md"))
				makeSymlink(t, "../"+filepath.Base(outside)+"/dir", filepath.Join(root, "leakdir"))
				makeSymlink(t, "../../"+filepath.Base(outside)+"/secret.md", filepath.Join(root, "sub/rel.md"))
				makeSymlink(t, filepath.Join(outside, "secret.md"), filepath.Join(root, "ignored.go"))
			},
			wantPaths: []string{"ok.md"},
			wantLogs: []string{
				"skipping leak.md: symlink points outside the source root",
				"skipping leakdir/: symlink points outside the source root",
				"skipping sub/rel.md: symlink points outside the source root",
			},
			// Files the globs would not read anyway are not worth a log line.
			noLogs: []string{"ignored.go"},
		},
		{
			name: "symlink loops do not hang",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "a/x.md", "x")
				makeSymlink(t, "..", filepath.Join(root, "a/up"))
				makeSymlink(t, ".", filepath.Join(root, "a/self"))
				makeSymlink(t, "loop2", filepath.Join(root, "loop1"))
				makeSymlink(t, "loop1", filepath.Join(root, "loop2"))
				makeSymlink(t, "loop3.md", filepath.Join(root, "loop3.md"))
			},
			wantPaths: []string{"a/x.md"},
			wantLogs:  []string{"skipping a/up/: folder already read", "skipping loop3.md: broken symlink"},
		},
		{
			name: "ConfigMap volume layout reads each key once",
			setup: func(t *testing.T, root, _ string) {
				ts := "..2026_01_02_03_04_05.123456789"
				writeTestFile(t, root, ts+"/handbook.md", "# Handbook\n## Leave\n20 days")
				writeTestFile(t, root, ts+"/faq.txt", "Q and A")
				makeSymlink(t, ts, filepath.Join(root, "..data"))
				makeSymlink(t, "..data/handbook.md", filepath.Join(root, "handbook.md"))
				makeSymlink(t, "..data/faq.txt", filepath.Join(root, "faq.txt"))
			},
			wantPaths: []string{"faq.txt", "handbook.md"},
			noLogs:    []string{"..data", "..2026"},
		},
		{
			name: "excluded folders are not walked",
			setup: func(t *testing.T, root, _ string) {
				writeTestFile(t, root, "node_modules/pkg/readme.md", "dependency")
				writeTestFile(t, root, "node_modules/pkg/bin.md", "\x00")
				writeTestFile(t, root, "guide.md", "guide")
			},
			dir:       v1alpha1.DirectorySource{Exclude: []string{"node_modules/**"}},
			wantPaths: []string{"guide.md"},
			noLogs:    []string{"node_modules"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "docs")
			// A sibling whose name extends the root's: not inside it.
			outside := filepath.Join(base, "docs2")
			for _, d := range []string{root, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			tt.setup(t, root, outside)
			d := tt.dir
			d.Path = root
			chunks, logs, err := loadDir(t, &d, Env{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := chunkPaths(chunks); !reflect.DeepEqual(got, tt.wantPaths) {
				t.Errorf("paths = %q, want %q\nlogs:\n%s", got, tt.wantPaths, logs)
			}
			for _, c := range chunks {
				if c.Source != "docs" || strings.TrimSpace(c.Content) == "" {
					t.Errorf("bad chunk %+v", c)
				}
				if strings.Contains(c.Content, "secret") {
					t.Errorf("read a file outside the root: %+v", c)
				}
			}
			for _, w := range tt.wantLogs {
				if !strings.Contains(logs, w) {
					t.Errorf("log lacks %q:\n%s", w, logs)
				}
			}
			for _, w := range tt.noLogs {
				if strings.Contains(logs, w) {
					t.Errorf("log mentions %q:\n%s", w, logs)
				}
			}
		})
	}
}

func TestDirectoryChunkContent(t *testing.T) {
	root := t.TempDir()
	p := writeTestFile(t, root, "guide/setup.md", "# Setup\r\nIntro.\r\n\r\n## Install\r\nRun make.\r\n")
	writeTestFile(t, root, "notes.txt", "Remember the milk.")
	mt := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	chunks, _, err := loadDir(t, &v1alpha1.DirectorySource{Path: root}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	want := []titledContent{
		{"Setup", "# Setup\nIntro."},
		{"Setup - Install", "## Install\nRun make."},
		{"notes.txt", "Remember the milk."},
	}
	if g := titleContents(chunks); !reflect.DeepEqual(g, want) {
		t.Fatalf("got %q\nwant %q", g, want)
	}
	if !chunks[0].ModTime.Equal(mt) || chunks[1].Index != 1 || chunks[1].Path != "guide/setup.md" {
		t.Errorf("metadata: %+v", chunks[:2])
	}
	if chunks[2].ModTime.IsZero() || chunks[2].Index != 0 {
		t.Errorf("metadata: %+v", chunks[2])
	}
}

func TestDirectoryChunkingSpec(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "a.md", "## One\n"+strings.Repeat("word ", 60)+"\n\n"+strings.Repeat("more ", 60))
	spec := dirSpec("docs", &v1alpha1.DirectorySource{Path: root})
	spec.Spec.Chunking = v1alpha1.ChunkingSpec{MaxChunkTokens: 70}
	src, err := New(spec, Env{CountTokens: func(s string) int { return len(strings.Fields(s)) }})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := src.(StaticSource).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 62 + 60 words: two chunks by the env counter (ceil(runes/4) would give more).
	if len(chunks) != 2 || !strings.HasPrefix(chunks[1].Content, "more") {
		t.Fatalf("got %q", titleContents(chunks))
	}

	spec.Spec.Chunking = v1alpha1.ChunkingSpec{Strategy: v1alpha1.ChunkingWholeFile, MaxChunkTokens: 70}
	src, err = New(spec, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if chunks, _ = src.(StaticSource).Load(context.Background()); len(chunks) != 1 {
		t.Fatalf("WholeFile gave %d chunks", len(chunks))
	}
}

func TestDirectoryRelativePathAgainstBaseDir(t *testing.T) {
	base := t.TempDir()
	writeTestFile(t, base, "manifests/docs/a.md", "hello")
	chunks, _, err := loadDir(t, &v1alpha1.DirectorySource{Path: "docs"}, Env{BaseDir: filepath.Join(base, "manifests")})
	if err != nil {
		t.Fatal(err)
	}
	if got := chunkPaths(chunks); !reflect.DeepEqual(got, []string{"a.md"}) {
		t.Fatalf("paths = %q", got)
	}
}

func TestDirectoryRootErrors(t *testing.T) {
	base := t.TempDir()
	file := writeTestFile(t, base, "file.md", "x")
	tests := []struct {
		name    string
		dir     v1alpha1.DirectorySource
		baseDir string
		wantErr string
	}{
		{"missing root", v1alpha1.DirectorySource{Path: filepath.Join(base, "nope")}, "", `directory "` + filepath.Join(base, "nope") + `": no such file or directory`},
		{"root is a file", v1alpha1.DirectorySource{Path: file}, "", `directory "` + file + `": not a directory`},
		{
			"volume without path uses the mount default",
			v1alpha1.DirectorySource{Volume: &v1alpha1.DirectoryVolume{ConfigMap: &v1alpha1.LocalObjectReference{Name: "hr"}}}, "",
			`directory "/var/run/contextrouter/sources/docs": no such file or directory`,
		},
		// The folder it resolves against is the host's business: the error names the path as written.
		{"relative path names no host folder", v1alpha1.DirectorySource{Path: "../docs"}, filepath.Join(base, "config"), `directory "../docs": no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := loadDir(t, &tt.dir, Env{BaseDir: tt.baseDir})
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// A folder that vanishes after a good load keeps its chunks, with a *StaleError naming the folder
// as the manifest writes it; once it is back, its new content is read.
func TestDirectoryKeepsLastGoodContent(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "docs")
	writeTestFile(t, root, "a.md", "# A\n\nfirst edition")
	src, err := New(dirSpec("docs", &v1alpha1.DirectorySource{Path: "docs"}), Env{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	static := src.(StaticSource)
	good, err := static.Load(context.Background())
	if err != nil || len(good) != 1 {
		t.Fatalf("first load: %v, %d chunks", err, len(good))
	}
	good[0].Content = "changed by the caller" // must not reach the kept copy

	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	chunks, err := static.Load(context.Background())
	var stale *StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("load without the folder: err = %v, want a *StaleError", err)
	}
	if want := `directory "docs": no such file or directory (serving the content last read)`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if strings.Contains(err.Error(), base) {
		t.Errorf("error %q shows the host folder %s", err, base)
	}
	if len(chunks) != 1 || chunks[0].Content != "# A\n\nfirst edition" {
		t.Errorf("stale chunks = %+v, want the first edition", chunks)
	}

	writeTestFile(t, root, "a.md", "# A\n\nsecond edition")
	chunks, err = static.Load(context.Background())
	if err != nil || len(chunks) != 1 || chunks[0].Content != "# A\n\nsecond edition" {
		t.Fatalf("load after the folder is back: %v, %+v", err, chunks)
	}

	// Without a good load there is nothing to keep: a plain error and no chunks.
	fresh, err := New(dirSpec("docs", &v1alpha1.DirectorySource{Path: "gone"}), Env{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err = fresh.(StaticSource).Load(context.Background())
	if err == nil || errors.As(err, &stale) || chunks != nil {
		t.Fatalf("first load of a missing folder: %v, %+v; want a plain error", err, chunks)
	}
}

func TestDirectoryInvalidSpec(t *testing.T) {
	zero := resource.MustParse("0")
	tests := []struct {
		name    string
		dir     *v1alpha1.DirectorySource
		wantErr string
	}{
		{"missing block", nil, "spec.directory: must be set"},
		{"no path, no volume", &v1alpha1.DirectorySource{}, "spec.directory.path: must be set"},
		{"bad include", &v1alpha1.DirectorySource{Path: "x", Include: []string{"**/*.md", "[a"}}, `spec.directory.include: invalid glob pattern "[a" at index 1`},
		{"bad exclude", &v1alpha1.DirectorySource{Path: "x", Exclude: []string{"/abs/**"}}, "spec.directory.exclude: "},
		{"zero maxFileSize", &v1alpha1.DirectorySource{Path: "x", MaxFileSize: &zero}, "spec.directory.maxFileSize: must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(dirSpec("docs", tt.dir), Env{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want prefix %q", err, tt.wantErr)
			}
		})
	}
}

func TestDirectoryFIFOSkipped(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "a.md", "a")
	if err := syscall.Mkfifo(filepath.Join(root, "pipe.md"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	makeSymlink(t, "pipe.md", filepath.Join(root, "pipelink.md"))
	done := make(chan struct{})
	var chunks []Chunk
	var logs string
	var err error
	go func() {
		defer close(done)
		chunks, logs, err = loadDir(t, &v1alpha1.DirectorySource{Path: root}, Env{})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := chunkPaths(chunks); !reflect.DeepEqual(got, []string{"a.md"}) {
		t.Errorf("paths = %q", got)
	}
	for _, w := range []string{"skipping pipe.md: not a regular file", "skipping pipelink.md: not a regular file"} {
		if !strings.Contains(logs, w) {
			t.Errorf("log lacks %q:\n%s", w, logs)
		}
	}
}

func TestDirectoryCanceled(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, root, "a.md", "a")
	src, err := New(dirSpec("docs", &v1alpha1.DirectorySource{Path: root}), Env{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.(StaticSource).Load(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
