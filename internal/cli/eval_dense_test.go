package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextrouter/contextrouter/internal/embed/embedtest"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// eval retrieval --ranking hybrid|embedding asks the given endpoint, and on
// a dataset whose questions use other words than the documents, the model
// (which knows the synonyms) finds what BM25 cannot.
func TestEvalRetrievalDense(t *testing.T) {
	srv := embedtest.New(t)
	srv.Synonyms = map[string]string{"holiday": "vacation", "leave": "vacation", "release": "deploy", "ship": "deploy", "reimburse": "expense", "receipts": "expense"}
	srv.Key = "sk-eval-key-1234"
	t.Setenv(sources.SecretEnvVar(evalKeySecret, evalKeyKey), srv.Key)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	write(t, filepath.Join(dir, "corpus.jsonl"), strings.Join([]string{
		`{"_id": "d1", "title": "Vacation policy", "text": "Employees get 28 vacation days."}`,
		`{"_id": "d2", "title": "Deploy runbook", "text": "Roll back a deploy with the pipeline."}`,
		`{"_id": "d3", "title": "Expenses", "text": "Submit receipts within 30 days."}`,
		`{"_id": "d4", "title": "Office", "text": "The office opens at eight; days off are announced."}`,
	}, "\n")+"\n")
	write(t, filepath.Join(dir, "queries.jsonl"), strings.Join([]string{
		`{"_id": "q1", "text": "holiday leave"}`,
		`{"_id": "q2", "text": "how do I ship a release"}`,
		`{"_id": "q3", "text": "reimburse"}`,
	}, "\n")+"\n")
	write(t, filepath.Join(dir, "qrels", "test.tsv"), "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n")

	report := func(args ...string) map[string]any {
		t.Helper()
		out, stderr, code := run(t, append([]string{"eval", "retrieval", "--dataset", dir, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if bm25 := report(); bm25["p@1"] != 0.0 {
		t.Fatalf("BM25 p@1 = %v; the dataset must share no word between questions and answers", bm25["p@1"])
	}
	for _, ranking := range []string{"hybrid", "embedding"} {
		t.Run(ranking, func(t *testing.T) {
			srv.Reset()
			rep := report("--ranking", ranking, "--embedding-endpoint", srv.EmbeddingsURL(), "--embedding-model", "test-model", "--embedding-batch-size", "3")
			if rep["p@1"] != 1.0 || rep["ranking"] != ranking {
				t.Errorf("report %v, want p@1 1 and ranking %s", rep, ranking)
			}
			if srv.Requests() == 0 {
				t.Error("the endpoint was not asked")
			}
		})
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--ranking", "hybrid"}, "--ranking hybrid needs --embedding-endpoint and --embedding-model"},
		{[]string{"--ranking", "dense"}, `--ranking: must be relevance, embedding or hybrid, not "dense"`},
		{[]string{"--ranking", "hybrid", "--embedding-endpoint", "ftp://x", "--embedding-model", "m"}, "--embedding-endpoint: "},
		{[]string{"--ranking", "hybrid", "--embedding-endpoint", srv.EmbeddingsURL(), "--embedding-model", "m", "--dense-weight", "2"}, "--dense-weight: "},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, stderr, code := run(t, append([]string{"eval", "retrieval", "--dataset", dir}, tt.args...)...)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q, want %q", code, stderr, tt.want)
			}
		})
	}

	// An endpoint that fails is an error, not a BM25 measure.
	srv.FailAlways = true
	_, stderr, code := run(t, "eval", "retrieval", "--dataset", dir, "--ranking", "hybrid", "--embedding-endpoint", srv.EmbeddingsURL(), "--embedding-model", "other-model")
	if code == 0 || !strings.Contains(stderr, "chunk embeddings: ") || strings.Contains(stderr, srv.Key) {
		t.Errorf("failing endpoint: exit %d, stderr %q", code, stderr)
	}
}

// validate reports chunk embeddings that failed as a warning at the field,
// and still exits 0: the router would serve, ranked by BM25.
func TestValidateReportsEmbeddingFailure(t *testing.T) {
	srv := embedtest.New(t)
	srv.Dims = 8
	dir := writeManifests(t, `apiVersion: contextrouter.dev/v1alpha1
kind: ContextRouter
metadata: {name: r}
spec:
  defaultAccess: Allow
  ranking:
    strategy: Embedding
    embedding: {endpoint: "`+srv.EmbeddingsURL()+`", model: m, dimensions: 16}
`+promptAndRoute)
	out, stderr, code := run(t, "validate", "-f", dir, "--cache-dir", t.TempDir())
	want := `m.yaml:8: ContextRouter/r: spec.ranking.embedding: chunk embeddings failed, so queries are ranked by BM25 until a reload succeeds: ` +
		srv.EmbeddingsURL() + `: model "m" returned a vector of 8 dimensions; spec.ranking.embedding.dimensions is 16`
	if code != 0 || !strings.Contains(out, "warning: ") || !strings.Contains(out, want) || !strings.Contains(out, "valid: ") {
		t.Errorf("exit %d, stderr %q, output:\n%s\nwant the warning %q", code, stderr, out, want)
	}
}
