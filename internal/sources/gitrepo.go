package sources

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/contextrouter/contextrouter/api/v1alpha1"
	"github.com/contextrouter/contextrouter/internal/digest"
	"github.com/contextrouter/contextrouter/internal/redact"
	"github.com/contextrouter/contextrouter/internal/textutil"
)

func init() {
	Register(v1alpha1.SourceGitRepo, newGitRepo)
	// go-git's stock file transport runs the git-upload-pack binary, which
	// router images do not ship. The in-process server reads local
	// repositories with go-git itself, so file:// and local paths work the
	// same everywhere. It does not serve shallow fetches; Sync then fetches
	// full history, which costs nothing extra on a local disk.
	client.InstallProtocol("file", server.NewClient(localRepoLoader{}))
}

const (
	// DefaultGitSyncTimeout bounds a sync whose context has no deadline, so a
	// stalled connection cannot stop syncing for good.
	DefaultGitSyncTimeout = 10 * time.Minute

	gitRemoteName = "origin"
	// gitPinPrefix holds, per spec ref, the last commit synced, so a restart
	// while the remote is down still serves the last good content.
	gitPinPrefix = "refs/contextrouter/last-good/"
	// gitRefHEAD is where a detached remote HEAD is kept.
	gitRefHEAD = plumbing.ReferenceName("refs/contextrouter/HEAD")
	// gitRefCommit is where a commit fetched by hash is kept.
	gitRefCommit = plumbing.ReferenceName("refs/contextrouter/commit")
	// gitMaxTagDepth bounds tag-of-tag chains when peeling to a commit.
	gitMaxTagDepth = 16
)

// gitFullFetchSpecs mirror every branch and tag; "+" follows force pushes.
var gitFullFetchSpecs = []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// GitStatus is the sync state of a GitRepo.
type GitStatus struct {
	// Commit is the full hash Load reads ("" before the first good sync).
	Commit string
	// LastSync is when a sync last succeeded.
	LastSync time.Time
	// LastAttempt is when the last sync started.
	LastAttempt time.Time
	// LastError is the error of the last sync; empty after a success.
	LastError string
}

// GitRepo is a StaticSource and Syncer that reads files from one commit of a
// git repository. The clone is a bare repository under the cache directory;
// files are read from the commit's tree without a checkout. It is safe for
// concurrent use: Load may run during Sync.
type GitRepo struct {
	name        string
	ep          gitEndpoint
	ref         string
	include     []string
	exclude     []string
	maxFileSize int64
	interval    time.Duration
	chunking    ChunkOptions
	dir         string
	secretName  string
	secrets     SecretResolver
	log         *slog.Logger

	// syncMu serialises this instance's syncs; the folder lock (gitDirLock)
	// also serialises instances sharing a clone.
	syncMu sync.Mutex

	mu          sync.RWMutex
	commit      plumbing.Hash
	lastSync    time.Time
	lastAttempt time.Time
	lastErr     error
	// attempted is set once a sync finished other than by the caller's
	// context ending; Load only syncs before that.
	attempted bool
	// loaded caches the chunks of one commit: a snapshot rebuild caused by
	// another source must not re-read an unchanged tree.
	loaded *gitLoaded
}

type gitLoaded struct {
	commit  plumbing.Hash
	chunks  []Chunk
	skipped Skips
}

var (
	_ StaticSource = (*GitRepo)(nil)
	_ Syncer       = (*GitRepo)(nil)
)

func newGitRepo(spec *v1alpha1.ContextSource, env Env) (Source, error) {
	g := spec.Spec.GitRepo
	if g == nil {
		return nil, errors.New("spec.gitRepo: must be set when spec.type is GitRepo")
	}
	ep, err := parseGitURL(g.URL, env.BaseDir)
	if err != nil {
		return nil, fmt.Errorf("spec.gitRepo.url: %w", err)
	}
	if err := validateGitRef(g.Ref); err != nil {
		return nil, fmt.Errorf("spec.gitRepo.ref: %w", err)
	}
	var secretName string
	if g.Auth != nil {
		secretName = g.Auth.SecretRef.Name
	}
	cacheDir := env.CacheDir
	if cacheDir == "" {
		cacheDir = defaultGitCacheDir()
	}
	logger := env.Logger
	if logger == nil {
		logger = slog.Default()
	}
	secrets := env.Secrets
	if secrets == nil {
		secrets = EnvFileSecrets{Getenv: env.Getenv}
	}
	return &GitRepo{
		name:        spec.Name,
		ep:          ep,
		ref:         g.Ref,
		include:     slices.Clone(g.Include),
		exclude:     slices.Clone(g.Exclude),
		maxFileSize: g.MaxFileSize.Value(),
		interval:    g.Interval.Duration,
		chunking:    chunkOptions(spec, env),
		dir:         filepath.Join(cacheDir, gitCacheFolder(spec.Namespace, spec.Name, ep.key)),
		secretName:  secretName,
		secrets:     secrets,
		log:         logger.With("type", string(v1alpha1.SourceGitRepo), "url", ep.display),
	}, nil
}

