package cache

import (
	"bufio"
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/contextrouter/contextrouter/internal/sources"
)

// On disk, each result is one file named <sha256 of the key>.json holding two
// lines: a header (format version, source key, fetch time, chunk count) and
// the chunks. The header comes first so that indexing a folder reads a few
// bytes per file. The query text is not stored: a file name does not reveal
// it and neither does the content, beyond what the API answered.
const (
	formatVersion = 1
	fileSuffix    = ".json"
	tempPrefix    = ".tmp-"
	// maxHeaderBytes bounds the first line; a real header is ~150 bytes.
	maxHeaderBytes = 4096
	// tempGrace is how old a temporary file must be before it is taken for
	// the leftover of a crashed write rather than a write in progress.
	tempGrace = time.Minute
)

type fileHeader struct {
	Version int       `json:"version"`
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	Chunks  int       `json:"chunks"`
}

// fileChunk is the stored form of a sources.Chunk, with stable field names.
type fileChunk struct {
	Source  string    `json:"source,omitempty"`
	Title   string    `json:"title,omitempty"`
	Path    string    `json:"path,omitempty"`
	Content string    `json:"content"`
	Index   int       `json:"index,omitempty"`
	ModTime time.Time `json:"mtime,omitzero"`
	Commit  string    `json:"commit,omitempty"`
	// FetchedAt is absent from files written before it existed: such an
	// answer has no known age (api.md §4.7).
	FetchedAt time.Time `json:"fetched,omitzero"`
}

// fileName is the file of a key. The source key's length is hashed too, so
// that no two (source, query) pairs share a preimage.
func fileName(k key) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(k.source)))
	h.Write(n[:])
	h.Write([]byte(k.source))
	h.Write([]byte(k.query))
	return hex.EncodeToString(h.Sum(nil)) + fileSuffix
}

func isEntryName(name string) bool {
	hexPart, ok := strings.CutSuffix(name, fileSuffix)
	if !ok || len(hexPart) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func encodeEntry(e *entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // Encode ends each value with a newline
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fileHeader{Version: formatVersion, Source: e.key.source, Created: e.created.UTC(), Chunks: len(e.chunks)}); err != nil {
		return nil, err
	}
	out := make([]fileChunk, len(e.chunks))
	for i, c := range e.chunks {
		out[i] = fileChunk{Source: c.Source, Title: c.Title, Path: c.Path, Content: c.Content, Index: c.Index, ModTime: c.ModTime, Commit: c.Commit, FetchedAt: c.FetchedAt()}
	}
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeEntry parses a whole file. A torn or foreign file is an error, never
// a partial result: the chunk list must be complete and match the header.
func decodeEntry(data []byte) (fileHeader, []sources.Chunk, error) {
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return fileHeader{}, nil, errors.New("no header line")
	}
	h, err := parseHeader(line)
	if err != nil {
		return fileHeader{}, nil, err
	}
	var fcs []fileChunk
	dec := json.NewDecoder(bytes.NewReader(rest))
	if err := dec.Decode(&fcs); err != nil {
		return fileHeader{}, nil, fmt.Errorf("chunks: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fileHeader{}, nil, errors.New("chunks: data after the list")
	}
	if len(fcs) != h.Chunks {
		return fileHeader{}, nil, fmt.Errorf("chunks: header says %d, file holds %d", h.Chunks, len(fcs))
	}
	out := make([]sources.Chunk, len(fcs))
	for i, c := range fcs {
		out[i] = sources.Chunk{Source: c.Source, Title: c.Title, Path: c.Path, Content: c.Content, Index: c.Index, ModTime: c.ModTime, Commit: c.Commit, Fetched: unixNano(c.FetchedAt)}
	}
	return h, out, nil
}

func parseHeader(line []byte) (fileHeader, error) {
	var h fileHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return fileHeader{}, fmt.Errorf("header: %w", err)
	}
	if h.Version != formatVersion {
		return fileHeader{}, fmt.Errorf("header: format version %d, want %d", h.Version, formatVersion)
	}
	if h.Source == "" || h.Created.IsZero() || h.Chunks < 0 {
		return fileHeader{}, errors.New("header: source, created and chunks are required")
	}
	return h, nil
}

// Entry describes one result file, as ReadDir finds it.
type Entry struct {
	// Name is the file name within the folder.
	Name string
	// Source is the source key the result was fetched for ("" if Unreadable).
	Source string
	// Created is when the result was fetched.
	Created time.Time
	// Chunks is the number of results in the file.
	Chunks int
	// Size is the file size in bytes.
	Size int64
	// Unreadable is set when the header cannot be read (a torn write or
	// another format version); such a file is never served and is removed
	// when a cache opens the folder.
	Unreadable bool
}

