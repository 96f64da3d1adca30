package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// Manager makes and removes trees. Its git commands are serialized per
// repository: git takes lock files (config.lock, the ref locks, the worktree
// admin dir) that make a second "git worktree add" in the same repository
// fail while the first runs, and two sessions starting at once is ordinary.
// A Manager is safe for concurrent use.
type Manager struct {
	root string
	log  *slog.Logger

	mu    sync.Mutex
	locks map[string]*repoLock // by absolute common git dir
	// The claims (pending.go): those of this process not yet settled or
	// given up, by file; and who records the trees m makes.
	pending  map[string]*os.File
	owner    string
	recorded func(path string) bool
}

type repoLock struct {
	ch    chan struct{} // a one-slot semaphore, so waiting can be cancelled
	users int           // holders and waiters; the entry goes at zero
}

// NewManager returns a Manager that puts trees under root, as
// <root>/<repo-name>/<name>, or beside their repository, as
// <repo>.worktrees/<name>, when root is "". A relative root is taken from
// the current directory now. A nil log discards.
func NewManager(root string, log *slog.Logger) *Manager {
	if root != "" {
		if abs, err := filepath.Abs(root); err == nil {
			root = abs
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{root: root, log: log, locks: map[string]*repoLock{}, pending: map[string]*os.File{}}
}

// Spec describes the tree to make for a session. Its zero options are the
// config keys' defaults.
type Spec struct {
	// Dir is the folder the session started in, anywhere inside a
	// repository's work tree (a linked worktree's too).
	Dir string
	// Name is what the tree is named after, normally the session id; it is
	// cleaned up by TreeName.
	Name string
	// Branch is the base: the branch the tree starts from, or the branch it
	// checks out when CheckoutBranch is set. "" is the repository's
	// DefaultBranch.
	Branch string
	// BranchPrefix goes before the tree's name to make its new branch
	// (worktreeBranchPrefix), e.g. "agents/".
	BranchPrefix string
	// CheckoutBranch checks Branch itself out in the tree instead of making
	// a new branch from it (worktreeCreateNewBranch: false). git refuses a
	// branch that is checked out in another work tree, and says where.
	CheckoutBranch bool
	// Track makes the new branch track an upstream (worktreeBranchTrack):
	// the base's own upstream when the base is a local branch that has one,
	// else the base itself. Otherwise the new branch tracks nothing.
	Track bool
	// IncludeFiles and SymlinkFolders are .gitignore-syntax patterns for
	// git-ignored paths of Dir's checkout to copy into the tree, and
	// git-ignored folders to link into it (worktreeIncludeFiles,
	// worktreeSymlinkFolders).
	IncludeFiles, SymlinkFolders []string
	// Log receives what the best-effort steps skipped or failed; nil is the
	// Manager's.
	Log *slog.Logger
}

// Tree is a tree a Manager made: what the host stores with the session to
// remove the tree later.
type Tree struct {
	Path   string `json:"path"`             // the tree's folder
	Repo   string `json:"repo"`             // top of the checkout it was made from
	Branch string `json:"branch,omitempty"` // checked out in the tree; "" if detached
	Base   string `json:"base"`             // the commit the tree was cut from
	// Links are the folders linked into the tree (SymlinkFolders), '/'-
	// separated and relative to it: not the session's work.
	Links []string `json:"links,omitempty"`
}

// maxSuffix bounds the search for a free name; past it something other than
// ordinary collisions is going on.
const maxSuffix = 1000

// Create makes a tree for s with "git worktree add", then links the
// SymlinkFolders and copies the IncludeFiles into it. It fails, with git's
// reason, when git cannot make the tree; the linking and copying never fail
// it. When the name is taken (its folder exists, or its branch does) a
// numeric suffix is added: "<name>-2", "<name>-3", ...
//
// The tree is claimed until the caller settles it (Settle) once its record
// holds it; a crash before then leaves the claim, and a later sweep takes
// the tree away (pending.go). Create sweeps the location itself first, so
// a name a crash took is free again.
func (m *Manager) Create(ctx context.Context, s Spec) (*Tree, error) {
	log := s.Log
	if log == nil {
		log = m.log
	}
	switch {
	case s.Dir == "":
		return nil, errors.New("worktree: no folder to make a tree from")
	case s.Name == "":
		return nil, errors.New("worktree: no name for the tree")
	case strings.HasPrefix(s.BranchPrefix, "-"):
		return nil, fmt.Errorf("%w: prefix %q", ErrBadBranch, s.BranchPrefix)
	}
	src, err := resolveSource(ctx, s.Dir)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lock(ctx, src.common)
	if err != nil {
		return nil, err
	}
	t, err := m.add(ctx, log, src, s)
	unlock()
	if err != nil {
		return nil, err
	}
	// Links and copies touch only the new tree, so other sessions of the
	// repository need not wait for them.
	t.Links = populate(ctx, log, src.top, t.Path, s.SymlinkFolders, s.IncludeFiles)
	return t, nil
}

// source is where a tree is made from.
type source struct {
	top    string // top of the checkout holding Spec.Dir
	common string // the repository's common git dir, absolute
}

func resolveSource(ctx context.Context, dir string) (source, error) {
	if fi, err := os.Stat(dir); err != nil {
		return source{}, err
	} else if !fi.IsDir() {
		return source{}, fmt.Errorf("worktree: %s is not a folder", dir)
	}
	out, err := runGit(ctx, dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		return source{}, err
	}
	l := lines(out, '\n')
	if len(l) != 2 {
		return source{}, fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	return source{top: l[0], common: l[1]}, nil
}

// add runs the git half of Create; the caller holds the repository's lock.
func (m *Manager) add(ctx context.Context, log *slog.Logger, src source, s Spec) (*Tree, error) {
	wts, err := Worktrees(ctx, src.top)
	if err != nil {
		return nil, err
	}
	loc := m.location(placeBeside(src, wts))
	// What a crashed Create left goes before a name is chosen, so the
	// session gets its own name rather than the next.
	swept, err := m.sweepLocked(ctx, log, src, loc)
	if err != nil {
		log.Warn("worktree: could not take away all an unfinished worktree creation left", "location", loc, "err", err)
	}
	if swept > 0 {
		if wts, err = Worktrees(ctx, src.top); err != nil {
			return nil, err
		}
	}
	registered := map[string]bool{}
	for _, w := range wts {
		registered[filepath.Clean(w.Path)] = true
	}

	base := s.Branch
	if base == "" {
		if base, err = DefaultBranch(src.top); err != nil {
			log.Warn("worktree: no default branch; starting from HEAD", "repo", src.top, "err", err)
			base = ""
		}
	}
	if base != "" {
		if err := checkBranch(ctx, src.top, base); err != nil {
			return nil, err
		}
	} else if s.CheckoutBranch {
		return nil, errors.New("worktree: no branch to check out: HEAD is detached and none was chosen")
	}

	start := base
	if start == "" {
		start = "HEAD"
	}
	// The commit the new branch will start at, for a sweep to tell a
	// branch nobody used from one with commits. start is a checked branch
	// name or HEAD, no option. A start git cannot resolve fails git
	// worktree add below.
	var startCommit string
	if !s.CheckoutBranch {
		if out, err := runGit(ctx, src.top, "rev-parse", "--verify", "--quiet", start+"^{commit}"); err == nil {
			startCommit = strings.TrimSpace(out)
		}
	}

	name := TreeName(s.Name)
	if err := os.MkdirAll(loc, 0o755); err != nil {
		return nil, err
	}
	var path, branch string
	var c *claim
	owner, _ := m.records()
	for i := 1; path == ""; i++ {
		if i > maxSuffix {
			return nil, fmt.Errorf("worktree: no free name for %q in %s", name, loc)
		}
		cand := name
		if i > 1 {
			cand = fmt.Sprintf("%s-%d", name, i)
		}
		p := filepath.Join(loc, cand)
		if !within(loc, p) {
			return nil, fmt.Errorf("worktree: %q leaves %s", cand, loc) // TreeName rules this out
		}
		if registered[p] {
			continue
		}
		b := ""
		if !s.CheckoutBranch {
			b = s.BranchPrefix + cand
			if err := checkBranch(ctx, src.top, b); err != nil {
				return nil, err
			}
			if exists, err := branchExists(ctx, src.top, b); err != nil {
				return nil, err
			} else if exists {
				continue
			}
		}
		// The claim is the reservation: staking it fails if anyone, in
		// this process or another, has claimed the name.
		cl := &claim{Repo: src.top, Common: src.common, Path: p, Branch: b, Base: startCommit,
			Owner: owner, PID: os.Getpid()}
		if ok, err := m.stake(cl); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		// Mkdir keeps out a folder made by other means. git fills an
		// empty folder.
		if err := os.Mkdir(p, 0o755); errors.Is(err, fs.ErrExist) {
			m.dropClaim(claimFile(p))
			continue
		} else if err != nil {
			m.dropClaim(claimFile(p))
			return nil, err
		}
		path, branch, c = p, b, cl
	}

	args := []string{"worktree", "add"}
	inherit := false
	if !s.CheckoutBranch {
		args = append(args, "-b", branch)
		switch {
		case !s.Track:
			args = append(args, "--no-track")
		case base == "":
			log.Warn("worktree: HEAD is detached; the new branch tracks nothing", "branch", branch)
			args = append(args, "--no-track")
		case hasUpstream(src.top, base):
			// git worktree add has no --track=inherit; the upstream is
			// copied from the base once the branch exists.
			inherit = true
			args = append(args, "--no-track")
		default:
			args = append(args, "--track")
		}
	}
	args = append(args, "--", path, start)
	// git, and what it starts, hold the claim too: it is worked on until
	// the last of them ends, with or without this process.
	if _, err := runGitHolding(ctx, src.top, m.held(claimFile(path)), args...); err != nil {
		if exitCode(err) < 0 {
			// git was killed part way (the send was cancelled, or
			// something else killed it): what it made is as a crash
			// leaves it.
			m.discard(ctx, log, src, c)
			return nil, err
		}
		// git refused, and takes away what it made; this takes away the
		// reservation.
		_ = os.Remove(path)
		m.dropClaim(claimFile(path))
		m.dropLocation(loc)
		return nil, err
	}
	if inherit {
		if _, err := runGit(ctx, src.top, "branch", "--set-upstream-to="+base+"@{upstream}", "--", branch); err != nil {
			log.Warn("worktree: could not set the new branch's upstream", "branch", branch, "base", base, "err", err)
		}
	}

	out, err := runGit(ctx, path, "rev-parse", "HEAD", "--symbolic-full-name", "HEAD")
	l := lines(out, '\n')
	if err == nil && len(l) != 2 {
		err = fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	if err != nil {
		// A tree Create does not return is nobody's.
		m.discard(ctx, log, src, c)
		return nil, err
	}
	t := &Tree{Path: path, Repo: src.top, Base: l[0]}
	t.Branch, _ = strings.CutPrefix(l[1], "refs/heads/")
	if t.Branch == "HEAD" {
		t.Branch = ""
	}
	return t, nil
}

// placeBeside returns the checkout that trees are placed beside: the
// repository's main work tree, so that a session started inside a tree puts
// its own tree next to its sibling rather than inside a
// "<tree>.worktrees" of its own; the source checkout when the repository
// is bare.
func placeBeside(src source, wts []Worktree) string {
	if len(wts) > 0 && wts[0].Main && !wts[0].Bare {
		return wts[0].Path
	}
	return src.top
}

// location is the folder trees of the repository whose main checkout is
// main go in.
func (m *Manager) location(main string) string {
	if m.root == "" {
		return main + ".worktrees"
	}
	name := filepath.Base(main)
	if name == "." || name == string(filepath.Separator) {
		name = "repo"
	}
	return filepath.Join(m.root, name)
}

// Location returns the folder the trees of dir's repository are made in.
func (m *Manager) Location(ctx context.Context, dir string) (string, error) {
	src, err := resolveSource(ctx, dir)
	if err != nil {
		return "", err
	}
	wts, err := Worktrees(ctx, src.top)
	if err != nil {
		return "", err
	}
	return m.location(placeBeside(src, wts)), nil
}

func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

func branchExists(ctx context.Context, dir, branch string) (bool, error) {
	_, err := runGit(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err == nil {
		return true, nil
	}
	if exitCode(err) == 1 {
		return false, nil
	}
	return false, err
}

// hasUpstream reports whether base is a local branch with an upstream.
func hasUpstream(dir, base string) bool {
	r, err := openRepo(dir)
	if err != nil {
		return false
	}
	if _, err := r.Reference(plumbing.NewBranchReferenceName(base), false); err != nil {
		return false
	}
	cfg, err := r.Config()
	if err != nil {
		return false
	}
	b, ok := cfg.Branches[base]
	return ok && b.Remote != "" && b.Merge != ""
}

// lock takes the lock of the repository whose common git dir is key.
func (m *Manager) lock(ctx context.Context, key string) (unlock func(), err error) {
	if real, err := filepath.EvalSymlinks(key); err == nil {
		key = real
	}
	key = filepath.Clean(key)
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &repoLock{ch: make(chan struct{}, 1)}
		m.locks[key] = l
	}
	l.users++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
