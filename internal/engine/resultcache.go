package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/sources"
)

// ResultCache keeps the answers of per-query (httpAPI) sources between
// queries and across snapshots (internal/cache implements it). The engine
// asks it before a fetch and fills it after a successful one; failures are
// never stored. source is SourceFingerprint of the source's spec, so an edited
// source misses instead of serving answers fetched with its old spec, and
// query is the request text exactly as the source receives it.
type ResultCache interface {
	// Get returns a fresh result. The engine does not modify the chunks.
	Get(source, query string) ([]sources.Chunk, bool)
	// Put stores the result of a successful fetch.
	Put(source, query string, chunks []sources.Chunk)
}

// SourceFingerprint identifies a source's defaulted spec, name and namespace:
// "sha256:<hex>" of their JSON. It keys cached results; `contextrouter cache
// stats` uses it to tell entries of current sources from those of edited
// or deleted ones.
func SourceFingerprint(src *v1alpha1.ContextSource) string {
	b, err := json.Marshal(struct {
		Namespace string                     `json:"namespace"`
		Name      string                     `json:"name"`
		Spec      v1alpha1.ContextSourceSpec `json:"spec"`
	}{src.Namespace, src.Name, src.Spec})
	if err != nil {
		// A spec that cannot be encoded cannot have been decoded either;
		// the engine does not cache a source without a fingerprint.
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
