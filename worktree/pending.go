package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Claims: what keeps a crash from leaving a tree nobody knows of.
//
// Making a tree takes steps no crash can be kept out of: Create reserves
// the folder, git makes the branch, registers the tree (locked
// "initializing") and checks it out, and only then does the caller record
// the tree. A process killed anywhere in between would leave a branch, a
// registered tree or an empty folder behind for good: the caller, started
// again, has no record of them and makes another tree under the next name.
//
// So Create stakes a claim before it makes anything: a small file beside
// the tree's folder, ".<name>.ahpd-pending" in the location, saying which
// repository, folder and branch it is about to make, from which commit,
// for which keeper of records, by which process. Staking it is what
// reserves the name: it is linked into place, which fails when a claim is
// there, so no two processes claim one name and no claim is seen half
// written. The claim's file is locked (flock) from before it is visible,
// and held open by Create, by the git it runs and by everything that git
// starts: the kernel lets the lock go only when every one of them has
// ended, however it ended. Nobody works on a claim whose lock is free. The
// caller settles the claim (Settle) once its record holds the tree; a
// failure Create sees gives it up.
//
// A sweep (Sweep, and Create before it picks a name) takes up every claim
// of the repository whose lock it can take, under the repository's lock.
// A claim whose tree the keeper's records hold (SetRecords) is only
// settled: the crash came between the record and the settling. Any other
// is undone: the registered tree is removed (forced twice, for git's
// "initializing" lock), the reserved folder goes if it is empty, the
// branch is deleted if it still points at the commit it was made from, and
// the claim goes last, so a sweep that is itself cut short is taken up
// again by the next. A claim of another keeper is left for it: only its
// records say whether the tree is recorded.
//
// The crash windows this covers, and what each leaves for the sweep:
//   - writing the claim: a temporary file, taken away once the process
//     named in its name is gone;
//   - between the claim and git: the claim, and perhaps an empty folder;
//   - during "git worktree add" (its git killed too, or going on alone):
//     the branch and its ref lock, a tree registered and locked
//     "initializing", a partial checkout, or git's own clean-up half done;
//   - after git, while Create links and copies, or before the caller's
//     record: a whole tree;
//   - after the record, before Settle: a recorded tree, which is kept;
//   - a Create cancelled with git part way, in a process that goes on:
//     Create undoes it itself (discard), or leaves it to the next sweep
//     while what git started still runs;
//   - a sweep cut short: the claim goes last, and the next sweep finishes.
//
// Where the file system has no locks, a claim is worked on while the
// process that wrote it exists; a later process given its pid keeps the
// claim, and its tree, until it ends.

// claimSuffix ends the name of a claim, ".<tree>.ahpd-pending". A tree's
// name never starts with '.' (TreeName), so no claim is a tree's folder.
const claimSuffix = ".ahpd-pending"

// claimTemp starts the name of the temporary file a claim is written to
// before it is linked into place: ".ahpd-pending-<pid>-<random>.tmp".
const claimTemp = ".ahpd-pending-"

// sweepTimeout bounds undoing what a cancelled Create made, which must go
// on after its context has ended.
const sweepTimeout = time.Minute

// errNoLocks says the file system cannot lock files.
var errNoLocks = errors.New("no file locks here")

// claim is what Create writes before it makes anything: enough to undo
// it, and to tell whose it is.
type claim struct {
	Repo   string `json:"repo"`             // top of the checkout the tree is made from
	Common string `json:"common"`           // the repository's common git dir
	Path   string `json:"path"`             // the tree's folder
	Branch string `json:"branch,omitempty"` // the branch Create makes; "" when it checks one out
	Base   string `json:"base,omitempty"`   // the commit the new branch starts at
	Owner  string `json:"owner,omitempty"`  // the keeper of records (SetRecords)
	PID    int    `json:"pid"`              // the process that wrote it
}

// claimFile returns the name of the claim of the tree at path.
func claimFile(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+claimSuffix)
}

