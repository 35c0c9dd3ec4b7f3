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
)

// Key identifies a text by the SHA-256 of what is sent for it (the text cut
// to MaxInputBytes).
type Key [sha256.Size]byte

// KeyOf is the key of text.
func KeyOf(text string) Key { return sha256.Sum256([]byte(Cut(text))) }

// CachePath is the file that keeps a router's chunk vectors under the cache
// folder base: one file per router, model and configured dimensions, so a
// change of model or size never reads vectors of another.
func CachePath(base, router, model string, dims int) string {
	h := sha256.Sum256([]byte(router + "\x00" + model + "\x00" + strconv.Itoa(dims)))
	return filepath.Join(base, "embeddings", hex.EncodeToString(h[:12])+".vec")
}

// cacheMagic starts a vector file; the layout is magic, dims (uint32), count
// (uint32), then count records of a Key and dims little-endian float32s.
var cacheMagic = []byte("contextrouter-vectors-1\n")

// readCache reads a vector file (nil when absent or unreadable: the vectors
// are then asked for again).
func readCache(path string) (int, map[Key][]float32, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if !bytes.HasPrefix(b, cacheMagic) || len(b) < len(cacheMagic)+8 {
		return 0, nil, fmt.Errorf("%s is not a vector file", path)
	}
	b = b[len(cacheMagic):]
	dims, n := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	b = b[8:]
	rec := sha256.Size + 4*dims
	if dims == 0 || len(b) != n*rec {
		return 0, nil, fmt.Errorf("%s is truncated or damaged", path)
	}
	out := make(map[Key][]float32, n)
	all := make([]float32, n*dims)
	for i := 0; i < n; i++ {
		r := b[i*rec : (i+1)*rec]
		v := all[i*dims : (i+1)*dims : (i+1)*dims]
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(r[sha256.Size+4*j:]))
		}
		out[Key(r[:sha256.Size])] = v
	}
	return dims, out, nil
}

// writeCache replaces the vector file atomically with the given vectors.
func writeCache(path string, dims int, keys []Key, vecs [][]float32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	buf.Grow(len(cacheMagic) + 8 + len(keys)*(sha256.Size+4*dims))
	buf.Write(cacheMagic)
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
	keys := make([]Key, len(texts))
	for i, t := range texts {
		keys[i] = KeyOf(t)
	}
	var dims int
	var have map[Key][]float32
	if path != "" {
		dims, have, out.CacheErr = readCache(path)
		if e.Dimensions > 0 && dims != e.Dimensions {
			have = nil
		}
	}
	out.Vectors = make([][]float32, len(texts))
	var missing []int
	for i, k := range keys {
		if v, ok := have[k]; ok {
			out.Vectors[i] = v
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		in := make([]string, len(missing))
		for j, i := range missing {
			in[j] = texts[i]
		}
		fresh, err := e.Embed(ctx, in)
		if err != nil {
			return Cached{}, err
		}
		if len(have) > 0 && len(fresh[0]) != dims {
			// The model's vectors changed size: the file's are of no use.
			return e.EmbedCached(ctx, "", texts)
		}
		for j, i := range missing {
			out.Vectors[i] = fresh[j]
		}
		out.Sent = len(missing)
	}
	if len(texts) > 0 {
		out.Dims = len(out.Vectors[0])
	}
	if path != "" && (len(missing) > 0 || len(have) != len(texts)) {
		if err := writeCache(path, out.Dims, keys, out.Vectors); err != nil {
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