// defaultGitCacheDir is <user cache dir>/contextrouter/git, or a folder under
// the temp dir when the user has no cache dir (no HOME in a container).
func defaultGitCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "contextrouter", "git")
	}
	return filepath.Join(os.TempDir(), "contextrouter", "git")
}

// gitCacheFolder names a clone: the source name for people, then a hash of
// the credential-free URL so that different repositories never share a folder.
func gitCacheFolder(namespace, name, key string) string {
	label := name
	if namespace != "" {
		label = namespace + "_" + name
	}
	var b strings.Builder
	for _, r := range label {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	sum := digest.SHA256(key)
	return strings.TrimLeft(b.String(), ".") + "-" + hex.EncodeToString(sum[:8])
}

// validateGitRef rejects refs no branch, tag or commit can have, so a typo
// fails at validation instead of at every sync.
func validateGitRef(ref string) error {
	if ref == "" || ref == "HEAD" || isHexPrefix(ref) {
		return nil
	}
	name := ref
	if !strings.HasPrefix(ref, "refs/") {
		name = "refs/heads/" + ref
	}
	if err := plumbing.ReferenceName(name).Validate(); err != nil {
		return fmt.Errorf("%q is not a valid branch, tag or commit name", ref)
	}
	return nil
}

// isHexPrefix reports whether s can be an (abbreviated) commit hash. Four
// digits is git's shortest abbreviation.
func isHexPrefix(s string) bool {
	if len(s) < 4 || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// Name implements Source.
func (g *GitRepo) Name() string { return g.name }

// Interval is the time between syncs (spec.gitRepo.interval, default 5m).
func (g *GitRepo) Interval() time.Duration { return g.interval }

// CacheDir is the folder of the bare clone.
func (g *GitRepo) CacheDir() string { return g.dir }

// Status reports the sync state.
func (g *GitRepo) Status() GitStatus {
	g.mu.RLock()
	defer g.mu.RUnlock()
	s := GitStatus{LastSync: g.lastSync, LastAttempt: g.lastAttempt}
	if !g.commit.IsZero() {
		s.Commit = g.commit.String()
	}
	if g.lastErr != nil {
		s.LastError = g.lastErr.Error()
	}
	return s
}

// Sync fetches the ref and moves Load to its commit. changed reports a new
// commit. On failure the last good commit stays; the error names the URL but
// never a credential. A sync that fails before any success in this process
// falls back to the commit the cache recorded for the same ref, if any, and
// then reports changed=true together with the error.
func (g *GitRepo) Sync(ctx context.Context) (changed bool, err error) {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	return g.syncLocked(ctx)
}

func (g *GitRepo) syncLocked(ctx context.Context) (bool, error) {
	parent := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultGitSyncTimeout)
		defer cancel()
	}
	started := time.Now()
	// Only syncs write g.commit and syncMu is held, so it can be read unlocked here.
	noCommit := g.commit.IsZero()

	hash, pinned, fetchErr := g.syncCache(ctx, noCommit)

	g.mu.Lock()
	g.lastAttempt = started
	if fetchErr != nil {
		g.lastErr = fetchErr
		// The caller giving up is not an answer from the remote: the next
		// Load may try again.
		if parent.Err() == nil {
			g.attempted = true
		}
		usePin := noCommit && !pinned.IsZero()
		if usePin {
			g.commit = pinned
		}
		g.mu.Unlock()
		if usePin {
			g.log.Warn("git sync failed; serving the commit cached by an earlier run",
				"commit", pinned.String(), "error", fetchErr)
		}
		return usePin, fetchErr
	}
	g.attempted = true
	g.lastErr = nil
	g.lastSync = time.Now()
	changed := hash != g.commit
	g.commit = hash
	g.mu.Unlock()
	if changed {
		g.log.Info("git sync: new commit", "ref", g.refLabel(), "commit", hash.String())
	}
	return changed, nil
}

func (g *GitRepo) refLabel() string {
	if g.ref == "" {
		return "HEAD"
	}
	return g.ref
}