// SetRecords says who records the trees m makes, for the sweeps to tell
// a tree that was recorded from one that was not. owner names the keeper
// of the records and stays the same across its restarts (the host's state
// directory); "" is a keeper that keeps nothing across a restart.
// recorded reports whether its records hold the tree at a path; it is
// called with a repository's lock held, so it must not make or remove
// trees. Call it before m makes trees.
func (m *Manager) SetRecords(owner string, recorded func(path string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owner, m.recorded = owner, recorded
}

func (m *Manager) records() (string, func(string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner, m.recorded
}

// Settle tells m that the caller's record holds t: its claim goes, and no
// sweep will take the tree away. A tree with no claim is left as it is.
func (m *Manager) Settle(t *Tree) {
	if t == nil || t.Path == "" {
		return
	}
	m.dropClaim(claimFile(t.Path))
}

// Sweep takes away what the Creates that never finished left in the
// location of dir's repository (see the claims above): their registered
// trees, reserved folders and branches, unless the keeper's records hold
// the tree. It returns how many claims it took up; an error says which it
// could not, and they are tried again by the next sweep.
func (m *Manager) Sweep(ctx context.Context, dir string) (int, error) {
	src, err := resolveSource(ctx, dir)
	if err != nil {
		return 0, err
	}
	wts, err := Worktrees(ctx, src.top)
	if err != nil {
		return 0, err
	}
	loc := m.location(placeBeside(src, wts))
	unlock, err := m.lock(ctx, src.common)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n, err := m.sweepLocked(ctx, m.log, src, loc)
	if n > 0 {
		m.dropLocation(loc)
	}
	return n, err
}

// stake writes c's claim, locked and held open by m, failing with
// ok=false when the name is claimed already. The caller holds the
// repository's lock.
func (m *Manager) stake(c *claim) (ok bool, err error) {
	data, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	dir, name := filepath.Dir(c.Path), claimFile(c.Path)
	pattern := claimTemp + strconv.Itoa(os.Getpid()) + "-*.tmp"
	tmp, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		// Under a shared root, removing another repository's last tree
		// takes the location away; make it again.
		if err = os.MkdirAll(dir, 0o755); err == nil {
			tmp, err = os.CreateTemp(dir, pattern)
		}
	}
	if err != nil {
		return false, fmt.Errorf("worktree: claiming %s: %w", c.Path, err)
	}
	f := tmp
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		// Locked before it is visible: nobody sees the claim free.
		if _, lerr := tryLock(tmp); lerr != nil && !errors.Is(lerr, errNoLocks) {
			err = lerr
		}
	}
	if err == nil {
		err = os.Link(tmp.Name(), name)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			// A file system without hard links (exFAT, some network
			// mounts): an exclusive create written in place. A crash
			// part way through leaves a claim nobody can read, which
			// keeps its name from use and is left for a person.
			tmp.Close()
			f, err = writeExclusive(name, data)
		}
	}
	_ = os.Remove(tmp.Name())
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err == nil {
		// The claim must be on disk before anything it speaks of is.
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(name)
		return false, fmt.Errorf("worktree: claiming %s: %w", c.Path, err)
	}
	m.mu.Lock()
	m.pending[name] = f
	m.mu.Unlock()
	return true, nil
}

// writeExclusive makes name holding data, failing if it exists, and
// returns it open and locked.
func writeExclusive(name string, data []byte) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if _, lerr := tryLock(f); lerr != nil && !errors.Is(lerr, errNoLocks) {
		err = lerr
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		_ = os.Remove(name)
		return nil, err
	}
	return f, nil
}

// held returns the open file of a claim of m's, for git to hold too.
func (m *Manager) held(name string) []*os.File {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.pending[name]; f != nil {
		return []*os.File{f}
	}
	return nil
}

// dropClaim takes the claim file name away, then lets go of it: in that
// order, so that no sweep finds it free while it is there.
func (m *Manager) dropClaim(name string) {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("worktree: could not take a claim away", "claim", name, "err", err)
	}
	m.abandon(name)
}

// abandon lets go of a claim of m's, leaving it for a sweep.
func (m *Manager) abandon(name string) {
	m.mu.Lock()
	f := m.pending[name]
	delete(m.pending, name)
	m.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// discard gives up a claim of this process whose tree Create cannot hand
// over, and takes up what it made as a sweep would, once nothing works on
// it: a git killed part way may have left children that still do, and
// then the next sweep takes it. The caller holds the repository's lock;
// ctx may have ended, as when the Create was cancelled.
func (m *Manager) discard(ctx context.Context, log *slog.Logger, src source, c *claim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sweepTimeout)
	defer cancel()
	name, loc := claimFile(c.Path), filepath.Dir(c.Path)
	m.abandon(name)
	if took, err := m.takeUp(ctx, log, src, loc, name); err != nil {
		log.Warn("worktree: could not take away an unfinished tree; the next sweep tries again", "tree", c.Path, "err", err)
	} else if took {
		m.dropLocation(loc)
	}
}

