package server

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextrouter/contextrouter/internal/embed/embedtest"
	"github.com/contextrouter/contextrouter/internal/engine"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// A Hybrid router reports its vectors in /v1/status; a query the embedding
// endpoint fails is answered by BM25 with a warning, and counted.
func TestEmbeddingStatusAndFallback(t *testing.T) {
	const key = "sk-server-test-9876"
	emb := embedtest.New(t)
	emb.Key, emb.EchoAuth = key, true
	manifest := writeHybridRouter(t, emb)
	opts := Options{Paths: []string{manifest}}
	opts.Engine.Secrets = sources.EnvFileSecrets{Getenv: func(name string) string {
		if name == sources.SecretEnvVar("ai", "token") {
			return key
		}
		return ""
	}}
	ts := startServer(t, opts)
	ts.waitReady()

	st := ts.status()
	if e := st.Embedding; e == nil || e.Model != "test-model" || e.Vectors != 2 || e.Dimensions != 64 || e.Error != "" {
		t.Fatalf("status embedding = %+v, want 2 vectors of 64 dimensions", e)
	}
	resp := ts.query(engine.Request{Text: "canary deploys"})
	if len(resp.Warnings) != 0 || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "a.md" {
		t.Fatalf("query: warnings %q, chunks %+v", resp.Warnings, resp.Chunks)
	}

	emb.FailAlways = true
	resp = ts.query(engine.Request{Text: "vacation days"})
	if len(resp.Chunks) == 0 || resp.Chunks[0].Path != "b.md" {
		t.Errorf("fallback chunks %+v, want b.md by BM25", resp.Chunks)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "embedding endpoint failed") || !strings.Contains(resp.Warnings[0], "ranked by BM25") {
		t.Errorf("warnings = %q", resp.Warnings)
	}
	if strings.Contains(strings.Join(resp.Warnings, ""), key) {
		t.Errorf("the key leaks into the response: %q", resp.Warnings)
	}
	if v, ok := ts.metric("contextrouter_embedding_errors_total", "endpoint", "embedding", "reason", "status"); !ok || v != 1 {
		t.Errorf("contextrouter_embedding_errors_total{endpoint=embedding,reason=status} = %v (present %v), want 1", v, ok)
	}
	if strings.Contains(ts.logs.String(), key) {
		t.Error("the key leaks into the log")
	}

	// A reload with an embedding setting past its bound keeps the old configuration.
	emb.FailAlways = false
	hash := ts.status().SnapshotHash
	body, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, manifest, strings.Replace(string(body), "model: test-model", "model: test-model\n      batchSize: 5000", 1))
	eventually(t, 10*time.Second, "the reload to fail", func() bool { return ts.status().LastReloadError != "" })
	st = ts.status()
	if !strings.Contains(st.LastReloadError, "spec.ranking.embedding.batchSize") || st.SnapshotHash != hash || st.Embedding == nil || st.Embedding.Vectors != 2 {
		t.Errorf("after a bad reload: error %q, hash changed %v, embedding %+v", st.LastReloadError, st.SnapshotHash != hash, st.Embedding)
	}
}

// writeHybridRouter writes a Hybrid router over two documents, embedded by
// emb with the key in Secret ai/token, and returns its manifest.
func writeHybridRouter(t *testing.T, emb *embedtest.Server) string {
	t.Helper()
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(docs, "a.md"), "# Deploys\n\nDeploys use the canary pipeline.\n")
	writeAtomic(t, filepath.Join(docs, "b.md"), "# Vacation\n\nTwenty-five vacation days.\n")
	manifest := filepath.Join(dir, "router.yaml")
	writeAtomic(t, manifest, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: r}
spec:
  defaultAccess: Allow
  ranking:
    strategy: Hybrid
    embedding:
      endpoint: `+emb.EmbeddingsURL()+`
      model: test-model
      apiKeySecretRef: {name: ai, key: token}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: all}
spec:
  parentRefs: [{name: r}]
  sources: [{name: docs}]
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: docs}
spec:
  type: Directory
  directory: {path: docs}
`)
	return manifest
}

// A rotated key (the Secret changes, nothing else) is used after the next
// reload: the snapshot that reads the new key replaces the old one.
func TestEmbeddingKeyRotation(t *testing.T) {
	emb := embedtest.New(t)
	emb.Key = "sk-old-1111"
	var key atomic.Value
	key.Store(emb.Key)
	// Nothing but the Secret changes: the periodic check notices it.
	opts := Options{Paths: []string{writeHybridRouter(t, emb)}, PollInterval: 20 * time.Millisecond}
	opts.Engine.Secrets = sources.EnvFileSecrets{Getenv: func(name string) string {
		if name == sources.SecretEnvVar("ai", "token") {
			return key.Load().(string)
		}
		return ""
	}}
	ts := startServer(t, opts)
	ts.waitReady()
	hash := ts.status().SnapshotHash
	if resp := ts.query(engine.Request{Text: "canary deploys"}); len(resp.Warnings) != 0 {
		t.Fatalf("before the rotation: warnings %q", resp.Warnings)
	}
	emb.Key = "sk-new-2222"
	key.Store(emb.Key)
	eventually(t, 10*time.Second, "a snapshot with the new key", func() bool { return ts.status().SnapshotHash != hash })
	// A new question: its vector is not in the LRU, so the endpoint is asked.
	if resp := ts.query(engine.Request{Text: "vacation days"}); len(resp.Warnings) != 0 || len(resp.Chunks) == 0 || resp.Chunks[0].Path != "b.md" {
		t.Errorf("after the rotation: warnings %q, chunks %+v", resp.Warnings, resp.Chunks)
	}
}