// ReadDir lists the result files in dir, oldest first (by Created, then
// Name), unreadable ones last. It reads only each file's first line. A folder
// that does not exist holds no entries. Other files are ignored.
func ReadDir(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache folder %s: %w", dir, err)
	}
	var out []Entry
	for _, de := range des {
		if !de.Type().IsRegular() || !isEntryName(de.Name()) {
			continue
		}
		e, ok := readEntryHeader(filepath.Join(dir, de.Name()))
		if ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Unreadable != b.Unreadable {
			return !a.Unreadable
		}
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Name < b.Name
	})
	return out, nil
}

// readEntryHeader reads one file's header. A file that cannot be opened or
// parsed is returned as Unreadable; ok is false when it no longer exists
// (removed meanwhile by a cache or `contextrouter cache clear`).
func readEntryHeader(path string) (e Entry, ok bool) {
	e = Entry{Name: filepath.Base(path), Unreadable: true}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return e, false
	}
	if err != nil {
		return e, true
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		e.Size = st.Size()
	}
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxHeaderBytes), maxHeaderBytes).ReadSlice('\n')
	if err != nil {
		return e, true
	}
	h, err := parseHeader(line)
	if err != nil {
		return e, true
	}
	e.Source, e.Created, e.Chunks, e.Unreadable = h.Source, h.Created, h.Chunks, false
	return e, true
}

// Purge removes every result file and leftover temporary file in dir (not
// the folder, not other files) and returns how many result files and bytes
// it removed. A folder that does not exist is already empty.
func Purge(dir string) (files int, bytes int64, err error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("cache folder %s: %w", dir, err)
	}
	var errs []error
	for _, de := range des {
		name := de.Name()
		entry := isEntryName(name)
		if !de.Type().IsRegular() || !(entry || strings.HasPrefix(name, tempPrefix)) {
			continue
		}
		var size int64
		if info, err := de.Info(); err == nil {
			size = info.Size()
		}
		err := os.Remove(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, err)
		case entry:
			files++
			bytes += size
		}
	}
	return files, bytes, errors.Join(errs...)
}

// disk is the on-disk tier of one Cache. The lock guards only the index of
// the files (oldest first, for expiry and eviction); file I/O runs outside
// it, and writes run in the background, a few at a time, so a slow disk
// never holds up a query. Files are written whole (temporary file, then
// rename) and name their source key, so a race between writers, readers,
// evictions or another process sharing the folder can cost a miss, never
// serve a wrong or partial answer.
type disk struct {
	dir    string
	log    *slog.Logger
	now    func() time.Time
	writes chan struct{} // one token per write in flight

	mu      sync.Mutex
	opened  bool
	files   map[string]*list.Element // file name -> *diskEntry
	order   *list.List               // of *diskEntry, oldest first
	bytes   int64                    // sum of the indexed files' sizes
	failing bool                     // the last write failed (log once per streak)
}

// maxWritesInFlight bounds background writes; beyond it a result stays in
// memory only (the disk is behind, and queuing would only grow memory).
const maxWritesInFlight = 4

type diskEntry struct {
	name    string
	created time.Time
	size    int64
}

func newDisk(dir string, log *slog.Logger, now func() time.Time) *disk {
	return &disk{dir: dir, log: log, now: now, writes: make(chan struct{}, maxWritesInFlight)}
}

// open creates the folder and indexes it the first time, then trims the
// index to maxEntries files and maxBytes. Expired and unreadable files are
// removed.
func (d *disk) open(ttl time.Duration, maxEntries int, maxBytes int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.opened {
		if err := os.MkdirAll(d.dir, 0o700); err != nil {
			return fmt.Errorf("cache folder: %w", err)
		}
		entries, err := ReadDir(d.dir)
		if err != nil {
			return err
		}
		d.files, d.order, d.bytes = map[string]*list.Element{}, list.New(), 0
		now := d.now()
		for _, e := range entries {
			if e.Unreadable || !fresh(e.Created, now, ttl) {
				d.remove(e.Name)
				continue
			}
			d.index(&diskEntry{name: e.Name, created: e.Created, size: e.Size})
		}
		d.removeStaleTemps()
		d.opened = true
	}
	for _, name := range d.evict(maxEntries, maxBytes, 0, time.Time{}) {
		d.remove(name)
	}
	return nil
}

func (d *disk) removeStaleTemps() {
	des, err := os.ReadDir(d.dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), tempPrefix) {
			continue
		}
		// File times are wall-clock times: compare with the real clock.
		if info, err := de.Info(); err == nil && time.Since(info.ModTime()) > tempGrace {
			d.remove(de.Name())
		}
	}
}

// evict unindexes the expired files at the old end (when ttl > 0) and the
// oldest beyond maxEntries files or maxBytes, and returns their names for
// removal outside the lock. d.mu must be held.
func (d *disk) evict(maxEntries int, maxBytes int64, ttl time.Duration, now time.Time) []string {
	var out []string
	for el := d.order.Front(); el != nil; el = d.order.Front() {
		de := el.Value.(*diskEntry)
		if d.order.Len() <= maxEntries && d.bytes <= maxBytes && (ttl <= 0 || fresh(de.created, now, ttl)) {
			break
		}
		d.unindex(el)
		out = append(out, de.name)
	}
	return out
}