// sweepLocked takes up the claims in loc of src's repository that nobody
// works on any more. The caller holds the repository's lock.
func (m *Manager) sweepLocked(ctx context.Context, log *slog.Logger, src source, loc string) (int, error) {
	entries, err := os.ReadDir(loc)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, claimTemp) && strings.HasSuffix(name, ".tmp") {
			// A claim being written, or that was when its writer died.
			pid, _, _ := strings.Cut(strings.TrimPrefix(name, claimTemp), "-")
			if p, err := strconv.Atoi(pid); err == nil && p != os.Getpid() && !alive(p) {
				_ = os.Remove(filepath.Join(loc, name))
			}
			continue
		}
		if !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, claimSuffix) || e.IsDir() {
			continue
		}
		took, err := m.takeUp(ctx, log, src, loc, filepath.Join(loc, name))
		if err != nil {
			errs = append(errs, err)
		}
		if took {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// takeUp takes up the claim file in loc if nobody works on it: settles it
// when the keeper's records hold its tree, else undoes it. took says it
// did either. The caller holds the repository's lock.
func (m *Manager) takeUp(ctx context.Context, log *slog.Logger, src source, loc, file string) (took bool, err error) {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	defer f.Close() // lets go of the lock, once the claim is gone
	free, lerr := tryLock(f)
	if lerr != nil && !errors.Is(lerr, errNoLocks) {
		return false, fmt.Errorf("worktree: locking the claim %s: %w", file, lerr)
	}
	if lerr == nil && !free {
		return false, nil // its writer, or a git it started, still runs
	}
	// Settled, or settled and claimed again, between the open and the
	// lock: that claim is not the one locked.
	if fi, err := f.Stat(); err != nil {
		return false, err
	} else if now, err := os.Stat(file); err != nil || !os.SameFile(fi, now) {
		return false, nil
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return false, err
	}
	var c claim
	if err := json.Unmarshal(data, &c); err != nil || c.Path == "" || c.Common == "" {
		return false, fmt.Errorf("worktree: %s is no claim this ahpd can read; left as it is", file)
	}
	if !samePath(c.Common, src.common) {
		return false, nil // another repository's, under a shared root
	}
	if claimFile(c.Path) != file || !samePath(filepath.Dir(c.Path), loc) {
		return false, fmt.Errorf("worktree: the claim %s names %s, not the folder beside it; left as it is", file, c.Path)
	}
	if errors.Is(lerr, errNoLocks) && m.working(&c, file) {
		return false, nil
	}
	owner, recorded := m.records()
	switch {
	case c.Owner != "" && c.Owner != owner:
		log.Debug("worktree: left the claim of another keeper of records", "claim", file, "owner", c.Owner)
		return false, nil
	case recorded != nil && recorded(c.Path):
		log.Info("worktree: settled a recorded tree whose claim a crash left", "tree", c.Path)
		m.dropClaim(file)
		return true, nil
	}
	if err := m.undo(ctx, log, src, &c); err != nil {
		return false, fmt.Errorf("worktree: taking away the unfinished tree %s: %w", c.Path, err)
	}
	log.Info("worktree: took away what an unfinished worktree creation left", "tree", c.Path, "branch", c.Branch, "pid", c.PID)
	m.dropClaim(file)
	return true, nil
}

// working reports, where files cannot be locked, whether somebody still
// works on the claim file holds: a Create or its caller in this process,
// before it settles or gives up, or another process that still exists.
func (m *Manager) working(c *claim, file string) bool {
	if c.PID == os.Getpid() {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.pending[file] != nil
	}
	return c.PID > 0 && alive(c.PID)
}

// undo takes away what a Create made under c, in the order that leaves c
// meaningful if undo is cut short: the tree, then its folder, then the
// branch. The caller holds the repository's lock.
func (m *Manager) undo(ctx context.Context, log *slog.Logger, src source, c *claim) error {
	// Read first: the tree's .git file, when git got to write it, names
	// the tree's admin dir, which git may have begun to take away itself.
	admin := adminDir(c.Path, c.Common)
	wts, err := Worktrees(ctx, src.top)
	if err != nil {
		return err
	}
	for _, w := range wts {
		if w.Main || !samePath(w.Path, c.Path) {
			continue
		}
		if c.Branch != "" && w.Branch != "" && w.Branch != c.Branch {
			return fmt.Errorf("the tree there has branch %s checked out, not %s; left as it is", w.Branch, c.Branch)
		}
		// Twice forced: a tree git did not finish is locked
		// "initializing", and its checkout is as partial as the crash
		// left it.
		if _, err := runGit(ctx, src.top, "worktree", "remove", "--force", "--force", "--", c.Path); err != nil {
			// git cannot check a tree whose .git file it never wrote;
			// unlocked, and its folder gone, prune forgets it.
			_, _ = runGit(ctx, src.top, "worktree", "unlock", "--", c.Path)
		}
	}
	if err := os.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if admin == "" {
			// Not empty, and no tree of git's: not made by the claim's
			// writer.
			return fmt.Errorf("its folder holds files git did not put there; left as it is: %w", err)
		}
		// A checkout git was killed in the middle of, or had begun to
		// take away, and no longer registers.
		if err := os.RemoveAll(c.Path); err != nil {
			return err
		}
	}
	if admin != "" && ownsAdmin(admin, c.Path) {
		// prune leaves a locked tree, even one whose folder is gone.
		if err := os.Remove(filepath.Join(admin, "locked")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if _, err := runGit(ctx, src.top, "worktree", "prune"); err != nil {
		return err
	}
	if wts, err = Worktrees(ctx, src.top); err != nil {
		return err
	}
	for _, w := range wts {
		if !w.Main && samePath(w.Path, c.Path) {
			return errors.New("git still has a tree registered there")
		}
	}
	if c.Branch == "" {
		return nil
	}
	if err := checkBranch(ctx, src.top, c.Branch); err != nil {
		return err
	}
	// A git killed while it made or moved the branch leaves the branch's
	// lock, which refuses every later update, and making the branch again.
	// Nothing that worked on the claim runs any more, and nobody else
	// knows the branch: the lock was theirs.
	heads := filepath.Join(c.Common, "refs", "heads")
	if lock := filepath.Join(heads, filepath.FromSlash(c.Branch)+".lock"); within(heads, lock) {
		if err := os.Remove(lock); err == nil {
			log.Warn("worktree: removed the lock a killed git left on an unfinished tree's branch", "lock", lock)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	out, err := runGit(ctx, src.top, "rev-parse", "--verify", "--quiet", "refs/heads/"+c.Branch)
	if exitCode(err) == 1 {
		return nil // never made, or gone already
	} else if err != nil {
		return err
	}
	if tip := strings.TrimSpace(out); c.Base == "" || tip != c.Base {
		// Commits were made on it: somebody's work, which is not for a
		// sweep to throw away.
		log.Warn("worktree: kept the branch of an unfinished tree: it has moved since it was made",
			"branch", c.Branch, "from", c.Base, "now", tip)
		return nil
	}
	_, err = runGit(ctx, src.top, "branch", "-D", "--", c.Branch)
	return err
}

// adminDir returns the admin dir, in common's worktrees folder, that the
// .git file of the tree at path names; "" when there is no such file or it
// names anything else.
func adminDir(path, common string) string {
	data, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return ""
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return ""
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(path, dir)
	}
	trees := filepath.Join(common, "worktrees")
	if real, err := filepath.EvalSymlinks(trees); err == nil {
		trees = real
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if filepath.Dir(dir) != filepath.Clean(trees) {
		return ""
	}
	return dir
}

// ownsAdmin reports whether the admin dir admin is the tree at path's:
// its gitdir file names the tree, or git never wrote it or took it away
// already. A tree made since in its place has its own.
func ownsAdmin(admin, path string) bool {
	data, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && samePath(filepath.Dir(strings.TrimSpace(string(data))), path)
}

// dropLocation takes loc away when nothing is left in it; a location under
// the root is the repository's folder there, never the root itself.
func (m *Manager) dropLocation(loc string) {
	if strings.HasSuffix(loc, ".worktrees") || (m.root != "" && loc != m.root && within(m.root, loc)) {
		_ = os.Remove(loc)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