// syncCache brings the target commit into the clone and returns it. Errors
// are wrapped with the URL and scrubbed of credentials. When the sync fails
// and wantPin is set, it also returns the commit an earlier run recorded for
// this ref, if the clone still holds it.
func (g *GitRepo) syncCache(ctx context.Context, wantPin bool) (hash, pinned plumbing.Hash, err error) {
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(err, gitCredentials{})
	}
	unlock, err := gitDirLock(ctx, g.dir)
	if err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(err, gitCredentials{})
	}
	defer unlock()
	repo, err := g.openCache()
	if err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(err, gitCredentials{})
	}
	defer func() {
		if err != nil && wantPin {
			pinned = g.pinned(repo.Storer)
		}
	}()

	creds, err := resolveGitAuth(g.secretName, g.secrets, g.ep)
	if err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(err, creds)
	}
	s := &gitSync{g: g, ctx: ctx, st: repo.Storer, creds: creds}
	hash, err = s.run()
	if err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(err, creds)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(g.pinRef(), hash)); err != nil {
		return plumbing.ZeroHash, plumbing.ZeroHash, g.wrapErr(fmt.Errorf("recording commit %s: %w", hash, err), creds)
	}
	if n := countPacks(g.dir); n > gitMaxPacks {
		// The sync succeeded; a failed compaction only leaves more packs.
		if err := g.compact(repo.Storer); err != nil {
			g.log.Warn("git cache compaction failed", "packs", n, "error", err)
		} else {
			g.log.Info("git cache compacted", "packs", n)
		}
	}
	return hash, plumbing.ZeroHash, nil
}

// gitMaxPacks is the number of pack files (one per fetch that brought
// something) above which the clone is compacted: go-git looks objects up
// pack by pack and reads every index when a storage is opened.
var gitMaxPacks = 50

func countPacks(dir string) int {
	entries, err := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".pack") {
			n++
		}
	}
	return n
}