// index adds a file as the newest. d.mu must be held.
func (d *disk) index(de *diskEntry) {
	d.files[de.name] = d.order.PushBack(de)
	d.bytes += de.size
}

// unindex forgets a file. d.mu must be held.
func (d *disk) unindex(el *list.Element) {
	de := d.order.Remove(el).(*diskEntry)
	delete(d.files, de.name)
	d.bytes -= de.size
}

func (d *disk) remove(name string) {
	if err := os.Remove(filepath.Join(d.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("cache: cannot remove a result file", "file", filepath.Join(d.dir, name), "err", err)
	}
}

// get reads a fresh result from disk. Anything wrong with the file (gone,
// torn, another source key, expired) is a miss, and a bad file is removed.
func (d *disk) get(k key, now time.Time, ttl time.Duration) ([]sources.Chunk, time.Time, bool) {
	name := fileName(k)
	d.mu.Lock()
	el, ok := d.files[name]
	if !d.opened || !ok {
		d.mu.Unlock()
		return nil, time.Time{}, false
	}
	indexed := el.Value.(*diskEntry).created
	if !fresh(indexed, now, ttl) {
		d.unindex(el)
		d.mu.Unlock()
		d.remove(name)
		return nil, time.Time{}, false
	}
	d.mu.Unlock()

	path := filepath.Join(d.dir, name)
	data, err := os.ReadFile(path)
	var h fileHeader
	var chunks []sources.Chunk
	if err == nil {
		h, chunks, err = decodeEntry(data)
		switch {
		case err == nil && h.Source != k.source:
			err = errors.New("the file belongs to another source key")
		case err == nil && !fresh(h.Created, now, ttl):
			// Replaced by another process with an older result: expired all the same.
			err = errExpired
		case err == nil:
			return chunks, h.Created, true
		}
	}
	gone := errors.Is(err, fs.ErrNotExist) // `contextrouter cache clear`, or another process
	if !gone && err != errExpired {
		d.log.Warn("cache: removing an unreadable result file", "file", path, "err", err)
	}
	d.mu.Lock()
	// Unless a write replaced the file meanwhile, it is not worth keeping.
	current, ok := d.files[name]
	stale := ok && current.Value.(*diskEntry).created.Equal(indexed)
	if stale {
		d.unindex(current)
	}
	d.mu.Unlock()
	if stale && !gone {
		d.remove(name)
	}
	return nil, time.Time{}, false
}

var errExpired = errors.New("expired")

// put writes a result in the background, unless maxWritesInFlight writes
// are already running. Failures are logged, not returned: the result is in
// memory and the query has its answer.
func (d *disk) put(e *entry, ttl time.Duration, maxEntries int, maxBytes int64) {
	select {
	case d.writes <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-d.writes }()
		d.store(e, ttl, maxEntries, maxBytes)
	}()
}

// store writes one result, makes it the newest file, and removes expired
// files from the old end and the oldest beyond maxEntries or maxBytes. A
// file larger than maxBytes is not written.
func (d *disk) store(e *entry, ttl time.Duration, maxEntries int, maxBytes int64) {
	d.mu.Lock()
	opened := d.opened
	d.mu.Unlock()
	if !opened {
		return
	}
	name := fileName(e.key)
	data, err := encodeEntry(e)
	if err == nil && int64(len(data)) > maxBytes {
		return
	}
	if err == nil {
		err = d.write(name, data)
	}

	d.mu.Lock()
	if err != nil {
		if !d.failing {
			d.log.Warn("cache: cannot write result files; serving from memory only until a write succeeds", "dir", d.dir, "err", err)
			d.failing = true
		}
		d.mu.Unlock()
		return
	}
	if d.failing {
		d.log.Info("cache: writing result files again", "dir", d.dir)
		d.failing = false
	}
	if el, ok := d.files[name]; ok {
		d.unindex(el)
	}
	d.index(&diskEntry{name: name, created: e.created, size: int64(len(data))})
	victims := d.evict(maxEntries, maxBytes, ttl, d.now())
	d.mu.Unlock()
	for _, v := range victims {
		d.remove(v)
	}
}

func (d *disk) write(name string, data []byte) error {
	f, err := os.CreateTemp(d.dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(d.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// flush waits for the writes in flight by taking every token; Puts meanwhile
// keep their results in memory only.
func (d *disk) flush() {
	for range cap(d.writes) {
		d.writes <- struct{}{}
	}
	for range cap(d.writes) {
		<-d.writes
	}
}

// clear waits for the writes in flight, then removes every result file and
// resets the index.
func (d *disk) clear() error {
	d.flush()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opened {
		d.files, d.order, d.bytes = map[string]*list.Element{}, list.New(), 0
	}
	_, _, err := Purge(d.dir)
	return err
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (not fetched).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
