package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Worktree is one work tree of a repository, as "git worktree list" reports
// it.
type Worktree struct {
	Path     string
	Head     string // the commit checked out; "" in a fresh repository
	Branch   string // the branch checked out; "" when detached
	Main     bool   // the repository's own work tree (or its git dir, if bare)
	Bare     bool
	Locked   bool
	Prunable bool // its folder is gone; "git worktree prune" would forget it
}

// Worktrees lists the work trees of dir's repository, the main one first.
func Worktrees(ctx context.Context, dir string) ([]Worktree, error) {
	out, err := runGit(ctx, dir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var res []Worktree
	var cur *Worktree
	for _, f := range strings.Split(out, "\x00") {
		if f == "" { // a record ends with an empty field
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(f, " ")
		if key == "worktree" {
			res = append(res, Worktree{Path: val, Main: len(res) == 0})
			cur = &res[len(res)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = val
		case "branch":
			cur.Branch = strings.TrimPrefix(val, "refs/heads/")
		case "bare":
			cur.Bare = true
		case "locked":
			cur.Locked = true
		case "prunable":
			cur.Prunable = true
		}
	}
	return res, nil
}

// Remove takes t off the disk with "git worktree remove" and keeps its
// branch, so whatever was committed in the tree stays in the repository.
//
// A tree holding uncommitted work (changes to tracked files, or untracked
// files that are not ignored) is kept: Remove returns kept=true and why,
// for the caller to log or show, and no error. Ignored files, such as the
// copied IncludeFiles, are not work and go with the tree; the links made for
// SymlinkFolders are taken away first (the folders they point at are not
// touched). A tree already gone is not an error.
//
// The tree is settled first (Settle): whatever Remove leaves, the caller
// chose to, and no sweep takes it for a crash's.
func (m *Manager) Remove(ctx context.Context, t *Tree) (kept bool, why string, err error) {
	if t == nil || t.Path == "" {
		return false, "", errors.New("worktree: no tree to remove")
	}
	m.Settle(t)
	if _, err := os.Lstat(t.Path); errors.Is(err, fs.ErrNotExist) {
		// Gone already; let git forget it too, if its repository is there.
		if t.Repo != "" {
			if _, err := os.Stat(t.Repo); err == nil {
				m.prune(ctx, t.Repo)
			}
		}
		return false, "", nil
	} else if err != nil {
		return false, "", err
	}
	out, err := runGit(ctx, t.Path, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir")
	if err != nil {
		return false, "", err
	}
	l := lines(out, '\n')
	if len(l) != 3 {
		return false, "", fmt.Errorf("worktree: unexpected rev-parse output %q", out)
	}
	top, gitDir, common := l[0], l[1], l[2]
	if !samePath(top, t.Path) {
		return false, "", fmt.Errorf("worktree: %s is not the top of a work tree (%s is)", t.Path, top)
	}
	if samePath(gitDir, common) {
		// Never a repository's own checkout, whatever the record says.
		return false, "", fmt.Errorf("worktree: %s is a repository's main work tree, not a linked one", t.Path)
	}

	unlock, err := m.lock(ctx, common)
	if err != nil {
		return false, "", err
	}
	defer unlock()

	out, err = runGit(ctx, t.Path, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--ignore-submodules=none")
	if err != nil {
		return false, "", err
	}
	var links, dirty []string
	for _, e := range statusEntries(out) {
		if e.code == "??" && isOurLink(t, e.path) {
			links = append(links, e.path)
			continue
		}
		dirty = append(dirty, e.path)
	}
	if len(dirty) > 0 {
		return true, describeDirty(dirty), nil
	}

	// git counts a link to a folder as an untracked file and would refuse
	// the tree; they are ours, so they go first.
	var removed []string
	for _, rel := range links {
		if err := os.Remove(filepath.Join(t.Path, filepath.FromSlash(rel))); err == nil {
			removed = append(removed, rel)
		}
	}
	// Run from the common dir: t.Repo may have moved, and the tree itself
	// is what is being removed.
	if _, err := runGit(ctx, common, "worktree", "remove", "--", t.Path); err != nil {
		for _, rel := range removed {
			_ = os.Symlink(filepath.Join(t.Repo, filepath.FromSlash(rel)), filepath.Join(t.Path, filepath.FromSlash(rel)))
		}
		return false, "", err
	}
	m.prune(ctx, common)
	// The location folder goes when its last tree does; Remove fails on a
	// folder that still holds anything, which is the point.
	m.dropLocation(filepath.Dir(t.Path))
	return false, "", nil
}

func (m *Manager) prune(ctx context.Context, dir string) {
	if _, err := runGit(ctx, dir, "worktree", "prune"); err != nil {
		m.log.Warn("worktree: prune failed", "dir", dir, "err", err)
	}
}

type statusEntry struct{ code, path string }

// statusEntries parses "git status --porcelain=v1 -z": "XY path" entries,
// where a rename or copy is followed by an entry holding its old path.
func statusEntries(out string) []statusEntry {
	var res []statusEntry
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		e := statusEntry{code: f[:2], path: f[3:]}
		res = append(res, e)
		if strings.ContainsAny(e.code, "RC") {
			i++ // the old path
		}
	}
	return res
}

// isOurLink reports whether the untracked path rel of t is a link Create
// made for SymlinkFolders: a symlink to the same path in t.Repo.
func isOurLink(t *Tree, rel string) bool {
	if t.Repo == "" {
		return false
	}
	rel = strings.TrimSuffix(rel, "/")
	p := filepath.Join(t.Path, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return false
	}
	target, err := os.Readlink(p)
	return err == nil && target == filepath.Join(t.Repo, filepath.FromSlash(rel))
}

func describeDirty(paths []string) string {
	const show = 5
	list := paths
	if len(list) > show {
		list = list[:show]
	}
	s := fmt.Sprintf("it has uncommitted work in %d path", len(paths))
	if len(paths) != 1 {
		s += "s"
	}
	s += ": " + strings.Join(list, ", ")
	if len(paths) > show {
		s += ", ..."
	}
	return s
}

func samePath(a, b string) bool {
	ra, err := filepath.EvalSymlinks(a)
	if err != nil {
		ra = a
	}
	rb, err := filepath.EvalSymlinks(b)
	if err != nil {
		rb = b
	}
	return filepath.Clean(ra) == filepath.Clean(rb)
}
