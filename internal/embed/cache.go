package embed

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
)

// Key identifies a text by the SHA-256 of what is sent for it (the text cut
// to MaxInputBytes).
type Key [sha256.Size]byte

// KeyOf is the key of text.
func KeyOf(text string) Key { return digest.SHA256(Cut(text)) }

// CachePath is the file that keeps a router's chunk vectors under the cache
// folder base: one file per router, endpoint, model and configured
// dimensions, so a change of any of them never reads vectors of another.
func (e *Embedder) CachePath(base, router string) string {
	h := digest.SHA256(router + "\x00" + e.URL + "\x00" + e.Model + "\x00" + strconv.Itoa(e.Dimensions))
	return filepath.Join(base, "embeddings", hex.EncodeToString(h[:12])+".vec")
}

// origin identifies the endpoint and model whose vectors a file holds (a
// digest: the URL may carry a user part).
func (e *Embedder) origin() Key { return digest.SHA256(e.URL + "\x00" + e.Model) }

// cacheMagic starts a vector file; the layout is magic, the origin (a Key),
// dims (uint32), count (uint32), then count records of a Key and dims
// little-endian float32s.
var cacheMagic = []byte("contextrouter-vectors-2\n")

const cacheHeader = sha256.Size + 8

// readCache reads a vector file written for origin (nil when absent,
// unreadable or of another origin: the vectors are then asked for again).
// The header is checked before anything is allocated from it.
func readCache(path string, origin Key) (int, map[Key][]float32, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if !bytes.HasPrefix(b, cacheMagic) || len(b) < len(cacheMagic)+cacheHeader {
		return 0, nil, fmt.Errorf("%s is not a vector file", path)
	}
	b = b[len(cacheMagic):]
	if Key(b[:sha256.Size]) != origin {
		return 0, nil, nil // another endpoint or model: overwritten below
	}
	b = b[sha256.Size:]
	dims, n := uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	if dims == 0 || dims > v1alpha1.MaxEmbeddingDimensions {
		return 0, nil, fmt.Errorf("%s: %d dimensions is not from 1 to %d", path, dims, v1alpha1.MaxEmbeddingDimensions)
	}
	rec := sha256.Size + 4*dims
	if n > uint64(len(b))/rec || uint64(len(b)) != n*rec {
		return 0, nil, fmt.Errorf("%s is truncated or damaged", path)
	}
	out := make(map[Key][]float32, n)
	all := make([]float32, n*dims)
	for i := range n {
		r := b[i*rec : (i+1)*rec]
		v := all[i*dims : (i+1)*dims : (i+1)*dims]
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(r[sha256.Size+4*j:]))
		}
		out[Key(r[:sha256.Size])] = v
	}
	return int(dims), out, nil
}

// writeCache replaces the vector file atomically with the given vectors.
func writeCache(path string, origin Key, dims int, keys []Key, vecs [][]float32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(cacheMagic) + cacheHeader + len(keys)*(sha256.Size+4*dims))
	buf.Write(cacheMagic)
	buf.Write(origin[:])
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(dims)))
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(keys))))
	var f [4]byte
	for i, k := range keys {
		buf.Write(k[:])
		for _, x := range vecs[i] {
			binary.LittleEndian.PutUint32(f[:], math.Float32bits(x))
			buf.Write(f[:])
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vec-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Cached is the outcome of EmbedCached.
type Cached struct {
	Vectors [][]float32
	Dims    int
	// Sent counts the texts sent to the endpoint (the rest came from the file).
	Sent int
	// CacheErr is a failure to read or write the file; the vectors are good.
	CacheErr error
}

// EmbedCached embeds texts, reading the vectors of texts it has seen from
// the file at path and asking the endpoint only for the others, then
// rewrites the file with the vectors of exactly these texts ("" = no file).
func (e *Embedder) EmbedCached(ctx context.Context, path string, texts []string) (Cached, error) {
	var out Cached
	origin := e.origin()
	// keys are the distinct texts' keys, in first-seen order: the file holds
	// each once. at maps a text to its key.
	at := make([]int, len(texts))
	var keys []Key
	seen := make(map[Key]int, len(texts))
	for i, t := range texts {
		k := KeyOf(t)
		j, ok := seen[k]
		if !ok {
			j = len(keys)
			seen[k] = j
			keys = append(keys, k)
		}
		at[i] = j
	}
	var dims int
	var have map[Key][]float32
	if path != "" {
		dims, have, out.CacheErr = readCache(path, origin)
		if e.Dimensions > 0 && dims != e.Dimensions {
			have = nil
		}
	}
	vecs := make([][]float32, len(keys))
	for {
		var missing []int // indexes into texts, one per missing key
		for i, j := range at {
			if vecs[j] != nil {
				continue
			}
			if v, ok := have[keys[j]]; ok {
				vecs[j] = v
			} else {
				missing = append(missing, i)
				vecs[j] = []float32{} // asked for once
			}
		}
		if len(missing) == 0 {
			break
		}
		in := make([]string, len(missing))
		for m, i := range missing {
			in[m] = texts[i]
		}
		fresh, err := e.Embed(ctx, in)
		if err != nil {
			return Cached{}, err
		}
		if len(have) > 0 && len(fresh[0]) != dims {
			// The model's vectors changed size: the file's are of no use,
			// and the file is rewritten with the new ones below.
			have, vecs = nil, make([][]float32, len(keys))
			continue
		}
		for m, i := range missing {
			vecs[at[i]] = fresh[m]
		}
		out.Sent = len(missing)
		break
	}
	out.Vectors = make([][]float32, len(texts))
	for i, j := range at {
		out.Vectors[i] = vecs[j]
	}
	if len(keys) > 0 {
		out.Dims = len(vecs[0])
	}
	if path != "" && (out.Sent > 0 || len(have) != len(keys)) {
		if err := writeCache(path, origin, out.Dims, keys, vecs); err != nil {
			out.CacheErr = err
		}
	}
	return out, nil
}

// LRU keeps the vectors of recent query texts.
type LRU struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recent
	items map[string]*list.Element
}

type lruEntry struct {
	text string
	vec  []float32
}

// NewLRU keeps up to max vectors.
func NewLRU(max int) *LRU {
	return &LRU{max: max, order: list.New(), items: map[string]*list.Element{}}
}

// Get returns the vector of text, if kept.
func (c *LRU) Get(text string) ([]float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[text]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*lruEntry).vec, true
	}
	return nil, false
}

// Put keeps the vector of text, dropping the least recently used past max.
func (c *LRU) Put(text string, vec []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[text]; ok {
		el.Value.(*lruEntry).vec = vec
		c.order.MoveToFront(el)
		return
	}
	c.items[text] = c.order.PushFront(&lruEntry{text: text, vec: vec})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).text)
	}
}