// compact rewrites the clone as one pack holding the commits recorded for
// every ref (refs/contextrouter/last-good/*) with their trees, and swaps it
// in while no Load reads. go-git's own repack walks full history, which a
// shallow clone lacks. Branch and tag refs are dropped: the next sync sets
// them again, fetching only what a recorded commit does not already hold.
// The caller holds the folder's sync lock.
func (g *GitRepo) compact(st storage.Storer) error {
	var pins []*plumbing.Reference
	iter, err := st.IterReferences()
	if err != nil {
		return err
	}
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference && strings.HasPrefix(r.Name().String(), gitPinPrefix) {
			pins = append(pins, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	seen := map[plumbing.Hash]bool{}
	var objs, shallow []plumbing.Hash
	kept := pins[:0]
	for _, pin := range pins {
		if seen[pin.Hash()] {
			kept = append(kept, pin)
			continue
		}
		c, err := object.GetCommit(st, pin.Hash())
		if err != nil {
			// A pin whose commit cannot be read is dropped, not carried into
			// every later compaction.
			g.log.Warn("dropping an unreadable recorded commit", "ref", pin.Name().String(), "error", err)
			continue
		}
		kept = append(kept, pin)
		seen[c.Hash] = true
		objs = append(objs, c.Hash)
		if len(c.ParentHashes) > 0 {
			shallow = append(shallow, c.Hash)
		}
		if objs, err = appendTreeObjects(st, c.TreeHash, seen, objs); err != nil {
			return err
		}
	}

	if len(objs) == 0 {
		return errors.New("no readable recorded commit to keep")
	}
	tmp := g.dir + ".compact"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fresh, err := git.PlainInit(tmp, true)
	if err != nil {
		return err
	}
	pw, ok := fresh.Storer.(storer.PackfileWriter)
	if !ok {
		return errors.New("storage cannot write packs")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, st, false).Encode(objs, 10); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	for _, pin := range kept {
		if err := fresh.Storer.SetReference(pin); err != nil {
			return err
		}
	}
	if err := fresh.Storer.SetShallow(shallow); err != nil {
		return err
	}

	old := g.dir + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	files := &gitDirFor(g.dir).files
	files.Lock()
	err = os.Rename(g.dir, old)
	if err == nil {
		if err = os.Rename(tmp, g.dir); err != nil {
			// Put the old clone back rather than leave none.
			_ = os.Rename(old, g.dir)
		}
	}
	files.Unlock()
	if err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// appendTreeObjects adds a tree and everything below it (submodule commits
// live in other repositories and are left out).
func appendTreeObjects(st storer.EncodedObjectStorer, h plumbing.Hash, seen map[plumbing.Hash]bool, objs []plumbing.Hash) ([]plumbing.Hash, error) {
	if seen[h] {
		return objs, nil
	}
	seen[h] = true
	objs = append(objs, h)
	tree, err := object.GetTree(st, h)
	if err != nil {
		return objs, err
	}
	for _, e := range tree.Entries {
		switch {
		case e.Mode == filemode.Submodule:
		case e.Mode == filemode.Dir:
			if objs, err = appendTreeObjects(st, e.Hash, seen, objs); err != nil {
				return objs, err
			}
		case !seen[e.Hash]:
			seen[e.Hash] = true
			objs = append(objs, e.Hash)
		}
	}
	return objs, nil
}

// maxUpstreamErrorBytes bounds the text of an error that may carry a
// server's text of any length (go-git puts a whole 401 page into its error;
// an MCP server's JSON-RPC error message), which is shown to every caller.
const maxUpstreamErrorBytes = 1024

// wrapErr makes a sync error fit to show (scrub) and names the repository
// and ref (the URL without user part).
func (g *GitRepo) wrapErr(err error, creds gitCredentials) error {
	err = g.scrub(err, creds)
	if errors.Is(err, transport.ErrAuthenticationRequired) && creds.method == nil && g.secretName == "" {
		err = fmt.Errorf("%w (set spec.gitRepo.auth)", err)
	}
	return fmt.Errorf("git %s (ref %q): %w", g.ep.display, g.refLabel(), err)
}

// scrub makes an error fit to show: one line, every credential of the URL
// and of creds masked in every encoding a server may echo it in
// (redact.Scrubber), and the text cut at maxUpstreamErrorBytes.
func (g *GitRepo) scrub(err error, creds gitCredentials) error {
	sc := creds.scrub
	if sc == nil {
		var sent redact.Credentials
		sent.AddURL(g.ep.url)
		sc = sent.Scrubber()
	}
	return sc.ErrorExcerpt(oneLineError{err}, maxUpstreamErrorBytes)
}

// oneLineError is err with its message on one line (textutil.OneLine): go-git puts a
// server's text, line breaks and terminal escapes included, into errors.
type oneLineError struct{ err error }

func (e oneLineError) Error() string { return textutil.OneLine(e.err.Error()) }
func (e oneLineError) Unwrap() error { return e.err }

// pinRef is the per-ref reference holding the last commit synced for this spec.
func (g *GitRepo) pinRef() plumbing.ReferenceName {
	sum := digest.SHA256("ref:" + g.ref)
	return plumbing.ReferenceName(gitPinPrefix + hex.EncodeToString(sum[:8]))
}

// pinned returns the commit recorded for this ref by an earlier sync if the
// clone still holds it, else the zero hash.
func (g *GitRepo) pinned(st storer.Storer) plumbing.Hash {
	ref, err := st.Reference(g.pinRef())
	if err != nil || ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash
	}
	c, err := peelToCommit(st, ref.Hash())
	if err != nil {
		return plumbing.ZeroHash
	}
	return c
}

// openCache opens the bare clone, creating it when missing. A folder that is
// not a readable repository (an interrupted first clone) is started afresh:
// it only ever holds fetched data.
func (g *GitRepo) openCache() (*git.Repository, error) {
	if err := os.MkdirAll(filepath.Dir(g.dir), 0o700); err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	repo, err := git.PlainOpen(g.dir)
	if err == nil {
		if _, err = repo.Config(); err == nil {
			return repo, nil
		}
	}
	if _, statErr := os.Stat(g.dir); statErr == nil {
		g.log.Warn("git cache folder is not a usable repository; recreating it", "dir", g.dir, "error", err)
		if err := os.RemoveAll(g.dir); err != nil {
			return nil, fmt.Errorf("cache folder: %w", err)
		}
	}
	repo, err = git.PlainInit(g.dir, true)
	if err != nil {
		return nil, fmt.Errorf("cache folder: %w", err)
	}
	return repo, nil
}

// openStorage opens the clone read-only for Load. Each call has its own
// storage object: go-git storages are not safe for concurrent use, and a
// concurrent fetch only adds files (a pack appears once its index is written).
func (g *GitRepo) openStorage() *filesystem.Storage {
	return filesystem.NewStorage(osfs.New(g.dir), cache.NewObjectLRUDefault())
}

// gitSync is the state of one sync.
type gitSync struct {
	g     *GitRepo
	ctx   context.Context
	st    storage.Storer
	creds gitCredentials
	adv   *packp.AdvRefs
	refs  map[plumbing.ReferenceName]*plumbing.Reference
}

func (s *gitSync) run() (plumbing.Hash, error) {
	ref := s.g.ref
	// A full hash names immutable content: when the clone has it, there is
	// nothing to ask the remote.
	if len(ref) == 40 && isHexPrefix(ref) {
		if c, err := peelToCommit(s.st, plumbing.NewHash(strings.ToLower(ref))); err == nil {
			return c, nil
		}
	}
	if err := s.list(); err != nil {
		return plumbing.ZeroHash, err
	}
	name, hash, err := s.resolveName(ref)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if name != "" {
		return s.fetchNamed(name, hash)
	}
	// An abbreviated hash the clone already resolves needs no fetch. It is
	// looked up only after the remote's names, so a branch that happens to
	// look like hex still wins.
	prefix := strings.ToLower(ref)
	if len(prefix) < 40 {
		if c, ok, err := s.localPrefix(prefix); err != nil {
			return plumbing.ZeroHash, err
		} else if ok {
			return c, nil
		}
	}
	return s.fetchCommit(prefix)
}

// list reads the remote's references.
func (s *gitSync) list() error {
	ep, err := transport.NewEndpoint(s.g.ep.url)
	if err != nil {
		return err
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return err
	}
	sess, err := cl.NewUploadPackSession(ep, s.creds.method)
	if err != nil {
		return err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(s.ctx)
	if err != nil {
		if errors.Is(err, transport.ErrEmptyRemoteRepository) {
			return errors.New("remote repository is empty")
		}
		return fmt.Errorf("listing references: %w", err)
	}
	all, err := adv.AllReferences()
	if err != nil {
		return fmt.Errorf("listing references: %w", err)
	}
	s.adv = adv
	s.refs = map[plumbing.ReferenceName]*plumbing.Reference(all)
	return nil
}

// resolveName finds the remote reference for ref: the default branch for "",
// then a full reference name, a branch, a tag (branch first, like git clone
// --branch). It returns name "" when ref can only be a commit hash.
func (s *gitSync) resolveName(ref string) (plumbing.ReferenceName, plumbing.Hash, error) {
	if ref == "" || ref == "HEAD" {
		head, ok := s.refs[plumbing.HEAD]
		if !ok {
			return "", plumbing.ZeroHash, errors.New("remote has no default branch (HEAD); set spec.gitRepo.ref")
		}
		if head.Type() == plumbing.SymbolicReference {
			target, ok := s.refs[head.Target()]
			if !ok || target.Type() != plumbing.HashReference {
				return "", plumbing.ZeroHash, fmt.Errorf("remote HEAD points to %s, which does not exist", head.Target())
			}
			return target.Name(), target.Hash(), nil
		}
		return plumbing.HEAD, head.Hash(), nil
	}
	candidates := []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
	if strings.HasPrefix(ref, "refs/") {
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	}
	for _, name := range candidates {
		if r, ok := s.refs[name]; ok && r.Type() == plumbing.HashReference {
			return name, r.Hash(), nil
		}
	}
	if isHexPrefix(ref) {
		return "", plumbing.ZeroHash, nil
	}
	return "", plumbing.ZeroHash, fmt.Errorf("no branch or tag %q on the remote", ref)
}

// fetchNamed fetches one branch or tag, shallow when the server allows it.
func (s *gitSync) fetchNamed(name plumbing.ReferenceName, hash plumbing.Hash) (plumbing.Hash, error) {
	local := name
	if name == plumbing.HEAD {
		local = gitRefHEAD
	}
	if _, err := peelToCommit(s.st, hash); err != nil {
		spec := config.RefSpec("+" + name.String() + ":" + local.String())
		if err := s.fetch([]config.RefSpec{spec}, true); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	// Set the local ref even when nothing was fetched: the remote may have
	// moved back to a commit the clone already holds (a force push).
	if err := s.st.SetReference(plumbing.NewHashReference(local, hash)); err != nil {
		return plumbing.ZeroHash, err
	}
	c, err := peelToCommit(s.st, hash)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// fetchCommit fetches the commit a (possibly abbreviated) hash names. A tip
// of the remote is fetched by name; a full hash is fetched alone when the
// server allows it; otherwise, or when that fails, all branches and tags are
// fetched with full history and the commit is looked up.
func (s *gitSync) fetchCommit(prefix string) (plumbing.Hash, error) {
	if name, hash, ok := s.advertisedTip(prefix); ok {
		return s.fetchNamed(name, hash)
	}
	caps := s.adv.Capabilities
	if len(prefix) == 40 && caps.Supports(capability.Shallow) &&
		(caps.Supports(capability.AllowReachableSHA1InWant) || caps.Supports(capability.AllowTipSHA1InWant)) {
		spec := config.RefSpec(prefix + ":" + gitRefCommit.String())
		err := s.fetch([]config.RefSpec{spec}, true)
		if err == nil {
			if c, perr := peelToCommit(s.st, plumbing.NewHash(prefix)); perr == nil {
				return c, nil
			}
		} else if s.ctx.Err() != nil {
			return plumbing.ZeroHash, err
		} else {
			s.g.log.Info("fetching a commit by hash failed; fetching all branches and tags", "error", s.g.scrub(err, s.creds))
		}
	}
	if err := s.fetchAll(); err != nil {
		return plumbing.ZeroHash, err
	}
	if len(prefix) == 40 {
		c, err := peelToCommit(s.st, plumbing.NewHash(prefix))
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("commit %s is not on any branch or tag of the remote", prefix)
		}
		return c, nil
	}
	c, ok, err := s.localPrefix(prefix)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !ok {
		return plumbing.ZeroHash, fmt.Errorf("no branch, tag or commit %q on the remote", prefix)
	}
	return c, nil
}

// advertisedTip finds a remote branch or tag whose tip is the commit prefix
// names (the usual case for a hash copied from a branch), preferring branches.
func (s *gitSync) advertisedTip(prefix string) (plumbing.ReferenceName, plumbing.Hash, bool) {
	var names []plumbing.ReferenceName
	for name, r := range s.refs {
		if r.Type() == plumbing.HashReference && (name.IsBranch() || name.IsTag()) {
			names = append(names, name)
		}
	}
	slices.Sort(names) // refs/heads/ sorts before refs/tags/
	for _, name := range names {
		h := s.refs[name].Hash()
		// A tag's own hash is not a commit hash; its peeled target is.
		tip := h
		if p, ok := s.adv.Peeled[name.String()]; ok {
			tip = p
		}
		if strings.HasPrefix(tip.String(), prefix) {
			return name, h, true
		}
	}
	return "", plumbing.ZeroHash, false
}

// fetchAll fetches every branch and tag with full history. A shallow clone
// must not let the server assume it holds the history behind its commits:
// it is deepened (git fetch --unshallow), or, when the server cannot do
// that, its refs are hidden so that nothing is offered as already held.
func (s *gitSync) fetchAll() error {
	shallows, err := s.st.Shallow()
	if err != nil {
		return err
	}
	depth := 0
	if len(shallows) > 0 {
		if s.adv.Capabilities.Supports(capability.Shallow) {
			depth = math.MaxInt32
		} else {
			restore, err := s.hideRefs()
			if err != nil {
				return err
			}
			defer restore()
		}
	}
	if err := s.fetchDepth(gitFullFetchSpecs, depth); err != nil {
		return err
	}
	if len(shallows) > 0 {
		return pruneShallow(s.st)
	}
	return nil
}

// hideRefs removes every hash ref (go-git offers them all as "have") and
// returns a function that puts back those the fetch did not set again.
func (s *gitSync) hideRefs() (restore func(), err error) {
	iter, err := s.st.IterReferences()
	if err != nil {
		return nil, err
	}
	var hidden []*plumbing.Reference
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			hidden = append(hidden, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	restore = func() {
		for _, r := range hidden {
			if _, err := s.st.Reference(r.Name()); errors.Is(err, plumbing.ErrReferenceNotFound) {
				if err := s.st.SetReference(r); err != nil {
					s.g.log.Warn("restoring a git ref failed", "ref", r.Name().String(), "error", err)
				}
			}
		}
	}
	for _, r := range hidden {
		if err := s.st.RemoveReference(r.Name()); err != nil {
			restore()
			return nil, err
		}
	}
	return restore, nil
}

// fetch fetches specs with depth 1 when shallow is asked for and the server
// supports it, else with full history. A refused shallow fetch is retried in full.
func (s *gitSync) fetch(specs []config.RefSpec, shallow bool) error {
	if !shallow || !s.adv.Capabilities.Supports(capability.Shallow) {
		return s.fetchDepth(specs, 0)
	}
	err := s.fetchDepth(specs, 1)
	if err == nil || s.ctx.Err() != nil || isGitAuthError(err) {
		return err
	}
	s.g.log.Info("shallow fetch failed; fetching full history", "error", s.g.scrub(err, s.creds))
	return s.fetchDepth(specs, 0)
}

func (s *gitSync) fetchDepth(specs []config.RefSpec, depth int) error {
	remote := git.NewRemote(s.st, &config.RemoteConfig{Name: gitRemoteName, URLs: []string{s.g.ep.url}})
	err := remote.FetchContext(s.ctx, &git.FetchOptions{
		RemoteName: gitRemoteName,
		RefSpecs:   specs,
		Depth:      depth,
		Auth:       s.creds.method,
		Tags:       git.NoTags,
		Force:      true,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	return nil
}

// localPrefix finds the one commit in the clone whose hash starts with prefix.
func (s *gitSync) localPrefix(prefix string) (plumbing.Hash, bool, error) {
	fs, ok := s.st.(*filesystem.Storage)
	if !ok {
		return plumbing.ZeroHash, false, nil
	}
	even := prefix[:len(prefix)&^1]
	raw, err := hex.DecodeString(even)
	if err != nil {
		return plumbing.ZeroHash, false, nil
	}
	hashes, err := fs.HashesWithPrefix(raw)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	found := map[plumbing.Hash]bool{}
	for _, h := range hashes {
		if !strings.HasPrefix(h.String(), prefix) {
			continue
		}
		if c, err := peelToCommit(s.st, h); err == nil {
			found[c] = true
		}
	}
	switch len(found) {
	case 0:
		return plumbing.ZeroHash, false, nil
	case 1:
		for h := range found {
			return h, true, nil
		}
	}
	return plumbing.ZeroHash, false, fmt.Errorf("abbreviated commit %q is ambiguous; use more digits", prefix)
}

// pruneShallow drops shallow markers of commits whose parents the clone now
// has (go-git ignores the server's "unshallow" lines).
func pruneShallow(st storage.Storer) error {
	current, err := st.Shallow()
	if err != nil {
		return err
	}
	var keep []plumbing.Hash
	for _, h := range current {
		c, err := object.GetCommit(st, h)
		if err != nil {
			keep = append(keep, h)
			continue
		}
		complete := true
		for _, p := range c.ParentHashes {
			if _, err := st.EncodedObject(plumbing.CommitObject, p); err != nil {
				complete = false
				break
			}
		}
		if !complete {
			keep = append(keep, h)
		}
	}
	if len(keep) == len(current) {
		return nil
	}
	return st.SetShallow(keep)
}

func isGitAuthError(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) ||
		errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound)
}

// peelToCommit follows tags to the commit they name and checks that the
// commit's tree is present.
func peelToCommit(st storer.EncodedObjectStorer, h plumbing.Hash) (plumbing.Hash, error) {
	for range gitMaxTagDepth {
		obj, err := st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			c, err := object.DecodeCommit(st, obj)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if _, err := st.EncodedObject(plumbing.TreeObject, c.TreeHash); err != nil {
				return plumbing.ZeroHash, fmt.Errorf("tree of commit %s: %w", h, err)
			}
			return h, nil
		case plumbing.TagObject:
			t, err := object.DecodeTag(st, obj)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			h = t.Target
		default:
			return plumbing.ZeroHash, fmt.Errorf("%s is a %s, not a commit", h, obj.Type())
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("tag chain longer than %d", gitMaxTagDepth)
}

// Load returns the chunks of the synced commit, syncing first if no sync was
// tried yet. Files are read from the commit's tree; ModTime is the commit's
// committer time. If no sync ever succeeded, Load returns the sync error.
func (g *GitRepo) Load(ctx context.Context) ([]Chunk, error) {
	if err := g.ensureSyncTried(ctx); err != nil {
		return nil, err
	}
	g.mu.RLock()
	commit, loaded, lastErr := g.commit, g.loaded, g.lastErr
	g.mu.RUnlock()
	if commit.IsZero() {
		if lastErr != nil {
			return nil, lastErr
		}
		return nil, fmt.Errorf("git %s (ref %q): not synced", g.ep.display, g.refLabel())
	}
	if loaded != nil && loaded.commit == commit {
		return slices.Clone(loaded.chunks), nil
	}
	files := &gitDirFor(g.dir).files
	files.RLock()
	chunks, skipped, err := g.readCommit(ctx, commit)
	files.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("git %s commit %s: %w", g.ep.display, commit, err)
	}
	g.mu.Lock()
	g.loaded = &gitLoaded{commit: commit, chunks: chunks, skipped: skipped}
	g.mu.Unlock()
	return slices.Clone(chunks), nil
}

// ensureSyncTried performs the first sync (lazy clone). Its error is not
// returned: Load reports it only when there is no commit to serve.
func (g *GitRepo) ensureSyncTried(ctx context.Context) error {
	g.mu.RLock()
	tried := g.attempted || !g.commit.IsZero()
	g.mu.RUnlock()
	if tried {
		return nil
	}
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	g.mu.RLock()
	tried = g.attempted || !g.commit.IsZero()
	g.mu.RUnlock()
	if tried {
		return nil
	}
	if _, err := g.syncLocked(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// readCommit chunks every matching file of the commit's tree, sorted by path
// then index.
func (g *GitRepo) readCommit(ctx context.Context, hash plumbing.Hash) ([]Chunk, Skips, error) {
	st := g.openStorage()
	commit, err := object.GetCommit(st, hash)
	if err != nil {
		return nil, Skips{}, err
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, Skips{}, err
	}
	modTime := commit.Committer.When
	var chunks []Chunk
	var skips Skips
	// The walker yields names without reading blobs, so only matching files
	// are read, however large the rest of the repository is.
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		if err := ctx.Err(); err != nil {
			return nil, Skips{}, err
		}
		rel, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, Skips{}, err
		}
		if entry.Mode == filemode.Dir || !MatchPath(rel, g.include, g.exclude) {
			continue
		}
		switch entry.Mode {
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
		case filemode.Symlink:
			// The blob is the link target, not content.
			skips.add(g.log, rel, SkipSymlink)
			continue
		case filemode.Submodule:
			skips.add(g.log, rel, SkipSubmodule)
			continue
		default:
			skips.add(g.log, rel, SkipNotRegular, "mode", entry.Mode.String())
			continue
		}
		blob, err := object.GetBlob(st, entry.Hash)
		if err != nil {
			return nil, Skips{}, fmt.Errorf("%s: %w", rel, err)
		}
		if blob.Size > g.maxFileSize {
			skips.add(g.log, rel, SkipTooLarge, "size", blob.Size, "maxFileSize", g.maxFileSize)
			continue
		}
		data, err := readBlob(blob, g.maxFileSize)
		if err != nil {
			return nil, Skips{}, fmt.Errorf("%s: %w", rel, err)
		}
		if !IsText(data) {
			skips.add(g.log, rel, SkipNotText)
			continue
		}
		chunks = append(chunks, SplitDocument(Document{
			Source:  g.name,
			Path:    rel,
			Title:   path.Base(rel),
			Content: string(data),
			ModTime: modTime,
			Commit:  hash.String(),
		}, g.chunking)...)
	}
	// Tree order is git's (a folder sorts as "name/"), not plain path order.
	slices.SortStableFunc(chunks, func(a, b Chunk) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Index, b.Index))
	})
	return chunks, skips, nil
}

func readBlob(b *object.Blob, limit int64) ([]byte, error) {
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, limit))
}

