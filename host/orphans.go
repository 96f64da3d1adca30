package host

import (
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/ahpd/ahpd/host/session"
)

// Trees a crash left.
//
// A worktree session is stored before its tree is made, and its tree is
// recorded once made: a crash in between leaves a tree (or its branch, or
// its reserved folder) that no record holds, and the session, on its next
// send, makes another. The worktree manager claims each tree it makes
// until the host settles it, right after the record holding it is written
// (moveInto); a claim nobody works on any more is swept: the tree, folder
// and branch it names are taken away, unless a record holds the tree (the
// crash came between the record and the settling), which is kept.
//
// The host sweeps at start, in the background, the repositories of its
// stored worktree sessions, so that what a crash left goes even if the
// session never sends again; and each tree it makes sweeps its
// repository's location first. Its claims name the host's state directory
// as their keeper: the claims of another host (another state directory)
// are left for it, since only its records can tell which of its trees are
// recorded. A memory store keeps no records, so its claims name no keeper
// and any host sweeps them.

// treeOwner is the keeper of records the host's claims name: its state
// directory for the file store, none for memory.
func treeOwner(opts Options) string {
	if opts.Sessions == "memory" {
		return ""
	}
	if abs, err := filepath.Abs(opts.StateDir); err == nil {
		return abs
	}
	return opts.StateDir
}

// treeRecorded reports whether a record the host holds, or one it could
// read but not restore, holds the tree at path.
func (h *Host) treeRecorded(path string) bool {
	path = filepath.Clean(path)
	h.mu.Lock()
	list := make([]*session.Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		list = append(list, s)
	}
	unrestored := h.unrestoredTrees[path]
	h.mu.Unlock()
	if unrestored {
		return true
	}
	for _, s := range list {
		if t := s.Tree(); t != nil && filepath.Clean(t.Path) == path {
			return true
		}
	}
	return false
}

// sweepTrees sweeps, in the background, the repositories of the stored
// sessions that make or have a tree. Called once the sessions are loaded.
func (h *Host) sweepTrees() {
	seen := map[string]bool{}
	var dirs []string
	for _, s := range h.sessionList() {
		dir := s.SweepDir()
		if dir != "" && !seen[dir] {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for _, dir := range dirs {
			n, err := h.trees.Sweep(h.ctx, dir)
			switch {
			case h.ctx.Err() != nil:
				return
			case errors.Is(err, fs.ErrNotExist) && n == 0:
				h.log.Debug("no repository to sweep for unfinished worktrees", "dir", dir)
			case err != nil:
				h.log.Warn("could not sweep a repository for unfinished worktrees", "dir", dir, "err", err)
			}
		}
	}()
}