// Skipped describes the files left out of the commit last read.
func (g *GitRepo) Skipped() Skips {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.loaded == nil {
		return Skips{}
	}
	return g.loaded.skipped
}

// gitDir coordinates the GitRepo instances of one process that share a clone.
type gitDir struct {
	// sync (capacity 1) serialises syncs; a channel so waiting honours a context.
	sync chan struct{}
	// files is held shared while Load reads the clone and exclusively while
	// compaction swaps the folder. Fetches only add files and need neither.
	files sync.RWMutex
}

var gitDirs sync.Map // folder -> *gitDir

func gitDirFor(dir string) *gitDir {
	if v, ok := gitDirs.Load(dir); ok {
		return v.(*gitDir)
	}
	v, _ := gitDirs.LoadOrStore(dir, &gitDir{sync: make(chan struct{}, 1)})
	return v.(*gitDir)
}

// gitDirLock takes the folder's sync lock, giving up when ctx ends.
func gitDirLock(ctx context.Context, dir string) (func(), error) {
	ch := gitDirFor(dir).sync
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for another sync of %s: %w", dir, ctx.Err())
	}
}

// localRepoLoader opens a local repository for the in-process file
// transport: a bare repository or a working tree's .git (including a .git
// file that points elsewhere). Parent folders are not searched.
type localRepoLoader struct{}

func (localRepoLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	repo, err := git.PlainOpenWithOptions(ep.Path, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) || errors.Is(err, os.ErrNotExist) {
			return nil, transport.ErrRepositoryNotFound
		}
		return nil, err
	}
	return repo.Storer, nil
}
